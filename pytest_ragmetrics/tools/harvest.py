"""Failure harvesting: the questions nightly runs failed, as candidates for annotation.

``ragmetrics harvest ARTIFACT...`` reads run artifacts (``pytest --rag-eval --rag-report``),
each checked by :mod:`pytest_ragmetrics.gate.artifact`, and gathers every question one of them
failed: ``regressed`` (fell beyond its per-query tolerance), ``errored`` (the retriever raised or
returned no ranking), ``inconclusive`` (a pooled set's drop that unjudged documents could explain) or
``leak`` (it returned a document outside its scope). A document outside the question's scope is
known not relevant, so it is never a candidate (:attr:`Harvested.out_of_scope` counts those left out);
the question keeps its ``filters`` and ``scope``.
Across artifacts a question is listed once: its candidates are the union of the documents each
failing run returned in its top k (``_top``), each marked with the runs that returned it
(``found_by``, the artifact's name) and their ranks, and the question says on how many runs it
failed (``harvest``). Judgments already known (from the golden set the runs name, or the gold
the artifacts list) are carried over, as ``ragmetrics pool`` carries them, and a gold document
no failing run returned is added with an empty ``found_by``: the exported record keeps every label.

The output is a candidates file (:mod:`pytest_ragmetrics.tools.candidates`) whose questions carry
``source: harvested``, so ``ragmetrics annotate`` opens it and the golden records exported from
its judgments say where they came from. A set made of them over-fits known failures: the report
warns when they exceed ``max_harvested_share`` of a golden set.

Artifacts of different golden sets (``_meta.golden.source``) are not mixed: their question ids
need not name the same questions. Harvest each set on its own.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from pytest_ragmetrics.errors import RagMetricsError, brief_repr, listed
from pytest_ragmetrics.golden import GoldenSet
from pytest_ragmetrics.tools.pool import PooledQuery, PoolQuery, pool_sources
from pytest_ragmetrics.tools.sources import Entry, Ranked, Source

__all__ = ["VERDICTS", "Harvested", "Night", "failures", "harvest", "night_names", "check_golden_version", "run_of"]

#: What a question's run said when it failed, in the order a question lists them.
VERDICTS = ("regressed", "errored", "inconclusive", "leak")


@dataclass
class Night:
    """One run artifact, as read: its path, its name in ``found_by``, its data."""

    path: str
    name: str
    data: Mapping[str, Any]

    @property
    def created(self) -> str:
        return str(self.data["_meta"].get("created") or "")

    @property
    def golden(self) -> str | None:
        golden = self.data["_meta"].get("golden")
        source = golden.get("source") if isinstance(golden, dict) else None
        return source or None

    @property
    def golden_sha(self) -> str | None:
        golden = self.data["_meta"].get("golden")
        sha = golden.get("sha256") if isinstance(golden, dict) else None
        return sha if isinstance(sha, str) and sha else None

    @property
    def shard(self) -> dict[str, Any] | None:
        shard = self.data.get("shard")
        return shard if isinstance(shard, dict) else None

    def digest(self, qid: str) -> Any:
        """The digest of the text and judgments a query was measured with (None: not recorded)."""
        entry = self.data["per_query"].get(qid)
        return entry.get("_judgments") if isinstance(entry, dict) else None


@dataclass
class Harvested:
    """The questions harvested, with what each failure was, for the summary and the candidates file."""

    pooled: list[PooledQuery]
    #: qid -> the names of the runs that failed it, in run order
    nights: dict[str, list[str]] = field(default_factory=dict)
    #: qid -> the verdicts it failed with (a subset of VERDICTS, in that order)
    verdicts: dict[str, list[str]] = field(default_factory=dict)
    #: failed questions left out: no text for them in any artifact nor in the golden set
    textless: list[str] = field(default_factory=list)
    #: failed questions left out: nothing to judge (they returned nothing, and no gold is known)
    empty: list[str] = field(default_factory=list)
    runs: int = 0
    #: qid -> the returned documents left out of its candidates: outside its scope (leaked), not relevant
    out_of_scope: dict[str, list[str]] = field(default_factory=dict)

    def record(self, qid: str) -> dict[str, Any]:
        """The ``harvest`` entry of a question's line: on how many runs it failed, and how."""
        return {"failed": len(self.nights[qid]), "of": self.runs, "verdicts": self.verdicts[qid],
                "runs": self.nights[qid]}


