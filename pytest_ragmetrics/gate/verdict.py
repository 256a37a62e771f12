"""Compare a run with its baseline: per-query drops, aggregate gates, worst-N.

Pure functions over plain data; the pytest plugin and the CLI both call
:func:`build_verdict`; a query is compared with its baseline entry once, by
:func:`judge_query` where it is scored, and its record carries the answer to the
item, the gate and the JUnit properties, so they never disagree about what
"regressed" means.

Policies:
- An errored query counts as a regression, with every metric 0.
- Drops smaller than ``EPS`` are float noise, not regressions.
- Aggregate deltas compare means over the queries present in both the run and
  the baseline (so a smoke subset is compared with the same queries' baseline);
  floors (``_min``) apply to the mean over every scored query of the run.
- A query regressed when any metric fell by more than its query tolerance
  (defaults: no drop allowed for recall@k, other metrics not gated per query).
- When an aggregate gate fails, the queries that fell in its metric without
  crossing a per-query tolerance are kept too ("moved"), so a failed nDCG gate
  after a reranker bug still names the queries behind it.
"""

from __future__ import annotations

import math
import shlex
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Collection, Iterable, Mapping, Sequence

from pytest_ragmetrics.errors import listed
from pytest_ragmetrics.evaluation import drop_beyond_one_query, mean_metrics
from pytest_ragmetrics.gate.baseline import Baseline
from pytest_ragmetrics.gate.staleness import GATE as STALE_GATE
from pytest_ragmetrics.gate.staleness import LabelAges
from pytest_ragmetrics.gate.thresholds import Thresholds
from pytest_ragmetrics.golden import GoldenSet
from pytest_ragmetrics.measures import parse_measure
from pytest_ragmetrics.parents import ParentLevel, summarize_parents
from pytest_ragmetrics.unanswerable import FALSE_RETRIEVAL, RATE, false_retrieval_rate

if TYPE_CHECKING:  # numpy (behind stats) loads only when a comparison is made
    from pytest_ragmetrics.stats import DeltaStats

__all__ = [
    "EPS",
    "QueryRecord",
    "Drop",
    "Regression",
    "AggregateRow",
    "Gate",
    "Verdict",
    "query_drops",
    "judge_query",
    "build_verdict",
    "find_renames",
    "evaluate_gates",
    "gate_names",
    "is_inconclusive",
    "undecided",
    "Undecided",
    "to_judge",
    "unjudged_gate",
    "fix_command",
    "LEAK_GATE",
    "ScopeLeak",
    "leak_gate",
]

EPS = 1e-9
#: An ungated metric fails the ``significant-drops`` gate when its paired p-value is under
#: this and its drop exceeds one query's worth (1/n); ``fail_on_significant_drop`` turns it off.
SIGNIFICANT_P = 0.01


@dataclass
class QueryRecord:
    """What one query item produced; plain data so xdist can ship it to the controller."""

    qid: str
    status: str  # "scored" | "unscorable" | "error" | "unanswerable"
    metrics: dict[str, float] | None = None
    ranking: list[str] = field(default_factory=list)
    explains: list[str | None] = field(default_factory=list)
    n_docs: int = 0
    error: str | None = None
    truncated_from: int | None = None
    #: chunk- and parent-level hit rates when the results carried parent ids (see pytest_ragmetrics.parents)
    parent_level: dict[str, dict[str, float]] | None = None
    #: pooled golden sets (see :mod:`pytest_ragmetrics.unjudged`): judged@k, the unjudged documents of the
    #: top k, the new ones among them (None: the baseline has no ``_top``), and the metrics' upper bounds
    judged: float | None = None
    unjudged: list[str] = field(default_factory=list)
    unjudged_new: list[str] | None = None
    upper: dict[str, float] | None = None
    upper_new: dict[str, float] | None = None
    #: the baseline's ``_top`` re-scored with the same new documents judged relevant (None: no ``_top``)
    baseline_upper_new: dict[str, float] | None = None
    #: the baseline's ``_top`` re-scored with every unjudged document of this top k judged (None: no ``_top``)
    baseline_upper: dict[str, float] | None = None
    #: the score behind each document of ``ranking`` (None where the retriever gave none)
    scores: list[float | None] = field(default_factory=list)
    #: an ``answerable: false`` question's score: 1 if it got a result the generator would answer from
    false_retrieval: int | None = None
    #: its comparison with its baseline entry (:func:`judge_query`), made once where it was scored: the
    #: metrics that fell, or an unanswerable question's false-retrieval rise; None: not compared there
    #: (an errored query, a run read back from a file), so the verdict compares it
    drops: list[Drop] | None = None
    #: a pooled query that fell beyond tolerance, but would not if its new unjudged documents were relevant
    inconclusive: bool = False
    #: returned documents outside the query's scope (:class:`pytest_ragmetrics.scope.Leak` as dicts)
    leaks: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The record as plain data: what ``dataclasses.asdict`` gives, without its deep copy of
        every string and number (immutable, so shared), which took half of each query item's time."""
        return {name: _plain(getattr(self, name)) for name in self.__dataclass_fields__}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> QueryRecord:
        fields = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        if fields.get("drops") is not None:
            fields["drops"] = [Drop(**d) if isinstance(d, Mapping) else d for d in fields["drops"]]
        return cls(**fields)


