"""``ragmetrics compare A B``: judge run B against reference A outside pytest.

A and B are run artifacts (``--rag-report``), a baseline.json, or TREC run files
(scored against ``--qrels``). The comparison is the plugin's: the same
:func:`~pytest_ragmetrics.gate.verdict.build_verdict`, thresholds and report text, plus
per-query wins, ties and losses, so a nightly job can gate without pytest.

What the plugin refuses, compare refuses: sides measured under a different
measurement config (gain, relevance level, id rule, k) or with changed judgments
are not compared unless ``--accept-mismatch`` is given. A query of A that B has no
result for is a regression (every metric 0, as for an errored query); a query only
in B is new. TREC runs are document-level: their ids are used as given unless
``--id-separator`` asks for mapping, as in ``ragmetrics evaluate``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from pytest_ragmetrics.errors import InputError, listed
from pytest_ragmetrics.evaluation import evaluate, id_rule
from pytest_ragmetrics.gate.artifact import is_run_artifact, parse_run_json, whole_run_only
from pytest_ragmetrics.gate.baseline import Baseline, measurement_mismatch
from pytest_ragmetrics.gate.staleness import LabelAges
from pytest_ragmetrics.gate.thresholds import Thresholds
from pytest_ragmetrics.gate.verdict import EPS, QueryRecord, RunInputs, ScopeCheck, Verdict, judge_run
from pytest_ragmetrics.golden import DEFAULT_SOURCE, GoldenSet, Query, load_qrels
from pytest_ragmetrics.measures import MeasurementConfig
from pytest_ragmetrics.metrics import document_ranking
from pytest_ragmetrics.report.pooled import pooled_counts
from pytest_ragmetrics.unanswerable import FALSE_RETRIEVAL, false_retrieval, false_retrieval_rate
from pytest_ragmetrics.unjudged import measure_unjudged, top_grade

__all__ = ["RunData", "labels_of", "pooled_text_of", "load_run_data", "is_run_artifact", "run_data_from_artifact",
           "compare", "describe_measurement",
           "shared_only", "subset_of", "check_scorability", "check_recorded_metrics", "check_false_retrieval", "gated",
           "metric_names", "missing_from", "mismatch"]


@dataclass
class RunData:
    """Per-query metrics of one side, with what is known of each query."""

    source: str
    metrics: dict[str, dict[str, float]]
    rankings: dict[str, list[str]] = field(default_factory=dict)
    tags: dict[str, list[str]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    #: chunk- vs parent-level hit rates per query, when the run's results carried parent ids
    parent_levels: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    #: queries the side ran but could not score (no relevant document)
    unscorable: list[str] = field(default_factory=list)
    #: why an unscorable query was, when the run said (its relevant gold is not in the corpus)
    unscorable_why: dict[str, str] = field(default_factory=dict)
    #: per query, the digest of the text and judgments it was measured with, where recorded
    judgments: dict[str, str] = field(default_factory=dict)
    #: the run's label ages (``comparison.stale_labels`` of its artifact), when it set an age limit
    stale_labels: dict[str, Any] | None = None
    #: a pooled run's counts (:func:`~pytest_ragmetrics.report.pooled.pooled_counts`), None for a closed one
    pooled: dict[str, Any] | None = None
    #: per query of a pooled run, its artifact's ``unjudged`` entry (judged@k, docs, new, upper, inconclusive)
    unjudged: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: questions marked answerable: false, with their false retrieval (1: got a result counted as an answer)
    no_answer: dict[str, int] = field(default_factory=dict)
    #: per query, the score behind each ranked document, where recorded
    scores: dict[str, list[float | None]] = field(default_factory=dict)
    #: per query, the documents it returned outside its scope, and its filters and scope, where recorded
    leaks: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    scoped: dict[str, tuple[dict[str, Any] | None, dict[str, Any] | None]] = field(default_factory=dict)
    #: per query, where the question came from (``source``), where the artifact records it
    sources: dict[str, str] = field(default_factory=dict)

    def has_any(self) -> bool:
        """Whether this side holds a result for any query."""
        return bool(self.metrics or self.errors or self.unscorable or self.no_answer)

    def has(self, qid: str) -> bool:
        """Whether this side has any result for ``qid`` (scored, errored, unscorable or unanswerable)."""
        return qid in self.metrics or qid in self.errors or qid in self.unscorable or qid in self.no_answer

    @property
    def answer_threshold(self) -> float | None:
        """The rag_answer_threshold its unanswerable questions were scored with (``_meta.answer_threshold``)."""
        value = self.meta.get("answer_threshold") if isinstance(self.meta, Mapping) else None
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    def false_retrieval_rate(self) -> float | None:
        """The mean false retrieval of its unanswerable questions (None if it holds none)."""
        return false_retrieval_rate(float(v) for v in self.no_answer.values())


def stale_text(side: RunData) -> str:
    """A side's label ages in a few words, for the report's header."""
    ages = side.stale_labels
    if not ages:
        return "no age limit"
    return (f"{len(ages['stale'])} of {ages['checked']} records stale, {len(ages['undated'])} undated"
            + (f" ({', '.join(f'{k} {v}' for k, v in ages.get('limits', {}).items())})" if ages.get("limits") else ""))


def labels_of(side: RunData, thresholds: Thresholds) -> LabelAges | None:
    """A side's label ages as its run found them (its artifact's ``comparison.stale_labels``), failing
    the ``stale-labels`` gate when ``thresholds`` (those compare gates with) set ``fail_on_stale_labels``:
    a run that failed on stale labels must not pass once compared. None when the run set no age limit."""
    if not side.stale_labels:
        return None
    ages = LabelAges.from_dict(side.stale_labels)
    ages.fail = thresholds.fail_on_stale_labels
    return ages


def pooled_text_of(side: RunData) -> str:
    """A side's judgments in a few words, for the report's header: judged@k, inconclusive and unjudged counts."""
    counts = side.pooled
    if not counts:
        return "closed"
    k = side.meta.get("k", "k") if isinstance(side.meta, Mapping) else "k"
    judged = counts.get("judged")
    new = counts.get("unjudged_new")
    return (f"pooled, judged@{k} {'—' if judged is None else f'{judged:.4f}'}, "
            f"{len(counts['inconclusive'])} inconclusive"
            + (f" ({', '.join(counts['inconclusive'])})" if counts["inconclusive"] else "")
            + f", {counts['unjudged']} unjudged in the top {k} ({'? ' if new is None else f'{new} '}new)")


def metric_names(config: MeasurementConfig | None, side: RunData) -> list[str]:
    """The metrics to compare, in the order the run measured them."""
    if config is not None:
        return config.metric_names
    recorded = side.meta.get("measurement", {}).get("metrics") if isinstance(side.meta, dict) else None
    if recorded:
        return list(recorded)
    data = side.metrics
    names: dict[str, None] = {}
    for entry in data.values():
        for k in entry:
            if not k.startswith("_"):
                names.setdefault(k, None)
    return list(names)


def run_data_from_artifact(data: Mapping[str, Any], source: str) -> RunData:
    """One side from a run artifact checked by :func:`~pytest_ragmetrics.gate.artifact.check_artifact`:
    per query its metrics, or its error, or that it was unscorable, with its ranking, tags and
    judgments digest."""
    whole_run_only(data, source)
    side = RunData(source, {}, meta=data.get("_meta", {}))
    ages = data["comparison"].get("stale_labels")
    side.stale_labels = ages if isinstance(ages, dict) else None
    side.pooled = pooled_counts(data["comparison"], data["per_query"])
    for qid, entry in data["per_query"].items():
        if entry.get("status") == "scored":
            side.metrics[qid] = entry["metrics"]
            if isinstance(entry.get("parent_level"), dict):
                side.parent_levels[qid] = entry["parent_level"]
        elif entry.get("status") == "error":
            side.errors[qid] = entry.get("error") or "error"
        elif entry.get("status") == "unscorable":
            side.unscorable.append(qid)
            if isinstance(entry.get("error"), str):
                side.unscorable_why[qid] = entry["error"]
        elif entry.get("status") == "unanswerable":
            side.no_answer[qid] = int(entry["false_retrieval"])
        if isinstance(entry.get("scores"), list):
            side.scores[qid] = list(entry["scores"])
        side.rankings[qid] = list(entry.get("ranking") or [])
        side.tags[qid] = list(entry.get("tags") or [])
        if isinstance(entry.get("source"), str):
            side.sources[qid] = entry["source"]
        if side.pooled is not None and isinstance(entry.get("unjudged"), dict):
            side.unjudged[qid] = entry["unjudged"]
        if isinstance(entry.get("_judgments"), str):
            side.judgments[qid] = entry["_judgments"]
        if entry.get("leaks"):
            side.leaks[qid] = list(entry["leaks"])
        if entry.get("filters") or entry.get("scope"):
            side.scoped[qid] = (entry.get("filters"), entry.get("scope"))
    return side


def load_run_data(path: str | Path, qrels: str | Path | Mapping[str, Mapping[str, int]] | None = None,
                  config: MeasurementConfig | None = None) -> RunData:
    """Read an artifact, a baseline or (with qrels) a TREC run into :class:`RunData`.

    A TREC run is scored with ``config`` (default: :class:`MeasurementConfig` with ids
    as given, since run files are document-level); judged queries absent from the run
    are left out, so that :func:`compare` can name them as missing.
    """
    path = Path(path)
    name = str(path)
    if not path.is_file():
        raise InputError(name, None, "file not found")
    text = path.read_text(encoding="utf-8-sig", errors="replace")
    if text.lstrip().startswith("{"):
        read = parse_run_json(text, name)  # the format modules check what they own
        if not isinstance(read, Baseline):
            return run_data_from_artifact(read, name)
        baseline = read
        no_answer = {q: int(e[FALSE_RETRIEVAL]) for q, e in baseline.per_query.items() if FALSE_RETRIEVAL in e}
        return RunData(name, {q: baseline.metrics_of(q) for q in baseline.per_query if q not in no_answer},
                       meta=baseline.meta,
                       judgments={q: e["_judgments"] for q, e in baseline.per_query.items()
                                  if isinstance(e.get("_judgments"), str)}, no_answer=no_answer)
    if path.suffix.lower() in (".yaml", ".yml", ".jsonl") or text.lstrip().startswith(("- ", "-\n")):
        raise InputError(name, None, "looks like a golden set, not a run; compare takes run artifacts "
                                     "(--rag-report), baselines or TREC runs (pass a golden set with --golden)")
    if qrels is None:
        raise InputError(name, None, "a TREC run needs --qrels to be scored")
    from pytest_ragmetrics.trec import read_run

    run = read_run(path)
    judged = load_qrels(qrels) if isinstance(qrels, (str, Path)) else qrels
    config = config or MeasurementConfig(id_separator=None)
    result = evaluate(run, judged, config, missing="skip")
    return RunData(name, result.per_query,
                   {q: document_ranking(run.get(q, []), config.id_separator) for q in result.per_query},
                   meta={"measurement": result.config.to_dict()}, unscorable=list(result.unscorable))


def mismatch(a: RunData, b: RunData, golden: GoldenSet | None = None) -> list[str]:
    """What makes A and B incomparable, in words (empty: they were measured alike).

    The plugin's checks against its baseline: the measurement config and ``k``
    (:func:`~pytest_ragmetrics.gate.baseline.measurement_mismatch`; the metric lists may
    differ, since only shared metrics are compared), and per query the digest of the
    text and judgments each side was measured with, also against ``golden`` when given.
    Sides that record no per-query digests are compared by their golden-set hash.
    """
    problems = measurement_mismatch(a.meta, b.meta, ("A", "B"), ignore=("metrics",))
    if a.no_answer and b.no_answer and a.answer_threshold != b.answer_threshold:
        problems.append(f"rag_answer_threshold: A {a.answer_threshold}, B {b.answer_threshold} (a false retrieval of "
                        "a question marked answerable: false depends on it)")
    changed = [q for q, digest in a.judgments.items() if q in b.judgments and b.judgments[q] != digest]
    if changed:
        problems.append(f"judgments or text changed for {len(changed)} queries between A and B: "
                        f"{listed(changed)}")
    elif not (a.judgments and b.judgments):
        sha_a, sha_b = (_golden_hash(side.meta) for side in (a, b))
        if sha_a and sha_b and sha_a != sha_b:
            problems.append(f"golden set: A was measured on {sha_a[:12]}…, B on {sha_b[:12]}… (sha256), and "
                            "they record no per-query judgments to tell changed labels from added queries")
    if golden is not None:
        for label, side in (("A", a), ("B", b)):
            differ = [q.qid for q in golden
                      if q.qid in side.judgments and side.judgments[q.qid] != q.judgments_digest()]
            if differ:
                problems.append(f"judgments or text of {len(differ)} queries in {golden.source} differ from what "
                                f"{label} was measured with: {listed(differ)}")
    return problems


def _relevance_level(side: RunData) -> int | None:
    recorded = side.meta.get("measurement") if isinstance(side.meta, Mapping) else None
    level = recorded.get("relevance_level") if isinstance(recorded, Mapping) else None
    return level if isinstance(level, int) and not isinstance(level, bool) else None


def check_scorability(a: RunData, b: RunData, golden: GoldenSet | None = None) -> None:
    """Refuse a query one side scored and the other calls unscorable when nothing it was measured
    with changed: unscorable means no relevant judgment, which depends only on the judgments and the
    relevance level. Marking a regressed query of B unscorable would take it out of every mean and
    of the gate, so such a claim is an edit of the file, not a result. With ``golden`` each side's
    claim is checked against the golden set itself. Changes that do explain it (other judgments,
    another relevance level) are :func:`mismatch`'s to report."""
    if golden is not None:
        for label, side in (("A", a), ("B", b)):
            level = _relevance_level(side) or 1
            for qid in [*side.metrics, *side.unscorable]:
                if qid not in golden or side.judgments.get(qid) not in (None, golden[qid].judgments_digest()):
                    continue  # judged on other labels: mismatch() says so
                if qid in side.unscorable_why:
                    continue  # the run found its relevant gold missing from the corpus: it says so itself
                claimed = qid in side.unscorable
                if claimed != (golden[qid].n_relevant(level) == 0):
                    said, truth = (("unscorable", f"judges {golden[qid].relevant(level)[0]!r} relevant")
                                   if claimed else ("scored", "judges no document relevant"))
                    raise InputError(side.source, f"per_query.{qid}",
                                     f"{label} says {said}, but {golden.source} {truth} at relevance level "
                                     f"{level}: {label} was edited")
    levels = (_relevance_level(a), _relevance_level(b))
    if levels[0] is not None and levels[1] is not None and levels[0] != levels[1]:
        return
    for (label, side), (other_label, other) in ((("B", b), ("A", a)), (("A", a), ("B", b))):
        for qid in side.unscorable:
            if qid not in other.metrics or qid in side.unscorable_why:  # a reason recorded: gold not in the corpus
                continue
            mine, theirs = side.judgments.get(qid), other.judgments.get(qid)
            if mine and theirs:
                if mine != theirs:
                    continue  # changed judgments: mismatch() says so
                why = "under the same judgments"
            else:
                hashes = (_golden_hash(a.meta), _golden_hash(b.meta))
                if hashes[0] and hashes[1] and hashes[0] != hashes[1]:
                    continue  # another golden set: mismatch() says so
                why = ("with no judgments digest (_judgments) on "
                       f"{label if not mine else other_label} to show its judgments changed")
            raise InputError(side.source, f"per_query.{qid}",
                             f"unscorable in {label} but scored in {other_label} {why}: {label} was edited")


