"""baseline.json: the one module that reads, validates, seals and writes it.

The baseline is ``{"_meta": {...}, "aggregate": {metric: value},
"per_query": {qid: {metric: value, "_judgments": digest, "_seal": digest}}}``; keys
starting with ``_`` are metadata. ``_meta`` is the fingerprint of what was measured,
``_meta.format`` the schema version and ``_meta.seal`` a digest of the file's own
content. Writes go through :mod:`pytest_ragmetrics.files` (atomic, sorted keys) with
floats rounded to 10 decimals, so that a pull request's diff reads well.

A baseline is trusted only when it holds together: every metric its fingerprint lists
is in every entry, finite and in [0, 1]; each stored mean is the mean of its entries;
every entry carries its judgments digest; and the seal matches, so a hand edit, a
careless merge or a stripped key is refused with the entries it touched, instead of
quietly turning a red run green. An edit made on purpose is sealed with
``ragmetrics baseline --reseal FILE``.
Only :func:`write_baseline` and :func:`reseal_baseline` write.

Schema (``_meta.format`` :data:`FORMAT`; docs/configuration.md, "The baseline", says it for users):

- ``_meta``: ``format``, ``seal`` (digests of ``_meta``, ``aggregate`` and the entries),
  ``measurement`` (its ``metrics`` are the metrics every entry holds), ``golden``
  (``source``, ``sha256``, ``n_queries``), ``k``, ``retriever``, ``package_version``,
  ``git_commit``, ``thresholds``, ``created``, and when set ``answer_threshold``,
  ``allowed_missing_gold`` and ``lowerings`` (why the baseline went down, one entry a refresh or
  reseal that lowered a gated value: ``reason``, ``lowered`` (``qid`` or ``aggregate``, ``metric``,
  ``before``, ``after``), ``time`` and ``author``; see :mod:`pytest_ragmetrics.gate.lowering`);
- ``aggregate``: each measured metric's mean over the entries that hold it (and
  ``false_retrieval_rate`` when questions marked answerable: false were measured);
- ``per_query.<qid>``: every measured metric (finite, in [0, 1]), ``_judgments`` (the digest of
  the query's text and judgments), ``_top`` (its top-k document ranking, by which a pooled set
  tells new unjudged documents from old) and ``_seal``;
  an unanswerable question's entry holds ``false_retrieval`` (0 or 1) instead of metrics.

Versions: a file with a newer ``_meta.format`` is refused (upgrade pytest-ragmetrics to read it).
A file without one was written before formats were recorded, unsealed: the same schema reads it,
but the gate refuses it until it is sealed with ``ragmetrics baseline --reseal FILE`` (or
re-measured), as the integrity design requires: an older file cannot be told from one whose seal
was stripped. ``--rag-update-baseline`` reads it unsealed (``sealed=False``), replaces it in the
current format, and says so once (:attr:`Baseline.notes`, in the run's summary).
"""

from __future__ import annotations

import datetime as _dt
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Collection, Mapping, NoReturn

from pytest_ragmetrics.errors import BaselineError, MeasureError, brief_repr
from pytest_ragmetrics.files import atomic_write_json, canonical_digest, loads_json, write_problem
from pytest_ragmetrics.measures import MeasurementConfig

if TYPE_CHECKING:
    from pytest_ragmetrics.gate.verdict import QueryRecord
    from pytest_ragmetrics.gold import GoldCheck
    from pytest_ragmetrics.golden import GoldenSet

__all__ = [
    "Baseline",
    "baseline_from_records",
    "FORMAT",
    "load_baseline",
    "write_baseline",
    "reseal_baseline",
    "prepare_reseal",
    "parse_baseline",
    "seal_problems",
    "fingerprint_mismatch",
    "measurement_mismatch",
    "measurement_dict",
    "check_metric_value",
    "check_mean",
    "round_metric",
    "threshold_mismatch",
]

#: An unanswerable question's entry holds this alone (besides ``_`` metadata); the aggregate
#: then holds :data:`RATE`, its mean (see :mod:`pytest_ragmetrics.unanswerable`).
FALSE_RETRIEVAL = "false_retrieval"
RATE = "false_retrieval_rate"

