"""Failure harvesting: the questions nightly runs failed, as candidates for annotation.

``ragmetrics harvest ARTIFACT...`` reads run artifacts (``pytest --rag-eval --rag-report``),
each checked by :mod:`pytest_ragmetrics.gate.artifact`, and gathers every question one of them
failed: ``regressed`` (fell beyond its per-query tolerance), ``errored`` (the retriever raised or
returned no ranking) or ``inconclusive`` (a pooled set's drop that unjudged documents could explain).
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

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from pytest_ragmetrics.errors import RagMetricsError, brief_repr
from pytest_ragmetrics.golden import GoldenSet
from pytest_ragmetrics.tools.pool import PooledQuery, PoolQuery, pool_sources
from pytest_ragmetrics.tools.sources import Entry, Ranked, Source

__all__ = ["VERDICTS", "Harvested", "Night", "failures", "harvest", "night_names"]

#: What a question's run said when it failed, in the order a question lists them.
VERDICTS = ("regressed", "errored", "inconclusive")


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
    """Refuse artifacts of different golden sets: a question id is only known within its set."""
    named = [(n, n.golden) for n in nights if n.golden]
    sets = list(dict.fromkeys(g for _, g in named))
    if len(sets) > 1:
        first = {g: next(n.path for n, s in named if s == g) for g in sets}
        shown = "; ".join(f"{first[g]} ran {brief_repr(g)}" for g in sets)
        raise RagMetricsError(f"the artifacts come from {len(sets)} golden sets ({shown}): a question id names a "
                              "question only within its set, so harvest the artifacts of each set on its own "
                              "(one `ragmetrics harvest` each)")


def failures(data: Mapping[str, Any]) -> dict[str, str]:
    """qid -> how one artifact's run failed it (``regressed``, ``errored``, ``inconclusive``), in the
    artifact's order: its regressed list (worst first), then its inconclusive ones, then errors."""
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
    ordered = sorted(nights, key=lambda n: n.created)  # the latest run's text and tags win
    texts: dict[str, str] = {}
    tags: dict[str, tuple[str, ...]] = {}
    gold: dict[str, dict[str, int]] = {}
    found: dict[str, list[str]] = {}
    how: dict[str, set[str]] = {}
    ranked: list[Ranked] = []
    depth = 1
    for night in ordered:
        data = night.data
        failed = failures(data)
        comparison = data["comparison"]
        for entry in [*(comparison.get("regressed") or []), *(comparison.get("inconclusive") or [])]:
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
            top = _top(entry, data["_meta"].get("k"))
            rankings[qid] = [Entry(doc, doc) for doc in top]
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
                                 known.filters if known is not None else None))
    # most often failed first: the failures that keep coming back are the ones worth a label
    first = {qid: i for i, qid in enumerate(found)}
    queries.sort(key=lambda q: (-len(found[q.qid]), first[q.qid]))
    pooled = pool_sources(queries, ranked, depth) if queries else []
    empty = [p.qid for p in pooled if not p.candidates]
    pooled = [p for p in pooled if p.candidates]
    out = Harvested(pooled, {p.qid: found[p.qid] for p in pooled},
                    {p.qid: [v for v in VERDICTS if v in how[p.qid]] for p in pooled}, textless, empty, len(nights))
    for p in pooled:
        p.harvest = out.record(p.qid)
    return out
