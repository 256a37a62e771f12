"""Unjudged documents: what a pooled golden set does not know, measured instead of guessed.

A golden set declares how it was judged (:data:`~pytest_ragmetrics.golden.JUDGMENTS`):

- ``closed``: a document it does not list is not relevant (trec_eval's meaning);
- ``pooled``: a document it does not list was never judged. A new retriever that finds
  one scores as if it had missed, so a real improvement can read as a regression.

For a pooled set each scored query gets, over its top k documents (the ``_top`` the
baseline and the run artifact record):

- ``judged@k``: the share of the top k that carries a judgment, grade 0 included
  (ir_measures' ``Judged@k``: divided by min(k, documents returned));
- its unjudged documents, and of those the new ones: not in the baseline's ``_top``
  (``unjudged_new@k`` is their count, not a [0, 1] metric, so it is no gated metric);
- an upper bound of every metric: the query re-scored with each unjudged document in
  its top k judged at the set's top grade (today's number counts them 0); and the
  same with only the new ones, which decides whether a drop is ``inconclusive``; failing
  that, the same with every unjudged document of the top k (one the baseline held too can
  explain a drop by moving up). Judging a document relevant changes the baseline's numbers too
  (recall's denominator, nDCG's ideal), so the baseline's ``_top`` is re-scored with the same
  judgments and the two are compared; a baseline without ``_top`` is compared as it stands.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from pytest_ragmetrics.evaluation import score_query
from pytest_ragmetrics.golden import GoldenSet
from pytest_ragmetrics.measures import MeasurementConfig

__all__ = ["Unjudged", "top_grade", "judged_share", "measure_unjudged", "FIX_COMMAND"]

#: The command that writes a run's unjudged documents as candidates for ``ragmetrics annotate``.
FIX_COMMAND = "ragmetrics pool --run {artifact} --unjudged-only -o {out}"


def top_grade(golden: GoldenSet, relevance_level: int = 1) -> int:
    """The highest grade the set uses (at least the relevance level): what an unjudged
    document is counted at for the upper bound."""
    return max([relevance_level, *(g for q in golden for g in q.judgments.values())])


def judged_share(top: Sequence[str], judgments: Mapping[str, int]) -> float:
    """judged@k of a top-k document ranking: judged documents over those returned (0 when none)."""
    return sum(1 for d in top if d in judgments) / len(top) if top else 0.0


@dataclass
class Unjudged:
    """One query's unjudged documents in its top k, and what they could be worth."""

    judged: float  # judged@k
    docs: list[str]  # unjudged documents of the top k, in rank order
    new: list[str] | None  # of those, the ones not in the baseline's _top (None: the baseline has no _top)
    upper: dict[str, float] | None  # every metric with every unjudged document at the top grade
    upper_new: dict[str, float] | None  # the same with only the new ones (all of them without a baseline _top)
    baseline_upper_new: dict[str, float] | None = None  # the baseline's _top re-scored with those judgments
    #: the baseline's _top re-scored with every unjudged document of ``top`` judged (None: no _top, or none):
    #: an unjudged document both tops held can still explain a drop by moving up
    baseline_upper: dict[str, float] | None = None


def _bound(metrics: Mapping[str, float] | None, now: Mapping[str, float]) -> dict[str, float] | None:
    """An upper bound from the ranking re-scored with its unjudged documents judged (None: none were)."""
    if metrics is None:
        return None
    # re-judging can only help a ranking that found the documents; never report a bound under today's number
    return {m: max(v, now.get(m, v)) for m, v in metrics.items()}


def measure_unjudged(top: Sequence[str], judgments: Mapping[str, int], metrics: Mapping[str, float],
                     config: MeasurementConfig, grade: int, baseline_top: Sequence[str] | None) -> Unjudged:
    """judged@k, the unjudged documents of ``top`` and the two upper bounds of ``metrics``.

    ``top`` is the query's document ranking (mapped, deduplicated, at most k);
    ``baseline_top`` the baseline entry's ``_top``, or None when it has none.

    The four re-scorings often coincide (no baseline ``_top``; every unjudged document new; the same
    top as the baseline's, as an unchanged retriever gives): each distinct one is scored once.
    """
    scored: dict[tuple[tuple[str, ...], frozenset[str]], dict[str, float] | None] = {}

    def rescored(ranking: Sequence[str], raised: Sequence[str]) -> dict[str, float] | None:
        """``ranking`` scored with the documents ``raised`` judged at ``grade`` (None: none raised)."""
        if not raised:
            return None
        key = (tuple(ranking), frozenset(raised))
        if key not in scored:
            scored[key] = score_query(list(ranking), {**judgments, **{d: grade for d in raised}}, config)[1]
        found = scored[key]
        return None if found is None else dict(found)

    docs = [d for d in top if d not in judgments]
    new = None if baseline_top is None else [d for d in docs if d not in set(baseline_top)]
    base = base_all = None
    if new:
        base = rescored(baseline_top or (), new)
    if baseline_top is not None and docs:
        base_all = rescored(baseline_top, docs)
    return Unjudged(
        judged=judged_share(top, judgments),
        docs=docs,
        new=new,
        upper=_bound(rescored(top, docs), metrics),
        upper_new=_bound(rescored(top, docs if new is None else new), metrics),
        baseline_upper_new=base,
        baseline_upper=base_all,
    )
