"""Degraded queries, errors, batching, id mapping, unscorable queries, determinism."""

from __future__ import annotations

import json
import re

import pytest

from ragproject import (
    GATES_DEFAULT,
    QIDS,
    RagProject,
    dcg,
    drop_line,
    entry,
    ids_with,
    outcomes,
    rag_summary,
    worst_list,
)

# q-002 loses chain-clean (recall 1 -> 1/2), q-004 loses both gold documents (recall 1 -> 0),
# q-006 keeps only cassette, at rank 2 (recall 1 -> 1/3).
DEGRADED = {
    "q_002": ["chain-lube#1-2", "noise-doc"],
    "q_004": ["brake-pads", "tire-repair#3-3"],
    "q_006": ["noise-doc", "cassette#1-2", "cassette#2-2"],
}


def test_degraded_queries_fail_and_are_named_worst_first(baselined: RagProject) -> None:
    baselined.answer(**DEGRADED)
    result = baselined.run()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert ids_with(result, "failed") == [
        "golden.yaml::gate::recall@10", "golden.yaml::q-002", "golden.yaml::q-004", "golden.yaml::q-006"]
    assert ids_with(result, "passed") == [
        "golden.yaml::gate::baseline", "golden.yaml::gate::coverage", "golden.yaml::gate::significant-drops",
        "golden.yaml::q-001",
        "golden.yaml::q-003", "golden.yaml::q-005"]

    summary = rag_summary(result)
    assert summary.startswith("RETRIEVAL GATE FAILED")
    # exactly the degraded queries, largest recall drop first
    assert worst_list(summary) == ["q-004", "q-006", "q-002"]
    assert "Worst regressed queries (3 of 3, largest drop first):" in summary

    recall_now = (1 + 0.5 + 1 + 0 + 1 + 1 / 3) / 6
    assert (f"gate recall@10: recall@10 fell {1 - recall_now:.4f} against the baseline "
            f"(1.0000 -> {recall_now:.4f}); allowed drop 0") in summary
    assert re.search(rf"\| recall@10 +\| 1\.0000 +\| {recall_now:.4f} +\| {recall_now - 1:+.4f} +\|[^|]*\|[^|]*\| 0 +\| — +\| FAIL: drop",
                     summary)

    q004 = entry(summary, "q-004")
    assert "q-004  'adjusting the rear derailleur'" in q004
    assert re.search(drop_line("recall@10", 1, 0, "beyond tolerance 0"), q004)
    assert re.search(drop_line("hit_rate@10", 1, 0, "not gated per query"), q004)
    assert re.search(drop_line("mrr@10", 1, 0, "not gated per query"), q004)
    assert re.search(drop_line("ndcg@10", 1, 0, "not gated per query"), q004)
    assert "gold:     derailleur (1), shifter-cable (1)" in q004
    assert re.search(r"returned: 1\. brake-pads\n\s+2\. tire-repair\n", q004)

    q006 = entry(summary, "q-006")
    ndcg_006 = dcg([0, 1]) / dcg([1, 1, 1])
    assert re.search(drop_line("recall@10", 1, 1 / 3, "beyond tolerance 0"), q006)
    assert re.search(drop_line("mrr@10", 1, 0.5, "not gated per query"), q006)
    assert re.search(drop_line("ndcg@10", 1, ndcg_006, "not gated per query"), q006)
    assert "hit_rate@10" not in q006  # still a hit: no drop to list
    assert "gold:     cassette (1), chain-clean (1), degreaser (1)" in q006
    # chunks mapped to documents and deduplicated: cassette appears once, marked gold
    assert re.search(r"returned: 1\. noise-doc\n\s+2\.\*cassette\n", q006)
    assert "3." not in q006.split("returned:")[1]

    q002 = entry(summary, "q-002")
    baseline_ndcg = dcg([1, 0, 1]) / dcg([1, 1])
    assert re.search(drop_line("recall@10", 1, 0.5, "beyond tolerance 0"), q002)
    assert re.search(drop_line("ndcg@10", baseline_ndcg, dcg([1, 0]) / dcg([1, 1]), "not gated per query"), q002)
    assert "mrr@10" not in q002  # first result still relevant

    # each failing item tells its own story too
    failures = result.stdout.str().split("= FAILURES =", 1)[1].split("= ragmetrics =", 1)[0]
    q004_item = failures.split("rag query q-004", 1)[1].split("rag query q-006", 1)[0]
    assert re.search(drop_line("recall@10", 1, 0, "beyond tolerance 0"), q004_item)
    assert "gold:     derailleur (1), shifter-cable (1)" in q004_item
    assert "  q-004  'adjusting the rear derailleur'" in q004_item and "1. q-004" not in q004_item  # one query: no number


