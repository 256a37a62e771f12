"""What a run is judged from: one record, built by each caller, with no field left to a default.

The plugin, ``ragmetrics compare``, ``merge`` and ``history`` each build a :class:`RunInputs` and
hand it to :func:`pytest_ragmetrics.gate.verdict.judge_run`. Every field is required: a caller that
leaves an input out fails to run rather than dropping the gate that reads it without a word.
:class:`GatePlan` is the part known before any query runs, from which the gate items are collected.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:
    from pytest_ragmetrics.gate.baseline import Baseline
    from pytest_ragmetrics.gate.evidence import QueryRecord
    from pytest_ragmetrics.gate.ratchet import RatchetBase
    from pytest_ragmetrics.gate.staleness import LabelAges
    from pytest_ragmetrics.gate.thresholds import Thresholds
    from pytest_ragmetrics.golden import GoldenSet

__all__ = ["GatePlan", "RunInputs", "ScopeCheck", "SCOPE_SOURCES"]

#: Where the metadata a record's ``scope`` was checked against came from: an independent source (the
#: corpus file given with --rag-corpus, or the retriever's ``doc_metadata()``), only the metadata the
#: retriever returned with each result, or nothing (no record has a scope).
SCOPE_SOURCES = ("corpus", "doc_metadata", "results", "none")


@dataclass(frozen=True)
class ScopeCheck:
    """What the scope of each record was checked against (one of :data:`SCOPE_SOURCES`), and the
    file or method named in the header."""

    source: str = "none"
    detail: str = ""

    @property
    def independent(self) -> bool:
        return self.source in ("corpus", "doc_metadata")

    @classmethod
    def recorded(cls, meta: Any, scoped: bool) -> ScopeCheck:
        """What a run artifact records its scopes were checked against (``_meta.scope_check``); a run
        with scopes that records nothing counts as checked only against the results' own metadata."""
        found = meta.get("scope_check") if isinstance(meta, Mapping) else None
        if isinstance(found, Mapping) and found.get("source") in SCOPE_SOURCES:
            return cls(str(found["source"]), str(found.get("detail") or ""))
        return cls("results" if scoped else "none")


@dataclass(frozen=True)
class GatePlan:
    """What decides which gates a run has, known before any query runs."""

    metrics: tuple[str, ...]
    thresholds: Thresholds
    #: the golden set is judged by pooling (the ``unjudged`` gate)
    pooled: bool
    #: a record of the golden set has a ``scope`` (the ``leak`` gate)
    scoped: bool
    #: a baseline at a base ref is compared (the ``baseline-lowered`` gate)
    ratchet: bool
    #: metrics the reference measured and the run did not (``compare``)
    lacking: frozenset[str] = frozenset()


@dataclass(frozen=True)
class RunInputs:
    """Everything one verdict is judged from."""

    #: each query that ran, by id
    records: Mapping[str, QueryRecord]
    #: the queries meant to run (a smoke subset, a shard's share, or the whole set)
    golden: GoldenSet
    #: the whole golden set: what the baseline must cover, what "removed" is measured against
    full_golden: GoldenSet
    #: what the run is compared with; None: nothing (no file yet, or a refresh)
    baseline: Baseline | None
    #: where the baseline is (or was looked for), named in messages
    baseline_path: str | None
    thresholds: Thresholds
    metrics: tuple[str, ...]
    relevance_level: int
    #: how messages name what the run is compared with: "the baseline", or "A" for two runs
    reference: str
    #: the ages of the run's labels under the thresholds' limits (None: no limit is set)
    labels: LabelAges | None
    #: the run artifact this run writes, named in the command that writes out unjudged documents
    artifact_path: str | None
    #: the rag_answer_threshold the run's unanswerable questions were scored with
    answer_threshold: float | None
    #: metrics the reference measured and this run did not (``compare``), with why, in words: each gated
    #: one fails its gate
    lacking: Mapping[str, str]
    #: what each record's scope was checked against
    scope: ScopeCheck
    #: queries the run skipped (a skip marker, or a skip in the retriever fixture), with the reason
    skipped: Mapping[str, str]
    #: the baseline at a base git ref that lowerings are judged against (None: the ratchet does not run)
    ratchet: RatchetBase | None

    def plan(self) -> GatePlan:
        return GatePlan(tuple(self.metrics), self.thresholds, self.full_golden.judgments == "pooled",
                        bool(self.full_golden.scoped()), self.ratchet is not None and self.ratchet.ref is not None,
                        frozenset(self.lacking))
