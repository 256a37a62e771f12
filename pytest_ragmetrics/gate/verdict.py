"""Judge a run: per-query drops, the means against the baseline, the gates, the worst-N.

:func:`judge_run` is the one entry point: the plugin, ``compare``, ``merge`` and ``history`` each
build a :class:`~pytest_ragmetrics.gate.inputs.RunInputs` and get a :class:`Verdict`. It gathers the
evidence (the means, the paired statistics, the regressed, moved and inconclusive queries, what the
run covered) and then asks every registered gate (:mod:`pytest_ragmetrics.gate.registry`) for its
outcome. A query is compared with its baseline entry once, by
:func:`~pytest_ragmetrics.gate.evidence.judge_query` where it is scored; its record carries the
answer to the item, the gate and the JUnit properties, so they never disagree about "regressed".

Policies:
- Aggregate deltas compare means over the queries present in both the run and the baseline (so a
  smoke subset is compared with the same queries' baseline); floors (``_min``) apply to the mean
  over every scored query of the run.
- When an aggregate gate fails, the queries that fell in its metric without crossing a per-query
  tolerance are kept too ("moved"), so a failed nDCG gate after a reranker bug still names the
  queries behind it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from pytest_ragmetrics.errors import listed
from pytest_ragmetrics.evaluation import drop_beyond_one_query, mean_metrics
from pytest_ragmetrics.gate.baseline import Baseline
from pytest_ragmetrics.gate.evidence import (
    EPS,
    SIGNIFICANT_P,
    AggregateRow,
    Drop,
    NoAnswerRow,
    QueryRecord,
    Regression,
    ScopeLeak,
    Undecided,
    false_retrieval_drops,
    is_inconclusive,
    judge_query,
    query_drops,
    to_judge,
    undecided,
)
from pytest_ragmetrics.gate.inputs import GatePlan, RunInputs, ScopeCheck
from pytest_ragmetrics.gate.registry import Outcome, gate_names, judge_gates
from pytest_ragmetrics.gate.staleness import LabelAges
from pytest_ragmetrics.gate.thresholds import Thresholds
from pytest_ragmetrics.golden import GoldenSet
from pytest_ragmetrics.measures import parse_measure
from pytest_ragmetrics.parents import ParentLevel, summarize_parents
from pytest_ragmetrics.unanswerable import FALSE_RETRIEVAL, RATE, false_retrieval_rate

if TYPE_CHECKING:  # numpy (behind stats) loads only when a comparison is made
    from pytest_ragmetrics.gate.gates.coverage import Coverage
    from pytest_ragmetrics.stats import DeltaStats

__all__ = [
    "EPS",
    "SIGNIFICANT_P",
    "QueryRecord",
    "Drop",
    "Regression",
    "AggregateRow",
    "NoAnswerRow",
    "ScopeLeak",
    "Gate",
    "Outcome",
    "Verdict",
    "RunInputs",
    "GatePlan",
    "ScopeCheck",
    "query_drops",
    "false_retrieval_drops",
    "judge_query",
    "judge_run",
    "find_renames",
    "gate_names",
    "is_inconclusive",
    "undecided",
    "Undecided",
    "to_judge",
    "LEAK_GATE",
]

#: A gate's outcome; the name the reports and the plugin have always used for it.
Gate = Outcome
#: The gate a scoped golden set adds (see :mod:`pytest_ragmetrics.gate.gates.leak`).
LEAK_GATE = "leak"

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
    #: queries the baseline scored that this run cannot (their gold left the corpus), with why
    unscored: dict[str, str | None] = field(default_factory=dict)
    #: pooled sets: metrics whose drop the new unjudged documents explain: (baseline bound, run bound)
    rescued: dict[str, tuple[float, float]] = field(default_factory=dict)
    #: what the hard gates judged and what they did not (None until the gates are judged)
    coverage: Coverage | None = None
    #: queries that fell in some metric but within every tolerance, largest fall first: a passing run
    #: names them, so what moved is never hidden by what was allowed
    within: list[Regression] = field(default_factory=list)
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
        """A strict gate (a leak) fails the run whatever the thresholds say, report-only mode included."""
        return (not self.fail_on_regression or not self.failures()) and not self.leaks \
            and not any(g.strict for g in self.failed_gates)

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
            "within": [r.to_dict() for r in self.within],
            "not_run": self.not_run,
            "moved_metrics": self.moved_metrics,
            "gates": [g.to_dict() for g in self.gates],
            **({"coverage": self.coverage.to_dict()} if self.coverage is not None else {}),
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


def judge_run(inputs: RunInputs) -> Verdict:
    """Judge a run: every query's comparison, the means, and every registered gate's outcome.

    ``inputs.records`` are the queries that ran, ``inputs.golden`` the queries meant to run,
    ``inputs.full_golden`` the whole set (what the baseline must cover; "removed"). Questions marked
    ``answerable: false`` stay out of every mean: they are judged by false retrieval.
    """
    records, golden, baseline, thresholds = inputs.records, inputs.golden, inputs.baseline, inputs.thresholds
    metrics, relevance_level, reference = list(inputs.metrics), inputs.relevance_level, inputs.reference
    full_golden, labels, answer_threshold = inputs.full_golden, inputs.labels, inputs.answer_threshold
    pooled = golden.judgments == "pooled"
    order = [q.qid for q in golden if q.qid in records]
    counted = [qid for qid in order if records[qid].status in ("scored", "error") and golden[qid].answerable]
    errored = [qid for qid in order if records[qid].status == "error"]
    unscorable = [qid for qid in order if records[qid].status == "unscorable"]
    deepest = _deepest_cutoff(metrics)
    short = {qid: records[qid].n_docs for qid in counted
             if records[qid].status == "scored" and deepest is not None and records[qid].n_docs < deepest}
    values = {qid: _values(records[qid], metrics) for qid in counted}

    everything = full_golden
    renamed = find_renames(everything, baseline) if baseline else {}
    if renamed:
        baseline = baseline.renamed(renamed)  # type: ignore[union-attr]
    base_q = baseline.per_query if baseline else {}
    #: each baseline entry's metrics, read once: the aggregate, every metric's paired test and every
    #: stratum look them up again for each query
    base_metrics = {qid: baseline.metrics_of(qid) for qid in base_q} if baseline else {}
    # an entry measured as another kind of question (answerable: false then) compares nothing: the coverage
    # gate names it
    common = [qid for qid in counted if qid in base_q and any(m in base_metrics[qid] for m in metrics)]
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
               or (thresholds.fail_on_significant_drop and r.tolerance is None and r.significant_drop)]
    regressions: list[Regression] = []
    moved: list[Regression] = []
    within: list[Regression] = []
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
        elif drops:  # fell, but within every tolerance: named, so a pass does not hide what moved
            within.append(Regression(qid, golden[qid].text, drops, golden[qid].gold(relevance_level),
                                     record.ranking, record.explains))
    no_answer = _no_answer(records, golden, baseline, thresholds, metrics, relevance_level, answer_threshold,
                           order, regressions)
    for qid in errored:
        if qid not in common and golden[qid].answerable:  # a new query that errored is still a failure to report
            regressions.append(Regression(qid, golden[qid].text, [], golden[qid].gold(relevance_level), [], [],
                                          records[qid].error))
    regressions.sort(key=lambda r: (r.error is None, -r.severity, -sum(d.loss for d in r.drops), r.qid))
    moved.sort(key=lambda r: (min(d.delta for d in r.drops if d.metric in failing), r.qid))

    not_run = [q.qid for q in golden if q.qid not in records]
    # a query the baseline scored that no longer can be (its gold left the corpus) would drop out of every mean
    unscored = {q: records[q].error for q in unscorable
                if q in base_q and any(not m.startswith("_") and m != FALSE_RETRIEVAL for m in base_q[q])}
    warnings = _untestable(aggregate, thresholds, reference)
    cost = _threshold_cost(no_answer, len(counted))
    if cost:
        warnings.append(cost)
    if labels is not None and not labels.fail and labels.warning():
        warnings.append(labels.warning())  # type: ignore[arg-type]
    if inputs.ratchet is not None and inputs.ratchet.ref is None and inputs.ratchet.skipped:
        warnings.append(f"baseline ratchet not checked: {inputs.ratchet.skipped}")
    pairs: list[tuple[str, str]] = []
    rescued: dict[str, tuple[float, float]] = {}
    if pooled:
        inconclusive.sort(key=lambda r: (-r.severity, r.qid))
        pairs = [(r.qid, d) for r in inconclusive for d in r.unjudged]
        pairs += _rescue_aggregates(rescued, aggregate, common, records, baseline, thresholds, pairs)
    for r in [*regressions, *moved, *inconclusive]:
        r.filters = golden[r.qid].filters if r.qid in golden else None
    leaks = [ScopeLeak(qid, golden[qid].text, golden[qid].scope or {}, golden[qid].filters, list(records[qid].leaks))
             for qid in order if records[qid].leaks]
    verdict = Verdict(
        n=len(counted), metrics=list(metrics), aggregate=aggregate, strata=strata,
        regressions=regressions, gates=[], n_common=len(common), new=new, removed=removed,
        errored=errored, unscorable=unscorable, short=short, has_baseline=baseline is not None,
        fail_on_regression=thresholds.fail_on_regression, strata_stats=strata_stats,
        parent_level=summarize_parents([(q, lv) for q in counted if (lv := records[q].parent_level) is not None]),
        moved=moved, moved_metrics=[m for m in failing if any(d.metric == m for r in moved for d in r.drops)],
        not_run=not_run, renamed=renamed, warnings=warnings, labels=labels,
        judgments=golden.judgments, inconclusive=inconclusive, to_judge=pairs,
        **(_pooled_means(records, counted, metrics, baseline) if pooled else {}),
        no_answer=no_answer, sources=sources, sources_stats=sources_stats,
        harvested=harvested_share(everything, thresholds.max_harvested_share), leaks=leaks,
        unscored=unscored, rescued=rescued,
        skipped={q: why for q, why in inputs.skipped.items() if q not in records},
        within=sorted(within, key=lambda r: (-max(d.loss for d in r.drops), r.qid)),
    )
    from pytest_ragmetrics.gate.gates.coverage import coverage_of

    verdict.coverage = coverage_of(inputs, verdict)
    verdict.gates = judge_gates(inputs, verdict)
    return verdict


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


def _rescue_aggregates(rescued: dict[str, tuple[float, float]], aggregate: Sequence[AggregateRow],
                       common: Sequence[str], records: Mapping[str, QueryRecord], baseline: Baseline | None,
                       thresholds: Thresholds, pairs: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """A mean that fell too far, but not with every new unjudged document relevant, is no regression
    either: its gate passes (``rescued`` gets its two bounds), and the unjudged gate asks for those
    documents instead; returns the documents to judge that ``pairs`` lacks."""
    if baseline is None:
        return []
    extra: list[tuple[str, str]] = []
    for row in aggregate:
        if not row.dropped_too_far or row.under_floor:
            continue
        bound = [(records[q].upper_new or records[q].metrics or {}).get(row.metric, 0.0)
                 if records[q].status == "scored" else 0.0 for q in common]
        base = [(records[q].baseline_upper_new or baseline.metrics_of(q)).get(row.metric, 0.0) for q in common]
        upper = math.fsum(bound) / len(bound) if bound else None
        upper_base = math.fsum(base) / len(base) if base else None
        if upper is None or upper_base is None or upper - upper_base < -row.tolerance - EPS:  # type: ignore[operator]
            continue
        docs = [(q, d) for q in common if records[q].status == "scored"
                and (records[q].metrics or {}).get(row.metric, 0.0) < baseline.metrics_of(q).get(row.metric, 0.0) - EPS
                for d in to_judge(records[q])]
        if not docs:
            continue
        rescued[row.metric] = (upper_base, upper)
        extra += [p for p in docs if p not in pairs and p not in extra]
    return extra


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
    # every answerable question the gate's recall counts: an empty ranking and an errored query score 0,
    # and a result without a score is never held back by a threshold
    answerable = {q: (r.ranking, r.scores or [None] * len(r.ranking), golden[q].judgments) if r.status == "scored"
                  else ([], [], golden[q].judgments)
                  for q in order if golden[q].answerable and (r := records[q]).status in ("scored", "error")}
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
            for r in aggregate if r.tolerance is None and r.untestable_drop]


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
