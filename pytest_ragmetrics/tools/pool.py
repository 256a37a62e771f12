"""Candidate pooling for annotation.

A golden set judged only on what one retriever returned cannot see a better
retriever's improvements: the documents only the new one finds were never
judged, so they count as misses. Pooling takes the top ``depth`` documents of
every system a team compares for each question (its retrievers, its run files
and artifacts, the reference stack's modes: see
:mod:`pytest_ragmetrics.tools.sources`), unions them, drops repeats (by
document id), and writes them out for annotators as a candidates file
(:mod:`pytest_ragmetrics.tools.candidates`): a ``_meta`` line (pool id, shuffle
seed, depth, sources, time), then one question a line in the JSONL golden format
``load_golden`` reads::

    {"qid": "...", "query": "...", "order": ["d", ...], "candidates": [
        {"doc_id": "...", "chunk": "doc#2-3", "text": "...", "rel": null, "note": "",
         "found_by": ["bm25", "vector"], "ranks": {"bm25": 3, "vector": 1}}]}

``found_by`` names the sources that ranked the document within ``depth``,
``ranks`` each one's best rank of it; ``order`` is the seeded shuffle annotators
judge in (:func:`~pytest_ragmetrics.tools.candidates.display_order`). ``rel``
stays ``null`` for the annotator (0 = not relevant, 1, 2, ...), except where the
input golden set already judged the document: then that grade is carried over
(and a judged document that no source retrieved is appended with an empty
``found_by``, so no label is lost). ``load_golden`` refuses a file that still
holds an unannotated candidate: a pool is not a golden set until every ``rel``
is filled in.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from pytest_ragmetrics.errors import InputError, RagMetricsError
from pytest_ragmetrics.files import atomic_write_text, dumps_line, json_lines, read_text, split_lines
from pytest_ragmetrics.golden import (
    DEFAULT_SOURCE,
    _check_grade,
    _check_id,
    _check_tags,
    by_grade,
    check_mapping,
    check_source,
    load_golden,
    query_fields,
)
from pytest_ragmetrics.measures import DEFAULT_ID_SEPARATOR
from pytest_ragmetrics.report.tables import counted, markdown_table
from pytest_ragmetrics.tools.candidates import KIND, VERSION, display_order, pool_identity
from pytest_ragmetrics.tools.sources import Ranked, Source, stack_rankings

__all__ = [
    "Candidate",
    "PoolQuery",
    "PooledQuery",
    "candidates_meta",
    "fill_texts",
    "pool",
    "pool_sources",
    "pool_summary",
    "read_queries",
    "recorded_golden",
    "textless_note",
    "write_pool",
    "unjudged_pool",
]


@dataclass(frozen=True)
class PoolQuery:
    """A question to pool for, with whatever judgments (and notes) it already has."""

    qid: str
    text: str
    judgments: dict[str, int] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    tags: tuple[str, ...] = ()
    #: where the question came from, when the input says (kept into the candidates file)
    source: str | None = None
    #: the record's filters: every source searches the question with them, as the gate does
    filters: Mapping[str, Any] | None = None
    #: the record's scope, kept into the candidates file and the judgments made from it
    scope: Mapping[str, Any] | None = None


@dataclass
class Candidate:
    doc_id: str
    chunk: str | None = None
    text: str | None = None
    rel: int | None = None
    note: str = ""
    found_by: list[str] = field(default_factory=list)
    ranks: dict[str, int] = field(default_factory=dict)
    #: the source whose ranked id is ``chunk`` (and whose text is ``text``); not written out
    chunk_from: str | None = field(default=None, compare=False, repr=False)

    @property
    def best_rank(self) -> float:
        return min(self.ranks.values()) if self.ranks else float("inf")

    def to_dict(self) -> dict[str, Any]:
        return {
            "doc_id": self.doc_id,
            "chunk": self.chunk,
            "text": self.text,
            "rel": self.rel,
            "note": self.note,
            "found_by": list(self.found_by),
            "ranks": dict(self.ranks),
        }


@dataclass
class PooledQuery:
    qid: str
    query: str
    tags: tuple[str, ...]
    candidates: list[Candidate]
    #: where the question came from (``harvested`` for ``ragmetrics harvest``); None: not said
    source: str | None = None
    #: for a harvested question: on how many runs it failed, and how (``ragmetrics harvest``)
    harvest: dict[str, Any] | None = None
    #: the record's filters, written so the candidates file replays them too
    filters: Mapping[str, Any] | None = None
    #: the record's scope, written so the golden records exported from the judgments keep it
    scope: Mapping[str, Any] | None = None

    def order(self, seed: int) -> list[str]:
        """The order annotators see the candidates in: :func:`display_order` from ``seed``."""
        return display_order(self.qid, [c.doc_id for c in self.candidates], seed)

    def to_dict(self, seed: int | None = None) -> dict[str, Any]:
        """The question's line of a candidates file (with ``order`` when a ``seed`` is given)."""
        out: dict[str, Any] = {"qid": self.qid, "query": self.query}
        if self.tags:
            out["tags"] = list(self.tags)
        if self.source is not None:
            out["source"] = self.source
        if self.harvest is not None:
            out["harvest"] = self.harvest
        if self.filters:
            out["filters"] = dict(self.filters)
        if self.scope:
            out["scope"] = dict(self.scope)
        if seed is not None:
            out["order"] = self.order(seed)
        out["candidates"] = [c.to_dict() for c in self.candidates]
        return out


