"""Redaction (pytest_ragmetrics.tools.redact) on generated personal data, and on ordinary questions.

Each positive property writes one piece of personal data the way people do (phone numbers of many
regions formatted by the phonenumbers library with random separators, e-mail addresses with local
parts of every character RFC 5322 allows and quoted ones, IPv4 and IPv6 addresses formatted by
``ipaddress``, MAC addresses, Luhn-valid card numbers and social security numbers with random
separators: runs of 1 to 6 characters of whitespace, punctuation, symbols and every dash-like
character, ``ー`` typed as a dash included, mixed), maybe with invisible
characters inside, in a question of words without digits; after redaction, its digits (or its
address) must be gone and a placeholder there. The negative properties write questions with the
numbers questions hold (small counts, years, versions, decimals, percentages, prices, dates, times)
and lists of numbers written as lists are (``512, 64, 2048``), and expect them unchanged.

Hypothesis runs without its pytest plugin here: every test gives its own ``@settings``.
"""

from __future__ import annotations

import ipaddress
import re
import sys
import unicodedata

import phonenumbers
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from phonenumbers import PhoneNumberFormat, PhoneNumberType

from pytest_ragmetrics.tools.redact import PHONE_REGIONS, PLACEHOLDERS, redact

SETTINGS = settings(max_examples=150, deadline=None, database=None, derandomize=True)

WORDS = ["please", "call", "me", "at", "about", "my", "order", "the", "refund", "why", "is", "search", "slow",
         "contact", "reach", "support", "tomorrow", "bitte", "llamar", "ligue", "звоните", "电话", "連絡", "or",
         "and", "for", "account", "login", "reset", "password", "host", "server", "device", "card", "ssn"]
INVISIBLE = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad", "\u2800", "\u3164", "\ufe0f", "\u180b"]
SEPARATORS = [" ", "-", ".", "  ", "--", " - ", ". ", "-.", "\u00a0"]
#: Every dash and hyphen Unicode has (category Pd: the hyphen, the non-breaking hyphen, the en and em
#: dashes, the full-width hyphen-minus...) and the minus sign.
DASHES = [chr(c) for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) == "Pd"] + ["\u2212"]
#: Other punctuation and symbols people put between groups of digits.
PUNCTUATION = ["/", "_", ",", ":", "\u00b7", ";", "|", "\u2022", "\\", "'", "~", "*", "+", "#"]
#: Dash-like characters that are not in category Pd: minus signs (the superscript and subscript ones too),
#: the modifier letter minus sign, the hyphen bullet, the heavy minus sign, horizontal lines, and letters
#: drawn as a dash and typed as one: the katakana prolonged sound mark (full and half width) and the
#: Hangul vowel eu (compatibility and half width).
DASH_LIKE = [*DASHES, "\u207b", "\u208b", "\u02d7", "\u2043", "\u2796", "\u23af", "\u2500", "\u2501",
             "\u30fc", "\uff70", "\u3161", "\uffda"]
#: Characters of each class that may stand between groups of digits, none a letter or a digit (but the
#: dash-like letters above): whitespace, punctuation (full-width and CJK forms too), symbols, dashes.
SEPARATOR_CLASSES = {
    "whitespace": [" ", "\t", "\u00a0", "\u2009", "\u202f", "\u3000"],
    "punctuation": [".", ",", ":", ";", "/", "_", "\\", "'", '"', "(", ")", "[", "]", "!", "?", "\u00b7", "\u2026",
                    "\u2022", "\u3001", "\u3002", "\u30fb", "\uff0c", "\uff1a", "\u00a7", "\u00b6", "\u2027"],
    "symbols": ["|", "~", "*", "+", "#", "=", "^", "`", "<", ">", "&", "%", "$", "\u00b0", "\u2192", "\u2713",
                "\u00a9", "\u00d7"],
    "dash-like": DASH_LIKE,
}


