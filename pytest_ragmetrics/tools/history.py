"""``ragmetrics history``: a series of nightly run artifacts read together.

One artifact says how a run compared with its baseline; a slow slide, each night
within tolerance of the night before, never fails that comparison once the
baseline is refreshed along the way, or when the runs first rose above the
baseline. Read together, the artifacts show it. Pure functions over the JSON the
plugin writes (``--rag-report``):

- :func:`load_artifacts` reads files and folders, refuses what is not a run
  artifact (naming the file), and orders runs by ``_meta.created`` (ties: git
  commit, then path).
- :func:`build_history` groups runs measured alike (measurement config, ``k``,
  golden-set sha256, per-query judgments, subset; never mixed in one series),
  recomputes each run's means overall and per tag with the gate's own
  :func:`~pytest_ragmetrics.gate.verdict.build_verdict`, marks baseline refreshes
  and retriever changes, finds drift (:func:`find_drift`) and flaky queries.

The result's :meth:`History.to_dict` is the JSON of ``--format json``; the text,
Markdown and HTML pages are drawn from that dict by ``report/``.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from pytest_ragmetrics.errors import InputError, MeasureError, RagMetricsError, ThresholdsError, brief_repr, listed
from pytest_ragmetrics.gate.artifact import load_artifact
from pytest_ragmetrics.gate.baseline import measurement_mismatch
from pytest_ragmetrics.gate.thresholds import Thresholds, recorded_thresholds
from pytest_ragmetrics.gate.verdict import EPS, QueryRecord, RunInputs, ScopeCheck, judge_run
from pytest_ragmetrics.golden import GoldenSet, Query
from pytest_ragmetrics.measures import MeasurementConfig
from pytest_ragmetrics.report.tables import counted
from pytest_ragmetrics.report.text import retriever_changes
from pytest_ragmetrics.tools.compare import RunData, run_data_from_artifact

__all__ = [
    "VERDICTS",
    "Artifact",
    "RunPoint",
    "Drift",
    "Flip",
    "FlakyQuery",
    "Group",
    "History",
    "artifact_paths",
    "read_artifact",
    "load_artifacts",
    "find_drift",
    "build_history",
]

#: A query's verdict in one run: scored and not regressed, regressed (fell beyond a
#: per-query tolerance), errored, or not scorable (no relevant document).
VERDICTS = ("ok", "regressed", "error", "unscorable")

# --------------------------------------------------------------------------- loading


@dataclass
class Artifact:
    """One run artifact as history reads it."""

    path: str
    meta: dict[str, Any]
    side: RunData
    created: _dt.datetime
    config: MeasurementConfig
    #: the allowed drop of each metric's mean (``<metric>_tolerance``) the run was gated with
    tolerance: dict[str, float]
    #: each query's verdict in this run (see :data:`VERDICTS`)
    verdicts: dict[str, str]
    #: sha256 of the baseline file's bytes judged against (or written), from ``_meta.baseline``
    baseline_sha256: str | None
    #: digest of that baseline's numbers (``_meta.baseline.content``; older artifacts have none)
    baseline_content: str | None
    #: that baseline's ``_meta.created``: a refresh always writes a new one
    baseline_created: str | None
    #: digest of the per-query baseline values the run recorded (older artifacts have only these)
    baseline_values: str | None
    baseline_updated: bool
    passed: bool | None
    #: how many records were checked for label age, stale and undated (None: no age limit in that run)
    stale_labels: dict[str, Any] | None = None

    @property
    def commit(self) -> str | None:
        value = self.meta.get("git_commit")
        return value if isinstance(value, str) else None

    @property
    def created_text(self) -> str:
        return str(self.meta.get("created"))

    @property
    def metrics(self) -> list[str]:
        return self.config.metric_names

    def sort_key(self) -> tuple[_dt.datetime, str, str]:
        return self.created, self.commit or "", self.path

    def group_key(self) -> str:
        """What must be equal for two runs' numbers to share a line."""
        golden = meta if isinstance(meta := self.meta.get("golden"), Mapping) else {}
        judgments = hashlib.sha256(json.dumps(sorted(self.side.judgments.items())).encode()).hexdigest()
        return json.dumps({"measurement": self.meta["measurement"], "k": self.meta.get("k"),
                           "golden": golden.get("sha256"), "judgments": judgments,
                           "subset": self.meta.get("subset", "full")}, sort_keys=True)


