"""Metric kernels on hand-worked cases (pytest_ragmetrics.metrics), and the per-query
policies that sit on top of them in score_query/evaluate (id mapping, dedup, R == 0).

Every expected value below is written out as arithmetic, never produced by this package.
Discount: 1/log2(rank + 1), so rank 1 -> 1, rank 2 -> 1/log2(3), rank 3 -> 1/log2(4) = 1/2.
"""

from __future__ import annotations

from math import log2
from typing import Mapping, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_ragmetrics import MeasurementConfig, document_ranking, evaluate, judge, parse_measures, score, score_query
from pytest_ragmetrics.measures import MEASURE_NAMES

ALL_AT_3 = "recall@3 precision@3 hit_rate@3 mrr@3 ndcg@3 map@3"


def metrics(
    ranking: Sequence[str],
    judgments: Mapping[str, int],
    names: str,
    level: int = 1,
    gain: str = "linear",
) -> dict[str, float] | None:
    """Score a ranking used as given (no id mapping), straight through the kernels."""
    measures = parse_measures(names)
    return score(judge(ranking, judgments, level), measures, gain)


def approx(expected: Mapping[str, float]) -> object:
    return pytest.approx(dict(expected), rel=0, abs=1e-12)


# The worked example: ranking [d3, d1, d7], judgments {d1: 2, d7: 1, d9: 3}.
# Grades down the ranking: d3 -> 0 (unjudged), d1 -> 2, d7 -> 1.  d9 (grade 3) never came back.
RANKING = ["d3", "d1", "d7"]
JUDGMENTS = {"d1": 2, "d7": 1, "d9": 3}


def test_worked_example_level_1() -> None:
    # L = 1: relevant = {d1, d7, d9}, R = 3; relevant ranks: 2, 3.
    got = metrics(RANKING, JUDGMENTS, ALL_AT_3, level=1, gain="linear")
    assert got == approx(
        {
            "recall@3": 2 / 3,  # 2 of the 3 relevant in the top 3
            "precision@3": 2 / 3,  # 2 relevant / k = 3
            "hit_rate@3": 1.0,
            "mrr@3": 1 / 2,  # first relevant at rank 2
            # DCG  = 2/log2(3) + 1/log2(4);  ideal grades [3, 2, 1]: IDCG = 3/1 + 2/log2(3) + 1/log2(4)
            "ndcg@3": (2 / log2(3) + 1 / 2) / (3 + 2 / log2(3) + 1 / 2),  # = 1.76186 / 4.76186 = 0.369994
            # AP@3 = (P@2 + P@3) / R = (1/2 + 2/3) / 3 = 7/18
            "map@3": (1 / 2 + 2 / 3) / 3,
        }
    )
    assert got is not None and abs(got["ndcg@3"] - 0.369994) < 1e-6


def test_worked_example_exponential_gain() -> None:
    # gains 2^g - 1: d1 -> 3, d7 -> 1; ideal [3, 2, 1] -> [7, 3, 1]
    # DCG = 3/log2(3) + 1/2 = 2.39279; IDCG = 7 + 3/log2(3) + 1/2 = 9.39279
    got = metrics(RANKING, JUDGMENTS, "ndcg@3 ndcg@1 ndcg", gain="exponential")
    assert got == approx(
        {
            "ndcg@3": (3 / log2(3) + 1 / 2) / (7 + 3 / log2(3) + 1 / 2),  # = 0.254748...
            "ndcg@1": 0.0,  # rank 1 is d3, grade 0
            "ndcg": (3 / log2(3) + 1 / 2) / (7 + 3 / log2(3) + 1 / 2),  # nothing below rank 3
        }
    )
    assert got is not None and abs(got["ndcg@3"] - 0.254748) < 1e-6


def test_worked_example_level_2() -> None:
    # L = 2: relevant = {d1 (2), d9 (3)}, R = 2; d7 (grade 1) no longer counts. Relevant rank: 2.
    got = metrics(RANKING, JUDGMENTS, ALL_AT_3 + " precision@10", level=2)
    assert got == approx(
        {
            "recall@3": 1 / 2,
            "precision@3": 1 / 3,
            "precision@10": 1 / 10,
            "hit_rate@3": 1.0,
            "mrr@3": 1 / 2,
            # nDCG uses grades, not L: same as at L = 1
            "ndcg@3": (2 / log2(3) + 1 / 2) / (3 + 2 / log2(3) + 1 / 2),
            "map@3": (1 / 2) / 2,  # P@2 / R
        }
    )


