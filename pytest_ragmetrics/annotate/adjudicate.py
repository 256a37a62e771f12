"""Adjudication: two annotators' judgments of one pool become one file.

Pairs both graded alike are carried over as they are; pairs graded differently are
the disagreements an adjudicator settles, seeing both grades and both notes. Pairs
only one annotator judged are carried over from that annotator (nobody disagreed
with them) and counted, so the adjudicated file loses no judgment. The result is a
judgments file like any annotator's, recorded as ``adjudicated(A,B)``.
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_ragmetrics.annotate.judgments import MAX_NOTE, Judgment, Judgments
from pytest_ragmetrics.errors import RagMetricsError
from pytest_ragmetrics.tools.candidates import Candidates

__all__ = ["Disagreement", "Comparison", "adjudicator_name", "compare_judgments", "merge_notes",
           "seed_adjudicated"]


@dataclass(frozen=True)
class Disagreement:
    """One (question, document) pair the two annotators graded differently."""

    qid: str
    doc_id: str
    a: Judgment
    b: Judgment


@dataclass
class Comparison:
    """Two annotators' files over one pool: what agrees, what does not, what only one judged."""

    a: Judgments
    b: Judgments
    agreed: dict[tuple[str, str], Judgment]
    one_sided: dict[tuple[str, str], Judgment]
    disagreements: list[Disagreement]

    @property
    def annotator(self) -> str:
        return adjudicator_name(self.a.annotator, self.b.annotator)

    def disagreement(self, qid: str, doc_id: str) -> Disagreement | None:
        for d in self.disagreements:
            if d.qid == qid and d.doc_id == doc_id:
                return d
        return None


def adjudicator_name(a: str, b: str) -> str:
    return f"adjudicated({a},{b})"


def merge_notes(a_name: str, a_note: str, b_name: str, b_note: str) -> str:
    """One note from two: kept once when alike or when only one annotator wrote one
    (cut at :data:`MAX_NOTE`)."""
    a_note, b_note = a_note.strip(), b_note.strip()
    if not a_note or a_note == b_note:
        return b_note
    if not b_note:
        return a_note
    return f"{a_name}: {a_note} | {b_name}: {b_note}"[:MAX_NOTE]


def compare_judgments(pool: Candidates, a: Judgments, b: Judgments) -> Comparison:
    """Split the pairs of ``a`` and ``b`` (both made from ``pool``) in the pool's display order."""
    if a.annotator == b.annotator:
        raise RagMetricsError(f"both files are {a.annotator!r}'s judgments; adjudication takes two annotators")
    pa, pb = a.pairs(), b.pairs()
    agreed: dict[tuple[str, str], Judgment] = {}
    one_sided: dict[tuple[str, str], Judgment] = {}
    disagreements: list[Disagreement] = []
    for question in pool.questions:
        for doc in question.order:
            key = (question.qid, doc)
            ja, jb = pa.get(key), pb.get(key)
            if ja is not None and jb is not None:
                if ja.rel == jb.rel:
                    dates = [d for d in (ja.judged_at, jb.judged_at) if d]  # confirmed when the later one judged
                    agreed[key] = Judgment(ja.rel, merge_notes(a.annotator, ja.note, b.annotator, jb.note),
                                           max(dates) if dates else None)
                else:
                    disagreements.append(Disagreement(question.qid, doc, ja, jb))
            elif ja is not None or jb is not None:
                one_sided[key] = ja or jb  # type: ignore[assignment]
    return Comparison(a, b, agreed, one_sided, disagreements)


def seed_adjudicated(comparison: Comparison, existing: Judgments) -> Judgments:
    """The adjudicated judgments at start: agreements and one-sided pairs from the two files,
    plus the adjudicator's earlier decisions on pairs that still disagree (``existing``, the
    resumed output, which this replaces in place)."""
    decided = {(d.qid, d.doc_id): existing.get(d.qid, d.doc_id) for d in comparison.disagreements}
    existing.by_question = {}
    for (qid, doc), judgment in {**comparison.one_sided, **comparison.agreed}.items():
        existing.set(qid, doc, judgment.rel, judgment.note, judgment.judged_at)
    for (qid, doc), earlier in decided.items():
        if earlier is not None:
            existing.set(qid, doc, earlier.rel, earlier.note, earlier.judged_at)
    return existing
