"""baseline.json and thresholds.json: read, validate, write.

The baseline is ``{"_meta": {...}, "aggregate": {metric: value},
"per_query": {qid: {metric: value, "_judgments": digest}}}``; keys starting with
``_`` are metadata. ``_meta`` is the fingerprint of what was measured. Writes are
atomic (a temp file in the same folder, then ``os.replace``) and stable (sorted
keys, floats rounded to 10 decimals) so that a pull request's diff reads well.
Only :func:`write_baseline` writes, and only the plugin's ``--rag-update-baseline``
and the CLI call it.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Collection, Mapping

from pytest_ragmetrics.errors import BaselineError, ThresholdsError
from pytest_ragmetrics.golden import brief_repr, loads_json
from pytest_ragmetrics.measures import MeasurementConfig

__all__ = [
    "Baseline",
    "Thresholds",
    "load_baseline",
    "write_baseline",
    "load_thresholds",
    "fingerprint_mismatch",
    "measurement_mismatch",
    "round_metric",
    "dumps_stable",
    "atomic_write_text",
    "atomic_write_json",
]

#: Digits kept in files; comparisons allow this much slack (see ``gate.EPS``).
DIGITS = 10


def round_metric(value: float) -> float:
    return round(float(value), DIGITS)


_STABLE: dict[str, Any] = {"indent": 2, "sort_keys": True, "ensure_ascii": False, "allow_nan": False}
_WRITE_BLOCK = 1 << 16  # characters per write of atomic_write_json


def dumps_stable(data: Any) -> str:
    """JSON with sorted keys and two-space indent, ending in a newline."""
    return json.dumps(data, **_STABLE) + "\n"


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
        _check_value(name, f"aggregate.{metric}", value)
    for qid, entry in data["per_query"].items():
        if not isinstance(entry, dict):
            raise BaselineError(f"{name}: per_query.{qid} must be an object of metric values")
        for metric, value in entry.items():
            if not metric.startswith("_"):
                _check_value(name, f"per_query.{qid}.{metric}", value)
    return Baseline(data["_meta"], data["aggregate"], data["per_query"], name)


def _check_value(name: str, key: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise BaselineError(f"{name}: {key} must be a finite number, got {brief_repr(value)}")
    if not 0.0 <= value <= 1.0:
        raise BaselineError(f"{name}: {key} = {value} is outside [0, 1]")


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


def write_problem(path: Path, exc: OSError) -> str:
    """Why ``path`` could not be written, in words (``File exists`` would mislead
    when a folder on the way is a file)."""
    for folder in path.parents:
        if folder.exists() or folder.is_symlink():
            if not folder.is_dir():
                return f"{folder} is a file, not a folder"
            break
    where = f" ({exc.filename})" if exc.filename and str(exc.filename) != str(path) else ""
    return f"{exc.strerror or exc}{where}"


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to a temp file in ``path``'s folder, fsync it, then rename it over ``path``.

    Readers (and a process killed at any moment) see the old file or the new one,
    never a mix. A kill between creating and renaming the temp file can leave a
    hidden ``.<name>.*.tmp`` behind; the target itself is never partial.
    """
    _atomic_write(path, lambda fh: fh.write(text))


def atomic_write_json(path: Path, data: Any) -> None:
    """Write ``dumps_stable(data)`` atomically, encoding into the temp file 64 KB at a time.

    The same bytes as ``atomic_write_text(path, dumps_stable(data))``, without
    holding the whole text: with ``indent`` json builds a list of small chunks
    before joining them, about 3 KB a query at the peak of a 100,000-query run
    artifact (benchmarks/bench_scale_100k.py).
    """
    def write(fh: Any) -> None:
        parts: list[str] = []
        size = 0
        for chunk in json.JSONEncoder(**_STABLE).iterencode(data):
            parts.append(chunk)
            size += len(chunk)
            if size >= _WRITE_BLOCK:
                fh.write("".join(parts))
                parts, size = [], 0
        parts.append("\n")
        fh.write("".join(parts))

    _atomic_write(path, write)