def check_recorded_metrics(a: RunData, b: RunData, golden: GoldenSet) -> None:
    """Refuse a query whose recorded metric is not what its recorded ranking scores against
    ``golden``, with the side's own measurement config (to 1e-9): a regressed query's metrics
    set to 1.0, its ranking left as it was, is an edit of the file, not a result. Queries
    judged on other labels than ``golden``'s are :func:`mismatch`'s to report; a side that
    records no ranking (a baseline) cannot be checked this way."""
    from pytest_ragmetrics.evaluation import score_query

    for label, side in (("A", a), ("B", b)):
        recorded = side.meta.get("measurement") if isinstance(side.meta, Mapping) else None
        if not isinstance(recorded, Mapping):
            continue
        config = MeasurementConfig.from_dict(recorded)  # type: ignore[arg-type]
        for qid, values in side.metrics.items():
            if qid not in golden or qid not in side.rankings:
                continue
            query = golden[qid]
            if side.judgments.get(qid) not in (None, query.judgments_digest()):
                continue
            _, scored = score_query(side.rankings[qid], query.judgments, config)
            for metric, value in values.items():
                if metric.startswith("_") or scored is None or metric not in scored:
                    continue
                if abs(float(value) - scored[metric]) > 1e-9:
                    raise InputError(side.source, f"per_query.{qid}",
                                     f"{label} records {metric} = {value!r}, but the ranking it recorded scores "
                                     f"{scored[metric]!r} against {golden.source}: {label} was edited")


