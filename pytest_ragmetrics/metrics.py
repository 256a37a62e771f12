"""Metric kernels: pure functions over one ranking and its judgments.

The scoring of a query happens in two steps. :func:`judge` walks the ranked
document ids once and records where the judged documents sit; every measure is
then a few arithmetic operations on that :class:`Judged` record, so adding a
metric to a run costs almost nothing and all metrics agree on one reading of
the ranking.

Policies (the same everywhere in the package, and recorded in fingerprints):

- Ranks are 1-based. The ranking is used in the order given; it is never re-sorted.
- Repeated ids are the caller's business: :func:`document_ranking` maps chunk
  ids to documents and drops repeats before anything is judged.
- Unjudged documents have grade 0. Grades must be >= 0.
- ``R`` is the number of judged documents with grade >= the relevance level.
  A query with ``R == 0`` has no relevant document: it is not scored at all
  (:func:`score` returns ``None``) rather than scored 0. With
  ``keep_graded=True`` (trec_eval's reading, used by ``evaluate``) a query whose
  positive grades all lie below the level is still scored: nDCG from its grades,
  the level-based measures 0, as trec_eval reports them.
- ``precision@k`` always divides by k, even if fewer than k came back.
- nDCG's ideal ranking is made from all judged grades, sorted, cut at k.
  Gains: ``exponential`` 2^g - 1 or ``linear`` g; discount 1/log2(rank + 1).
- A document is judged when the judgments list it, grade 0 included; only
  ``judged@k`` and ``ndcg_judged@k`` tell a judged 0 from an unjudged document.
  ``judged@k`` divides by min(k, documents ranked), as ir_measures' ``Judged@k``;
  ``ndcg_judged@k`` removes the unjudged documents before cutting at k (trec_eval -J).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from functools import cache
from itertools import islice
from typing import Callable, Iterable, Mapping, Sequence

from pytest_ragmetrics.measures import DEFAULT_ID_SEPARATOR, Measure

__all__ = ["Judged", "judge", "score", "document_of", "document_ranking", "ideal_grades"]


class Judged:
    """Where a query's judged documents landed in one ranking.

    ``graded``: (0-based position, grade) of every ranked document with grade > 0,
    in rank order. ``relevant_ranks``: 1-based ranks of documents with
    grade >= the relevance level. ``ideal``: all positive judged grades, sorted
    descending. ``n_relevant``: R. ``n_ranked``: documents in the ranking.
    ``judged``: 0-based positions of the ranked documents that carry a judgment
    (grade 0 included). ``condensed``: the grades of the judged documents in rank
    order, unjudged ones skipped (the ranking nDCG over judged documents reads).
    """

    __slots__ = ("graded", "relevant_ranks", "ideal", "n_relevant", "n_ranked", "judged", "condensed")

    def __init__(
        self,
        graded: list[tuple[int, int]],
        relevant_ranks: list[int],
        ideal: Sequence[int],
        n_relevant: int,
        n_ranked: int,
        judged: Sequence[int] = (),
        condensed: Sequence[int] = (),
    ) -> None:
        self.graded = graded
        self.relevant_ranks = relevant_ranks
        self.ideal = ideal
        self.n_relevant = n_relevant
        self.n_ranked = n_ranked
        self.judged = judged
        self.condensed = condensed


def ideal_grades(judgments: Mapping[str, int]) -> tuple[int, ...]:
    """Positive grades sorted best first: the ideal ranking nDCG divides by."""
    return tuple(sorted((g for g in judgments.values() if g > 0), reverse=True))


def judge(
    ranking: Sequence[str],
    judgments: Mapping[str, int],
    relevance_level: int = 1,
    depth: int | None = None,
    ideal: Sequence[int] | None = None,
    condensed_depth: int | None = None,
) -> Judged:
    """Look up each ranked id's grade, down to ``depth`` (None: all of them).

    ``condensed_depth``: how many judged documents to collect for the judged-only
    nDCG, read past ``depth`` since unjudged ones are skipped (None: all, 0: none).
    """
    get = judgments.get
    ranked = ranking if depth is None else ranking[:depth]
    grades = [get(d) for d in ranked]
    graded = [(i, g) for i, g in enumerate(grades) if g is not None and g > 0]
    judged = [i for i, g in enumerate(grades) if g is not None]
    relevant_ranks = [i + 1 for i, g in graded if g >= relevance_level]
    if ideal is None:
        ideal = ideal_grades(judgments)
    n_relevant = sum(1 for g in ideal if g >= relevance_level)
    condensed = list(islice((g for d in ranking if (g := get(d)) is not None), condensed_depth))
    return Judged(graded, relevant_ranks, ideal, n_relevant, len(ranking), judged, condensed)


@cache
def _discount(position: int) -> float:
    """1 / log2(rank + 1) for a 0-based position (rank = position + 1)."""
    return 1.0 / math.log2(position + 2)


def _gain_function(gain: str) -> Callable[[int], float]:
    if gain == "linear":
        return float
    return _exponential_gain


@cache
def _exponential_gain(grade: int) -> float:
    return 2.0**grade - 1.0


def _cut(k: int | None) -> float:
    return math.inf if k is None else k


def _recall(j: Judged, k: int | None, gain: str) -> float:
    if not j.n_relevant:  # only with keep_graded: trec_eval reports 0
        return 0.0
    return bisect_right(j.relevant_ranks, _cut(k)) / j.n_relevant


def _precision(j: Judged, k: int | None, gain: str) -> float:
    assert k is not None
    return bisect_right(j.relevant_ranks, k) / k


def _hit_rate(j: Judged, k: int | None, gain: str) -> float:
    ranks = j.relevant_ranks
    return 1.0 if ranks and ranks[0] <= _cut(k) else 0.0


def _mrr(j: Judged, k: int | None, gain: str) -> float:
    ranks = j.relevant_ranks
    return 1.0 / ranks[0] if ranks and ranks[0] <= _cut(k) else 0.0


def _map(j: Judged, k: int | None, gain: str) -> float:
    if not j.n_relevant:  # only with keep_graded: trec_eval reports 0
        return 0.0
    limit = _cut(k)
    total = 0.0
    for found, rank in enumerate(j.relevant_ranks, start=1):
        if rank > limit:
            break
        total += found / rank
    return total / j.n_relevant


def _ndcg(j: Judged, k: int | None, gain: str) -> float:
    return _ndcg_of(j.graded, j.ideal, k, gain)


def _ndcg_judged(j: Judged, k: int | None, gain: str) -> float:
    """nDCG over the judged documents only: unjudged ones leave the ranking before the
    cut, so a shallow pool does not read as misses (trec_eval -J, ir_measures judged_only)."""
    return _ndcg_of([(i, grade) for i, grade in enumerate(j.condensed) if grade > 0], j.ideal, k, gain)


def _ndcg_of(graded: Iterable[tuple[int, int]], ideal_all: Sequence[int], k: int | None, gain: str) -> float:
    g = _gain_function(gain)
    limit = _cut(k)
    dcg = 0.0
    for position, grade in graded:
        if position >= limit:
            break
        dcg += g(grade) * _discount(position)
    ideal = ideal_all if k is None else ideal_all[:k]
    idcg = 0.0
    for position, grade in enumerate(ideal):
        idcg += g(grade) * _discount(position)
    return dcg / idcg if idcg > 0.0 else 0.0


def _judged(j: Judged, k: int | None, gain: str) -> float:
    """Share of the top k that carries a judgment, over min(k, documents ranked) as
    ir_measures' Judged@k: how far the judgments reach, not whether the ranking is good."""
    shown = j.n_ranked if k is None else min(k, j.n_ranked)
    if not shown:
        return 0.0
    return bisect_right(j.judged, shown - 1) / shown