def test_worked_example_level_3_and_4() -> None:
    # L = 3: only d9 is relevant and it is not ranked: everything 0 except nDCG.
    got = metrics(RANKING, JUDGMENTS, ALL_AT_3, level=3)
    assert got == approx(
        {
            "recall@3": 0.0,
            "precision@3": 0.0,
            "hit_rate@3": 0.0,
            "mrr@3": 0.0,
            "ndcg@3": (2 / log2(3) + 1 / 2) / (3 + 2 / log2(3) + 1 / 2),
            "map@3": 0.0,
        }
    )
    # L = 4: nothing is relevant; the query cannot be scored (None, not 0), nDCG included.
    assert metrics(RANKING, JUDGMENTS, ALL_AT_3, level=4) is None


def test_cutoffs_cut() -> None:
    got = metrics(RANKING, JUDGMENTS, "recall@1 recall@2 hit_rate@1 hit_rate@2 mrr@1 mrr@2 precision@2 map@2 ndcg@2")
    assert got == approx(
        {
            "recall@1": 0.0,
            "recall@2": 1 / 3,
            "hit_rate@1": 0.0,
            "hit_rate@2": 1.0,
            "mrr@1": 0.0,  # first relevant is at rank 2 > 1
            "mrr@2": 1 / 2,
            "precision@2": 1 / 2,
            "map@2": (1 / 2) / 3,
            # ideal cut at 2: [3, 2]
            "ndcg@2": (2 / log2(3)) / (3 + 2 / log2(3)),
        }
    )


def test_precision_divides_by_k_even_when_fewer_came_back() -> None:
    # 3 documents returned, 2 relevant: P@10 = 2/10, not 2/3.
    got = metrics(RANKING, JUDGMENTS, "precision@10 precision@3 recall@10")
    assert got == approx({"precision@10": 2 / 10, "precision@3": 2 / 3, "recall@10": 2 / 3})


def test_fewer_than_k() -> None:
    # ranking [d1] only: grade 2 at rank 1.
    got = metrics(["d1"], JUDGMENTS, "recall@10 precision@10 hit_rate@10 mrr@10 ndcg@10 map@10")
    assert got == approx(
        {
            "recall@10": 1 / 3,
            "precision@10": 1 / 10,
            "hit_rate@10": 1.0,
            "mrr@10": 1.0,
            "ndcg@10": 2 / (3 + 2 / log2(3) + 1 / 2),  # ideal: all three judged grades
            "map@10": (1 / 1) / 3,
        }
    )


def test_empty_ranking_scores_zero_when_something_is_relevant() -> None:
    got = metrics([], JUDGMENTS, ALL_AT_3 + " mrr ndcg map")
    assert got == approx({name: 0.0 for name in ALL_AT_3.split() + ["mrr", "ndcg", "map"]})


def test_perfect_ranking_scores_one() -> None:
    got = metrics(["d9", "d1", "d7"], JUDGMENTS, ALL_AT_3 + " ndcg map mrr", gain="exponential")
    assert got == approx(
        {
            "recall@3": 1.0,
            "precision@3": 1.0,
            "hit_rate@3": 1.0,
            "mrr@3": 1.0,
            "ndcg@3": 1.0,
            "map@3": 1.0,
            "ndcg": 1.0,
            "map": 1.0,
            "mrr": 1.0,
        }
    )


def test_wrong_grade_order_is_below_one() -> None:
    # [d7, d1, d9]: grades 1, 2, 3 (reversed ideal). Linear: DCG = 1 + 2/log2(3) + 3/2
    got = metrics(["d7", "d1", "d9"], JUDGMENTS, "ndcg@3 recall@3 map@3")
    assert got == approx(
        {"ndcg@3": (1 + 2 / log2(3) + 3 / 2) / (3 + 2 / log2(3) + 1 / 2), "recall@3": 1.0, "map@3": 1.0}
    )