def _plain(value: Any) -> Any:
    """``value`` with its containers copied and a :class:`Drop` made a dict (leaves are immutable)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    if isinstance(value, Drop):
        return asdict(value)
    return value


@dataclass
class Drop:
    metric: str
    before: float
    after: float
    tolerance: float | None  # None: the metric is not gated per query
    #: higher is worse (``false_retrieval``): the "drop" is a rise
    rise: bool = False

    @property
    def delta(self) -> float:
        return self.after - self.before

    @property
    def loss(self) -> float:
        """How much worse it got (positive: worse), whichever way the metric points."""
        return self.delta if self.rise else -self.delta

    @property
    def exceeded(self) -> bool:
        return self.tolerance is not None and self.loss > self.tolerance + EPS

    def report_entry(self) -> dict[str, Any]:
        """How a regression lists it in the report (:meth:`QueryRecord.to_dict` keeps the fields as they are)."""
        return {"metric": self.metric, "baseline": self.before, "now": self.after, "delta": self.delta,
                "tolerance": self.tolerance, "exceeded": self.exceeded}


def query_drops(
    metrics: Mapping[str, float] | None,
    baseline_metrics: Mapping[str, float],
    thresholds: Thresholds,
) -> list[Drop]:
    """Every metric that fell against the baseline (errored query: ``metrics=None``, all 0)."""
    drops = []
    for metric, before in baseline_metrics.items():
        if metric.startswith("_"):
            continue
        after = 0.0 if metrics is None else metrics.get(metric)
        if after is None:
            continue
        if after < before - EPS:
            drops.append(Drop(metric, before, after, thresholds.query_tolerance.get(metric)))
    return drops


def false_retrieval_drops(now: int | None, baseline_entry: Mapping[str, Any]) -> list[Drop]:
    """An unanswerable question that now gets an answer it did not get in the baseline
    (``false_retrieval`` 0 -> 1; an errored one counts as 1): it regressed. No rise is
    allowed per query, as no drop of recall@k is by default."""
    before = baseline_entry.get(FALSE_RETRIEVAL)
    if not isinstance(before, (int, float)) or isinstance(before, bool):
        return []
    after = 1.0 if now is None else float(now)
    return [Drop(FALSE_RETRIEVAL, float(before), after, 0.0, rise=True)] if after > before + EPS else []


def judge_query(record: QueryRecord, entry: Mapping[str, Any], thresholds: Thresholds, answerable: bool = True,
                pooled: bool = False) -> tuple[list[Drop], bool]:
    """A record against its baseline entry: its drops, and whether a pooled query is inconclusive.

    The one place a query is compared: the worker that scored it stores the answer on the
    record, and :func:`build_verdict` calls this only for a record that has none. An errored
    query counts as every metric 0 (a question marked answerable: false, as a false retrieval).
    """
    if not answerable:
        return false_retrieval_drops(None if record.status == "error" else record.false_retrieval, entry), False
    before = {k: v for k, v in entry.items() if not k.startswith("_")}
    drops = query_drops(None if record.status == "error" else record.metrics, before, thresholds)
    inconclusive = pooled and any(d.exceeded for d in drops) and is_inconclusive(record, before, thresholds)
    return drops, inconclusive


@dataclass
class Regression:
    qid: str
    question: str
    drops: list[Drop]
    gold: list[tuple[str, int]]
    returned: list[str]
    explains: list[str | None]
    error: str | None = None
    #: an inconclusive query's new unjudged documents: judging them decides it
    unjudged: list[str] = field(default_factory=list)
    #: False for a question marked answerable: false (it has no gold; what came back is the failure)
    answerable: bool = True
    #: the record's filters, shown beside its question
    filters: Mapping[str, Any] | None = None

    @property
    def severity(self) -> float:
        exceeded = [d.loss for d in self.drops if d.exceeded]
        return max(exceeded) if exceeded else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "qid": self.qid,
            "question": self.question,
            "drops": [d.report_entry() for d in self.drops],
            "gold": [list(g) for g in self.gold],
            "returned": self.returned,
            "explains": self.explains,
            "error": self.error,
            **({"unjudged": self.unjudged} if self.unjudged else {}),
            **({} if self.answerable else {"answerable": False}),
            **({"filters": dict(self.filters)} if self.filters else {}),
        }


@dataclass
class AggregateRow:
    metric: str
    now: float | None  # mean over every scored query of this run
    now_common: float | None  # mean over queries also in the baseline
    baseline: float | None  # baseline mean over the same queries
    tolerance: float | None
    minimum: float | None
    stats: DeltaStats | None = None  # paired interval, p-value, detectable change

    @property
    def delta(self) -> float | None:
        if self.now_common is None or self.baseline is None:
            return None
        return self.now_common - self.baseline

    @property
    def dropped_too_far(self) -> bool:
        d = self.delta
        return d is not None and self.tolerance is not None and d < -self.tolerance - EPS

    @property
    def under_floor(self) -> bool:
        return self.now is not None and self.minimum is not None and self.now < self.minimum - EPS

    @property
    def gated(self) -> bool:
        return self.tolerance is not None or self.minimum is not None

    @property
    def untestable_drop(self) -> bool:
        """Fell by more than 1/n, on too few changed queries for any p-value under SIGNIFICANT_P."""
        d, st = self.delta, self.stats
        return (d is not None and st is not None and drop_beyond_one_query(d, st.n)
                and st.smallest_p >= SIGNIFICANT_P)

    @property
    def significant_drop(self) -> bool:
        """Fell beyond chance (p < SIGNIFICANT_P) and by more than one query's worth (1/n)."""
        d, st = self.delta, self.stats
        return (d is not None and st is not None and drop_beyond_one_query(d, st.n)
                and st.p_value < SIGNIFICANT_P)

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "now": self.now, "now_common": self.now_common, "baseline": self.baseline,
                "delta": self.delta, "tolerance": self.tolerance, "min": self.minimum,
                "dropped_too_far": self.dropped_too_far, "under_floor": self.under_floor,
                "stats": self.stats.to_dict() if self.stats else None}


@dataclass
class NoAnswerRow:
    """Questions marked ``answerable: false``: how many ran, and the false-retrieval rate
    (higher is worse) now, over the ones in the baseline, and in the baseline."""

    n: int
    now: float | None
    now_common: float | None
    baseline: float | None
    tolerance: float | None  # allowed rise against the baseline
    maximum: float | None  # ceiling on the run's rate
    threshold: float | None  # rag_answer_threshold in force
    #: the questions that got a result counted as an answer this run
    retrieved: list[str] = field(default_factory=list)
    n_common: int = 0
    #: the threshold trade-off from this run's scores (empty without scores)
    tradeoff: list[Any] = field(default_factory=list)
    #: the cutoff of the recall the trade-off shows
    k: int | None = None
    #: those not in the baseline (scored, not compared); empty without a baseline
    new: list[str] = field(default_factory=list)

    @property
    def delta(self) -> float | None:
        return None if self.now_common is None or self.baseline is None else self.now_common - self.baseline

    @property
    def rose_too_far(self) -> bool:
        d = self.delta
        return d is not None and self.tolerance is not None and d > self.tolerance + EPS

    @property
    def over_max(self) -> bool:
        return self.now is not None and self.maximum is not None and self.now > self.maximum + EPS

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n, "n_common": self.n_common, RATE: self.now, "now_common": self.now_common,
                "baseline": self.baseline, "delta": self.delta, "tolerance": self.tolerance, "max": self.maximum,
                "answer_threshold": self.threshold, "retrieved": self.retrieved, "k": self.k,
                "tradeoff": [row.to_dict() for row in self.tradeoff]}