def test_per_tag_table_shows_each_stratum(baselined: RagProject) -> None:
    baselined.answer(**DEGRADED)
    summary = rag_summary(baselined.run())
    # standard: q-001 1, q-002 .5, q-004 0 -> 0.5; paraphrase: q-003 1, q-005 1, q-006 1/3
    # paired sign-flip p over deltas (0, -0.5, -1): 2 of 4 sign patterns are as extreme -> 0.5
    assert re.search(r"\| standard +\| 3 \| 0\.5000 +\| -0\.5000 p=0\.500 +\|", summary)
    # (a drop smaller than 1/n of the stratum is flagged as such)
    assert re.search(r"\| paraphrase +\| 3 \| 0\.7778 +\| -0\.2222 \(<1/n\) p=1\.000 +\|", summary)
    assert re.search(r"\| smoke +\| 3 \| 0\.7778 +\| -0\.2222 \(<1/n\) p=1\.000 +\|", summary)


def test_restoring_the_rankings_makes_it_pass_again(baselined: RagProject) -> None:
    baselined.answer(**DEGRADED)
    assert baselined.run().ret == pytest.ExitCode.TESTS_FAILED
    baselined.restore()
    assert baselined.run().ret == pytest.ExitCode.OK


def test_a_metric_drop_without_recall_drop_passes_by_default(baselined: RagProject) -> None:
    # q-001's gold document falls from rank 1 to rank 3: MRR and nDCG drop, recall does not
    baselined.answer(q_001=["noise-doc", "tube-patch", "tire-repair#1-3"])
    result = baselined.run()
    assert result.ret == pytest.ExitCode.OK
    summary = rag_summary(result)
    assert "No query fell beyond its per-query tolerance." in summary
    assert re.search(rf"\| mrr@10 +\| 1\.0000 +\| {(5 + 1 / 3) / 6:.4f} +\| {(1 / 3 - 1) / 6:+.4f} \(<1/n\) +\|.*report only",
                     summary)


# ------------------------------------------------------------------ retriever errors

def test_a_retriever_that_raises_fails_that_item_only(baselined: RagProject) -> None:
    baselined.thresholds({"max_regressed_queries": 0})
    baselined.answer(q_003={"raise": "index shard offline"})
    result = baselined.run()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert outcomes(result) == {
        **{f"golden.yaml::{q}": "passed" for q in QIDS if q != "q-003"},
        "golden.yaml::q-003": "failed",
        "golden.yaml::gate::baseline": "passed",
        "golden.yaml::gate::coverage": "passed",
        "golden.yaml::gate::recall@10": "failed",
        "golden.yaml::gate::significant-drops": "passed",
        "golden.yaml::gate::regressed-queries": "failed",
    }
    out = result.stdout.str()
    assert "INTERNALERROR" not in out
    assert "RuntimeError: index shard offline" in out.split("rag query q-003", 1)[1]
    summary = rag_summary(result)
    assert "gate regressed-queries: 1 query regressed (errors included); at most 0 allowed" in summary
    # the errored query counts as 0 in the aggregate
    assert f"recall@10 fell {1 - 5 / 6:.4f} against the baseline (1.0000 -> {5 / 6:.4f})" in summary
    assert worst_list(summary) == ["q-003"]
    q003 = entry(summary, "q-003")
    assert "ERROR: RuntimeError: index shard offline" in q003
    assert re.search(drop_line("recall@10", 1, 0, "beyond tolerance 0"), q003)
    assert "gold:     brake-pads (2), brake-cable (1)" in q003