def check_false_retrieval(a: RunData, b: RunData, golden: GoldenSet) -> None:
    """Refuse a side whose unanswerable questions do not say what ``golden`` and their own
    recorded results say: ``false_retrieval`` recomputed from the recorded scores under the
    rag_answer_threshold the side records (``_meta.answer_threshold``), and ``answerable: false``
    where ``golden`` marks it. A question that newly got an answer, set back to 0, or a
    regressed question turned unanswerable to leave the means, is an edit of the file, not a
    result. Queries judged on other labels are :func:`mismatch`'s to report; a side that records
    no ranking (a baseline) cannot be recomputed."""
    for label, side in (("A", a), ("B", b)):
        threshold = side.answer_threshold
        for qid in [*side.metrics, *side.unscorable, *side.no_answer]:
            if qid not in golden or side.judgments.get(qid) not in (None, golden[qid].judgments_digest()):
                continue
            claimed = qid in side.no_answer
            if claimed == golden[qid].answerable:
                said, truth = ("unanswerable", "does not mark it answerable: false") if claimed \
                    else ("scored", "marks it answerable: false")
                raise InputError(side.source, f"per_query.{qid}", f"{label} says {said}, but {golden.source} "
                                                                  f"{truth}: {label} was edited")
            if not claimed or qid not in side.rankings:
                continue
            ranking = side.rankings[qid]
            found = false_retrieval(side.scores.get(qid) or [None] * len(ranking), threshold)
            if found != side.no_answer[qid]:
                raise InputError(side.source, f"per_query.{qid}",
                                 f"{label} records false_retrieval = {side.no_answer[qid]}, but the "
                                 f"{len(ranking)} results it recorded give {found} under rag_answer_threshold "
                                 f"{threshold} (_meta.answer_threshold): {label} was edited")