@dataclass
class ScopeLeak:
    """A query that returned documents outside its ``scope``: the documents, their metadata, the scope."""

    qid: str
    question: str
    scope: Mapping[str, Any]
    filters: Mapping[str, Any] | None
    docs: list[dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        return {"qid": self.qid, "question": self.question, "scope": dict(self.scope),
                "filters": dict(self.filters) if self.filters else None, "docs": self.docs}


#: The gate a scoped golden set adds: any returned document outside its query's scope fails it.
LEAK_GATE = "leak"


def leak_gate(leaks: Sequence[ScopeLeak]) -> Gate:
    """Zero tolerance: no threshold loosens it, and it fails in report-only mode too."""
    if not leaks:
        return Gate(LEAK_GATE, True, "no returned document is outside its query's scope")
    n = sum(len(leak.docs) for leak in leaks)
    named = [f"{leak.qid} ({', '.join(d['doc'] for d in leak.docs)})" for leak in leaks]
    return Gate(LEAK_GATE, False, f"{n} returned {'document is' if n == 1 else 'documents are'} outside their "
                                  f"query's scope in {len(leaks)} {'query' if len(leaks) == 1 else 'queries'}: "
                                  f"{listed(named)}; no threshold allows a leak")


@dataclass
class Gate:
    name: str
    passed: bool
    message: str


@dataclass
class Verdict:
    n: int  # scored + errored queries in this run
    metrics: list[str]
    aggregate: list[AggregateRow]
    strata: dict[str, tuple[int, dict[str, float | None], dict[str, float | None]]]
    regressions: list[Regression]
    gates: list[Gate]
    n_common: int
    new: list[str]
    removed: list[str]
    errored: list[str]
    unscorable: list[str]
    short: dict[str, int]
    has_baseline: bool
    fail_on_regression: bool
    strata_stats: dict[str, dict[str, DeltaStats]] = field(default_factory=dict)
    parent_level: ParentLevel | None = None
    #: queries within their per-query tolerances that fell in a metric whose aggregate
    #: gate failed, largest drop in those metrics first (the regressed ones are in ``regressions``)
    moved: list[Regression] = field(default_factory=list)
    #: the metrics whose aggregate gate failed (fell too far or under the floor) and
    #: in which a query of ``moved`` fell
    moved_metrics: list[str] = field(default_factory=list)
    #: queries meant to run that did not (deselected with -k or --deselect, or the run
    #: stopped early): the baseline gate fails, since a part cannot stand for the whole
    not_run: list[str] = field(default_factory=list)
    #: new query id -> the baseline's id for it: renamed since, with the same text and judgments,
    #: so compared with its old entry (a rename must not make a regression look new)
    renamed: dict[str, str] = field(default_factory=dict)
    #: what a passing gate could not check, said next to its verdict
    warnings: list[str] = field(default_factory=list)
    #: how old the run's labels are under the age limits of thresholds.json (None: no limit set)
    labels: LabelAges | None = None
    #: how the golden set was judged: "closed" or "pooled"
    judgments: str = "closed"
    #: pooled sets: queries that fell beyond tolerance, but not if their new unjudged documents are relevant
    inconclusive: list[Regression] = field(default_factory=list)
    #: pooled sets: mean judged@k over the scored queries, the unjudged_new@k total (None: the baseline has
    #: no ``_top`` to tell new from old), and the mean of each metric's upper bound
    judged: float | None = None
    unjudged_new: int | None = None
    upper: dict[str, float | None] = field(default_factory=dict)
    #: (query, document) pairs to judge before the gate can decide
    to_judge: list[tuple[str, str]] = field(default_factory=list)
    #: the questions marked answerable: false, scored by false retrieval (None: the run has none)
    no_answer: NoAnswerRow | None = None
    #: queries that returned documents outside their scope: each fails, and so does the run
    leaks: list[ScopeLeak] = field(default_factory=list)
    #: per source (``source`` of each golden record), like ``strata``; empty unless the set mixes sources
    sources: dict[str, tuple[int, dict[str, float | None], dict[str, float | None]]] = field(default_factory=dict)
    sources_stats: dict[str, dict[str, DeltaStats]] = field(default_factory=dict)
    #: why the golden set over-fits known failures (harvested questions above max_harvested_share), or None
    harvested: str | None = None
    #: a shard's gates, left to ``ragmetrics merge`` (a part of the set cannot stand for the whole)
    deferred: list[str] = field(default_factory=list)
    #: queries that were skipped, with the skip's reason: not judged, so the baseline gate fails
    #: (see :mod:`pytest_ragmetrics.gate.skipped`)
    skipped: dict[str, str] = field(default_factory=dict)

    @property
    def failed_gates(self) -> list[Gate]:
        return [g for g in self.gates if not g.passed]

    def movers(self, metric: str) -> list[tuple[Regression, Drop]]:
        """Every listed query that fell in ``metric``, regressed or moved, largest drop first."""
        metric = FALSE_RETRIEVAL if metric == RATE else metric
        found = [(r, d) for r in [*self.regressions, *self.moved] for d in r.drops if d.metric == metric]
        return sorted(found, key=lambda p: (-p[1].loss, p[0].qid))

    def failures(self) -> list[str]:
        """Why this run fails, one line a reason (empty: it passes).

        A run fails on a failed gate, on a query that fell beyond its per-query
        tolerance and on a query that errored (their items fail too); queries are
        named here unless the regressed-queries gate already counts them.
        """
        reasons = [f"gate {g.name}: {g.message}" for g in self.failed_gates]
        if any(g.name == "regressed-queries" for g in self.failed_gates):
            return reasons
        beyond = [r.qid for r in self.regressions if r.error is None and any(d.exceeded for d in r.drops)]
        errored = [r.qid for r in self.regressions if r.error is not None]
        for what, qids in (("fell beyond its per-query tolerance", beyond), ("errored", errored)):
            if qids:
                verb = what if len(qids) == 1 else what.replace("its", "their")
                reasons.append(f"{len(qids)} {'query' if len(qids) == 1 else 'queries'} {verb}: "
                               f"{listed(qids)}")
        return reasons

    @property
    def passed(self) -> bool:
        """A leak fails the run whatever the thresholds say, report-only mode included."""
        return (not self.fail_on_regression or not self.failures()) and not self.leaks

    def to_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "n_common": self.n_common,
            "aggregate": [r.to_dict() for r in self.aggregate],
            "strata": {
                tag: {"n": n, "now": now, "baseline": base,
                      "stats": {m: st.to_dict() for m, st in self.strata_stats.get(tag, {}).items()}}
                for tag, (n, now, base) in self.strata.items()
            },
            "regressed": [r.to_dict() for r in self.regressions],
            "moved": [r.to_dict() for r in self.moved],
            "not_run": self.not_run,
            "moved_metrics": self.moved_metrics,
            "gates": [asdict(g) for g in self.gates],
            "new": self.new,
            "removed": self.removed,
            "renamed": self.renamed,
            "warnings": self.warnings,
            "errored": self.errored,
            "unscorable": self.unscorable,
            "short": self.short,
            "parent_level": self.parent_level.to_dict() if self.parent_level else None,
            **({"stale_labels": self.labels.to_dict()} if self.labels is not None else {}),
            "no_answer": self.no_answer.to_dict() if self.no_answer else None,
            **({"leaks": [leak.to_dict() for leak in self.leaks]} if self.leaks else {}),
            **({"sources": {
                source: {"n": n, "now": now, "baseline": base,
                         "stats": {m: st.to_dict() for m, st in self.sources_stats.get(source, {}).items()}}
                for source, (n, now, base) in self.sources.items()}} if self.sources else {}),
            **({"harvested": self.harvested} if self.harvested else {}),
            **({"deferred": self.deferred} if self.deferred else {}),
            **({"skipped": self.skipped} if self.skipped else {}),
            "failures": self.failures(),
            "passed": self.passed,
            **({"judgments": self.judgments, "judged": self.judged, "unjudged_new": self.unjudged_new,
                "upper": self.upper, "inconclusive": [r.to_dict() for r in self.inconclusive],
                "to_judge": [list(p) for p in self.to_judge]} if self.judgments == "pooled" else {}),
        }


