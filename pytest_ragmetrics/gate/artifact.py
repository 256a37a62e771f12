"""The run artifact (``--rag-report``): its format, its writer, and the one check every reader uses.

The plugin builds the artifact here (:func:`build_artifact`, sealed by :func:`seal_artifact`;
``_plugin/outputs.py`` only writes the file); ``ragmetrics compare``,
``history``, ``export`` and ``pool`` read it back, and a verdict drawn from a file
is only as good as the file. So a file that parses but breaks the schema is refused
here, naming the file, the record (qid) and the field, before any reader trusts it:

- top level: ``_meta`` (object), ``per_query`` (object), ``comparison`` (object),
  optional ``aggregate`` (object) and ``n`` (integer); other keys only with a ``_``;
- ``_meta.k``, when present: a positive integer; ``_meta.golden``, when present: an object
  with optional ``source`` (str), ``sha256`` (str) and ``n_queries`` (integer >= 0);
- ``_meta.format``: :data:`ARTIFACT_FORMAT` (artifacts written before it existed have
  none and are read by the same rules); ``_meta.measurement.metrics``: the measured
  metrics; ``_meta.thresholds``, when present: ``{"source": str, "values": {...}}``
  with values a thresholds file may hold; ``_meta.created``, when present: an ISO-8601
  time as the plugin writes it (``2026-12-01T02:37:05+00:00``); ``_meta.baseline``,
  when present: null or ``{"sha256": str|null, "content": str|null (optional),
  "created": str|null, "updated": bool}`` (``ragmetrics history`` reads it to find baseline
  refreshes); ``_meta.attempt``, when present: which attempt of the run wrote it (a whole number
  >= 1); in an artifact ``ragmetrics merge`` wrote, ``_meta.shards`` (each shard merged: ``index``,
  ``count``, ``attempt`` or null, ``file``) and ``_meta.retried`` (the index of each shard whose attempt
  is above 1), both or neither; other ``_meta`` keys are free;
- ``per_query.<qid>``: ``status`` one of ``scored``, ``unscorable``, ``error``; a scored
  query's ``metrics`` hold every measured metric, each a finite number in [0, 1]
  (not a bool), and no other key (``Recall@10`` is not ``recall@10``); optional
  ``ranking`` (a list of distinct strings: the plugin drops repeats) and ``tags``
  (a list of strings), ``source`` (where the question came from: ``log``, ``curated``, ``harvested`` or
  ``variant``; written when it is not ``curated``, so absent reads as ``curated``, as in artifacts
  written before it), ``error`` (string or null),
  ``n_docs`` (integer), ``baseline`` (metric values), ``parent_level``, ``_judgments`` (a string),
  ``_top`` (the top-k document ranking, as the baseline records it: distinct non-empty strings,
  no more than ``_meta.k``; artifacts written before it have none), and for a pooled golden set ``unjudged`` (an object:
  ``judged@k``, ``docs`` and ``new`` unjudged documents, ``unjudged_new@k``, ``upper``, ``inconclusive``),
  ``scores`` (the score behind each ranked document); a question marked answerable: false has
  ``answerable: false``, status ``unanswerable`` (or ``error``) and ``false_retrieval`` 0 or 1, and
  stays out of ``aggregate`` and ``n``; a record with ``filters`` or a ``scope`` has them (objects), and
  a query that returned documents outside its scope has ``leaks`` (a list of ``{rank, id, doc,
  metadata}``);
- ``aggregate``: exactly the measured metrics, each the mean the gate computes
  (errored queries count 0, unscorable ones are left out) to 1e-9, so hand edits show;
- ``comparison.regressed``: a list of objects with a ``qid``;
  ``comparison.retriever_changes``: a list of strings; ``comparison.passed``: a bool;
  ``comparison.leaks``, when present: a list of ``{qid, question, scope, filters, docs}``, and a run
  with a leak (there or in ``per_query``) never has ``passed: true``;
  ``comparison.skipped``, when present: query id -> the reason it was skipped (not judged);
  ``comparison.stale_labels``, when present (thresholds set a label age limit): ``checked`` (integer
  >= 0) and ``stale``/``undated`` (lists of ``{qid, oldest, age_days, limit_days, limit_key}``), no
  more stale and undated records than checked (artifacts written before labels aged have none);
- ``shard``, only in the artifact of a ``--rag-shard I/N`` run: ``index`` and ``count`` (1 <= index <=
  count), ``of`` (queries of the whole set), ``queries`` (the ids this shard was dealt), ``baseline``
  (its path), ``gold`` (the gold check) and ``records`` (query id -> its full record, for the queries
  of ``per_query`` and no others), which ``ragmetrics merge`` judges (:mod:`pytest_ragmetrics.gate.shard`);
- ``_meta.seal``, written by the plugin: digests of the file's sections (:func:`seal_artifact`).
  A file whose content no longer matches it was edited after its run, and is refused with the
  sections that changed; a file with a ``_meta.format`` and no seal had it removed, and is refused
  too; a file with neither (an older version's) is read as it is.

Versions: a run writes its artifact once and never rewrites it, so an older artifact (no
``_meta.format``) is read by the rules above as it is, and the next run's artifact is written in
the current format; a newer ``_meta.format`` is refused (upgrade pytest-ragmetrics to read it).
The full field reference for users is docs/run-artifact.md.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from pathlib import Path
from typing import Any, Mapping, Sequence

from pytest_ragmetrics.errors import InputError, MeasureError, RagMetricsError, ThresholdsError, brief_repr, listed
from pytest_ragmetrics.files import canonical_digest, loads_json, read_text
from pytest_ragmetrics.gate.baseline import Baseline, check_mean, check_metric_value, load_baseline
from pytest_ragmetrics.gate.thresholds import thresholds_from_mapping
from pytest_ragmetrics.gate.verdict import QueryRecord, Verdict
from pytest_ragmetrics.golden import DEFAULT_SOURCE, SOURCES, GoldenSet
from pytest_ragmetrics.measures import MeasurementConfig

__all__ = ["ARTIFACT_FORMAT", "STATUSES", "ArtifactError", "build_artifact", "is_run_artifact", "load_artifact",
           "parse_artifact", "parse_run_json", "check_artifact", "seal_artifact", "whole_run_only"]

#: The version of the schema above, written as ``_meta.format``.
ARTIFACT_FORMAT = 1

STATUSES = ("scored", "unscorable", "error", "unanswerable")

_ENTRY_KEYS = {"status", "metrics", "ranking", "tags", "error", "n_docs", "baseline", "parent_level", "unjudged",
               "scores", "false_retrieval", "answerable", "source", "filters", "scope", "leaks"}
_TOP_KEYS = {"_meta", "per_query", "comparison", "aggregate", "n", "shard"}


class ArtifactError(InputError):
    """A run artifact that is not valid JSON or breaks the schema; the message names file, record and field."""

    def __init__(self, path: str | None, where: str | None, reason: str) -> None:
        self.path, self.where, self.reason = path, where, reason
        head = ": ".join(part for part in (path, where) if part)
        RagMetricsError.__init__(self, f"{head} {reason}" if where else f"{head}: {reason}" if head else reason)


def _value_error(message: str) -> ArtifactError:
    """:func:`check_metric_value`'s message (it names file and key) as an :class:`ArtifactError`."""
    return ArtifactError(None, None, message)


