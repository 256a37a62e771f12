"""Leakage check: golden questions that appear verbatim or near-verbatim in the corpus.

When the numbers look too good, the usual cause is that the questions themselves
sit in the indexed text (written by copying a sentence from the document, or the
evaluation set was indexed). Such a question is found by lexical match alone and
says nothing about how the retriever serves a user who words things their own way.

How a match is decided:

- Text is normalised the same way on both sides: Unicode NFKC, case folded,
  punctuation and symbols dropped, whitespace collapsed. Latin-script text is
  split into words; CJK text (Han, kana) into single characters.
- A question's n-grams are word 5-grams, or character 8-grams when most of its
  tokens are CJK characters. Its *overlap* with a document (or chunk) is the
  share of its distinct n-grams found there (containment, not Jaccard: a long
  document is not penalised for being long).
- ``verbatim``: the whole normalised question occurs contiguously in the text.
  ``near``: overlap at or above the threshold (default 0.6) without that.
  A question shorter than an n-gram is checked for a verbatim match only; one
  shorter than half an n-gram (2 words, 3 characters) is too short to mean
  anything and is reported as not checked.

Speed: the questions' n-grams go into an inverted index (n-gram -> questions);
each document is turned into its set of n-grams once and intersected with the
index in C (a set intersection), so the cost is one pass over the corpus text,
whatever the number of questions: SciFact (5,183 documents, 300 claims) takes
about a second.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from pytest_ragmetrics.errors import RagMetricsError

__all__ = [
    "WORD_N",
    "CHAR_N",
    "Leak",
    "LeakageReport",
    "tokens",
    "normalize",
    "is_cjk",
    "find_leaks",
    "check_leakage",
    "render_table",
]

WORD_N = 5
CHAR_N = 8
DEFAULT_THRESHOLD = 0.6

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ebef"
_TOKEN = re.compile(rf"[{_CJK}]|[^\W_{_CJK}]+")
_CJK_CHAR = re.compile(rf"[{_CJK}]")


def tokens(text: str) -> list[str]:
    """Normalised tokens: words for Latin-script text, single characters for CJK."""
    return _TOKEN.findall(unicodedata.normalize("NFKC", text).casefold())


def normalize(text: str) -> str:
    """Lower-cased text without punctuation, whitespace collapsed (tokens joined by spaces)."""
    return " ".join(tokens(text))


def is_cjk(toks: Sequence[str]) -> bool:
    """True when most tokens are CJK characters (compare characters, not words)."""
    if not toks:
        return False
    return sum(1 for t in toks if len(t) == 1 and _CJK_CHAR.match(t)) * 2 > len(toks)


def _grams(toks: Sequence[str], n: int) -> set[tuple[str, ...]]:
    if len(toks) < n:
        return set()
    return set(zip(*(toks[i:] for i in range(n))))


@dataclass(frozen=True)
class Leak:
    """A question found in a document (or chunk) of the corpus."""

    qid: str
    question: str
    doc_id: str
    chunk_id: str | None  # None when whole documents were checked
    overlap: float        # share of the question's n-grams found there, 0-1
    kind: str             # "verbatim" or "near"
    grade: int | None     # the question's judgment of this document, None if unjudged

    def to_dict(self) -> dict[str, Any]:
        return {"qid": self.qid, "question": self.question, "doc_id": self.doc_id, "chunk_id": self.chunk_id,
                "overlap": round(self.overlap, 6), "kind": self.kind, "grade": self.grade}


@dataclass
class LeakageReport:
    """Every leak found, and what was checked, so "none found" can be read with its n."""

    leaks: list[Leak]
    n_questions: int
    n_units: int
    unit: str                      # "documents" or "chunks of N characters"
    threshold: float
    word_n: int = WORD_N
    char_n: int = CHAR_N
    too_short: list[str] = field(default_factory=list)
    source_golden: str = ""
    source_corpus: str = ""

    @property
    def leaked_qids(self) -> list[str]:
        return list(dict.fromkeys(leak.qid for leak in self.leaks))

    def verbatim_qids(self) -> list[str]:
        return list(dict.fromkeys(leak.qid for leak in self.leaks if leak.kind == "verbatim"))

    def judged_qids(self) -> list[str]:
        """Questions found inside a document judged relevant to them: their metrics are inflated."""
        return list(dict.fromkeys(leak.qid for leak in self.leaks if leak.grade))

    def to_dict(self) -> dict[str, Any]:
        return {
            "golden": self.source_golden, "corpus": self.source_corpus,
            "n_questions": self.n_questions, "n_units": self.n_units, "unit": self.unit,
            "threshold": self.threshold, "word_n": self.word_n, "char_n": self.char_n,
            "n_leaked_questions": len(self.leaked_qids),
            "n_verbatim_questions": len(self.verbatim_qids()),
            "n_in_judged_relevant": len(self.judged_qids()),
            "too_short": self.too_short,
            "leaks": [leak.to_dict() for leak in self.leaks],
        }


def find_leaks(
    questions: Iterable[Any],
    units: Iterable[tuple[str, str | None, str]],
    *,
    threshold: float = DEFAULT_THRESHOLD,
    word_n: int = WORD_N,
    char_n: int = CHAR_N,
) -> tuple[list[Leak], int, list[str]]:
    """Match questions against text units.

    ``questions``: golden :class:`~pytest_ragmetrics.Query` objects (or anything
    with ``qid``, ``text`` and optionally ``judgments``). ``units``:
    ``(doc_id, chunk_id or None, text)``. Returns the leaks (one per question and
    document: its best chunk), in question order then overlap, the number of
    units scanned, and the ids of questions too short to check.
    """
    if not 0 < threshold <= 1:
        raise RagMetricsError(f"threshold must be in (0, 1], got {threshold}")
    if word_n < 1 or char_n < 1:
        raise RagMetricsError(f"n-gram sizes must be >= 1, got words {word_n}, characters {char_n}")
    qs = list(questions)
    prepared: list[tuple[Any, str, int, int]] = []  # query, normalised text, its n, its n-gram count
    index: dict[int, dict[tuple[str, ...], list[int]]] = {}  # n -> n-gram -> question positions
    too_short: list[str] = []
    for q in qs:
        toks = tokens(q.text)
        full = char_n if is_cjk(toks) else word_n
        if len(toks) < max(1, (full + 1) // 2):
            too_short.append(q.qid)
            continue
        n = min(full, len(toks))
        grams = _grams(toks, n)
        position = len(prepared)
        prepared.append((q, " ".join(toks), n, len(grams)))
        by_gram = index.setdefault(n, {})
        for g in grams:
            by_gram.setdefault(g, []).append(position)
    keys = {n: by_gram.keys() for n, by_gram in index.items()}

    best: dict[tuple[int, str], tuple[float, bool, str | None]] = {}
    n_units = 0
    for doc_id, chunk_id, text in units:
        n_units += 1
        if not prepared:
            continue
        toks = tokens(text)
        counts: dict[int, int] = {}
        for n, by_gram in index.items():
            for g in _grams(toks, n) & keys[n]:
                for position in by_gram[g]:
                    counts[position] = counts.get(position, 0) + 1
        if not counts:
            continue
        padded: str | None = None
        for position, hits in counts.items():
            _, qnorm, _, total = prepared[position]
            overlap = hits / total
            if overlap < threshold:
                continue
            verbatim = False
            if hits == total:
                if padded is None:
                    padded = f" {' '.join(toks)} "
                verbatim = f" {qnorm} " in padded
            key = (position, doc_id)
            old = best.get(key)
            if old is None or (verbatim, overlap) > (old[1], old[0]):
                best[key] = (overlap, verbatim, chunk_id)

    leaks = []
    for (position, doc_id), (overlap, verbatim, chunk_id) in best.items():
        q = prepared[position][0]
        judgments = getattr(q, "judgments", None) or {}
        leaks.append(Leak(q.qid, q.text, doc_id, chunk_id, overlap, "verbatim" if verbatim else "near",
                          judgments.get(doc_id)))
    order = {q.qid: i for i, q in enumerate(qs)}
    leaks.sort(key=lambda leak: (order[leak.qid], leak.kind != "verbatim", -leak.overlap, leak.doc_id))
    return leaks, n_units, too_short


def check_leakage(
    golden: Any,
    corpus: Any,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    chunk_size: int | None = None,
    overlap: int = 60,
    word_n: int = WORD_N,
    char_n: int = CHAR_N,
) -> LeakageReport:
    """Check a golden set (path or :class:`GoldenSet`) against a corpus (path or documents).

    With ``chunk_size`` the corpus is cut as the reference stack cuts it
    (title prefixed to each chunk) and leaks name the best chunk; without it,
    each whole document (title and text) is checked, which is the more
    sensitive test: a question split by a chunk boundary is still found.
    """
    from pytest_ragmetrics.chunking import chunk_documents
    from pytest_ragmetrics.corpus import load_corpus
    from pytest_ragmetrics.golden import GoldenSet, load_golden

    gold = golden if isinstance(golden, GoldenSet) else load_golden(golden)
    docs = load_corpus(corpus) if isinstance(corpus, (str, Path)) else list(corpus)
    if chunk_size is None:
        units: Iterable[tuple[str, str | None, str]] = (
            (d.doc_id, None, f"{d.title}\n{d.text}" if d.title else d.text) for d in docs
        )
        unit = "whole documents"
    else:
        try:
            chunks = chunk_documents(docs, chunk_size, overlap)
        except ValueError as exc:
            raise RagMetricsError(f"cannot chunk the corpus: {exc}") from None
        units = ((c.doc_id, c.chunk_id, c.text) for c in chunks)
        unit = f"chunks of {chunk_size} characters ({overlap} overlap)"
    leaks, n_units, too_short = find_leaks(gold, units, threshold=threshold, word_n=word_n, char_n=char_n)
    return LeakageReport(leaks, len(gold), n_units, unit, threshold, word_n, char_n, too_short,
                         source_golden=str(gold.source),
                         source_corpus=str(corpus) if isinstance(corpus, (str, Path)) else "")


# ------------------------------------------------------------------------------ output


def _clip(text: str, width: int = 60) -> str:
    text = " ".join(text.split()).replace("|", "\\|")
    return text if len(text) <= width else text[: width - 1] + "…"


def render_table(report: LeakageReport, per_question: int = 5) -> str:
    """Summary with n, then one row per (question, document), at most ``per_question`` each."""
    from pytest_ragmetrics.report.tables import markdown_table

    r = report
    n = r.n_questions
    leaked = r.leaked_qids
    head = (f"Leakage check: {n} questions of {r.source_golden or 'the golden set'} against "
            f"{r.n_units:,} {r.unit.split(' (')[0] if r.unit.startswith('chunks') else 'documents'}"
            f"{' of ' + r.source_corpus if r.source_corpus else ''}")
    out = [head,
           f"(word {r.word_n}-grams, CJK character {r.char_n}-grams; near-verbatim when at least "
           f"{r.threshold:.0%} of a question's n-grams occur in one "
           f"{'chunk' if r.unit.startswith('chunks') else 'document'}).",
           ""]
    if not leaked:
        out.append(f"No question appears verbatim or near-verbatim in the corpus (0 of {n}).")
    else:
        share = len(leaked) / n if n else 0.0
        out.append(
            f"{len(leaked)} of {n} questions ({share:.1%}) appear in the corpus: "
            f"{len(r.verbatim_qids())} verbatim, {len(leaked) - len(r.verbatim_qids())} near-verbatim only; "
            f"{len(r.judged_qids())} of them inside a document judged relevant to them."
        )
        out.append("")
        rows: list[list[object]] = []
        shown: dict[str, int] = {}
        hidden: dict[str, int] = {}
        for leak in r.leaks:
            if shown.get(leak.qid, 0) >= per_question:
                hidden[leak.qid] = hidden.get(leak.qid, 0) + 1
                continue
            shown[leak.qid] = shown.get(leak.qid, 0) + 1
            where = leak.chunk_id or leak.doc_id
            rows.append([leak.qid, _clip(leak.question), where, f"{leak.overlap:.2f}", leak.kind,
                         "—" if leak.grade is None else leak.grade])
        out.append(markdown_table(["qid", "question", "document" if not r.unit.startswith("chunks") else "chunk",
                                   "overlap", "kind", "judged grade"], rows))
        if hidden:
            out.append(f"… and {sum(hidden.values())} more matches of {len(hidden)} questions (JSON lists all).")
        out.append("")
        out.append(
            "A leaked question is found by copying, not by understanding: its scores overstate what users "
            "who word things their own way will get. Rewrite it in a user's words, or tag it so it can be "
            "reported apart."
        )
    if r.too_short:
        out.append(f"{len(r.too_short)} questions are too short to check (e.g. {r.too_short[0]!r}).")
    return "\n".join(out).rstrip() + "\n"