def _values(record: QueryRecord, metrics: Sequence[str]) -> dict[str, float]:
    """A record's metrics for aggregation; an errored query scores 0 everywhere."""
    if record.status == "error" or record.metrics is None:
        return {m: 0.0 for m in metrics}
    return record.metrics


def _mean_or_none(rows: Iterable[Mapping[str, float]], metrics: Sequence[str]) -> dict[str, float | None]:
    means = mean_metrics(rows, metrics)
    return {m: means.get(m) for m in metrics}


def build_verdict(
    records: Mapping[str, QueryRecord],
    golden: GoldenSet,
    baseline: Baseline | None,
    thresholds: Thresholds,
    metrics: Sequence[str],
    relevance_level: int = 1,
    full_golden: GoldenSet | None = None,
    reference: str = "the baseline",
    baseline_path: str | None = None,
    labels: LabelAges | None = None,
    artifact_path: str | None = None,
    answer_threshold: float | None = None,
) -> Verdict:
    """Judge a run: ``records`` for the queries that ran, ``golden`` the queries
    that were meant to run, ``full_golden`` the whole set (for "removed").

    Questions marked ``answerable: false`` stay out of every mean: they are judged by
    false retrieval (``answer_threshold`` is the rag_answer_threshold they were scored
    with, shown in the threshold trade-off).

    ``reference`` names what the run is compared with in messages ("the baseline",
    or "A" when two runs are compared); ``baseline_path`` is where a missing
    baseline was looked for; ``artifact_path`` the run artifact this run writes, named
    in the command that writes a pooled set's unjudged documents out for judging. ``labels``: the
    ages of the run's labels (:func:`~pytest_ragmetrics.gate.staleness.label_ages`), gated when
    ``fail_on_stale_labels``.
    """
    pooled = golden.judgments == "pooled"
    order = [q.qid for q in golden if q.qid in records]
    counted = [qid for qid in order if records[qid].status in ("scored", "error") and golden[qid].answerable]
    errored = [qid for qid in order if records[qid].status == "error"]
    unscorable = [qid for qid in order if records[qid].status == "unscorable"]
    deepest = _deepest_cutoff(metrics)
    short = {qid: records[qid].n_docs for qid in counted
             if records[qid].status == "scored" and deepest is not None and records[qid].n_docs < deepest}
    values = {qid: _values(records[qid], metrics) for qid in counted}

    everything = full_golden or golden
    renamed = find_renames(everything, baseline) if baseline else {}
    if renamed:
        baseline = baseline.renamed(renamed)  # type: ignore[union-attr]
    base_q = baseline.per_query if baseline else {}
    #: each baseline entry's metrics, read once: the aggregate, every metric's paired test and every
    #: stratum look them up again for each query
    base_metrics = {qid: baseline.metrics_of(qid) for qid in base_q} if baseline else {}
    common = [qid for qid in counted if qid in base_q]
    new = [qid for qid in counted if qid not in base_q] if baseline else []
    removed = sorted(qid for qid in base_q if qid not in everything) if baseline else []

    now_all = _mean_or_none((values[q] for q in counted), metrics)
    now_common = _mean_or_none((values[q] for q in common), metrics)
    base_common = _mean_or_none(
        ({m: base_metrics[q].get(m, math.nan) for m in metrics} for q in common), metrics
    ) if baseline else {m: None for m in metrics}
    def paired(qids: Sequence[str], m: str) -> DeltaStats | None:
        if baseline is None or not qids:
            return None
        from pytest_ragmetrics.stats import delta_stats

        deltas = [_denoise(values[q][m] - base_metrics[q][m]) for q in qids if m in base_metrics[q]]
        return delta_stats(deltas, resamples=_resamples(len(deltas))) if deltas else None

    aggregate = [
        AggregateRow(m, now_all[m], now_common[m] if baseline else None, _finite(base_common[m]),
                     thresholds.tolerance.get(m), thresholds.minimum.get(m), paired(common, m))
        for m in metrics
    ]
    strata_stats: dict[str, dict[str, DeltaStats]] = {}

    strata: dict[str, tuple[int, dict[str, float | None], dict[str, float | None]]] = {}

    def stratum(name: str, members: set[str], into: dict[str, Any], stats: dict[str, Any]) -> None:
        """One row of a breakdown (per tag, per source): the run's mean over its ``members``, against the
        baseline's over the same ones."""
        tagged = [q for q in counted if q in members]
        if not any(q.answerable for q in golden if q.qid in members):
            return  # a group of questions with no answer alone: no mean to show
        tagged_common = [q for q in tagged if q in base_q]
        base = _mean_or_none(({m: base_metrics[q].get(m, math.nan) for m in metrics}
                              for q in tagged_common), metrics) if baseline else {m: None for m in metrics}
        # compared over the same queries as the baseline's, like the aggregate (new ones are listed there)
        shown = tagged_common if baseline is not None and tagged_common else tagged
        into[name] = (len(shown), _mean_or_none((values[q] for q in shown), metrics),
                      {m: _finite(v) for m, v in base.items()})
        if baseline is not None and tagged_common:
            stats[name] = {m: st for m in metrics if (st := paired(tagged_common, m)) is not None}

    for tag in golden.tags():
        stratum(tag, {q.qid for q in golden if tag in q.tags}, strata, strata_stats)
    # per source, when the set mixes them: each source has its bias, and a mean over all hides it
    sources: dict[str, tuple[int, dict[str, float | None], dict[str, float | None]]] = {}
    sources_stats: dict[str, dict[str, DeltaStats]] = {}
    if len(everything.sources()) > 1:
        for source in golden.sources():
            stratum(source, {q.qid for q in golden if q.source == source}, sources, sources_stats)

    failing = [r.metric for r in aggregate if r.dropped_too_far or r.under_floor
               or (thresholds.fail_on_significant_drop and not r.gated and r.significant_drop)]
    regressions: list[Regression] = []
    moved: list[Regression] = []
    inconclusive: list[Regression] = []
    for qid in common:
        record = records[qid]
        drops, on_hold = (record.drops, record.inconclusive) if record.drops is not None else \
            judge_query(record, base_q[qid], thresholds, pooled=pooled)
        regressed = any(d.exceeded for d in drops) or record.status == "error"
        basis = undecided(record, base_metrics[qid], thresholds) if regressed and pooled and on_hold else None
        if basis is not None:
            inconclusive.append(Regression(qid, golden[qid].text, drops, golden[qid].gold(relevance_level),
                                           record.ranking, record.explains, None, basis.docs))
            continue
        if regressed or any(d.metric in failing for d in drops):
            entry = Regression(qid, golden[qid].text, drops, golden[qid].gold(relevance_level), record.ranking,
                               record.explains, record.error)
            (regressions if regressed else moved).append(entry)
    no_answer = _no_answer(records, golden, baseline, thresholds, metrics, relevance_level, answer_threshold,
                           order, regressions)
    for qid in errored:
        if qid not in common and golden[qid].answerable:  # a new query that errored is still a failure to report
            regressions.append(Regression(qid, golden[qid].text, [], golden[qid].gold(relevance_level), [], [],
                                          records[qid].error))
    regressions.sort(key=lambda r: (r.error is None, -r.severity, -sum(d.loss for d in r.drops), r.qid))
    moved.sort(key=lambda r: (min(d.delta for d in r.drops if d.metric in failing), r.qid))

    not_run = [q.qid for q in golden if q.qid not in records]
    compared = {m for q in base_q.values() for m in q if not m.startswith("_")} if baseline else None
    # a query the baseline scored that no longer can be (its gold left the corpus) would drop out of every mean
    unscored = {q: records[q].error for q in unscorable
                if q in base_q and any(not m.startswith("_") and m != FALSE_RETRIEVAL for m in base_q[q])}
    gates = evaluate_gates(aggregate, regressions, thresholds, baseline is not None, not_run, reference,
                           baseline_path, compared, removed, unscored)
    warnings = _untestable(aggregate, thresholds, reference)
    cost = _threshold_cost(no_answer, len(counted))
    if cost:
        warnings.append(cost)
    if _gates_no_answer(thresholds):
        gates.append(_no_answer_gate(no_answer, reference, baseline is not None))
    if labels is not None:
        if labels.fail:
            problem = labels.problem()
            gates.append(Gate(STALE_GATE, problem is None, problem or
                              f"no label is older than its limit ({labels.limits_text()}), none undated"))
        elif labels.warning():
            warnings.append(labels.warning())  # type: ignore[arg-type]
    pairs: list[tuple[str, str]] = []
    if pooled:
        inconclusive.sort(key=lambda r: (-r.severity, r.qid))
        pairs = [(r.qid, d) for r in inconclusive for d in r.unjudged]
        pairs += _rescue_aggregates(gates, aggregate, common, records, baseline, thresholds, reference, pairs)
        gates.append(unjudged_gate(inconclusive, pairs, artifact_path, str(golden.source or "") or None))
    for r in [*regressions, *moved, *inconclusive]:
        r.filters = golden[r.qid].filters if r.qid in golden else None
    leaks = [ScopeLeak(qid, golden[qid].text, golden[qid].scope or {}, golden[qid].filters, list(records[qid].leaks))
             for qid in order if records[qid].leaks]
    if (full_golden or golden).scoped() or leaks:
        gates.append(leak_gate(leaks))
    return Verdict(
        n=len(counted), metrics=list(metrics), aggregate=aggregate, strata=strata,
        regressions=regressions, gates=gates, n_common=len(common), new=new, removed=removed,
        errored=errored, unscorable=unscorable, short=short, has_baseline=baseline is not None,
        fail_on_regression=thresholds.fail_on_regression, strata_stats=strata_stats,
        parent_level=summarize_parents([(q, lv) for q in counted if (lv := records[q].parent_level) is not None]),
        moved=moved, moved_metrics=[m for m in failing if any(d.metric == m for r in moved for d in r.drops)],
        not_run=not_run, renamed=renamed, warnings=warnings, labels=labels,
        judgments=golden.judgments, inconclusive=inconclusive, to_judge=pairs,
        **(_pooled_means(records, counted, metrics, baseline) if pooled else {}),
        no_answer=no_answer, sources=sources, sources_stats=sources_stats,
        harvested=harvested_share(everything, thresholds.max_harvested_share), leaks=leaks,
    )


