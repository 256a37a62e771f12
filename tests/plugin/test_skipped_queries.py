"""A skipped query never crashes pytest, and is never judged: a ``skip`` marker added by the project's
conftest, ``pytest.skip()`` or ``pytest.importorskip()`` in the ``rag_retriever`` fixture, or a skip in
the retriever's ``search``. The ``baseline`` gate names each skipped query with the skip's reason, and
the run is not green, serial or under xdist."""

from __future__ import annotations

import json

import pytest
from ragproject import PROJECT_CONFTEST, QIDS, RagProject, ids_with, no_traceback, rag_summary

from pytest_ragmetrics.gate.artifact import load_artifact

#: the rag_retriever fixture, skipping before it builds anything (a vector DB that does not answer)
FIXTURE_SKIPS = {
    "skip": ('pytest.skip("vector DB not reachable")', "vector DB not reachable"),
    "importorskip": ('pytest.importorskip("no_such_vector_db_client")',
                     "could not import 'no_such_vector_db_client': No module named 'no_such_vector_db_client'"),
}

#: two queries skipped by a marker the project's own collection hook adds
MARKER_SKIP = r'''

def pytest_collection_modifyitems(items):
    for item in items:
        if item.name in ("q-002", "q-005"):
            item.add_marker(pytest.mark.skip(reason="flaky upstream index"))
'''

#: the retriever skips one query from inside search
SEARCH_SKIP = r'''

class SkippingRetriever(Retriever):
    def search(self, query, k):
        if query == "why do my brakes squeal":
            pytest.skip("brake index offline")
        return super().search(query, k)


@pytest.fixture(scope="session")
def rag_retriever():
    return SkippingRetriever()
'''


def _fixture_skips(project: RagProject, body: str) -> None:
    project.conftest_text += f'''

@pytest.fixture(scope="session")
def rag_retriever():
    {body}
'''
    (project.path / "conftest.py").write_text(project.conftest_text, encoding="utf-8")


def _append(project: RagProject, text: str) -> None:
    project.conftest_text += text
    (project.path / "conftest.py").write_text(project.conftest_text, encoding="utf-8")


def _skip_lines(result: pytest.RunResult) -> list[str]:
    return [line for line in result.outlines if line.startswith("SKIPPED ")]


def _baseline_gate(summary: str) -> str:
    lines = [line.strip() for line in summary.splitlines() if line.strip().startswith("gate baseline:")]
    assert len(lines) == 1, summary
    return lines[0]


@pytest.mark.parametrize("how", sorted(FIXTURE_SKIPS))
def test_a_retriever_fixture_that_skips_judges_nothing_and_fails(baselined: RagProject, how: str) -> None:
    body, reason = FIXTURE_SKIPS[how]
    _fixture_skips(baselined, body)
    result = baselined.run("--rag-report=run.json")
    no_traceback(result)  # it ended in INTERNALERROR (exit code 3): reportinfo() gave pytest no line
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "golden.yaml::gate::baseline" in ids_with(result, "failed")
    assert not [n for n in ids_with(result, "passed") if "::q-" in n]
    gate = _baseline_gate(rag_summary(result))
    assert f"every query was skipped (all 6), so nothing was judged: {', '.join(QIDS)} ({reason})" in gate
    assert "A skipped query is not a pass" in gate
    # the gate item says it too, not only the summary
    failures = result.stdout.str().split("= FAILURES =", 1)[1]
    assert "gate baseline: every query was skipped (all 6), so nothing was judged" in failures
    # -rs names each query and the skip's reason, not the line of pytest that raised it
    assert _skip_lines(result) == [f"SKIPPED [1] golden.yaml: rag query {q}: {reason}" for q in QIDS]
    assert "runner.py" not in result.stdout.str()
    data = load_artifact(baselined.path / "run.json")
    assert data["per_query"] == {} and data["comparison"]["passed"] is False
    assert data["comparison"]["skipped"] == {q: reason for q in QIDS}