def _atomic_write(path: Path, write: Any) -> None:
    """Run ``write(fh)`` on a temp file in ``path``'s folder, fsync it, rename it over
    ``path``, then fsync the folder so the rename itself survives a power cut.

    The file gets the mode a plain ``open(path, "w")`` would give it (the old
    file's mode, or 0666 less the umask), not the temp file's private 0600.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = _mode_for(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            os.fchmod(fh.fileno(), mode)
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_folder(path.parent)


def _mode_for(path: Path) -> int:
    """The permission bits an ordinary write of ``path`` would leave."""
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except OSError:
        return 0o666 & ~_umask()


def _umask() -> int:
    """The process umask, read without changing it where the system allows
    (``os.umask`` can only be read by setting it, which races with other threads)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _fsync_folder(folder: Path) -> None:
    """Make a rename in ``folder`` durable; a system that cannot fsync a folder is skipped."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


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


# ----------------------------------------------------------------------- thresholds

_SUFFIXES = ("_query_tolerance", "_tolerance", "_min")
_SCALARS = {"max_regressed_queries", "worst_n", "fail_on_regression"}


@dataclass
class Thresholds:
    """Tolerances as read from thresholds.json, with the documented defaults.

    Defaults when a key is absent: every ``recall@k`` allows no drop, neither in
    the aggregate nor for a single query; other metrics are reported, not gated;
    no cap on the number of regressed queries; ``worst_n`` 10; failures fail.
    """

    tolerance: dict[str, float] = field(default_factory=dict)
    minimum: dict[str, float] = field(default_factory=dict)
    query_tolerance: dict[str, float] = field(default_factory=dict)
    max_regressed_queries: int | None = None
    worst_n: int = 10
    fail_on_regression: bool = True
    path: str | None = None

    @classmethod
    def defaults(cls, config: MeasurementConfig) -> "Thresholds":
        recall = {str(m): 0.0 for m in config.measures if m.name == "recall"}
        return cls(tolerance=dict(recall), query_tolerance=dict(recall))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for metric, value in self.tolerance.items():
            out[f"{metric}_tolerance"] = value
        for metric, value in self.minimum.items():
            out[f"{metric}_min"] = value
        for metric, value in self.query_tolerance.items():
            out[f"{metric}_query_tolerance"] = value
        out["max_regressed_queries"] = self.max_regressed_queries
        out["worst_n"] = self.worst_n
        out["fail_on_regression"] = self.fail_on_regression
        return out


def load_thresholds(path: str | Path | None, config: MeasurementConfig, *, required: bool = True) -> Thresholds:
    """Read thresholds.json over the defaults.

    A path the user gave (``required``) must exist: falling back to the defaults
    would run fewer gates than asked for without a word. Only the plugin's default
    path, ``baselines/thresholds.json``, may be absent (``required=False``), and
    then the defaults apply. Unknown keys, metrics that are not measured, negative
    tolerances, values of the wrong type and repeated keys are errors naming the
    file and the key.
    """
    result = Thresholds.defaults(config)
    if path is None:
        return result
    path = Path(path)
    name = str(path)
    if not path.exists():
        if required:
            raise ThresholdsError(f"{name}: thresholds file not found; fix the path, create the file, "
                                  "or leave the option unset to gate with the defaults")
        return result
    result.path = name
    try:
        data = loads_json(path.read_text(encoding="utf-8-sig"), parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise ThresholdsError(f"{name}, line {exc.lineno}: not valid JSON ({exc.msg})") from None
    except RecursionError:
        raise ThresholdsError(f"{name}: not a thresholds file (JSON nested too deeply)") from None
    except (ValueError, OSError) as exc:
        raise ThresholdsError(f"{name}: {exc}") from None
    if not isinstance(data, dict):
        raise ThresholdsError(f"{name}: expected a JSON object of flat keys like \"recall@10_tolerance\"")
    measured = set(config.metric_names)
    for key, value in data.items():
        if key.startswith("_"):
            continue
        if key in _SCALARS:
            _set_scalar(result, name, key, value)
            continue
        for suffix in _SUFFIXES:
            if key.endswith(suffix):
                metric = _canonical_metric(key[: -len(suffix)])
                if metric not in measured:
                    raise ThresholdsError(
                        f"{name}: key {key!r} names metric {key[: -len(suffix)]!r}, which is not measured "
                        f"(measured: {', '.join(config.metric_names)}); measure it or remove the key"
                    )
                if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                    raise ThresholdsError(f"{name}: {key!r} must be a number, got {brief_repr(value)}")
                if suffix != "_min" and value < 0:
                    raise ThresholdsError(f"{name}: {key!r} is {value}; a tolerance is an allowed drop, so it must be >= 0")
                if suffix == "_min" and not 0 <= value <= 1:
                    raise ThresholdsError(f"{name}: {key!r} is {value}; a floor must lie in [0, 1]")
                target = {"_tolerance": result.tolerance, "_min": result.minimum,
                          "_query_tolerance": result.query_tolerance}[suffix]
                target[metric] = float(value)
                break
        else:
            raise ThresholdsError(
                f"{name}: unknown key {key!r}; expected <metric>_tolerance, <metric>_min, "
                "<metric>_query_tolerance, max_regressed_queries, worst_n, fail_on_regression or _comment"
            )
    return result


def _canonical_metric(text: str) -> str:
    from pytest_ragmetrics.measures import parse_measure
    from pytest_ragmetrics.errors import MeasureError

    try:
        return str(parse_measure(text))
    except MeasureError:
        return text


def _set_scalar(result: Thresholds, name: str, key: str, value: Any) -> None:
    if key == "fail_on_regression":
        if not isinstance(value, bool):
            raise ThresholdsError(f"{name}: 'fail_on_regression' must be true or false, got {brief_repr(value)}")
        result.fail_on_regression = value
        return
    if value is None and key == "max_regressed_queries":
        result.max_regressed_queries = None
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ThresholdsError(f"{name}: {key!r} must be a non-negative integer, got {brief_repr(value)}")
    setattr(result, key, value)


_GIT_HEAD = re.compile(r"^[0-9a-f]{40}$")


def git_commit(start: Path) -> str | None:
    """The checked-out commit, recorded in baselines and run artifacts.

    Asks ``git rev-parse HEAD`` (it knows worktrees, packed refs and every other
    layout); where git is absent, slow or fails, reads ``.git`` directly.
    """
    try:
        done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=start, capture_output=True, text=True,
                              timeout=5, stdin=subprocess.DEVNULL)
        head = done.stdout.strip()
        if done.returncode == 0 and _GIT_HEAD.match(head):
            return head
    except (OSError, subprocess.SubprocessError):
        pass
    return _git_commit_from_files(start)


def _git_commit_from_files(start: Path) -> str | None:
    """The commit read from ``.git`` without running git. In a worktree ``.git`` is a
    file naming the worktree's git folder, whose ``commondir`` holds the branches."""
    for folder in [start, *start.parents]:
        git = folder / ".git"
        if git.is_file():  # a worktree: "gitdir: <path>"
            try:
                git = (folder / git.read_text().split(":", 1)[1].strip()).resolve()
            except (OSError, IndexError):
                return None
        if git.is_dir():
            try:
                common = git / (git / "commondir").read_text().strip() if (git / "commondir").is_file() else git
                head = (git / "HEAD").read_text().strip()
                if head.startswith("ref: "):
                    ref = head[5:]
                    head = ""
                    for where in dict.fromkeys([git, common]):
                        if (where / ref).is_file():
                            head = (where / ref).read_text().strip()
                            break
                        packed = where / "packed-refs"
                        if packed.is_file():
                            for line in packed.read_text().splitlines():
                                if line.endswith(" " + ref):
                                    head = line.split()[0]
                        if head:
                            break
                return head if _GIT_HEAD.match(head) else None
            except OSError:
                return None
    return None