def is_run_artifact(data: Any) -> bool:
    """Whether parsed JSON claims to be a run artifact: a baseline has no ``comparison``."""
    return isinstance(data, dict) and "comparison" in data and isinstance(data.get("per_query"), dict)


def load_artifact(path: str | Path) -> dict[str, Any]:
    """Read and check a run artifact; any problem is an :class:`ArtifactError` (or an
    :class:`~pytest_ragmetrics.errors.InputError` for a file that cannot be read)."""
    path = Path(path)
    return parse_artifact(read_text(path), str(path))


def parse_artifact(text: str, name: str) -> dict[str, Any]:
    """:func:`load_artifact` on a file's text, already read (``name`` is its path)."""
    try:
        data = loads_json(text)
    except json.JSONDecodeError as exc:
        raise ArtifactError(f"{name}, line {exc.lineno}", None, f"not valid JSON ({exc.msg})") from None
    except (ValueError, RecursionError) as exc:  # a number too long, nesting too deep
        raise ArtifactError(name, None, f"not valid JSON ({brief_repr(str(exc))})") from None
    check_artifact(data, name)
    return data


def parse_run_json(text: str, name: str) -> dict[str, Any] | Baseline:
    """A JSON file that a reader takes as a run: a run artifact, checked here, or a baseline, read by
    :func:`pytest_ragmetrics.gate.baseline.load_baseline` (``name`` is its path; an
    :class:`~pytest_ragmetrics.errors.InputError` for JSON that does not parse)."""
    try:
        data = loads_json(text)
    except json.JSONDecodeError as exc:
        raise InputError(name, f"line {exc.lineno}", f"not valid JSON ({exc.msg})") from None
    except (ValueError, RecursionError) as exc:
        raise InputError(name, None, f"not valid JSON ({exc})") from None
    if is_run_artifact(data):
        check_artifact(data, name)
        return data
    return load_baseline(name)