def test_queries_skipped_by_a_marker_make_a_partial_run(baselined: RagProject) -> None:
    _append(baselined, MARKER_SKIP)
    result = baselined.run("--rag-report=run.json")
    no_traceback(result)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert ids_with(result, "failed") == ["golden.yaml::gate::baseline"]
    assert [n for n in ids_with(result, "passed") if "::q-" in n] == \
        [f"golden.yaml::{q}" for q in QIDS if q not in ("q-002", "q-005")]
    gate = _baseline_gate(rag_summary(result))
    assert "2 of 6 queries were skipped, so not judged: q-002, q-005 (flaky upstream index)" in gate
    assert "deselected" not in gate  # the run knows why they did not run
    assert _skip_lines(result) == ["SKIPPED [1] golden.yaml: rag query q-002: flaky upstream index",
                                   "SKIPPED [1] golden.yaml: rag query q-005: flaky upstream index"]
    data = load_artifact(baselined.path / "run.json")
    assert sorted(data["per_query"]) == [q for q in QIDS if q not in ("q-002", "q-005")]
    assert data["comparison"]["skipped"] == {"q-002": "flaky upstream index", "q-005": "flaky upstream index"}


def test_a_query_the_retriever_skips_is_not_judged(baselined: RagProject) -> None:
    _append(baselined, SEARCH_SKIP)
    result = baselined.run()
    no_traceback(result)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "1 of 6 queries was skipped, so not judged: q-003 (brake index offline)" in \
        _baseline_gate(rag_summary(result))
    assert _skip_lines(result) == ["SKIPPED [1] golden.yaml: rag query q-003: brake index offline"]


def test_a_skipped_query_is_not_written_into_a_baseline(baselined: RagProject) -> None:
    _append(baselined, MARKER_SKIP)
    before = baselined.baseline_path.read_bytes()
    result = baselined.run("--rag-update-baseline")
    no_traceback(result)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "2 golden queries did not run (e.g. q-002, q-005)" in rag_summary(result)
    assert baselined.baseline_path.read_bytes() == before


def test_skipped_queries_under_xdist(baselined: RagProject) -> None:
    """The same outcome under -n 2: the skip happens on a worker, and the controller names it."""
    pytest.importorskip("xdist", reason="pytest-xdist is in the dev extra, which CI installs")
    _append(baselined, MARKER_SKIP)
    partial = baselined.run_subprocess("-n", "2", "--rag-report=run.json")
    assert "created: 2/2 workers" in partial.stdout.str()
    no_traceback(partial)
    assert partial.ret == pytest.ExitCode.TESTS_FAILED
    assert "2 of 6 queries were skipped, so not judged: q-002, q-005 (flaky upstream index)" in \
        _baseline_gate(rag_summary(partial))
    assert sorted(_skip_lines(partial)) == ["SKIPPED [1] golden.yaml: rag query q-002: flaky upstream index",
                                            "SKIPPED [1] golden.yaml: rag query q-005: flaky upstream index"]
    assert json.loads((baselined.path / "run.json").read_text(encoding="utf-8"))["comparison"]["skipped"] == \
        {"q-002": "flaky upstream index", "q-005": "flaky upstream index"}

    baselined.conftest_text = PROJECT_CONFTEST  # the marker's hook out: the fixture skips every query
    body, reason = FIXTURE_SKIPS["skip"]
    _fixture_skips(baselined, body)
    nothing = baselined.run_subprocess("-n", "2")
    no_traceback(nothing)
    assert nothing.ret == pytest.ExitCode.TESTS_FAILED
    assert f"every query was skipped (all 6), so nothing was judged: {', '.join(QIDS)} ({reason})" in \
        _baseline_gate(rag_summary(nothing))
    assert sorted(_skip_lines(nothing)) == [f"SKIPPED [1] golden.yaml: rag query {q}: {reason}" for q in QIDS]
    assert "runner.py" not in nothing.stdout.str()