def test_a_new_query_that_errors_is_still_reported(baselined: RagProject) -> None:
    baselined.thresholds({"max_regressed_queries": 0})
    baselined.add_query({"id": "q-007", "question": "truing a wheel", "gold_chunks": ["spoke-tension"]},
                        {"raise": "timeout"})
    result = baselined.run()
    assert ids_with(result, "failed") == ["golden.yaml::gate::coverage", "golden.yaml::gate::regressed-queries",
                                          "golden.yaml::q-007"]
    summary = rag_summary(result)
    assert worst_list(summary) == ["q-007"]
    assert "ERROR: RuntimeError: timeout" in entry(summary, "q-007")


@pytest.mark.parametrize(
    "answer, message",
    [
        ({"return": None}, "query 'q-002': the retriever returned None; expected a list of results"),
        ({"return": [1, 2]}, "query 'q-002', result 1: int 1 is not an id, an (id, score) pair, an object with .id "
                             "or a mapping with \"id\""),
        ({"return": [{"doc_id": "chain-lube", "score": 0.9}]},
         "query 'q-002', result 1: a dict without an \"id\" key (its keys: 'doc_id', 'score'); a result given as a "
         "mapping needs \"id\", and may have \"score\", \"explain\" and \"parent_id\""),
        ({"return": "chain-lube"}, "query 'q-002': the retriever returned a str; expected a list of ids"),
        ({"return": [["chain-lube", 0.9], [7, 0.5]]}, "query 'q-002', result 2: id 7 is a int, expected str"),
    ],
    ids=["none", "int-ids", "mapping-without-id", "a-string", "pair-with-int-id"],
)
def test_a_result_that_is_not_a_ranking_fails_that_item_clearly(baselined: RagProject, answer, message) -> None:
    baselined.answer(q_002=answer)
    result = baselined.run()
    assert ids_with(result, "failed") == ["golden.yaml::gate::recall@10", "golden.yaml::q-002"]
    failure = result.stdout.str().split("rag query q-002", 1)[1]
    assert message in failure
    assert "Traceback" not in failure.split("rag gate", 1)[0]  # a clear message, not a stack
    assert f"ERROR: RetrieverError: {message}" in rag_summary(result)


def test_id_score_pairs_and_hit_objects_are_accepted(baselined: RagProject) -> None:
    baselined.answer(
        q_001=[["tire-repair#1-3", 3.5], ["tube-patch", 1.0]],
        q_002={"hits": [{"id": "chain-lube#1-2", "score": 0.9}, {"id": "noise-doc", "score": 0.5},
                        {"id": "chain-clean", "score": 0.1}]},
    )
    result = baselined.run()
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(passed=len(QIDS) + len(GATES_DEFAULT))


def test_result_mappings_are_accepted_as_vector_database_clients_return_them(baselined: RagProject) -> None:
    """{"id": ..., "score": ..., "metadata": ...} per result (Pinecone's matches, many REST clients)
    errored on every query; they are results like objects with an .id, explanation included."""
    baselined.answer(
        q_001=[{"id": "tire-repair#1-3", "score": 3.5, "metadata": {"source": "manual.pdf"}}, {"id": "tube-patch"}],
        q_003={"return": [{"id": "brake-pads#1-1", "score": 0.9}, {"id": "rim-wear", "score": 0.5},
                          {"id": "brake-cable", "score": 0.1, "parent_id": "brakes"}]},
    )
    assert baselined.run().ret == pytest.ExitCode.OK
    baselined.answer(q_002={"return": [{"id": "noise-doc", "score": 0.7, "explain": {"bm25": 0.4, "dense": 0.3}}]})
    result = baselined.run()
    assert ids_with(result, "failed") == ["golden.yaml::gate::recall@10", "golden.yaml::q-002"]
    assert "returned: 1. noise-doc  [bm25 0.4 + dense 0.3]" in entry(rag_summary(result), "q-002")


def test_explanations_of_hits_appear_in_the_worst_list(baselined: RagProject) -> None:
    baselined.answer(q_004={"hits": [
        {"id": "brake-pads#1-2", "score": 0.033, "explain": {"bm25": {"rank": 2, "score": 7.25},
                                                              "vector": {"rank": 1, "score": 0.81}}},
        {"id": "derailleur#4-4", "score": 0.016, "explain": "bm25 only (rank 1)"},
    ]})
    summary = rag_summary(baselined.run())
    q004 = entry(summary, "q-004")
    assert re.search(drop_line("recall@10", 1, 0.5, "beyond tolerance 0"), q004)
    assert "1. brake-pads  [brake-pads#1-2: bm25(rank 2, score 7.25) + vector(rank 1, score 0.81)]" in q004
    assert "2.*derailleur  [derailleur#4-4: bm25 only (rank 1)]" in q004