def whole_run_only(data: Mapping[str, Any], name: str) -> None:
    """Refuse a shard's artifact where a whole run is read (``compare``, ``history``): its means
    and its gates cover only the queries that shard was dealt."""
    shard = data.get("shard")
    if isinstance(shard, dict):
        raise ArtifactError(name, None, f"is shard {shard.get('index')}/{shard.get('count')} of a sharded run, "
                                   "holding only that shard's queries; merge the shards first: "
                                   "`ragmetrics merge SHARD.json... --out run.json`")


def _fail(name: str, where: str, problem: str) -> ArtifactError:
    return ArtifactError(name, where or None, problem)


def check_artifact(data: Any, name: str) -> None:
    """Refuse ``data`` unless it is a run artifact of the documented schema (see the module)."""
    hint = "; `pytest --rag-eval --rag-report=PATH` writes run artifacts"
    if not isinstance(data, dict):
        raise _fail(name, "", f"not a run artifact: the file holds a JSON {type(data).__name__}, not an object{hint}")
    if not is_run_artifact(data):
        if {"_meta", "aggregate", "per_query"} <= set(data) and "comparison" not in data:
            raise _fail(name, "", f"not a run artifact: it is a baseline (no comparison){hint}")
        missing = [k for k in ("_meta", "per_query", "comparison") if k not in data]
        what = f"missing {', '.join(repr(k) for k in missing)}" if missing else "'per_query' is not an object"
        raise _fail(name, "", f"not a run artifact: {what}{hint}")
    unknown = sorted(k for k in data if k not in _TOP_KEYS and not str(k).startswith("_"))
    if unknown:
        raise _fail(name, "", f"not a run artifact: unknown key {brief_repr(unknown[0])} at the top level "
                              f"(expected {', '.join(sorted(_TOP_KEYS))})")
    meta = data.get("_meta")
    if not isinstance(meta, dict):
        raise _fail(name, "_meta", "is missing: a run artifact records what it measured"
                    if meta is None else "is not an object")
    fmt = meta.get("format")
    if "format" in meta and (isinstance(fmt, bool) or not isinstance(fmt, int) or fmt < 1):
        raise _fail(name, "_meta.format", f"is {brief_repr(fmt)}; expected a positive integer")
    if isinstance(fmt, int) and fmt > ARTIFACT_FORMAT:
        raise _fail(name, "_meta.format", f"is {fmt}: written by a newer pytest-ragmetrics (this one reads "
                                          f"format {ARTIFACT_FORMAT} and older); upgrade to read it")
    metrics, config = _measured(meta, name)
    _check_k_and_golden(meta, name)
    _check_thresholds(meta, config, name)
    _check_created(meta, name)
    _check_baseline_entry(meta, name)
    _check_attempts(meta, name)
    if not isinstance(data["comparison"], dict):
        raise _fail(name, "comparison", "is not an object")
    _check_comparison(data["comparison"], name)
    counted: list[dict[str, float]] = []
    k = meta.get("k")  # checked above: a positive integer, or absent
    for qid, entry in data["per_query"].items():
        row = _check_entry(qid, entry, metrics, name, k if isinstance(k, int) else None)
        if row is not None:
            counted.append(row)
    leaked = [qid for qid, entry in data["per_query"].items() if entry.get("leaks")]
    if (leaked or data["comparison"].get("leaks")) and data["comparison"].get("passed") is True:
        raise _fail(name, "comparison.passed", f"is true, but {listed(leaked) or 'comparison.leaks'} returned "
                                               "documents outside their scope, and a leak always fails: the file "
                                               "was edited by hand")
    if "n" in data and (isinstance(data["n"], bool) or data["n"] != len(counted)):
        raise _fail(name, "n", f"is {brief_repr(data['n'])}, but per_query holds {len(counted)} scored or "
                               "errored queries: the file was edited by hand or is incomplete")
    if "aggregate" in data:
        _check_aggregate(data["aggregate"], metrics, counted, name)
    if "shard" in data:
        from pytest_ragmetrics.gate.shard import check_shard_section

        check_shard_section(data["shard"], data["per_query"], name)
    if "format" in meta and "seal" not in meta:  # this version seals what it writes: a missing seal was removed
        raise _fail(name, "_meta.seal", "is missing: the plugin seals every artifact it writes (since _meta.format "
                                        "1), so it was removed by hand; restore the artifact the run wrote")
    if "seal" in meta:  # last: the checks above name a broken field better than a seal can
        recorded = meta["seal"] if isinstance(meta["seal"], dict) else {}
        now = _seal(data)
        changed = [section for section in sorted(set(now) | set(recorded)) if recorded.get(section) != now.get(section)]
        if changed:
            raise _fail(name, "_meta.seal", f"does not match the file: {', '.join(changed)} changed after the run "
                                            "wrote it; restore the artifact the run wrote, or run again")


