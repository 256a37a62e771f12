"""Adjudication (pytest_ragmetrics.annotate.adjudicate): agreements carried, disagreements settled."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_ragmetrics.annotate.adjudicate import compare_judgments, merge_notes, seed_adjudicated
from pytest_ragmetrics.annotate.judgments import Judgment, Judgments, JudgmentStore, read_judgments
from pytest_ragmetrics.errors import RagMetricsError
from pytest_ragmetrics.golden import load_golden
from pytest_ragmetrics.tools.candidates import read_candidates


def judged(annotator: str, pairs: dict[tuple[str, str], tuple[int, str]]) -> Judgments:
    j = Judgments(annotator, "pool-1", "pool.jsonl", "g")
    for (qid, doc), (rel, note) in pairs.items():
        j.set(qid, doc, rel, note)
    return j


A = judged("alice", {("q1", "a"): (2, "steps"), ("q1", "b"): (0, ""), ("q1", "c"): (0, "tyres"),
                     ("q2", "d"): (2, ""), ("q3", "f"): (1, "")})
B = judged("bob", {("q1", "a"): (2, "steps"), ("q1", "b"): (1, "pads matter"), ("q1", "c"): (0, "off topic"),
                   ("q2", "d"): (0, "too short"), ("q2", "e"): (0, "")})


def test_pairs_split_into_agreements_disagreements_and_one_sided(pool_path: Path) -> None:
    c = compare_judgments(read_candidates(pool_path), A, B)
    assert c.annotator == "adjudicated(alice,bob)"
    assert c.agreed == {("q1", "a"): Judgment(2, "steps"), ("q1", "c"): Judgment(0, "alice: tyres | bob: off topic")}
    # in the pool's order: questions as in the file, documents in display order (q1 shows b first)
    assert [(d.qid, d.doc_id, d.a.rel, d.b.rel, d.b.note) for d in c.disagreements] == [
        ("q1", "b", 0, 1, "pads matter"), ("q2", "d", 2, 0, "too short")]
    assert c.one_sided == {("q2", "e"): Judgment(0, ""), ("q3", "f"): Judgment(1, "")}


def test_seeding_carries_agreements_and_keeps_earlier_decisions(pool_path: Path) -> None:
    c = compare_judgments(read_candidates(pool_path), A, B)
    earlier = judged(c.annotator, {("q1", "b"): (1, "decided"), ("q1", "a"): (0, "stale: they agree now")})
    seeded = seed_adjudicated(c, earlier)
    assert seeded.pairs() == {
        ("q1", "a"): Judgment(2, "steps"), ("q1", "c"): Judgment(0, "alice: tyres | bob: off topic"),
        ("q1", "b"): Judgment(1, "decided"), ("q2", "e"): Judgment(0, ""), ("q3", "f"): Judgment(1, "")}
    assert seeded.get("q2", "d") is None  # still to decide


def test_the_adjudicated_file_is_a_judgments_file_and_golden(pool_path: Path, tmp_path: Path) -> None:
    pool = read_candidates(pool_path)
    c = compare_judgments(pool, A, B)
    store = JudgmentStore.open(tmp_path / "adj.jsonl", pool, annotator=c.annotator, candidates_label="pool.jsonl",
                               guidelines_sha256="g")
    seed_adjudicated(c, store.judgments)
    store.judge("q2", "d", 1, "partial after all")
    back = read_judgments(store.path, pool)
    assert back.annotator == "adjudicated(alice,bob)" and back.get("q2", "d") == Judgment(1, "partial after all")
    golden = load_golden(store.path)  # q1 b is still undecided: not in the file
    assert golden["q1"].judgments == {"a": 2, "c": 0} and golden["q2"].judgments == {"d": 1, "e": 0}


def test_one_annotator_twice_is_not_adjudication(pool_path: Path) -> None:
    with pytest.raises(RagMetricsError, match="two annotators"):
        compare_judgments(read_candidates(pool_path), A, A)


@pytest.mark.parametrize(
    ("a", "b", "merged"),
    [("", "", ""), ("x", "", "x"), ("", "y", "y"), ("same", " same ", "same"), ("x", "y", "A: x | B: y")],
)
def test_notes_merge_once(a: str, b: str, merged: str) -> None:
    assert merge_notes("A", a, "B", b) == merged