def test_uncut_measures_see_the_whole_ranking() -> None:
    # 14 non-relevant documents, then the only relevant one at rank 15, then one more relevant at 20.
    ranking = [f"n{i}" for i in range(14)] + ["gold"] + [f"m{i}" for i in range(4)] + ["gold2"]
    judgments = {"gold": 1, "gold2": 1, "n3": 0}
    got = metrics(ranking, judgments, "mrr mrr@10 mrr@15 recall recall@10 map ndcg")
    assert got == approx(
        {
            "mrr": 1 / 15,
            "mrr@10": 0.0,
            "mrr@15": 1 / 15,
            "recall": 1.0,
            "recall@10": 0.0,
            "map": (1 / 15 + 2 / 20) / 2,
            "ndcg": (1 / log2(16) + 1 / log2(21)) / (1 + 1 / log2(3)),
        }
    )


def test_judged_non_relevant_documents_count_as_misses() -> None:
    # grade 0 = judged not relevant: not in R, not in the ideal, no gain.
    judgments = {"a": 0, "b": 1, "c": 0}
    got = metrics(["a", "c", "b"], judgments, "recall@3 precision@3 mrr@3 ndcg@3 map@3")
    assert got == approx(
        {
            "recall@3": 1.0,
            "precision@3": 1 / 3,
            "mrr@3": 1 / 3,
            "ndcg@3": (1 / log2(4)) / 1,  # ideal is [1] alone
            "map@3": 1 / 3,
        }
    )


def test_ndcg_ideal_includes_grades_below_the_relevance_level() -> None:
    # nDCG ignores L: the grade-1 document still belongs to the ideal at L = 2.
    # ranking [x (2)], judgments {x: 2, y: 1}: DCG = 2, IDCG = 2 + 1/log2(3).
    got = metrics(["x"], {"x": 2, "y": 1}, "ndcg@5 recall@5", level=2)
    assert got == approx({"ndcg@5": 2 / (2 + 1 / log2(3)), "recall@5": 1.0})
    # and a ranking that only holds below-level documents still gets nDCG credit
    got = metrics(["y"], {"x": 2, "y": 1}, "ndcg@5 recall@5 hit_rate@5", level=2)
    assert got == approx({"ndcg@5": (1 / log2(2)) / (2 + 1 / log2(3)), "recall@5": 0.0, "hit_rate@5": 0.0})


def test_all_zero_judgments_return_none_not_zero() -> None:
    # Nothing relevant to find: the query is not scorable. A 0 here would be a silent lie.
    assert metrics(["a", "b"], {"a": 0, "b": 0}, ALL_AT_3) is None
    assert metrics([], {"a": 0}, "ndcg@10") is None
    assert metrics(["a"], {}, "ndcg@10") is None
    # below the relevance level counts as nothing relevant, too
    assert metrics(["a"], {"a": 1, "b": 1}, "recall@10", level=2) is None


def test_judge_records_where_the_judged_documents_landed() -> None:
    judged = judge(["d3", "d1", "d7", "d2"], {"d1": 2, "d7": 1, "d9": 3, "d2": 0}, relevance_level=2)
    assert judged.graded == [(1, 2), (2, 1)]  # 0-based position, grade > 0
    assert judged.relevant_ranks == [2]  # 1-based ranks with grade >= 2
    assert list(judged.ideal) == [3, 2, 1]
    assert judged.n_relevant == 2
    assert judged.n_ranked == 4


def test_judge_depth_limits_what_is_looked_at() -> None:
    judged = judge(["a", "b", "c"], {"c": 1}, depth=2)
    assert judged.graded == [] and judged.relevant_ranks == []
    assert judged.n_ranked == 3  # the ranking still held 3 documents


def test_score_keys_are_canonical_names_in_order() -> None:
    got = metrics(RANKING, JUDGMENTS, "P@3 success@3 recip_rank ndcg_cut@3")
    assert got is not None
    assert list(got) == ["precision@3", "hit_rate@3", "mrr", "ndcg@3"]


# ------------------------------------------------------------- chunk ids and dedup


def test_document_ranking_maps_chunks_and_keeps_first() -> None:
    ids = ["doc#1-3", "doc#2-3", "other#1-1", "doc", "third#2-2", "other#1-1"]
    assert document_ranking(ids, "#") == ["doc", "other", "third"]


