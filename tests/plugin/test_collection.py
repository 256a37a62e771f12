"""Collection: one item per golden query plus gate items, only with --rag-eval."""

from __future__ import annotations

import pytest

from ragproject import GATES_DEFAULT, QIDS, RagProject, ids_with, no_traceback, outcomes, rag_summary


def test_clean_run_with_a_baseline_passes_with_one_item_per_query(baselined: RagProject) -> None:
    result = baselined.run()
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(passed=len(QIDS) + len(GATES_DEFAULT))
    assert outcomes(result) == {
        **{f"golden.yaml::{q}": "passed" for q in QIDS},
        **{g: "passed" for g in GATES_DEFAULT},
    }
    # every query searched exactly once, each through search() (no search_batch offered)
    assert sorted(c for c in baselined.calls() if c.startswith("search")) == sorted(
        f"search\t{r['question']}" for r in baselined.records)
    summary = rag_summary(result)
    assert f"All gates passed ({len(GATES_DEFAULT)} checked)." in summary
    assert "No query fell beyond its per-query tolerance." in summary
    assert "n = 6 queries: one query moves a mean by up to 1/n = 0.1667" in summary


def test_gate_items_run_after_every_query_item(baselined: RagProject) -> None:
    result = baselined.run("-v", "-p", "no:randomly")
    order = [line.split()[0] for line in result.outlines if line.startswith("golden.yaml::") and " PASSED" in line]
    assert order == [f"golden.yaml::{q}" for q in QIDS] + GATES_DEFAULT


def test_collect_only_lists_queries_and_gates(baselined: RagProject) -> None:
    result = baselined.run("--collect-only", "-q")
    assert result.ret == pytest.ExitCode.OK
    listed = [line for line in result.outlines if line.startswith("golden.yaml::")]
    assert listed == [f"golden.yaml::{q}" for q in QIDS] + GATES_DEFAULT
    assert baselined.calls() == []  # collecting retrieves nothing
    assert " ragmetrics " not in result.stdout.str()  # nothing ran, nothing to report


def test_without_rag_eval_the_plugin_adds_nothing(project: RagProject) -> None:
    project.pytester.makepyfile(test_plain="def test_plain():\n    assert 1 + 1 == 2\n")
    result = project.run(rag=False)
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(passed=1)
    assert outcomes(result) == {"test_plain.py::test_plain": "passed"}
    assert "ragmetrics:" not in result.stdout.str()  # no header lines
    assert " ragmetrics " not in result.stdout.str()  # no summary section
    assert project.calls() == []  # the retriever fixture was never even set up
    assert not (project.path / "baselines").exists()


def test_with_explicit_paths_the_golden_set_joins_them(baselined: RagProject) -> None:
    baselined.pytester.makepyfile(test_plain="def test_plain():\n    pass\n")
    result = baselined.run("test_plain.py")
    assert result.ret == pytest.ExitCode.OK
    assert outcomes(result) == {
        "test_plain.py::test_plain": "passed",
        **{f"golden.yaml::{q}": "passed" for q in QIDS},
        **{g: "passed" for g in GATES_DEFAULT},
    }


def test_naming_the_golden_file_does_not_collect_it_twice(baselined: RagProject) -> None:
    result = baselined.run("golden.yaml")
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(passed=len(QIDS) + len(GATES_DEFAULT))


def test_bad_golden_set_is_a_usage_error_before_any_retrieval(project: RagProject) -> None:
    records = [dict(r) for r in project.records]
    records[2]["gold_chunks"] = []
    project.golden(records)
    result = project.run()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "golden.yaml" in err
    assert "record 3" in err and "'q-003'" in err
    assert "gold_chunks is empty" in err
    no_traceback(result)
    assert project.calls() == []  # the retriever was never built nor called


def test_duplicate_query_ids_are_a_usage_error(project: RagProject) -> None:
    records = [dict(r) for r in project.records]
    records[4]["id"] = "q-002"
    project.golden(records)
    result = project.run()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "duplicate query id 'q-002'" in result.stderr.str()
    assert "golden.yaml" in result.stderr.str()
    no_traceback(result)
    assert project.calls() == []


def test_missing_golden_file_is_a_usage_error(project: RagProject) -> None:
    project.ini(rag_golden="eval/nowhere.yaml")
    result = project.run()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "nowhere.yaml" in result.stderr.str() and "file not found" in result.stderr.str()
    no_traceback(result)


def test_no_retriever_fixture_stops_the_run_with_one_hint(project: RagProject) -> None:
    (project.path / "conftest.py").write_text("", encoding="utf-8")
    result = project.run()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert outcomes(result) == {}  # stopped before the first query, not once per query
    assert result.stdout.str().count("no fixture named rag_retriever is defined. The session-scoped fixture "
                                     "`rag_retriever` (usually in conftest.py) must return") == 1