_KERNELS: dict[str, Callable[[Judged, int | None, str], float]] = {
    "recall": _recall,
    "hit_rate": _hit_rate,
    "precision": _precision,
    "mrr": _mrr,
    "ndcg": _ndcg,
    "map": _map,
    "judged": _judged,
    "ndcg_judged": _ndcg_judged,
}


def score(
    judged: Judged, measures: Iterable[Measure], gain: str = "exponential", keep_graded: bool = False
) -> dict[str, float] | None:
    """Every measure for one judged ranking, or ``None`` when R == 0 (not scorable).

    ``keep_graded``: score a query with positive grades below the relevance level
    (R == 0) as trec_eval does instead of returning ``None``; nDCG's gain comes
    from every positive grade, so it is defined there, and the rest are 0.
    """
    if judged.n_relevant == 0 and not (keep_graded and judged.ideal):
        return None
    return {str(m): _KERNELS[m.name](judged, m.cutoff, gain) for m in measures}


def document_of(rid: str, separator: str | None = DEFAULT_ID_SEPARATOR) -> str:
    """The document a ranked id belongs to: the prefix before the first ``separator``
    (``"guide#2-3"`` is ``"guide"`` with ``"#"``); without a separator, the id itself.

    The one mapping rule: scores, explanations and pools must agree on which
    document a chunk is.
    """
    return rid.partition(separator)[0] if separator else rid


def document_ranking(ids: Iterable[str], separator: str | None = DEFAULT_ID_SEPARATOR) -> list[str]:
    """Map ranked ids to documents (:func:`document_of`) and drop repeats, keeping the first.

    The first occurrence of a document is its best rank, so later ones are
    removed and no metric can exceed 1.
    """
    # dicts keep insertion order: the first occurrence wins
    return list(dict.fromkeys(document_of(rid, separator) for rid in ids))