def artifact_paths(paths: Iterable[str | Path]) -> tuple[list[Path], list[tuple[str, str]]]:
    """The files to read: each path as given, a folder as every ``*.json`` in it (sorted),
    a file named twice once. Paths that are not there come back as problems."""
    found: list[Path] = []
    problems: list[tuple[str, str]] = []
    seen: set[Path] = set()
    for given in paths:
        path = Path(given)
        if path.is_dir():
            files = sorted(p for p in path.glob("*.json") if p.is_file())
            if not files:
                problems.append((str(path), "a folder with no *.json file in it"))
        elif path.exists():
            files = [path]
        else:
            problems.append((str(path), "file not found"))
            files = []
        for f in files:
            if f.resolve() not in seen:
                seen.add(f.resolve())
                found.append(f)
    return found, problems


def _created(value: Any) -> _dt.datetime | None:
    """``_meta.created`` as an aware time (a time without a zone is read as UTC)."""
    if not isinstance(value, str):
        return None
    try:
        when = _dt.datetime.fromisoformat(value)
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=_dt.timezone.utc)


def _not_in_a_series(meta: Mapping[str, Any]) -> str | None:
    """Why a checked run artifact cannot be placed in a series, or ``None``."""
    if _created(meta.get("created")) is None:
        return (f"_meta.created is {brief_repr(meta.get('created'))}, not an ISO time, "
                "so the run cannot be placed in the series")
    return None


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def read_artifact(path: str | Path) -> Artifact:
    """Read one run artifact, checked by :func:`~pytest_ragmetrics.gate.artifact.load_artifact`;
    anything else is an error naming the file (and the record and field)."""
    path = Path(path)
    name = str(path)
    data = load_artifact(path)
    problem = _not_in_a_series(data["_meta"])
    if problem:
        raise InputError(name, None, f"not a run artifact: {problem}. `ragmetrics history` reads the JSON files "
                                     "that `pytest --rag-eval --rag-report=PATH` writes")
    meta = data["_meta"]
    try:
        config = MeasurementConfig.from_dict(meta["measurement"])
        recorded = recorded_thresholds(meta, config, name)
    except (MeasureError, ThresholdsError) as exc:
        raise InputError(name, "_meta", str(exc)) from None
    side = run_data_from_artifact(data, name)
    side.rankings.clear()  # not read here; ninety nights of a large set would hold them all
    regressed = {r["qid"] for r in data["comparison"].get("regressed", [])}
    verdicts = {}
    for qid, entry in data["per_query"].items():
        status = entry["status"]
        if status == "unanswerable":  # one that newly got an answer regressed; the others are counted apart
            verdicts[qid] = "regressed" if qid in regressed else status
            continue
        verdicts[qid] = ("ok" if qid not in regressed else "regressed") if status == "scored" else status
    baseline = meta.get("baseline")
    per_query_baseline = {q: e["baseline"] for q, e in data["per_query"].items() if isinstance(e.get("baseline"), dict)}
    passed = data["comparison"].get("passed")
    updated = bool(isinstance(baseline, dict) and baseline.get("updated"))
    return Artifact(
        path=name, meta=meta, side=side, created=_created(meta["created"]),  # type: ignore[arg-type]
        config=config, tolerance=dict(recorded.tolerance) if recorded else {}, verdicts=verdicts,
        baseline_sha256=baseline.get("sha256") if isinstance(baseline, dict) else None,
        baseline_content=baseline.get("content") if isinstance(baseline, dict) else None,
        baseline_created=baseline.get("created") if isinstance(baseline, dict) else None,
        baseline_values=_digest(per_query_baseline) if per_query_baseline else None,
        baseline_updated=updated,
        # a run that wrote the baseline skipped its gates: it passed or failed nothing
        passed=passed if isinstance(passed, bool) and not updated else None,
        stale_labels=_stale_counts(data["comparison"].get("stale_labels")),
    )


def _stale_counts(ages: Any) -> dict[str, Any] | None:
    """A run's label ages as counts, and the share of stale labels among the records checked."""
    if not isinstance(ages, dict):
        return None
    checked, stale, undated = ages["checked"], len(ages["stale"]), len(ages["undated"])
    return {"checked": checked, "stale": stale, "undated": undated, "share": stale / checked if checked else None}