def _golden_hash(meta: Mapping[str, Any]) -> str | None:
    golden = meta.get("golden") if isinstance(meta, Mapping) else None
    sha = golden.get("sha256") if isinstance(golden, Mapping) else None
    return sha if isinstance(sha, str) else None


def missing_from(a: RunData, b: RunData) -> list[str]:
    """Queries A scored (or judged by false retrieval) that B has no result for at all: regressions, not silence."""
    return [qid for qid in [*a.metrics, *a.no_answer] if not b.has(qid)]


def subset_of(side: RunData) -> str | None:
    """The subset a side's run judged (``_meta.subset``: ``full``, ``smoke``, a sample rule), if recorded."""
    value = side.meta.get("subset") if isinstance(side.meta, Mapping) else None
    return value if isinstance(value, str) else None


def shared_only(a: RunData, b: RunData) -> tuple[RunData, RunData, list[str], list[str]]:
    """A and B cut to the queries both hold a result for, and the queries left out of each
    (A's, B's): a full run compared with a smoke run, on the smoke run's queries."""
    only_a = [q for q in dict.fromkeys([*a.metrics, *a.errors, *a.unscorable, *a.no_answer]) if not b.has(q)]
    only_b = [q for q in dict.fromkeys([*b.metrics, *b.errors, *b.unscorable, *b.no_answer]) if not a.has(q)]
    return _without(a, set(only_a)), _without(b, set(only_b)), only_a, only_b