def _seal(data: Mapping[str, Any]) -> dict[str, str]:
    """Digests of an artifact's sections, its seal left out. ``created`` has a digest of its own
    (history orders runs by it), so two runs of one state differ in that line alone."""
    meta = {k: v for k, v in data["_meta"].items() if k not in ("seal", "created")}
    return {"_meta": canonical_digest(meta)[:16], "created": canonical_digest(data["_meta"].get("created"))[:16],
            **{key: canonical_digest(data[key])[:16] for key in ("per_query", "aggregate", "comparison", "n", "shard")
               if key in data}}


def seal_artifact(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with ``_meta.seal`` set to the digests of its sections (the plugin seals what it writes),
    so ``compare``, ``history`` and ``export`` can tell a run's file from one edited after it."""
    data["_meta"]["seal"] = _seal(data)
    return data


def build_artifact(meta: Mapping[str, Any], verdict: Verdict, golden: GoldenSet, records: Mapping[str, QueryRecord],
                   metrics: Sequence[str], k: int, subset: str, baseline: Baseline | None,
                   baseline_id: Mapping[str, str], baseline_file: Mapping[str, Any] | None,
                   baseline_retriever: Any, retriever_changes: Sequence[str],
                   judgments_from: Any) -> dict[str, Any]:
    """The run artifact of the schema above, from a run's plain data (unsealed: :func:`seal_artifact`
    seals what is written).

    ``meta`` is the run's fingerprint (what was measured, on what, by whom, when); ``golden`` the
    queries meant to run, each with its ``records`` entry when it ran; ``baseline`` the one compared
    with (None: none, or a refresh), ``baseline_id`` a renamed query's old id in it; ``baseline_file``
    which baseline file was judged against or written (``_meta.baseline``); ``retriever_changes`` how
    the retriever differs from the baseline's, in words, kept where reviewers read.
    """
    pooled = golden.judgments == "pooled"
    inconclusive = {r.qid for r in verdict.inconclusive}
    per_query: dict[str, dict[str, Any]] = {}
    for q in golden:
        r = records.get(q.qid)
        if r is None:
            continue
        entry: dict[str, Any] = {"status": r.status, "metrics": r.metrics, "ranking": r.ranking,
                                 "tags": list(q.tags), "error": r.error, "n_docs": r.n_docs,
                                 "_judgments": q.judgments_digest()}  # lets `ragmetrics compare` spot changed labels
        if r.parent_level is not None:
            entry["parent_level"] = r.parent_level
        if q.source != DEFAULT_SOURCE:  # absent means curated, as in the golden set (and older artifacts)
            entry["source"] = q.source
        entry["_top"] = list(r.ranking)  # the top k, as the baseline records it
        if pooled and r.judged is not None:
            entry["unjudged"] = {f"judged@{k}": r.judged, "docs": list(r.unjudged),
                                 "new": None if r.unjudged_new is None else list(r.unjudged_new),
                                 f"unjudged_new@{k}": None if r.unjudged_new is None else len(r.unjudged_new),
                                 "upper": r.upper, "inconclusive": r.qid in inconclusive}
        if r.scores:
            entry["scores"] = r.scores
        if q.filters:
            entry["filters"] = dict(q.filters)
        if q.scope:
            entry["scope"] = dict(q.scope)
        if r.leaks:
            entry["leaks"] = list(r.leaks)
        if not q.answerable:
            entry["answerable"] = False
            if r.status == "unanswerable":
                entry["false_retrieval"] = r.false_retrieval
        old = baseline_id.get(q.qid, q.qid)  # a renamed query's baseline is its old entry
        if baseline is not None and old in baseline.per_query:
            # the metrics this run measured (a baseline compared despite other metrics holds others)
            entry["baseline"] = {m: v for m, v in baseline.metrics_of(old).items()
                                 if m in metrics or m == "false_retrieval"}
        per_query[q.qid] = entry
    data = dict(meta)
    data["format"] = ARTIFACT_FORMAT
    data["subset"] = subset
    data["baseline"] = None if baseline_file is None else dict(baseline_file)
    data["baseline_retriever"] = baseline_retriever
    data["judgments"] = {"mode": golden.judgments, "from": judgments_from}
    comparison = verdict.to_dict()
    # the usual cause of a red run the morning after: kept where reviewers read, not only in the log
    comparison["retriever_changes"] = list(retriever_changes)
    return {
        "_meta": data,
        "aggregate": {row.metric: row.now for row in verdict.aggregate},
        "n": verdict.n,
        "per_query": per_query,
        "comparison": comparison,
    }


def _measured(meta: Mapping[str, Any], name: str) -> tuple[list[str], MeasurementConfig]:
    measurement = meta.get("measurement")
    listed_metrics = measurement.get("metrics") if isinstance(measurement, dict) else None
    if not isinstance(listed_metrics, list) or not listed_metrics \
            or not all(isinstance(m, str) and m for m in listed_metrics):
        raise _fail(name, "_meta.measurement.metrics", f"is {brief_repr(listed_metrics)}; expected the list of "
                                                       "metrics the run measured, so its numbers can be checked")
    if len(set(listed_metrics)) != len(listed_metrics):
        raise _fail(name, "_meta.measurement.metrics", f"names a metric twice: {brief_repr(listed_metrics)}")
    try:
        config = MeasurementConfig.from_dict(measurement)  # type: ignore[arg-type]
    except (MeasureError, TypeError, ValueError) as exc:
        raise _fail(name, "_meta.measurement", f"is not a measurement config: {exc}") from None
    return list(listed_metrics), config


def _check_k_and_golden(meta: Mapping[str, Any], name: str) -> None:
    """``_meta.k`` and ``_meta.golden``: a null ``k`` skipped the comparison of results asked per
    query, and a ``golden`` that is not an object broke the HTML report with a traceback."""
    if "k" in meta:
        k = meta["k"]
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise _fail(name, "_meta.k", f"is {brief_repr(k)}; expected a positive integer (results asked per query)")
    if "golden" not in meta:
        return
    golden = meta["golden"]
    if not isinstance(golden, dict):
        raise _fail(name, "_meta.golden", f"is {brief_repr(golden)}; expected an object with source, sha256 "
                                          "and n_queries")
    for key in ("source", "sha256"):
        if key in golden and not isinstance(golden[key], str):
            raise _fail(name, f"_meta.golden.{key}", f"is {brief_repr(golden[key])}; expected a string")
    n = golden.get("n_queries")
    if "n_queries" in golden and (isinstance(n, bool) or not isinstance(n, int) or n < 0):
        raise _fail(name, "_meta.golden.n_queries", f"is {brief_repr(n)}; expected a non-negative integer")


def _check_thresholds(meta: Mapping[str, Any], config: MeasurementConfig, name: str) -> None:
    if "thresholds" not in meta:
        return
    recorded = meta["thresholds"]
    if not isinstance(recorded, dict) or not isinstance(recorded.get("source"), str) \
            or not isinstance(recorded.get("values"), dict):
        raise _fail(name, "_meta.thresholds", f"is {brief_repr(recorded)}; expected {{\"source\": str, "
                                              "\"values\": {...}}, the thresholds the run was gated with")
    try:
        thresholds_from_mapping(recorded["values"], config, f"{name}: _meta.thresholds.values")
    except ThresholdsError as exc:
        raise _value_error(str(exc)) from None


#: ``_meta.created`` as the plugin writes it: ``2026-12-01T02:37:05+00:00`` (fractions
#: of a second, ``Z`` or no zone are read too). ``datetime.fromisoformat`` alone also takes
#: ``20261105T030000Z``, which a hand edit or another tool made, and a report showed garbled.
_CREATED = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{3}(\d{3})?)?(Z|[+-]\d{2}:\d{2})?")