def load_artifacts(paths: Iterable[str | Path], skip_bad: bool = False) -> tuple[list[Artifact], list[tuple[str, str]]]:
    """Every artifact in ``paths`` (files or folders), oldest first.

    A path that is missing or not a run artifact raises :class:`InputError` naming
    it, unless ``skip_bad``: then it is returned among the skipped ``(path,
    problem)`` pairs. Nothing readable at all is an error either way.
    """
    files, skipped = artifact_paths(paths)
    if skipped and not skip_bad:
        path, problem = skipped[0]
        raise InputError(path, None, problem)
    artifacts = []
    for f in files:
        try:
            artifacts.append(read_artifact(f))
        except RagMetricsError as exc:
            if not skip_bad:
                raise
            skipped.append((str(f), str(exc).removeprefix(f"{f}: ")))
    if not artifacts:
        raise RagMetricsError("no run artifact to read" + (
            f" ({len(skipped)} skipped: {listed([p for p, _ in skipped])})" if skipped else ""))
    artifacts.sort(key=Artifact.sort_key)
    return artifacts, skipped


# --------------------------------------------------------------------------- the series


@dataclass
class RunPoint:
    """One run on a group's timeline."""

    index: int  # 1-based, in time order within its group
    path: str
    created: str
    git_commit: str | None
    retriever: Any
    n: int  # scored and errored queries: the n of every mean
    aggregate: dict[str, float | None]
    delta: dict[str, float | None]  # against the group's previous run
    beyond: list[str]  # metrics that fell more than their allowed drop in this one step
    tolerance: dict[str, float]
    tags: dict[str, dict[str, Any]]  # tag -> {"n": int, "means": {metric: value}}
    verdicts: dict[str, int]  # how many queries had each verdict
    passed: bool | None
    baseline: Any  # the artifact's _meta.baseline, as recorded
    refresh: str | None  # why this run starts a new baseline period, or None
    retriever_changes: list[str]
    segment: int  # which baseline period (1 = the first)
    #: {"checked", "stale", "undated", "share"} when the run aged its labels, else None
    stale_labels: dict[str, Any] | None = None
    #: {"judged", "unjudged", "unjudged_new", "inconclusive", "to_judge", "k"} for a pooled golden set, else None
    pooled: dict[str, Any] | None = None
    #: questions marked answerable: false that ran (outside ``n`` and every mean)
    no_answer: int = 0
    #: their mean false retrieval (lower is better; None when none ran)
    false_retrieval_rate: float | None = None


@dataclass
class Drift:
    """A slide of ``metric`` over consecutive runs, each step within the allowed drop."""

    metric: str
    start: int  # run index of the peak
    end: int  # run index of the trough
    start_created: str
    end_created: str
    start_value: float
    end_value: float
    tolerance: float
    largest_step: float  # the largest one-step fall inside the window (within tolerance)
    segment: int
    current: bool  # in its group's latest baseline period, with no baseline refresh (in any group) since

    @property
    def move(self) -> float:
        return self.end_value - self.start_value

    @property
    def steps(self) -> int:
        return self.end - self.start

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "move": self.move, "steps": self.steps}


@dataclass
class Flip:
    run: int
    created: str
    path: str
    before: str
    after: str


@dataclass
class FlakyQuery:
    qid: str
    flips: list[Flip]
    runs: int  # runs of the group in which the query was present

    def to_dict(self) -> dict[str, Any]:
        return {"qid": self.qid, "n_flips": len(self.flips), "runs": self.runs,
                "flips": [asdict(f) for f in self.flips]}


@dataclass
class Group:
    """Runs measured alike, in time order, with what was found in them."""

    number: int
    measured: dict[str, Any]
    metrics: list[str]
    tags: list[str]
    runs: list[RunPoint]
    drift: list[Drift] = field(default_factory=list)
    flaky: list[FlakyQuery] = field(default_factory=list)
    differs: list[str] = field(default_factory=list)  # from group 1, in words

    def to_dict(self) -> dict[str, Any]:
        return {"group": self.number, "measured": self.measured, "metrics": self.metrics, "tags": self.tags,
                "differs": self.differs, "runs": [asdict(r) for r in self.runs],
                "drift": [d.to_dict() for d in self.drift], "flaky": [f.to_dict() for f in self.flaky]}


