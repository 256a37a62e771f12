"""``ragmetrics baseline``: check a baseline file, or seal an edit made to it on purpose."""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path
from typing import Any

from pytest_ragmetrics.cli.argtypes import path_arg
from pytest_ragmetrics.errors import BaselineError
from pytest_ragmetrics.gate.baseline import Baseline, load_baseline, reseal_baseline


def register(verbs: Any) -> None:
    parser = verbs.add_parser(
        "baseline", help="check a baseline file; --reseal seals an edit made on purpose",
        description="Check that a baseline is whole and matches its seal (exit 0), or say what is wrong "
                    "(exit 2). A baseline is sealed when it is measured; a hand edit or a merge breaks the "
                    "seal, and the gate refuses the file. --reseal seals the file as it now is, after "
                    "printing what changed since it was sealed (and, in a git checkout, against HEAD).")
    parser.set_defaults(command=run)
    parser.add_argument("file", metavar="FILE", type=path_arg, help="the baseline.json to check or seal")
    parser.add_argument("--reseal", action="store_true",
                        help="seal the file as it is now; the schema must still hold (each mean equal to "
                             "the mean of its entries, every metric in every entry)")


def run(args: argparse.Namespace) -> int:
    path = Path(args.file)
    if not args.reseal:
        try:
            baseline = load_baseline(path)
        except BaselineError:
            _show_committed_diff(path)  # names the entries a seal cannot (added, removed), when git can
            raise
        print(f"{path}: sealed and whole: {len(baseline.per_query)} queries, "
              f"metrics {', '.join(baseline.metrics)}")
        return 0
    committed = _committed_version(path)
    baseline, changed = reseal_baseline(path)
    if not changed:
        print(f"{path}: already matched its seal; nothing changed")
        return 0
    print(f"{path}: sealed. What no longer matched the old seal:")
    for line in changed:
        print(f"  - {line}")
    if committed is not None:
        diff = _diff(committed, baseline)
        print("Against the version in git HEAD:" if diff else "Identical in values to the version in git HEAD.")
        for line in diff:
            print(f"  {line}")
    return 0


def _show_committed_diff(path: Path) -> None:
    committed = _committed_version(path)
    if committed is None:
        return
    try:
        now = load_baseline(path, sealed=False)
    except BaselineError:
        return
    diff = _diff(committed, now)
    if diff:
        print("Against the version in git HEAD:")
        for line in diff:
            print(f"  {line}")


def _committed_version(path: Path) -> dict[str, Any] | None:
    """The file as committed at HEAD, when it is tracked in a git checkout (else None)."""
    try:
        done = subprocess.run(["git", "show", f"HEAD:./{path.name}"], cwd=path.resolve().parent,
                              capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL)
        data = json.loads(done.stdout) if done.returncode == 0 else None
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _diff(committed: dict[str, Any], now: Baseline) -> list[str]:
    """Metric values that differ from the committed file's: what the new seal vouches for."""
    lines = []
    before_agg = agg if isinstance(agg := committed.get("aggregate"), dict) else {}
    for metric, value in sorted(now.aggregate.items()):
        if before_agg.get(metric) != value:
            lines.append(f"aggregate.{metric}: {before_agg.get(metric)!r} -> {value!r}")
    before_q = per_query if isinstance(per_query := committed.get("per_query"), dict) else {}
    for qid in sorted(set(before_q) | set(now.per_query)):
        old = before_q.get(qid)
        if qid not in now.per_query:
            lines.append(f"per_query.{qid}: removed")
        elif not isinstance(old, dict):
            lines.append(f"per_query.{qid}: added")
        else:
            for key, value in sorted(now.per_query[qid].items()):
                if key != "_seal" and old.get(key) != value:
                    lines.append(f"per_query.{qid}.{key}: {old.get(key)!r} -> {value!r}")
    return lines


__all__ = ["register", "run"]
