"""Reciprocal rank fusion, checked by hand."""

from __future__ import annotations

import pytest

from pytest_ragmetrics.stack import reciprocal_rank_fusion


def test_hand_computed_scores_and_order() -> None:
    fused = reciprocal_rank_fusion({"bm25": ["a", "b", "c"], "vector": ["c", "a", "d"]}, k=60)
    scores = {item: score for item, score, _ in fused}
    assert scores["a"] == pytest.approx(1 / 61 + 1 / 62)  # 0.032522
    assert scores["c"] == pytest.approx(1 / 63 + 1 / 61)  # 0.032266
    assert scores["b"] == pytest.approx(1 / 62)
    assert scores["d"] == pytest.approx(1 / 63)
    assert [item for item, _, _ in fused] == ["a", "c", "b", "d"]
    assert fused[0][2] == {"bm25": 1, "vector": 2}
    assert fused[3][2] == {"vector": 3}


def test_two_weak_routes_beat_one_strong_route() -> None:
    # Why a larger fetch_k can lower MRR: bm25 #1 + vector #14 (1/61 + 1/74 = 0.0299)
    # outranks a chunk only the vector route found, at rank 1 (1/61 = 0.0164).
    vector = ["right"] + [f"v{i}" for i in range(2, 14)] + ["wrong"]
    fused = reciprocal_rank_fusion({"bm25": ["wrong"], "vector": vector})
    assert fused[0][0] == "wrong" and fused[0][1] == pytest.approx(0.029906, abs=1e-6)
    assert fused[1][0] == "right" and fused[1][1] == pytest.approx(1 / 61)
    # with the shorter vector pool (fetch_k = 10) the wrong chunk has one route only
    short = reciprocal_rank_fusion({"bm25": ["wrong"], "vector": vector[:10]})
    assert {short[0][0], short[1][0]} == {"wrong", "right"}
    assert short[0][1] == short[1][1] == pytest.approx(1 / 61)


def test_ties_are_deterministic_and_k_matters() -> None:
    fused = reciprocal_rank_fusion({"bm25": ["x"], "vector": ["y"]})
    assert [i for i, _, _ in fused] == ["x", "y"]  # equal scores and ranks: first route first
    k0 = reciprocal_rank_fusion({"bm25": ["a", "b"], "vector": ["b"]}, k=0)
    assert [(i, s) for i, s, _ in k0] == [
        ("b", pytest.approx(1 / 2 + 1)),
        ("a", pytest.approx(1.0)),
    ]


def test_duplicates_within_a_route_count_once() -> None:
    fused = reciprocal_rank_fusion({"bm25": ["a", "a", "b"]})
    assert [(i, r) for i, _, r in fused] == [("a", {"bm25": 1}), ("b", {"bm25": 3})]


def test_negative_k_rejected() -> None:
    with pytest.raises(ValueError):
        reciprocal_rank_fusion({"bm25": ["a"]}, k=-1)