def night_names(paths: Sequence[str]) -> list[str]:
    """A name per artifact for ``found_by``: the file's stem, or its path when two stems are the same
    (``nightly/2026-11-30/run.json`` and ``nightly/2026-12-01/run.json``)."""
    stems = [Path(p).stem or p for p in paths]
    return [stem if stems.count(stem) == 1 else str(Path(p).with_suffix("")) for stem, p in zip(stems, paths)]


def check_one_golden(nights: Sequence[Night]) -> None:
    """Refuse artifacts of different golden sets: a question id is only known within its set. Two
    versions of one set (the same path, another sha256) are one set only while every question both
    ran was measured with the same text and judgments."""
    named = [(n, n.golden) for n in nights if n.golden]
    sets = list(dict.fromkeys(g for _, g in named))
    if len(sets) > 1:
        first = {g: next(n.path for n, s in named if s == g) for g in sets}
        shown = "; ".join(f"{first[g]} ran {brief_repr(g)}" for g in sets)
        raise RagMetricsError(f"the artifacts come from {len(sets)} golden sets ({shown}): a question id names a "
                              "question only within its set, so harvest the artifacts of each set on its own "
                              "(one `ragmetrics harvest` each)")
    versions: dict[str, Night] = {}
    for night in nights:
        if night.golden_sha and night.golden_sha not in versions:
            versions[night.golden_sha] = night
    known = list(versions.values())
    for i, a in enumerate(known):
        for b in known[i + 1:]:
            shared = [q for q in a.data["per_query"] if q in b.data["per_query"]]
            changed = [q for q in shared if a.digest(q) is None or a.digest(q) != b.digest(q)]
            if changed:
                raise RagMetricsError(
                    f"{a.path} and {b.path} ran different versions of {brief_repr(a.golden or 'the golden set')} "
                    f"(sha256 {a.golden_sha[:12]}… and {b.golden_sha[:12]}…, _meta.golden.sha256), and "  # type: ignore[index]
                    f"{'these questions were' if len(changed) > 1 else 'this question was'} measured with another "
                    f"text or other judgments: {listed(changed)}; harvest the artifacts of each version on its own")


def check_golden_version(golden: GoldenSet, path: str, nights: Sequence[Night]) -> str | None:
    """Why ``golden`` is not the set the artifacts ran (None: it is one they ran, or they record
    no sha256): its texts and judgments would be taken for theirs."""
    shas = {n.golden_sha: n for n in nights if n.golden_sha}
    if not shas or golden.fingerprint() in shas:
        return None
    shown = "; ".join(f"{n.path}: {sha[:12]}…" for sha, n in shas.items())
    return (f"{path} is not the golden set the artifacts ran: its sha256 is {golden.fingerprint()[:12]}…, they "
            f"record {shown} (_meta.golden.sha256)")


