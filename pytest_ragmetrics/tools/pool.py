"""Candidate pooling for annotation.

A golden set judged only on what one retriever returned cannot see a better
retriever's improvements: the documents only the new one finds were never
judged, so they count as misses. Pooling takes the top ``depth`` documents of
several modes for each question, unions them, drops repeats (by document id),
and writes them out for annotators in the JSONL golden format ``load_golden`` reads::

    {"qid": "...", "query": "...", "candidates": [
        {"doc_id": "...", "chunk": "doc#2-3", "text": "...", "rel": null, "note": "",
         "found_by": ["bm25", "vector"], "ranks": {"bm25": 3, "vector": 1}}]}

``rel`` stays ``null`` for the annotator (0 = not relevant, 1, 2, ...), except
where the input golden set already judged the document: then that grade is
carried over (and a judged document that no mode retrieved is appended with an
empty ``found_by``, so no label is lost). ``load_golden`` refuses a file that
still holds an unannotated candidate: a pool is not a golden set until every
``rel`` is filled in.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from pytest_ragmetrics.errors import InputError, RagMetricsError
from pytest_ragmetrics.files import atomic_write_text, read_text
from pytest_ragmetrics.golden import _check_grade, _check_id, _check_tags, _json_lines, by_grade, load_golden, query_fields
from pytest_ragmetrics.measures import DEFAULT_ID_SEPARATOR
from pytest_ragmetrics.metrics import document_of
from pytest_ragmetrics.results import normalize_results

__all__ = [
    "Candidate",
    "PoolQuery",
    "PooledQuery",
    "pool",
    "pool_summary",
    "read_queries",
    "write_pool",
]


@dataclass(frozen=True)
class PoolQuery:
    """A question to pool for, with whatever judgments (and notes) it already has."""

    qid: str
    text: str
    judgments: dict[str, int] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    tags: tuple[str, ...] = ()


@dataclass
class Candidate:
    doc_id: str
    chunk: str | None = None
    text: str | None = None
    rel: int | None = None
    note: str = ""
    found_by: list[str] = field(default_factory=list)
    ranks: dict[str, int] = field(default_factory=dict)

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

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"qid": self.qid, "query": self.query}
        if self.tags:
            out["tags"] = list(self.tags)
        out["candidates"] = [c.to_dict() for c in self.candidates]
        return out


# ---------------------------------------------------------------------------- reading


def read_queries(path: str | Path) -> list[PoolQuery]:
    """Questions to pool for, from any golden set ``load_golden`` reads, or plain questions.

    - ``.yaml``/``.yml``: a golden set (its judgments are carried over).
    - ``.jsonl``: one object a line with ``qid``/``query`` (or BEIR's ``_id``/``text``);
      ``candidates`` are optional and may hold ``rel: null`` (a pool being
      re-pooled): judged ones are carried over with their notes.
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
    return [PoolQuery(q.qid, q.text, dict(q.judgments), {}, tuple(q.tags)) for q in golden]


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
    for number, record in _json_lines(path):
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
        out.append((PoolQuery(qid, text, judgments, notes, tuple(dict.fromkeys(tags))), where))
    return _finish(path, out)


def _read_text(path: Path) -> list[PoolQuery]:
    out: list[tuple[PoolQuery, str]] = []
    for number, line in enumerate(read_text(path).splitlines(), start=1):
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


def _doc_of(item: Any, rid: str, separator: str | None) -> str:
    """The document of a result: its own ``doc_id`` when it carries one, else the id's prefix."""
    doc = getattr(item, "doc_id", None)
    return doc if isinstance(doc, str) else document_of(rid, separator)


def pool(
    queries: Sequence[PoolQuery],
    retriever: Any,
    modes: Sequence[str] = ("bm25", "vector", "hybrid"),
    depth: int = 10,
    *,
    id_separator: str | None = DEFAULT_ID_SEPARATOR,
    unique_docs: bool = True,
) -> list[PooledQuery]:
    """Union the top ``depth`` documents of each mode per question, deduplicated by document.

    Each mode is one ``search_batch`` call (with ``unique_docs``, so each mode
    contributes ``depth`` distinct documents and ``ranks`` are document ranks).
    A candidate shows the chunk of the mode that ranked it best. Candidates are
    ordered by their best rank, then by how many modes found them; judged
    documents no mode found come last.
    """
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise RagMetricsError(f"depth must be a positive integer, got {depth!r}")
    modes = list(dict.fromkeys(modes))
    if not modes:
        raise RagMetricsError("no modes to pool from")
    queries = list(queries)
    texts = [q.text for q in queries]
    per_mode: dict[str, list[Any]] = {}
    for mode in modes:
        kwargs: dict[str, Any] = {"top_k": depth, "mode": mode, "threshold": None}
        if unique_docs:
            kwargs["unique_docs"] = True
        results = list(retriever.search_batch(texts, **kwargs))
        if len(results) != len(queries):
            raise RagMetricsError(f"mode {mode}: search_batch returned {len(results)} lists for {len(queries)} questions")
        per_mode[mode] = results
    out = []
    for i, q in enumerate(queries):
        found: dict[str, Candidate] = {}
        for order, mode in enumerate(modes):
            items = list(per_mode[mode][i])
            returned = normalize_results(items, len(items), q.qid)
            rank = 0
            seen: set[str] = set()
            for item, rid in zip(items, returned.ids):
                doc = _doc_of(item, rid, id_separator)
                if doc in seen:
                    continue
                seen.add(doc)
                rank += 1
                if rank > depth:
                    break
                cand = found.get(doc)
                if cand is None:
                    cand = found[doc] = Candidate(doc)
                if rank < cand.best_rank:
                    cand.chunk = rid
                    text = getattr(item, "text", None)
                    cand.text = text if isinstance(text, str) else None
                cand.found_by.append(mode)
                cand.ranks[mode] = rank
        mode_order = {m: j for j, m in enumerate(modes)}
        pooled = sorted(
            found.values(),
            key=lambda c: (c.best_rank, -len(c.found_by), min(mode_order[m] for m in c.found_by), c.doc_id),
        )
        missed = [Candidate(doc) for doc, _ in by_grade(q.judgments) if doc not in found]
        for cand in pooled + missed:
            cand.rel = q.judgments.get(cand.doc_id)
            cand.note = q.notes.get(cand.doc_id, "")
        out.append(PooledQuery(q.qid, q.text, q.tags, pooled + missed))
    return out


def pool_summary(pooled: Sequence[PooledQuery], modes: Sequence[str], depth: int) -> str:
    """A few lines on what the pool holds: sizes, single-mode finds, carried-over judgments."""
    n = len(pooled)
    sizes = [sum(1 for c in p.candidates if c.found_by) for p in pooled]
    total = sum(sizes)
    only: dict[str, int] = {m: 0 for m in modes}
    for p in pooled:
        for c in p.candidates:
            if len(c.found_by) == 1:
                only[c.found_by[0]] += 1
    carried = sum(1 for p in pooled for c in p.candidates if c.rel is not None)
    missed = [(p.qid, c.doc_id) for p in pooled for c in p.candidates if not c.found_by and (c.rel or 0) > 0]
    todo = sum(1 for p in pooled for c in p.candidates if c.rel is None)
    lines = [
        f"{n} questions, modes {', '.join(modes)}, top {depth} documents each: {total} candidates "
        f"({total / n:.1f} a question, {min(sizes)}–{max(sizes)}) out of {n * depth * len(modes)} retrieved.",
        "Found by one mode only, so a pool without that mode would miss them: "
        + ", ".join(f"{m} {k}" for m, k in only.items()) + ".",
        f"{carried} judgments carried over from the input; {todo} candidates await a rel (0 = not relevant).",
    ]
    if missed:
        qid, doc = missed[0]
        lines.append(
            f"{len(missed)} relevant judged documents were found by no mode at depth {depth} "
            f"(kept, with found_by []), e.g. {doc!r} for {qid!r}."
        )
    return "\n".join(lines)


# ---------------------------------------------------------------------------- writing


def write_pool(pooled: Sequence[PooledQuery], out: str | Path, *, force: bool = False) -> Path:
    """Write the pool as JSONL (UTF-8, one question a line), atomically.

    An existing file is never overwritten unless ``force``: it may hold an
    annotator's work.
    """
    path = Path(out)
    if path.exists() and not force:
        raise RagMetricsError(f"{path} already exists; pass --force to overwrite it (it may hold annotations)")
    if path.is_dir():
        raise RagMetricsError(f"{path} is a directory; give a file name such as candidates.jsonl")
    text = "".join(json.dumps(p.to_dict(), ensure_ascii=False) + "\n" for p in pooled)
    try:
        atomic_write_text(path, text, overwrite=force)
    except FileExistsError as exc:
        if exc.filename != str(path):  # a folder on the way is a file: not the pool's own question
            raise
        raise RagMetricsError(f"{path} already exists; pass --force to overwrite it") from None  # appeared meanwhile
    return path
