"""Faulty retrievers: each fault fails that query's item with a clear message, the
other queries run and pass, the gate counts the errored query as a regression
(never as a pass), and an interrupted session writes nothing.

The retriever is the plugin tests' JSON-driven one (tests/plugin/ragproject.py):
``rankings.json`` says, per question, what it returns or raises; the trust conftest
adds answers that hang (until the test releases them) or raise KeyboardInterrupt.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from demo_run import DemoRun
from ragproject import QIDS, entry, ids_with, outcomes, rag_summary, worst_list
from trust_helpers import FAST, TrustProject, clean_env, no_traceback

OTHERS_PASS = {f"golden.yaml::{q}": "passed" for q in QIDS if q != "q-002"}


def _artifact(project: TrustProject, name: str = "run.json") -> dict[str, Any]:
    return json.loads((project.path / name).read_text(encoding="utf-8"))


# (what q-002 answers, text the failure must show)
FAULTS: dict[str, tuple[Any, str]] = {
    "raises": ({"raise": "index shard offline"}, "RuntimeError: index shard offline"),
    "returns-none": ({"return": None}, "query 'q-002': the retriever returned None; expected a list of results"),
    "returns-a-string": ({"return": "chain-lube"}, "query 'q-002': the retriever returned a str"),
    "returns-a-mapping": ({"return": {"chain-lube": 1.0}}, "query 'q-002': the retriever returned a dict"),
    "returns-an-int": ({"return": 7}, "query 'q-002': the retriever returned int, which is not iterable"),
    "returns-int-ids": ({"return": [1, 2]}, "query 'q-002', result 1: int 1 is not an id"),
    "returns-a-pair-with-an-int-id": ({"return": [["chain-lube", 0.9], [7, 0.5]]},
                                      "query 'q-002', result 2: id 7 is a int, expected str"),
    "returns-a-hit-with-a-none-id": ({"hits": [{"id": "chain-lube"}, {"id": None}]},
                                     "query 'q-002', result 2: id None is a NoneType, expected str"),
    "returns-triples": ({"return": [["chain-lube", 0.9, "x"]]}, "query 'q-002', result 1: tuple ('chain-lube', 0.9, 'x') is not an id"),
    "returns-an-empty-id": ({"return": ["chain-lube", ""]}, "query 'q-002', result 2: id '' is empty"),
    "returns-a-blank-id": ({"hits": [{"id": "chain-lube"}, {"id": "  "}]}, "query 'q-002', result 2: id '  ' is empty"),
    "returns-a-nan-score": ({"return": [["chain-lube", 0.9], ["chain-clean", float("nan")]]},
                            "query 'q-002', result 2: the score of 'chain-clean' is NaN"),
    "returns-a-hit-with-a-nan-score": ({"hits": [{"id": "chain-lube", "score": float("nan")}]},
                                       "query 'q-002', result 1: the score of 'chain-lube' is NaN"),
    "returns-a-text-score": ({"return": [["chain-lube", 0.9], ["chain-clean", "7.17"]]},
                             "query 'q-002', result 2: the score of 'chain-clean' is '7.17' (a str); "
                             "a score must be a number or None"),
}


@pytest.mark.parametrize("answer, shown", FAULTS.values(), ids=FAULTS.keys())
def test_a_faulty_answer_fails_its_item_only_and_counts_as_a_regression(
        baselined: TrustProject, answer: Any, shown: str) -> None:
    baselined.answer(q_002=answer)
    result = baselined.run("--rag-report", "run.json")
    out = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in out
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert outcomes(result) == {**OTHERS_PASS, "golden.yaml::q-002": "failed",
                                "golden.yaml::gate::baseline": "passed", "golden.yaml::gate::coverage": "passed",
                                "golden.yaml::gate::recall@10": "failed",
                                "golden.yaml::gate::significant-drops": "passed"}
    failure = result.stdout.str().split("rag query q-002", 1)[1].split("rag gate", 1)[0]
    assert shown in failure
    summary = rag_summary(result)
    assert worst_list(summary) == ["q-002"]
    assert "ERROR: " in entry(summary, "q-002") and shown.split(": ", 1)[-1] in entry(summary, "q-002")
    record = _artifact(baselined)["per_query"]["q-002"]
    assert record["status"] == "error" and shown.split(": ", 1)[-1] in record["error"]
    assert record["metrics"] is None


def test_duplicates_are_dropped_and_never_raise_a_score(baselined: TrustProject) -> None:
    # the same chunk, more chunks of the same document, and a gold document three times
    baselined.answer(q_001=["tire-repair#1-3", "tire-repair#1-3", "tire-repair#2-3", "tire-repair", "tube-patch"],
                     q_006=["cassette", "cassette", "cassette", "chain-clean#1-2", "degreaser", "degreaser"])
    result = baselined.run("--rag-report", "run.json")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    per_query = _artifact(baselined)["per_query"]
    assert per_query["q-001"]["ranking"] == ["tire-repair", "tube-patch"]
    assert per_query["q-006"]["ranking"] == ["cassette", "chain-clean", "degreaser"]
    for record in per_query.values():
        assert all(0.0 <= v <= 1.0 for v in record["metrics"].values()), record
    assert per_query["q-006"]["metrics"]["recall@10"] == 1.0


def test_more_than_k_results_are_cut_at_k(baselined: TrustProject) -> None:
    # the gold document comes back at rank 12 of 15: beyond k = 10 it does not count
    noise = [f"noise-{i}" for i in range(11)]
    baselined.answer(q_005=[*noise, "tire-pressure", "more-1", "more-2", "more-3"])
    result = baselined.run("--rag-report", "run.json")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert ids_with(result, "failed") == ["golden.yaml::gate::recall@10", "golden.yaml::q-005"]
    record = _artifact(baselined)["per_query"]["q-005"]
    assert record["ranking"] == noise[:10] and record["metrics"]["recall@10"] == 0.0
    assert "recall@10 fell 1.0000 -> 0.0000" in result.stdout.str()


def test_an_empty_answer_scores_zero_and_says_so(baselined: TrustProject) -> None:
    baselined.answer(q_003=[])
    result = baselined.run("--rag-report", "run.json")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert ids_with(result, "failed") == ["golden.yaml::gate::recall@10", "golden.yaml::q-003"]
    summary = rag_summary(result)
    assert "returned: nothing" in entry(summary, "q-003")
    assert "q-003 (0)" in summary  # listed among queries that came back short
    record = _artifact(baselined)["per_query"]["q-003"]
    assert record["status"] == "scored" and record["n_docs"] == 0 and record["metrics"]["recall@10"] == 0.0


def test_an_iterator_and_huge_scores_are_accepted(baselined: TrustProject) -> None:
    """Not faults: a generator of pairs, a score beyond float range (shown as no score)."""
    conftest = baselined.path / "conftest.py"
    conftest.write_text(conftest.read_text() + '''

_inner = _answer


def _answer(query):
    if query == "cleaning a dirty cassette":
        return iter([("cassette", 10 ** 400), ("chain-clean", 2), ("degreaser#1-4", 1)])
    return _inner(query)
''')
    result = baselined.run()
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()


# ------------------------------------------------------------------ errors and the gate


def test_an_errored_query_is_a_regression_even_where_the_baseline_had_zero(project: TrustProject) -> None:
    """Its metrics cannot fall below 0, so no aggregate drops: the error itself fails the
    run, and the regressed-queries gate counts it."""
    project.answer(q_005=["noise-doc"])
    project.make_baseline()
    project.thresholds({"max_regressed_queries": 0})
    project.answer(q_005={"raise": "backend down"})
    result = project.run("--rag-report", "run.json")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert ids_with(result, "failed") == ["golden.yaml::gate::regressed-queries", "golden.yaml::q-005"]
    assert "golden.yaml::gate::recall@10" in ids_with(result, "passed")  # the mean did not move
    summary = rag_summary(result)
    assert "1 query regressed (errors included); at most 0 allowed" in summary
    assert worst_list(summary) == ["q-005"]
    comparison = _artifact(project)["comparison"]
    assert comparison["errored"] == ["q-005"] and comparison["passed"] is False


def test_report_only_mode_still_fails_on_an_error(baselined: TrustProject) -> None:
    """fail_on_regression: false turns regressions into warnings, but a query that could
    not be measured is not a measurement: its item still fails."""
    baselined.thresholds({"fail_on_regression": False})
    baselined.answer(q_002={"raise": "backend down"}, q_004=["noise-doc"])
    result = baselined.run()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert ids_with(result, "failed") == ["golden.yaml::q-002"]  # q-004's drop is only reported
    assert "RETRIEVAL GATE FAILED (report only" in rag_summary(result)


def test_an_errored_query_blocks_a_baseline_update(baselined: TrustProject) -> None:
    before = baselined.baseline_path.read_bytes()
    baselined.answer(q_006={"return": None})
    result = baselined.run("--rag-update-baseline")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "not writing" in rag_summary(result) and "1 query errored (q-006)" in rag_summary(result)
    assert baselined.baseline_path.read_bytes() == before


# ------------------------------------------------------------------------- timeouts


def _declare_thread_safe(project: TrustProject) -> None:
    """The project's retrievers say they may be called from two threads at once."""
    project.conftest_text += "\n\nRetriever.thread_safe = True\n"
    (project.path / "conftest.py").write_text(project.conftest_text, encoding="utf-8")


