"""Sharding a run across machines (``--rag-shard I/N``) and the shard section of its artifact.

A shard runs a stable share of the questions: each query goes to the shard its place in a
hash order gives it, so the same query id always lands in the same shard for a given N,
whatever the order of the golden file, the machine or Python's hash seed. The questions are
dealt by stratum, a stratum being a query's first tag (as for ``rag_smoke = sample:N``; the
untagged form one stratum): within each stratum, sorted by the sha256 of their ids, they are
dealt round-robin, and the deal goes on from one stratum to the next, so every shard gets
⌊n/N⌋ or ⌈n/N⌉ of each stratum and of the whole set.

A shard cannot judge the aggregate of the whole set from its part, so its verdict judges its
queries one by one (a query that fell beyond its tolerance or errored fails the shard) and
defers every gate to ``ragmetrics merge``, which judges the merged shards as one run.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from typing import Any, Mapping

from pytest_ragmetrics.errors import RagMetricsError, brief_repr
from pytest_ragmetrics.gate.verdict import Verdict
from pytest_ragmetrics.golden import GoldenSet

__all__ = ["parse_shard", "select_shard", "shard_of", "defer_gates", "check_shard_section", "MERGE_COMMAND",
           "JUDGED_BY_MERGE", "CI_RUN_VARIABLES", "ci_run_id", "CI_ATTEMPT_VARIABLES", "ci_attempt",
           "queries_digest"]

#: How a shard's messages name the step that judges the gates.
MERGE_COMMAND = "ragmetrics merge"

#: Why a shard's gate items are skipped, never passed: a shard holds part of the set.
JUDGED_BY_MERGE = f"judged by `{MERGE_COMMAND}` over every shard"

#: a record's statuses, as the artifact's per_query holds them
_STATUSES = ("scored", "unscorable", "error", "unanswerable")

#: The CI variables a run's identity (``_meta.run_id``) is taken from when ``--rag-run-id`` is not
#: given, first set wins: every job of one pipeline run shares them, the next run has others.
#: GitHub's run attempt is left out on purpose: re-running a failed shard keeps the run id, so its
#: artifact merges with the passing shards' of the first attempt.
CI_RUN_VARIABLES = (("GITHUB_RUN_ID", "github"), ("CI_PIPELINE_ID", "gitlab"), ("BUILDKITE_BUILD_ID", "buildkite"),
                    ("CIRCLE_WORKFLOW_ID", "circleci"), ("BUILD_TAG", "jenkins"))

#: what a record and its per_query entry both hold, with the value an absent key stands for
_RECORDED: tuple[tuple[str, Any], ...] = (("metrics", None), ("ranking", []), ("error", None), ("n_docs", None),
                                          ("scores", None), ("parent_level", None), ("leaks", None))

#: The CI variables a run's attempt (``_meta.attempt``, 1 for the first) is taken from when
#: ``--rag-attempt`` is not given, first set wins, each with what its value adds to give the attempt:
#: GitHub's re-run of failed jobs keeps GITHUB_RUN_ID and raises GITHUB_RUN_ATTEMPT; Buildkite's retry
#: of a job keeps BUILDKITE_BUILD_ID and counts BUILDKITE_RETRY_COUNT from 0. GitLab, CircleCI and Jenkins
#: name no attempt of a retried job (CircleCI's and Jenkins' re-runs are new runs, with other run ids).
CI_ATTEMPT_VARIABLES = (("GITHUB_RUN_ATTEMPT", 0), ("BUILDKITE_RETRY_COUNT", 1))

_SPEC = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*")


def parse_shard(text: str) -> tuple[int, int]:
    """``"2/3"`` -> ``(2, 3)``; anything else (``3/2``, ``0/4``, ``1/0``, ``a/b``) is a
    :class:`RagMetricsError` that says what a shard spec is."""
    match = _SPEC.fullmatch(str(text))
    index, count = (int(match.group(1)), int(match.group(2))) if match else (None, None)
    if index is None or count is None or count < 1 or not 1 <= index <= count:
        why = ("N must be at least 1" if count == 0 else
               f"I is 1-based: 1..{count}" if count is not None and count >= 1 else "I and N are whole numbers")
        raise RagMetricsError(f"--rag-shard must be I/N, this machine's shard I of N (1 <= I <= N), got "
                              f"{brief_repr(text)}: {why}")
    return index, count


def ci_run_id(environ: Mapping[str, str]) -> str | None:
    """The run's identity from the CI's own variables (:data:`CI_RUN_VARIABLES`), e.g.
    ``github:1234567``; None outside a known CI."""
    for name, ci in CI_RUN_VARIABLES:
        value = (environ.get(name) or "").strip()
        if value:
            return f"{ci}:{value}"
    return None


def ci_attempt(environ: Mapping[str, str]) -> int | None:
    """The run's attempt from the CI's own variables (:data:`CI_ATTEMPT_VARIABLES`), 1 for the first;
    None outside a CI that names one. A value that is not a whole number is a :class:`RagMetricsError`:
    an attempt misread would let a retried shard pass for a first one."""
    for name, offset in CI_ATTEMPT_VARIABLES:
        value = (environ.get(name) or "").strip()
        if not value:
            continue
        attempt = int(value) + offset if value.isascii() and value.isdigit() else 0
        if attempt < 1:
            raise RagMetricsError(f"{name} is {brief_repr(environ.get(name))}, not a run attempt (a whole number"
                                  f"{' >= 1' if not offset else ' >= 0'}); pass --rag-attempt N to say which "
                                  "attempt of the run this is")
        return attempt
    return None


def queries_digest(qids: Any) -> str:
    """The sha256 of a set of query ids (sorted, one per line): which queries a subset selected."""
    return hashlib.sha256("\n".join(sorted(qids)).encode("utf-8", "surrogatepass")).hexdigest()


def _digest(qid: str) -> str:
    return hashlib.sha256(qid.encode("utf-8", "surrogatepass")).hexdigest()


def shard_of(golden: GoldenSet, count: int) -> dict[str, int]:
    """Query id -> its shard (1..count): strata by first tag, hash order within each, dealt round-robin
    with the deal carried from one stratum to the next."""
    strata: dict[str, list[str]] = {}
    for q in golden:
        strata.setdefault(q.tags[0] if q.tags else "", []).append(q.qid)
    placed: dict[str, int] = {}
    deal = 0
    for name in sorted(strata):
        for qid in sorted(strata[name], key=lambda q: (_digest(q), q)):
            placed[qid] = deal % count + 1
            deal += 1
    return placed


def select_shard(golden: GoldenSet, index: int, count: int) -> GoldenSet:
    """The queries of ``golden`` that shard ``index`` of ``count`` runs, in the golden set's order."""
    placed = shard_of(golden, count)
    return golden.subset([q.qid for q in golden if placed[q.qid] == index])


