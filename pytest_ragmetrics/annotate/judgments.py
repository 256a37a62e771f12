"""An annotator's judgments file: what ``ragmetrics annotate`` writes, one per annotator.

A JSON Lines file in the golden format :func:`~pytest_ragmetrics.golden.load_golden`
reads (it skips the first ``_meta`` line), so ``ragmetrics agreement A B`` and the
plugin take it as it is::

    {"_meta": {"kind": "ragmetrics-judgments", "annotator": "alice", "pool_id": "…",
               "candidates": "pool.jsonl", "guidelines_sha256": "…", "updated": "…", "judgments": "pooled"}}
    {"qid": "q1", "query": "…", "tags": ["smoke"], "source": "log", "filters": {"tenant": "acme"},
     "scope": {"tenant": "acme"},
     "candidates": [{"doc_id": "doc-b", "rel": 2, "note": "steps 1-3", "judged_at": "2026-03-01"}, …]}

Every grade carries the date (UTC) it was given, ``judged_at``, so labels can age
(``max_label_age_days`` in thresholds.json); a grade given again is dated again.

Only questions with at least one judgment are written, and only their judged
documents, in the display order of the candidates file. ``pool_id`` ties the file to
the pool it judges: a file is never resumed against, or adjudicated with, another pool.

Each judgment rewrites the whole file atomically (temp file, fsync, rename), so a
process killed at any moment leaves the previous complete file or the new one.
:class:`JudgmentStore` also refuses to overwrite a file another program changed
since it was read, so two windows on one file cannot silently undo each other.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pytest_ragmetrics.errors import InputError, RagMetricsError, brief_repr
from pytest_ragmetrics.files import atomic_write_text, dumps_line, json_lines
from pytest_ragmetrics.golden import check_date
from pytest_ragmetrics.tools.candidates import Candidates

__all__ = [
    "KIND",
    "GRADES",
    "MAX_NOTE",
    "FileChangedError",
    "Judgment",
    "Judgments",
    "JudgmentStore",
    "check_annotator",
    "default_out",
    "read_judgments",
    "render_judgments",
    "sha256_text",
]

KIND = "ragmetrics-judgments"
#: 0 not relevant, 1 partially relevant, 2 fully answers the question
GRADES = (0, 1, 2)
#: characters a note may hold: a note is a reason, not a document
MAX_NOTE = 4000

_NAME = re.compile(r"^\w[\w.\-]{0,63}$")


class FileChangedError(RagMetricsError):
    """The judgments file changed under the store (another window, an editor): not overwritten."""


@dataclass(frozen=True)
class Judgment:
    rel: int
    note: str = ""
    #: the ISO date (UTC) the grade was given; None for a file written before grades were dated.
    #: Not part of equality: the same grade and note given on two days is the same judgment
    judged_at: str | None = field(default=None, compare=False)


@dataclass
class Judgments:
    """One annotator's judgments of one pool: ``by_question[qid][doc_id]``."""

    annotator: str
    pool_id: str
    candidates: str
    guidelines_sha256: str
    by_question: dict[str, dict[str, Judgment]] = field(default_factory=dict)
    updated: str | None = None
    #: further ``_meta`` fields kept as read (an adjudicated file names its sources)
    extra_meta: dict[str, Any] = field(default_factory=dict)

    def get(self, qid: str, doc_id: str) -> Judgment | None:
        return self.by_question.get(qid, {}).get(doc_id)

    def set(self, qid: str, doc_id: str, rel: int, note: str = "", judged_at: str | None = None) -> None:
        """Record a grade, dated today (UTC) unless ``judged_at`` says when it was given."""
        judgment = Judgment(check_grade(rel), check_note(note), judged_at or today())
        self.by_question.setdefault(qid, {})[doc_id] = judgment

    def clear(self, qid: str, doc_id: str) -> None:
        docs = self.by_question.get(qid)
        if docs is not None:
            docs.pop(doc_id, None)
            if not docs:
                del self.by_question[qid]

    def n_judged(self) -> int:
        return sum(len(docs) for docs in self.by_question.values())

    def pairs(self) -> dict[tuple[str, str], Judgment]:
        return {(qid, doc): j for qid, docs in self.by_question.items() for doc, j in docs.items()}


def check_grade(rel: Any) -> int:
    if isinstance(rel, bool) or not isinstance(rel, int) or rel not in GRADES:
        raise RagMetricsError(f"a grade is one of {', '.join(map(str, GRADES))}, got {brief_repr(rel)}")
    return rel


def check_note(note: Any) -> str:
    if not isinstance(note, str):
        raise RagMetricsError(f"a note is text, got {brief_repr(note)}")
    if len(note) > MAX_NOTE:
        raise RagMetricsError(f"a note holds at most {MAX_NOTE} characters, got {len(note)}")
    return note


