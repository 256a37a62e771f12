"""What the page is given (pytest_ragmetrics.annotate.task): texts, order, no provenance, progress."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from annotate_helpers import QUESTIONS, write_pool

from pytest_ragmetrics.annotate import DEFAULT_GUIDELINES, Task, shown_questions
from pytest_ragmetrics.errors import InputError, RagMetricsError
from pytest_ragmetrics.tools.candidates import read_candidates


def test_candidates_come_in_display_order_without_provenance(make_task: Callable[..., Task]) -> None:
    task = make_task()
    q1 = task.question(0)
    assert [c["doc_id"] for c in q1["candidates"]] == ["b", "a", "c"]
    text = json.dumps([task.state(), *(task.question(i) for i in range(3))])
    assert "found_by" not in text and "ranks" not in text and "bm25" not in text and "vector" not in text


def test_the_default_guidelines_define_the_three_grades() -> None:
    assert "2 – fully answers" in DEFAULT_GUIDELINES
    assert "1 – partially relevant" in DEFAULT_GUIDELINES
    assert "0 – not relevant" in DEFAULT_GUIDELINES


def test_text_comes_from_the_corpus_when_the_candidates_have_none(tmp_path: Path) -> None:
    questions = [{"qid": "q1", "query": "x", "candidates": [{"doc_id": "a", "text": "given"}, {"doc_id": "b"}]}]
    pool = read_candidates(write_pool(tmp_path / "pool.jsonl", questions))
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"doc_id": "a", "title": "A", "text": "corpus a"}) + "\n"
                      + json.dumps({"doc_id": "b", "title": "Bee", "text": "corpus b"}) + "\n", encoding="utf-8")
    shown = shown_questions(pool, corpus)[0]
    assert [(s.doc_id, s.title, s.text) for s in shown.docs] == [("a", "A", "given"), ("b", "Bee", "corpus b")]


def test_missing_text_stops_before_serving_naming_file_question_and_document(tmp_path: Path) -> None:
    questions = [QUESTIONS[0], {"qid": "q9", "query": "x", "candidates": [{"doc_id": "a", "text": "t"},
                                                                          {"doc_id": "zz"}, {"doc_id": "yy"}]}]
    path = write_pool(tmp_path / "pool.jsonl", questions)
    with pytest.raises(InputError) as info:
        shown_questions(read_candidates(path))
    message = str(info.value)
    assert str(path) in message and "qid 'q9'" in message and "'zz'" in message and "--corpus" in message
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"doc_id": "zz", "text": "z"}) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match="'yy'.*not in the corpus"):
        shown_questions(read_candidates(path), corpus)


def test_progress_overall_and_per_tag(make_task: Callable[..., Task]) -> None:
    task = make_task()
    for doc, rel in (("a", 2), ("b", 0), ("c", 0), ("d", 1)):
        task.judge({"qid": "q1" if doc in "abc" else "q2", "doc_id": doc, "rel": rel, "note": ""})
    p = task.progress()
    assert (p["judged"], p["total"], p["questions_done"], p["questions"]) == (4, 7, 1, 3)
    assert p["tags"] == [
        {"tag": "hard", "judged": 0, "total": 2, "questions_done": 0, "questions": 1},
        {"tag": "smoke", "judged": 4, "total": 5, "questions_done": 1, "questions": 2},
        {"tag": "standard", "judged": 3, "total": 3, "questions_done": 1, "questions": 1},
    ]


def test_start_is_the_first_question_not_fully_judged(make_task: Callable[..., Task]) -> None:
    task = make_task()
    assert task.start() == 0
    for doc in "abc":
        task.judge({"qid": "q1", "doc_id": doc, "rel": 1})
    task.judge({"qid": "q3", "doc_id": "f", "rel": 1})
    assert make_task().start() == 1  # resumed from the file
    for doc in "de":
        task.judge({"qid": "q2", "doc_id": doc, "rel": 0})
    assert make_task().start() == 2


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ([], "JSON object"),
        ({"qid": "nope", "doc_id": "a", "rel": 1}, "no question"),
        ({"qid": "q1", "doc_id": "d", "rel": 1}, "no candidate 'd'"),
        ({"qid": "q1", "doc_id": "a", "rel": 7}, "a grade is one of"),
        ({"qid": "q1", "doc_id": "a", "rel": 1, "note": 5}, "a note is text"),
    ],
)
def test_bad_judgments_are_refused(make_task: Callable[..., Task], payload: object, message: str) -> None:
    task = make_task()
    with pytest.raises(RagMetricsError, match=message):
        task.judge(payload)
    assert not task.store.path.exists()
