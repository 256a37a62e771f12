"""Gold ids checked against the corpus: a gold id no document carries can never be retrieved.

A relevant gold id with a typo (``queen-marker`` for the document ``queen-marking``)
scores 0 on every run, so it can never regress and hides in the means. Checked
wherever the corpus is known (``rag_corpus``, or a retriever's ``doc_ids()``), at
document level: gold ids and corpus ids both go through the id rule. Only ids
judged relevant are reported; a grade-0 id that names nothing changes no score.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any, Iterable

from pytest_ragmetrics.errors import listed
from pytest_ragmetrics.golden import GoldenSet
from pytest_ragmetrics.metrics import document_of

__all__ = ["GoldCheck", "MissingGold", "check_gold", "retriever_doc_ids"]


@dataclass(frozen=True)
class MissingGold:
    """One relevant gold id of one query that no corpus document carries."""

    qid: str
    doc: str
    suggestions: tuple[str, ...] = ()

    def text(self) -> str:
        hint = f" (did you mean {self.suggestions[0]!r}?)" if self.suggestions else ""
        return f"{self.qid!r} gold {self.doc!r}{hint}"


@dataclass
class GoldCheck:
    """The outcome of checking every relevant gold id against one corpus."""

    source: str
    checked: int
    missing: list[MissingGold] = field(default_factory=list)
    #: queries none of whose relevant gold ids is in the corpus: they can never score above 0
    lost: list[str] = field(default_factory=list)

    def allowed(self) -> list[str]:
        """``qid/doc`` of every missing id, sorted: what a baseline records it was allowed."""
        return sorted(f"{m.qid}/{m.doc}" for m in self.missing)

    def header(self) -> str:
        return f"gold ids: {self.checked} checked against {self.source}, {len(self.missing)} missing"

    def warning(self) -> str | None:
        """The summary's note on missing gold ids, or None when every one was found."""
        if not self.missing:
            return None
        n = len(self.missing)
        text = (f"WARNING: {n} relevant gold id{'s' if n != 1 else ''} of {self.checked} "
                f"{'is' if n == 1 else 'are'} not in the corpus ({self.source}): "
                f"{listed([m.text() for m in self.missing], 10)}. A gold id no document carries can never be "
                "retrieved: it scores 0 on every run and hides a regression; fix the golden set")
        if self.lost:
            text += (f"\n{len(self.lost)} quer{'y is' if len(self.lost) == 1 else 'ies are'} unscorable, as none of "
                     f"{'its' if len(self.lost) == 1 else 'their'} relevant gold ids is in the corpus: "
                     f"{listed(self.lost)}")
        return text

    def reason(self, qid: str) -> str | None:
        """Why ``qid`` is unscorable, or None when some relevant gold id of it is in the corpus."""
        if qid not in self.lost:
            return None
        docs = [m.doc for m in self.missing if m.qid == qid]
        return f"none of its relevant gold ids is in the corpus ({self.source}): {listed(docs)}"

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "checked": self.checked, "lost": list(self.lost),
                "missing": [[m.qid, m.doc, list(m.suggestions)] for m in self.missing]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GoldCheck:
        return cls(data["source"], data["checked"], [MissingGold(q, d, tuple(s)) for q, d, s in data["missing"]],
                   list(data["lost"]))


def check_gold(golden: GoldenSet, doc_ids: Iterable[str], source: str, relevance_level: int,
               separator: str | None) -> GoldCheck:
    """Check each query's relevant gold ids (grade >= ``relevance_level``) against ``doc_ids``."""
    corpus = {document_of(str(d), separator) for d in doc_ids}
    ordered = sorted(corpus)
    check = GoldCheck(source, 0)
    for query in golden:
        relevant = {document_of(doc, separator) for doc in query.relevant(relevance_level)}
        missing = sorted(relevant - corpus)
        check.checked += len(relevant)
        for doc in missing:
            check.missing.append(MissingGold(query.qid, doc, tuple(difflib.get_close_matches(doc, ordered, n=3))))
        if relevant and not relevant - set(missing):
            check.lost.append(query.qid)
    return check


def retriever_doc_ids(retriever: Any) -> list[str] | None:
    """The document ids a retriever says it holds (``doc_ids()``), or None when it offers none."""
    doc_ids = getattr(retriever, "doc_ids", None)
    if not callable(doc_ids):
        return None
    return [str(d) for d in doc_ids()]