def harvested_share(golden: GoldenSet, limit: float) -> str | None:
    """The warning for a golden set whose harvested questions exceed ``limit`` of it (None: they do not).

    Harvested questions are failures someone already saw: a set made mostly of them measures how
    well known problems stay fixed, and says little about the questions nobody has seen fail."""
    n = len(golden)
    harvested = golden.sources().get("harvested", 0)
    if not n or harvested / n <= limit + EPS:
        return None
    return (f"{harvested} of {n} golden questions ({harvested / n:.0%}) are harvested failures (source: harvested), "
            f"above max_harvested_share {limit:g}: a set built from known failures over-fits them, so its means "
            "reward fixing what already broke and say little about questions nobody has seen fail; add questions "
            "from logs or curated ones, or raise max_harvested_share in thresholds.json")


def to_judge(record: QueryRecord) -> list[str]:
    """The unjudged documents that can decide a query: the new ones, or all when the baseline
    has no ``_top`` to tell new from old."""
    return list(record.unjudged if record.unjudged_new is None else record.unjudged_new)


@dataclass(frozen=True)
class Undecided:
    """Why a pooled query's drop is inconclusive: the unjudged documents that could explain it,
    and its numbers and the baseline's with them judged relevant."""

    docs: list[str]
    upper: dict[str, float]
    baseline_upper: Mapping[str, float]