@dataclass
class History:
    groups: list[Group]
    skipped: list[tuple[str, str]] = field(default_factory=list)
    min_flips: int = 2

    @property
    def current_drift(self) -> list[Drift]:
        """Drift no baseline refresh has answered yet, in any group: what a nightly job fails on."""
        return [d for g in self.groups for d in g.drift if d.current]

    def to_dict(self) -> dict[str, Any]:
        return {
            "n_artifacts": sum(len(g.runs) for g in self.groups),
            "skipped": [{"path": p, "problem": why} for p, why in self.skipped],
            "min_flips": self.min_flips,
            "drift_flagged": any(g.drift for g in self.groups),
            "current_drift": bool(self.current_drift),
            "groups": [g.to_dict() for g in self.groups],
        }


def find_drift(values: Sequence[float | None], tolerances: Sequence[float | None]) -> list[tuple[int, int]]:
    """Windows ``(peak, trough)`` (positions in ``values``) of drift within one baseline period.

    ``values[j]`` is a run's mean, ``tolerances[j]`` the allowed drop that run was
    gated with (``None``: the metric was not gated, so not checked). The runs split
    into stretches at every step (run j-1 to run j) that fell more than ``tolerances[j]``
    (that step is the gate's to judge, not a drift), and at every step into or out of
    a run without a value, or into a run without an allowed drop. In each stretch,
    the decline at run j is the highest value since the stretch began (the latest
    run holding it) minus ``values[j]``; the stretch's largest decline is flagged
    when it exceeds the allowed drop of its trough run.
    Every step in such a window fell by at most the allowed drop, so a flagged
    window always spans two steps or more.
    """
    windows: list[tuple[int, int]] = []
    start = 0
    n = len(values)
    while start < n:
        if values[start] is None:
            start += 1
            continue
        end = start
        while end + 1 < n:
            nxt, cur, tol = values[end + 1], values[end], tolerances[end + 1]
            if nxt is None or tol is None or cur is None or cur - nxt > tol + EPS:
                break
            end += 1
        peak, best = start, None
        for j in range(start, end + 1):
            v = values[j]
            if v > values[peak] - EPS:  # type: ignore[operator]
                peak = j
            decline = values[peak] - v  # type: ignore[operator]
            if best is None or decline > best[0] + EPS:
                best = (decline, peak, j)
        trough_tolerance = tolerances[best[2]] if best is not None else None
        if best is not None and trough_tolerance is not None and best[0] > trough_tolerance + EPS:
            windows.append((best[1], best[2]))
        start = end + 1
    return windows


def _means(a: Artifact) -> tuple[int, dict[str, float | None], dict[str, dict[str, Any]]]:
    """n, the mean of each metric and the means per tag, exactly as the gate computes them
    (an errored query counts 0 everywhere; an unscorable one is left out)."""
    metrics = a.metrics
    records: dict[str, QueryRecord] = {}
    queries = []
    for qid in a.verdicts:
        if qid in a.side.no_answer:
            continue  # outside every mean: its rate is RunPoint.false_retrieval_rate
        if qid in a.side.errors:
            records[qid] = QueryRecord(qid, "error", error=a.side.errors[qid])
        elif qid in a.side.unscorable:
            records[qid] = QueryRecord(qid, "unscorable")
        elif qid in a.side.metrics:
            records[qid] = QueryRecord(qid, "scored", {m: float(a.side.metrics[qid][m]) for m in metrics})
        else:
            continue
        queries.append(Query(qid, "", {}, tuple(a.side.tags.get(qid) or ())))
    golden = GoldenSet(a.path, tuple(queries))
    verdict = judge_run(RunInputs(
        records=records, golden=golden, full_golden=golden, baseline=None, baseline_path=None,
        thresholds=Thresholds.defaults(a.config), metrics=tuple(metrics), relevance_level=a.config.relevance_level,
        reference="the baseline", labels=None, artifact_path=None, answer_threshold=None, lacking={},
        scope=ScopeCheck(), skipped={}, ratchet=None))
    tags = {tag: {"n": n, "means": now} for tag, (n, now, _) in verdict.strata.items()}
    return verdict.n, {row.metric: row.now for row in verdict.aggregate}, tags