def _check_created(meta: Mapping[str, Any], name: str) -> None:
    if "created" not in meta:
        return
    created = meta["created"]
    valid = isinstance(created, str) and _CREATED.fullmatch(created) is not None
    if valid:
        try:
            _dt.datetime.fromisoformat(created.replace("Z", "+00:00"))
        except ValueError:  # a month 13, a 25th hour
            valid = False
    if not valid:
        raise _fail(name, "_meta.created", f"is {brief_repr(created)}; expected an ISO-8601 time as the plugin "
                                           "writes it (2026-12-01T02:37:05+00:00)")


def _check_baseline_entry(meta: Mapping[str, Any], name: str) -> None:
    """``_meta.baseline``: a string ``updated`` ("yes", "false") would read as a baseline
    refresh, and ``ragmetrics history`` would take the drift before it as answered."""
    if meta.get("baseline") is None:
        return
    entry = meta["baseline"]
    if not isinstance(entry, dict):
        raise _fail(name, "_meta.baseline", f"is {brief_repr(entry)}; expected null or an object with sha256, "
                                            "content, created and updated")
    for key in ("sha256", "content", "created"):
        if entry.get(key) is not None and not isinstance(entry[key], str):
            raise _fail(name, f"_meta.baseline.{key}", f"is {brief_repr(entry[key])}; expected a string or null")
    if not isinstance(entry.get("updated"), bool):
        what = "is missing" if "updated" not in entry else f"is {brief_repr(entry['updated'])}"
        raise _fail(name, "_meta.baseline.updated", f"{what}; expected true (the run wrote the baseline) or false")


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _check_attempts(meta: Mapping[str, Any], name: str) -> None:
    """``_meta.attempt`` (which attempt of the run, 1 for the first), and a merged run's ``_meta.shards``
    and ``_meta.retried``: a retried shard removed from ``retried`` by hand would merge as a first attempt.
    Artifacts written before attempts were recorded have none of them."""
    if "attempt" in meta and not _whole(meta["attempt"]):
        raise _fail(name, "_meta.attempt", f"is {brief_repr(meta['attempt'])}; expected a whole number >= 1 (which "
                                           "attempt of the run wrote it)")
    if "shards" not in meta and "retried" not in meta:
        return
    shards = meta.get("shards")
    if not isinstance(shards, list) or not shards:
        raise _fail(name, "_meta.shards", f"is {brief_repr(shards)}; expected the list of the shards merged "
                                          "(index, count, attempt, file)")
    for i, shard in enumerate(shards):
        where = f"_meta.shards[{i}]"
        if not isinstance(shard, dict) or not _whole(shard.get("index")) or not _whole(shard.get("count")) \
                or shard["index"] > shard["count"] or not isinstance(shard.get("file"), str) \
                or not (shard.get("attempt") is None or _whole(shard.get("attempt"))):
            raise _fail(name, where, f"is {brief_repr(shard)}; expected an object with index and count (1 <= index "
                                     "<= count), attempt (a whole number >= 1, or null) and file (a string)")
    retried = meta.get("retried")
    expected = [s["index"] for s in shards if (s.get("attempt") or 0) > 1]
    if retried != expected:
        raise _fail(name, "_meta.retried", f"is {brief_repr(retried)}; expected {expected}, the index of each "
                                           "shard of _meta.shards whose attempt is above 1")