def undecided(record: QueryRecord, before: Mapping[str, float], thresholds: Thresholds) -> Undecided | None:
    """The basis on which a pooled query that fell beyond its tolerance is ``inconclusive``, or None.

    First its new unjudged documents (not in the baseline's top k): would it still fall with them
    relevant, at the set's top grade? Failing that, every unjudged document of its top k, the
    baseline re-scored with the same judgments: one both tops held can explain a drop by moving up.
    """
    if record.status != "scored":
        return None
    new = to_judge(record)
    if new and record.upper_new is not None:
        base = record.baseline_upper_new or before
        if not any(d.exceeded for d in query_drops(record.upper_new, base, thresholds)):
            return Undecided(new, record.upper_new, base)
    if record.unjudged and record.upper is not None and record.baseline_upper is not None:
        if not any(d.exceeded for d in query_drops(record.upper, record.baseline_upper, thresholds)):
            return Undecided(list(record.unjudged), record.upper, record.baseline_upper)
    return None


def is_inconclusive(record: QueryRecord, before: Mapping[str, float], thresholds: Thresholds) -> bool:
    """A pooled query that fell beyond its tolerance, but would not if its unjudged documents were
    relevant (see :func:`undecided`): neither a regression nor a pass until they are judged."""
    return undecided(record, before, thresholds) is not None


