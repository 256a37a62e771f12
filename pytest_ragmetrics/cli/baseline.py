"""``ragmetrics baseline``: check a baseline file (and list the lowerings it records), or seal an edit
made to it on purpose; in a git checkout a reseal that lowers a gated value against the committed
version needs ``--reason``, which it records in ``_meta.lowerings``."""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path
from typing import Any

from pytest_ragmetrics.cli import decided
from pytest_ragmetrics.cli.argtypes import path_arg
from pytest_ragmetrics.errors import BaselineError, RagMetricsError, shown, visible
from pytest_ragmetrics.gate.baseline import (
    Baseline,
    load_baseline,
    parse_baseline,
    prepare_reseal,
    seal_problems,
    write_baseline,
)
from pytest_ragmetrics.gate.gitref import RefUnreadable, author_from_git, file_at_ref
from pytest_ragmetrics.gate.lowering import (
    entries_since,
    find_lowerings,
    gated_in_files,
    listed_lowerings,
    new_entry,
    recorded_lowerings,
    unexplained,
    utc_now,
)
from pytest_ragmetrics.report.lowering import lowerings_listing


def register(verbs: Any) -> None:
    parser = verbs.add_parser(
        "baseline", help="check a baseline file; --reseal seals an edit made on purpose",
        description="Check that a baseline is whole and matches its seal, and list the lowerings it records "
                    "(exit 0), or say what is wrong (exit 2). A baseline is sealed when it is measured; a hand "
                    "edit or a merge breaks the seal, and the gate refuses the file. --reseal seals the file as "
                    "it now is, after printing what changed since it was sealed (and, in a git checkout, against "
                    "HEAD). In a git checkout a reseal that lowers a gated value against the committed version "
                    "is refused (exit 1) unless --reason says why; the reason is recorded in _meta.lowerings. "
                    "The seal is a digest anyone can recompute: it catches accidents, not a deliberate lowering.")
    parser.set_defaults(command=run)
    parser.add_argument("file", metavar="FILE", type=path_arg, help="the baseline.json to check or seal")
    parser.add_argument("--reseal", action="store_true",
                        help="seal the file as it is now; the schema must still hold (each mean equal to "
                             "the mean of its entries, every metric in every entry)")
    parser.add_argument("--reason", metavar="TEXT",
                        help="with --reseal: why the edit lowers the baseline against the version committed at "
                             "HEAD; recorded in _meta.lowerings (without it such a reseal is refused)")


def run(args: argparse.Namespace) -> int:
    path = Path(args.file)
    reason = None
    if args.reason is not None:
        reason = visible(args.reason)
        if not reason:
            raise RagMetricsError("--reason was given an empty reason (an unset variable?); say in words why the "
                                  "baseline goes down: the reason is kept in the file for review")
        if not args.reseal:
            raise RagMetricsError("--reason records why a reseal lowers the baseline; it goes with --reseal")
    if not args.reseal:
        try:
            baseline = load_baseline(path)
        except BaselineError:
            _show_committed_diff(path)  # names the entries a seal cannot (added, removed), when git can
            raise
        print(f"{path}: sealed and whole: {len(baseline.per_query)} queries, "
              f"metrics {', '.join(baseline.metrics)}")
        print(lowerings_listing(recorded_lowerings(baseline.meta)))
        return 0
    committed = _committed_version(path)
    baseline, changed = prepare_reseal(path)
    if not changed:
        print(f"{path}: already matched its seal; nothing changed")
        if reason is not None:
            print("--reason was not needed: nothing was sealed, so the reason was not recorded.")
        return 0
    notes = _lowering_check(path, baseline, reason)
    if notes is None:
        return decided(args, 1)
    write_baseline(path, baseline)
    print(f"{path}: sealed. What no longer matched the old seal:")
    for line in changed:
        print(f"  - {line}")
    if committed is not None:
        diff = _diff(committed, baseline)
        print("Against the version in git HEAD:" if diff else "Identical in values to the version in git HEAD.")
        for line in diff:
            print(f"  {line}")
    for note in notes:
        print(note)
    return 0