def is_list_separator(gap: str) -> bool:
    """A comma, semicolon or slash with a space after it: how lists of numbers are written (``512, 64,
    2048``, ``128 / 64``), which redaction reads as a list, not as the groups of one number."""
    return re.search(r"[,;/]\s", unicodedata.normalize("NFKC", gap)) is not None


#: Separators between the groups of a card number or an SSN: one to three characters, each a space, a
#: dot, any dash, or other punctuation, doubled or mixed; never a list's separator.
ANY_SEPARATOR = st.lists(st.sampled_from([" ", ".", "\u00a0", *DASHES, *PUNCTUATION]), min_size=1, max_size=3).map(
    "".join).filter(lambda gap: not is_list_separator(gap))


def separator_runs(max_size: int = 6) -> st.SearchStrategy[str]:
    """Runs of 1 to ``max_size`` characters, each from any class of SEPARATOR_CLASSES (mixed), that are
    not a list's separator and read as 8 characters at most (``…`` reads as three dots)."""
    char = st.one_of(*(st.sampled_from(chars) for chars in SEPARATOR_CLASSES.values()))
    return st.lists(char, min_size=1, max_size=max_size).map("".join).filter(
        lambda gap: not is_list_separator(gap) and len(unicodedata.normalize("NFKC", gap)) <= 8)


def test_the_dash_like_characters_include_those_outside_category_pd() -> None:
    named = "\u30fc\u2015\u2e3a\u2e3b\ufe58\ufe63\uff0d\u02d7\u2043\u1806\u2212"
    assert set(named) <= set(DASH_LIKE)
    assert [ch for ch in named if unicodedata.category(ch) != "Pd"] == ["\u30fc", "\u02d7", "\u2043", "\u2212"]


def digits_of(text: str) -> str:
    return re.sub(r"\D", "", text)


@st.composite
def sentence_around(draw: st.DrawFn, piece: str) -> str:
    """``piece`` in a question of words without digits, maybe with invisible characters inside it."""
    if draw(st.booleans()):
        chars = list(piece)
        for _ in range(draw(st.integers(1, 3))):
            chars.insert(draw(st.integers(1, max(1, len(chars) - 1))), draw(st.sampled_from(INVISIBLE)))
        piece = "".join(chars)
    before = draw(st.lists(st.sampled_from(WORDS), max_size=5))
    after = draw(st.lists(st.sampled_from(WORDS), max_size=5))
    return " ".join([*before, piece, *after])


def assert_gone(text: str, secret_digits: str, placeholders: tuple[str, ...]) -> None:
    out = redact(text)
    assert secret_digits not in digits_of(out), (text, out)
    assert any(p in out for p in placeholders), (text, out)


# ------------------------------------------------------------------------------ phones

#: Every region phonenumbers knows, for numbers with + or 00; national forms for the regions redaction knows.
ALL_REGIONS = sorted(phonenumbers.SUPPORTED_REGIONS)
TYPES = [PhoneNumberType.MOBILE, PhoneNumberType.FIXED_LINE]


#: Separators phone numbers are written with: spaces, dots, any dash, slashes, underscores, middle dots.
PHONE_SEPARATORS = [*SEPARATORS, *DASHES, "/", "_", "__", "\u00b7", " / ", "_-", "\u2022", "|"]


def reseparated(draw: st.DrawFn, formatted: str, separators: list[str] = SEPARATORS) -> str:
    """The formatted number with each separator between its groups drawn anew (doubled, mixed, or kept)."""
    return re.sub(r"(?<=[\d)])[ \-.]+(?=[\d(])",
                  lambda m: draw(st.sampled_from([m.group(), *separators])), formatted)


