"""Fusion of routes (reciprocal rank, weighted, convex), checked by hand."""

from __future__ import annotations

import re

import pytest

from pytest_ragmetrics.stack import reciprocal_rank_fusion
from pytest_ragmetrics.stack.fusion import convex_fusion, parse_route_weights


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


# ------------------------------------------------------------------ weighted RRF

def test_route_weights_scale_each_route_and_can_silence_one() -> None:
    rankings = {"bm25": ["a", "b"], "vector": ["b", "c"]}
    fused = reciprocal_rank_fusion(rankings, k=60, weights={"bm25": 1.0, "vector": 0.5})
    scores = {item: score for item, score, _ in fused}
    assert scores["a"] == pytest.approx(1 / 61)
    assert scores["b"] == pytest.approx(1 / 62 + 0.5 / 61)
    assert scores["c"] == pytest.approx(0.5 / 62)
    # weight 0: the vector route adds nothing, so the order is BM25's (c last, at 0)
    silenced = reciprocal_rank_fusion(rankings, weights={"vector": 0})
    assert [i for i, _, _ in silenced] == ["a", "b", "c"]
    assert silenced[2][1] == 0.0


@pytest.mark.parametrize("weights, message", [
    ({"bm25": -1}, "must be a finite number >= 0"),
    ({"bm25": float("nan")}, "must be a finite number >= 0"),
    ({"bm25": 0, "vector": 0}, "at least one route weight must be above 0"),
    ({"colbert": 1}, "unknown routes ['colbert']"),
])
def test_bad_route_weights_are_refused(weights: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        reciprocal_rank_fusion({"bm25": ["a"], "vector": ["b"]}, weights=weights)


# ------------------------------------------------------------------ convex combination

def test_convex_minmax_by_hand() -> None:
    # bm25 scores 10, 6, 2 -> 1, 0.5, 0; vector 0.9, 0.5 -> 1, 0; missing -> 0; weights 0.5 / 0.5
    scored = {"bm25": [("a", 10.0), ("b", 6.0), ("c", 2.0)], "vector": [("c", 0.9), ("d", 0.5)]}
    fused = convex_fusion(scored)
    scores = {item: score for item, score, _ in fused}
    assert scores == pytest.approx({"a": 0.5, "b": 0.25, "c": 0.5, "d": 0.0})
    # a and c tie at 0.5: both have a rank-1 appearance; a came first (the route listed first)
    assert [i for i, _, _ in fused] == ["a", "c", "b", "d"]
    assert dict((i, r) for i, _, r in fused)["c"] == {"bm25": 3, "vector": 1}


def test_convex_weights_are_scaled_to_sum_to_one() -> None:
    scored = {"bm25": [("a", 3.0), ("b", 1.0)], "vector": [("b", 0.8), ("a", 0.2)]}
    heavy_bm25 = convex_fusion(scored, weights={"bm25": 3, "vector": 1})
    assert {i: s for i, s, _ in heavy_bm25} == pytest.approx({"a": 0.75, "b": 0.25})
    assert {i: s for i, s, _ in convex_fusion(scored, weights={"bm25": 0.3, "vector": 0.1})} == \
        pytest.approx({"a": 0.75, "b": 0.25})


def test_convex_zscore_by_hand() -> None:
    # bm25 scores 3, 1: mean 2, std 1 -> +1, -1; vector 0.4 alone: std 0 -> 0; missing -> the route's lowest
    scored = {"bm25": [("a", 3.0), ("b", 1.0)], "vector": [("b", 0.4)]}
    fused = convex_fusion(scored, normalisation="zscore")
    assert {i: s for i, s, _ in fused} == pytest.approx({"a": 0.5 * 1 + 0.5 * 0, "b": 0.5 * -1 + 0.5 * 0})


def test_convex_counts_a_repeated_item_once_at_its_best_rank() -> None:
    fused = convex_fusion({"bm25": [("a", 5.0), ("a", 1.0), ("b", 3.0)]})
    assert [(i, r) for i, _, r in fused] == [("a", {"bm25": 1}), ("b", {"bm25": 3})]
    assert fused[0][1] == pytest.approx(1.0) and fused[1][1] == pytest.approx(0.0)


def test_convex_refuses_a_non_finite_score_and_an_unknown_normalisation() -> None:
    with pytest.raises(ValueError, match="fusion needs finite scores"):
        convex_fusion({"bm25": [("a", float("inf"))]})
    with pytest.raises(ValueError, match="minmax or zscore"):
        convex_fusion({"bm25": [("a", 1.0)]}, normalisation="rank")


@pytest.mark.parametrize("text, expected", [
    ("bm25=1,vector=0.5", {"bm25": 1.0, "vector": 0.5}),
    ("1:0.25", {"bm25": 1.0, "vector": 0.25}),
    ("", {}),
])
def test_route_weights_parse(text: str, expected: dict[str, float]) -> None:
    assert parse_route_weights(text) == expected


def test_route_weights_that_do_not_parse_say_the_format() -> None:
    with pytest.raises(ValueError, match="bm25=1,vector=0.5"):
        parse_route_weights("heavy")
