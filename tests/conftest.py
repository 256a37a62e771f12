"""Test-wide settings: offline model loading, and where the shared collections live."""

from __future__ import annotations

import importlib
import os
import pkgutil
import signal
import sys
from collections.abc import Iterator
from typing import Any
from pathlib import Path

# One compute thread per process (OpenMP: torch, MKL, OpenBLAS), read when those libraries load,
# so set before numpy's import and inherited by every process a test starts. The suite runs two
# xdist workers on two cores, and often a subprocess beside each: a second thread per process
# only waits for a core, and its OpenMP spin-wait still counts as CPU time (a cold demo build:
# 25 s of CPU with two threads, 17 s with one, and no slower).
os.environ.setdefault("OMP_NUM_THREADS", "1")

# Rewritten test modules are cached as bytecode in __pycache__ (ignored by git), as pytest does by
# default. Some container images set PYTHONDONTWRITEBYTECODE, which turns that cache off: each
# pytest process (every xdist worker, every pytest a test starts) then parses and rewrites the
# suite's ~100 test modules again, about 5 s of CPU apiece. Test processes only: the package's
# own behaviour is the same either way.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

import numpy  # noqa: F401,E402  - see below
import pytest

import pytest_ragmetrics

from demo_run import DemoRun, cold_demo_run, copy_home  # tests/demo_run.py
from onnx_export import OnnxExport, minilm_onnx  # tests/onnx_export.py
from order import long_modules_first  # tests/order.py
from plugins_off import IN_PROCESS, PLUGINS_OFF  # tests/plugins_off.py (tests/ is on sys.path)

# pytester's in-process runs restore sys.modules afterwards; numpy's C core cannot be
# imported twice in one process, so it must be loaded before the first run (the gate
# imports it for its paired statistics).

# The same restore dropped the plugin's own modules after every run, so each in-process run
# imported, and assertion-rewrote, the plugin's package again (most of a run's time when
# bytecode is not written). Loaded once here, every run shares them, as the runs already did
# for the modules the test files import. The stack and the annotation server stay lazy.
for _module in pkgutil.walk_packages(pytest_ragmetrics.__path__, "pytest_ragmetrics."):
    if _module.name.split(".")[1] not in ("stack", "annotate", "__main__"):
        importlib.import_module(_module.name)

# No model hub here: a hub name would hang for a minute before failing.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# A shell that starts the suite as a background job (``cmd &`` without job control) hands it
# SIGINT ignored, and an ignored signal stays ignored in every child: the tests that stop a
# subprocess with Ctrl-C would wait for nothing. A handled signal is reset for children.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

REPO_ROOT = Path(__file__).resolve().parents[1]
COLLECTIONS = REPO_ROOT.parent / "shared" / "collections"

#: The inner loop, ``-m core`` (CONTRIBUTING.md, "Test loops"): metrics, measures, golden and TREC
#: files, statistics, the gate's comparison, reports and the CLI verbs on files. No reference
#: stack, no pytest session inside a test, no browser: about 730 tests in under 30 s.
CORE_FILES = frozenset({
    "test_agreement.py", "test_candidates.py", "test_cli_verbs.py", "test_compare.py", "test_conformance.py",
    "test_export.py", "test_gates_declared.py", "test_golden.py", "test_history.py", "test_judged_measures.py", "test_layers.py",
    "test_measures.py", "test_metrics.py", "test_parents.py", "test_progress.py", "test_report_markdown.py",
    "test_sample.py", "test_shadow.py", "test_sources.py", "test_stats.py", "test_trec.py", "test_trec_fast_path.py",
})


@pytest.hookimpl(hookwrapper=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> Iterator[None]:
    """Mark the inner loop's tests ``core`` before ``-m`` selects; then run the selected modules that
    hold ``slow`` tests first (``tests/order.py``: the workers' busy time differed by ~30 s of a
    5-minute run when a long test came last)."""
    here = Path(__file__).parent
    for item in items:
        if item.path.parent == here and item.path.name in CORE_FILES:
            item.add_marker(pytest.mark.core)
    yield  # -m and -k deselect here
    long_modules_first(items)


@pytest.fixture(scope="session")
def collections_dir() -> Path:
    """The shared real collections; absent on a user's checkout, present here and in CI."""
    if not COLLECTIONS.is_dir():
        pytest.skip(f"shared collections not found at {COLLECTIONS} (present in CI)")
    return COLLECTIONS


@pytest.fixture(scope="session")
def demo_cold(tmp_path_factory: pytest.TempPathFactory) -> DemoRun:
    """The demo gate run cold once per test run, xdist workers included (``tests/demo_run.py``)."""
    return cold_demo_run(tmp_path_factory)


@pytest.fixture(scope="session")
def minilm_onnx_export(tmp_path_factory: pytest.TempPathFactory) -> OnnxExport:
    """MiniLM exported to ONNX (float32 and int8) once per test run, xdist workers included
    (``tests/onnx_export.py``)."""
    return minilm_onnx(tmp_path_factory)


@pytest.fixture
def warm_demo_home(demo_cold: DemoRun, tmp_path: Path) -> Path:
    """A ``RAGMETRICS_HOME`` of this test's own holding the demo's built index and embedding cache."""
    return copy_home(demo_cold, tmp_path / "demo-home")


@pytest.fixture
def pytester(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """pytester whose sessions (in-process, in a subprocess, and their xdist workers) skip idle plugins.

    pytester clears ``PYTEST_ADDOPTS`` when it starts; it is set again here, after that. In-process
    runs get the plugin modules themselves (``IN_PROCESS``), so no run scans the installed
    distributions for them.
    """
    monkeypatch.setenv("PYTEST_ADDOPTS", " ".join(PLUGINS_OFF))
    inline_run = pytester.inline_run

    def inline_run_with_plugins(*args: Any, plugins: Any = (), **kwargs: Any) -> Any:
        return inline_run(*args, plugins=[*plugins, *IN_PROCESS], **kwargs)

    monkeypatch.setattr(pytester, "inline_run", inline_run_with_plugins)
    return pytester


@pytest.fixture(autouse=True)
def _no_step_summary(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sessions run by the tests must not append to a real CI job summary, nor compare their baselines
    with the base branch of the pull request CI runs for (a test that wants that sets both)."""
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    monkeypatch.delenv("GITHUB_EVENT_NAME", raising=False)
    monkeypatch.delenv("GITHUB_BASE_REF", raising=False)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> object:
    """Under ``RAGMETRICS_REQUIRE_ALL=1`` (set by ``.ci/run``) a skip is a failure.

    The skips above exist for a developer's machine that lacks Chromium, the
    chroma CLI, network namespaces or the shared collections; CI has all of
    them, so a skip there means a test silently stopped running.
    """
    outcome = yield
    _fail_a_skip(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> object:
    """The same for a whole module skipped at import (``pytest.importorskip`` at module level),
    which no test report would show."""
    outcome = yield
    _fail_a_skip(outcome.get_result())


def _fail_a_skip(report: pytest.TestReport | pytest.CollectReport) -> None:
    if report.skipped and os.environ.get("RAGMETRICS_REQUIRE_ALL") == "1" and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"skipped, but RAGMETRICS_REQUIRE_ALL=1 (CI has everything): {report.longrepr}"