# ---------------------------------------------------------------------------- reading


def read_queries(path: str | Path) -> list[PoolQuery]:
    """Questions to pool for, from any golden set ``load_golden`` reads, or plain questions.

    - ``.yaml``/``.yml``: a golden set (its judgments are carried over).
    - ``.jsonl``: one object a line with ``qid``/``query`` (or BEIR's ``_id``/``text``);
      ``candidates`` are optional and may hold ``rel: null``. A candidates file
      (``ragmetrics pool``'s output, its ``_meta`` line skipped) reads so: re-pooling
      it carries its judged candidates over, with their notes.
    - a folder: ``queries.jsonl`` with qrels (a golden set: judged queries only),
      or without qrels (every query, no judgments).
    - any other file: a golden qrels file next to a ``queries.jsonl``, else plain
      text, one question a line (``qid<TAB>question`` or just the question, whose
      id is then ``q<line number>``); blank lines and ``#`` comments are skipped.
    """
    p = Path(path)
    if p.is_dir():
        if (p / "queries.jsonl").is_file() and not _has_qrels(p):
            return _read_jsonl(p / "queries.jsonl")
        return _from_golden(p)
    if not p.exists():
        raise InputError(str(p), None, "file not found")
    suffix = p.suffix.lower()
    if suffix in (".yaml", ".yml"):
        return _from_golden(p)
    if suffix in (".jsonl", ".ndjson"):
        return _read_jsonl(p)
    if (p.parent / "queries.jsonl").is_file():
        try:
            return _from_golden(p)
        except InputError:
            pass  # not a qrels file: read it as questions
    return _read_text(p)


def _has_qrels(folder: Path) -> bool:
    return any((folder / name).is_file() for name in ("qrels.tsv", "qrels/test.tsv", "qrels.txt", "qrels"))


def _from_golden(path: Path) -> list[PoolQuery]:
    golden = load_golden(path)
    return [PoolQuery(q.qid, q.text, dict(q.judgments), {}, tuple(q.tags),
                      None if q.source == DEFAULT_SOURCE else q.source, q.filters, q.scope) for q in golden]


def _finish(path: Path, queries: list[tuple[PoolQuery, str]]) -> list[PoolQuery]:
    if not queries:
        raise InputError(str(path), None, "no questions found")
    seen: dict[str, str] = {}
    for q, where in queries:
        if q.qid in seen:
            raise InputError(str(path), where, f"duplicate query id {q.qid!r} (first at {seen[q.qid]})")
        seen[q.qid] = where
    return [q for q, _ in queries]


def _read_jsonl(path: Path) -> list[PoolQuery]:
    name = str(path)
    out: list[tuple[PoolQuery, str]] = []
    for number, record in json_lines(path):
        if isinstance(record, dict) and "_meta" in record and not out:  # how a pool was made: not a question
            continue
        qid, text = query_fields(record, name, f"line {number}")
        where = f"line {number} (qid {qid!r})"
        tags = list(_check_tags(record.get("tags"), name, where))
        if record.get("mode") is not None:
            tags.insert(0, _check_id(record["mode"], name, where, "mode"))
        judgments: dict[str, int] = {}
        notes: dict[str, str] = {}
        candidates = record.get("candidates") or []
        if not isinstance(candidates, list):
            raise InputError(name, where, "candidates must be a list of {doc_id, rel}")
        for i, cand in enumerate(candidates, start=1):
            if not isinstance(cand, dict) or "doc_id" not in cand:
                raise InputError(name, where, f"candidate {i} must be an object with doc_id")
            doc = _check_id(cand["doc_id"], name, where, f"candidate {i} doc_id")
            if cand.get("rel") is not None:
                grade = _check_grade(cand["rel"], name, where, doc)
                judgments[doc] = max(grade, judgments.get(doc, 0))
            note = cand.get("note")
            if isinstance(note, str) and note.strip():
                notes[doc] = note
        source = check_source(record["source"], name, where) if record.get("source") is not None else None
        filters = check_mapping(record.get("filters"), name, where, "filters")
        scope = check_mapping(record.get("scope"), name, where, "scope")
        out.append((PoolQuery(qid, text, judgments, notes, tuple(dict.fromkeys(tags)), source, filters, scope),
                    where))
    return _finish(path, out)