def test_a_hanging_query_times_out_and_the_rest_run(released: TrustProject) -> None:
    """A thread-safe retriever: the next queries run beside the abandoned call."""
    released.make_baseline()
    _declare_thread_safe(released)
    released.answer(q_004={"hang": ["derailleur", "shifter-cable"]})
    result = released.run("--rag-timeout", "0.5", "--rag-report", "run.json")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert outcomes(result) == {**{f"golden.yaml::{q}": "passed" for q in QIDS if q != "q-004"},
                                "golden.yaml::q-004": "failed", "golden.yaml::gate::baseline": "passed",
                                "golden.yaml::gate::coverage": "passed", "golden.yaml::gate::recall@10": "failed",
                                "golden.yaml::gate::significant-drops": "passed"}
    message = ("query 'q-004': the retriever did not answer within 0.5 s (--rag-timeout); the call was abandoned "
               "in a background thread and this query counts as an error")
    assert message in result.stdout.str().split("rag query q-004", 1)[1]
    assert "timeout 0.5 s per query" in result.stdout.str()  # the header says the limit
    assert "ERROR: RetrievalTimeout: " + message in entry(rag_summary(result), "q-004")
    assert _artifact(released)["per_query"]["q-004"]["status"] == "error"


def test_a_query_that_waited_behind_an_abandoned_call_gets_its_own_full_limit(released: TrustProject) -> None:
    """q-002 overruns its 0.8 s limit and is abandoned; its call returns 0.5 s later. q-003 (0.4 s,
    within the limit) waited those 0.5 s for it, and they counted against its own deadline: it
    errored, listed as regressed at -1.0 as if it were slow. Its clock now starts with its call."""
    # each margin is 0.3 s or more: the wait (0.5 s) and the call (0.4 s) each within 0.8 s, together over it
    released.make_baseline()
    released.answer(q_002={"slow": [1.3, ["chain-lube", "chain-clean"]]},
                    q_003={"slow": [0.4, ["brake-pads", "rim-wear", "brake-cable"]]})
    result = released.run("--rag-timeout", "0.8", "--rag-report", "run.json")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert ids_with(result, "failed") == ["golden.yaml::gate::recall@10", "golden.yaml::q-002"]
    per_query = _artifact(released)["per_query"]
    assert per_query["q-002"]["status"] == "error" and per_query["q-003"]["status"] == "scored"
    assert worst_list(rag_summary(result)) == ["q-002"]