def defer_gates(verdict: Verdict, index: int, count: int) -> Verdict:
    """A shard's verdict: every gate passes as deferred to ``ragmetrics merge``, so the shard fails
    only on its own queries (one that fell beyond its per-query tolerance, or errored)."""
    why = f"deferred to `{MERGE_COMMAND}`: shard {index}/{count} holds part of the set"
    return dataclasses.replace(verdict, gates=[dataclasses.replace(g, passed=True, message=why, queries=[])
                                               for g in verdict.gates],
                               deferred=[g.name for g in verdict.gates], moved=[], moved_metrics=[])


def _json(value: Any) -> str:
    """A value as canonical JSON, so 1 and 1.0 or a tuple and a list compare as the file holds them."""
    return json.dumps(value or None, sort_keys=True)


def _fail(name: str, where: str, problem: str) -> RagMetricsError:
    from pytest_ragmetrics.gate.artifact import ArtifactError

    return ArtifactError(name, where, problem)


def check_shard_section(shard: Any, per_query: Mapping[str, Any], name: str) -> None:
    """The ``shard`` section of a shard's artifact (see docs/run-artifact.md): which shard, the
    queries it was dealt, and the full record of each that ran, which ``ragmetrics merge`` judges."""
    if not isinstance(shard, dict):
        raise _fail(name, "shard", f"is {brief_repr(shard)}; expected an object with index, count, queries "
                                   "and records")
    index, count = shard.get("index"), shard.get("count")
    for key, value in (("count", count), ("index", index)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise _fail(name, f"shard.{key}", f"is {brief_repr(value)}; expected a whole number >= 1")
    if index > count:  # type: ignore[operator]
        raise _fail(name, "shard.index", f"is {index}, above shard.count {count} (I is 1-based: 1..N)")
    of = shard.get("of")
    if isinstance(of, bool) or not isinstance(of, int) or of < 0:
        raise _fail(name, "shard.of", f"is {brief_repr(of)}; expected the number of queries of the whole set")
    queries = shard.get("queries")
    if not isinstance(queries, list) or not all(isinstance(q, str) for q in queries):
        raise _fail(name, "shard.queries", f"is {brief_repr(queries)}; expected the list of query ids this "
                                           "shard was dealt")
    if len(set(queries)) != len(queries):
        raise _fail(name, "shard.queries", "names a query twice")
    if len(queries) > of:
        raise _fail(name, "shard.queries", f"holds {len(queries)} queries, more than the set's {of} (shard.of)")
    baseline = shard.get("baseline")
    if not isinstance(baseline, str) or not baseline:
        raise _fail(name, "shard.baseline", f"is {brief_repr(baseline)}; expected the baseline's path")
    gold = shard.get("gold", {})
    if not isinstance(gold, dict):
        raise _fail(name, "shard.gold", f"is {brief_repr(gold)}; expected an object")
    records = shard.get("records")
    if not isinstance(records, dict):
        raise _fail(name, "shard.records", f"is {brief_repr(records)}; expected query id -> its record")
    dealt = set(queries)
    for qid, record in records.items():
        where = f"shard.records.{qid}"
        if qid not in dealt:
            raise _fail(name, where, "is a query this shard was not dealt (not in shard.queries)")
        if not isinstance(record, dict) or record.get("qid") != qid:
            raise _fail(name, where, f"is {brief_repr(record)}; expected an object whose qid is {brief_repr(qid)}")
        if record.get("status") not in _STATUSES:
            raise _fail(name, f"{where}.status", f"is {brief_repr(record.get('status'))}; expected one of "
                                                 f"{', '.join(_STATUSES)}")
        entry = per_query.get(qid)
        if not isinstance(entry, dict) or entry.get("status") != record["status"]:
            raise _fail(name, where, "does not match per_query (status or presence): the file was edited")
        # merge judges the records: each must say what its per_query entry (checked against the
        # aggregate by the schema) says, or an edited record would be judged in its place
        differ = [key for key, absent in _RECORDED if _json(record.get(key, absent)) != _json(entry.get(key, absent))]
        if differ:
            raise _fail(name, where, f"does not match per_query.{qid} ({', '.join(differ)} differ): the file was "
                                     "edited")
    extra = [q for q in per_query if q not in records]
    if extra:
        raise _fail(name, f"per_query.{extra[0]}", "has no record in shard.records: the file was edited")