def _describe(a: Artifact) -> dict[str, Any]:
    golden = meta if isinstance(meta := a.meta.get("golden"), Mapping) else {}
    return {**a.config.to_dict(), "k": a.meta.get("k"), "subset": a.meta.get("subset", "full"),
            "golden_source": golden.get("source"), "golden_sha256": golden.get("sha256"),
            "n_queries": golden.get("n_queries")}


def _differences(lead: Artifact, other: Artifact, names: tuple[str, str]) -> list[str]:
    """What makes ``other`` incomparable with ``lead``, one line a difference."""
    out = measurement_mismatch(lead.meta, other.meta, names)
    first, second = names
    subsets = [x.meta.get("subset", "full") for x in (lead, other)]
    if subsets[0] != subsets[1]:
        out.append(f"subset: {first} {subsets[0]!r}, {second} {subsets[1]!r}")
    a, b = lead.side.judgments, other.side.judgments
    changed = sorted(q for q in a if q in b and a[q] != b[q])
    if changed:
        out.append(f"judgments or text changed for {counted(len(changed), 'query', 'queries')}: {listed(changed)}")
    only = [(name, sorted(set(x) - set(y))) for name, x, y in ((first, a, b), (second, b, a))]
    for name, qids in only:
        if qids:
            out.append(f"{counted(len(qids), 'query', 'queries')} only in {name}: {listed(qids)}")
    shas = [(_describe(x)["golden_sha256"] or "")[:12] for x in (lead, other)]
    if shas[0] != shas[1] and not (changed or only[0][1] or only[1][1]):
        out.append(f"golden set sha256: {first} {shas[0] or 'not recorded'}…, {second} {shas[1] or 'not recorded'}…")
    return out or ["measured alike, except in what the artifacts do not record"]


def _refresh(a: Artifact, prev_sha: str | None, prev_values: str | None, prev_content: str | None = None,
             prev_created: str | None = None) -> str | None:
    """Why ``a`` starts a new baseline period, or ``None``: it wrote the baseline, or it was
    judged against another baseline than the run before: other numbers (``content``) and a new
    ``created``, which every refresh writes. The file's bytes are not the baseline: a trailing
    newline, another line ending or a reseal with a note changes them and refreshes nothing.
    Artifacts that record no content digest are compared by the file's sha256, else by the
    per-query baseline values they recorded; a ``created`` both record and that did not change
    still rules a refresh out."""
    if a.baseline_updated:
        return "this run wrote a new baseline (--rag-update-baseline)"
    created = a.baseline_created
    since = f" (created {created})" if created else ""
    if created and prev_created and created == prev_created:
        return None
    if a.baseline_content and prev_content:
        return f"judged against a new baseline{since}" if a.baseline_content != prev_content else None
    if a.baseline_sha256 and prev_sha:
        return f"judged against a new baseline{since}" if a.baseline_sha256 != prev_sha else None
    if a.baseline_values and prev_values and a.baseline_values != prev_values:
        return "judged against new baseline values"
    return None