def run_of(nights: Sequence[Night], spread_hours: float = 6.0) -> tuple[dict[str, str], list[str]]:
    """Night path -> the run it belongs to, and the notes on shards counted once: the shards of one
    run (the same ``_meta.run_id``, else the same set, commit and shard count with each index once,
    within ``spread_hours``) are one run, and so is the artifact ``ragmetrics merge`` made of them
    (their run id, or the earliest shard's time), which then stands for them."""
    import datetime as dt

    def when(night: Night) -> dt.datetime | None:
        try:
            return dt.datetime.fromisoformat(night.created)
        except ValueError:
            return None

    def same_set(a: Night, b: Night) -> bool:
        return (a.golden_sha, a.data["_meta"].get("git_commit")) == (b.golden_sha, b.data["_meta"].get("git_commit"))

    def holds(merged: Night, shards: list[Night]) -> bool:
        """Whether ``merged`` holds each shard's queries as the shard measured them."""
        return all(json.dumps(entry.get(key), sort_keys=True)
                   == json.dumps((merged.data["per_query"].get(qid) or {}).get(key), sort_keys=True)
                   for shard in shards for qid, entry in shard.data["per_query"].items()
                   for key in ("metrics", "ranking", "status"))

    run: dict[str, str] = {}
    groups: list[list[Night]] = []
    for night in sorted(nights, key=lambda n: n.created):
        shard, run_id = night.shard, night.data["_meta"].get("run_id")
        if shard is None:
            continue
        for group in groups:
            head = group[0]
            if run_id is not None or head.data["_meta"].get("run_id") is not None:
                fits = run_id == head.data["_meta"].get("run_id")
            else:
                start, now = when(head), when(night)
                fits = same_set(head, night) and (head.shard or {}).get("count") == shard.get("count") \
                    and all((n.shard or {}).get("index") != shard.get("index") for n in group) \
                    and start is not None and now is not None \
                    and (now - start).total_seconds() <= spread_hours * 3600
            if fits:
                group.append(night)
                break
        else:
            groups.append([night])
    notes: list[str] = []
    for group in groups:
        for night in group:
            run[night.path] = group[0].path
    for night in nights:
        if night.shard is not None:
            continue
        run_id = night.data["_meta"].get("run_id")
        merged = next((g for g in groups if (run_id is not None and g[0].data["_meta"].get("run_id") == run_id)
                       or (run_id is None and g[0].data["_meta"].get("run_id") is None and same_set(g[0], night)
                           and min(n.created for n in g) == night.created and holds(night, g))), None)
        run[night.path] = merged[0].path if merged is not None else night.path
        if merged is not None:
            notes.append(f"{listed([n.path for n in merged])} {'are shards' if len(merged) > 1 else 'is a shard'} "
                         f"of the run merged in {night.path}: counted once, as that run")
    return run, notes


def failures(data: Mapping[str, Any]) -> dict[str, str]:
    """qid -> how one artifact's run failed it (``regressed``, ``errored``, ``inconclusive``, ``leak``), in
    the artifact's order: its regressed list (worst first), then its inconclusive ones, then errors, then
    the questions that only leaked."""
    comparison = data["comparison"]
    per_query = data["per_query"]
    out: dict[str, str] = {}
    for entry in comparison.get("regressed") or []:
        qid = entry["qid"]
        errored = entry.get("error") is not None or (per_query.get(qid) or {}).get("status") == "error"
        out[qid] = "errored" if errored else "regressed"
    for entry in comparison.get("inconclusive") or []:
        if isinstance(entry, dict) and isinstance(entry.get("qid"), str):
            out.setdefault(entry["qid"], "inconclusive")
    for qid in [*(q for q in comparison.get("errored") or [] if isinstance(q, str)),
                *(q for q, e in per_query.items() if e.get("status") == "error")]:
        if qid in per_query:
            out.setdefault(qid, "errored")
    for qid, entry in per_query.items():
        if entry.get("leaks"):
            out.setdefault(qid, "leak")
    return out


def _top(entry: Mapping[str, Any], k: Any) -> list[str]:
    """The documents a run returned for a query: its top k (``_top``; ``ranking`` in older artifacts)."""
    top: list[str] = list(entry["_top"] if entry.get("_top") is not None else entry.get("ranking") or [])
    return top[:k] if isinstance(k, int) else top