@st.composite
def phone_numbers(draw: st.DrawFn) -> tuple[str, str]:
    """(a number as written, its national significant number): a region's example number with its
    last digits redrawn while it stays valid, formatted national, international or E.164, with
    random separators, and ``00`` for ``+`` now and then."""
    national = draw(st.booleans())
    region = draw(st.sampled_from(PHONE_REGIONS if national else ALL_REGIONS))
    number = None
    for kind in draw(st.permutations(TYPES)):
        number = phonenumbers.example_number_for_type(region, kind)
        if number is not None:
            break
    if number is None:  # a region with no example of either type: a region that has one
        region, number = "DE", phonenumbers.example_number_for_type("DE", PhoneNumberType.MOBILE)
    nsn = phonenumbers.national_significant_number(number)
    tail = draw(st.text("0123456789", min_size=3, max_size=3))
    redrawn = phonenumbers.parse(f"+{number.country_code}{nsn[:-3]}{tail}")
    if phonenumbers.is_valid_number(redrawn):
        number = redrawn
    nsn = phonenumbers.national_significant_number(number)
    if national:
        written = reseparated(draw, phonenumbers.format_number(number, PhoneNumberFormat.NATIONAL))
    else:
        fmt = draw(st.sampled_from([PhoneNumberFormat.INTERNATIONAL, PhoneNumberFormat.E164]))
        written = reseparated(draw, phonenumbers.format_number(number, fmt), PHONE_SEPARATORS)
        if draw(st.booleans()):
            written = "00" + written[1:]
    return written, nsn


@given(st.data())
@SETTINGS
def test_generated_phone_numbers_of_many_regions_are_redacted(data: st.DataObject) -> None:
    written, nsn = data.draw(phone_numbers())
    text = data.draw(sentence_around(written))
    assert_gone(text, nsn, tuple(PLACEHOLDERS.values()))


@given(st.sampled_from(ALL_REGIONS), st.sampled_from(["+", "00"]), st.sampled_from(PHONE_SEPARATORS))
@settings(max_examples=300, deadline=None, database=None, derandomize=True)
def test_every_countrys_international_numbers_are_redacted_with_any_separator(region: str, prefix: str,
                                                                              separator: str) -> None:
    number = next((n for kind in TYPES if (n := phonenumbers.example_number_for_type(region, kind)) is not None), None)
    if number is None:
        return
    written = re.sub(r"(?<=\d)[ \-]+(?=\d)", separator,
                     phonenumbers.format_number(number, PhoneNumberFormat.INTERNATIONAL))
    assert_gone(f"call {prefix}{written[1:]} now", phonenumbers.national_significant_number(number),
                tuple(PLACEHOLDERS.values()))


# ----------------------------------------------------------------------------- e-mail

