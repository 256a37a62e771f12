"""What one query's comparison with its baseline produced, and the rows a verdict is made of.

Plain data, shipped from xdist workers to the controller and read back from run artifacts:
:class:`QueryRecord` (one query item's result), :class:`Drop` (a metric that fell),
:class:`Regression` (a query the report lists), :class:`AggregateRow` and :class:`NoAnswerRow`
(the means against the baseline's), :class:`ScopeLeak`. A query is compared with its baseline
entry once, by :func:`judge_query`, where it is scored.

Policies:
- An errored query counts as a regression, with every metric 0.
- Drops smaller than ``EPS`` are float noise, not regressions.
- A query regressed when any metric fell by more than its query tolerance.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

from pytest_ragmetrics.evaluation import drop_beyond_one_query
from pytest_ragmetrics.gate.thresholds import Thresholds
from pytest_ragmetrics.unanswerable import FALSE_RETRIEVAL, RATE

if TYPE_CHECKING:  # numpy (behind stats) loads only when a comparison is made
    from pytest_ragmetrics.stats import DeltaStats

__all__ = ["EPS", "SIGNIFICANT_P", "QueryRecord", "Drop", "Regression", "AggregateRow", "NoAnswerRow", "ScopeLeak",
           "query_drops", "false_retrieval_drops", "judge_query", "to_judge", "Undecided", "undecided",
           "is_inconclusive"]

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