def test_queries_that_cannot_start_behind_a_hung_call_are_not_run_not_regressed(released: TrustProject) -> None:
    """q-002 hangs: q-003 waits one limit for it, then q-003 to q-006 are not run (each says
    which call held the retriever), not errored and listed as regressed at -1.0; the run is
    partial and fails, and waits for the hung call once, not once a query."""
    released.make_baseline()
    released.answer(q_002={"hang": ["chain-lube", "chain-clean"]})
    started = time.monotonic()
    result = released.run("--rag-timeout", "0.5", "--rag-report", "run.json")
    elapsed = time.monotonic() - started
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    not_run = ["q-003", "q-004", "q-005", "q-006"]
    assert ids_with(result, "failed") == ["golden.yaml::gate::baseline", "golden.yaml::gate::recall@10",
                                          "golden.yaml::q-002", *(f"golden.yaml::{q}" for q in not_run)]
    out = result.stdout.str()
    for qid in not_run:
        assert (f"query '{qid}': not run: the retriever was still busy with the abandoned call for "
                "query 'q-002'") in out.split(f"rag query {qid}", 1)[1]
    summary = rag_summary(result)
    assert worst_list(summary) == ["q-002"]
    assert ("4 queries did not run, as the retriever was still busy with a call abandoned at --rag-timeout "
            "(each item says which): q-003, q-004, q-005, q-006") in summary
    comparison = _artifact(released)["comparison"]
    assert comparison["not_run"] == not_run
    assert set(_artifact(released)["per_query"]) == {"q-001", "q-002"}
    assert elapsed < 0.5 * 2 + 5  # q-002's limit, one wait for it, and the run itself; not a wait per query


def test_the_timeout_comes_from_the_ini_too(released: TrustProject) -> None:
    released.make_baseline()
    released.ini(rag_timeout="0.5")
    released.answer(q_006={"hang": ["cassette", "chain-clean", "degreaser"]})  # the last: no query waits for it
    result = released.run()
    assert ids_with(result, "failed") == ["golden.yaml::gate::recall@10", "golden.yaml::q-006"]
    assert "did not answer within 0.5 s" in result.stdout.str()


