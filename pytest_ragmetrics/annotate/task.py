"""What the annotation page shows and changes, as plain data: the server only routes to it.

A :class:`Task` holds the questions as annotators see them (text, in the display
order, without ``found_by`` or ``ranks``: a system's name or rank must not sway a
grade), the store the judgments go to, and the guidelines. In adjudication it holds
only the disagreeing pairs, each with both annotators' grades and notes.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_ragmetrics.annotate.adjudicate import Comparison
from pytest_ragmetrics.annotate.judgments import GRADES, JudgmentStore, check_grade, check_note
from pytest_ragmetrics.errors import InputError, RagMetricsError, brief_repr
from pytest_ragmetrics.tools.candidates import Candidates

__all__ = ["DEFAULT_GUIDELINES", "GRADE_LABELS", "Shown", "ShownQuestion", "Task", "shown_questions"]

#: What each grade means, as the project's documentation defines it.
GRADE_LABELS = {2: "fully answers", 1: "partially relevant", 0: "not relevant"}

DEFAULT_GUIDELINES = """\
Grading guidelines

Judge each candidate against the question only: does this text answer it?

2 – fully answers: the text answers the question on its own; a reader needs nothing else.
1 – partially relevant: on the subject and part of the answer, or useful only together with other text.
0 – not relevant: does not help answer the question, even when it shares words or a topic with it.

- Judge what the text says, not how well it is written or where it might rank.
- Several candidates may deserve 2; grade each one on its own.
- Between two grades, choose the lower one and say why in the note.
- A note is for a reason a colleague might not guess.
- Skip a question you cannot judge yet: it stays open and comes back.
"""


@dataclass(frozen=True)
class Shown:
    """A candidate as the annotator sees it: no provenance."""

    doc_id: str
    title: str
    text: str


@dataclass(frozen=True)
class ShownQuestion:
    qid: str
    query: str
    tags: tuple[str, ...]
    docs: tuple[Shown, ...]  # display order


def shown_questions(pool: Candidates, corpus: str | Path | None = None) -> list[ShownQuestion]:
    """Each question with its candidates' text: the candidates file's ``text``, else the corpus
    document's. A candidate with neither stops here, before anything is served."""
    documents: dict[str, Any] = {}
    if corpus is not None:
        from pytest_ragmetrics.corpus import load_corpus

        documents = {d.doc_id: d for d in load_corpus(corpus)}
    out = []
    for q in pool.questions:
        docs = []
        for doc_id in q.order:
            cand = q.candidate(doc_id)
            found = documents.get(doc_id)
            text = cand.text if cand.text is not None else (found.text if found is not None else None)
            if text is None:
                where = f"qid {q.qid!r}, document {doc_id!r}"
                if corpus is None:
                    raise InputError(str(pool.path), where, "candidate has no text; pass --corpus PATH "
                                                            "(the corpus the pool was made from) to show it")
                raise InputError(str(pool.path), where, f"candidate has no text and is not in the corpus {corpus}")
            docs.append(Shown(doc_id, found.title if found is not None else "", text))
        out.append(ShownQuestion(q.qid, q.query, q.tags, tuple(docs)))
    return out