# ------------------------------------------------------------------ search_batch

def test_search_batch_is_used_when_offered(project: RagProject) -> None:
    project.retriever(batch=True)
    project.make_baseline()
    project.reset_calls()
    result = project.run()
    assert result.ret == pytest.ExitCode.OK
    assert project.calls() == ["fixture", "batch\t6"]  # one call for all six (batch size 32)


def test_batch_size_splits_the_calls(project: RagProject) -> None:
    project.retriever(batch=True)
    project.make_baseline("--rag-batch-size", "4")
    assert project.calls() == ["fixture", "batch\t4", "batch\t2"]


def test_a_failing_batch_falls_back_to_search_and_blames_the_right_query(project: RagProject) -> None:
    project.retriever(batch=True)
    project.make_baseline()
    project.reset_calls()
    project.answer(q_003={"raise": "index shard offline"})
    result = project.run()
    assert outcomes(result) == {
        **{f"golden.yaml::{q}": "passed" for q in QIDS if q != "q-003"},
        "golden.yaml::q-003": "failed",
        "golden.yaml::gate::baseline": "passed",
        "golden.yaml::gate::coverage": "passed",
        "golden.yaml::gate::recall@10": "failed",
        "golden.yaml::gate::significant-drops": "passed",
    }
    assert "RuntimeError: index shard offline" in result.stdout.str().split("rag query q-003", 1)[1]
    calls = project.calls()
    # the broken query went through search() on its own; the others were still answered
    assert "search\twhy do my brakes squeal" in calls
    assert all(c.startswith(("batch", "search", "fixture")) for c in calls)
    summary = rag_summary(result)
    assert worst_list(summary) == ["q-003"]
    assert f"(1.0000 -> {5 / 6:.4f})" in summary  # the five others scored 1, as in the baseline


def test_repeat_disables_batching(project: RagProject) -> None:
    project.retriever(batch=True)
    project.make_baseline("--rag-repeat", "2")
    assert [c for c in project.calls() if c.startswith("batch")] == []
    assert len([c for c in project.calls() if c.startswith("search")]) == 12


# ------------------------------------------------------------------ ids and scoring rules

def test_chunk_ids_map_to_documents_and_duplicates_are_dropped(project: RagProject) -> None:
    project.golden([{"id": "c-1", "question": "the manual", "gold_chunks": ["manual"]},
                    {"id": "c-2", "question": "two documents", "gold_chunks": ["guide", "faq"]}])
    project.answer(c_1=["manual#1-3", "manual#2-3", "manual#3-3", "other#1-1"],
                   c_2=["guide#1-2", "guide#2-2", "guide#1-2", "faq#1-1", "faq#1-1"])
    project.ini(rag_metrics="recall@5 precision@5 mrr@5 ndcg@5")
    result = project.run("--rag-report", "run.json")
    assert ids_with(result, "passed") == ["golden.yaml::c-1", "golden.yaml::c-2", "golden.yaml::gate::recall@5",
                                          "golden.yaml::gate::significant-drops"]
    per_query = json.loads((project.path / "run.json").read_text())["per_query"]
    assert per_query["c-1"]["ranking"] == ["manual", "other"]
    assert per_query["c-1"]["metrics"] == {"recall@5": 1.0, "precision@5": 0.2, "mrr@5": 1.0, "ndcg@5": 1.0}
    assert per_query["c-2"]["ranking"] == ["guide", "faq"]
    assert per_query["c-2"]["metrics"] == {"recall@5": 1.0, "precision@5": 0.4, "mrr@5": 1.0, "ndcg@5": 1.0}
    assert "c-1 (2), c-2 (2)" in rag_summary(result)  # fewer documents than the cutoff, said so


def test_without_a_separator_chunk_ids_are_judged_as_they_are(project: RagProject) -> None:
    project.golden([{"id": "c-1", "question": "the manual", "gold_chunks": ["manual"]}])
    project.answer(c_1=["manual#1-3", "manual"])
    project.ini(rag_id_separator="none")
    result = project.run("--rag-report", "run.json")
    per_query = json.loads((project.path / "run.json").read_text())["per_query"]
    assert per_query["c-1"]["ranking"] == ["manual#1-3", "manual"]
    assert per_query["c-1"]["metrics"]["mrr@10"] == 0.5
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # only because there is no baseline