def _check_comparison(comparison: Mapping[str, Any], name: str) -> None:
    regressed = comparison.get("regressed", [])
    if not isinstance(regressed, list):
        raise _fail(name, "comparison.regressed", f"is {brief_repr(regressed)}; expected a list of objects")
    for i, entry in enumerate(regressed):
        if not isinstance(entry, dict) or not isinstance(entry.get("qid"), str):
            raise _fail(name, f"comparison.regressed[{i}]", f"is {brief_repr(entry)}; expected an object "
                                                            "with a string 'qid'")
    changes = comparison.get("retriever_changes", [])
    if not isinstance(changes, list) or not all(isinstance(c, str) for c in changes):
        raise _fail(name, "comparison.retriever_changes", f"is {brief_repr(changes)}; expected a list of strings")
    if "passed" in comparison and not isinstance(comparison["passed"], bool):
        raise _fail(name, "comparison.passed", f"is {brief_repr(comparison['passed'])}; expected true or false")
    if "stale_labels" in comparison:
        _check_stale_labels(comparison["stale_labels"], name)
    skipped = comparison.get("skipped", {})
    if not isinstance(skipped, dict) or not all(isinstance(r, str) for r in skipped.values()):
        raise _fail(name, "comparison.skipped", f"is {brief_repr(skipped)}; expected query id -> why it was skipped")
    leaks = comparison.get("leaks", [])
    if not isinstance(leaks, list):
        raise _fail(name, "comparison.leaks", f"is {brief_repr(leaks)}; expected a list of objects")
    for i, leak in enumerate(leaks):
        if not isinstance(leak, dict) or not isinstance(leak.get("qid"), str) \
                or not isinstance(leak.get("scope"), dict) or not isinstance(leak.get("docs"), list) \
                or not leak["docs"]:
            raise _fail(name, f"comparison.leaks[{i}]", f"is {brief_repr(leak)}; expected an object with a string "
                                                        "qid, a scope object and a non-empty list of docs")
        _check_leak_docs(leak["docs"], f"comparison.leaks[{i}].docs", name)


