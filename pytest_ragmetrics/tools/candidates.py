"""The candidates file: what ``ragmetrics pool`` writes and ``ragmetrics annotate`` reads.

A JSON Lines file. The first line says what the file is and how it was made::

    {"_meta": {"kind": "ragmetrics-candidates", "version": 1, "pool_id": "…", "seed": 1234,
               "depth": 10, "sources": [{"name": "bm25", "kind": "stack"}, …], "created": "…"}}

Then one line a question, in the golden JSONL format ``load_golden`` reads, with
the display order annotators see::

    {"qid": "q1", "query": "…", "tags": ["smoke"], "source": "harvested", "order": ["doc-b", "doc-a"],
     "candidates": [{"doc_id": "doc-a", "chunk": "doc-a#2-3", "text": "…", "rel": null, "note": "",
                     "found_by": ["bm25"], "ranks": {"bm25": 1}}, …]}

``source`` (optional) says where the question came from (``ragmetrics harvest`` writes
``harvested``); the judgments and the golden records exported from them keep it.
``order`` is the candidates shuffled per question from the random ``seed`` (see
:func:`display_order`): annotators judge in that order and never see
``found_by`` or ``ranks``, so neither a system's name nor its ranking can sway a
grade, as TREC assessment does. ``pool_id`` identifies the pool by its content
(:func:`pool_identity`), so an annotator's file can be checked against the
candidates it was made from.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_ragmetrics.errors import InputError, brief_repr
from pytest_ragmetrics.files import json_lines, loads_json
from pytest_ragmetrics.golden import check_mapping, check_source

__all__ = [
    "KIND",
    "VERSION",
    "CandidateDoc",
    "CandidateQuestion",
    "Candidates",
    "display_order",
    "file_meta",
    "pool_identity",
    "read_candidates",
]

KIND = "ragmetrics-candidates"
VERSION = 1


@dataclass
class CandidateDoc:
    """One pooled document of one question; ``rel`` is None until judged."""

    doc_id: str
    text: str | None = None
    chunk: str | None = None
    rel: int | None = None
    note: str = ""
    found_by: list[str] = field(default_factory=list)
    ranks: dict[str, int] = field(default_factory=dict)


@dataclass
class CandidateQuestion:
    qid: str
    query: str
    tags: tuple[str, ...]
    candidates: list[CandidateDoc]
    #: the order annotators see (doc ids), shuffled from the file's seed
    order: list[str]
    #: where the question came from (``source``: ``harvested`` for ``ragmetrics harvest``'s), kept into
    #: the judgments so the exported golden record says so; None when the line names none
    source: str | None = None
    #: the record's ``filters`` and ``scope``, kept into the judgments so the exported golden record
    #: searches and checks the question as the draft did
    filters: dict[str, Any] | None = None
    scope: dict[str, Any] | None = None

    def candidate(self, doc_id: str) -> CandidateDoc:
        for c in self.candidates:
            if c.doc_id == doc_id:
                return c
        raise KeyError(doc_id)


@dataclass
class Candidates:
    """A candidates file as read: its ``_meta`` and its questions, in file order."""

    path: Path
    meta: dict[str, Any]
    questions: list[CandidateQuestion]

    @property
    def pool_id(self) -> str:
        return str(self.meta.get("pool_id") or pool_identity((q.qid, [c.doc_id for c in q.candidates])
                                                             for q in self.questions))

    def question(self, qid: str) -> CandidateQuestion:
        for q in self.questions:
            if q.qid == qid:
                return q
        raise KeyError(qid)


def pool_identity(questions: Any) -> str:
    """sha256 of ``[(qid, sorted doc ids)]`` sorted by qid: the same pool gives the same id,
    however its lines or candidates are ordered, and any added or removed document changes it."""
    canonical = sorted((str(qid), sorted(str(d) for d in docs)) for qid, docs in questions)
    return hashlib.sha256(json.dumps(canonical, ensure_ascii=False).encode()).hexdigest()


def display_order(qid: str, doc_ids: Sequence[str], seed: int) -> list[str]:
    """``doc_ids`` shuffled for one question: fixed by ``seed`` and ``qid``, independent of
    the other questions and of the order the documents were pooled in."""
    ordered = sorted(doc_ids)
    random.Random(f"{seed}\0{qid}").shuffle(ordered)
    return ordered


def read_candidates(path: str | Path) -> Candidates:
    """Read a candidates file; any problem is an :class:`InputError` naming the file and line.

    A file without a ``_meta`` line (written before pools had one, or by hand) is
    read too: its order is the file's own, with seed 0 recorded.
    """
    p = Path(path)
    name = str(p)
    meta: dict[str, Any] = {}
    questions: list[CandidateQuestion] = []
    seen: dict[str, int] = {}
    for number, record in json_lines(p):
        where = f"line {number}"
        if not isinstance(record, dict):
            raise InputError(name, where, "expected a JSON object")
        if "_meta" in record:
            if questions or meta:
                raise InputError(name, where, "_meta must be the first line, and only once")
            if not isinstance(record["_meta"], dict) or record["_meta"].get("kind") not in (None, KIND):
                raise InputError(name, where, f"not a candidates file (_meta.kind is not {KIND!r})")
            meta = dict(record["_meta"])
            continue
        questions.append(_question(record, name, where, seen, number))
    if not questions:
        raise InputError(name, None, "no questions found")
    meta.setdefault("seed", 0)
    return Candidates(p, meta, questions)


def unique_qid(qid: Any, name: str, where: str, seen: dict[str, int], number: int) -> tuple[str, str]:
    """A question id that is a non-empty string met first on line ``number`` (recorded in
    ``seen``), and ``where`` naming it; else an :class:`InputError`."""
    if not isinstance(qid, str) or not qid.strip():
        raise InputError(name, where, f"qid must be a non-empty string, got {brief_repr(qid)}")
    where = f"{where} (qid {qid!r})"
    if qid in seen:
        raise InputError(name, where, f"duplicate qid (first on line {seen[qid]})")
    seen[qid] = number
    return qid, where


def _question(record: dict[str, Any], name: str, where: str, seen: dict[str, int], number: int) -> CandidateQuestion:
    qid, where = unique_qid(record.get("qid"), name, where, seen, number)
    query = record.get("query")
    if not isinstance(query, str) or not query.strip():
        raise InputError(name, where, "query must be a non-empty string")
    tags = record.get("tags") or []
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise InputError(name, where, "tags must be a list of strings")
    raw = record.get("candidates")
    if not isinstance(raw, list):
        raise InputError(name, where, "candidates must be a list of {doc_id, …}")
    docs: list[CandidateDoc] = []
    for i, cand in enumerate(raw, start=1):
        if not isinstance(cand, dict) or not isinstance(cand.get("doc_id"), str) or not cand["doc_id"].strip():
            raise InputError(name, where, f"candidate {i} must be an object with a non-empty doc_id")
        rel = cand.get("rel")
        if rel is not None and (isinstance(rel, bool) or not isinstance(rel, int) or rel < 0):
            raise InputError(name, where, f"candidate {cand['doc_id']!r}: rel must be null or an integer >= 0, "
                                          f"got {brief_repr(rel)}")
        text = cand.get("text")
        found_by, ranks = cand.get("found_by") or [], cand.get("ranks") or {}
        if not isinstance(found_by, list) or not all(isinstance(s, str) for s in found_by):
            raise InputError(name, where, f"candidate {cand['doc_id']!r}: found_by must be a list of source names, "
                                          f"got {brief_repr(found_by)}")
        if not isinstance(ranks, dict) or not all(isinstance(r, int) and not isinstance(r, bool) and r >= 1
                                                  for r in ranks.values()):
            raise InputError(name, where, f"candidate {cand['doc_id']!r}: ranks must map source names to ranks "
                                          f"(integers >= 1), got {brief_repr(ranks)}")
        docs.append(CandidateDoc(
            cand["doc_id"], text if isinstance(text, str) else None,
            cand.get("chunk") if isinstance(cand.get("chunk"), str) else None, rel,
            note if isinstance(note := cand.get("note"), str) else "",
            list(found_by), dict(ranks),
        ))
    ids = [d.doc_id for d in docs]
    if len(set(ids)) != len(ids):
        dup = next(d for d in ids if ids.count(d) > 1)
        raise InputError(name, where, f"document {dup!r} is pooled twice")
    order = record.get("order")
    if order is None:
        order = ids
    elif not isinstance(order, list) or sorted(map(str, order)) != sorted(ids):
        raise InputError(name, where, "order must list each candidate's doc_id exactly once")
    source = check_source(record["source"], name, where) if record.get("source") is not None else None
    return CandidateQuestion(qid, query, tuple(tags), docs, [str(d) for d in order], source,
                             check_mapping(record.get("filters"), name, where, "filters"),
                             check_mapping(record.get("scope"), name, where, "scope"))


def file_meta(path: str | Path) -> dict[str, Any] | None:
    """The ``_meta`` of a candidates or judgments file's first line; None for any other file."""
    try:
        with open(path, encoding="utf-8") as fh:
            first = fh.readline(1 << 20)
        record = loads_json(first) if first.lstrip().startswith("{") else None
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    meta = record.get("_meta") if isinstance(record, dict) else None
    return meta if isinstance(meta, dict) else None
