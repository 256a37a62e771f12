"""Parent-chunk hit rate: hand-worked cases for the parent ranking, scoring and summary."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from pytest_ragmetrics import MeasurementConfig, RetrieverError
from pytest_ragmetrics.parents import parent_measures, parent_ranking, score_parents, summarize_parents
from pytest_ragmetrics.results import normalize_results


@dataclass
class Child:
    id: str
    parent_id: object = None
    score: float | None = None


def test_parent_ranking_keeps_result_order_and_lets_orphans_stand_for_themselves() -> None:
    assert parent_ranking(["c1", "c2", "c3"], ["P2", None, "P1"]) == ["P2", "c2", "P1"]


def test_parent_measures_are_the_configured_hit_rates_else_hit_rate_at_k() -> None:
    config = MeasurementConfig(("recall@10", "hit_rate@1", "hit_rate@5"))
    assert [str(m) for m in parent_measures(config, 10)] == ["hit_rate@1", "hit_rate@5"]
    assert [str(m) for m in parent_measures(MeasurementConfig(("ndcg@10",)), 7)] == ["hit_rate@7"]


def test_passage_labels_show_a_child_hit_whose_parent_lacks_the_answer() -> None:
    # The answer straddles parents P1 and P2: child P1/c3 holds half of it (grade 1), and
    # only the section S (grade 1, it holds all of it) is a complete context.
    judgments = {"P1/c3": 1, "S": 1}
    config = MeasurementConfig(("hit_rate@1", "hit_rate@3"), id_separator=None)
    levels = score_parents(["P1/c3", "x/c1", "y/c9"], ["P1", "x", "S"], judgments, config, k=10)
    assert levels == {"chunk": {"hit_rate@1": 1.0, "hit_rate@3": 1.0},
                      "parent": {"hit_rate@1": 0.0, "hit_rate@3": 1.0}}


def test_document_labels_agree_unless_the_parent_lookup_crosses_documents() -> None:
    config = MeasurementConfig(("hit_rate@2",))  # separator '#': chunk ids map to documents
    judgments = {"guide": 1}
    same = score_parents(["guide#3-9", "other#1-2"], ["guide#1-3", "other#1-1"], judgments, config, k=10)
    assert same == {"chunk": {"hit_rate@2": 1.0}, "parent": {"hit_rate@2": 1.0}}
    crossed = score_parents(["guide#3-9", "other#1-2"], ["manual#1-3", "other#1-1"], judgments, config, k=10)
    assert crossed == {"chunk": {"hit_rate@2": 1.0}, "parent": {"hit_rate@2": 0.0}}


def test_parents_are_deduplicated_so_a_repeated_parent_takes_one_rank() -> None:
    # Three children of P1 then one of P2: the parent ranking is [P1, P2], so P2 is at rank 2.
    config = MeasurementConfig(("hit_rate@2",), id_separator=None)
    levels = score_parents(["a", "b", "c", "d"], ["P1", "P1", "P1", "P2"], {"P2": 1}, config, k=10)
    assert levels == {"chunk": {"hit_rate@2": 0.0}, "parent": {"hit_rate@2": 1.0}}


def test_a_query_with_nothing_relevant_has_no_parent_level() -> None:
    config = MeasurementConfig(("hit_rate@5",))
    assert score_parents(["a"], ["P"], {"a": 0}, config, k=5) is None


def test_summary_means_and_disagreement_lists() -> None:
    levels = [
        ("q1", {"chunk": {"hit_rate@5": 1.0}, "parent": {"hit_rate@5": 0.0}}),
        ("q2", {"chunk": {"hit_rate@5": 1.0}, "parent": {"hit_rate@5": 1.0}}),
        ("q3", {"chunk": {"hit_rate@5": 0.0}, "parent": {"hit_rate@5": 1.0}}),
        ("q4", {"chunk": {"hit_rate@5": 1.0}, "parent": {"hit_rate@5": 0.0}}),
    ]
    summary = summarize_parents(levels)
    assert summary is not None
    assert (summary.n, summary.chunk, summary.parent) == (4, {"hit_rate@5": 0.75}, {"hit_rate@5": 0.5})
    assert summary.chunk_only == {"hit_rate@5": ["q1", "q4"]}
    assert summary.parent_only == {"hit_rate@5": ["q3"]}
    assert summary.to_dict()["metrics"]["hit_rate@5"]["chunk_hit_parent_missed"] == ["q1", "q4"]
    assert summarize_parents([]) is None


def test_normalize_reads_parent_ids_from_objects_only() -> None:
    returned = normalize_results([Child("c1", "P1"), ("c2", 0.5), "c3", Child("c4")], k=10)
    assert returned.parents == ["P1", None, None, None]
    assert len(returned.parents) == len(returned.ids)


def test_a_parent_id_that_is_not_text_names_the_query_and_rank() -> None:
    with pytest.raises(RetrieverError, match=r"query 'q7', result 2: parent_id 17 is a int, expected str or None"):
        normalize_results([Child("c1", "P1"), Child("c2", 17)], k=10, query_id="q7")