def _check_leak_docs(docs: Any, where: str, name: str) -> None:
    """Leaked documents: ``{rank, id, doc, metadata}`` each, as the plugin writes them."""
    if not isinstance(docs, list):
        raise _fail(name, where, f"is {brief_repr(docs)}; expected a list of leaked documents")
    for i, d in enumerate(docs):
        if not isinstance(d, dict) or not isinstance(d.get("id"), str) or not isinstance(d.get("doc"), str) \
                or not isinstance(d.get("metadata"), dict) or isinstance(d.get("rank"), bool) \
                or not isinstance(d.get("rank"), int):
            raise _fail(name, f"{where}[{i}]", f"is {brief_repr(d)}; expected an object with rank (integer), id, "
                                               "doc (strings) and metadata (an object)")


def _check_stale_labels(ages: Any, name: str) -> None:
    """``comparison.stale_labels``: history charts the share of stale labels from these counts."""
    where = "comparison.stale_labels"
    if not isinstance(ages, dict):
        raise _fail(name, where, f"is {brief_repr(ages)}; expected an object with checked, stale and undated")
    checked = ages.get("checked")
    if isinstance(checked, bool) or not isinstance(checked, int) or checked < 0:
        raise _fail(name, f"{where}.checked", f"is {brief_repr(checked)}; expected a non-negative integer")
    listed_n = 0
    for key in ("stale", "undated"):
        rows = ages.get(key)
        if not isinstance(rows, list):
            raise _fail(name, f"{where}.{key}", f"is {brief_repr(rows)}; expected a list of records")
        for i, row in enumerate(rows):
            if not isinstance(row, dict) or not isinstance(row.get("qid"), str) \
                    or not isinstance(row.get("limit_key"), str) \
                    or isinstance(row.get("limit_days"), bool) or not isinstance(row.get("limit_days"), int):
                raise _fail(name, f"{where}.{key}[{i}]", f"is {brief_repr(row)}; expected an object with qid, "
                                                         "oldest, age_days, limit_days and limit_key")
        listed_n += len(rows)
    if listed_n > checked:
        raise _fail(name, where, f"lists {listed_n} stale or undated records of {checked} checked: the file was "
                                 "edited by hand")


