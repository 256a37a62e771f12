"""`ragmetrics sample` (pytest_ragmetrics.tools.sample): a draft golden set drawn from a query log.

Redaction, deduplication and stratified allocation are checked by hand on small logs;
the verb through ``cli.main`` (exit codes, messages naming the file and line, the
terminal report); the draft through the chain it is made for: ``ragmetrics pool`` over a
real retriever module, and the candidates file ``ragmetrics annotate`` reads.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

from pytest_ragmetrics import InputError, RagMetricsError
from pytest_ragmetrics.cli import main
from pytest_ragmetrics.tools.candidates import read_candidates
from pytest_ragmetrics.tools.pool import read_queries
from pytest_ragmetrics.tools.redact import PHONE_REGIONS
from pytest_ragmetrics.tools.sample import PII_KINDS, allocate, deduplicate, read_log, redact, sample_log, token_set


def write_log(path: Path, records: list[Any]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n"
                            for r in records), encoding="utf-8")
    return path


def draft_of(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    meta, *records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return meta["_meta"], records


# --------------------------------------------------------------------------- redaction


@pytest.mark.parametrize("text, expected, kind", [
    ("write to alice.smith+rag@example.co.uk now", "write to [email] now", "email"),
    ("我的手机 13812345678 打不通", "我的手机 [phone] 打不通", "phone"),
    ("call 138 1234 5678", "call [phone]", "phone"),
    ("call +86 138-1234-5678", "call [phone]", "phone"),
    ("call +1 (415) 555-2671", "call [phone]", "phone"),
    ("call (415) 555-2671", "call [phone]", "phone"),
    ("座机 010-62345678", "座机 [phone]", "phone"),
    ("身份证 11010519900307123X 验证", "身份证 [id] 验证", "id_card"),
    ("id 110105199003071234", "id [id]", "id_card"),
    ("订单 20231015123456 没到", "订单 [number] 没到", "digits"),
    ("card 4111 1111 1111 1111", "card [number]", "digits"),
])
def test_each_kind_of_personal_data_is_replaced_and_counted(text: str, expected: str, kind: str) -> None:
    counts: dict[str, int] = {}
    assert redact(text, counts) == expected
    assert counts == {kind: 1}


@pytest.mark.parametrize("text", ["top 10 results in 2024", "error 404 on page 3", "date 2026-03-01",
                                  "version 1.2.3", "model gpt-4 with 128 tokens", "recall@10 fell from 0.95 to 0.80",
                                  "error 404", "python 3.11", "I bought 3 items in 2024", "from 2024 2025 2026",
                                  "version 1.2.3.4 broke search", "windows 10 build 19045.3803", "meet at 12:30:45",
                                  "std::vector and Add::add", "thanks @john.smith for the fix", "ndcg@5 0.812 vs 0.790",
                                  "1,000,000 users since 2019", "price $1,299.00 or 49.99", "10.5% of 1 200 queries",
                                  "ISO 9001:2015 and RFC 7231", "between 2019-01-01 and 2024-12-31",
                                  "chunk sizes 512, 64, 2048 compared", "ports 3306, 5432, 6379, 8080",
                                  "sizes 128 / 64 / 1024", "meeting 12:30\u201314:45", "pages 123\u2013145",
                                  "season 2024\u20132025", "v1_2_3 notes", "ISO 8601:2004",
                                  "between 100_000 and 1_000_000 tokens", "2,500\u20133,000 words",
                                  "from 2019/01/01 to 2024/12/31", "epochs 3·5·10", "k in {1, 5, 10, 20, 50, 100}",
                                  "sizes 512 ,  64 ,  2048", "log in at portal.example.com",
                                  "コーヒー 2 杯 and 3 ー 4"])
def test_ordinary_numbers_are_not_personal_data(text: str) -> None:
    counts: dict[str, int] = {}
    assert redact(text, counts) == text
    assert counts == {}


#: What the default redaction let through, each with what the draft must hold instead.
MISSED = [
    ("张三@example.com 的账号", "[email] 的账号"),
    ("contact jürgen@müller.de now", "contact [email] now"),
    ("联系zhangsan@qq.com", "联系[email]"),
    ("ｊｏｈｎ＠ｅｘａｍｐｌｅ．ｃｏｍ 登录", "[email] 登录"),
    ("user＠example.com login", "[email] login"),
    ("my email is john.doe@gmail。com", "my email is [email]"),
    ("call 138.1234.5678", "call [phone]"),
    ("call +86 138.1234.5678", "call [phone]"),
    ("call 020 7946 0958", "call [phone]"),
    ("call 07700 900123", "call [phone]"),
    ("call 06 12 34 56 78", "call [phone]"),
    ("call 021-6123 4567", "call [phone]"),
    ("call (021)61234567", "call [phone]"),
    ("call 0086-138-1234-5678", "call [phone]"),
    ("我的手机号是１３８１２３４５６７８请回电", "我的手机号是[phone]请回电"),
    ("身份证 110105 19900101 002X", "身份证 [id]"),
    ("身份证１１０１０５１９４９１２３１００２Ｘ", "身份证[id]"),
    ("ssn 123-45-6789", "ssn [id]"),
    ("card 3782 822463 10005", "card [number]"),
    ("card 4111.1111.1111.1111", "card [number]"),
    ("ssn 123-45-6789 card 4111 1111 1111 1111", "ssn [id] card [number]"),
    ("iban DE89 3704 0044 0532 0130 00", "iban [number]"),
]
#: Numbers that are nobody's personal data, kept as they are.
ORDINARY = ["3 items in the cart", "price $1,299.00 or 49.99", "version 2.4.6", "released 2026-03-01",
            "top 10 results in 2024", "order of 12 boxes, 2 left", "from 2024 2025 2026", "ISO 9001 2015",
            "２０２４年的报告"]


def test_personal_data_the_default_redaction_missed_is_redacted(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    cases = [*MISSED, *((q, q) for q in ORDINARY)]
    log = write_log(tmp_path / "log.jsonl", [{"query": f"q{i}: {q}"} for i, (q, _) in enumerate(cases)])
    out = tmp_path / "draft.jsonl"
    assert main(["sample", str(log), "--n", "100", "--near", "off", "--seed", "1", "--out", str(out)]) == 0
    meta, records = draft_of(out)
    drafted = {r["log"]["line"]: r["query"] for r in records}
    assert [drafted[i + 1] for i in range(len(cases))] == [f"q{i}: {want}" for i, (_, want) in enumerate(cases)]
    assert meta["redacted"] == {"email": 6, "id_card": 4, "phone": 9, "digits": 4, "ip": 0, "mac": 0}
    assert "email 6, id_card 4, phone 9, digits 4, ip 0, mac 0" in capsys.readouterr().out


def test_a_full_width_mobile_number_counts_as_a_phone_number() -> None:
    counts: dict[str, int] = {}
    assert redact("电话１３８１２３４５６７８", counts) == "电话[phone]"
    assert counts == {"phone": 1}


#: Forms of personal data in the formats people write them, each named, with what the draft holds instead and
#: the kind it counts as: at least two forms for each country's phone numbers, the 00 prefix, SSNs and cards with
#: any separators, e-mail addresses in odd forms, invisible characters inside each kind, IP and MAC addresses.
ZW = "\u200b"
FORMS = [
    ("de-landline", "ruf 030 12345678 an", "ruf [phone] an", "phone"),
    ("de-mobile-grouped", "Handy 0176 1234 5678 bitte", "Handy [phone] bitte", "phone"),
    ("de-slash", "Tel. 030/1234567", "Tel. [phone]", "phone"),
    ("de-plus-trunk", "call +49 (0)30 1234567", "call [phone]", "phone"),
    ("in-mobile", "call 98765 43210 now", "call [phone] now", "phone"),
    ("in-plus", "call +91-9876543210", "call [phone]", "phone"),
    ("in-landline", "office 022 2345 6789", "office [phone]", "phone"),
    ("jp-landline", "電話 03-1234-5678 まで", "電話 [phone] まで", "phone"),
    ("jp-mobile", "携帯 090-1234-5678", "携帯 [phone]", "phone"),
    ("jp-plus", "call +81 90 1234 5678", "call [phone]", "phone"),
    ("br-mobile", "ligue (11) 91234-5678", "ligue [phone]", "phone"),
    ("br-landline", "fixo (21) 2345-6789", "fixo [phone]", "phone"),
    ("br-plus", "whatsapp +55 11 91234 5678", "whatsapp [phone]", "phone"),
    ("au-mobile", "ring 0412 345 678", "ring [phone]", "phone"),
    ("au-landline", "ring (02) 9876 5432", "ring [phone]", "phone"),
    ("es-mobile", "llama al 612 34 56 78", "llama al [phone]", "phone"),
    ("es-landline", "llama al 91 123 45 67", "llama al [phone]", "phone"),
    ("es-plus", "llama al +34 612 345 678", "llama al [phone]", "phone"),
    ("ru-mobile", "звоните 8 (912) 345-67-89", "звоните [phone]", "phone"),
    ("ru-landline", "звоните 8-495-123-45-67", "звоните [phone]", "phone"),
    ("ru-plus", "звоните +7 912 345-67-89", "звоните [phone]", "phone"),
    ("nl-mobile", "bel 06-12345678", "bel [phone]", "phone"),
    ("nl-landline", "bel 020 123 4567", "bel [phone]", "phone"),
    ("nl-plus", "bel +31 6 12345678", "bel [phone]", "phone"),
    ("00-germany", "call 0049 30 1234567", "call [phone]", "phone"),
    ("00-britain", "call 0044 20 7946 0958", "call [phone]", "phone"),
    ("00-france", "call 0033 6 12 34 56 78", "call [phone]", "phone"),
    ("us-dots", "call 415.555.2671", "call [phone]", "phone"),
    ("ssn-spaces", "ssn 123 45 6789 lost", "ssn [id] lost", "id_card"),
    ("ssn-dots", "ssn 123.45.6789", "ssn [id]", "id_card"),
    ("ssn-doubled", "ssn 123--45--6789", "ssn [id]", "id_card"),
    ("ssn-mixed", "ssn 123 -45. 6789", "ssn [id]", "id_card"),
    ("card-doubled-spaces", "card 4111  1111  1111  1111", "card [number]", "digits"),
    ("card-doubled-dashes", "card 5500--0000--0000--0004", "card [number]", "digits"),
    ("card-mixed", "card 4111.1111-1111 1111", "card [number]", "digits"),
    ("card-amex-dots", "amex 3782.822463.10005", "amex [number]", "digits"),
    ("card-3-groups", "card 4111111 11111 1111", "card [number]", "digits"),
    ("email-spaced", "mail john.doe @ example.com", "mail [email]", "email"),
    ("email-space-after", "mail john.doe@ example.com", "mail [email]", "email"),
    ("email-quoted", 'mail "john doe"@example.com', "mail [email]", "email"),
    ("email-64", "mail " + "a" * 64 + "@example.com", "mail [email]", "email"),
    ("email-over-64", "mail " + "b" * 80 + "@example.com now", "mail [email] now", "email"),
    ("email-full-width-at", "mail john＠example.com", "mail [email]", "email"),
    ("email-bracketed", "mail john [at] example [dot] com", "mail [email]", "email"),
    ("zw-phone", f"call 0176{ZW}1234{ZW}5678", "call [phone]", "phone"),
    ("zw-email", f"mail jo{ZW}hn@exam\u00adple.com", "mail [email]", "email"),
    ("zw-ssn", "ssn 123-4\u20605-6789", "ssn [id]", "id_card"),
    ("zw-card", "card 4111 1111\ufeff 1111 1111", "card [number]", "digits"),
    ("zw-ip", f"host 192.168.{ZW}1.20", "host [ip]", "ip"),
    ("zw-ipv6", f"host 2001:db8::{ZW}8a2e:370:7334", "host [ip]", "ip"),
    ("zw-mac", "mac 00:1A:2B\u00ad:3C:4D:5E", "mac [mac]", "mac"),
    ("zw-phone-plus", f"call +34{ZW} 612 34 56 78\u2060", "call [phone]\u2060", "phone"),
    ("ipv4", "host 192.168.1.20 down", "host [ip] down", "ip"),
    ("ipv4-port", "host 10.0.0.7:8080 down", "host [ip] down", "ip"),
    ("ipv6-full", "host 2001:0db8:85a3:0000:0000:8a2e:0370:7334", "host [ip]", "ip"),
    ("ipv6-compressed", "host 2001:db8::8a2e:370:7334 down", "host [ip] down", "ip"),
    ("ipv6-zone", "host fe80::1ff:fe23:4567:890a%eth0 down", "host [ip] down", "ip"),
    ("ipv6-mapped", "host ::ffff:192.0.2.128 down", "host [ip] down", "ip"),
    ("ipv6-port", "host [2001:db8::1]:443 down", "host [ip] down", "ip"),
    ("mac-colon", "mac 00:1A:2B:3C:4D:5E", "mac [mac]", "mac"),
    ("mac-dash", "mac 00-1a-2b-3c-4d-5e", "mac [mac]", "mac"),
    ("mac-cisco", "mac 001a.2b3c.4d5e", "mac [mac]", "mac"),
    # any separator between the groups of an SSN or a card: punctuation, symbols and every Unicode dash
    ("ssn-slash", "update ssn 078/05/1120 on the tax form", "update ssn [id] on the tax form", "id_card"),
    ("ssn-underscore", "ssn 078_05_1120", "ssn [id]", "id_card"),
    ("ssn-comma", "ssn 078,05,1120", "ssn [id]", "id_card"),
    ("ssn-colon", "ssn 078:05:1120", "ssn [id]", "id_card"),
    ("ssn-middle-dot", "ssn 078·05·1120", "ssn [id]", "id_card"),
    ("ssn-hyphen-u2010", "ssn 123\u201045\u20106789", "ssn [id]", "id_card"),
    ("ssn-non-breaking-hyphen-u2011", "ssn 123\u201145\u20116789", "ssn [id]", "id_card"),
    ("ssn-en-dash", "my social security number is 123\u201345\u20136789",
     "my social security number is [id]", "id_card"),
    ("ssn-em-dash", "ssn 123\u201445\u20146789", "ssn [id]", "id_card"),
    ("ssn-minus-sign", "ssn 123\u221245\u22126789", "ssn [id]", "id_card"),
    ("ssn-full-width-hyphen", "ssn 123\uff0d45\uff0d6789", "ssn [id]", "id_card"),
    ("ssn-mixed-punctuation", "ssn 123/_45:·6789", "ssn [id]", "id_card"),
    ("ssn-arabic-indic-digits", "ssn \u0661\u0662\u0663-\u0664\u0665-\u0666\u0667\u0668\u0669", "ssn [id]",
     "id_card"),
    ("card-non-breaking-hyphen", "charge on card 4111\u20111111\u20111111\u20111111 appeared twice",
     "charge on card [number] appeared twice", "digits"),
    ("card-slash", "card 5555/5555/5555/4444 declined", "card [number] declined", "digits"),
    ("card-underscore", "card 4111_1111_1111_1111", "card [number]", "digits"),
    ("card-colon", "card 4111:1111:1111:1111", "card [number]", "digits"),
    ("card-comma", "card 4111,1111,1111,1111", "card [number]", "digits"),
    ("card-hyphen-u2010", "card 4111\u20101111\u20101111\u20101111", "card [number]", "digits"),
    ("card-en-dash", "card 5555\u20135555\u20135555\u20134444", "card [number]", "digits"),
    ("card-em-dash", "card 5555\u20145555\u20145555\u20144444", "card [number]", "digits"),
    ("card-minus-sign", "card 4111\u22121111\u22121111\u22121111", "card [number]", "digits"),
    ("card-middle-dots-doubled", "card 4111··1111··1111··1111", "card [number]", "digits"),
    # separator runs of up to 8 characters, and every dash-like character, letters drawn as a dash included
    ("ssn-spaced-double-dashes", "ssn 123 -- 45 -- 6789", "ssn [id]", "id_card"),
    ("ssn-four-spaces", "ssn 123    45    6789", "ssn [id]", "id_card"),
    ("card-spaced-double-dashes", "card 4111 -- 1111 -- 1111 -- 1111", "card [number]", "digits"),
    ("card-wide-spaced-dashes", "card 4111  -  1111  -  1111  -  1111", "card [number]", "digits"),
    ("ssn-prolonged-sound-mark", "ssn 123\u30fc45\u30fc6789", "ssn [id]", "id_card"),
    ("card-prolonged-sound-mark", "card 4111\u30fc1111\u30fc1111\u30fc1111", "card [number]", "digits"),
    ("ssn-half-width-prolonged-sound-mark", "ssn 123\uff7045\uff706789", "ssn [id]", "id_card"),
    ("ssn-hangul-eu", "ssn 123\u316145\u31616789", "ssn [id]", "id_card"),
    ("ssn-horizontal-bar-u2015", "ssn 123\u201545\u20156789", "ssn [id]", "id_card"),
    ("ssn-two-em-dash-u2e3a", "ssn 123\u2e3a45\u2e3a6789", "ssn [id]", "id_card"),
    ("ssn-three-em-dash-u2e3b", "ssn 123\u2e3b45\u2e3b6789", "ssn [id]", "id_card"),
    ("ssn-small-em-dash-ufe58", "ssn 123\ufe5845\ufe586789", "ssn [id]", "id_card"),
    ("ssn-small-hyphen-minus-ufe63", "ssn 123\ufe6345\ufe636789", "ssn [id]", "id_card"),
    ("card-full-width-hyphen-minus-uff0d", "card 4111\uff0d1111\uff0d1111\uff0d1111", "card [number]", "digits"),
    ("ssn-modifier-letter-minus-u02d7", "ssn 123\u02d745\u02d76789", "ssn [id]", "id_card"),
    ("ssn-hyphen-bullet-u2043", "ssn 123\u204345\u20436789", "ssn [id]", "id_card"),
    ("ssn-mongolian-todo-soft-hyphen-u1806", "ssn 123\u180645\u18066789", "ssn [id]", "id_card"),
    ("card-after-a-digits-only-mac-shape", "card 4111.1111.1111 -- 1111", "card [number]", "digits"),
    # every character RFC 5322 allows in a local part; the whole address goes
    ("email-braces", "mail jane{smith}@example.org", "mail [email]", "email"),
    ("email-apostrophe", "mail o'brien@example.ie", "mail [email]", "email"),
    ("email-apostrophe-inside", "mail john'doe@example.com", "mail [email]", "email"),
    ("email-atext", "mail a!b#c$d%e&f*g+h/i=j?k^l`m|n~o@example.com", "mail [email]", "email"),
    ("email-quoted-escapes", 'mail "john \\"jd\\" doe"@example.com', "mail [email]", "email"),
    ("email-quoted-at", 'mail "a@b.cd"@example.com now', "mail [email] now", "email"),
    ("email-in-quotes", "mail 'john@example.com' now", "mail '[email]' now", "email"),
    ("email-braille-blank-domain", "mail jane@exam\u2800ple.org", "mail [email]", "email"),
    # at and dot written out in any one bracket pair, or bare between spaces; any case
    ("email-braces-at-dot", "mail john{at}example{dot}com", "mail [email]", "email"),
    ("email-angle-at-dot", "mail john<at>example<dot>com", "mail [email]", "email"),
    ("email-mixed-brackets", "mail john (at) example {dot} com now", "mail [email] now", "email"),
    ("email-bare-at-dot", "email me at John AT example DOT com", "email me at [email]", "email"),
    # hyphens and punycode in the domain, the top-level one included
    ("email-punycode-tld", "mail john+tag@example.xn--p1ai", "mail [email]", "email"),
    ("email-hyphenated-labels", "mail a@my-shop.xn--mller-kva.de now", "mail [email] now", "email"),
    # separators the phone library does not read itself
    ("phone-plus-underscore", "call +1_212_555_0123", "call [phone]", "phone"),
    ("phone-00-underscore", "call 0044_20_7946_0958", "call [phone]", "phone"),
    ("phone-plus-slash", "call +32/450/00/12/34", "call [phone]", "phone"),
    ("phone-middle-dot", "tel 06·12·34·56·78", "tel [phone]", "phone"),
    ("phone-en-dash", "call 415\u2013555\u20132671", "call [phone]", "phone"),
    ("phone-plus-other-country", "singapore +65 9123 4567", "singapore [phone]", "phone"),
    ("phone-00-other-country", "chile 0056 9 6123 4567", "chile [phone]", "phone"),
]


@pytest.mark.parametrize("text, expected, kind", [row[1:] for row in FORMS], ids=[row[0] for row in FORMS])
def test_each_written_form_of_personal_data_is_redacted(text: str, expected: str, kind: str) -> None:
    counts: dict[str, int] = {}
    assert redact(text, counts) == expected
    assert counts == {kind: 1}


#: The countries whose national phone numbers (written without ``+`` or ``00``) are recognised, as the docs
#: name them, in PHONE_REGIONS' order.
REGION_NAMES = {"CN": "China", "US": "the United States and Canada", "GB": "the United Kingdom", "DE": "Germany",
                "FR": "France", "IN": "India", "JP": "Japan", "BR": "Brazil", "AU": "Australia", "ES": "Spain",
                "RU": "Russia", "NL": "the Netherlands", "IT": "Italy", "MX": "Mexico", "KR": "South Korea",
                "PL": "Poland", "TR": "Turkey", "ID": "Indonesia", "PH": "the Philippines", "ZA": "South Africa",
                "AR": "Argentina", "CH": "Switzerland", "SE": "Sweden", "BE": "Belgium", "AT": "Austria",
                "PT": "Portugal"}


@pytest.mark.parametrize("page", ["docs/cli.md", "docs/production.md"])
def test_the_docs_name_exactly_the_countries_whose_national_numbers_are_recognised(page: str) -> None:
    assert list(REGION_NAMES) == list(PHONE_REGIONS)
    names = list(REGION_NAMES.values())
    listed = ", ".join(names[:-1]) + " and " + names[-1]
    text = " ".join((Path(__file__).parents[1] / page).read_text(encoding="utf-8").split())
    assert listed in text


@pytest.mark.parametrize("national, international", [
    ("singapore 9123 4567", "singapore +65 9123 4567"),
    ("chile 9 6123 4567", "chile 0056 9 6123 4567"),
])
def test_a_national_number_of_a_country_not_listed_is_kept_but_not_with_its_country_code(
        national: str, international: str) -> None:
    """What the docs say: national numbers are recognised for the countries they name; any country's
    number is recognised written with ``+`` or ``00``."""
    assert redact(national) == national
    assert redact(international) == international.split()[0] + " [phone]"


def test_the_draft_and_the_summary_count_every_kind(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = write_log(tmp_path / "log.jsonl", [{"query": f"q{i}: {text}"} for i, (_, text, _, _) in enumerate(FORMS)])
    out = tmp_path / "draft.jsonl"
    assert main(["sample", str(log), "--n", str(len(FORMS)), "--near", "off", "--seed", "1", "--out", str(out)]) == 0
    meta, records = draft_of(out)
    assert sorted(r["query"] for r in records) == sorted(f"q{i}: {want}" for i, (_, _, want, _) in enumerate(FORMS))
    tally = {kind: sum(1 for row in FORMS if row[3] == kind) for kind in PII_KINDS}
    assert meta["redacted"] == tally and list(meta["redacted"]) == list(PII_KINDS)
    assert ", ".join(f"{kind} {n}" for kind, n in tally.items()) in capsys.readouterr().out


def _unbounded_repeats(tree: Any) -> Iterator[str]:
    """The repetitions without an upper bound in a parsed pattern (``re._parser``), nested ones too."""
    import re._constants as c  # type: ignore[import-not-found]

    for op, av in tree:
        if op in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT):
            if av[1] == c.MAXREPEAT:
                yield f"{op} {{{av[0]},}}"
            yield from _unbounded_repeats(av[2])
        elif op == c.SUBPATTERN:
            yield from _unbounded_repeats(av[-1])
        elif op == c.BRANCH:
            for branch in av[1]:
                yield from _unbounded_repeats(branch)
        elif op in (c.ASSERT, c.ASSERT_NOT):
            yield from _unbounded_repeats(av[1])
        elif op == c.ATOMIC_GROUP:
            yield from _unbounded_repeats(av)


def test_a_line_of_numbers_caps_the_phone_library_and_leaves_no_number_unlooked_at(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A line of thousands of numbers would keep the phone library busy for minutes: past the line's
    budget, its remaining runs of digits are replaced unchecked."""
    import pytest_ragmetrics.tools.redact as module

    windows: list[str] = []
    looked_at = module._phones_in
    monkeypatch.setattr(module, "_phones_in", lambda *key: windows.append(key[0]) or looked_at(*key))
    monkeypatch.setattr(module, "_PHONE_CACHE", {})
    rng = random.Random(5)
    line = " x ".join(" ".join(str(rng.randrange(100, 10**6)) for _ in range(3)) for _ in range(2_500))
    out = redact(line)
    assert len(line) > 40_000 and 0 < len(windows) <= module._PHONE_BUDGET
    tail = out[len(out) // 2:]  # well past the budget: every run of 6 digits or more replaced, the words kept
    assert [run for run in module._PII["phone_run"].findall(tail) if sum(ch.isdigit() for ch in run) >= 6] == []
    assert tail.count("[number]") > 500 and tail.count(" x ") > 500


def test_redaction_is_linear_in_the_length_of_a_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An unbounded ``[...]+@`` rescanned a long run of letters from each of its positions: 5 s for a
    40,000-character line, 17.5 s for 80,000. With every repetition bounded (and every lookaround
    of fixed width) the work at each position is bounded, so the whole line is linear; checked on
    the patterns themselves, not on a clock."""
    import re._parser as parser  # type: ignore[import-not-found]

    from pytest_ragmetrics.tools.redact import _PII

    for kind, pattern in _PII.items():
        assert list(_unbounded_repeats(parser.parse(pattern.pattern))) == [], kind
    # and a 200,000-character line through the verb: its e-mail address, phone and long digit run redacted
    line = "a" * 100_000 + " bob@example.com " + "7" * 99_000 + " 13812345678"
    log = write_log(tmp_path / "log.jsonl", [{"query": line}])
    out = tmp_path / "draft.jsonl"
    assert main(["sample", str(log), "--n", "1", "--seed", "1", "--out", str(out)]) == 0
    assert draft_of(out)[1][0]["query"] == "a" * 100_000 + " [email] [number] [phone]"
    # what is not a pattern (a local part walked back from its @, a quoted one back to its opening quote,
    # the separators between a number's groups) looks at each character a bounded number of times too
    assert redact("o'b{r}@x.io 1_2·3/4–5 " * 2_500) == "[email] 1_2·3/4–5 " * 2_500
    assert redact('"a\\"b"@x.io 078/05/1120 ' * 2_500) == "[email] [id] " * 2_500


# ----------------------------------------------------------------------- deduplication


def test_exact_and_near_duplicates_merge_into_the_most_asked_form(tmp_path: Path) -> None:
    log = write_log(tmp_path / "log.jsonl", [
        {"query": "how do i reset my password", "count": 2},
        {"query": "How do I reset my password?", "count": 5},  # exact after normalisation; asked most
        {"query": "how do I reset my password please"},  # near: 6 of 7 tokens
        {"query": "how do I reset my password", "filters": {"product": "web"}},  # other filters: its own
        {"query": "如何重置密码"},
        {"query": "如何重置密码？"},  # exact
        {"query": "如何重置登录密码"},  # near in character bigrams? 4 of 7: no
        {"query": "reset"},
    ])
    questions, exact, near = deduplicate(read_log(log))
    assert (exact, near) == (2, 1)
    first = questions[0]
    assert first.query == "How do I reset my password?" and first.count == 8 and sorted(first.lines) == [1, 2, 3]
    assert first.forms == 2
    assert [q.query for q in questions[1:]] == ["how do I reset my password", "如何重置密码", "如何重置登录密码",
                                                "reset"]
    assert questions[1].filters == {"product": "web"}
    assert token_set("如何重置密码") == {"如何", "何重", "重置", "置密", "密码"}
    questions, exact, near = deduplicate(read_log(log), near=None)
    assert (exact, near) == (2, 0) and len(questions) == 6


def test_near_duplicates_found_by_prefix_filtering_equal_a_pairwise_search() -> None:
    """The candidate search (rarest tokens, set sizes) is an optimisation only: the same merges as
    comparing every question with every one kept before it."""
    from pytest_ragmetrics.tools.sample import LogEntry

    def pairwise(entries: list[LogEntry], near: float) -> tuple[list[str], int]:
        kept: list[Any] = []
        # most asked first, ties by text (not by line: the log's order must not matter)
        for q in sorted(deduplicate(entries, None)[0],
                        key=lambda q: (-q.count, q.key, json.dumps(q.filters, sort_keys=True, ensure_ascii=False))):
            s = token_set(q.key)
            if s and any(k.filters == q.filters and len(s & token_set(k.key)) >= near * len(s | token_set(k.key))
                         for k in kept):
                continue
            kept.append(q)
        return sorted(q.key for q in kept), len(deduplicate(entries, None)[0]) - len(kept)

    rng = random.Random(11)
    for _ in range(300):
        vocab = [f"w{i}" for i in range(rng.randint(3, 12))]
        entries = [LogEntry(i + 1, " ".join(rng.sample(vocab, rng.randint(1, min(6, len(vocab))))),
                            rng.choice([None, {"lang": "en"}]), "all", rng.randint(1, 3))
                   for i in range(rng.randint(1, 40))]
        near = rng.choice([0.5, 0.6, 0.75, 0.8, 1.0])
        questions, _, merged = deduplicate(entries, near)
        assert (sorted(q.key for q in questions), merged) == pairwise(entries, near)


def test_allocation_is_proportional_with_one_at_least_and_capped() -> None:
    assert allocate({"a": 80, "b": 15, "c": 5}, 10) == {"a": 8, "b": 1, "c": 1}  # 8 + 1.5 + 0.5: c gets its one
    assert allocate({"a": 50, "b": 50}, 5) == {"a": 3, "b": 2}  # a tie of remainders goes by name
    assert allocate({"a": 2, "b": 100}, 50) == {"a": 1, "b": 49}
    assert allocate({"a": 3, "b": 1, "c": 1}, 2) == {"a": 1, "b": 1, "c": 0}  # fewer than strata: largest first
    assert allocate({"a": 3, "b": 4}, 100) == {"a": 3, "b": 4}
    for n in range(1, 60):
        got = allocate({"x": 30, "y": 20, "z": 1, "w": 5}, n)
        assert sum(got.values()) == min(n, 56)
        assert all(got[s] <= size for s, size in {"x": 30, "y": 20, "z": 1, "w": 5}.items())


# ------------------------------------------------------------------------------ the verb


def big_log(tmp_path: Path) -> Path:
    records: list[Any] = []
    for i in range(40):
        records.append({"query": f"billing question number {i} about invoice {'abcdefghij'[i % 10]}{i}",
                        "intent": "billing", "ts": f"2026-11-{i % 28 + 1:02d}"})
    for i in range(10):
        records.append({"query": f"where is my parcel {i} tracking {chr(97 + i)}", "intent": "orders",
                        "filters": {"region": "eu"}})
    records.append({"query": "email me at bob@example.org about refund", "intent": "billing"})
    records.append({"query": "我的电话是13912345678", "intent": "orders", "count": 4})
    return write_log(tmp_path / "log.jsonl", records)


def test_sample_writes_a_stratified_redacted_draft(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = big_log(tmp_path)
    out = tmp_path / "draft.jsonl"
    assert main(["sample", str(log), "--n", "10", "--by", "intent", "--seed", "3", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "email 1, id_card 0, phone 1, digits 0, ip 0, mac 0" in printed
    meta, records = draft_of(out)
    assert meta["kind"] == "ragmetrics-draft" and meta["seed"] == 3 and meta["by"] == "intent"
    assert meta["strata"] == {"billing": {"lines": 41, "questions": 41, "sampled": 8},
                              "orders": {"lines": 11, "questions": 11, "sampled": 2}}
    assert meta["redacted"] == {"email": 1, "id_card": 0, "phone": 1, "digits": 0, "ip": 0, "mac": 0}
    assert meta["pii"] == "redacted"
    assert len(records) == 10
    for r in records:
        assert r["source"] == "log" and r["qid"].startswith("log-") and r["candidates"] == []
        assert r["tags"] in (["intent=billing"], ["intent=orders"])
        assert "@" not in r["query"] and "13912345678" not in r["query"]
        assert ("filters" in r) == (r["tags"] == ["intent=orders"] and "parcel" in r["query"])
    for stratum, v in meta["strata"].items():
        assert v["sampled"] == sum(1 for r in records if r["tags"] == [f"intent={stratum}"])
    assert "| billing | 41        | 41       | 8       |" in printed


def test_the_same_seed_gives_the_same_draft_and_another_seed_another(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    log = big_log(tmp_path)
    texts = []
    for name, seed in (("a", "5"), ("b", "5"), ("c", "6")):
        assert main(["sample", str(log), "--n", "12", "--by", "intent", "--seed", seed,
                     "--out", str(tmp_path / f"{name}.jsonl")]) == 0
        texts.append((tmp_path / f"{name}.jsonl").read_bytes())
    assert texts[0] == texts[1]
    assert texts[0] != texts[2]
    # a question keeps its id whatever the seed: drafts of one log can be merged
    ids = [{r["qid"]: r["query"] for r in draft_of(tmp_path / f"{n}.jsonl")[1]} for n in "ac"]
    assert all(ids[0][q] == ids[1][q] for q in set(ids[0]) & set(ids[1]))


def test_keep_pii_is_explicit_and_recorded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = write_log(tmp_path / "log.jsonl", [{"query": "mail bob@example.org"}, {"query": "call 13912345678"}])
    out = tmp_path / "draft.jsonl"
    assert main(["sample", str(log), "--n", "5", "--seed", "1", "--keep-pii", "--out", str(out)]) == 0
    assert "Personal data kept as logged (--keep-pii)" in capsys.readouterr().out
    meta, records = draft_of(out)
    assert meta["pii"] == "kept" and meta["redacted"] is None
    assert sorted(r["query"] for r in records) == ["call 13912345678", "mail bob@example.org"]
    assert "tags" not in records[0]  # no --by: one stratum, no tag


def test_a_line_without_query_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = write_log(tmp_path / "log.jsonl", [{"query": "fine"}, {"q": "typo"}])
    assert main(["sample", str(log), "--n", "1", "--out", str(tmp_path / "d.jsonl")]) == 2
    err = capsys.readouterr().err
    assert f"ragmetrics sample: error: {log}, line 2: missing field 'query'" in err
    assert not (tmp_path / "d.jsonl").exists()


@pytest.mark.parametrize("record, problem", [
    ('{"query": ""}', "query must be a non-empty string"),
    ('{"query": "x", "filters": ["a"]}', "filters must be an object"),
    ('{"query": "x", "count": 0}', "count must be an integer >= 1"),
    ('["x"]', "expected a JSON object"),
    ('{"query": "x",', "invalid JSON"),
    ('{"query": "x", "intent": ["a", "b"]}', "--by field 'intent' must be a string or a number"),
])
def test_bad_lines_are_refused_naming_file_and_line(tmp_path: Path, record: str, problem: str) -> None:
    log = write_log(tmp_path / "log.jsonl", [{"query": "fine", "intent": "a"}, record])
    with pytest.raises(InputError) as info:
        sample_log(log, 1, by="intent")
    assert str(info.value).startswith(f"{log}, line 2: ") and problem in str(info.value)


def test_lines_without_the_by_field_are_listed_never_dropped(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    log = write_log(tmp_path / "log.jsonl", [{"query": "a", "intent": "x"}, {"query": "b"},
                                             {"query": "c", "intent": None}, {"query": "d", "intent": "y"}])
    out = tmp_path / "d.jsonl"
    assert main(["sample", str(log), "--n", "4", "--by", "intent", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{log}: 2 lines of 4 have no --by field 'intent' (or null): lines 2, 3;" in err
    assert "--by-missing" in err and not out.exists()
    assert main(["sample", str(log), "--n", "4", "--by", "intent", "--by-missing", "other", "--seed", "0",
                 "--out", str(out)]) == 0
    assert "2 lines without 'intent' sampled as the stratum 'other' (--by-missing)" in capsys.readouterr().out
    meta, records = draft_of(out)
    assert meta["strata"]["other"] == {"lines": 2, "questions": 2, "sampled": 2}
    assert sorted(r["query"] for r in records if r["tags"] == ["intent=other"]) == ["b", "c"]


def test_a_by_field_no_line_has_is_named_with_the_fields_they_have(tmp_path: Path) -> None:
    log = write_log(tmp_path / "log.jsonl", [{"query": "a", "intent": "x"}, {"query": "b", "intent": "y"}])
    with pytest.raises(InputError, match=r"log.jsonl: no line has the --by field 'intnet'; did you mean 'intent'\?"):
        sample_log(log, 1, by="intnet")
    with pytest.raises(InputError, match=r"no line has the --by field 'lang'; the lines have intent, query"):
        sample_log(log, 1, by="lang")


def test_usage_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = write_log(tmp_path / "log.jsonl", [{"query": "a"}])
    out = tmp_path / "d.jsonl"
    assert main(["sample", str(log), "--n", "1", "--by-missing", "other", "--out", str(out)]) == 2
    assert "give --by FIELD too" in capsys.readouterr().err
    out.write_text("keep me", encoding="utf-8")
    assert main(["sample", str(log), "--n", "1", "--out", str(out)]) == 2
    assert "already exists; pass --force" in capsys.readouterr().err
    assert out.read_text(encoding="utf-8") == "keep me"
    assert main(["sample", str(tmp_path / "nope.jsonl"), "--n", "1", "--out", str(tmp_path / "x.jsonl")]) == 2
    assert "nope.jsonl: file not found" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        main(["sample", str(log), "--n", "0", "--out", str(out)])
    assert info.value.code == 2
    with pytest.raises(RagMetricsError):
        sample_log(log, 1, near=1.5)


def test_exact_duplicates_take_the_stratum_of_their_most_asked_form(tmp_path: Path) -> None:
    log = write_log(tmp_path / "log.jsonl", [
        {"query": "reset password", "intent": "account"},  # first, asked once
        {"query": "Reset password!", "intent": "billing", "count": 9},  # the same question, asked 9 times
        {"query": "refund my order", "intent": "billing"},
    ])
    out = tmp_path / "draft.jsonl"
    assert main(["sample", str(log), "--n", "5", "--by", "intent", "--near", "off", "--seed", "1",
                 "--out", str(out)]) == 0
    meta, records = draft_of(out)
    reset = next(r for r in records if "password" in r["query"])
    assert reset["query"] == "Reset password!" and reset["tags"] == ["intent=billing"]
    assert reset["log"] == {"count": 10, "line": 1, "lines": 2, "forms": 1}
    assert meta["strata"]["billing"]["questions"] == 2 and meta["strata"]["account"]["questions"] == 0


def test_the_order_of_the_log_lines_does_not_change_the_sample(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    rng = random.Random(4)
    words = "reset password refund order parcel track invoice login email card delete account change".split()
    records = [{"query": " ".join(rng.sample(words, rng.randint(2, 5))), "intent": rng.choice("abc"),
                "count": rng.randint(1, 5)} for _ in range(300)]
    shuffled = records[:]
    random.Random(9).shuffle(shuffled)
    drafts = []
    for name, lines in (("log", records), ("shuffled", shuffled)):
        out = tmp_path / f"{name}.draft.jsonl"
        assert main(["sample", str(write_log(tmp_path / f"{name}.jsonl", lines)), "--n", "30", "--by", "intent",
                     "--seed", "7", "--out", str(out)]) == 0
        meta, drawn = draft_of(out)
        drafts.append((meta["strata"], meta["questions"],
                       sorted((r["qid"], r["query"], r["tags"][0], r["log"]["count"], r["log"]["lines"],
                               r["log"]["forms"]) for r in drawn)))
    assert drafts[0] == drafts[1]


@pytest.mark.parametrize("query, problem", [
    ("\u200b", "query holds only invisible characters"),
    ("\u200b \ufeff\u200d", "query holds only invisible characters"),
    ("a\u0000b", "query contains a NUL character"),
])
def test_a_nul_or_invisible_question_is_refused_naming_its_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                query: str, problem: str) -> None:
    log = write_log(tmp_path / "log.jsonl", [{"query": "fine"}, {"query": query}])
    out = tmp_path / "d.jsonl"
    assert main(["sample", str(log), "--n", "1", "--out", str(out)]) == 2
    assert f"{log}, line 2: {problem}" in capsys.readouterr().err
    assert not out.exists()


def test_the_draft_never_replaces_the_log_even_with_force(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = write_log(tmp_path / "log.jsonl", [{"query": "reset my password"}])
    before = log.read_bytes()
    link = tmp_path / "link.jsonl"
    link.symlink_to(log)
    for out in (log, link, tmp_path / "sub" / ".." / "log.jsonl"):
        assert main(["sample", str(log), "--n", "1", "--out", str(out), "--force"]) == 2
        assert f"--out {out} is the query log" in capsys.readouterr().err
    assert log.read_bytes() == before
    assert main(["sample", str(log), "--n", "1", "--out", str(tmp_path)]) == 2
    assert f"{tmp_path} is a directory; give a file name such as draft.jsonl" in capsys.readouterr().err
    (tmp_path / "file").write_text("", encoding="utf-8")
    assert main(["sample", str(log), "--n", "1", "--out", str(tmp_path / "file" / "d.jsonl")]) == 2
    assert "is a file, not a folder" in capsys.readouterr().err
    assert main(["sample", str(log), "--n", "1", "--out", str(tmp_path / "new" / "d.jsonl")]) == 0  # folders made
    assert ": 1 unlabelled question (source: log;" in capsys.readouterr().out


# ------------------------------------------------------------- the chain: pool, annotate

RETRIEVER = '''
DOCS = {"pw-reset": "reset your password from the account page", "parcel": "where is my parcel tracking",
        "refund": "refund invoice billing money back", "contact": "email or call support"}


class Keyword:
    def search(self, query, k, filters=None):  # pool replays a logged question's filters
        words = set(query.lower().split())
        ranked = sorted(DOCS, key=lambda d: (-len(words & set(DOCS[d].split())), d))
        return [{"id": d + "#1-1", "text": DOCS[d]} for d in ranked[:k]]


keyword = Keyword()
'''


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Path]:
    (tmp_path / "log_search.py").write_text(RETRIEVER, encoding="utf-8")
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:
        if str(tmp_path) in str(getattr(sys.modules[name], "__file__", "") or ""):
            del sys.modules[name]


def test_a_draft_pools_with_a_real_retriever_into_candidates_annotate_reads(
        project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = big_log(project)
    draft = project / "draft.jsonl"
    assert main(["sample", str(log), "--n", "6", "--by", "intent", "--seed", "9", "--out", str(draft)]) == 0
    _, records = draft_of(draft)
    assert [q.qid for q in read_queries(draft)] == [r["qid"] for r in records]  # pool's reader takes it as it is
    out = project / "candidates.jsonl"
    assert main(["pool", "--queries", str(draft), "--retriever", "log_search:keyword", "--rootdir", str(project),
                 "--depth", "3", "--seed", "1", "--out", str(out), "-q"]) == 0
    capsys.readouterr()
    pool = read_candidates(out)  # what `ragmetrics annotate` opens
    assert [q.qid for q in pool.questions] == [r["qid"] for r in records]
    assert [q.tags for q in pool.questions] == [tuple(r["tags"]) for r in records]
    assert all(len(q.candidates) == 3 and all(c.rel is None and c.text for c in q.candidates)
               for q in pool.questions)
    from pytest_ragmetrics.annotate.task import shown_questions

    assert len(shown_questions(pool)) == 6


def test_the_draft_becomes_a_golden_set_once_labelled(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_ragmetrics import load_golden

    draft = tmp_path / "draft.jsonl"
    assert main(["sample", str(big_log(tmp_path)), "--n", "3", "--seed", "2", "--out", str(draft)]) == 0
    with pytest.raises(InputError, match=rf"{draft.name}, line 2 \(qid 'log-[0-9a-f]{{12}}'\): candidates must be"):
        load_golden(draft)  # no labels yet: not a golden set, and the message says where
    meta, records = draft_of(draft)
    for r in records:
        r["candidates"] = [{"doc_id": "some-doc", "rel": 1}]
    draft.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in [{"_meta": meta}, *records]),
                     encoding="utf-8")
    golden = load_golden(draft)  # source: log, log and filters ride along
    assert [q.qid for q in golden] == [r["qid"] for r in records] and golden.judgments == "pooled"