#: Digits kept in files; comparisons allow this much slack (see ``gate.EPS``).
DIGITS = 10
#: The schema version written as ``_meta.format``.
FORMAT = 2
#: How far a stored mean may sit from the mean of its entries (rounding to DIGITS is far below).
MEAN_SLACK = 1e-9
#: What to do about a file that fails its seal.
RESEAL_HINT = ("if the edit was on purpose, seal it with `ragmetrics baseline --reseal {path}` (it recomputes the "
               "means from the entries and prints what it seals); otherwise restore it from version control or "
               "re-measure it with --rag-update-baseline")


def round_metric(value: float) -> float:
    return round(float(value), DIGITS)


@dataclass
class Baseline:
    meta: dict[str, Any]
    aggregate: dict[str, float]
    per_query: dict[str, dict[str, Any]]
    path: str = ""
    #: notes for the reader of the run (e.g. an older file that the next write upgrades)
    notes: list[str] = field(default_factory=list)

    def metrics_of(self, qid: str) -> dict[str, float]:
        return {k: v for k, v in self.per_query.get(qid, {}).items() if not k.startswith("_")}

    @property
    def metrics(self) -> list[str]:
        """The metrics the fingerprint lists (each is in every entry of a loaded baseline)."""
        measurement = self.meta.get("measurement")
        listed = measurement.get("metrics") if isinstance(measurement, Mapping) else None
        return list(listed) if isinstance(listed, list) else sorted(self.aggregate)

    def renamed(self, old_to_new: Mapping[str, str]) -> Baseline:
        """This baseline with some entries under new query ids (in memory only; never written)."""
        per_query = {old_to_new.get(qid, qid): entry for qid, entry in self.per_query.items()}
        return Baseline(self.meta, self.aggregate, per_query, self.path, list(self.notes))

    def content_digest(self) -> str:
        """sha256 of what the gate compares with: the aggregate, each entry's metrics and its
        ``_judgments``; not ``_meta``, the seals or the file's formatting. Two files that judge a
        run alike share it, so a reformatted or resealed copy is the same baseline, not a refresh."""
        entries = {qid: {k: (v if k == "_judgments" else float(v)) for k, v in entry.items()
                         if not k.startswith("_") or k == "_judgments"}
                   for qid, entry in self.per_query.items()}
        return canonical_digest({"aggregate": {k: float(v) for k, v in self.aggregate.items()}, "per_query": entries})

    def to_dict(self) -> dict[str, Any]:
        """The file's content, rounded and sealed."""
        meta = {k: v for k, v in self.meta.items() if k != "seal"}
        meta["format"] = FORMAT
        per_query = {}
        for qid, entry in self.per_query.items():
            row = {k: (round_metric(v) if not k.startswith("_") else v) for k, v in entry.items() if k != "_seal"}
            row["_seal"] = _entry_seal(qid, row)
            per_query[qid] = row
        aggregate = {k: round_metric(v) for k, v in self.aggregate.items()}
        meta["seal"] = _seal(meta, aggregate, per_query)
        return {"_meta": meta, "aggregate": aggregate, "per_query": per_query}


# ------------------------------------------------------------------------ the seal


def _digest(value: Any) -> str:
    return canonical_digest(value)[:16]


def _canonical_entry(entry: Mapping[str, Any]) -> dict[str, Any]:
    """An entry as sealed: ``1`` and ``1.0`` are one value; the seal itself is left out."""
    return {k: (float(v) if not k.startswith("_") and isinstance(v, (int, float)) and not isinstance(v, bool) else v)
            for k, v in entry.items() if k != "_seal"}


def _entry_seal(qid: str, entry: Mapping[str, Any]) -> str:
    return _digest([qid, _canonical_entry(entry)])