def harvest(nights: Sequence[Night], golden: GoldenSet | None = None) -> Harvested:
    """The questions ``nights`` failed, deduplicated by qid (see the module). ``golden``, when known,
    gives texts, tags and every judgment; else they come from the artifacts (the latest run's text
    and tags, the gold its verdict lists)."""
    check_one_golden(nights)
    runs, _ = run_of(nights)
    # a merged run stands for its shards: they are read once, through it
    covered = {runs[n.path] for n in nights if n.shard is None and runs[n.path] != n.path}
    nights = [n for n in nights if not (n.shard is not None and runs[n.path] in covered)]
    ordered = sorted(nights, key=lambda n: n.created)  # the latest run's text and tags win
    texts: dict[str, str] = {}
    tags: dict[str, tuple[str, ...]] = {}
    gold: dict[str, dict[str, int]] = {}
    scoped: dict[str, tuple[Any, Any]] = {}  # qid -> the filters and scope a run recorded
    leaked: dict[str, list[str]] = {}
    found: dict[str, list[str]] = {}
    how: dict[str, set[str]] = {}
    ranked: list[Ranked] = []
    depth = 1
    for night in ordered:
        data = night.data
        failed = failures(data)
        comparison = data["comparison"]
        for entry in [*(comparison.get("regressed") or []), *(comparison.get("inconclusive") or []),
                      *(comparison.get("leaks") or [])]:
            if isinstance(entry, dict) and entry.get("qid") in failed:
                if isinstance(entry.get("question"), str) and entry["question"].strip():
                    texts[entry["qid"]] = entry["question"]
                judged = gold.setdefault(entry["qid"], {})
                for pair in entry.get("gold") or []:
                    if isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str) \
                            and isinstance(pair[1], int) and not isinstance(pair[1], bool):
                        judged[pair[0]] = pair[1]
        rankings: dict[str, list[Entry]] = {}
        for qid, verdict in failed.items():
            entry = data["per_query"].get(qid) or {}
            tags[qid] = tuple(entry.get("tags") or ())
            found.setdefault(qid, []).append(night.name)
            how.setdefault(qid, set()).add(verdict)
            outside = {d.get("doc") for d in entry.get("leaks") or [] if isinstance(d, dict)}
            if outside:
                how[qid].add("leak")
            if entry.get("filters") or entry.get("scope"):
                scoped[qid] = (entry.get("filters"), entry.get("scope"))
            top = _top(entry, data["_meta"].get("k"))
            left = leaked.setdefault(qid, [])
            left += [doc for doc in top if doc in outside and doc not in left]
            rankings[qid] = [Entry(doc, doc) for doc in top if doc not in outside]
            depth = max(depth, len(top))
        ranked.append(Ranked(Source(night.name, "run", night.path), rankings))
    queries: list[PoolQuery] = []
    textless: list[str] = []
    for qid in found:
        known = golden[qid] if golden is not None and qid in golden else None
        text = known.text if known is not None else texts.get(qid)
        if not text:
            textless.append(qid)
            continue
        queries.append(PoolQuery(qid, text, dict(known.judgments) if known is not None else gold.get(qid, {}), {},
                                 tuple(known.tags) if known is not None else tags.get(qid, ()), "harvested",
                                 known.filters if known is not None else scoped.get(qid, (None, None))[0],
                                 known.scope if known is not None else scoped.get(qid, (None, None))[1]))
    # most often failed first: the failures that keep coming back are the ones worth a label
    first = {qid: i for i, qid in enumerate(found)}
    queries.sort(key=lambda q: (-len(found[q.qid]), first[q.qid]))
    pooled = pool_sources(queries, ranked, depth) if queries else []
    empty = [p.qid for p in pooled if not p.candidates]
    pooled = [p for p in pooled if p.candidates]
    out = Harvested(pooled, {p.qid: found[p.qid] for p in pooled},
                    {p.qid: [v for v in VERDICTS if v in how[p.qid]] for p in pooled}, textless, empty,
                    len({runs[n.path] for n in nights}))
    out.out_of_scope = {p.qid: leaked[p.qid] for p in pooled if leaked.get(p.qid)}
    for p in pooled:
        p.harvest = out.record(p.qid)
    return out
