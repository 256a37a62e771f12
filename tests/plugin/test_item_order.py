"""The gate items judge after every query item, whatever order pytest's own options (``--nf``,
``--ff``, ``--lf``), pytest-randomly or the project's hooks give the items; serial and under xdist."""

from __future__ import annotations

import re

import pytest
from plugins_off import PLUGINS_OFF  # tests/plugins_off.py
from ragproject import GATES_DEFAULT, QIDS, RagProject, ids_with, no_traceback, rag_summary

GATES = GATES_DEFAULT

#: a project hook that turns the run order around, at each place a plugin can hook in
REORDERS = {
    "trylast": "@pytest.hookimpl(trylast=True)\ndef pytest_collection_modifyitems(items):\n    items.reverse()\n",
    "tryfirst": "@pytest.hookimpl(tryfirst=True)\ndef pytest_collection_modifyitems(items):\n    items.reverse()\n",
    "wrapper": "@pytest.hookimpl(hookwrapper=True, tryfirst=True)\ndef pytest_collection_modifyitems(items):\n"
               "    yield\n    items.reverse()\n",
    "wrapper-trylast": "@pytest.hookimpl(hookwrapper=True, trylast=True)\ndef pytest_collection_modifyitems(items):\n"
                       "    yield\n    items.reverse()\n",
    "shuffle": "@pytest.hookimpl(hookwrapper=True, tryfirst=True)\ndef pytest_collection_modifyitems(items):\n"
               "    yield\n    import random\n    random.Random(3).shuffle(items)\n",
}


def _reorder(project: RagProject, hook: str) -> None:
    project.conftest_text += "\n\n" + hook
    (project.path / "conftest.py").write_text(project.conftest_text, encoding="utf-8")


def _run_order(result: pytest.RunResult) -> list[str]:
    """Node ids in the order they ran, from ``-v`` lines (``golden.yaml::q-001 PASSED``)."""
    return [m.group(1) for line in result.outlines
            if (m := re.match(r"^(golden\.yaml::\S+) (PASSED|FAILED|SKIPPED|ERROR)", line))]


def _gates_last(result: pytest.RunResult) -> None:
    order = _run_order(result)
    assert sorted(order) == sorted([f"golden.yaml::{q}" for q in QIDS] + GATES), order
    assert sorted(order[-len(GATES):]) == GATES, order


def _cached_run(project: RagProject, *args: str) -> pytest.RunResult:
    """A serial run with pytest's cache (``--nf``, ``--ff`` and ``--lf`` read it), in-process."""
    return project.pytester.runpytest("--rag-eval", "-v", "-rA", *PLUGINS_OFF, *args)


def test_a_good_run_passes_after_nf_ff_and_lf(baselined: RagProject) -> None:
    first = _cached_run(baselined)
    assert first.ret == pytest.ExitCode.OK
    # --nf with a warm cache put the gate items first: a good run failed as a "partial run"
    newest = _cached_run(baselined, "--nf")
    assert newest.ret == pytest.ExitCode.OK, rag_summary(newest)
    _gates_last(newest)
    assert "All gates passed" in rag_summary(newest)

    def fail_once() -> None:
        baselined.answer(q_002=["noise-doc"])
        assert _cached_run(baselined).ret == pytest.ExitCode.TESTS_FAILED
        baselined.restore()

    # --lf runs the failed query alone: the passing ones are deselected, a partial run that says so
    fail_once()
    last_failed = _cached_run(baselined, "--lf")
    no_traceback(last_failed)
    assert last_failed.ret == pytest.ExitCode.TESTS_FAILED
    assert "golden.yaml::q-002" in ids_with(last_failed, "passed")
    summary = rag_summary(last_failed)
    assert "gate baseline: partial run: 5 queries meant to run did not (q-001, q-003, q-004, q-005, q-006; " \
           "deselected with -k, --deselect or --lf" in summary
    assert "All gates passed" not in summary

    fail_once()
    failed_first = _cached_run(baselined, "--ff")
    assert failed_first.ret == pytest.ExitCode.OK, rag_summary(failed_first)
    _gates_last(failed_first)
    assert _run_order(failed_first)[0] == "golden.yaml::q-002"  # --ff did reorder


@pytest.mark.parametrize("where", sorted(REORDERS))
def test_gate_items_run_last_whatever_a_project_hook_does(baselined: RagProject, where: str) -> None:
    _reorder(baselined, REORDERS[where])
    result = baselined.run("-v")
    no_traceback(result)
    assert result.ret == pytest.ExitCode.OK, rag_summary(result)
    _gates_last(result)
    queries = [n for n in _run_order(result) if n not in GATES]
    if where != "tryfirst":  # the project's order stands for the queries (tryfirst comes before collection's own)
        assert queries != [f"golden.yaml::{q}" for q in QIDS]


def test_gate_items_run_last_under_pytest_randomly(baselined: RagProject) -> None:
    pytest.importorskip("pytest_randomly", reason="pytest-randomly is in the dev extra, which CI installs")
    orders = set()
    for seed in ("1", "2", "3"):
        result = baselined.run("-v", "-p", "pytest_randomly", f"--randomly-seed={seed}")
        no_traceback(result)
        assert result.ret == pytest.ExitCode.OK, rag_summary(result)
        _gates_last(result)
        orders.add(tuple(_run_order(result)[:-len(GATES)]))
    assert len(orders) > 1  # pytest-randomly did shuffle the queries


def test_a_gate_item_moved_before_a_query_after_collection_fails(baselined: RagProject) -> None:
    """A plugin that moves the items once collection is over: the gate item cannot wait for the
    queries after it, so it fails rather than judge part of the run (or freeze that verdict)."""
    _reorder(baselined, "@pytest.hookimpl(trylast=True)\ndef pytest_collection_finish(session):\n"
                        "    session.items.reverse()\n")
    result = baselined.run("-v")
    no_traceback(result)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert ids_with(result, "failed") == GATES
    failures = result.stdout.str().split("= FAILURES =", 1)[1]
    assert "gate baseline: not judged here: this item ran before 6 query items (q-006, q-005, q-004, q-003, " \
           "q-002, q-001), as a plugin reordered the items after collection" in failures
    # the verdict itself is built once every query ran, over all of them
    assert "All gates passed" in rag_summary(result)


def test_reordering_under_xdist(baselined: RagProject) -> None:
    """Under xdist the controller reports the gates once every worker is done: no order moves them."""
    pytest.importorskip("xdist", reason="pytest-xdist is in the dev extra, which CI installs")
    _reorder(baselined, REORDERS["wrapper"])
    result = baselined.run_subprocess("-n", "2")
    assert "created: 2/2 workers" in result.stdout.str()
    no_traceback(result)
    assert result.ret == pytest.ExitCode.OK, rag_summary(result)
    assert ids_with(result, "passed") == sorted([f"golden.yaml::{q}" for q in QIDS] + GATES)