def check_annotator(name: str) -> str:
    """An annotator's name becomes part of a file name: letters (any script), digits, ``.``,
    ``_`` and ``-``, starting with a letter or digit, at most 64 characters."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise RagMetricsError(
            f"annotator name {brief_repr(name)} must be 1-64 letters, digits, '.', '_' or '-', starting with "
            "a letter or digit (it becomes part of the file name)")
    return name


def default_out(candidates: str | Path, annotator: str) -> Path:
    """``<candidates stem>.<annotator>.jsonl`` beside the candidates file."""
    path = Path(candidates)
    return path.with_name(f"{path.stem}.{check_annotator(annotator)}.jsonl")


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def today() -> str:
    """Today's date in UTC, as a grade's ``judged_at``."""
    return datetime.now(timezone.utc).date().isoformat()


# ------------------------------------------------------------------------------ writing


def render_judgments(judgments: Judgments, pool: Candidates) -> str:
    """The file's text: the ``_meta`` line, then one line per question with a judgment, in the
    candidates file's order, its judged documents in display order."""
    meta = {"kind": KIND, "annotator": judgments.annotator, "pool_id": judgments.pool_id,
            "candidates": judgments.candidates, "guidelines_sha256": judgments.guidelines_sha256,
            "updated": judgments.updated, "judgments": "pooled", **judgments.extra_meta}
    lines = [dumps_line({"_meta": meta})]
    for question in pool.questions:
        docs = judgments.by_question.get(question.qid)
        if not docs:
            continue
        judged = [{"doc_id": doc, "rel": docs[doc].rel, "note": docs[doc].note,
                   **({"judged_at": docs[doc].judged_at} if docs[doc].judged_at else {})}
                  for doc in question.order if doc in docs]
        lines.append(dumps_line({"qid": question.qid, "query": question.query, "tags": list(question.tags),
                                 **({"source": question.source} if question.source else {}),
                                 **({"filters": question.filters} if question.filters else {}),
                                 **({"scope": question.scope} if question.scope else {}),
                                 "candidates": judged}))
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------ reading


def read_judgments(path: str | Path, pool: Candidates) -> Judgments:
    """Read a judgments file made from ``pool``; any problem is an :class:`InputError`.

    A file made from another pool is refused, naming both files: its grades belong to
    other candidate lists, and mixing them would judge documents nobody looked at.
    """
    p = Path(path)
    name = str(p)
    meta: dict[str, Any] | None = None
    by_question: dict[str, dict[str, Judgment]] = {}
    for number, record in json_lines(p):
        where = f"line {number}"
        if not isinstance(record, dict):
            raise InputError(name, where, "expected a JSON object")
        if meta is None:
            meta = _meta(record, name, where, pool)
            continue
        if "_meta" in record:
            raise InputError(name, where, "_meta must be the first line, and only once")
        qid, docs = _question(record, name, where, pool)
        if qid in by_question:
            raise InputError(name, where, f"question {qid!r} appears twice")
        by_question[qid] = docs
    if meta is None:
        raise InputError(name, None, f"empty: a judgments file starts with a _meta line of kind {KIND!r}")
    known = {"kind", "annotator", "pool_id", "candidates", "guidelines_sha256", "updated"}
    return Judgments(
        annotator=meta["annotator"], pool_id=meta["pool_id"], candidates=str(meta.get("candidates") or ""),
        guidelines_sha256=str(meta.get("guidelines_sha256") or ""), by_question=by_question,
        updated=meta.get("updated") if isinstance(meta.get("updated"), str) else None,
        extra_meta={k: v for k, v in meta.items() if k not in known},
    )


def _meta(record: dict[str, Any], name: str, where: str, pool: Candidates) -> dict[str, Any]:
    meta = record.get("_meta")
    if not isinstance(meta, dict) or meta.get("kind") != KIND:
        raise InputError(name, where, f"not a judgments file: the first line must be "
                                      f"{{\"_meta\": {{\"kind\": \"{KIND}\", …}}}}")
    if not isinstance(meta.get("annotator"), str) or not meta["annotator"]:
        raise InputError(name, where, "_meta.annotator must be a non-empty string")
    theirs = meta.get("pool_id")
    if theirs != pool.pool_id:
        made_from = f", made from {meta['candidates']!r}" if isinstance(meta.get("candidates"), str) else ""
        raise InputError(
            name, None,
            f"judges another pool (pool_id {str(theirs)[:12]}…{made_from}) than {pool.path} "
            f"(pool_id {pool.pool_id[:12]}…); judgments of different pools are never mixed. Open {name} with "
            f"the candidates it was made from, or give these candidates a file of their own with --out NEW.jsonl")
    return meta


