"""The candidates file contract (pytest_ragmetrics.tools.candidates), shared by pool and annotate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_ragmetrics.errors import InputError
from pytest_ragmetrics.golden import load_golden
from pytest_ragmetrics.tools.candidates import display_order, pool_identity, read_candidates

META = {"_meta": {"kind": "ragmetrics-candidates", "version": 1, "seed": 7, "depth": 2}}


def write(path: Path, *records: object) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def test_display_order_is_a_seeded_per_question_shuffle() -> None:
    docs = [f"d{i}" for i in range(12)]
    first = display_order("q1", docs, seed=7)
    assert sorted(first) == sorted(docs) and first != sorted(docs)
    assert display_order("q1", docs[::-1], seed=7) == first  # the pooled order does not leak through
    assert display_order("q2", docs, seed=7) != first  # each question has its own order
    assert display_order("q1", docs, seed=8) != first


def test_pool_identity_follows_content_not_order() -> None:
    a = pool_identity([("q1", ["a", "b"]), ("q2", ["c"])])
    assert pool_identity([("q2", ["c"]), ("q1", ["b", "a"])]) == a
    assert pool_identity([("q1", ["a", "b", "x"]), ("q2", ["c"])]) != a


def test_read_candidates_and_load_as_golden_once_judged(tmp_path: Path) -> None:
    path = write(tmp_path / "c.jsonl", META,
                 {"qid": "q1", "query": "咖啡水温", "tags": ["smoke"], "order": ["b", "a"],
                  "candidates": [{"doc_id": "a", "text": "<b>x</b>", "rel": 1, "found_by": ["bm25"],
                                  "ranks": {"bm25": 1}},
                                 {"doc_id": "b", "rel": 0}]})
    c = read_candidates(path)
    assert c.meta["seed"] == 7 and c.question("q1").order == ["b", "a"]
    assert c.pool_id == pool_identity([("q1", ["a", "b"])])
    assert c.question("q1").candidate("a").text == "<b>x</b>"
    golden = load_golden(path)  # the _meta line is not a question
    assert [q.qid for q in golden] == ["q1"] and golden.queries[0].judgments == {"a": 1, "b": 0}


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"qid": "q1", "query": "x", "candidates": [{"doc_id": "a"}, {"doc_id": "a"}]}, "pooled twice"),
        ({"qid": "q1", "query": "x", "order": ["a", "z"], "candidates": [{"doc_id": "a"}, {"doc_id": "b"}]},
         "order must list each candidate"),
        ({"qid": "q1", "query": "x", "candidates": [{"doc_id": "a", "rel": "2"}]}, "rel must be null or an integer"),
        ({"qid": "", "query": "x", "candidates": []}, "qid must be a non-empty string"),
    ],
)
def test_bad_candidates_name_the_file_line_and_problem(tmp_path: Path, record: dict, message: str) -> None:
    path = write(tmp_path / "c.jsonl", META, record)
    with pytest.raises(InputError, match=message) as info:
        read_candidates(path)
    assert "c.jsonl" in str(info.value) and "line 2" in str(info.value)


def test_meta_must_come_first(tmp_path: Path) -> None:
    path = write(tmp_path / "c.jsonl", {"qid": "q1", "query": "x", "candidates": []}, META)
    with pytest.raises(InputError, match="_meta must be the first line"):
        read_candidates(path)