def test_results_beyond_k_are_cut(project: RagProject) -> None:
    project.golden([{"id": "c-1", "question": "the manual", "gold_chunks": ["manual"]}])
    project.answer(c_1=["a", "b", "manual"])
    project.ini(rag_metrics="recall@2 mrr@2")
    project.run("--rag-report", "run.json")
    per_query = json.loads((project.path / "run.json").read_text())["per_query"]
    assert per_query["c-1"]["ranking"] == ["a", "b"]
    assert per_query["c-1"]["metrics"] == {"recall@2": 0.0, "mrr@2": 0.0}


def test_a_query_judged_all_zero_is_not_scored(project: RagProject) -> None:
    project.add_query({"id": "q-000", "question": "unrelated question", "gold_chunks": {"noise-doc": 0}},
                      ["noise-doc"])
    project.make_baseline()
    assert "q-000" not in project.baseline()["per_query"]
    assert project.baseline()["aggregate"]["recall@10"] == 1.0  # not averaged in as a 0
    result = project.run("--rag-report", "run.json")
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(passed=len(QIDS) + len(GATES_DEFAULT), skipped=1)
    assert "q-000" not in outcomes(result)
    assert "no document is judged relevant at level 1: not scored" in result.stdout.str()
    summary = rag_summary(result)
    assert "1 query has no relevant document and was not scored: q-000" in summary
    assert "n = 6 queries" in summary
    report = json.loads((project.path / "run.json").read_text())
    assert report["per_query"]["q-000"]["status"] == "unscorable"
    assert report["per_query"]["q-000"]["metrics"] is None
    assert report["comparison"]["unscorable"] == ["q-000"]
    assert report["n"] == 6


# ------------------------------------------------------------------ determinism

def test_repeat_passes_a_deterministic_retriever(baselined: RagProject) -> None:
    result = baselined.run("--rag-repeat", "2")
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(passed=len(QIDS) + len(GATES_DEFAULT))
    searches = [c for c in baselined.calls() if c.startswith("search")]
    assert len(searches) == 2 * len(QIDS)


def test_repeat_fails_a_query_whose_ranking_changes(baselined: RagProject) -> None:
    baselined.answer(q_005={"sequence": [["tire-pressure", "a"], ["tire-pressure", "b"]]})
    result = baselined.run("--rag-repeat", "2")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert ids_with(result, "failed") == ["golden.yaml::gate::recall@10", "golden.yaml::q-005"]
    failure = result.stdout.str().split("rag query q-005", 1)[1]
    assert ("query 'q-005' is not deterministic: the documents it ranks changed between repeated runs "
            "(first difference at rank 2: ['a'] vs ['b']); a system compared with itself must score "
            "identically") in failure
    # a single run does not notice
    assert baselined.run().ret == pytest.ExitCode.OK


def test_repeat_compares_documents_not_chunks(baselined: RagProject) -> None:
    # two chunks of one document trade places: the document ranking, and every metric, is the same
    baselined.answer(q_001={"sequence": [["tire-repair#1-3", "tire-repair#2-3", "tube-patch"],
                                         ["tire-repair#2-3", "tire-repair#1-3", "tube-patch"]]})
    result = baselined.run("--rag-repeat", "2")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()


def test_a_retriever_fixture_that_raises_stops_at_the_first_query_and_is_no_regression(baselined: RagProject) -> None:
    """Nothing was measured, so nothing may read as a measurement: one error, exit code 4, no verdict."""
    conftest = baselined.path / "conftest.py"
    conftest.write_text(conftest.read_text().replace('    _log("fixture")\n', '    raise OSError("index not built")\n'))
    result = baselined.run()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert ids_with(result, "error") == ["golden.yaml::q-001"]
    assert ids_with(result, "failed") == [] and ids_with(result, "passed") == []
    summary = rag_summary(result)
    assert summary.startswith("the rag_retriever fixture raised OSError: index not built (the fixture at conftest.py:")
    assert "Worst regressed" not in summary and "->" not in summary