LOCAL = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._%+-"
LABEL = st.text("abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=12)
#: What an unquoted local part may hold (RFC 5322's atext), and a quoted one (qtext and the space; a
#: backslash escapes any character).
ATEXT = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#$%&'*+-/=?^_`{|}~"
QTEXT = "abcdefghijklmnopqrstuvwxyz0123456789 !#$%&'()*+,-./:;<=>?@[]^_`{|}~"


@st.composite
def email_addresses(draw: st.DrawFn) -> tuple[str, str, str]:
    """(the address as written, its local part, its domain): local parts of up to 64 characters and past
    them, quoted ones, spaces around the @, a full-width @."""
    local = draw(st.text(LOCAL, min_size=1, max_size=90).filter(lambda s: s[0].isalnum()))
    if draw(st.booleans()):
        local = '"' + draw(st.text("abcdefghij klmnop", min_size=1, max_size=20)).strip() + 'x"'
    domain = ".".join(draw(st.lists(LABEL, min_size=1, max_size=3))) + "." + draw(
        st.sampled_from(["com", "de", "co.uk", "org", "io", "info"]))
    at = draw(st.sampled_from(["@", " @ ", "@ ", "  @  ", "＠"]))
    return f"{local}{at}{domain}", local, domain


@st.composite
def rfc_local_parts(draw: st.DrawFn) -> str:
    """A local part RFC 5322 allows: dot-separated atoms of any atext characters (``o'brien``,
    ``jane{smith}``, ``a!b#c``), or a quoted string of any printable characters, ``@`` and spaces
    included, with backslash escapes (``"john \\"jd\\" doe"``)."""
    if draw(st.booleans()):
        return ".".join(draw(st.lists(st.text(ATEXT, min_size=1, max_size=12), min_size=1, max_size=3)))
    pieces = draw(st.lists(st.one_of(st.text(QTEXT, min_size=1, max_size=8),
                                     st.sampled_from(['\\"', "\\\\", "\\a"])), min_size=1, max_size=5))
    return '"' + "".join(pieces)[:60] + '"'


@given(st.data())
@SETTINGS
def test_every_local_part_rfc_5322_allows_goes_whole(data: st.DataObject) -> None:
    """The whole address goes, nothing left of its local part (``o'[email]`` was the bug), and the rest of
    the question stays; with invisible characters (a blank Braille pattern, a zero-width space) in the
    domain too."""
    local = data.draw(rfc_local_parts())
    domain = ".".join(data.draw(st.lists(LABEL, min_size=1, max_size=3))) + "." + data.draw(
        st.sampled_from(["com", "de", "co.uk", "org", "ie", "example"]))
    if data.draw(st.booleans()):
        at = data.draw(st.integers(1, len(domain) - 1))
        domain = domain[:at] + data.draw(st.sampled_from(INVISIBLE)) + domain[at:]
    written = f"{local}@{domain}"
    before = " ".join(data.draw(st.lists(st.sampled_from(WORDS), max_size=4)))
    after = " ".join(data.draw(st.lists(st.sampled_from(WORDS), max_size=4)))
    text = f"{before} {written} {after}"
    assert redact(text) == f"{before} [email] {after}", written


@given(st.data())
@SETTINGS
def test_generated_email_addresses_in_odd_forms_are_redacted(data: st.DataObject) -> None:
    written, local, domain = data.draw(email_addresses())
    out = redact(data.draw(sentence_around(written)))
    assert domain not in out and "@" not in out and "＠" not in out, (written, out)
    assert local.strip('"') not in out.split(), (written, out)
    assert "[email]" in out


#: The brackets ``at`` and ``dot`` are written out in, and none (the bare word between spaces).
BRACKETS = ["[]", "()", "{}", "<>", ""]
#: Domain labels with hyphens inside (``my-shop``) and punycode ones (``xn--mller-kva``).
HYPHENATED_LABEL = st.from_regex(r"(?:xn--)?[a-z0-9](?:[a-z0-9-]{0,10}[a-z0-9])?", fullmatch=True)
#: Top-level domains: letters, or punycode (``xn--p1ai``, Russia's ``.рф``).
TLD = st.one_of(st.sampled_from(["com", "org", "de", "info", "io"]),
                st.from_regex(r"xn--[a-z0-9]{2,8}(?:-[a-z0-9]{1,4})?", fullmatch=True))


@st.composite
def spelled_out(draw: st.DrawFn, word: str) -> tuple[str, bool]:
    """(``word`` written out for ``@`` or ``.``: in any case, in one of BRACKETS with 0 to 2 spaces or
    tabs around and inside, or bare between 1 or 2; whether it is bare)."""
    pair = draw(st.sampled_from(BRACKETS))
    cased = "".join(draw(st.sampled_from([ch, ch.upper()])) for ch in word)
    if not pair:
        spaces = st.sampled_from([" ", "  ", "\t"])
        return draw(spaces) + cased + draw(spaces), True
    spaces = st.sampled_from(["", " ", "  ", "\t"])
    return draw(spaces) + pair[0] + draw(spaces) + cased + draw(spaces) + pair[1] + draw(spaces), False


@st.composite
def obfuscated_email_addresses(draw: st.DrawFn) -> str:
    """An address with ``at`` and ``dot`` written out in every bracket pair or none, each word in its own,
    or a plain ``@`` or ``.`` among them; a bare `` at `` only with a ``dot`` written out too (``log in
    at portal.example.com`` names a site); labels with hyphens, punycode top-level domains."""
    local = draw(st.from_regex(r"[a-z0-9](?:[a-z0-9._+-]{0,14}[a-z0-9])?", fullmatch=True))
    at, bare_at = draw(st.one_of(spelled_out("at"), st.just(("@", False))))
    labels = [*draw(st.lists(HYPHENATED_LABEL, min_size=1, max_size=3)), draw(TLD)]
    dots = [draw(st.one_of(spelled_out("dot"), st.just((".", False))))[0] for _ in labels[1:]]
    if bare_at and all(dot == "." for dot in dots):
        dots[draw(st.integers(0, len(dots) - 1))] = draw(spelled_out("dot"))[0]
    domain = labels[0] + "".join(dot + label for dot, label in zip(dots, labels[1:]))
    return f"{local}{at}{domain}"


@given(st.data())
@settings(max_examples=300, deadline=None, database=None, derandomize=True)
def test_addresses_with_at_and_dot_written_out_in_any_brackets_go_whole(data: st.DataObject) -> None:
    written = data.draw(obfuscated_email_addresses())
    before = " ".join(data.draw(st.lists(st.sampled_from(WORDS), max_size=4)))
    after = " ".join(data.draw(st.lists(st.sampled_from(WORDS), max_size=4)))
    assert redact(f"{before} {written} {after}") == f"{before} [email] {after}", written


@given(st.data())
@SETTINGS
def test_hyphenated_and_punycode_domains_go_whole(data: st.DataObject) -> None:
    local = data.draw(st.text(ATEXT, min_size=1, max_size=12))
    domain = ".".join([*data.draw(st.lists(HYPHENATED_LABEL, min_size=1, max_size=3)), data.draw(TLD)])
    assert redact(f"mail {local}@{domain} now") == "mail [email] now", f"{local}@{domain}"


# -------------------------------------------------------------------------- addresses


@st.composite
def ip_addresses(draw: st.DrawFn) -> tuple[str, str]:
    """(the address as written, its exploded form): IPv4 (maybe with a port), IPv6 exploded or compressed,
    with a zone id, IPv4-mapped, in brackets with a port."""
    if draw(st.booleans()):
        v4 = ipaddress.IPv4Address(draw(st.integers(0, 2**32 - 1)))
        port = draw(st.sampled_from(["", ":80", ":8080", ":65535"]))
        return f"{v4}{port}", str(v4)
    form = draw(st.sampled_from(["exploded", "compressed", "zone", "mapped", "bracketed"]))
    if form == "mapped":
        v4 = ipaddress.IPv4Address(draw(st.integers(0, 2**32 - 1)))
        address = ipaddress.IPv6Address(f"::ffff:{v4}")
        return f"::ffff:{v4}", address.exploded
    address = ipaddress.IPv6Address(draw(st.integers(2**64, 2**128 - 1)))
    written = address.exploded if form == "exploded" else address.compressed
    if form == "zone":
        written += draw(st.sampled_from(["%eth0", "%1", "%en0"]))
    if form == "bracketed":
        written = f"[{written}]:{draw(st.integers(1, 65535))}"
    return written, address.exploded


@given(st.data())
@SETTINGS
def test_generated_ip_addresses_are_redacted(data: st.DataObject) -> None:
    written, exploded = data.draw(ip_addresses())
    out = redact(data.draw(sentence_around(written)))
    hexdigits = re.sub(r"[^0-9a-f]", "", out.lower().replace("[ip]", ""))
    assert exploded.replace(":", "").replace(".", "")[-8:] not in hexdigits, (written, out)
    assert "[ip]" in out


@st.composite
def mac_addresses(draw: st.DrawFn) -> tuple[str, str]:
    octets = [draw(st.integers(0, 255)) for _ in range(6)]
    hexes = "".join(f"{o:02x}" for o in octets)
    form = draw(st.sampled_from([":", "-", "cisco"]))
    written = (".".join(hexes[i:i + 4] for i in (0, 4, 8)) if form == "cisco"
               else form.join(hexes[i:i + 2] for i in range(0, 12, 2)))
    return (written.upper() if draw(st.booleans()) else written), hexes


@given(st.data())
@SETTINGS
def test_generated_mac_addresses_are_redacted(data: st.DataObject) -> None:
    written, hexes = data.draw(mac_addresses())
    out = redact(data.draw(sentence_around(written)))
    assert hexes not in re.sub(r"[^0-9a-f]", "", out.lower()), (written, out)
    assert "[mac]" in out


# ---------------------------------------------------------------------- cards and SSNs


def luhn_completed(body: str) -> str:
    total = 0
    for i, ch in enumerate(reversed(body)):
        d = int(ch)
        if i % 2 == 0:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return body + str(-total % 10)


@st.composite
def card_numbers(draw: st.DrawFn, separators: st.SearchStrategy[str] | None = None) -> tuple[str, str]:
    """(a Luhn-valid card number in its issuer's groups with random separators, its digits)."""
    prefix, length, groups = draw(st.sampled_from([
        ("4", 16, (4, 4, 4, 4)), ("51", 16, (4, 4, 4, 4)), ("55", 16, (4, 4, 4, 4)), ("2221", 16, (4, 4, 4, 4)),
        ("6011", 16, (4, 4, 4, 4)), ("34", 15, (4, 6, 5)), ("37", 15, (4, 6, 5)), ("36", 14, (4, 6, 4)),
        ("4", 19, (4, 4, 4, 4, 3)), ("62", 19, (4, 4, 4, 4, 3)), ("35", 16, (4, 4, 4, 4))]))
    body = prefix + draw(st.text("0123456789", min_size=length - len(prefix) - 1,
                                 max_size=length - len(prefix) - 1))
    digits = luhn_completed(body)
    parts, at = [], 0
    for size in groups:
        parts.append(digits[at:at + size])
        at += size
    if separators is None:
        separators = st.one_of(st.sampled_from(SEPARATORS), ANY_SEPARATOR)
    written = parts[0]
    for part in parts[1:]:
        written += draw(separators) + part
    return written, digits


@given(st.data())
@SETTINGS
def test_generated_card_numbers_with_any_separators_are_redacted(data: st.DataObject) -> None:
    written, digits = data.draw(card_numbers())
    assert_gone(data.draw(sentence_around(written)), digits, ("[number]",))


@st.composite
def social_security_numbers(draw: st.DrawFn, separators: st.SearchStrategy[str] | None = None) -> tuple[str, str]:
    area = draw(st.integers(1, 899).filter(lambda n: n != 666))
    group, serial = draw(st.integers(1, 99)), draw(st.integers(1, 9999))
    digits = f"{area:03d}{group:02d}{serial:04d}"
    if separators is None:
        separators = st.one_of(st.sampled_from(SEPARATORS), ANY_SEPARATOR)
    written = f"{area:03d}{draw(separators)}{group:02d}{draw(separators)}{serial:04d}"
    return written, digits


@given(st.data())
@SETTINGS
def test_generated_social_security_numbers_with_any_separators_are_redacted(data: st.DataObject) -> None:
    written, digits = data.draw(social_security_numbers())
    assert_gone(data.draw(sentence_around(written)), digits, ("[id]",))


@given(st.data())
@settings(max_examples=300, deadline=None, database=None, derandomize=True)
def test_separator_runs_of_any_class_join_the_groups_of_a_card_number(data: st.DataObject) -> None:
    """Runs of 1 to 6 whitespace, punctuation, symbol and dash-like characters, mixed, between a card's
    groups (``4111 -- 1111``, ``4111ー1111``): the number goes, whatever its placeholder (``4111::1111:…``
    is a valid IPv6 address, and goes as ``[ip]``)."""
    written, digits = data.draw(card_numbers(separator_runs()))
    assert_gone(data.draw(sentence_around(written)), digits, tuple(PLACEHOLDERS.values()))


@given(st.data())
@settings(max_examples=300, deadline=None, database=None, derandomize=True)
def test_separator_runs_of_any_class_join_the_groups_of_an_ssn(data: st.DataObject) -> None:
    written, digits = data.draw(social_security_numbers(separator_runs()))
    assert_gone(data.draw(sentence_around(written)), digits, tuple(PLACEHOLDERS.values()))


@pytest.mark.parametrize("dash", DASH_LIKE, ids=[f"U+{ord(ch):04X}" for ch in DASH_LIKE])
def test_every_dash_like_character_joins_the_groups_of_an_ssn_and_a_card(dash: str) -> None:
    assert redact(f"ssn 123{dash}45{dash}6789 lost") == "ssn [id] lost"
    assert redact(f"card 4111{dash}1111{dash}1111{dash}1111 lost") == "card [number] lost"


# ---------------------------------------------------------------------- ordinary numbers


@st.composite
def ordinary_numbers(draw: st.DrawFn) -> str:
    """A number of the kinds questions hold: a count, a year, a version, a decimal, a percentage, a
    price, a date, a time, a metric at a cutoff, an HTTP status."""
    kind = draw(st.integers(0, 11))
    n = draw(st.integers(0, 999))
    year = draw(st.integers(1900, 2099))
    if kind == 0:
        return str(n)
    if kind == 1:
        return str(year)
    if kind == 2:
        parts = draw(st.lists(st.integers(0, 40), min_size=2, max_size=3))
        return ".".join(map(str, parts))
    if kind == 3:
        return f"{draw(st.integers(0, 99))}.{draw(st.integers(0, 99)):02d}"
    if kind == 4:
        return f"{draw(st.integers(0, 100))}%"
    if kind == 5:
        return f"${draw(st.integers(1, 99_999)):,}.{draw(st.integers(0, 99)):02d}"
    if kind == 6:
        return f"{year}-{draw(st.integers(1, 12)):02d}-{draw(st.integers(1, 28)):02d}"
    if kind == 7:
        return f"{draw(st.integers(0, 23))}:{draw(st.integers(0, 59)):02d}"
    if kind == 8:
        return f"{draw(st.sampled_from(['recall', 'ndcg', 'mrr', 'precision']))}@{draw(st.integers(1, 100))}"
    if kind == 9:
        return f"python 3.{draw(st.integers(6, 14))}"
    if kind == 10:
        return f"version {'.'.join(map(str, draw(st.lists(st.integers(0, 300), min_size=2, max_size=4))))}"
    return f"{draw(st.integers(1, 999)):,} {draw(st.sampled_from(['items', 'users', 'ms', 'GB', 'queries']))}"


@st.composite
def ordinary_questions(draw: st.DrawFn) -> str:
    """Words and ordinary numbers, a word between any two numbers."""
    pieces: list[str] = []
    for _ in range(draw(st.integers(1, 5))):
        pieces += draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=4))
        pieces.append(draw(ordinary_numbers()))
    pieces += draw(st.lists(st.sampled_from(WORDS), max_size=3))
    return " ".join(pieces)