def _rescue_aggregates(gates: list[Gate], aggregate: Sequence[AggregateRow], common: Sequence[str],
                       records: Mapping[str, QueryRecord], baseline: Baseline | None, thresholds: Thresholds,
                       reference: str, pairs: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """An aggregate gate that fell too far, but not with every new unjudged document relevant, is
    no regression either: it passes, and the unjudged gate asks for those documents instead."""
    if baseline is None:
        return []
    extra: list[tuple[str, str]] = []
    rows = {r.metric: r for r in aggregate}
    for i, gate in enumerate(gates):
        row = rows.get(gate.name)
        if row is None or gate.passed or not row.dropped_too_far or row.under_floor:
            continue
        bound = [(records[q].upper_new or records[q].metrics or {}).get(row.metric, 0.0)
                 if records[q].status == "scored" else 0.0 for q in common]
        base = [(records[q].baseline_upper_new or baseline.metrics_of(q)).get(row.metric, 0.0) for q in common]
        upper = math.fsum(bound) / len(bound) if bound else None
        upper_base = math.fsum(base) / len(base) if base else None
        if upper is None or upper - upper_base < -row.tolerance - EPS:  # type: ignore[operator]
            continue
        docs = [(q, d) for q in common if records[q].status == "scored"
                and (records[q].metrics or {}).get(row.metric, 0.0) < baseline.metrics_of(q).get(row.metric, 0.0) - EPS
                for d in to_judge(records[q])]
        if not docs:
            continue
        gates[i] = Gate(gate.name, True,
                        f"{row.metric} fell {-row.delta:.4f} against {reference} ({row.baseline:.4f} -> "  # type: ignore[operator]
                        f"{row.now_common:.4f}), but not beyond its allowed drop {row.tolerance:g} if the new "
                        f"unjudged documents are relevant ({upper_base:.4f} -> {upper:.4f}): see gate unjudged")
        extra += [p for p in docs if p not in pairs and p not in extra]
    return extra


def unjudged_gate(inconclusive: Sequence[Regression], pairs: Sequence[tuple[str, str]],
                  artifact_path: str | None, golden: str | None = None) -> Gate:
    """The pooled set's own gate: it fails while a drop waits on documents nobody judged."""
    if not pairs:
        return Gate("unjudged", True, "no drop waits on unjudged documents")
    n = len(pairs)
    one = len(inconclusive) == 1
    who = (f"{len(inconclusive)} {'query is' if one else 'queries are'} inconclusive "
           f"({listed([r.qid for r in inconclusive])}): {'it' if one else 'they'} fell beyond tolerance, but not if "
           f"{'its' if one else 'their'} unjudged documents are relevant") if inconclusive else \
        "an aggregate drop is inconclusive: it is beyond tolerance, but not if the unjudged documents are relevant"
    return Gate("unjudged", False,
                f"judge {'this 1 document' if n == 1 else f'these {n} documents'}: {who}, so this is neither a "
                f"regression nor a pass; {fix_command(artifact_path, golden)}")


def fix_command(artifact_path: str | None, golden: str | None = None) -> str:
    """The one command that writes a run's unjudged documents out for ``ragmetrics annotate``; with the
    ``golden`` set the run used (relative to the current directory when inside it), so that the command
    does not depend on finding the artifact's recorded one."""
    if artifact_path:
        named = ""
        if golden:
            path = Path(golden)
            try:
                path = path.resolve().relative_to(Path.cwd().resolve()) if path.is_absolute() else path
            except ValueError:
                pass
            named = f" --golden {shlex.quote(path.as_posix())}"
        return (f"write them out for annotation with `ragmetrics pool --run {artifact_path} --unjudged-only "
                f"-o unjudged.jsonl{named}`")
    return ("write them out for annotation with `ragmetrics pool --run run.json --unjudged-only -o unjudged.jsonl` "
            "(rerun with --rag-report=run.json to write the run artifact it reads)")


def _pooled_means(records: Mapping[str, QueryRecord], counted: Sequence[str], metrics: Sequence[str],
                  baseline: Baseline | None) -> dict[str, Any]:
    scored = [records[q] for q in counted if records[q].status == "scored" and records[q].judged is not None]
    judged = math.fsum(r.judged for r in scored) / len(scored) if scored else None  # type: ignore[misc]
    new = None if baseline is None or any(r.unjudged_new is None for r in scored) \
        else sum(len(r.unjudged_new or []) for r in scored)
    upper = _mean_or_none(((r.upper or r.metrics or {}) for r in scored), metrics) if scored else {}
    return {"judged": judged, "unjudged_new": new, "upper": upper}



def _no_answer(records: Mapping[str, QueryRecord], golden: GoldenSet, baseline: Baseline | None,
               thresholds: Thresholds, metrics: Sequence[str], relevance_level: int,
               answer_threshold: float | None, order: Sequence[str],
               regressions: list[Regression]) -> NoAnswerRow | None:
    """The false-retrieval summary of the unanswerable questions that ran (None if none did);
    each one that now gets an answer it did not get in the baseline (or errored) joins ``regressions``."""
    from pytest_ragmetrics.unanswerable import tradeoff

    ran = [q for q in order if not golden[q].answerable and records[q].status in ("unanswerable", "error")]
    if not ran:
        return None
    value = {q: (1 if records[q].status == "error" else records[q].false_retrieval or 0) for q in ran}
    base_q = baseline.per_query if baseline else {}
    common = [q for q in ran if isinstance(base_q.get(q, {}).get(FALSE_RETRIEVAL), (int, float))]
    for qid in ran:
        record = records[qid]
        drops = [] if qid not in common else record.drops if record.drops is not None else \
            judge_query(record, base_q[qid], thresholds, answerable=False)[0]
        if drops or record.status == "error":
            explains = [" ".join(p for p in (f"score {s:.4g}" if s is not None else "", why or "") if p) or None
                        for s, why in zip(record.scores or [None] * len(record.ranking),
                                          record.explains or [None] * len(record.ranking))]
            regressions.append(Regression(qid, golden[qid].text, drops, [], record.ranking, explains, record.error,
                                          answerable=False))
    recall = [parse_measure(m).cutoff for m in metrics if parse_measure(m).name == "recall"]
    k = next((c for c in recall if c is not None), None) or _deepest_cutoff(metrics)
    answerable = {q: (records[q].ranking, records[q].scores, golden[q].judgments) for q in order
                  if golden[q].answerable and records[q].status == "scored" and records[q].scores}
    unanswerable = {q: records[q].scores if records[q].scores else [None] * records[q].n_docs
                    for q in ran if records[q].status == "unanswerable"}
    scored_any = any(s is not None for q in ran for s in records[q].scores)
    return NoAnswerRow(
        n=len(ran), now=false_retrieval_rate(value.values()),
        now_common=false_retrieval_rate(value[q] for q in common) if baseline else None,
        baseline=false_retrieval_rate(float(base_q[q][FALSE_RETRIEVAL]) for q in common) if baseline else None,
        tolerance=thresholds.false_retrieval_rate_tolerance, maximum=thresholds.false_retrieval_rate_max,
        threshold=answer_threshold, retrieved=[q for q in ran if value[q]], n_common=len(common),
        tradeoff=tradeoff(answerable, unanswerable, k or 10**9, relevance_level, answer_threshold)
        if scored_any else [],
        k=k,
        new=[q for q in ran if q not in common] if baseline else [],
    )


def _threshold_cost(row: NoAnswerRow | None, n: int) -> str | None:
    """The answerable recall a ``rag_answer_threshold`` gives up, when it is more than one query's
    worth: the gate measures the whole ranking, so an application that drops results under the
    threshold would lose recall no gate sees."""
    if row is None or row.threshold is None or not row.tradeoff or not n:
        return None
    whole = next((t.recall for t in row.tradeoff if t.threshold is None), None)
    held = next((t.recall for t in row.tradeoff if t.in_force), None)
    if whole is None or held is None or not drop_beyond_one_query(held - whole, n):
        return None
    k = f"@{row.k}" if row.k else ""
    return (f"rag_answer_threshold {row.threshold:g}: an application that drops results scoring under it "
            f"keeps recall{k} {held:.4f} of the answerable questions, against {whole:.4f} for the whole "
            "ranking the gate measures; see the answer threshold trade-off")


def _gates_no_answer(thresholds: Thresholds) -> bool:
    return thresholds.false_retrieval_rate_tolerance is not None or thresholds.false_retrieval_rate_max is not None


def _limit_problems(name: str, row: AggregateRow | NoAnswerRow, reference: str, beyond: bool, past: float | None,
                    rise: bool = False) -> list[str]:
    """What a gated row broke: moved beyond its tolerance against ``reference`` (``beyond``), and
    ``past``, the floor its value fell under (with ``rise``, where higher is worse: the ceiling it
    went over), else None."""
    problems = []
    if beyond:
        moved = f"rose {row.delta:+.4f}" if rise else f"fell {-(row.delta or 0.0):.4f}"
        problems.append(f"{name} {moved} against {reference} ({row.baseline:.4f} -> {row.now_common:.4f}); "
                        f"allowed {'rise' if rise else 'drop'} {row.tolerance:g}")
    if past is not None:
        problems.append(f"{name} = {row.now:.4f} is {'above its ceiling' if rise else 'under its floor'} {past:g}")
    return problems


def _no_answer_gate(row: NoAnswerRow | None, reference: str, has_baseline: bool) -> Gate:
    """The false_retrieval_rate gate: no rise beyond its tolerance, no rate above its ceiling."""
    if row is None:
        return Gate(RATE, True, f"{RATE}: no question marked answerable: false ran")
    problems = _limit_problems(RATE, row, reference, row.rose_too_far, row.maximum if row.over_max else None,
                               rise=True)
    if row.tolerance is not None and has_baseline and row.n_common == 0:
        problems.append(f"{RATE} cannot be compared: no unanswerable question of this run is in {reference}, so "
                        "its allowed rise checks nothing; refresh the baseline to record them")
    if problems:
        return Gate(RATE, False, "; ".join(problems))
    return Gate(RATE, True, f"{RATE} within tolerance")



def _untestable(aggregate: Sequence[AggregateRow], thresholds: Thresholds, reference: str) -> list[str]:
    """Ungated metrics that fell by more than 1/n on too few queries for significant-drops to judge:
    on a small set (a smoke subset) that gate cannot fail, and a pass must not hide it."""
    if not thresholds.fail_on_significant_drop:
        return []
    return [f"significant-drops could not judge {r.metric}: it fell {-r.delta:.4f} against {reference} "  # type: ignore[operator]
            f"({r.baseline:.4f} -> {r.now_common:.4f}) on {r.stats.changed} changed "  # type: ignore[union-attr]
            f"{'query' if r.stats.changed == 1 else 'queries'}, too few for p < {SIGNIFICANT_P:g} (the smallest "  # type: ignore[union-attr]
            f"p they allow is {r.stats.smallest_p:.4f}); give {r.metric} a tolerance "  # type: ignore[union-attr]
            f"({r.metric}_tolerance in thresholds.json) to gate such drops on this set"
            for r in aggregate if not r.gated and r.untestable_drop]


def find_renames(golden: GoldenSet, baseline: Baseline) -> dict[str, str]:
    """Baseline ids whose query was renamed since: ``{old id: new id}``.

    A query of the golden set missing from the baseline whose text and judgments (its
    ``_judgments`` digest) are those of exactly one baseline entry missing from the
    golden set is that entry, renamed. Without this, a renamed query (a typo fixed, or
    a zero-width space added) would read as one new query and one removed query, and a
    regression on it would never be compared.
    """
    gone: dict[str, list[str]] = {}
    for qid, entry in baseline.per_query.items():
        if qid not in golden and isinstance(entry.get("_judgments"), str):
            gone.setdefault(entry["_judgments"], []).append(qid)
    if not gone:
        return {}
    arrived: dict[str, list[str]] = {}
    for q in golden:
        if q.qid not in baseline.per_query:
            digest = q.judgments_digest()
            if digest in gone:
                arrived.setdefault(digest, []).append(q.qid)
    return {gone[d][0]: new[0] for d, new in arrived.items() if len(new) == 1 and len(gone[d]) == 1}


def gate_names(metrics: Sequence[str], thresholds: Thresholds, pooled: bool = False, scoped: bool = False) -> list[str]:
    """The gates a run has, known before it starts (so they can be collected as items); a pooled
    golden set adds ``unjudged``, and one with a ``scope`` on any record ``leak``, last."""
    names = ["baseline"]
    names += [m for m in metrics if m in thresholds.tolerance or m in thresholds.minimum]
    if thresholds.max_regressed_queries is not None:
        names.append("regressed-queries")
    if thresholds.fail_on_significant_drop and any(
            m not in thresholds.tolerance and m not in thresholds.minimum for m in metrics):
        names.append("significant-drops")
    if _gates_no_answer(thresholds):
        names.append(RATE)
    if thresholds.fail_on_stale_labels:
        names.append(STALE_GATE)
    if pooled:
        names.append("unjudged")
    if scoped:
        names.append(LEAK_GATE)
    return names


def evaluate_gates(
    aggregate: Sequence[AggregateRow],
    regressions: Sequence[Regression],
    thresholds: Thresholds,
    has_baseline: bool,
    not_run: Sequence[str] = (),
    reference: str = "the baseline",
    baseline_path: str | None = None,
    compared: Collection[str] | None = None,
    removed: Sequence[str] = (),
    unscored: Mapping[str, str | None] | None = None,
) -> list[Gate]:
    """One :class:`Gate` per name of :func:`gate_names`, in the same order.

    The ``baseline`` gate holds when there is a baseline and every query meant to
    run did: a partial run (``-k``, ``--deselect``, a run stopped early) cannot
    pass for the whole set, however good the part looks.
    """
    where = f" at {baseline_path}" if baseline_path else ""
    unmet = [] if has_baseline else [
        f"no baseline{where} to compare with; create it with `pytest --rag-eval --rag-update-baseline`"]
    if not_run:
        n = len(not_run)
        unmet.append(f"partial run: {n} {'query' if n == 1 else 'queries'} meant to run did not "
                        f"({', '.join(not_run[:5])}{' …' if n > 5 else ''}; deselected with -k, --deselect or --lf, "
                        "or the run stopped early); the gate judges the whole set, so run it unfiltered")
    if removed:
        n = len(removed)
        unmet.append(f"{n} {'query' if n == 1 else 'queries'} of {reference} {'is' if n == 1 else 'are'} gone from "
                     f"the golden set ({listed(list(removed))}): a query removed (or whose judgments were dropped) "
                     "is no longer checked, so its removal must show in the baseline's diff: refresh the baseline "
                     "in the same change")
    if unscored:
        n = len(unscored)
        why = [f"{q} ({reason})" if reason else q for q, reason in unscored.items()]
        unmet.append(f"{n} {'query' if n == 1 else 'queries'} that {reference} scored cannot be scored now: "
                     f"{listed(why)}. A gold document gone from the corpus (removed, renamed, or missing from "
                     "doc_ids()) hides any regression of its query: restore it or fix the golden set; or, if it is "
                     "gone on purpose, refresh the baseline with --rag-allow-missing-gold in the same change")
    gates = [Gate("baseline", not unmet, "; ".join(unmet) or "baseline found")]
    for row in aggregate:
        if row.tolerance is None and row.minimum is None:
            continue
        problems = _limit_problems(row.metric, row, reference, row.dropped_too_far,
                                   row.minimum if row.under_floor else None)
        if row.tolerance is not None and row.delta is None and has_baseline:
            # A tolerance with nothing to hold it against checks nothing: that is a failure, not a pass.
            if compared is not None and row.metric not in compared:
                problems.append(f"{row.metric} cannot be compared: {reference} holds no {row.metric} (it measured "
                                f"{', '.join(sorted(compared)) or 'no metric'}), so its allowed drop checks "
                                f"nothing; re-measure {reference} with {row.metric}, or remove "
                                f"{row.metric}_tolerance")
            else:
                problems.append(f"{row.metric} cannot be compared: no query of this run is in {reference}, so its "
                                "allowed drop checks nothing")
        if problems:
            gates.append(Gate(row.metric, False, "; ".join(problems)))
        elif row.delta is None and row.minimum is None:
            gates.append(Gate(row.metric, True, f"{row.metric}: nothing to compare with"))
        else:
            gates.append(Gate(row.metric, True, f"{row.metric} within tolerance"))
    if thresholds.max_regressed_queries is not None:
        count, limit = len(regressions), thresholds.max_regressed_queries
        gates.append(Gate("regressed-queries", count <= limit,
                          f"{count} {'query' if count == 1 else 'queries'} regressed (errors included); "
                          f"at most {limit} allowed"))
    if thresholds.fail_on_significant_drop and any(not r.gated for r in aggregate):
        fell = [r for r in aggregate if not r.gated and r.significant_drop]
        message = "; ".join(
            f"{r.metric} fell {-r.delta:.4f} against {reference} ({r.baseline:.4f} -> {r.now_common:.4f}, "  # type: ignore[operator]
            f"p={r.stats.p_value:.4f} < {SIGNIFICANT_P:g}, more than 1/n = {1 / r.stats.n:.4f})"  # type: ignore[union-attr]
            for r in fell)
        if fell:
            message += (". No threshold gates " + ("it" if len(fell) == 1 else "them") + ", but a drop this "
                        "clear is not chance: gate " + ("it" if len(fell) == 1 else "them") + " in thresholds.json ("
                        + ", ".join(f"{r.metric}_tolerance" for r in fell) + "), or set "
                        "\"fail_on_significant_drop\": false to only report such drops")
        gates.append(Gate("significant-drops", not fell,
                          message or f"no ungated metric fell beyond chance (p < {SIGNIFICANT_P:g}) and by more "
                                     "than 1/n"))
    return gates



def _denoise(delta: float) -> float:
    """Baselines keep 10 decimals: a smaller difference is rounding, not a changed query."""
    return 0.0 if abs(delta) < EPS else delta


def _resamples(n: int) -> int:
    """10,000 resamples for a typical golden set; fewer for huge ones, where the
    interval is already tight and the work (resamples x n) would dominate the run."""
    return max(1_000, min(10_000, 5_000_000 // max(n, 1)))


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _deepest_cutoff(metrics: Sequence[str]) -> int | None:
    """The deepest cutoff among the metrics (those without one aside): a query that
    returned fewer documents could not reach that metric's potential."""
    return max((c for m in metrics if (c := parse_measure(m).cutoff) is not None), default=None)