def test_document_ranking_splits_at_the_first_separator_only() -> None:
    assert document_ranking(["a#b#1-2", "a#c"], "#") == ["a"]
    assert document_ranking(["guide::2-3", "guide::1-3", "faq::1-1"], "::") == ["guide", "faq"]


def test_document_ranking_without_separator_only_dedups() -> None:
    assert document_ranking(["doc#1-3", "doc#2-3", "doc#1-3"], None) == ["doc#1-3", "doc#2-3"]
    assert document_ranking(["doc#1-3", "doc#1-3"], "") == ["doc#1-3"]
    assert document_ranking([], "#") == []


def test_ten_chunks_of_the_one_gold_document_do_not_exceed_one() -> None:
    config = MeasurementConfig(measures=("recall@10", "precision@10", "hit_rate@10", "mrr@10", "ndcg@10", "map@10"))
    chunks = [f"gold#{i}-10" for i in range(1, 11)]
    docs, got = score_query(chunks, {"gold": 1}, config)
    assert docs == ["gold"]
    # one distinct document came back: recall 1, precision 1 relevant / k = 10
    assert got == approx(
        {"recall@10": 1.0, "precision@10": 1 / 10, "hit_rate@10": 1.0, "mrr@10": 1.0, "ndcg@10": 1.0, "map@10": 1.0}
    )


def test_duplicates_never_push_a_metric_above_one() -> None:
    # Without dedup, g would earn gain at ranks 1, 2 and 4 over an ideal of one document (nDCG > 1).
    config = MeasurementConfig(measures=("recall@5", "ndcg@5", "map@5", "precision@5"), id_separator=None)
    docs, got = score_query(["g", "g", "x", "g"], {"g": 2}, config)
    assert docs == ["g", "x"]
    assert got == approx({"recall@5": 1.0, "ndcg@5": 1.0, "map@5": 1.0, "precision@5": 1 / 5})


def test_dedup_happens_before_the_cutoff() -> None:
    # 3 chunks of a, then b: after mapping, b is at rank 2, inside the top 2.
    config = MeasurementConfig(measures=("recall@2", "mrr@2"))
    docs, got = score_query(["a#1", "a#2", "a#3", "b#1"], {"b": 1}, config)
    assert docs == ["a", "b"]
    assert got == approx({"recall@2": 1.0, "mrr@2": 1 / 2})


def test_chunk_ids_are_judged_as_documents() -> None:
    # ranking [x#1, d1#4, d7#2] maps to [x, d1, d7]: the worked example at level 1.
    config = MeasurementConfig(measures=("ndcg@3", "map@3"), gain="linear")
    docs, got = score_query(["x#1-2", "d1#4-9", "d7#2-2", "d1#1-9"], JUDGMENTS, config)
    assert docs == ["x", "d1", "d7"]
    assert got == approx({"ndcg@3": (2 / log2(3) + 1 / 2) / (3 + 2 / log2(3) + 1 / 2), "map@3": 7 / 18})


@settings(max_examples=200, deadline=None, database=None, derandomize=True)
@given(
    ranking=st.lists(st.sampled_from([f"d{i}#{j}" for i in range(6) for j in range(3)] + ["u1", "u2"]), max_size=40),
    grades=st.dictionaries(st.sampled_from([f"d{i}" for i in range(8)]), st.integers(0, 4), max_size=8),
    level=st.integers(1, 3),
    gain=st.sampled_from(["linear", "exponential"]),
)
def test_no_metric_leaves_zero_one(ranking: list[str], grades: dict[str, int], level: int, gain: str) -> None:
    config = MeasurementConfig(
        measures=(*(f"{name}@5" for name in MEASURE_NAMES), "mrr", "ndcg", "map", "recall@100"),
        relevance_level=level,
        gain=gain,
    )
    docs, got = score_query(ranking, grades, config)
    assert len(docs) == len(set(docs))
    if not any(g >= level for g in grades.values()):
        assert got is None
        return
    assert got is not None
    for name, value in got.items():
        assert 0.0 <= value <= 1.0 + 1e-12, (name, value)
    # hit_rate@k is 1 exactly when mrr@k > 0 and when recall@k > 0
    assert (got["hit_rate@5"] == 1.0) == (got["mrr@5"] > 0) == (got["recall@5"] > 0)