def _without(side: RunData, qids: set[str]) -> RunData:
    def keep(d: dict[str, Any]) -> dict[str, Any]:
        return {q: v for q, v in d.items() if q not in qids}

    return RunData(side.source, keep(side.metrics), keep(side.rankings), keep(side.tags), keep(side.errors),
                   side.meta, keep(side.parent_levels), [q for q in side.unscorable if q not in qids],
                   keep(side.unscorable_why), keep(side.judgments), stale_labels=side.stale_labels,
                   pooled=side.pooled, unjudged=keep(side.unjudged), no_answer=keep(side.no_answer),
                   scores=keep(side.scores), sources=keep(side.sources), leaks=keep(side.leaks),
                   scoped=keep(side.scoped))


def describe_measurement(side: RunData) -> str:
    """A side's measurement rules (relevance level, gain, id rule) as a header line."""
    recorded = side.meta.get("measurement") if isinstance(side.meta, Mapping) else None
    if not isinstance(recorded, Mapping):
        return "measurement config not recorded"
    level = recorded.get("relevance_level", "not recorded")
    gain = recorded.get("gain", "not recorded")
    ids = id_rule(recorded["id_separator"]) if "id_separator" in recorded else "ids: rule not recorded"
    return f"relevance level {level}, {gain} gain; {ids}"


