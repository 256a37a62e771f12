"""Questions with no answer: false retrieval, its rate, and the threshold trade-off.

A golden question marked ``answerable: false`` has no gold document, so recall, MRR or
nDCG mean nothing for it: scoring it 0 would punish every retriever alike, 1 would
reward one that answers anyway, and leaving it out would hide it. It is scored by
``false_retrieval`` instead, outside every other mean:

- 1 when the retriever returned any result scoring at or above ``rag_answer_threshold``;
- 1 for any result at all when no threshold is set, or the result carries no score
  (a generator fed a result answers from it, whatever its score);
- 0 otherwise (nothing came back, or every score is under the threshold).

``false_retrieval_rate`` is its mean over the unanswerable questions. For this metric,
higher is worse. :func:`tradeoff` shows, from one run's scores, how answerable recall@k
and the false-retrieval rate move as the threshold moves: how a team picks it.
Pure functions over plain data, used by the plugin and the CLI alike.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

__all__ = ["FALSE_RETRIEVAL", "RATE", "false_retrieval", "false_retrieval_rate", "parse_threshold",
           "TradeoffRow", "tradeoff", "candidate_thresholds", "kept"]

#: The per-query metric of an unanswerable question, and its mean.
FALSE_RETRIEVAL = "false_retrieval"
RATE = "false_retrieval_rate"
#: At most this many candidate thresholds in the trade-off (quantiles of the scores beyond it).
MAX_CANDIDATES = 12


def parse_threshold(value: Any, option: str = "rag_answer_threshold") -> float | None:
    """``rag_answer_threshold`` as a float (``None``/empty: no threshold); anything that is not
    a finite number raises :class:`ValueError` naming ``option``."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool):
        raise ValueError(f"{option} must be a number (a retriever score), got {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{option} must be a number (a retriever score), got {value!r}") from None
    if not math.isfinite(number):
        raise ValueError(f"{option} must be a finite number (a retriever score), got {value!r}")
    return number


def kept(scores: Sequence[float | None], threshold: float | None) -> list[bool]:
    """Which results pass ``threshold``: all without one; a scoreless result always passes
    (there is no score to hold it back)."""
    return [threshold is None or s is None or s >= threshold for s in scores]


def false_retrieval(scores: Sequence[float | None], threshold: float | None) -> int:
    """1 if any result survives ``threshold`` (see the module), else 0; ``scores`` holds one
    entry per returned result (None where the retriever gave no score)."""
    return int(any(kept(scores, threshold)))


def false_retrieval_rate(values: Iterable[float]) -> float | None:
    """The mean of per-query false retrievals (None for no unanswerable question)."""
    rows = list(values)
    return math.fsum(rows) / len(rows) if rows else None


@dataclass(frozen=True)
class TradeoffRow:
    """One candidate threshold: answerable recall@k and the false-retrieval rate under it."""

    threshold: float | None  # None: no threshold (every result kept)
    recall: float | None
    rate: float | None
    in_force: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"threshold": self.threshold, "recall": self.recall, "false_retrieval_rate": self.rate,
                "in_force": self.in_force}


def candidate_thresholds(scores: Iterable[float], limit: int = MAX_CANDIDATES) -> list[float]:
    """The distinct observed scores, ascending; quantiles of them when there are more than ``limit``."""
    distinct = sorted(set(scores))
    if len(distinct) <= limit:
        return distinct
    return sorted({distinct[round(i * (len(distinct) - 1) / (limit - 1))] for i in range(limit)})


def tradeoff(
    answerable: Mapping[str, tuple[Sequence[str], Sequence[float | None], Mapping[str, int]]],
    unanswerable: Mapping[str, Sequence[float | None]],
    k: int,
    relevance_level: int,
    in_force: float | None,
) -> list[TradeoffRow]:
    """Recall@k over the answerable questions and the false-retrieval rate, for each candidate
    threshold (the scores this run observed), plus "no threshold" and the one in force.

    ``answerable`` maps a query to its document ranking, the score behind each document and its
    judgments; ``unanswerable`` maps a query to its results' scores. Empty when no result of the
    run carries a score: a threshold then holds nothing back.
    """
    observed = [s for _, scores, _ in answerable.values() for s in scores if s is not None]
    observed += [s for scores in unanswerable.values() for s in scores if s is not None]
    if not observed:
        return []
    candidates: list[float | None] = [None, *candidate_thresholds(observed)]
    if in_force is not None and in_force not in candidates:
        candidates.append(in_force)
    rows = []
    for t in sorted(candidates, key=lambda c: -math.inf if c is None else c):
        recalls = []
        for ranking, scores, judgments in answerable.values():
            relevant = {d for d, g in judgments.items() if g >= relevance_level}
            if not relevant:
                continue
            keep = kept(scores, t)
            found = {d for d, ok in zip(ranking[:k], keep[:k]) if ok} & relevant
            recalls.append(len(found) / len(relevant))
        rate = false_retrieval_rate(false_retrieval(s, t) for s in unanswerable.values())
        rows.append(TradeoffRow(t, math.fsum(recalls) / len(recalls) if recalls else None, rate, t == in_force))
    return rows