def test_with_a_timeout_each_query_is_searched_and_timed_alone(released: TrustProject) -> None:
    """A batch cannot be timed query by query: given the whole batch's budget, a query
    2.5 times over its limit passed inside a batch. With --rag-timeout, search_batch is
    not called and every query gets its own search and deadline."""
    released.make_baseline()
    _declare_thread_safe(released)
    released.retriever(batch=True)
    released.answer(q_003={"slow": [1.25, ["brake-pads"]]})
    released.reset_calls()
    result = released.run("--rag-timeout", "0.5", "--rag-batch-size", "4")
    assert ids_with(result, "failed") == ["golden.yaml::gate::recall@10", "golden.yaml::q-003"]
    assert sorted(ids_with(result, "passed")) == sorted(
        ["golden.yaml::gate::baseline", "golden.yaml::gate::coverage", "golden.yaml::gate::significant-drops",
         *(f"golden.yaml::{q}" for q in QIDS if q != "q-003")])
    calls = [c.split("\t")[0] for c in released.calls() if c.startswith(("batch", "search"))]
    assert calls == ["search"] * len(QIDS)
    assert "did not answer within 0.5 s" in result.stdout.str()


def test_without_a_timeout_the_batch_is_used(released: TrustProject) -> None:
    released.make_baseline()
    released.retriever(batch=True)
    released.reset_calls()
    result = released.run("--rag-batch-size", "4")
    assert result.ret == 0
    calls = [c.split("\t")[0] for c in released.calls() if c.startswith(("batch", "search"))]
    assert calls and set(calls) == {"batch"}


def test_without_a_timeout_a_fast_retriever_runs_in_the_calling_thread(baselined: TrustProject) -> None:
    conftest = baselined.path / "conftest.py"
    conftest.write_text(conftest.read_text() + '''

import threading as _threading
_inner_search = Retriever.search


def _search(self, query, k):
    _log("thread\\t" + ("main" if _threading.current_thread() is _threading.main_thread() else "other"))
    return _inner_search(self, query, k)


Retriever.search = _search
''')
    assert baselined.run().ret == pytest.ExitCode.OK
    assert {c for c in baselined.calls() if c.startswith("thread")} == {"thread\tmain"}
    baselined.reset_calls()
    assert baselined.run("--rag-timeout", "30").ret == pytest.ExitCode.OK
    assert {c for c in baselined.calls() if c.startswith("thread")} == {"thread\tother"}


@pytest.mark.slow
def test_a_hung_retrieval_does_not_keep_the_process_alive(released: TrustProject) -> None:
    """A real subprocess: the abandoned daemon thread must not block interpreter exit."""
    released.make_baseline()
    released.answer(q_006={"hang": ["cassette"]})  # the last query: no other waits for it
    result = released.run_subprocess("--rag-timeout", "0.5")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert ids_with(result, "failed") == ["golden.yaml::gate::recall@10", "golden.yaml::q-006"]
    assert not (released.path / "release").exists()  # it exited while the call still hung


# ---------------------------------------------------------------------------- Ctrl-C


def _files(project: TrustProject) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in (project.path / "baselines").iterdir()}


def test_keyboard_interrupt_in_the_retriever_writes_nothing(released: TrustProject) -> None:
    released.make_baseline()
    before = _files(released)
    released.answer(q_004={"interrupt": True}, q_001=["noise"])  # q-001 would change the baseline
    result = released.run("--rag-update-baseline", "--rag-report", "run.json", "--rag-html", "run.html",
                          no_reraise_ctrlc=True)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert "Interrupted: no baseline or report written." in rag_summary(result)
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    assert _files(released) == before
    assert not (released.path / "run.json").exists() and not (released.path / "run.html").exists()


def test_keyboard_interrupt_under_a_timeout_writes_nothing(released: TrustProject) -> None:
    released.make_baseline()
    before = _files(released)
    released.answer(q_003={"interrupt": True})
    result = released.run("--rag-timeout", "30", "--rag-report", "run.json", no_reraise_ctrlc=True)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert _files(released) == before and not (released.path / "run.json").exists()


def _sigint_run(project: TrustProject, *args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "--rag-eval", *FAST, *args], cwd=project.path,
                            env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not (project.path / "hanging").exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the retriever never reached the hanging query"
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.mark.parametrize("timeout", [[], ["--rag-timeout", "60"]], ids=["no-timeout", "with-timeout"])
def test_sigint_mid_run_writes_no_baseline_and_no_report(released: TrustProject, timeout: list[str]) -> None:
    released.make_baseline()
    before = _files(released)
    released.answer(q_005={"hang": ["tire-pressure"]}, q_001=["noise"])
    proc = _sigint_run(released, "--rag-update-baseline", "--rag-report", "run.json", *timeout)
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "KeyboardInterrupt" in proc.stdout
    assert "Interrupted: no baseline or report written." in proc.stdout
    assert "INTERNALERROR" not in proc.stdout + proc.stderr
    assert _files(released) == before
    assert not (released.path / "run.json").exists()


