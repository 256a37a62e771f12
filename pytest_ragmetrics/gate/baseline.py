"""baseline.json: read, validate, write, and the check that it was measured as this run is.

The baseline is ``{"_meta": {...}, "aggregate": {metric: value},
"per_query": {qid: {metric: value, "_judgments": digest}}}``; keys starting with
``_`` are metadata. ``_meta`` is the fingerprint of what was measured. Writes go
through :mod:`pytest_ragmetrics.files` (atomic, sorted keys) with floats rounded
to 10 decimals, so that a pull request's diff reads well.
Only :func:`write_baseline` writes, and only the plugin's ``--rag-update-baseline``
and the CLI call it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Collection, Mapping

from pytest_ragmetrics.errors import BaselineError, brief_repr
from pytest_ragmetrics.files import atomic_write_json, loads_json, write_problem
from pytest_ragmetrics.measures import MeasurementConfig

__all__ = [
    "Baseline",
    "load_baseline",
    "write_baseline",
    "fingerprint_mismatch",
    "measurement_mismatch",
    "round_metric",
    "check_metric_value",
]

#: Digits kept in files; comparisons allow this much slack (see ``gate.EPS``).
DIGITS = 10


def round_metric(value: float) -> float:
    return round(float(value), DIGITS)


@dataclass
class Baseline:
    meta: dict[str, Any]
    aggregate: dict[str, float]
    per_query: dict[str, dict[str, Any]]
    path: str = ""

    def metrics_of(self, qid: str) -> dict[str, float]:
        return {k: v for k, v in self.per_query.get(qid, {}).items() if not k.startswith("_")}

    def to_dict(self) -> dict[str, Any]:
        return {
            "_meta": self.meta,
            "aggregate": {k: round_metric(v) for k, v in self.aggregate.items()},
            "per_query": {
                qid: {k: (round_metric(v) if not k.startswith("_") else v) for k, v in entry.items()}
                for qid, entry in self.per_query.items()
            },
        }


def _reject_constant(token: str) -> float:
    raise ValueError(f"{token} is not a valid metric value")


def load_baseline(path: str | Path) -> Baseline:
    """Read and validate a baseline; every problem names the file and the key."""
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
    for key in ("_meta", "aggregate", "per_query"):
        if key not in data:
            raise BaselineError(f"{name}: missing key {key!r}")
        if not isinstance(data[key], dict):
            raise BaselineError(f"{name}: {key!r} must be an object")
    for metric, value in data["aggregate"].items():
        check_metric_value(name, f"aggregate.{metric}", value)
    for qid, entry in data["per_query"].items():
        if not isinstance(entry, dict):
            raise BaselineError(f"{name}: per_query.{qid} must be an object of metric values")
        for metric, value in entry.items():
            if not metric.startswith("_"):
                check_metric_value(name, f"per_query.{qid}.{metric}", value)
    return Baseline(data["_meta"], data["aggregate"], data["per_query"], name)


def check_metric_value(name: str, key: str, value: Any,
                       error_type: Callable[[str], Exception] = BaselineError) -> None:
    """A metric value as files hold it: a finite number in [0, 1], not a bool; else
    ``error_type`` with the file (``name``) and the key."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise error_type(f"{name}: {key} must be a finite number, got {brief_repr(value)}")
    if not 0.0 <= value <= 1.0:
        raise error_type(f"{name}: {key} = {value} is outside [0, 1]")


def write_baseline(path: str | Path, baseline: Baseline) -> None:
    """Write atomically: the old file stays whole until the new one is complete.

    A path that cannot be written (its folder is a file, read-only, /proc, a full
    disk) raises :class:`BaselineError` naming the path; the old file is untouched.
    """
    path = Path(path)
    try:
        atomic_write_json(path, baseline.to_dict())
    except OSError as exc:
        raise BaselineError(f"cannot write the baseline {path}: {write_problem(path, exc)}; "
                            "the previous file, if any, is untouched") from None


def fingerprint_mismatch(baseline_meta: Mapping[str, Any], config: MeasurementConfig, k: int | None = None) -> list[str]:
    """Measurement-config fields (and ``k``, results asked per query) that differ
    between a baseline and this run.

    Golden-set changes are judged per query by the gate (changed judgments are
    refused; added and removed queries are reported), not here.
    """
    return measurement_mismatch(baseline_meta, {"measurement": config.to_dict(), "k": k}, ("the baseline", "now"))


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
    recorded, now = before["measurement"], after["measurement"]
    before_name, after_name = (n.removeprefix("the ") for n in names)
    diffs = []
    for key in sorted(set(now) | set(recorded)):
        if key not in ignore and recorded.get(key) != now.get(key):
            diffs.append(f"{key}: {before_name} {brief_repr(recorded.get(key))}, {after_name} {brief_repr(now.get(key))}")
    k_before, k_after = before.get("k"), after.get("k")
    if k_before is not None and k_after is not None and k_before != k_after:
        diffs.append(f"k (results asked per query): {before_name} {brief_repr(k_before)}, {after_name} {brief_repr(k_after)}")
    return diffs