def gated(metric: str, thresholds: Thresholds) -> bool:
    """Whether ``thresholds`` gate ``metric`` (an allowed drop, a floor or a per-query tolerance)."""
    return metric in thresholds.tolerance or metric in thresholds.minimum or metric in thresholds.query_tolerance


def _only(bound: dict[str, float] | None, metrics: Sequence[str]) -> dict[str, float] | None:
    return None if bound is None else {m: v for m, v in bound.items() if m in metrics}


def _as_b_found(record: QueryRecord, b: RunData, a: RunData, golden: GoldenSet | None = None, grade: int = 1,
                metrics: Sequence[str] = ()) -> None:
    """A pooled B's judged@k and unjudged documents on its record; a query B's run found inconclusive
    stays inconclusive (its new unjudged documents decide it) rather than reading as regressed against A.

    With the ``golden`` set B was judged on, B's ranking and A's are re-scored with B's unjudged
    documents judged at ``grade`` (new: not in A's ranking), as the plugin re-scores its run and its
    baseline's top k: the bounds then decide each query and each mean against A, as the plugin's
    decide them against its baseline, where B's own verdict was reached against another reference."""
    entry = b.unjudged.get(record.qid)
    if entry is None:
        return
    recorded = b.meta.get("measurement") if isinstance(b.meta, Mapping) else None
    query = golden[record.qid] if golden is not None and record.qid in golden else None
    if query is not None and isinstance(recorded, Mapping) and record.metrics is not None \
            and b.judgments.get(record.qid) in (None, query.judgments_digest()):
        leaked = {str(leak.get("doc")): 0 for leak in b.leaks.get(record.qid, []) if isinstance(leak, Mapping)}
        compared = record.qid in a.metrics
        found = measure_unjudged(record.ranking, {**leaked, **query.judgments}, record.metrics,
                                 MeasurementConfig.from_dict(recorded), grade,  # type: ignore[arg-type]
                                 a.rankings.get(record.qid) if compared else None)
        record.judged, record.unjudged = found.judged, found.docs
        record.upper, record.upper_new = _only(found.upper, metrics), _only(found.upper_new, metrics)
        record.baseline_upper_new = _only(found.baseline_upper_new, metrics)
        record.baseline_upper = _only(found.baseline_upper, metrics)
        record.unjudged_new = found.new if compared else None
        return
    k = b.meta.get("k") if isinstance(b.meta, Mapping) else None
    judged = entry.get(f"judged@{k}")
    record.judged = float(judged) if isinstance(judged, (int, float)) else None
    record.unjudged = [d for d in entry.get("docs") or [] if isinstance(d, str)]
    new = entry.get("new")
    record.unjudged_new = [d for d in new if isinstance(d, str)] if isinstance(new, list) else None
    if entry.get("inconclusive") is True and b.pooled is not None and record.qid in b.pooled["inconclusive"]:
        # B's run re-scored both sides with those documents relevant and found no drop beyond tolerance:
        # its bound is A's numbers, so the verdict asks for the documents instead of calling it regressed
        record.upper_new = dict(a.metrics.get(record.qid) or {})