def _group(number: int, runs: list[Artifact], newest: bool, min_flips: int) -> Group:
    metrics = runs[-1].metrics
    points: list[RunPoint] = []
    prev_sha = prev_values = prev_content = prev_created = None
    segment = 1
    for i, a in enumerate(runs):
        n, aggregate, tags = _means(a)
        refresh = _refresh(a, prev_sha, prev_values, prev_content, prev_created)
        if refresh and i:
            segment += 1
        prev_sha = a.baseline_sha256 or prev_sha
        prev_values = a.baseline_values or prev_values
        prev_content = a.baseline_content or prev_content
        prev_created = a.baseline_created or prev_created
        before = points[-1] if points else None
        delta: dict[str, float | None] = {}
        beyond = []
        for m in metrics:
            old = before.aggregate.get(m) if before else None
            now = aggregate.get(m)
            delta[m] = None if old is None or now is None else now - old
            tol = a.tolerance.get(m)
            if delta[m] is not None and tol is not None and -delta[m] > tol + EPS:  # type: ignore[operator]
                beyond.append(m)
        changes = retriever_changes(runs[i - 1].meta.get("retriever"), a.meta.get("retriever")) if i else []
        points.append(RunPoint(
            index=i + 1, path=a.path, created=a.created_text, git_commit=a.commit, retriever=a.meta.get("retriever"),
            n=n, aggregate=aggregate, delta=delta, beyond=beyond, tolerance=a.tolerance, tags=tags,
            verdicts={v: sum(1 for x in a.verdicts.values() if x == v) for v in VERDICTS}, passed=a.passed,
            baseline=a.meta.get("baseline"), refresh=refresh, retriever_changes=changes, segment=segment,
            stale_labels=a.stale_labels,
            pooled={**a.side.pooled, "k": a.meta.get("k")} if a.side.pooled else None,
            no_answer=len(a.side.no_answer), false_retrieval_rate=a.side.false_retrieval_rate(),
        ))
    drift = []
    last_segment = points[-1].segment
    for seg in sorted({p.segment for p in points}):
        span = [p for p in points if p.segment == seg]
        for m in metrics:
            for peak, trough in find_drift([p.aggregate.get(m) for p in span], [p.tolerance.get(m) for p in span]):
                window = span[peak:trough + 1]
                steps = [-(p.delta[m] or 0.0) for p in window[1:]]
                drift.append(Drift(m, window[0].index, window[-1].index, window[0].created, window[-1].created,
                                   window[0].aggregate[m], window[-1].aggregate[m],  # type: ignore[arg-type]
                                   window[-1].tolerance[m], -max(steps), seg, newest and seg == last_segment))
    tag_names = sorted({t for p in points for t in p.tags})
    return Group(number, _describe(runs[-1]), metrics, tag_names, points, drift, _flaky(runs, points, min_flips))


def _flaky(runs: list[Artifact], points: list[RunPoint], min_flips: int) -> list[FlakyQuery]:
    """Queries whose verdict changed at least ``min_flips`` times between consecutive runs
    that hold them; a change across a baseline refresh is the refresh's, not counted."""
    last: dict[str, tuple[str, int]] = {}
    flips: dict[str, list[Flip]] = {}
    present: dict[str, int] = {}
    for a, p in zip(runs, points):
        for qid, verdict in a.verdicts.items():
            present[qid] = present.get(qid, 0) + 1
            if qid in last:
                before, segment = last[qid]
                if verdict != before and segment == p.segment:
                    flips.setdefault(qid, []).append(Flip(p.index, p.created, p.path, before, verdict))
            last[qid] = (verdict, p.segment)
    found = [FlakyQuery(q, f, present[q]) for q, f in flips.items() if len(f) >= min_flips]
    return sorted(found, key=lambda f: (-len(f.flips), f.qid))


def build_history(artifacts: Sequence[Artifact], min_flips: int = 2,
                  skipped: Sequence[tuple[str, str]] = ()) -> History:
    """Group ``artifacts`` (oldest first) by how they were measured and read each group's series.

    Groups come largest first, then the one with the most recent run; each later
    group says how it differs from the first.
    """
    if min_flips < 1:
        raise RagMetricsError(f"min_flips must be at least 1, got {min_flips}")
    by_key: dict[str, list[Artifact]] = {}
    for a in sorted(artifacts, key=Artifact.sort_key):
        by_key.setdefault(a.group_key(), []).append(a)
    ordered = sorted(by_key.values(), key=lambda runs: (-len(runs), -runs[-1].created.timestamp(), runs[-1].path))
    groups = []
    for number, runs in enumerate(ordered, start=1):
        group = _group(number, runs, True, min_flips)
        if number > 1:
            group.differs = _differences(ordered[0][-1], runs[-1], ("group 1", f"group {number}"))
        groups.append(group)
    # A drift stays current until a baseline refresh answers it, in whichever group the refresh
    # falls: a newer artifact measured differently (a golden set that grew by one question) must
    # not turn --fail-on-drift green on its own.
    when = {a.path: a.created.timestamp() for a in artifacts}
    refreshes = [when[p.path] for g in groups for p in g.runs if p.refresh and p.path in when]
    latest_refresh = max(refreshes, default=None)
    for g in groups:
        at = {p.index: when.get(p.path) for p in g.runs}
        g.drift = [d if not d.current or latest_refresh is None or (at.get(d.end) or 0) >= latest_refresh
                   else replace(d, current=False) for d in g.drift]
    return History(groups, list(skipped), min_flips)