def _read_text(path: Path) -> list[PoolQuery]:
    out: list[tuple[PoolQuery, str]] = []
    for number, line in enumerate(split_lines(read_text(path)), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        where = f"line {number}"
        if "\t" in stripped:
            qid, _, text = stripped.partition("\t")
            qid, text = qid.strip(), text.strip()
            if not qid or not text:
                raise InputError(str(path), where, "expected 'qid<TAB>question' or a question")
        else:
            qid, text = f"q{number}", stripped
        out.append((PoolQuery(qid, text), where))
    return _finish(path, out)


# ---------------------------------------------------------------------------- pooling


def _check_depth(depth: Any) -> None:
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise RagMetricsError(f"depth must be a positive integer, got {depth!r}")


def pool_sources(queries: Sequence[PoolQuery], ranked: Sequence[Ranked], depth: int) -> list[PooledQuery]:
    """Union the top ``depth`` documents of every source per question, deduplicated by document.

    Each candidate records the sources that ranked it (``found_by``, in source
    order) and each one's best rank of it (``ranks``, document ranks), and shows
    the chunk (and text) of the source that ranked it best among those that gave
    a text, else of the source that ranked it best (the earlier source on a tie). Candidates are
    ordered by their best rank, then by how many sources found them, then by source order;
    judged documents no source found come last.
    Judgments and notes of ``queries`` are carried over.
    """
    _check_depth(depth)
    if not ranked:
        raise RagMetricsError("no sources to pool from")
    names = [r.source.name for r in ranked]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise RagMetricsError(f"two sources are named {twice[0]!r}: every source needs a name of its own")
    position = {name: j for j, name in enumerate(names)}
    out = []
    for q in queries:
        found: dict[str, Candidate] = {}
        for r in ranked:
            name = r.source.name
            rank = 0
            seen: set[str] = set()
            for entry in r.rankings.get(q.qid, ()):
                if entry.doc in seen:
                    continue
                seen.add(entry.doc)
                rank += 1
                if rank > depth:
                    break
                cand = found.get(entry.doc)
                if cand is None:
                    cand = found[entry.doc] = Candidate(entry.doc)
                # shown: the best-ranked entry that carries a text, else the best-ranked one
                shown = cand.ranks[cand.chunk_from] if cand.chunk_from is not None else float("inf")
                if (entry.text is not None, -rank) > (cand.text is not None, -shown):
                    cand.chunk, cand.text, cand.chunk_from = entry.rid, entry.text, name
                cand.found_by.append(name)
                cand.ranks[name] = rank
        pooled = sorted(
            found.values(),
            key=lambda c: (c.best_rank, -len(c.found_by), min(position[m] for m in c.found_by), c.doc_id),
        )
        missed = [Candidate(doc) for doc, _ in by_grade(q.judgments) if doc not in found]
        for cand in pooled + missed:
            cand.rel = q.judgments.get(cand.doc_id)
            cand.note = q.notes.get(cand.doc_id, "")
        out.append(PooledQuery(q.qid, q.text, q.tags, pooled + missed, q.source, filters=q.filters, scope=q.scope))
    return out


def pool(
    queries: Sequence[PoolQuery],
    retriever: Any,
    modes: Sequence[str] = ("bm25", "vector", "hybrid"),
    depth: int = 10,
    *,
    id_separator: str | None = DEFAULT_ID_SEPARATOR,
    progress: Any = None,
) -> list[PooledQuery]:
    """Pool the reference stack's ``modes`` (``search_batch`` in slices, distinct documents;
    ``progress`` shows each mode's search): :func:`pool_sources` over
    :func:`~pytest_ragmetrics.tools.sources.stack_rankings`."""
    _check_depth(depth)
    modes = list(dict.fromkeys(modes))
    if not modes:
        raise RagMetricsError("no modes to pool from")
    queries = list(queries)
    ranked = stack_rankings(retriever, [(q.qid, q.text) for q in queries], modes, depth, id_separator=id_separator,
                            progress=progress, filters={q.qid: q.filters for q in queries if q.filters})
    return pool_sources(queries, ranked, depth)


def fill_texts(
    pooled: Sequence[PooledQuery],
    sources: Sequence[Source],
    documents: Mapping[str, str],
) -> list[tuple[str, str]]:
    """Give candidates the text annotators read, from the corpus (``documents``: doc id -> text).

    A candidate whose chunk came from the reference stack keeps that chunk's text
    (what the stack ranked); any other takes its document's text from the corpus,
    and keeps the text its source gave when the corpus does not hold it. Returns
    the (qid, doc_id) pairs the corpus does not hold.
    """
    kinds = {s.name: s.kind for s in sources}
    absent = []
    for p in pooled:
        for c in p.candidates:
            if c.text is not None and kinds.get(c.chunk_from or "") == "stack":
                continue
            text = documents.get(c.doc_id)
            if text is not None:
                c.text = text
            else:
                absent.append((p.qid, c.doc_id))
    return absent


def pool_summary(pooled: Sequence[PooledQuery], sources: Sequence[Source | str], depth: int) -> str:
    """What the pool holds: sizes; per source, the candidates it contributed and those only it
    found (the pool-bias table); carried-over judgments; candidates without text."""
    srcs = [s if isinstance(s, Source) else Source(s, "stack", s) for s in sources]
    n = len(pooled)
    sizes = [sum(1 for c in p.candidates if c.found_by) for p in pooled]
    total = sum(sizes)
    found = {s.name: 0 for s in srcs}
    only = {s.name: 0 for s in srcs}
    only_relevant: dict[str, int] = {}
    for p in pooled:
        for c in p.candidates:
            for name in c.found_by:
                found[name] = found.get(name, 0) + 1
            if len(c.found_by) == 1:
                only[c.found_by[0]] = only.get(c.found_by[0], 0) + 1
                if (c.rel or 0) > 0:
                    only_relevant[c.found_by[0]] = only_relevant.get(c.found_by[0], 0) + 1
    ranked = sum(found.values())
    spread = f", {min(sizes)}–{max(sizes)}" if n else ""
    carried = sum(1 for p in pooled for c in p.candidates if c.rel is not None)
    headers = ["source", "kind", "candidates", "found only by it"]
    if carried:  # with judgments, the classic measure of pool bias: relevant documents only one system found
        headers.append("of which judged relevant")
    rows = []
    for s in srcs:
        row: list[object] = [s.name, s.kind, found[s.name], only[s.name]]
        if carried:
            row.append(only_relevant.get(s.name, 0))
        rows.append(row)
    lines = [
        f"{counted(n, 'question')}, {counted(len(srcs), 'source')}, top {depth} documents each: "
        f"{counted(total, 'candidate')} ({total / max(n, 1):.1f} a question{spread}) from "
        f"{counted(ranked, 'ranked document')}.",
        "",
        markdown_table(headers, rows),
        "",
        "Found only by it: the documents a pool without that source would miss; judgments made without "
        "them would count them as not relevant.",
    ]
    missed = [(p.qid, c.doc_id) for p in pooled for c in p.candidates if not c.found_by and (c.rel or 0) > 0]
    todo = sum(1 for p in pooled for c in p.candidates if c.rel is None)
    lines.append(f"{counted(carried, 'judgment')} carried over from the input; {counted(todo, 'candidate')} "
                 f"{'awaits' if todo == 1 else 'await'} a rel (0 = not relevant)."
                 + (f" `ragmetrics annotate` asks all {carried + todo} blind, the carried ones too, so each "
                    "annotator's "
                    "grades are their own." if carried else ""))
    if missed:
        qid, doc = missed[0]
        lines.append(
            f"{len(missed)} relevant judged documents were found by no source at depth {depth} "
            f"(kept, with found_by []), e.g. {doc!r} for {qid!r}."
        )
    note = textless_note(pooled)
    if note:
        lines.append(note)
    return "\n".join(lines)


def textless_note(pooled: Sequence[PooledQuery]) -> str | None:
    """How many candidates have no text (``ragmetrics annotate`` cannot show them), or None."""
    textless = sum(1 for p in pooled for c in p.candidates if c.text is None)
    if not textless:
        return None
    return (f"{counted(textless, 'candidate')} {'has' if textless == 1 else 'have'} no text; "
            "pass --corpus to annotate them.")


def recorded_golden(source: str, artifact: str | Path) -> tuple[Path | None, list[Path]]:
    """The golden set a run artifact names (``_meta.golden.source``, written relative to the project
    root the run had) and the paths tried: from the current directory first, then from the artifact's
    folder and each folder above it, so the command works from anywhere in the project. None when
    none exists."""
    named = Path(source)
    if named.is_absolute():
        return (named if named.exists() else None), [named]
    folder = Path(artifact).resolve().parent
    tried = [named, *(base / named for base in (folder, *folder.parents))]
    return next((p for p in tried if p.exists()), None), tried


def unjudged_pool(artifact: Mapping[str, Any], golden: Any, name: str = "run",
                  everything: bool = True) -> tuple[list[PooledQuery], list[str]]:
    """The (query, unjudged document) pairs of a run artifact's top k (``_top``, or ``ranking`` in an
    artifact written before it), as candidates for ``ragmetrics annotate``: every document of the top k
    that ``golden`` does not judge, ``rel`` left null, inconclusive queries first; with ``everything``
    false, only the pairs the run's gate asked to judge (``comparison.to_judge``). Returns the pool and
    the artifact's query ids the golden set does not hold (left out)."""
    k = artifact["_meta"].get("k")
    per_query = artifact["per_query"]
    first = [r["qid"] for r in artifact["comparison"].get("inconclusive") or [] if r.get("qid") in per_query]
    wanted = None if everything else {tuple(p) for p in artifact["comparison"].get("to_judge") or []
                                      if isinstance(p, list) and len(p) == 2}
    order = [*first, *(q for q in per_query if q not in first)]
    out, unknown = [], []
    for qid in order:
        entry = per_query[qid]
        if qid not in golden:
            unknown.append(qid)
            continue
        query = golden[qid]
        top = entry.get("_top") if entry.get("_top") is not None else entry.get("ranking") or []
        top = top[:k] if isinstance(k, int) else top
        # a document outside the query's scope (a leak) is known not relevant: nothing to judge
        leaked = {d.get("doc") for d in entry.get("leaks") or [] if isinstance(d, dict)}
        candidates = [Candidate(doc, found_by=[name], ranks={name: rank})
                      for rank, doc in enumerate(top, start=1) if doc not in query.judgments
                      and doc not in leaked and (wanted is None or (qid, doc) in wanted)]
        if candidates:
            out.append(PooledQuery(qid, query.text, query.tags, candidates, filters=query.filters, scope=query.scope))
    return out, unknown


# ---------------------------------------------------------------------------- writing


def candidates_meta(
    pooled: Sequence[PooledQuery],
    sources: Sequence[Source],
    seed: int,
    depth: int,
    created: str | None = None,
) -> dict[str, Any]:
    """The ``_meta`` of a candidates file: kind, version, pool_id, seed, depth, sources, created."""
    if created is None:
        created = _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()
    return {
        "kind": KIND,
        "version": VERSION,
        "pool_id": pool_identity((p.qid, [c.doc_id for c in p.candidates]) for p in pooled),
        "seed": seed,
        "depth": depth,
        "sources": [s.to_dict() for s in sources],
        "created": created,
    }


def write_pool(
    pooled: Sequence[PooledQuery],
    out: str | Path,
    *,
    sources: Sequence[Source],
    seed: int,
    depth: int,
    force: bool = False,
    created: str | None = None,
    made_by: str | None = None,
) -> Path:
    """Write the pool as a candidates file (UTF-8 JSONL: ``_meta``, then one question a line), atomically.

    An existing file is never overwritten unless ``force``: it may hold an
    annotator's work.
    """
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise RagMetricsError(f"seed must be an integer >= 0, got {seed!r}")
    path = Path(out)
    if path.exists() and not force:
        raise RagMetricsError(f"{path} already exists; pass --force to overwrite it (it may hold annotations)")
    if path.is_dir():
        raise RagMetricsError(f"{path} is a directory; give a file name such as candidates.jsonl")
    meta = candidates_meta(pooled, sources, seed, depth, created)
    if made_by:  # the command that wrote the file, for what annotate says about it (default: pool)
        meta["made_by"] = made_by
    lines = [{"_meta": meta}, *(p.to_dict(seed) for p in pooled)]
    text = "".join(dumps_line(line) + "\n" for line in lines)
    try:
        atomic_write_text(path, text, overwrite=force)
    except FileExistsError as exc:
        if exc.filename != str(path):  # a folder on the way is a file: not the pool's own question
            raise
        raise RagMetricsError(f"{path} already exists; pass --force to overwrite it") from None  # appeared meanwhile
    return path