def _question(record: dict[str, Any], name: str, where: str, pool: Candidates) -> tuple[str, dict[str, Judgment]]:
    qid = record.get("qid")
    try:
        question = pool.question(qid) if isinstance(qid, str) else None
    except KeyError:
        question = None
    if question is None:
        raise InputError(name, where, f"question {brief_repr(qid)} is not in {pool.path}")
    where = f"{where} (qid {qid!r})"
    raw = record.get("candidates")
    if not isinstance(raw, list) or not raw:
        raise InputError(name, where, "candidates must be a non-empty list of {doc_id, rel, note}")
    pooled = set(question.order)
    docs: dict[str, Judgment] = {}
    for i, cand in enumerate(raw, start=1):
        doc = cand.get("doc_id") if isinstance(cand, dict) else None
        if not isinstance(doc, str) or doc not in pooled:
            raise InputError(name, where, f"candidate {i} ({brief_repr(doc)}) is not a candidate of this question")
        if doc in docs:
            raise InputError(name, where, f"document {doc!r} is judged twice")
        try:
            docs[doc] = Judgment(check_grade(cand.get("rel")), check_note(cand.get("note", "") or ""),
                                 check_date(cand["judged_at"], name, where, f"judged_at of {doc!r}").isoformat()
                                 if cand.get("judged_at") is not None else None)
        except InputError:
            raise
        except RagMetricsError as exc:
            raise InputError(name, where, f"document {doc!r}: {exc}") from None
    return str(qid), docs


# ------------------------------------------------------------------------------- store


class JudgmentStore:
    """The judgments of one file, saved on every change; safe to call from several threads.

    The file is written only when something is judged: opening and closing the page
    leaves no file behind. Every save rewrites it atomically. A save finds the file as
    this store last left it, or refuses (:class:`RagMetricsError`) rather than undo
    another program's writes.
    """

    def __init__(self, path: Path, pool: Candidates, judgments: Judgments, *, resumed: bool = False,
                 previous_guidelines_sha256: str | None = None) -> None:
        self.path = path
        self.pool = pool
        self.judgments = judgments
        #: whether ``path`` held judgments already, and under which guidelines they were made
        self.resumed = resumed
        self.previous_guidelines_sha256 = previous_guidelines_sha256
        self._lock = threading.Lock()
        self._signature = _signature(path)
        self._closed = False

    @classmethod
    def open(cls, path: str | Path, pool: Candidates, *, annotator: str, candidates_label: str,
             guidelines_sha256: str) -> JudgmentStore:
        """Resume ``path`` if it exists (same pool and annotator, else an error), else start empty."""
        p = Path(path)
        if p.exists():
            judgments = read_judgments(p, pool)
            if judgments.annotator != annotator:
                raise InputError(str(p), None, f"holds the judgments of {judgments.annotator!r}, not {annotator!r}; "
                                               "each annotator judges into a file of their own (--out)")
            previous = judgments.guidelines_sha256
            judgments.candidates = candidates_label
            judgments.guidelines_sha256 = guidelines_sha256
            return cls(p, pool, judgments, resumed=True, previous_guidelines_sha256=previous)
        return cls(p, pool, Judgments(annotator, pool.pool_id, candidates_label, guidelines_sha256))

    def judge(self, qid: str, doc_id: str, rel: int | None, note: str = "") -> None:
        """Record (or with ``rel=None`` withdraw) one judgment and save the file before returning."""
        with self._lock:
            if self._closed:
                raise RagMetricsError("stopping: this judgment was not saved")
            before = self.judgments.get(qid, doc_id)
            if rel is None:
                self.judgments.clear(qid, doc_id)
            else:
                self.judgments.set(qid, doc_id, rel, note)
            try:
                self._save()
            except BaseException:
                self.judgments.clear(qid, doc_id)  # memory stays what the file says
                if before is not None:
                    self.judgments.set(qid, doc_id, before.rel, before.note, before.judged_at)
                raise

    def save(self) -> None:
        with self._lock:
            self._save()

    def close(self) -> None:
        """Wait for a save in progress, then refuse further judgments: what stopping needs."""
        with self._lock:
            self._closed = True

    def _save(self) -> None:
        if _signature(self.path) != self._signature:
            raise FileChangedError(
                f"{self.path} was changed by another program since it was opened; not overwritten. "
                "Restart ragmetrics annotate to resume from the file as it is now")
        self.judgments.updated = now()
        atomic_write_text(self.path, render_judgments(self.judgments, self.pool))
        self._signature = _signature(self.path)


def _signature(path: Path) -> tuple[int, int, int] | None:
    """What identifies one version of the file: inode (a rename makes a new one), size, mtime."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)
