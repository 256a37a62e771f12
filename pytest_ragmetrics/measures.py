"""Metric names, their parameters and the measurement configuration.

A measure is declarative, as in ir_measures: a name from the registry plus an
optional cutoff, written ``name@k`` (``ndcg@10``, ``recall@100``, ``mrr``).
Everything that changes a number without changing the retriever (which measures,
the relevance level, the nDCG gain, how chunk ids map to documents) lives in
:class:`MeasurementConfig`, which is recorded with every result and baseline.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any, Iterable, Literal

from pytest_ragmetrics.errors import MeasureError

__all__ = [
    "DEFAULT_ID_SEPARATOR",
    "DEFAULT_METRICS",
    "GAINS",
    "MEASURE_NAMES",
    "Measure",
    "MeasurementConfig",
    "parse_measure",
    "parse_measures",
]

#: What is measured when nothing is asked for: the gate's four at 10.
DEFAULT_METRICS = ("recall@10", "hit_rate@10", "mrr@10", "ndcg@10")

#: Ranked ids map to documents by the prefix before this: ``guide#2-3`` is ``guide``.
#: The reference stack builds its chunk ids with it, so they map back without a setting.
DEFAULT_ID_SEPARATOR = "#"

Gain = Literal["exponential", "linear"]
GAINS: tuple[str, ...] = ("exponential", "linear")

#: Canonical measure names, with the trec_eval measure each one equals.
MEASURE_NAMES: dict[str, str] = {
    "recall": "recall_k",
    "hit_rate": "success_k",
    "precision": "P_k",
    "mrr": "recip_rank (run cut at k)",
    "ndcg": "ndcg_cut_k (gain=linear)",
    "map": "map_cut_k",
    # share of the top k that carries a judgment (grade 0 included): how far the judgments reach
    "judged": "Judged@k (ir_measures)",
    # nDCG@k with unjudged documents removed from the ranking first: unjudged is not "not relevant"
    "ndcg_judged": "ndcg_cut_k -J (gain=linear)",
}

_ALIASES: dict[str, str] = {
    "recall": "recall",
    "r": "recall",
    "hit_rate": "hit_rate",
    "hitrate": "hit_rate",
    "hit": "hit_rate",
    "success": "hit_rate",
    "precision": "precision",
    "p": "precision",
    "mrr": "mrr",
    "rr": "mrr",
    "recip_rank": "mrr",
    "ndcg": "ndcg",
    "ndcg_cut": "ndcg",
    "map": "map",
    "map_cut": "map",
    "judged": "judged",
    "ndcg_judged": "ndcg_judged",
}

#: Measures that are meaningless without a cutoff (precision divides by k).
_NEEDS_CUTOFF = frozenset({"precision"})

_NAME_RE = re.compile(r"^\s*([A-Za-z_]+)\s*(?:@\s*([^\s]+))?\s*$")


@functools.total_ordering
@dataclass(frozen=True)
class Measure:
    """One metric at one cutoff; ``cutoff=None`` means the whole ranking.

    Measures sort by name, then cutoff, and a measure without a cutoff sorts after
    every cutoff of its name (it looks at the whole ranking, deeper than any k):
    ``mrr@5 < mrr@10 < mrr``.
    """

    name: str
    cutoff: int | None = None

    def __post_init__(self) -> None:
        if self.name not in MEASURE_NAMES:
            raise MeasureError(
                f"unknown metric {self.name!r}; known metrics: {', '.join(MEASURE_NAMES)}"
            )
        if self.cutoff is None:
            if self.name in _NEEDS_CUTOFF:
                raise MeasureError(f"{self.name} needs a cutoff, e.g. {self.name}@10")
        elif isinstance(self.cutoff, bool) or not isinstance(self.cutoff, int) or self.cutoff < 1:
            raise MeasureError(f"{self.name}: cutoff must be a positive integer, got {self.cutoff!r}")

    def __str__(self) -> str:
        return self.name if self.cutoff is None else f"{self.name}@{self.cutoff}"

    def _sort_key(self) -> tuple[str, bool, int]:
        return (self.name, self.cutoff is None, self.cutoff or 0)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Measure):
            return NotImplemented
        return self._sort_key() < other._sort_key()


def parse_measure(text: str | Measure) -> Measure:
    """Parse ``"ndcg@10"``, ``"P@5"``, ``"mrr"`` into a :class:`Measure`.

    Aliases follow trec_eval spellings (``P``, ``success``, ``recip_rank``).
    """
    if isinstance(text, Measure):
        return text
    if not isinstance(text, str):
        raise MeasureError(f"a metric name must be a string like 'ndcg@10', got {text!r}")
    match = _NAME_RE.match(text)
    if not match:
        raise MeasureError(f"cannot read metric {text!r}; write it as name@k, e.g. 'ndcg@10'")
    raw_name, raw_cutoff = match.groups()
    name = _ALIASES.get(raw_name.lower())
    if name is None:
        raise MeasureError(
            f"unknown metric {raw_name!r} in {text!r}; known metrics: {', '.join(MEASURE_NAMES)}"
        )
    cutoff: int | None = None
    if raw_cutoff is not None:
        if not raw_cutoff.isdecimal() or int(raw_cutoff) < 1:  # isdigit() accepts '²', which int() rejects
            raise MeasureError(f"bad cutoff in {text!r}: k must be a positive integer")
        cutoff = int(raw_cutoff)
    return Measure(name, cutoff)


def parse_measures(texts: Iterable[str | Measure]) -> tuple[Measure, ...]:
    """Parse several names (a comma or whitespace separated string is split too).

    Order is kept and repeats are dropped, so output columns follow the user's order.
    """
    if isinstance(texts, str):
        texts = [texts]
    seen: dict[Measure, None] = {}
    for item in texts:
        parts = re.split(r"[,\s]+", item.strip()) if isinstance(item, str) else [item]
        for part in parts:
            if part == "":
                continue
            seen.setdefault(parse_measure(part), None)
    if not seen:
        raise MeasureError("no metrics given")
    return tuple(seen)


@dataclass(frozen=True, init=False)
class MeasurementConfig:
    """Everything, besides the retriever and the judgments, that decides a number.

    - ``measures``: names (``"ndcg@10"``) or :class:`Measure` objects, in output order.
    - ``relevance_level``: a document is relevant when its grade >= this (default 1).
      nDCG uses the grades themselves and ignores it.
    - ``gain``: nDCG gain, ``exponential`` (2^g - 1) or ``linear`` (g, as trec_eval).
    - ``id_separator``: a ranked id maps to its document by the prefix before the
      first separator (``None`` or ``""`` keeps ids as they are). After mapping,
      repeated documents are dropped keeping the first (best) occurrence.
    """

    measures: tuple[Measure, ...]
    relevance_level: int
    gain: str
    id_separator: str | None

    def __init__(
        self,
        measures: Iterable[str | Measure] = DEFAULT_METRICS,
        relevance_level: int = 1,
        gain: str = "exponential",
        id_separator: str | None = DEFAULT_ID_SEPARATOR,
    ) -> None:
        if isinstance(relevance_level, bool) or not isinstance(relevance_level, int) or relevance_level < 1:
            raise MeasureError(f"relevance level must be an integer >= 1, got {relevance_level!r}")
        if gain not in GAINS:
            raise MeasureError(f"gain must be one of {', '.join(GAINS)}, got {gain!r}")
        object.__setattr__(self, "measures", parse_measures(measures))
        object.__setattr__(self, "relevance_level", relevance_level)
        object.__setattr__(self, "gain", gain)
        object.__setattr__(self, "id_separator", id_separator or None)

    @property
    def metric_names(self) -> list[str]:
        return [str(m) for m in self.measures]

    @property
    def depth(self) -> int | None:
        """How many documents the measures look at (``None``: the whole ranking)."""
        cutoffs = [m.cutoff for m in self.measures]
        if any(c is None for c in cutoffs):
            return None
        return max(c for c in cutoffs if c is not None)

    @property
    def condensed_depth(self) -> int | None:
        """How many judged documents the judged-only measures read, unjudged ones
        skipped (``None``: all of them, 0: no such measure)."""
        cutoffs = [m.cutoff for m in self.measures if m.name == "ndcg_judged"]
        if any(c is None for c in cutoffs):
            return None
        return max((c for c in cutoffs if c is not None), default=0)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form recorded in run artifacts and baseline fingerprints."""
        return {
            "metrics": self.metric_names,
            "relevance_level": self.relevance_level,
            "gain": self.gain,
            "id_separator": self.id_separator,
            "dedup": "first",
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MeasurementConfig:
        return cls(
            measures=tuple(data["metrics"]),
            relevance_level=data.get("relevance_level", 1),
            gain=data.get("gain", "exponential"),
            id_separator=data.get("id_separator", DEFAULT_ID_SEPARATOR),
        )
