"""The judgments file (pytest_ragmetrics.annotate.judgments): format, resume, refusals, atomic saves."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from annotate_helpers import QUESTIONS, write_pool

from pytest_ragmetrics.annotate.judgments import (
    KIND,
    FileChangedError,
    JudgmentStore,
    check_annotator,
    default_out,
    read_judgments,
)
from pytest_ragmetrics.cli import main
from pytest_ragmetrics.errors import InputError, RagMetricsError
from pytest_ragmetrics.golden import load_golden
from pytest_ragmetrics.tools.agreement import agreement
from pytest_ragmetrics.tools.candidates import read_candidates


def open_store(pool_path: Path, annotator: str = "alice", out: Path | None = None) -> JudgmentStore:
    return JudgmentStore.open(out or default_out(pool_path, annotator), read_candidates(pool_path),
                              annotator=annotator, candidates_label="pool.jsonl", guidelines_sha256="g1")


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_nothing_is_written_until_the_first_judgment(pool_path: Path) -> None:
    store = open_store(pool_path)
    assert store.path == pool_path.with_name("pool.alice.jsonl") and not store.resumed
    assert not store.path.exists()


def test_the_file_is_golden_jsonl_with_a_meta_line(pool_path: Path) -> None:
    store = open_store(pool_path)
    store.judge("q1", "a", 2, "steps")
    store.judge("q1", "b", 0)
    store.judge("q3", "g", 1, "dry only")
    meta, *records = lines(store.path)
    assert meta["_meta"]["kind"] == KIND
    assert {k: meta["_meta"][k] for k in ("annotator", "pool_id", "candidates", "guidelines_sha256")} == {
        "annotator": "alice", "pool_id": "pool-1", "candidates": "pool.jsonl", "guidelines_sha256": "g1"}
    assert meta["_meta"]["updated"].endswith("+00:00")
    # questions in file order, judged documents only, in display order (q1 shows b before a); every grade dated
    import datetime as dt

    day = dt.datetime.now(dt.timezone.utc).date().isoformat()
    assert records == [
        {"qid": "q1", "query": QUESTIONS[0]["query"], "tags": ["smoke", "standard"],
         "candidates": [{"doc_id": "b", "rel": 0, "note": "", "judged_at": day},
                        {"doc_id": "a", "rel": 2, "note": "steps", "judged_at": day}]},
        {"qid": "q3", "query": QUESTIONS[2]["query"], "tags": ["hard"],
         "candidates": [{"doc_id": "g", "rel": 1, "note": "dry only", "judged_at": day}]},
    ]
    golden = load_golden(store.path)  # what the plugin and `agreement` read
    assert [q.qid for q in golden] == ["q1", "q3"]
    assert golden["q1"].judgments == {"a": 2, "b": 0} and golden["q1"].tags == ("smoke", "standard")


def test_agreement_takes_two_annotators_files_directly(pool_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    alice, bob = open_store(pool_path, "alice"), open_store(pool_path, "bob")
    for doc, (a, b) in {"a": (2, 2), "b": (0, 1), "c": (0, 0)}.items():
        alice.judge("q1", doc, a)
        bob.judge("q1", doc, b)
    result = agreement(alice.path, bob.path)
    assert result.n == 3 and len(result.disagreements) == 1
    assert main(["agreement", str(alice.path), str(bob.path)]) == 0
    assert "n = 3" in capsys.readouterr().out


def test_resume_keeps_every_judgment_and_withdrawal(pool_path: Path) -> None:
    store = open_store(pool_path)
    store.judge("q1", "a", 2, "note ü 中文")
    store.judge("q2", "d", 1)
    store.judge("q2", "d", None)  # withdrawn: the question has no judgment left
    again = open_store(pool_path)
    assert again.resumed and again.previous_guidelines_sha256 == "g1"
    assert again.judgments.pairs() == {("q1", "a"): store.judgments.get("q1", "a")}
    assert again.judgments.get("q1", "a").note == "note ü 中文"
    assert [r.get("qid") for r in lines(store.path)] == [None, "q1"]


def test_another_pools_file_is_refused_naming_both_files(pool_path: Path, tmp_path: Path) -> None:
    store = open_store(pool_path)
    store.judge("q1", "a", 2)
    other = write_pool(tmp_path / "other.jsonl", meta={"_meta": {**json.loads(
        pool_path.read_text().splitlines()[0])["_meta"], "pool_id": "pool-2"}})
    with pytest.raises(InputError) as info:
        read_judgments(store.path, read_candidates(other))
    message = str(info.value)
    assert str(store.path) in message and str(other) in message and "pool.jsonl" in message
    assert "never mixed" in message and "--out" in message


def test_pool_identity_is_computed_when_the_candidates_have_no_meta(tmp_path: Path) -> None:
    bare = write_pool(tmp_path / "bare.jsonl", meta=None)
    store = open_store(bare)
    store.judge("q2", "e", 0)
    assert read_judgments(store.path, read_candidates(bare)).n_judged() == 1
    grown = write_pool(tmp_path / "bare.jsonl", meta=None, questions=[
        *QUESTIONS[:2], {**QUESTIONS[2], "order": ["f", "g", "h"],
                         "candidates": [*QUESTIONS[2]["candidates"], {"doc_id": "h", "text": "new"}]}])
    with pytest.raises(InputError, match="judges another pool"):  # a document was added: another pool
        read_judgments(store.path, read_candidates(grown))


def test_another_annotators_file_is_refused(pool_path: Path, tmp_path: Path) -> None:
    store = open_store(pool_path, "alice")
    store.judge("q1", "a", 1)
    with pytest.raises(InputError, match="judgments of 'alice', not 'bob'"):
        open_store(pool_path, "bob", out=store.path)


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"qid": "zz", "query": "x", "candidates": [{"doc_id": "a", "rel": 1}]}, "question 'zz' is not in"),
        ({"qid": "q1", "query": "x", "candidates": [{"doc_id": "d", "rel": 1}]}, "not a candidate of this question"),
        ({"qid": "q1", "query": "x", "candidates": [{"doc_id": "a", "rel": 3}]}, "a grade is one of 0, 1, 2"),
        ({"qid": "q1", "query": "x", "candidates": [{"doc_id": "a", "rel": True}]}, "a grade is one of"),
        ({"qid": "q1", "query": "x", "candidates": [{"doc_id": "a", "rel": 1}, {"doc_id": "a", "rel": 2}]},
         "judged twice"),
        ({"qid": "q1", "query": "x", "candidates": []}, "non-empty list"),
    ],
)
def test_a_bad_line_names_file_line_and_problem(pool_path: Path, tmp_path: Path, record: dict, message: str) -> None:
    path = tmp_path / "j.jsonl"
    meta = {"_meta": {"kind": KIND, "annotator": "alice", "pool_id": "pool-1"}}
    path.write_text(json.dumps(meta) + "\n" + json.dumps(record) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=message) as info:
        read_judgments(path, read_candidates(pool_path))
    assert "j.jsonl" in str(info.value)


def test_a_file_that_is_not_judgments_is_refused(pool_path: Path) -> None:
    with pytest.raises(InputError, match="not a judgments file"):
        read_judgments(pool_path, read_candidates(pool_path))  # the candidates file itself


def test_a_failed_save_leaves_file_and_memory_as_they_were(pool_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = open_store(pool_path)
    store.judge("q1", "a", 2, "kept")
    before = store.path.read_bytes()

    def full_disk(*args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full_disk)
    with pytest.raises(OSError):
        store.judge("q1", "a", 0, "lost")
    with pytest.raises(OSError):
        store.judge("q1", "b", 1)
    assert store.path.read_bytes() == before
    assert store.judgments.get("q1", "a").rel == 2 and store.judgments.get("q1", "b") is None
    assert [p.name for p in store.path.parent.iterdir() if p.name.endswith(".tmp")] == []


def test_a_file_changed_by_another_program_is_not_overwritten(pool_path: Path) -> None:
    store = open_store(pool_path)
    store.judge("q1", "a", 2)
    other = open_store(pool_path)  # a second window on the same file
    other.judge("q1", "b", 1)
    with pytest.raises(FileChangedError, match="changed by another program"):
        store.judge("q1", "c", 0)
    assert read_judgments(store.path, read_candidates(pool_path)).pairs().keys() == {("q1", "a"), ("q1", "b")}


def test_grades_and_notes_are_checked_before_anything_changes(pool_path: Path) -> None:
    store = open_store(pool_path)
    for rel, note in ((5, ""), ("2", ""), (1, "x" * 4001), (1, None)):
        with pytest.raises(RagMetricsError):
            store.judge("q1", "a", rel, note)  # type: ignore[arg-type]
    assert store.judgments.by_question == {} and not store.path.exists()


@pytest.mark.parametrize("name", ["alice", "a.b-c_d", "李雷", "Zoë2"])
def test_annotator_names_make_safe_file_names(name: str, pool_path: Path) -> None:
    assert check_annotator(name) == name
    assert default_out(pool_path, name) == pool_path.with_name(f"pool.{name}.jsonl")


@pytest.mark.parametrize("name", ["", "../x", "a/b", ".hidden", "a b", "x" * 65, "a\\b"])
def test_annotator_names_that_could_escape_the_folder_are_refused(name: str) -> None:
    with pytest.raises(RagMetricsError, match="annotator name"):
        check_annotator(name)


def test_a_closed_store_finishes_the_save_in_progress_and_refuses_more(pool_path: Path) -> None:
    store = open_store(pool_path)
    store.judge("q1", "a", 2)
    store.close()
    with pytest.raises(RagMetricsError, match="stopping"):
        store.judge("q1", "b", 1)
    assert read_judgments(store.path, read_candidates(pool_path)).pairs().keys() == {("q1", "a")}