def test_sigint_without_update_leaves_the_baseline_and_writes_no_report(released: TrustProject) -> None:
    released.make_baseline()
    stamp = released.baseline_path.stat().st_mtime_ns
    released.answer(q_002={"hang": ["chain-lube"]})
    proc = _sigint_run(released, "--rag-report", "out/run.json")
    assert proc.returncode == pytest.ExitCode.INTERRUPTED
    assert released.baseline_path.stat().st_mtime_ns == stamp
    assert not (released.path / "out").exists()
    no_traceback(proc.stderr)



@pytest.mark.slow
def test_the_reference_stack_answers_the_same_under_a_timeout(tmp_path: Path, demo_cold: DemoRun,
                                                              warm_demo_home: Path) -> None:
    """With --rag-timeout every call runs in a worker thread of its own. The demo's stack,
    built in the main thread (its embedding cache connection opened there), must give
    the same run artifact as without the timeout (the session's cold run, ``demo_cold``,
    which searched in batches)."""
    import re

    repo = Path(__file__).resolve().parents[2]
    env = clean_env(RAGMETRICS_HOME=str(warm_demo_home))
    assert demo_cold.returncode == 0, demo_cold.stdout[-4000:] + demo_cold.stderr[-2000:]
    plain = re.sub(r'"created": "[^"]*"', "", demo_cold.report.read_text(encoding="utf-8"))
    # one run: under --rag-timeout search_batch is never called (_plugin/worker.py passes batching=False), so
    # --rag-batch-size has no say in it; a second run with --rag-batch-size 1 went down the very same path
    proc = subprocess.run([sys.executable, "-m", "pytest", "--rag-eval", "-p", "no:cacheprovider",
                           f"--rag-report={tmp_path / 'timeout.json'}", "--rag-timeout", "120"],
                          cwd=repo, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert plain == re.sub(r'"created": "[^"]*"', "", (tmp_path / "timeout.json").read_text(encoding="utf-8"))


# ------------------------------------------------- an abandoned call and the next one

#: Appended to the project's conftest: a retriever that logs how many calls are inside
#: it at once. Its call for q-004 returns only once q-005's item has begun, and then
#: lingers a moment, long enough to meet a call let in beside it (which ends the linger).
GUARDED = r'''

import threading as _threading

_inside = [0]
_inside_lock = _threading.Lock()
_next_item = _threading.Event()
_entered = _threading.Event()


class Guarded(Retriever):
    def search(self, query, k):
        with _inside_lock:
            _inside[0] += 1
            _log("inside\t" + str(_inside[0]))
        try:
            _entered.set()
            if query == "adjusting the rear derailleur":
                _entered.clear()
                _next_item.wait(60)  # past its deadline: abandoned
                _entered.wait(0.3)
            return Retriever.search(self, query, k)
        finally:
            with _inside_lock:
                _inside[0] -= 1


def pytest_runtest_setup(item):
    if item.name == "q-005":
        _next_item.set()


@pytest.fixture(scope="session")
def rag_retriever():
    return Guarded()
'''


def _guarded(project: TrustProject, thread_safe: bool) -> None:
    project.conftest_text += GUARDED + ("\nGuarded.thread_safe = True\n" if thread_safe else "")
    (project.path / "conftest.py").write_text(project.conftest_text, encoding="utf-8")


def _inside(project: TrustProject) -> list[int]:
    return [int(c.split("\t")[1]) for c in project.calls() if c.startswith("inside\t")]


def test_the_next_query_waits_for_an_abandoned_call_to_return(baselined: TrustProject) -> None:
    """Most retrievers are not thread-safe: q-005 starts only once q-004's abandoned
    call has returned (within q-005's own deadline), so no two calls ever overlap."""
    _guarded(baselined, thread_safe=False)
    result = baselined.run("--rag-timeout", "1")  # q-005 waits ~0.3 s (the linger) for q-004's call
    assert outcomes(result) == {**{f"golden.yaml::{q}": "passed" for q in QIDS if q != "q-004"},
                                "golden.yaml::q-004": "failed", "golden.yaml::gate::baseline": "passed",
                                "golden.yaml::gate::coverage": "passed", "golden.yaml::gate::recall@10": "failed",
                                "golden.yaml::gate::significant-drops": "passed"}
    assert _inside(baselined) == [1] * 6
    failure = result.stdout.str().split("rag query q-004", 1)[1]
    assert "later calls wait for it to return, as the retriever does not declare thread_safe = True" in failure


def test_a_query_that_cannot_start_in_time_is_not_run_with_the_reason(released: TrustProject) -> None:
    """q-004 never returns: the queries after it may not start beside it, and each
    fails as not run, naming the call that held the retriever."""
    released.make_baseline()
    released.answer(q_004={"hang": ["derailleur", "shifter-cable"]})
    released.reset_calls()
    result = released.run("--rag-timeout", "0.5")
    assert ids_with(result, "failed") == ["golden.yaml::gate::baseline", "golden.yaml::gate::recall@10",
                                          "golden.yaml::q-004", "golden.yaml::q-005", "golden.yaml::q-006"]
    out = result.stdout.str()
    for qid in ("q-005", "q-006"):
        assert (f"query '{qid}': not run: the retriever was still busy with the abandoned call for query 'q-004' "
                ) in out.split(f"rag query {qid}", 1)[1]
        assert ("and a retriever that does not declare thread_safe = True is never called twice at once"
                ) in out.split(f"rag query {qid}", 1)[1]
    searched = [c.split("\t")[1] for c in released.calls() if c.startswith("search\t")]
    assert searched == [r["question"] for r in released.records[:4]]  # nothing after the hung call


def test_a_thread_safe_retriever_runs_the_next_query_beside_the_abandoned_call(baselined: TrustProject) -> None:
    _guarded(baselined, thread_safe=True)
    result = baselined.run("--rag-timeout", "1")
    assert ids_with(result, "failed") == ["golden.yaml::gate::recall@10", "golden.yaml::q-004"]
    assert 2 in _inside(baselined)  # q-005 ran while q-004's call was still inside
    assert "later calls wait" not in result.stdout.str()


# --------------------------------------------------------------- the retriever itself

#: Appended to the project's conftest: a rag_retriever fixture returning ``{value}``.
FIXTURE_RETURNS = '''

class NoSearch:
    def find(self, query, k):
        return []


class SearchAttribute:
    search = "bm25"


class OneArgument:
    def search(self, query):
        return []


@pytest.fixture(scope="session")
def rag_retriever():
    _log("fixture")
    return {value}
'''

BAD_RETRIEVERS = {
    "none": ("None", "the rag_retriever fixture returned None."),
    "no-search": ("NoSearch()", "the rag_retriever fixture returned NoSearch <conftest.NoSearch object at"),
    "search-not-callable": ("SearchAttribute()", "whose search is a str, not a method."),
    "search-one-argument": ("OneArgument()", "whose search(query) cannot be called as search(query, k): "
                                             "too many positional arguments."),
}


def _bad_retriever(project: TrustProject, value: str | None) -> None:
    """The project's rag_retriever returns ``value``; with None, the project defines no rag_retriever."""
    text = "" if value is None else project.conftest_text + FIXTURE_RETURNS.replace("{value}", value)
    (project.path / "conftest.py").write_text(text, encoding="utf-8")


@pytest.mark.parametrize("value, problem", [*BAD_RETRIEVERS.values(), (None, "no retriever: no fixture named "
                                                                             "rag_retriever is defined.")],
                         ids=[*BAD_RETRIEVERS, "no-fixture"])
def test_a_retriever_that_cannot_be_searched_stops_the_run_with_one_message(
        baselined: TrustProject, value: str | None, problem: str) -> None:
    _bad_retriever(baselined, value)
    result = baselined.run("--rag-report", "run.json")
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, out[-3000:]
    assert out.count(problem) == 1, out
    assert out.count("must return an object with search(query: str, k: int)") == 1
    assert "Traceback" not in out and "INTERNALERROR" not in out and "AttributeError" not in out
    assert "ragmetrics =====" not in out  # no verdict on a run that measured nothing
    assert not (baselined.path / "run.json").exists()
    assert [c for c in baselined.calls() if c != "fixture"] == []


def test_a_retriever_that_cannot_be_searched_stops_each_xdist_worker_at_once(baselined: TrustProject) -> None:
    _bad_retriever(baselined, "None")
    result = baselined.run_subprocess("-n", "2", "--rag-report", "run.json")
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, out[-3000:]
    assert "INTERNALERROR" not in out and "AttributeError" not in out
    # once a worker in the report; pytest's short summary repeats each failing item in one line (in full when
    # the CI variable is set), which is its index, not a second report
    report = out.split("short test summary info", 1)[0]
    assert 1 <= report.count("the rag_retriever fixture returned None. The session-scoped fixture") <= 2
    assert len(outcomes(result)) <= 2  # each worker stopped at its first query
    assert not (baselined.path / "run.json").exists()


def test_a_failing_retriever_shows_its_own_frames_not_the_plugin_s(baselined: TrustProject) -> None:
    """The traceback starts in the user's search (conftest.py), with or without a timeout thread."""
    import pytest_ragmetrics

    package = str(Path(pytest_ragmetrics.__file__).parent)
    baselined.answer(q_002={"raise": "index shard offline"})
    for extra in ([], ["--rag-timeout", "30"]):
        result = baselined.run(*extra)
        failure = result.stdout.str().split("rag query q-002", 1)[1].split("rag gate", 1)[0]
        assert "def search(self, query, k):" in failure and "RuntimeError: index shard offline" in failure
        assert "conftest.py" in failure
        assert package not in failure and "pytest_ragmetrics" not in failure, failure


# ------------------------------------------------------------------- a broken search_batch

#: Appended to the project's conftest: search_batch answers ``{value}``.
BROKEN_BATCH = '''

def _broken_batch(self, queries, k):
    _log("batch\\t" + str(len(queries)))
    {value}


BatchRetriever.search_batch = _broken_batch
'''

BROKEN_BATCHES = {
    "none": ("return None", "search_batch returned None for a batch of 6 queries, expected a list of 6 result lists. "
                            "The plugin stopped calling search_batch and calls search once per query for the rest "
                            "of this run"),
    "short": ("return [_answer(q) for q in queries[1:]]",
              "search_batch returned 5 result lists for a batch of 6 queries; it must return one per query, in "
              "order. The plugin stopped calling search_batch"),
    "raises": ("raise TypeError('search_batch() takes 2 positional arguments')",
               "search_batch raised TypeError('search_batch() takes 2 positional arguments'); the 6 queries of that "
               "batch are searched one at a time with search instead"),
}


@pytest.mark.parametrize("body, warning", BROKEN_BATCHES.values(), ids=BROKEN_BATCHES)
def test_a_broken_search_batch_is_reported_once_and_not_called_again(
        baselined: TrustProject, body: str, warning: str) -> None:
    baselined.retriever(batch=True)
    baselined.conftest_text += BROKEN_BATCH.replace("{value}", body)
    (baselined.path / "conftest.py").write_text(baselined.conftest_text, encoding="utf-8")
    result = baselined.run()
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    calls = [c.split("\t")[0] for c in baselined.calls() if c.startswith(("batch", "search"))]
    assert calls == ["batch"] + ["search"] * 6  # the user pays for the broken batch once
    out = result.stdout.str()
    assert out.count(warning) == 1, out
    assert "conftest.py" in out.split(warning, 1)[0].rsplit("\n", 1)[-1]  # it points at their search_batch


RAISING_FIXTURE = '''

@pytest.fixture(scope="session")
def rag_retriever():
    _log("fixture")
    raise ValueError("environment variable RAGMETRICS_SKIP_UNCOVERED='ture': expected 1/0, true/false")
'''


def test_a_fixture_that_raises_stops_the_run_and_never_reads_as_a_regression(baselined: TrustProject) -> None:
    (baselined.path / "conftest.py").write_text(baselined.conftest_text + RAISING_FIXTURE, encoding="utf-8")
    result = baselined.run("--rag-report", "run.json")
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, out[-3000:]
    assert len(outcomes(result)) == 1  # the first query errors with the traceback; nothing else runs
    assert out.count("ValueError: environment variable RAGMETRICS_SKIP_UNCOVERED='ture'") <= 3  # traceback, E line, summary
    # the fixture's own frame, without pytest's, pluggy's or the plugin's around it
    assert 'raise ValueError("environment variable' in out
    assert "_pytest/" not in out and "pluggy/" not in out and "def setup(self)" not in out, out[-3000:]
    summary = rag_summary(result)
    assert summary.startswith("the rag_retriever fixture raised ValueError: environment variable "
                              "RAGMETRICS_SKIP_UNCOVERED='ture': expected 1/0, true/false (the fixture at conftest.py:")
    assert "Nothing was measured" in summary
    assert "GATE FAILED" not in out and "fell" not in out  # not a retrieval regression
    assert not (baselined.path / "run.json").exists()
    assert baselined.calls() == ["fixture"]


def test_a_fixture_that_raises_stops_each_xdist_worker(baselined: TrustProject) -> None:
    (baselined.path / "conftest.py").write_text(baselined.conftest_text + RAISING_FIXTURE, encoding="utf-8")
    result = baselined.run_subprocess("-n", "2", "--rag-report", "run.json")
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, out[-3000:]
    assert "INTERNALERROR" not in out and "GATE FAILED" not in out
    assert len(outcomes(result)) <= 2  # each worker stopped at its first query
    assert "the rag_retriever fixture raised ValueError" in rag_summary(result)
    assert not (baselined.path / "run.json").exists()


SLOW_FIXTURE = '''

@pytest.fixture(scope="session")
def rag_retriever():
    import time
    _log("fixture")
    time.sleep(60)  # a build that never ends
'''

STUCK_FIXTURE = '''

@pytest.fixture(scope="session")
def rag_retriever():
    import signal, time
    _log("fixture")
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})  # as code holding the interpreter in C would
    time.sleep(60)
'''


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="SIGALRM is POSIX-only")
def test_a_fixture_past_the_setup_timeout_stops_the_run_where_it_hung(baselined: TrustProject) -> None:
    (baselined.path / "conftest.py").write_text(baselined.conftest_text + SLOW_FIXTURE, encoding="utf-8")
    started = time.monotonic()
    result = baselined.run("--rag-setup-timeout", "0.5", "--rag-report", "run.json")
    out = result.stdout.str()
    assert time.monotonic() - started < 30
    assert result.ret == pytest.ExitCode.USAGE_ERROR, out[-3000:]
    assert "time.sleep(60)  # a build that never ends" in out  # the traceback shows where it was stuck
    assert ("the rag_retriever fixture raised SetupTimeout: it did not finish within 0.5 s "
            "(--rag-setup-timeout / rag_setup_timeout)") in rag_summary(result)
    assert "setup timeout 0.5 s" in out  # the header says the limit
    assert len(outcomes(result)) == 1 and not (baselined.path / "run.json").exists()


