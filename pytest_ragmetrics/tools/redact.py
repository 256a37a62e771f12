"""Personal data in a question, found and replaced by placeholders: what ``ragmetrics sample`` (and
``ragmetrics shadow`` on a raw log) does to every logged question.

:func:`redact` looks at the question's Unicode NFKC form, with invisible characters (zero-width
spaces and joiners, the soft hyphen, word joiners, byte-order marks, direction marks and other
format characters, variation selectors, Hangul fillers, the blank Braille pattern) left out, every
dash-like character read as ``-`` (Unicode's dashes and hyphens, category Pd; minus signs, the hyphen
bullet and other dash-like symbols; and ``ー`` or ``ㅡ`` typed as a dash, where it does not follow a
letter) and every decimal digit of any script as an ASCII digit, so that ``１３８…``, ``＠``,
``123–45–6789``, ``123ー45ー6789`` or a zero-width space inside a number changes nothing; what it
finds is replaced in the question as written, invisible characters inside it included, and
everything else stays as it was. The kinds, in the order they are looked for (a span one kind took
is not looked at again):

- ``email`` -> ``[email]``: an address in any script, with ``＠`` or ``。``, spaces on both
  sides of the ``@`` or after it (not only before it: ``thanks @john.smith`` is a mention),
  ``at`` and ``dot`` written out in any case, each in brackets of one kind (``[] () {} <>``) or
  bare between spaces (``john{at}example{dot}com``, ``john at example dot com``; but a bare ``at``
  before a domain whose dots are all written as dots names a site: ``log in at portal.example.com``),
  a local part of any length and of every character RFC 5322 allows (``o'brien``, ``jane{smith}``,
  ``a!b#c``), a quoted one (``"john \\"jd\\" doe"@…``, ``"a@b"@…``), a domain of labels with
  hyphens and a punycode top-level domain (``example.xn--p1ai``), or an IP literal as its domain;
  the whole address, never a part of it;
- ``mac`` -> ``[mac]``: a MAC address in six groups of two hex digits (``:`` or ``-``) or Cisco's
  three groups of four (``0012.3456.789a``);
- ``ip`` -> ``[ip]``: an IPv6 address (full, compressed, with a zone id, IPv4-mapped, in brackets
  with a port; checked with :mod:`ipaddress`; a short one of letters only, ``dead::beef``, is taken
  for words) and an IPv4 address (with a port or a prefix length; not after ``version``,
  ``release``, ``build`` or ``v``);
- ``id_card`` -> ``[id]``: a Chinese resident ID (18 characters, in 6-8-4 groups too) and a US
  social security number in 3-2-4 groups joined by any separators: a run of up to 8 characters
  that are neither letters nor digits (whitespace, punctuation, symbols, any dash-like character,
  doubled or mixed: ``123 -- 45 -- 6789``, ``078/05/1120``), but not a comma, semicolon or slash
  followed by a space, which is how lists are written (``512, 64, 2048``);
- ``digits`` -> ``[number]``: a card number in groups (4-4-4-4 and more, Amex 4-6-5), or 13 to 19
  digits in other groups of 3 or more joined by the same separators, that pass the Luhn check and
  start as a card does (2 to 6, not 20); an IBAN;
- ``phone`` -> ``[phone]``: a phone number, found by the ``phonenumbers`` library: any country's
  number written with ``+`` or the ``00`` prefix, and national numbers of the regions in
  :data:`PHONE_REGIONS`, accepted when they are valid there, grouped as that country groups them
  and not inside a decimal, a price, a time or a date; its groups joined by what the library
  reads (spaces, dots, dashes, slashes, brackets) or by other punctuation and symbols it does not
  (``_``, ``·``, ``•``, ``|``), but not ``,`` ``:`` or ``;``, which join the parts of decimals,
  times and lists; then Chinese mobiles and landlines, North American, British and French forms
  by pattern;
- ``digits`` again: any run of 8 digits or more.

Names, street addresses, passport and licence numbers are not recognised. Every pattern's
repetitions are bounded, the walks outside them (a local part back from its ``@``) look at each
character a bounded number of times, and the phone library sees only short windows around runs of
digits, so a line is redacted in time linear in its length. The library's work on one line is
capped: a line made of hundreds of numbers has the runs of digits left once the cap is reached
replaced as ``[number]`` without a check, so a line is never slow and never let through unlooked-at.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from phonenumbers import PhoneNumberMatch

__all__ = ["PII_KINDS", "PLACEHOLDERS", "PHONE_REGIONS", "redact"]

#: Kinds of personal data replaced, as counted in a draft's ``_meta.redacted`` and the summary.
PII_KINDS = ("email", "id_card", "phone", "digits", "ip", "mac")
#: What each kind is replaced with.
PLACEHOLDERS = {"email": "[email]", "id_card": "[id]", "phone": "[phone]", "digits": "[number]", "ip": "[ip]",
                "mac": "[mac]"}
#: The regions whose national phone numbers (written without ``+`` or ``00``) are recognised, the most
#: common first. A number with ``+`` or ``00`` is recognised whatever its country.
PHONE_REGIONS = ("CN", "US", "GB", "DE", "FR", "IN", "JP", "BR", "AU", "ES", "RU", "NL", "IT", "MX", "KR", "PL",
                 "TR", "ID", "PH", "ZA", "AR", "CH", "SE", "BE", "AT", "PT")

# Every repetition below has an upper bound, and so do the lookarounds: the work at each position of
# a line is bounded, so a line is redacted in time linear in its length (an unbounded ``[...]+@``
# rescanned a long run of letters from each of its positions: 5 s for 40,000 characters).
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_LABEL = r"(?:[^\W_]|-){1,63}"  # a domain label, internationalised domains included
# the last label: letters, or letters then letters, digits and hyphens (a punycode one: xn--p1ai)
_TLD = r"[^\W\d_]{2}(?:(?:[^\W_]|-){0,60}[^\W_])?"


def _spelled(word: str) -> str:
    """``word`` written out for ``@`` or ``.``, in any case: in brackets of one kind, ``[] () {} <>``,
    with or without spaces around (``[at]``, `` ( dot ) ``), or bare between spaces (`` at ``)."""
    pairs = "|".join(rf"\{o}[ \t]{{0,2}}(?i:{word})[ \t]{{0,2}}\{c}" for o, c in ("[]", "()", "{}", "<>"))
    return rf"(?:[ \t]{{0,2}}(?:{pairs})[ \t]{{0,2}}|[ \t]{{1,2}}(?i:{word})[ \t]{{1,2}})"


_DOT = rf"(?:[.\u3002]|{_spelled('dot')})"  # . 。 [dot] (dot) {dot} <dot> " dot "
_SPELLED_DOT = re.compile(_spelled("dot"))
_BARE_AT = re.compile(r"[ \t]{1,2}(?i:at)[ \t]")
# @ with no space, or spaces after it, or on both sides (never "word @name.tld", a mention); [at] (at) ...
_AT = rf"(?:@[ \t]{{0,2}}|[ \t]{{1,2}}@[ \t]{{1,2}}|{_spelled('at')})"
_SEP = "[ .-]"  # what people put between groups of digits (every dash is ``-`` by then: _fold)
# Anything but a letter or a digit of any script (nor a masked span): punctuation, symbols, spaces and
# every dash. A run of up to _GAP_MAX of them between groups of digits joins the groups of an ID or a
# card number,
_ANY = r"(?:[^\w\x00]|_)"
_GAP_MAX = 8
# but not a comma, semicolon or slash followed by a space: how lists are written (512, 64, 2048; 128 / 64)
_GAP_CHAR = rf"(?:(?![,;/]\s){_ANY})"
_ANY_GAP = rf"{_GAP_CHAR}{{1,{_GAP_MAX}}}"
_HEX = "[0-9A-Fa-f]"
_ATEXT = r"!#$%&'*+\-/=?^`{|}~."  # what a local part holds besides letters and digits (RFC 5322's atext, and dots)
_OCTET = r"(?:25[0-5]|2[0-4]\d|[01]?\d?\d)"
_IPV4 = rf"(?:{_OCTET}\.){{3}}{_OCTET}"
_IPV6 = rf"(?:{_HEX}{{0,4}}:){{2,7}}(?:{_IPV4}|{_HEX}{{1,4}})?(?:%[0-9A-Za-z_\-]{{1,32}})?"
_PII = {
    # The @ (or [at]) and the domain; the local part before it is taken by walking back (_local_start),
    # so a local part of any length is caught and nothing is rescanned.
    "email": re.compile(rf"(?<=\w|[{_ATEXT}\"”]){_AT}(?:{_LABEL}(?:{_DOT}{_LABEL}){{0,8}}{_DOT}{_TLD}"
                        rf"|\[{_IPV4}\])"),
    "mac": re.compile(rf"(?<![\w.\-])(?:{_HEX}{{2}}([:\-])(?:{_HEX}{{2}}\1){{4}}{_HEX}{{2}}"
                      rf"|{_HEX}{{4}}\.{_HEX}{{4}}\.{_HEX}{{4}})(?![\w:\-]|\.\w)"),
    # candidates, each checked with ipaddress (_ipv6_ok)
    "ipv6": re.compile(rf"(?<![\w.])(?:\[{_IPV6}\](?::\d{{1,5}})?|{_IPV6})(?![\w:]|\.\d)"),
    "ipv4": re.compile(rf"(?<![\w.]){_IPV4}(?::\d{{1,5}}|/\d{{1,2}})?(?!\w|\.\d)"),
    "id_card": re.compile(
        # a Chinese resident ID: 6 region digits, a birth date, 3 digits and a check digit or X, maybe in groups
        rf"(?<![0-9A-Za-z])[1-9]\d{{5}}{_ANY}{{0,{_GAP_MAX}}}(?:18|19|20)\d{{2}}(?:0[1-9]|1[0-2])"
        rf"(?:0[1-9]|[12]\d|3[01]){_ANY}{{0,{_GAP_MAX}}}\d{{3}}[0-9Xx](?![0-9A-Za-z])"
        # a US social security number (never 000, 666 or 9xx, nor a 00 group or 0000 serial), in 3-2-4 groups
        # joined by any separators (up to 8 characters that are neither letters nor digits: - / _ , : · ...),
        # and not the tail or the head of a longer grouped number (one lookbehind a length: each has one)
        rf"|(?<![\d+$€£¥])" + "".join(rf"(?<!\d{_GAP_CHAR}{{{n}}})" for n in range(1, _GAP_MAX + 1)) +
        rf"(?!000|666|9)\d{{3}}{_ANY_GAP}(?!00)\d{{2}}{_ANY_GAP}(?!0000)\d{{4}}(?!\d)(?![.\-]\d)"),
    # card numbers in groups (4-4-4-4, 4-4-4-4-3, Amex 4-6-5) and IBANs, looked for before phone numbers, which
    # their groups can resemble; then runs of 8 digits or more (one longer than 64 is matched 64 at a
    # time, the pieces joined into one placeholder)
    "cards": re.compile(rf"(?<!\d)(?:\d{{4}}(?:{_SEP}\d{{4}}){{3}}(?:{_SEP}\d{{1,4}})?"
                        rf"|\d{{4}}{_SEP}\d{{6}}{_SEP}\d{{4,5}})(?!\d)"
                        r"|(?<![0-9A-Za-z])[A-Z]{2}\d{2} ?[0-9A-Z]{4}(?: ?\d{4}){2,6}(?: ?\d{1,3})?(?![0-9A-Za-z])"),
    # a group of digits, for card numbers in other groupings (_luhn_cards)
    "digit_group": re.compile(r"(?<!\d)\d{1,19}(?!\d)"),
    # what joins two groups of digits in a phone number (_phone_view)
    "phone_gap": re.compile(rf"(?<=[\d)\]]){_ANY}{{1,3}}(?=[\d(\[])"),
    # the number so far is international: + or 00 and digits, joined by what phone numbers are written with
    "international_before": re.compile(r"(?:\+|(?<!\d)00)\d(?:\d|[^\w\x00,:;=<>%$@#*&!?'\"]|_){0,24}$"),
    # what phone numbers are written with: runs of it holding enough digits go to the phone library
    "phone_run": re.compile(r"[\d +()\[\]./\-~\t\u2010-\u2015\u2212\u223c\u2053]{1,64}"),
    "phone": re.compile(
        r"(?<![\d+])(?<!\d[.,\-])(?:"
        rf"(?:(?:\+|00)?86{_SEP}?)?1[3-9]\d{_SEP}?\d{{4}}{_SEP}?\d{{4}}"  # a Chinese mobile number
        rf"|\+\d{{1,3}}{_SEP}?\(?\d{{1,4}}\)?(?:{_SEP}?\d{{2,4}}){{2,4}}"  # an international number
        rf"|(?:1{_SEP})?(?:\(\d{{3}}\) ?|\d{{3}}{_SEP})\d{{3}}{_SEP}\d{{4}}"  # a North American one
        r"|\(?0\d{2,3}\)?[ -]?\d{7,8}"  # a number with its area code: 010-62345678, (021)61234567
        r"|0\d{2,3}[ -]\d{3,4}[ -]\d{4}"  # in groups: 021-6123 4567, 020 7946 0958
        r"|0\d{4} ?\d{6}"  # a British mobile: 07700 900123
        rf"|0[1-9](?:{_SEP}\d{{2}}){{4}}"  # a French one: 06 12 34 56 78
        r")(?!\d)(?![.\-]\d)"),  # and not inside a date or a version: 1976-07-18 26.14.25
    "digits": re.compile(r"(?<!\d)\d{8,64}|(?<=\d{64})\d{1,64}"),
}

#: What a found span is masked with: no pattern matches it, and it is a boundary to them all.
_MASK = "\x00"
#: Characters that are not format characters (category Cf) yet show nothing: the rest of Unicode's
#: default-ignorable characters (the combining grapheme joiner, Hangul fillers, Khmer inherent vowels,
#: Mongolian and other variation selectors, the reserved ones) and the blank Braille pattern.
_BLANK = frozenset("\u034f\u115f\u1160\u17b4\u17b5\u180b\u180c\u180d\u180f\u2065\u2800\u3164\uffa0"
                   + "".join(map(chr, [*range(0xFE00, 0xFE10), *range(0xFFF0, 0xFFF9), *range(0xE0000, 0xE1000)])))
#: Dash-like characters that are not a category Pd character: the minus sign (and the superscript and
#: subscript ones, by NFKC), the modifier letter minus sign, the hyphen bullet, the heavy minus sign, the
#: horizontal line extension and the light and heavy horizontal box-drawing lines.
_DASHES = frozenset("\u2212\u02d7\u2043\u2796\u23af\u2500\u2501")
#: Letters drawn as a dash and typed as one between numbers: the katakana-hiragana prolonged sound mark
#: (``ー``, and the half-width ``ｰ`` by NFKC) and the Hangul vowel eu (``ㅡ``, and its half-width and
#: conjoining forms). Read as ``-`` unless they follow a letter, where they are letters (``コーヒー``).
_DASH_LETTERS = frozenset("\u30fc\u3161\u1173")
_FOLDED: dict[str, str] = {}


def _invisible(ch: str) -> bool:
    return ch in _BLANK or unicodedata.category(ch) == "Cf"


def _fold(ch: str) -> str:
    """One character as the patterns see it: its NFKC form, with every dash or hyphen (category Pd,
    and the other dash-like characters: _DASHES) as ``-`` and every decimal digit of any script as an
    ASCII digit; empty if it shows nothing."""
    folded = _FOLDED.get(ch)
    if folded is None:
        out = []
        for c in unicodedata.normalize("NFKC", ch):
            if _invisible(c):
                continue
            category = unicodedata.category(c)
            if category == "Pd" or c in _DASHES:
                c = "-"
            elif category == "Nd" and not c.isascii():
                c = str(unicodedata.digit(c))
            out.append(c)
        folded = "".join(out)
        if len(_FOLDED) < 65536:
            _FOLDED[ch] = folded
    return folded


def _normalised(text: str) -> tuple[str, list[int]]:
    """``text`` as the patterns see it (:func:`_fold`: full-width ``＠`` and digits become ``@`` and
    ASCII digits, every dash ``-``, and a letter drawn as a dash, ``ー`` or ``ㅡ``, too unless it
    follows a letter), invisible characters left out, with the index in ``text`` each of its
    characters comes from."""
    if text.isascii():
        return text, list(range(len(text)))
    out: list[str] = []
    origin: list[int] = []
    last = ""
    for i, ch in enumerate(text):
        folded = ch if ch.isascii() else _fold(ch)
        if folded in _DASH_LETTERS and not last.isalpha():
            folded = "-"
        if folded:
            last = folded[-1]
        out.append(folded)
        origin.extend([i] * len(folded))
    return "".join(out), origin


# ----------------------------------------------------------------------------- e-mail

_CJK_CHAR = re.compile(f"[{_CJK}]")
#: a letter or digit of any script but CJK, or what else RFC 5322 allows in a local part unquoted
_LOCAL_CHAR = re.compile(rf"[^\W{_CJK}]|[{_ATEXT}]")
#: Quotes a local part may stand in, and the quotes that may open each.
_OPENING = {'"': '"“”', "”": '"“”', "'": "'"}
#: A quote or brace just before an address that closes just after it encloses the address.
_ENCLOSING = {"'": "'", "`": "`", "{": "}"}


def _quoted_start(folded: str, close: int, floor: int) -> int | None:
    """Where the quoted local part closing at ``close`` opens (64 characters at most inside, not
    before ``floor``; ``\\"`` inside is a quote escaped, not its end), or None."""
    opening = _OPENING[folded[close]]
    low = max(floor, close - 67)
    i = close - 1
    while i >= low:
        if folded[i] in opening:
            escapes = 0
            while i - escapes - 1 >= low and folded[i - escapes - 1] == "\\":
                escapes += 1
            if escapes % 2 == 0:
                return i
        i -= 1
    return None


def _local_start(folded: str, at: int, end: int, floor: int) -> int | None:
    """Where the local part of the address from ``at`` (its ``@``) to ``end`` starts (not before
    ``floor``), or None if there is none: a quoted one back to its opening quote, up to 16 CJK
    characters, or a run of letters, digits and RFC 5322's other characters (``!#$%&'*+-/=?^_`{|}~``
    and dots) of any length, whichever starts first; not a quote or brace enclosing the address."""
    if at <= floor:
        return None
    last = folded[at - 1]
    if _CJK_CHAR.match(last):
        start = at - 1
        while start > max(floor, at - 16) and _CJK_CHAR.match(folded[start - 1]):
            start -= 1
        return start
    starts = []
    if last in _OPENING:  # "a@b.cd"@example.com: the opening quote may be inside an address found already
        quoted = _quoted_start(folded, at - 1, 0)
        if quoted is not None:
            starts.append(quoted)
    start = at
    while start > floor and _LOCAL_CHAR.match(folded[start - 1]):
        start -= 1
    while start < at - 1 and folded[start] in _ENCLOSING and folded[end:end + 1] == _ENCLOSING[folded[start]]:
        start += 1  # 'john@example.com' keeps its quotes
    if start < at:
        starts.append(start)
    return min(starts) if starts else None


def _emails(folded: str) -> list[tuple[int, int]]:
    found: list[tuple[int, int]] = []
    floor = 0
    for m in _PII["email"].finditer(folded):
        if _BARE_AT.match(m.group()) and not _SPELLED_DOT.search(m.group()):
            continue  # "log in at portal.example.com" names a site; "john at example dot com" is an address
        start = _local_start(folded, m.start(), m.end(), floor)
        if start is None:
            continue
        while found and start < found[-1][1]:  # addresses inside a quoted local part: one address
            start = min(start, found.pop()[0])
        found.append((start, m.end()))
        floor = m.end()
    return found


# ------------------------------------------------------------------------- addresses

_MAC_TAIL = re.compile(r"(?:^|\W)[0-9A-Fa-f]{1,4}[:\-]$")


_MORE_DIGITS = re.compile(_ANY_GAP + r"\d")
_DIGITS_BEFORE = re.compile(rf"\d{_ANY_GAP}$")


def _macs(folded: str) -> list[tuple[int, int]]:
    """MAC addresses, not the tail of a longer run of hex groups (``MAC:00:1a:…`` still counts); one of
    digits only, not a part of a longer grouped number either (``4111.1111.1111 1111`` is a card)."""
    return [(m.start(), m.end()) for m in _PII["mac"].finditer(folded)
            if not _MAC_TAIL.search(folded[max(0, m.start() - 6):m.start()])
            and (any(ch in "abcdefABCDEF" for ch in m.group()) or not (
                _MORE_DIGITS.match(folded, m.end())
                or _DIGITS_BEFORE.search(folded[max(0, m.start() - _GAP_MAX - 1):m.start()])))]


def _ipv6_ok(candidate: str) -> bool:
    import ipaddress

    address = candidate
    if address.startswith("["):
        address = address[1:address.index("]")]
    address = address.split("%", 1)[0]
    if not any(ch.isdigit() for ch in address) and len([g for g in address.split(":") if g]) < 4:
        return False  # Add::add, dead::beef: words more often than addresses
    try:
        ipaddress.IPv6Address(address)
    except ValueError:
        return False
    return True


def _ipv6s(folded: str) -> list[tuple[int, int]]:
    return [(m.start(), m.end()) for m in _PII["ipv6"].finditer(folded) if _ipv6_ok(m.group())]


def _ipv4s(folded: str) -> list[tuple[int, int]]:
    """IPv4 addresses, but not four numbers written as a version (``version 1.2.3.4``, ``v 10.0.0.1``)."""
    return [(m.start(), m.end()) for m in _PII["ipv4"].finditer(folded) if not _after_version(folded, m.start())]


# ------------------------------------------------------------------------------ cards

#: Four numbers written as a version are a version, not an address, a card or a phone number.
_VERSION_BEFORE = re.compile(r"(?i)(?:\bversion|\bver\.?|\brelease|\bbuild|\bv)[ \t]{0,2}$")


def _after_version(folded: str, start: int) -> bool:
    return bool(_VERSION_BEFORE.search(folded, max(0, start - 10), start))


def _grouped_cards(folded: str) -> list[tuple[int, int]]:
    """Card numbers in their issuers' groups and IBANs, but not a list of years (``1939 1940 1941 1942``)."""
    return [(m.start(), m.end()) for m in _PII["cards"].finditer(folded)
            if not all(1900 <= int(g) <= 2099 and len(g) == 4 for g in re.findall(r"\d+", m.group()))]



def _luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


_CARD_GAP = re.compile(_ANY_GAP)


def _luhn_cards(folded: str) -> list[tuple[int, int]]:
    """Card numbers in groups of any size and separators the ``cards`` pattern does not know: 13 to 19
    digits in groups of 3 or more (the last group any size) joined by any separators (up to 3
    characters that are neither letters nor digits), an issuer's first digit (2 to 6, and not a year
    2000-2099), passing the Luhn check, and not inside a decimal or after ``+``."""
    groups = [(m.start(), m.end()) for m in _PII["digit_group"].finditer(folded)]
    found: list[tuple[int, int]] = []
    i = 0
    while i < len(groups):
        start = groups[i][0]
        best = None
        if folded[start] in "23456" and not folded.startswith("20", start) and not (
                start and folded[start - 1] == "+") and not (
                start > 1 and folded[start - 1] in ".," and folded[start - 2].isdigit()):
            digits = ""
            j = i
            while j < len(groups):
                if j > i and not _CARD_GAP.fullmatch(folded, groups[j - 1][1], groups[j][0]):
                    break
                digits += folded[groups[j][0]:groups[j][1]]
                if len(digits) > 19:
                    break
                if j > i and len(digits) >= 13 and _luhn(digits):
                    best = j
                if groups[j][1] - groups[j][0] < 3:  # only the last group may be shorter than 3
                    break
                j += 1
        if best is not None and _after_version(folded, start):
            best = None
        if best is not None and re.match(r"[.\-]\d", folded[groups[best][1]:groups[best][1] + 2]):
            best = None  # the head of a date or a version: 264.290.274 1971-04-07
        if best is not None:
            found.append((start, groups[best][1]))
            i = best + 1
        else:
            i += 1
    return found


# ------------------------------------------------------------------------------ phones

#: A date (2026-03-01, 01.03.2026) inside a candidate phone number: it is a date.
_DATE = re.compile(r"(?<!\d)(?:(?:19|20)\d\d([-./])(?:0?[1-9]|1[0-2])\1(?:0?[1-9]|[12]\d|3[01])"
                   r"|(?:0?[1-9]|[12]\d|3[01])([-./])(?:0?[1-9]|1[0-2])\2(?:19|20)\d\d)(?!\d)")
_YEAR = re.compile(r"(?<!\d)(?:19|20)\d\d(?!\d)")
_DECIMAL_START = re.compile(r"0[.,]\d{1,4}(?![.\-/\d])")
#: Context kept on each side of a run of digits for the phone library, so it can tell ``abc8005551234``
#: (no number) and ``1,821.29 1970`` (a price and a year) from a number standing alone.
_CONTEXT = 3
#: A run longer than this is looked at in overlapping windows, each holding any number of half its size.
_WINDOW = 64
#: How many times one line may run the phone library over a window for one region. A question spends a
#: few dozen; a line made of thousands of numbers would spend minutes, so once it is spent, the
#: line's remaining runs of digits are replaced as ``[number]`` unchecked: slow never, open never.
_PHONE_BUDGET = 512
#: Failed parses the library may make in one window for one region.
_PHONE_TRIES = 32
_PHONE_CACHE: dict[tuple[str, int, int], tuple[tuple[int, int], ...]] = {}


#: Between groups of digits, characters that mean something of their own there (a time's ``:``, a
#: decimal's or a list's ``,`` and ``;``, prices, percentages) or that the phone library reads itself.
_PHONE_KEEP = frozenset(".,:;/+@%#*&=$'\"()[]<>!?~-")


def _phone_separator(ch: str) -> bool:
    """Punctuation or a symbol (not a currency sign) that only separates groups of digits: ``_``, ``·``,
    ``•``, ``|``, ``\\`` and the like."""
    category = unicodedata.category(ch)
    return ch not in _PHONE_KEEP and category[0] in "PS" and category != "Sc"


def _phone_view(folded: str) -> str:
    """``folded`` with the separators the phone library does not know (:func:`_phone_separator`) read
    as spaces where they join groups of digits (``+1_212_555_0123``, ``06·12·34·56·78``), and so is
    ``/`` inside a number written with ``+`` or ``00`` (the library takes ``+32/450/00/12/34`` for a
    date); the same length, so a span found in it is the same span in ``folded``."""
    pieces, at = [], 0
    for m in _PII["phone_gap"].finditer(folded):
        gap = m.group()
        slash = "/" in gap and bool(_PII["international_before"].search(folded, max(0, m.start() - 27), m.start()))
        folds = [_phone_separator(ch) or (slash and ch == "/") for ch in gap]
        if any(folds) and all(fold or ch.isspace() or ch in "-./~()[]" for fold, ch in zip(folds, gap)):
            pieces += [folded[at:m.start()], "".join(" " if fold else ch for fold, ch in zip(folds, gap))]
            at = m.end()
    return "".join(pieces) + folded[at:] if pieces else folded


def _phones(folded: str) -> list[tuple[int, int, str]]:
    """Phone numbers found by the phonenumbers library in windows around the runs of digits and
    separators that hold at least 6 digits (``phone``); once the line's budget is spent, those runs
    whole (``digits``). Separators the library does not know are read as spaces (:func:`_phone_view`)."""
    folded = _phone_view(folded)
    runs: list[list[int]] = []
    for m in _PII["phone_run"].finditer(folded):
        if runs and runs[-1][1] == m.start():
            runs[-1][1] = m.end()
        else:
            runs.append([m.start(), m.end()])
    found: list[tuple[int, int, str]] = []
    budget = _PHONE_BUDGET
    for start, end in runs:
        run = folded[start:end]
        if sum(ch.isdigit() for ch in run) < 6 or _DATE.fullmatch(run.strip(" .-/()")):
            continue
        spans: list[tuple[int, int]] = []
        for at in range(start, max(start + 1, end - _WINDOW // 2), _WINDOW // 2):
            low, high = max(0, at - _CONTEXT), min(at + _WINDOW, end)
            key = (folded[low:high + _CONTEXT], at - low, high - low)
            if key not in _PHONE_CACHE:
                if budget <= 0:
                    break
                if len(_PHONE_CACHE) >= 4096:
                    _PHONE_CACHE.clear()
                _PHONE_CACHE[key], spent = _phones_in(*key)
                budget -= spent
            spans += [(low + a, low + b) for a, b in _PHONE_CACHE[key] if not _after_version(folded, low + a)]
        else:
            found += [(a, b, "phone") for a, b in _merged(spans)]
            continue
        digits = [i for i in range(start, end) if folded[i].isdigit()]  # the budget is spent: the whole run
        first = start if folded[start] in "+(" else digits[0]
        found.append((first, digits[-1] + 1, "digits"))
    return found


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if out and start < out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def _phones_in(window: str, first: int, last: int) -> tuple[tuple[tuple[int, int], ...], int]:
    """The phone numbers in a window of text, tried region by region until all the digits of
    ``window[first:last]`` (the window less its context) are taken, and how many regions were tried."""
    from phonenumbers import Leniency, PhoneNumberMatcher

    digits = [i for i in range(first, last) if window[i].isdigit()]
    spans: list[tuple[int, int]] = []
    tried = 0
    for region in PHONE_REGIONS:
        tried += 1
        for m in PhoneNumberMatcher(window, region, leniency=Leniency.VALID, max_tries=_PHONE_TRIES):
            spans += _accepted(window, m, region)
        if spans and all(any(a <= i < b for a, b in spans) for i in digits):
            break
    return tuple(_merged(spans)), tried


def _accepted(window: str, match: PhoneNumberMatch, region: str) -> list[tuple[int, int]]:
    """A valid number's span if it has an international prefix. Else the parts of it that are grouped
    as the country groups its numbers (strict grouping; a number starting with the trunk prefix 0 as
    it was written), of a type a person has (fixed line, mobile, VoIP, personal, toll-free,
    shared-cost or premium-rate: not a pager or a voicemail access code), and neither inside a
    decimal, a time, a price, a date or a metric's cutoff (``@10``), nor holding a date or a list of
    years."""
    import phonenumbers
    from phonenumbers import Leniency, PhoneNumberMatcher

    raw = match.raw_string
    bare = raw.lstrip("([")
    if bare.startswith(("+", "00")):
        return [(match.start, match.end)]
    parts = [(match.start + s.start, s.raw_string, s.number)
             for s in PhoneNumberMatcher(raw, region, leniency=Leniency.STRICT_GROUPING)]
    if not parts and bare.startswith("0"):
        parts = [(match.start, raw, match.number)]
    out = []
    for a, text, number in parts:
        b = a + len(text)
        if a >= 1 and window[a - 1] == "@":
            continue
        if a >= 2 and window[a - 1] in ".,:-/" and window[a - 2].isdigit():
            continue  # the middle of a decimal, a price, a time or a date
        if b + 1 < len(window) and window[b] in ".,:-/" and window[b + 1].isdigit():
            continue
        if _DECIMAL_START.match(text) or _DATE.search(text) or len(_YEAR.findall(text)) >= 2:
            continue
        if phonenumbers.number_type(number) > phonenumbers.PhoneNumberType.PERSONAL_NUMBER:
            continue
        out.append((a, b))
    return out


# --------------------------------------------------------------------------- redaction


_Finder = Callable[[str], list[tuple[int, int, str]]]


def _as(kind: str, find: Callable[[str], list[tuple[int, int]]]) -> _Finder:
    return lambda folded: [(start, end, kind) for start, end in find(folded)]


def _matches(name: str) -> Callable[[str], list[tuple[int, int]]]:
    pattern = _PII[name]
    return lambda folded: [(m.start(), m.end()) for m in pattern.finditer(folded)]


#: The finders in the order they run, each span with the kind it counts as: a span one of them found
#: is masked before the next runs.
_FINDERS: tuple[_Finder, ...] = (
    _as("email", _emails),
    _as("mac", _macs),
    _as("ip", _ipv6s),
    _as("ip", _ipv4s),
    _as("id_card", _matches("id_card")),
    _as("digits", _grouped_cards),
    _as("digits", _luhn_cards),
    _phones,
    _as("phone", lambda folded: [(m.start(), m.end()) for m in _PII["phone"].finditer(_phone_view(folded))
                                 if not _after_version(folded, m.start())]),
    _as("digits", _matches("digits")),
)


def redact(text: str, counts: dict[str, int] | None = None) -> str:
    """``text`` with personal data replaced by placeholders; ``counts`` (kind -> replacements) is added to.

    The patterns look at the NFKC form of the text without its invisible characters (so full-width
    characters and zero-width spaces change nothing), and what they find is replaced in the text
    as it was written, which otherwise stays as it is. See the module's docstring for the kinds.
    """
    folded, origin = _normalised(text)
    taken: list[tuple[int, int, str]] = []  # (start, end, kind) in ``folded``, no two overlapping
    for finder in _FINDERS:
        found = sorted(span for span in finder(folded) if span[1] > span[0])
        if found:  # masked, the same length, so the next finders neither see nor straddle it
            pieces, at = [], 0
            for start, end, _ in found:
                pieces += [folded[at:start], _MASK * (end - start)]
                at = end
            folded = "".join(pieces) + folded[at:]
            taken += found
    if not taken:
        return text
    taken.sort()
    merged: list[tuple[int, int, str]] = []
    for start, end, kind in taken:  # a digit run longer than 64, found in pieces: one placeholder
        if merged and merged[-1][1] == start and merged[-1][2] == kind == "digits":
            merged[-1] = (merged[-1][0], end, kind)
        else:
            merged.append((start, end, kind))
    parts: list[str] = []
    at = 0
    for start, end, kind in merged:
        first, last = origin[start], origin[end - 1] + 1
        parts.append(text[at:first] + PLACEHOLDERS[kind])
        at = last
        if counts is not None:
            counts[kind] = counts.get(kind, 0) + 1
    return "".join(parts) + text[at:]