@given(ordinary_questions())
@settings(max_examples=400, deadline=None, database=None, derandomize=True)
def test_ordinary_questions_keep_their_numbers(text: str) -> None:
    assert redact(text) == text


@st.composite
def number_lists(draw: st.DrawFn) -> str:
    """A list of numbers shaped like the groups of an SSN (3, 2 and 4 digits: chunk sizes ``512, 64,
    2048``) or of a card (four of 4 digits: ports ``3306, 5432, 6379, 8080``), written as lists are."""
    if draw(st.booleans()):
        numbers = [draw(st.integers(100, 899)), draw(st.integers(10, 99)), draw(st.integers(1000, 9999))]
    else:
        numbers = [draw(st.integers(1000, 9999)) for _ in range(4)]
    separator = draw(st.sampled_from([", ", "; ", " / ", "/ ", ",  ", ";\u00a0", "\uff0c "]))
    words = draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=3))
    return " ".join(words) + " " + separator.join(map(str, numbers))


@given(number_lists())
@settings(max_examples=300, deadline=None, database=None, derandomize=True)
def test_lists_of_numbers_keep_their_numbers(text: str) -> None:
    assert redact(text) == text


@pytest.mark.parametrize("text", ["recall@10 fell from 0.95 to 0.80", "error 404", "python 3.11",
                                  "I bought 3 items in 2024"])
def test_the_questions_named_in_the_docs_keep_their_text(text: str) -> None:
    assert redact(text) == text
