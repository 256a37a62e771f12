"""The baseline's ratchet: the baseline in use against its version at a git ref (``--rag-baseline-ref``, or
a pull request's base branch), which the ``baseline-lowered`` gate judges (see
:mod:`pytest_ragmetrics.gate.lowering` for what a lowering is and what carries it).

A baseline moved in the change is followed to where it was; a ref given that git cannot read stops
the run; a defaulted one the clone lacks is named as not checked.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from pytest_ragmetrics.errors import BaselineError, RagMetricsError
from pytest_ragmetrics.gate.baseline import Baseline, parse_baseline
from pytest_ragmetrics.gate.gitref import RefUnreadable, file_at_ref, folder_of, ref_exists, run_git
from pytest_ragmetrics.gate.lowering import LOWERED_GATE, LoweredOutcome, judge_lowerings

__all__ = ["PULL_REQUEST_BASE", "RatchetBase", "ratchet_base"]


#: Where a ref came from when the pull request's base chose it.
PULL_REQUEST_BASE = "the pull request's base, GITHUB_BASE_REF"


@dataclass(frozen=True)
class RatchetBase:
    """What the ratchet compares the baseline in use with: the file at ``ref`` (``at_ref``; None when it
    did not exist there), or why there is nothing to compare with. ``ref`` None: not checked."""

    ref: str | None
    given_by: str
    at_ref: Baseline | None = None
    #: the file at ``ref`` exists but is not a readable baseline: the gate fails with this
    unreadable: str | None = None
    #: why the ratchet did not run (``ref`` None)
    skipped: str | None = None
    #: the baseline's path as messages name it (relative to the project)
    shown: str = ""
    #: where the baseline was at ``ref`` when the file in use was not there (it was moved)
    moved_from: str | None = None

    def header(self, path: str) -> str:
        """The report header's line."""
        if self.ref is None:
            return f"baseline ratchet: not checked: {self.skipped}"
        if self.unreadable is not None:
            state = f"the file there cannot be read (gate {LOWERED_GATE} fails)"
        elif self.at_ref is None:
            state = f"{path} is new there"
        elif self.moved_from is not None:
            state = (f"{path} was {self.moved_from} there; a gated value lower than there without a recorded reason "
                     f"fails gate {LOWERED_GATE}")
        else:
            state = f"a gated value lower than there without a recorded reason fails gate {LOWERED_GATE}"
        return f"baseline ratchet: {path} compared with {self.ref} ({self.given_by}): {state}"

    def judge(self, current: Baseline | None, gated: Iterable[str], path: str) -> LoweredOutcome:
        ref = self.ref or "?"
        if self.unreadable is not None:
            return LoweredOutcome(False, f"the baseline at {ref} cannot be read, so no lowering can be told: "
                                         f"{self.unreadable}")
        return judge_lowerings(self.at_ref, current, gated, ref, path)


def ratchet_base(path: Path, ref: str | None, given_by: str, shown_path: str,
                 environ: Mapping[str, str] | None = None) -> RatchetBase | None:
    """The baseline at ``ref`` (``given_by`` names the option that set it), or on a GitHub Actions pull
    request without one, at ``origin/$GITHUB_BASE_REF`` when this clone has it; None when the ratchet is
    off. A ref given that git cannot read raises :class:`RagMetricsError` naming it and git's message;
    a defaulted one that is missing is said in :meth:`RatchetBase.header` as not checked."""
    env = os.environ if environ is None else environ
    if ref is None:
        base = env.get("GITHUB_BASE_REF", "").strip()
        if env.get("GITHUB_EVENT_NAME") not in ("pull_request", "pull_request_target") or not base:
            return None
        ref, given_by = f"origin/{base}", PULL_REQUEST_BASE
        if not ref_exists(path, ref):
            return RatchetBase(None, given_by, shown=shown_path, skipped=(
                f"{ref} ({given_by}) is not in this clone, so the baseline was not compared with the base "
                "branch's; actions/checkout fetches one commit by default: give it fetch-depth: 0 (or run "
                f"`git fetch origin {base}`) to compare, or pass --rag-baseline-ref to make a missing base fail"))
    try:
        text = file_at_ref(path, ref)
    except RefUnreadable as exc:
        raise RagMetricsError(f"{given_by} {ref!r}: git cannot read it from {folder_of(path)}: {exc}") from None
    if text is None:  # not there: a baseline of the same golden set elsewhere at ref is this one, moved
        moved = _moved_baseline(path, ref)
        if isinstance(moved, str):
            return RatchetBase(ref, given_by, unreadable=moved, shown=shown_path)
        if moved is not None:
            return RatchetBase(ref, given_by, moved[1], shown=shown_path, moved_from=moved[0])
        return RatchetBase(ref, given_by, shown=shown_path)
    try:
        return RatchetBase(ref, given_by, parse_baseline(text, f"{shown_path} at {ref}"), shown=shown_path)
    except BaselineError as exc:
        return RatchetBase(ref, given_by, unreadable=str(exc), shown=shown_path)


def _golden_of(meta: Any) -> tuple[Any, Any]:
    golden = meta.get("golden") if isinstance(meta, Mapping) else None
    return (golden.get("source"), golden.get("sha256")) if isinstance(golden, Mapping) else (None, None)


def _moved_baseline(path: Path, ref: str) -> tuple[str, Baseline] | str | None:
    """The baseline at ``ref`` that the file in use, absent there, was moved from: of the baselines there,
    the one sharing the most queries with it (by id, or by their text and judgments, ``_judgments``), a
    recorded golden set of the same source or digest breaking ties. None when ``ref`` holds no baseline
    sharing a query (the baseline is new); a reason, for the gate to fail with, when two are as likely."""
    try:
        current = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(current, dict) or not isinstance(current.get("per_query"), dict):
        return None
    ids = set(current["per_query"])
    digests = {e.get("_judgments") for e in current["per_query"].values() if isinstance(e, dict)} - {None}
    source, digest = _golden_of(current.get("_meta"))
    folder = folder_of(path)
    root = run_git(folder, "rev-parse", "--show-toplevel")
    if root is None or root.returncode:
        return None
    top = Path(root.stdout.strip())
    found = run_git(top, "grep", "-l", "--fixed-strings", '"per_query"', ref, "--")
    if found is None or found.returncode not in (0, 1):
        return None
    scored: list[tuple[tuple[int, int], str, Baseline]] = []
    for line in found.stdout.splitlines():
        rel = line.split(":", 1)[1] if line.startswith(f"{ref}:") else line
        blob = run_git(top, "cat-file", "blob", f"{ref}:{rel}")
        if blob is None or blob.returncode:
            continue
        try:
            candidate = parse_baseline(blob.stdout, f"{rel} at {ref}")
        except BaselineError:
            continue
        theirs = {e.get("_judgments") for e in candidate.per_query.values()} - {None}
        shared = len(ids & set(candidate.per_query)) + len(digests & theirs)
        their_source, their_digest = _golden_of(candidate.meta)
        same_set = int((source is not None and their_source == source)
                       or (digest is not None and their_digest == digest))
        if shared or same_set:
            scored.append(((shared, same_set), rel, candidate))
    if not scored:
        return None
    scored.sort(key=lambda c: c[0], reverse=True)
    if len(scored) > 1 and scored[0][0] == scored[1][0]:
        return (f"the file is not at {ref}, and the baselines there that share its queries "
                f"({', '.join(rel for _, rel, _ in scored[:5])}) are equally likely to be where it was, so which one "
                "it was moved from cannot be told; keep the baseline where it was in the change that lowers it, or "
                "move it in a change of its own")
    return scored[0][1], scored[0][2]