def _check_entry(qid: str, entry: Any, metrics: list[str], name: str, k: int | None = None
                 ) -> dict[str, float] | None:
    """Check one per-query record; its values as the gate averages them (``None``: unscorable)."""
    where = f"per_query.{qid}"
    if not isinstance(entry, dict):
        raise _fail(name, where, f"is {brief_repr(entry)}; expected an object")
    unknown = sorted(k for k in entry if k not in _ENTRY_KEYS and not str(k).startswith("_"))
    if unknown:
        raise _fail(name, f"{where}.{unknown[0]}", f"is an unknown key (expected {', '.join(sorted(_ENTRY_KEYS))})")
    if "status" not in entry:
        raise _fail(name, f"{where}.status", f"is missing; expected one of {', '.join(STATUSES)}")
    status = entry["status"]
    if status not in STATUSES:
        raise _fail(name, f"{where}.status", f"is {brief_repr(status)}; expected one of {', '.join(STATUSES)}")
    for key in ("ranking", "tags", "_top"):
        value = entry.get(key)
        if value is not None and (not isinstance(value, list) or not all(isinstance(x, str) for x in value)):
            raise _fail(name, f"{where}.{key}", f"is {brief_repr(value)}; expected a list of strings")
    if any(not doc.strip() for doc in entry.get("ranking") or []):
        raise _fail(name, f"{where}.ranking", "holds an empty document id")
    top = entry.get("_top") or []
    if any(not doc.strip() for doc in top) or len(set(top)) != len(top):
        raise _fail(name, f"{where}._top", "holds an empty or repeated document id; the plugin writes each "
                                           "document of the top k once")
    if k is not None and len(top) > k:
        raise _fail(name, f"{where}._top", f"holds {len(top)} documents, more than _meta.k = {k}: the plugin "
                                           "records the top k, so the file was edited")
    unjudged = entry.get("unjudged")
    if unjudged is not None and (not isinstance(unjudged, dict) or not all(
            isinstance(unjudged.get(key) or [], list) and all(isinstance(d, str) for d in unjudged.get(key) or [])
            for key in ("docs", "new"))):
        raise _fail(name, f"{where}.unjudged", f"is {brief_repr(unjudged)}; expected an object whose docs and new "
                                               "are lists of document ids")
    for key in ("filters", "scope"):
        if key in entry and not isinstance(entry[key], dict):
            raise _fail(name, f"{where}.{key}", f"is {brief_repr(entry[key])}; expected an object (the golden "
                                                f"record's {key})")
    if "leaks" in entry:
        _check_leak_docs(entry["leaks"], f"{where}.leaks", name)
    ranking = entry.get("ranking") or []
    seen: set[str] = set()
    for repeat in ranking:
        if repeat not in seen:
            seen.add(repeat)
            continue
        raise _fail(name, f"{where}.ranking", f"holds the document {brief_repr(repeat)} twice; the plugin drops "
                                              "repeats, so the file was edited (a TREC run exported from it would "
                                              "be refused)")
    if "source" in entry and entry["source"] not in SOURCES:
        raise _fail(name, f"{where}.source", f"is {brief_repr(entry['source'])}; expected one of {', '.join(SOURCES)}")
    if "_judgments" in entry and not isinstance(entry["_judgments"], str):
        raise _fail(name, f"{where}._judgments", f"is {brief_repr(entry['_judgments'])}; expected a string "
                                                 "(the digest of the query's text and judgments)")
    if entry.get("error") is not None and not isinstance(entry["error"], str):
        raise _fail(name, f"{where}.error", f"is {brief_repr(entry['error'])}; expected a string")
    n_docs = entry.get("n_docs")
    if n_docs is not None and (isinstance(n_docs, bool) or not isinstance(n_docs, int) or n_docs < 0):
        raise _fail(name, f"{where}.n_docs", f"is {brief_repr(n_docs)}; expected a non-negative integer")
    baseline = entry.get("baseline")
    if baseline is not None:
        _check_values(baseline, {*metrics, "false_retrieval"}, f"{where}.baseline", name, require=())
    if entry.get("answerable", True) is not True and entry.get("answerable") is not False:
        raise _fail(name, f"{where}.answerable", f"is {brief_repr(entry['answerable'])}; expected true or false")
    if status == "unanswerable" or entry.get("answerable") is False:  # outside the means: scored by false retrieval
        found = entry.get("false_retrieval")
        if status == "unanswerable" and found not in (0, 1) or isinstance(found, bool):
            raise _fail(name, f"{where}.false_retrieval", f"is {brief_repr(found)}; expected 0 or 1")
        return None
    if status == "error":
        return {m: 0.0 for m in metrics}
    if status == "unscorable":
        return None
    values = entry.get("metrics")
    _check_values(values, set(metrics), f"{where}.metrics", name, require=metrics)
    return {m: float(values[m]) for m in metrics}  # type: ignore[index]


def _check_values(values: Any, known: set[str], where: str, name: str, require: Any) -> None:
    if not isinstance(values, dict):
        raise _fail(name, where, f"is {brief_repr(values)}; expected an object of metric values")
    for key, value in values.items():
        if str(key).startswith("_"):
            continue
        if key not in known:
            raise _fail(name, f"{where}.{key}", f"is an unknown metric (measured: {', '.join(sorted(known))}; "
                                                "names are case-sensitive)")
        check_metric_value(name, f"{where}.{key}", value, _value_error)
    absent = [m for m in require if m not in values]
    if absent:
        raise _fail(name, f"{where}.{absent[0]}", "is missing: a scored query holds every measured metric")


def _check_aggregate(aggregate: Any, metrics: list[str], counted: list[dict[str, float]], name: str) -> None:
    if not isinstance(aggregate, dict):
        raise _fail(name, "aggregate", f"is {brief_repr(aggregate)}; expected an object of metric means")
    extra = [k for k in aggregate if k not in metrics]
    if extra:
        raise _fail(name, f"aggregate.{extra[0]}", f"is not a measured metric (measured: {', '.join(metrics)})")
    for m in metrics:
        if m not in aggregate:
            raise _fail(name, f"aggregate.{m}", "is missing")
        value = aggregate[m]
        if value is None and not counted:
            continue
        check_metric_value(name, f"aggregate.{m}", value, _value_error)
        if not counted:
            raise _fail(name, f"aggregate.{m}", f"is {value!r}, but no query was scored or errored")
        check_mean(name, f"aggregate.{m}", value, [row[m] for row in counted],
                   "counting errored queries as 0 and leaving unscorable ones out: the file was edited by "
                   "hand; restore the artifact the run wrote", _value_error)