@pytest.mark.skipif(not hasattr(signal, "pthread_sigmask"), reason="POSIX-only")
def test_a_fixture_that_cannot_be_interrupted_ends_the_process_with_its_stacks(baselined: TrustProject) -> None:
    (baselined.path / "conftest.py").write_text(baselined.conftest_text + STUCK_FIXTURE, encoding="utf-8")
    started = time.monotonic()
    result = baselined.run_subprocess("--rag-setup-timeout", "0.5")  # the watchdog ends it 0.5 s later
    assert time.monotonic() - started < 40
    err = result.stderr.str()
    assert result.ret == 4, result.stdout.str()[-2000:] + err[-2000:]
    assert ("ragmetrics: the rag_retriever fixture did not finish within 0.5 s (--rag-setup-timeout / "
            "rag_setup_timeout)") in err
    assert "It could not be interrupted; ending the process (exit code 4)" in err
    assert "rag_retriever" in err and "conftest.py" in err  # every thread's stack, the fixture's included


#: The backstop is shortened from its 5 s to 1 s: these tests check that faulthandler ends the process and
#: where it shows it stuck, not the margin it leaves the watchdog, and the C loop burns a core while it waits.
GIL_HOLDING_FIXTURE = '''

import pytest_ragmetrics._plugin.setup_deadline as _setup_deadline

_setup_deadline.BACKSTOP_SECONDS = 0.5


@pytest.fixture(scope="session")
def rag_retriever():
    _log("fixture")
    return sum(range(10**15))  # a C loop that never lets another Python thread run
'''


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="SIGALRM is POSIX-only")
def test_a_fixture_that_never_releases_the_interpreter_is_ended_by_faulthandler(baselined: TrustProject) -> None:
    # neither SIGALRM's handler nor the watchdog thread can run; faulthandler's C timer can
    (baselined.path / "conftest.py").write_text(baselined.conftest_text + GIL_HOLDING_FIXTURE, encoding="utf-8")
    # the loop keeps a core busy until faulthandler ends it: the limits are short to keep that short
    result = baselined.run_subprocess("--rag-setup-timeout", "0.25")
    err = result.stderr.str()
    assert result.ret == 1, result.stdout.str()[-2000:] + err[-2000:]
    assert "Timeout (0:00:01)!" in err  # 0.25 s, as long again, then BACKSTOP_SECONDS (0.5 s here)
    assert "in rag_retriever" in err and "conftest.py" in err  # where it was stuck