class Task:
    """One annotator's (or the adjudicator's) work over the questions, saved through ``store``."""

    def __init__(self, questions: list[ShownQuestion], store: JudgmentStore, guidelines: str,
                 comparison: Comparison | None = None) -> None:
        self.store = store
        self.guidelines = guidelines
        self.comparison = comparison
        if comparison is not None:  # only what the two annotators disagree on
            wanted: dict[str, set[str]] = {}
            for d in comparison.disagreements:
                wanted.setdefault(d.qid, set()).add(d.doc_id)
            questions = [ShownQuestion(q.qid, q.query, q.tags, tuple(s for s in q.docs if s.doc_id in wanted[q.qid]))
                         for q in questions if q.qid in wanted]
        self.questions = questions
        self._index = {q.qid: i for i, q in enumerate(questions)}
        self._lock = threading.Lock()

    @property
    def mode(self) -> str:
        return "annotate" if self.comparison is None else "adjudicate"

    # ------------------------------------------------------------------ reading

    def _judged(self, q: ShownQuestion) -> int:
        return sum(1 for s in q.docs if self.store.judgments.get(q.qid, s.doc_id) is not None)

    def start(self) -> int:
        """The first question not fully judged (0 when all are)."""
        with self._lock:
            return next((i for i, q in enumerate(self.questions) if self._judged(q) < len(q.docs)), 0)

    def _progress(self) -> dict[str, Any]:
        def blank() -> dict[str, int]:
            return {"judged": 0, "total": 0, "questions_done": 0, "questions": 0}

        total = blank()
        tags: dict[str, dict[str, int]] = {}
        for q in self.questions:
            judged = self._judged(q)
            for counts in [total, *(tags.setdefault(t, blank()) for t in q.tags)]:
                counts["judged"] += judged
                counts["total"] += len(q.docs)
                counts["questions"] += 1
                counts["questions_done"] += judged == len(q.docs)
        return {**total, "tags": [{"tag": t, **tags[t]} for t in sorted(tags)]}

    def progress(self) -> dict[str, Any]:
        """Judged/total candidates and complete/total questions, overall and per tag."""
        with self._lock:
            return self._progress()

    def state(self) -> dict[str, Any]:
        """What the page needs first: mode, guidelines, the question list, where to start."""
        start = self.start()
        with self._lock:
            state: dict[str, Any] = {
                "mode": self.mode,
                "annotator": self.store.judgments.annotator,
                "out": str(self.store.path),
                "guidelines": self.guidelines,
                "grades": [{"value": g, "label": GRADE_LABELS.get(g, str(g))} for g in sorted(GRADES, reverse=True)],
                "questions": [{"qid": q.qid, "tags": list(q.tags), "n": len(q.docs), "judged": self._judged(q)}
                              for q in self.questions],
                "start": start,
                "progress": self._progress(),
            }
            if self.comparison is not None:
                state["sides"] = [self.comparison.a.annotator, self.comparison.b.annotator]
            return state

    def question(self, index: int) -> dict[str, Any]:
        """One question with its candidates' text and current grades (and both sides when adjudicating)."""
        if not 0 <= index < len(self.questions):
            raise KeyError(index)
        q = self.questions[index]
        with self._lock:
            docs = []
            for s in q.docs:
                j = self.store.judgments.get(q.qid, s.doc_id)
                entry: dict[str, Any] = {"doc_id": s.doc_id, "title": s.title, "text": s.text,
                                         "rel": j.rel if j else None, "note": j.note if j else ""}
                if self.comparison is not None:
                    d = self.comparison.disagreement(q.qid, s.doc_id)
                    if d is not None:
                        entry["a"] = {"rel": d.a.rel, "note": d.a.note}
                        entry["b"] = {"rel": d.b.rel, "note": d.b.note}
                docs.append(entry)
            return {"index": index, "qid": q.qid, "query": q.query, "tags": list(q.tags), "candidates": docs}

    # ------------------------------------------------------------------ writing

    def judge(self, payload: Any) -> dict[str, Any]:
        """Apply ``{"qid", "doc_id", "rel" (0/1/2 or null to withdraw), "note"}``, saved before it returns."""
        if not isinstance(payload, dict):
            raise RagMetricsError("expected a JSON object {qid, doc_id, rel, note}")
        qid, doc_id, rel, note = (payload.get(k) for k in ("qid", "doc_id", "rel", "note"))
        if not isinstance(qid, str) or qid not in self._index:
            raise RagMetricsError(f"no question {brief_repr(qid)} here")
        index = self._index[qid]
        q = self.questions[index]
        if not isinstance(doc_id, str) or all(s.doc_id != doc_id for s in q.docs):
            raise RagMetricsError(f"no candidate {brief_repr(doc_id)} in question {qid!r} here")
        if rel is not None:
            check_grade(rel)
        note = check_note("" if note is None else note)
        with self._lock:
            self.store.judge(qid, doc_id, rel, note)
            return {"index": index, "judged": self._judged(q), "n": len(q.docs), "progress": self._progress()}