def _seal(meta: Mapping[str, Any], aggregate: Mapping[str, Any],
          per_query: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Section digests: naming which part of a file changed is what makes a refusal useful.

    ``_meta.created`` is left out: the gate never reads it, and a refresh that changes no
    number then changes one line of the file, its time.
    """
    return {
        "meta": _digest({k: v for k, v in meta.items() if k not in ("seal", "created")}),
        "aggregate": _digest({k: float(v) for k, v in aggregate.items()}),
        "per_query": _digest(sorted((qid, entry.get("_seal")) for qid, entry in per_query.items())),
        "n_queries": len(per_query),
    }


def seal_problems(data: Mapping[str, Any]) -> list[str]:
    """What no longer matches the seal of a parsed, schema-valid baseline (empty: intact).

    Names the per-query entries whose content changed, and the sections (``_meta``,
    ``aggregate``, the set of queries) that changed around them.
    """
    meta, aggregate, per_query = data["_meta"], data["aggregate"], data["per_query"]
    recorded = meta.get("seal")
    if not isinstance(recorded, Mapping):
        return ["_meta.seal is missing"]
    problems = []
    unsealed = sorted(qid for qid, entry in per_query.items() if "_seal" not in entry)
    edited = sorted(qid for qid, entry in per_query.items()
                    if "_seal" in entry and entry["_seal"] != _entry_seal(qid, entry))
    if unsealed:
        problems.append(f"per_query entries without a _seal: {_names(unsealed)}")
    if edited:
        problems.append(f"per_query entries edited: {_names(edited)}")
    now = _seal(meta, aggregate, per_query)
    if recorded.get("meta") != now["meta"]:
        problems.append("_meta edited")
    if recorded.get("aggregate") != now["aggregate"]:
        problems.append("aggregate edited")
    n = recorded.get("n_queries")
    counted = isinstance(n, int) and not isinstance(n, bool)
    if counted and n != len(per_query):  # said even beside edited entries: a removal must not hide behind them
        problems.append(f"per_query entries added or removed ({n} sealed, {len(per_query)} now)")
    elif not unsealed and not edited and recorded.get("per_query") != now["per_query"]:
        problems.append("per_query entries added or removed"
                        + (f" ({n} sealed, {len(per_query)} now)" if counted else ""))
    return problems


def _names(qids: list[str], limit: int = 10) -> str:
    shown = ", ".join(brief_repr(q) if not q.isprintable() or not q else q for q in qids[:limit])
    return shown + (f" and {len(qids) - limit} more" if len(qids) > limit else "")


# ------------------------------------------------------------------------- reading


def _reject_constant(token: str) -> float:
    raise ValueError(f"{token} is not a valid metric value")


def _fail(name: str, problem: str) -> NoReturn:
    raise BaselineError(f"{name}: {problem}")


def load_baseline(path: str | Path, *, sealed: bool = True) -> Baseline:
    """Read and validate a baseline; every problem names the file and the key.

    ``sealed=False`` skips the seal check (and accepts a file of an older format
    without one): for a refresh that is about to replace the file, and for
    ``--reseal``, which exists to seal an edit made on purpose.
    """
    data, name = _read(path)
    _check_schema(data, name, means=False)
    notes = []
    version = data["_meta"].get("format")
    if version is None:
        if sealed:
            _fail(name, "this baseline has no seal (no _meta.format): it was written by an older version of "
                        "pytest-ragmetrics, or its seal was removed by hand, so a hand edit cannot be told from a "
                        f"measurement. Check it against version control, then seal it with `ragmetrics baseline "
                        f"--reseal {name}`, or re-measure it with --rag-update-baseline")
        notes.append(f"{name} was written by an older version (no _meta.format); written again, it is sealed "
                     f"and upgraded to format {FORMAT}")
    elif sealed:
        problems = seal_problems(data)
        if problems:
            _fail(name, "the file does not match its seal, so it was changed by hand or by a merge since it was "
                        "measured:\n  - " + "\n  - ".join(problems) + "\n" + RESEAL_HINT.format(path=name))
    _check_means(data, name)  # after the seal, which names the entries an edit touched
    return Baseline(data["_meta"], data["aggregate"], data["per_query"], name, notes)


def parse_baseline(text: str, name: str) -> Baseline:
    """A baseline from its text (``name`` says where it comes from in messages, e.g. the file at a
    git ref), validated as :func:`load_baseline` validates a file, without the seal check: for
    reading a committed version to compare with, never for gating."""
    data = _parse(text.removeprefix("\ufeff"), name)
    _check_schema(data, name)
    return Baseline(data["_meta"], data["aggregate"], data["per_query"], name)


def _read(path: str | Path) -> tuple[dict[str, Any], str]:
    path = Path(path)
    name = str(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise BaselineError(
            f"{name}: no baseline yet. Create it with `pytest --rag-eval --rag-update-baseline` "
            "(a full run), review it and commit it."
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BaselineError(f"{name}: cannot read the baseline: {exc}") from None
    return _parse(text, name), name


def _parse(text: str, name: str) -> dict[str, Any]:
    conflict = next((n for n, line in enumerate(text.split("\n"), 1)
                     if line.startswith(("<<<<<<< ", ">>>>>>> "))
                     or line.rstrip() in ("<<<<<<<", "=======", ">>>>>>>")), None)
    if conflict is not None:
        raise BaselineError(f"{name}, line {conflict}: holds a merge conflict marker; resolve the conflict by "
                            "re-measuring (`pytest --rag-eval --rag-update-baseline` on the merged code), "
                            "not by hand, then commit the result")
    try:
        data = loads_json(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise BaselineError(f"{name}, line {exc.lineno}: not valid JSON ({exc.msg}); "
                            "restore it from version control or recreate it with --rag-update-baseline") from None
    except RecursionError:
        raise BaselineError(f"{name}: not a baseline (JSON nested too deeply)") from None
    except ValueError as exc:
        raise BaselineError(f"{name}: {exc}") from None
    if not isinstance(data, dict):
        raise BaselineError(f"{name}: expected a JSON object with _meta, aggregate and per_query")
    return data


def _check_schema(data: dict[str, Any], name: str, means: bool = True) -> None:
    """The baseline schema, record by record (see the module docstring); ``means=False``
    leaves out the check that each stored mean is its entries' mean."""
    for key in ("_meta", "aggregate", "per_query"):
        if key not in data:
            _fail(name, f"missing key {key!r}")
        if not isinstance(data[key], dict):
            _fail(name, f"{key!r} must be an object")
    unknown = sorted(k for k in data if not k.startswith("_") and k not in ("aggregate", "per_query"))
    if unknown:
        _fail(name, f"unknown key {unknown[0]!r} at the top level; a baseline holds _meta, aggregate and per_query")
    meta = data["_meta"]
    version = meta.get("format")
    if version is not None and (isinstance(version, bool) or not isinstance(version, int)):
        _fail(name, f"_meta.format must be an integer, got {brief_repr(version)}")
    if isinstance(version, int) and version > FORMAT:
        _fail(name, f"_meta.format is {version}, newer than this version of pytest-ragmetrics reads ({FORMAT}); "
                    "upgrade pytest-ragmetrics")
    for metric, value in data["aggregate"].items():
        check_metric_value(name, f"aggregate.{metric}", value)
    no_answer = [qid for qid, entry in data["per_query"].items()
                 if isinstance(entry, dict) and FALSE_RETRIEVAL in entry]
    for qid, entry in data["per_query"].items():
        if not isinstance(entry, dict):
            _fail(name, f"per_query.{qid} must be an object of metric values")
        for metric, value in entry.items():
            if not metric.startswith("_"):
                check_metric_value(name, f"per_query.{qid}.{metric}", value)
    measurement = meta.get("measurement")
    metrics = measurement.get("metrics") if isinstance(measurement, dict) else None
    if not isinstance(metrics, list) or not metrics or not all(isinstance(m, str) for m in metrics):
        _fail(name, "the baseline records no measurement config (_meta.measurement.metrics, the list of metrics "
                    "it measured); re-measure it with --rag-update-baseline")
    if len(set(metrics)) != len(metrics):
        _fail(name, "_meta.measurement.metrics lists a metric twice")
    try:  # the fingerprint a comparison checks must say what it means: no bool for a level, no made-up gain
        MeasurementConfig.from_dict(measurement)
    except (MeasureError, KeyError, TypeError, ValueError) as exc:
        _fail(name, f"_meta.measurement is not a measurement config: {exc}")
    k = meta.get("k")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        _fail(name, f"_meta.k (results asked per query) must be a positive integer, got {brief_repr(k)}")
    if "lowerings" in meta:
        _check_lowerings(name, meta["lowerings"])
    if no_answer and RATE not in data["aggregate"]:
        _fail(name, f"aggregate is missing {RATE!r}, the mean false retrieval of its {len(no_answer)} questions "
                    "marked answerable: false; restore it from version control or re-measure with "
                    "--rag-update-baseline")
    _check_keys(name, "aggregate", data["aggregate"], [*metrics, RATE] if no_answer else metrics)
    for qid, entry in data["per_query"].items():
        if FALSE_RETRIEVAL in entry:  # a question marked answerable: false: scored by false retrieval alone
            _check_keys(name, f"per_query.{qid}", entry, [FALSE_RETRIEVAL])
            if entry[FALSE_RETRIEVAL] not in (0, 1):
                _fail(name, f"per_query.{qid}.{FALSE_RETRIEVAL} is {brief_repr(entry[FALSE_RETRIEVAL])}; a false "
                            "retrieval is 0 or 1")
        else:
            _check_keys(name, f"per_query.{qid}", entry, metrics)
        _check_top(name, f"per_query.{qid}._top", entry.get("_top"), k)
        digest = entry.get("_judgments")
        if not isinstance(digest, str) or not digest:
            _fail(name, f"per_query.{qid} has no _judgments digest, so a change of its labels could not be "
                        "told; restore it from version control or re-measure with --rag-update-baseline")
    if not data["per_query"]:
        _fail(name, "per_query is empty: a baseline must measure at least one query")
    if means:
        _check_means(data, name)


#: The fields of one ``_meta.lowerings`` entry (``author`` may be absent) and of one value it lowered.
_LOWERING_KEYS = ("reason", "lowered", "time", "author")
_LOWERED_KEYS = ("qid", "aggregate", "metric", "before", "after")


def _check_lowerings(name: str, lowerings: Any) -> None:
    """``_meta.lowerings``: why the baseline went down, one entry a refresh or reseal that lowered it,
    oldest first (see :mod:`pytest_ragmetrics.gate.lowering`). Each ``{"reason", "lowered", "time",
    "author"?}``; each lowered value ``{"qid" | "aggregate": true, "metric", "before", "after"}``, with
    ``after`` null for a query whose entry is gone (removed from the golden set, or no longer scorable)."""
    if not isinstance(lowerings, list):
        _fail(name, f"_meta.lowerings must be a list of recorded lowerings, got {brief_repr(lowerings)}")
    for i, entry in enumerate(lowerings):
        where = f"_meta.lowerings[{i}]"
        if not isinstance(entry, dict):
            _fail(name, f"{where} must be an object with reason, lowered, time and author, got {brief_repr(entry)}")
        unknown = [key for key in entry if key not in _LOWERING_KEYS]
        if unknown:
            _fail(name, f"{where} holds {unknown[0]!r}; an entry holds {', '.join(_LOWERING_KEYS)}")
        for key in ("reason", "lowered", "time"):
            if key not in entry:
                _fail(name, f"{where} is missing {key!r}")
        for key in ("reason", "time", "author"):
            value = entry.get(key, "-")
            if not isinstance(value, str) or not value.strip():
                _fail(name, f"{where}.{key} must be a non-empty string, got {brief_repr(value)}")
        try:
            written = _dt.datetime.fromisoformat(entry["time"])
        except ValueError:
            written = None
        if written is None or written.utcoffset() is None:
            _fail(name, f"{where}.time must be an ISO 8601 time with its UTC offset, got {brief_repr(entry['time'])}")
        lowered = entry["lowered"]
        if not isinstance(lowered, list) or not lowered:
            _fail(name, f"{where}.lowered must be a non-empty list of the values it lowered, got {brief_repr(lowered)}")
        for j, value in enumerate(lowered):
            _check_lowered(name, f"{where}.lowered[{j}]", value)


def _check_lowered(name: str, where: str, value: Any) -> None:
    if not isinstance(value, dict):
        _fail(name, f"{where} must be an object with qid (or aggregate), metric, before and after, "
                    f"got {brief_repr(value)}")
    unknown = [key for key in value if key not in _LOWERED_KEYS]
    if unknown:
        _fail(name, f"{where} holds {unknown[0]!r}; a lowered value holds qid or aggregate, metric, before and after")
    if ("qid" in value) == ("aggregate" in value):
        _fail(name, f"{where} must name either a query (qid) or the mean (\"aggregate\": true)")
    if "qid" in value and (not isinstance(value["qid"], str) or not value["qid"]):
        _fail(name, f"{where}.qid must be a query id (a non-empty string), got {brief_repr(value['qid'])}")
    if "aggregate" in value and value["aggregate"] is not True:
        _fail(name, f"{where}.aggregate must be true, got {brief_repr(value['aggregate'])}")
    for key in ("metric", "before", "after"):
        if key not in value:
            _fail(name, f"{where} is missing {key!r}")
    if not isinstance(value["metric"], str) or not value["metric"]:
        _fail(name, f"{where}.metric must be a metric name, got {brief_repr(value['metric'])}")
    check_metric_value(name, f"{where}.before", value["before"])
    if value["after"] is None:
        if "qid" not in value:
            _fail(name, f"{where}.after is null (a removed query), but it names the mean: give the mean it fell to")
    else:
        check_metric_value(name, f"{where}.after", value["after"])


def _check_top(name: str, where: str, top: Any, k: int) -> None:
    """``_top``, the query's top-k document ranking (absent in baselines written before it):
    distinct non-empty ids, at most k, so new unjudged documents are told from old ones."""
    if top is None:
        return
    if not isinstance(top, list) or not all(isinstance(d, str) and d.strip() for d in top):
        _fail(name, f"{where} must be a list of document ids (non-empty strings), got {brief_repr(top)}")
    if len(set(top)) != len(top):
        _fail(name, f"{where} lists a document twice; the plugin writes each once")
    if len(top) > k:
        _fail(name, f"{where} holds {len(top)} documents, more than _meta.k = {k}")


def _check_means(data: dict[str, Any], name: str) -> None:
    """Each stored mean is the mean of its entries (the schema's other checks passed); the
    questions marked answerable: false count in ``false_retrieval_rate`` alone."""
    for metric in [*data["_meta"]["measurement"]["metrics"], RATE]:
        if metric not in data["aggregate"]:
            continue
        entry_key = FALSE_RETRIEVAL if metric == RATE else metric
        check_mean(name, f"aggregate.{metric}", data["aggregate"][metric],
                   [entry[entry_key] for entry in data["per_query"].values() if entry_key in entry],
                   "so the file was edited by hand or by a merge; " + RESEAL_HINT.format(path=name))


def _check_keys(name: str, where: str, entry: Mapping[str, Any], metrics: list[str]) -> None:
    """Exactly the listed metrics (besides ``_`` metadata): a missing one would compare as
    "nothing to compare with", and an extra spelling would never be read."""
    for metric in metrics:
        if metric not in entry:
            _fail(name, f"{where} is missing {metric!r}, which the baseline's measurement lists; every entry "
                        "must hold every measured metric (a merge may have dropped it): restore it from version "
                        "control or re-measure with --rag-update-baseline")
    for key in entry:
        if not key.startswith("_") and key not in metrics:
            like = [m for m in metrics if m.lower() == key.lower()]
            hint = f" (did you mean {like[0]!r}? keys are case-sensitive)" if like else ""
            _fail(name, f"{where} holds {key!r}, which the baseline's measurement does not list "
                        f"({', '.join(metrics)}){hint}")


def check_metric_value(name: str, key: str, value: Any,
                       error_type: Callable[[str], Exception] = BaselineError) -> None:
    """A metric value as files hold it: a finite number in [0, 1], not a bool; else
    ``error_type`` with the file (``name``) and the key."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise error_type(f"{name}: {key} must be a finite number, got {brief_repr(value)}")
    if not 0.0 <= value <= 1.0:
        raise error_type(f"{name}: {key} = {value} is outside [0, 1]")


def check_mean(name: str, key: str, stored: float, values: list[float], why: str,
               error_type: Callable[[str], Exception] = BaselineError) -> None:
    """A stored mean must be the mean of its entries: the entries are what a gate compares,
    so a mean that disagrees means one of them was changed after the run."""
    if not values:
        return
    mean = math.fsum(values) / len(values)
    if abs(mean - stored) > MEAN_SLACK:
        raise error_type(f"{name}: {key} = {stored!r}, but the mean of its {len(values)} per-query values is "
                    f"{mean:.10f}, {why}")


# ------------------------------------------------------------------------- writing


def baseline_from_records(records: Mapping[str, QueryRecord], golden: GoldenSet, metrics: list[str],
                          relevance_level: int, meta: Callable[[], dict[str, Any]], gold: GoldCheck | None,
                          allow_missing_gold: bool, path: str | Path,
                          allow_flag: str = "--rag-allow-missing-gold") -> Baseline:
    """The baseline a run's records make, or a :class:`BaselineError` saying why none may be written.

    Refused when a query of the whole ``golden`` set did not run, errored or leaked, when relevant gold
    ids are not in the corpus (unless ``allow_missing_gold``; ``allow_flag`` is the option that
    says so) and when no query could be scored: a baseline must describe the whole golden set as
    the retriever really answers it. ``meta`` gives the run's ``_meta`` (called once the checks pass).
    The plugin's ``--rag-update-baseline`` and ``ragmetrics merge --update-baseline`` both use it.
    """
    from pytest_ragmetrics.errors import listed, shown
    from pytest_ragmetrics.evaluation import mean_metrics
    from pytest_ragmetrics.unanswerable import FALSE_RETRIEVAL, RATE, false_retrieval_rate

    def counted(n: int, one: str, many: str) -> str:
        return f"{n} {one if n == 1 else many}"

    missing = [q.qid for q in golden if q.qid not in records]
    if missing:
        raise BaselineError(
            f"not writing {path}: "
            f"{counted(len(missing), 'golden query', 'golden queries')} did not run "
            f"(e.g. {', '.join(map(shown, missing[:5]))}); update the baseline from a full, unfiltered run"
        )
    errored = [qid for qid, r in records.items() if r.status == "error"]
    if errored:
        raise BaselineError(
            f"not writing {path}: {counted(len(errored), 'query', 'queries')} errored "
            f"({', '.join(map(shown, errored[:5]))}); fix the retriever first"
        )
    leaked = [qid for qid, r in records.items() if r.leaks]
    if leaked:  # a baseline measured with another tenant's documents would hide the leak's numbers
        raise BaselineError(
            f"not writing {path}: {counted(len(leaked), 'query', 'queries')} returned documents outside their "
            f"scope ({', '.join(map(shown, leaked[:5]))}); fix the leak first"
        )
    if gold is not None and gold.missing and not allow_missing_gold:
        raise BaselineError(
            f"not writing {path}: "
            f"{counted(len(gold.missing), 'relevant gold id is', 'relevant gold ids are')} "
            f"not in the corpus ({gold.source}): {listed([m.text() for m in gold.missing])}; such a gold id "
            "can never be retrieved, so it would score 0 in the baseline forever. Fix the golden set, or pass "
            f"{allow_flag} to write it anyway (the baseline lists them in _meta.allowed_missing_gold)"
        )
    scored = {q.qid: records[q.qid] for q in golden if records[q.qid].status == "scored"}
    if not scored:
        raise BaselineError(
            f"not writing {path}: no query could be scored (none has a document judged "
            f"relevant at level {relevance_level}); a baseline must measure something"
        )
    per_query = {
        qid: {**(r.metrics or {}), "_judgments": golden[qid].judgments_digest(), "_top": list(r.ranking)}
        for qid, r in scored.items()
    }
    aggregate: dict[str, float] = mean_metrics((r.metrics or {} for r in scored.values()), metrics)
    no_answer = {q.qid: records[q.qid] for q in golden if records[q.qid].status == "unanswerable"}
    for qid, r in no_answer.items():  # false retrieval only: these questions have no other metric
        per_query[qid] = {FALSE_RETRIEVAL: float(r.false_retrieval or 0), "_judgments": golden[qid].judgments_digest()}
    if no_answer:
        aggregate[RATE] = false_retrieval_rate(float(r.false_retrieval or 0) for r in no_answer.values())  # type: ignore[assignment]
    described = meta()
    if gold is not None and gold.missing:
        described["allowed_missing_gold"] = gold.allowed()
    return Baseline(described, aggregate, per_query, str(path))


def write_baseline(path: str | Path, baseline: Baseline) -> None:
    """Write atomically and sealed: the old file stays whole until the new one is complete.

    A path that cannot be written (its folder is a file, read-only, /proc, a full
    disk) raises :class:`BaselineError` naming the path; the old file is untouched.
    """
    path = Path(path)
    try:
        atomic_write_json(path, baseline.to_dict())
    except OSError as exc:
        raise BaselineError(f"cannot write the baseline {path}: {write_problem(path, exc)}; "
                            "the previous file, if any, is untouched") from None


def reseal_baseline(path: str | Path) -> tuple[Baseline, list[str]]:
    """Seal a baseline edited on purpose; return it and what no longer matched its old seal.

    Each mean is recomputed from the entries (an edited entry moves its mean with it);
    the rest of the schema must hold (every metric in every entry, a judgments digest in
    each): a seal vouches for a consistent file, never for a broken one.
    """
    baseline, changed = prepare_reseal(path)
    write_baseline(path, baseline)
    return baseline, changed


def prepare_reseal(path: str | Path) -> tuple[Baseline, list[str]]:
    """What :func:`reseal_baseline` would seal (the means recomputed) and what no longer matched the
    old seal, without writing: a caller may check it (and add to its ``_meta``) first, then write it
    with :func:`write_baseline`."""
    data, name = _read(path)
    _check_schema(data, name, means=False)
    changed = seal_problems(data) if data["_meta"].get("format") is not None else \
        ["no seal yet (written by an older version)"]
    for metric in [*Baseline(data["_meta"], {}, {}).metrics, *([RATE] if RATE in data["aggregate"] else [])]:
        entry_key = FALSE_RETRIEVAL if metric == RATE else metric
        entries = [e for e in data["per_query"].values() if entry_key in e]
        if not entries:
            continue
        mean = round_metric(math.fsum(e[entry_key] for e in entries) / len(entries))
        if abs(mean - data["aggregate"][metric]) > MEAN_SLACK:
            changed.append(f"aggregate.{metric} recomputed from the entries: {data['aggregate'][metric]!r} -> {mean!r}")
            data["aggregate"][metric] = mean
    return Baseline(data["_meta"], data["aggregate"], data["per_query"], name), changed


# ---------------------------------------------------------------------- comparing


def fingerprint_mismatch(baseline_meta: Mapping[str, Any], config: MeasurementConfig, k: int | None = None,
                         judgments: str = "closed") -> list[str]:
    """Measurement-config fields (and ``k``, results asked per query, and how the golden set
    was judged) that differ between a baseline and this run.

    Golden-set changes are judged per query by the gate (changed judgments are
    refused; added and removed queries are reported), not here.
    """
    return measurement_mismatch(baseline_meta, {"measurement": measurement_dict(config, judgments), "k": k},
                                ("the baseline", "now"))


def measurement_dict(config: MeasurementConfig, judgments: str = "closed") -> dict[str, Any]:
    """The measurement fingerprint: the config, and ``judgments`` for a pooled golden set (a closed
    set writes no key, so baselines made before the key existed read as closed)."""
    data = config.to_dict()
    if judgments != "closed":
        data["judgments"] = judgments
    return data


def threshold_mismatch(baseline: Baseline, threshold: float | None) -> list[str]:
    """``rag_answer_threshold`` differs from the one the baseline's unanswerable questions were
    scored with: their false retrievals would not compare. A baseline without such questions
    measured nothing the threshold changes, so it never mismatches on it."""
    if not any(FALSE_RETRIEVAL in entry for entry in baseline.per_query.values()):
        return []
    before = baseline.meta.get("answer_threshold")
    if before == threshold:
        return []
    return [f"rag_answer_threshold: baseline {brief_repr(before)}, now {brief_repr(threshold)} (a false retrieval "
            "of a question marked answerable: false depends on it)"]


def measurement_mismatch(
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    names: tuple[str, str] = ("A", "B"),
    ignore: Collection[str] = (),
) -> list[str]:
    """Fields of two fingerprints (``_meta`` dicts) whose measurement config or ``k`` differ.

    One rule for the plugin (baseline against this run) and ``ragmetrics compare``
    (A against B): numbers measured differently must not be compared silently.
    ``names`` label the two sides in the messages; keys in ``ignore`` are not compared.
    """
    for side, meta in zip(names, (before, after)):
        if not isinstance(meta.get("measurement"), Mapping):
            return [f"measurement ({side} records no measurement config)"]
    # a fingerprint without "judgments" was made of a closed golden set (the only kind there was)
    recorded, now = ({"judgments": "closed", **m} for m in (before["measurement"], after["measurement"]))
    before_name, after_name = (n.removeprefix("the ") for n in names)
    diffs = []
    for key in sorted(set(now) | set(recorded)):
        if key not in ignore and recorded.get(key) != now.get(key):
            diffs.append(f"{key}: {before_name} {brief_repr(recorded.get(key))}, "
                         f"{after_name} {brief_repr(now.get(key))}")
    k_before, k_after = before.get("k"), after.get("k")
    if k_before is not None and k_after is not None and k_before != k_after:
        diffs.append(f"k (results asked per query): {before_name} {brief_repr(k_before)}, "
                     f"{after_name} {brief_repr(k_after)}")
    return diffs