@pytest.mark.slow  # two xdist runs that each wait out a faulthandler limit
@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="SIGALRM is POSIX-only")
def test_under_xdist_a_worker_ended_at_setup_is_not_replaced(baselined: TrustProject) -> None:
    pytest.importorskip("xdist", reason="pytest-xdist is in the dev extra, which CI installs")
    (baselined.path / "conftest.py").write_text(baselined.conftest_text + GIL_HOLDING_FIXTURE, encoding="utf-8")
    result = baselined.run_subprocess("-n", "2", "--rag-setup-timeout", "0.25")
    out = result.stdout.str()
    assert result.ret != 0
    assert "restarting disabled" in out and "replacing crashed worker" not in out, out[-2000:]
    assert "Timeout (0:00:01)!" in result.stderr.str()
    # a limit the user set on restarts is theirs
    kept = baselined.run_subprocess("-n", "2", "--rag-setup-timeout", "0.25", "--max-worker-restart", "1")
    assert "replacing crashed worker" in kept.stdout.str(), kept.stdout.str()[-2000:]


def test_setup_timeout_values_are_checked(baselined: TrustProject) -> None:
    for bad in ("0", "-1", "soon"):
        result = baselined.run("--rag-setup-timeout", bad)
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        assert "--rag-setup-timeout / rag_setup_timeout must be a number of seconds > 0" in \
            result.stdout.str() + result.stderr.str()