def _lowering_check(path: Path, baseline: Baseline, reason: str | None) -> list[str] | None:
    """Compare what is about to be sealed with the version committed at HEAD: a gated value it lowers that
    no entry recorded since HEAD explains needs ``reason``, which is then added to ``_meta.lowerings``.
    Returns the lines to print after sealing, or None (after printing why) when the seal is refused."""
    try:
        ref = _last_sealed_commit(path)
        at = "HEAD" if ref == "HEAD" else f"{ref[:12]} (the last commit where it was sealed)"
        text = file_at_ref(path, ref)
        committed = parse_baseline(text, f"{path} at {ref}") if text is not None else None
        why = None if text is not None else "the file is not committed at HEAD"
    except RefUnreadable as exc:
        committed, why = None, f"not in a git checkout with a commit ({exc})"
    except BaselineError as exc:
        committed, why = None, f"the committed version cannot be read ({exc})"
    if committed is None:
        notes = [f"No lowering check was possible: {why}; nothing tells whether this seal lowers the baseline."]
        if reason is not None:
            notes.append("--reason was not recorded: without a committed version nothing says what it lowers.")
        return notes
    kept, now = list(committed.meta.get("lowerings") or []), list(baseline.meta.get("lowerings") or [])
    if now[:len(kept)] != kept:  # the reasons recorded are the baseline's history: an edit only adds to them
        gone = sum(1 for entry in kept if entry not in now)
        print(f"{path}: not sealed: this edit removes or rewrites {gone or 'some'} of the {len(kept)} reasons "
              f"recorded in _meta.lowerings at {at}. They are the baseline's history, kept where a reviewer sees "
              f"why each value went down: restore them (git show {ref[:12]}:{path} has them). The file is "
              "unchanged.")
        return None
    gated = gated_in_files(committed.meta, baseline.meta)  # neither file alone may loosen what counts
    lowered = unexplained(find_lowerings(committed, baseline, gated), entries_since(committed.meta, baseline.meta))
    if lowered and reason is None:
        print(f"{path}: not sealed: against the version committed at {at}, this edit lowers "
              f"{len(lowered)} gated value{'' if len(lowered) == 1 else 's'}:\n{listed_lowerings(lowered)}\n"
              "The seal is a digest anyone can recompute, so it cannot stand for a review: a lowering is sealed "
              "only with a written reason, kept in the file (_meta.lowerings). If the edit is meant, run this "
              'again with --reason "why it went down"; otherwise restore the file (git checkout HEAD -- '
              f"{path}). The file is unchanged.")
        return None
    if lowered:
        author = author_from_git(path.absolute().parent)
        baseline.meta["lowerings"] = [*(baseline.meta.get("lowerings") or []),
                                      new_entry(reason or "", lowered, utc_now(), author)]
        return [f"Lowered on purpose, recorded in _meta.lowerings (entry {len(baseline.meta['lowerings'])}): "
                f"\"{shown(reason or '')}\"" + (f" by {shown(author)}" if author else "")
                + f"\n{listed_lowerings(lowered)}"]
    if reason is not None:
        return ["--reason was not needed: against HEAD this seal lowers no gated value, so the reason was not "
                "recorded."]
    return []


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


def _last_sealed_commit(path: Path) -> str:
    """The newest commit whose version of the file is sealed and whole (HEAD when none is, or git cannot
    tell): an edit committed unsealed and resealed after is compared with the version before it, so
    committing a hand edit first does not make its lowering the value it is compared with."""
    try:
        done = subprocess.run(["git", "log", "--format=%H", "-n", "50", "--", f"./{path.name}"],
                              cwd=path.resolve().parent, capture_output=True, text=True, timeout=10,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return "HEAD"
    for commit in ["HEAD", *(done.stdout.split() if done.returncode == 0 else [])]:
        try:
            text = file_at_ref(path, commit)
            data = json.loads(text) if text is not None else None
            if isinstance(data, dict):
                parse_baseline(text or "", f"{path} at {commit}")
                if not seal_problems(data):
                    return commit
        except (RefUnreadable, BaselineError, ValueError):
            continue
    return "HEAD"


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
