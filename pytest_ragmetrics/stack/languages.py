"""Which writing systems a corpus uses, and which of them an encoder covers.

An English-only encoder turns Chinese text into vectors that are close to
random, and nothing in the numbers says so: the vector route just gets worse.
So the stack compares what the corpus is written in with what the encoder was
trained on, and says so when they do not match.

Text is told apart by *script* (Han, Latin, Cyrillic, …), counted per
document: cheap, dependency-free and exact about what matters most here. A
script is not a language: French and English share the Latin script, so an
English-only encoder is not flagged on a French corpus. An encoder's languages
come from its model card (the ``language:`` field of the folder's
``README.md``) or from a declared list, and map to the scripts they are written
in; a card that lists many languages, or says ``multilingual``, covers them all.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "ALL_SCRIPTS",
    "Coverage",
    "SCRIPT_NAMES",
    "card_languages",
    "coverage",
    "dominant_script",
    "scripts_of_languages",
]

#: Script -> character ranges (letters only; digits and punctuation count for none).
_RANGES = {
    "han": "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff",
    "kana": "\u3040-\u30ff\u31f0-\u31ff",
    "hangul": "\uac00-\ud7af\u1100-\u11ff\u3130-\u318f",
    "cyrillic": "\u0400-\u04ff",
    "greek": "\u0370-\u03ff",
    "arabic": "\u0600-\u06ff\u0750-\u077f",
    "hebrew": "\u0590-\u05ff",
    "devanagari": "\u0900-\u097f",
    "thai": "\u0e00-\u0e7f",
}
_PATTERNS = {script: re.compile(f"[{chars}]") for script, chars in _RANGES.items()}
_NON_LATIN = re.compile("[" + "".join(_RANGES.values()) + "]")
#: How a script is named in messages.
SCRIPT_NAMES = {
    "latin": "Latin script", "han": "Chinese (Han script)", "kana": "Japanese (kana)",
    "hangul": "Korean (Hangul)", "cyrillic": "Cyrillic script", "greek": "Greek script",
    "arabic": "Arabic script", "hebrew": "Hebrew script", "devanagari": "Devanagari script",
    "thai": "Thai script",
}
ALL_SCRIPTS = frozenset(SCRIPT_NAMES)
#: A non-Latin script makes a text "its" script once it holds this share of the letters:
#: a Chinese passage quoting "V60" or "TDS" stays Chinese.
_SHARE = 0.2

#: ISO 639-1 code -> the scripts its text is written in; every code not listed writes Latin.
_LANGUAGE_SCRIPTS: dict[str, frozenset[str]] = {
    "zh": frozenset({"han"}),
    "ja": frozenset({"han", "kana"}),
    "ko": frozenset({"hangul", "han"}),
    **{c: frozenset({"cyrillic"}) for c in ("ru", "uk", "be", "bg", "sr", "mk", "kk", "ky", "mn", "tg")},
    **{c: frozenset({"arabic"}) for c in ("ar", "fa", "ur", "ps", "ug", "ku", "sd")},
    "el": frozenset({"greek"}),
    **{c: frozenset({"hebrew"}) for c in ("he", "yi")},
    **{c: frozenset({"devanagari"}) for c in ("hi", "mr", "ne", "sa")},
    "th": frozenset({"thai"}),
}
#: A card listing at least this many languages is treated as covering every script.
_MANY_LANGUAGES = 10


def dominant_script(text: str) -> str:
    """The script ``text`` is written in: the non-Latin script with most letters when it
    holds at least a fifth of them, else ``"latin"`` (also for text with no letters)."""
    if not _NON_LATIN.search(text):  # one pass in C for the common case
        return "latin"
    letters = sum(1 for ch in text if ch.isalpha())
    if not letters:
        return "latin"
    counts = {script: len(p.findall(text)) for script, p in _PATTERNS.items()}
    east_asian = counts["kana"] + counts["han"]
    if counts["kana"] >= _SHARE * east_asian and east_asian >= _SHARE * letters:
        # Japanese mixes kanji with kana (kana is what tells it from Chinese); a Chinese
        # page naming a Japanese title in kana keeps a small share and stays Chinese
        return "kana"
    script, count = max(counts.items(), key=lambda kv: kv[1])
    return script if count >= _SHARE * letters else "latin"


def scripts_of_languages(languages: Iterable[str]) -> frozenset[str]:
    """The scripts a list of language codes (``en``, ``zh-cn``, ``multilingual``) is written in."""
    codes = {str(code).strip().lower().replace("_", "-").split("-")[0] for code in languages}
    codes.discard("")
    if "multilingual" in codes or "mul" in codes or len(codes) >= _MANY_LANGUAGES:
        return ALL_SCRIPTS
    scripts: set[str] = set()
    for code in codes:
        scripts |= _LANGUAGE_SCRIPTS.get(code, frozenset({"latin"}))
    return frozenset(scripts)


def card_languages(model_dir: str | Path) -> tuple[str, ...] | None:
    """The ``language:`` of a model folder's card (``README.md`` front matter), None when it has none.

    Read with a few lines of parsing, not a YAML library: the field is a string
    or a list of strings, and ``tags: [multilingual]`` counts as well.
    """
    card = Path(model_dir) / "README.md"
    try:
        text = card.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    if not text.startswith("---"):
        return None
    end = text.find("\n---", 3)
    if end < 0:
        return None
    found: list[str] = []
    field: str | None = None
    for line in text[3:end].splitlines():
        key = re.match(r"^([A-Za-z_]+):\s*(.*)$", line)
        if key:
            field, value = key.group(1), key.group(2).strip()
            if field == "language" and value:
                found.extend(v.strip(" '\"") for v in value.strip("[]").split(","))
            elif field == "tags" and "multilingual" in value:
                found.append("multilingual")
            continue
        item = re.match(r"^\s*-\s*(.+)$", line)
        if item and field == "language":
            found.append(item.group(1).strip(" '\""))
        elif item and field == "tags" and item.group(1).strip(" '\"") == "multilingual":
            found.append("multilingual")
    found = [f for f in found if f]
    return tuple(found) or None


@dataclass(frozen=True)
class Coverage:
    """How much of a corpus an encoder covers, counted in documents."""

    encoder: str
    #: the encoder's languages as declared; None when unknown (then nothing is judged)
    languages: tuple[str, ...] | None
    documents: int
    #: script -> documents written in it
    scripts: dict[str, int]

    @property
    def covered_scripts(self) -> frozenset[str] | None:
        return None if self.languages is None else scripts_of_languages(self.languages)

    @property
    def uncovered(self) -> dict[str, int]:
        """Script -> documents the encoder does not cover (empty when its languages are unknown)."""
        covered = self.covered_scripts
        if covered is None:
            return {}
        return {s: n for s, n in self.scripts.items() if s not in covered}

    @property
    def uncovered_fraction(self) -> float:
        return sum(self.uncovered.values()) / self.documents if self.documents else 0.0

    def describe_gap(self) -> str:
        """``12 of 30 documents (40%) are Chinese (Han script), which all-MiniLM-L6-v2 (en) does not cover``."""
        gap = self.uncovered
        n = sum(gap.values())
        what = " or ".join(SCRIPT_NAMES.get(s, s) for s in sorted(gap, key=lambda s: -gap[s]))
        share = f"{100 * n / self.documents:.0f}%" if n * 100 >= self.documents else "<1%"
        langs = ", ".join(self.languages or ())
        return (f"{n:,} of {self.documents:,} documents ({share}) are {what}, which the encoder "
                f"{self.encoder} ({langs}) does not cover")


def coverage(encoder: str, languages: Sequence[str] | None, texts: Iterable[str]) -> Coverage:
    """Count the documents of each script in ``texts`` against ``encoder``'s ``languages``."""
    counts = Counter(dominant_script(t) for t in texts)
    return Coverage(encoder, tuple(languages) if languages is not None else None,
                    sum(counts.values()), dict(counts))