# ------------------------------------------------------------------- evaluate()


def test_evaluate_lists_unscorable_queries_and_leaves_them_out_of_the_mean() -> None:
    config = MeasurementConfig(measures=("recall@2",), id_separator=None)
    qrels = {"q1": {"a": 1}, "q2": {"b": 0}, "q3": {"c": 1, "d": 1}}
    run = {"q1": ["a"], "q2": ["b"], "q3": ["c", "x"]}
    result = evaluate(run, qrels, config)
    assert result.unscorable == ["q2"]
    assert set(result.per_query) == {"q1", "q3"}
    assert result.n == 2
    assert result.aggregate == approx({"recall@2": (1 + 1 / 2) / 2})  # q2 is not a 0 in the mean


def test_evaluate_missing_queries_zero_or_skip() -> None:
    config = MeasurementConfig(measures=("hit_rate@1",), id_separator=None)
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 1}}
    run = {"q1": ["a"], "q2": ["b"], "unjudged": ["z"]}
    zero = evaluate(run, qrels, config)
    assert zero.missing == ["q3"]
    assert zero.per_query["q3"] == {"hit_rate@1": 0.0}
    assert zero.aggregate == approx({"hit_rate@1": 2 / 3})
    assert "unjudged" not in zero.per_query  # queries without judgments are ignored, as trec_eval does
    skip = evaluate(run, qrels, config, missing="skip")
    assert skip.missing == ["q3"]
    assert set(skip.per_query) == {"q1", "q2"}
    assert skip.aggregate == approx({"hit_rate@1": 1.0})
    with pytest.raises(ValueError):
        evaluate(run, qrels, config, missing="drop")


def test_evaluate_reports_short_rankings_after_dedup() -> None:
    config = MeasurementConfig(measures=("recall@3",))
    qrels = {"q1": {"a": 1}, "q2": {"a": 1}}
    run = {"q1": ["a#1", "a#2", "a#3"], "q2": ["a", "b", "c", "d"]}
    result = evaluate(run, qrels, config)
    assert result.short == {"q1": 1}  # 3 chunks, 1 document: fewer than k = 3


def test_evaluate_uses_the_gain_and_level_of_the_config() -> None:
    qrels = {"q": JUDGMENTS}
    run = {"q": RANKING}
    linear = evaluate(run, qrels, MeasurementConfig(measures=("ndcg@3", "recall@3"), gain="linear", relevance_level=2))
    exponential = evaluate(run, qrels, MeasurementConfig(measures=("ndcg@3",), gain="exponential"))
    assert linear.per_query["q"] == approx({"ndcg@3": (2 / log2(3) + 1 / 2) / (3 + 2 / log2(3) + 1 / 2), "recall@3": 1 / 2})
    assert exponential.per_query["q"] == approx({"ndcg@3": (3 / log2(3) + 1 / 2) / (7 + 3 / log2(3) + 1 / 2)})


def test_evaluate_mean_does_not_depend_on_query_order() -> None:
    config = MeasurementConfig(measures=("mrr@10",), id_separator=None)
    qrels = {f"q{i}": {"g": 1} for i in range(50)}
    run = {f"q{i}": [f"x{j}" for j in range(i % 7)] + ["g"] for i in range(50)}
    forward = evaluate(run, qrels, config).aggregate
    backward = evaluate(run, dict(reversed(list(qrels.items()))), config).aggregate
    assert forward == backward  # bit for bit (fsum)
    # by hand: rank of g is (i % 7) + 1 for i in 0..49; 50 = 7*7 + 1, so i % 7 runs 0..6 seven times, then 0
    expected = (7 * sum(1 / r for r in range(1, 8)) + 1) / 50
    assert forward == approx({"mrr@10": expected})


def test_evaluate_empty_qrels_gives_empty_aggregate() -> None:
    result = evaluate({"q": ["a"]}, {}, MeasurementConfig())
    assert result.n == 0 and result.aggregate == {} and result.to_dict() == {"aggregate": {}, "per_query": {}}