def compare(a: RunData, b: RunData, thresholds: Thresholds, metrics: Sequence[str],
            golden: GoldenSet | None = None,
            relevance_level: int = 1,
            lacking: Sequence[str] = (),
            labels: LabelAges | None = None,
            golden_of_b: str | None = None) -> tuple[Verdict, dict[str, tuple[int, int, int]]]:
    """Verdict of B against A, and per metric the (wins, ties, losses) of B.

    A query A scored and B has no result for counts as errored in B (every metric 0),
    so it is listed among the regressions; ``golden`` supplies question texts and gold
    documents, ``relevance_level`` which gold documents the report lists. ``lacking``
    are metrics A measured and B did not: each one ``thresholds`` gate fails its gate,
    as the plugin fails a gated metric its baseline lacks (a gate that checks nothing
    must not pass).

    Questions marked answerable: false are judged by false retrieval, as the plugin judges
    them: one that gets an answer in B it did not get in A (0 -> 1) regressed, and
    ``false_retrieval_rate`` is gated by the thresholds' ``false_retrieval_rate_*`` keys.

    ``labels`` are B's label ages (:func:`labels_of`): under ``fail_on_stale_labels`` they fail the
    ``stale-labels`` gate as they failed B's own run. ``golden_of_b``: the golden set B was judged with,
    named in the command that writes a pooled B's unjudged documents out.
    """
    missing = missing_from(a, b)
    qids = list(dict.fromkeys([*a.metrics, *a.no_answer, *b.metrics, *b.errors, *b.unscorable, *b.no_answer]))
    queries = []
    for qid in qids:
        if golden is not None and qid in golden:
            queries.append(golden[qid])
        else:
            filters, scope = b.scoped.get(qid, (None, None))
            queries.append(Query(qid, "", {}, tuple(b.tags.get(qid) or a.tags.get(qid) or ()),
                                 answerable=qid not in a.no_answer and qid not in b.no_answer,
                                 source=b.sources.get(qid) or a.sources.get(qid) or DEFAULT_SOURCE,
                                 filters=filters, scope=scope))
    run_golden = GoldenSet(golden_of_b or "", tuple(queries), judgments="pooled" if b.pooled is not None else "closed")
    grade = top_grade(golden, relevance_level) if golden is not None and b.pooled is not None else relevance_level
    records = {}
    for qid in qids:
        if qid in b.errors:
            records[qid] = QueryRecord(qid, "error", error=b.errors[qid])
        elif qid in missing:
            records[qid] = QueryRecord(qid, "error", error=f"missing from B: {b.source} has no result for this query")
        elif qid in b.unscorable:
            records[qid] = QueryRecord(qid, "unscorable", error=b.unscorable_why.get(qid))
        elif qid in b.no_answer:
            ranking = b.rankings.get(qid, [])
            records[qid] = QueryRecord(qid, "unanswerable", None, ranking, [], len(ranking),
                                       scores=b.scores.get(qid, []), false_retrieval=b.no_answer[qid])
        elif qid in b.metrics:
            m = {k: v for k, v in b.metrics[qid].items() if k in metrics}
            records[qid] = QueryRecord(qid, "scored", m, b.rankings.get(qid, []), [], len(b.rankings.get(qid, [])),
                                       parent_level=b.parent_levels.get(qid), scores=b.scores.get(qid, []))
            _as_b_found(records[qid], b, a, golden, grade, metrics)
    for qid, leaked in b.leaks.items():  # B's documents outside their scope fail the comparison as they failed B
        if qid in records:
            records[qid].leaks = list(leaked)
    base_q: dict[str, dict[str, Any]] = {q: {k: v for k, v in m.items() if k in metrics} for q, m in a.metrics.items()}
    base_q.update({q: {FALSE_RETRIEVAL: float(v)} for q, v in a.no_answer.items()})
    baseline = Baseline(a.meta, {}, base_q, a.source)
    measured_by_b = ", ".join(metric_names(None, b)) or "no metric"
    verdict = judge_run(RunInputs(
        records=records, golden=run_golden, full_golden=run_golden, baseline=baseline, baseline_path=a.source,
        thresholds=thresholds, metrics=tuple(metrics), relevance_level=relevance_level, reference="A",
        labels=labels, artifact_path=b.source if b.pooled is not None else None,
        answer_threshold=b.answer_threshold, lacking={m: f"B ({b.source}) holds no {m} (it measured {measured_by_b})"
                                                      for m in lacking},
        scope=ScopeCheck.recorded(b.meta, bool(b.scoped)), skipped={}, ratchet=None))
    # a query A scored that B could not (its gold left B's corpus) is named, with why, by the baseline gate
    verdict.unscorable = [q for q in verdict.unscorable if not (b.unscorable_why.get(q) and q in a.metrics)]
    tally: dict[str, tuple[int, int, int]] = {}
    for metric in metrics:
        wins = ties = losses = 0
        for qid in a.metrics:
            if qid in b.unscorable:
                continue
            before = a.metrics[qid].get(metric)
            after = b.metrics[qid].get(metric) if qid in b.metrics else 0.0  # errored or missing: 0
            if before is None or after is None:
                continue
            if after > before + EPS:
                wins += 1
            elif after < before - EPS:
                losses += 1
            else:
                ties += 1
        tally[metric] = (wins, ties, losses)
    return verdict, tally
