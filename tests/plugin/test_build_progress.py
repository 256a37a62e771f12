"""The rag_retriever fixture's build shows on pytest's terminal, above the item progress, while it runs.

The fixtures here use the real reference stack over the car corpus (tests/stack/data).
``RAGMETRICS_PROGRESS_INTERVAL`` and ``RAGMETRICS_PROGRESS_MIN_SECONDS`` make every
step of that small corpus "long enough" to show, so no test depends on how fast
the machine is.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from cold_xdist import GOLDEN as CAR_GOLDEN, cold_xdist_run  # tests/plugin/cold_xdist.py
from warm_cache import built_again, home_with_cache_of  # tests/warm_cache.py

CORPUS = Path(__file__).resolve().parents[1] / "stack" / "data" / "car_corpus.jsonl"

#: A BM25-only retriever, built by its first search: no model is loaded.
BM25_CONFTEST = r'''
import os
import pytest


@pytest.fixture(scope="session")
def rag_retriever():
    from pytest_ragmetrics.stack import Retriever

    retriever = Retriever(os.environ["PROGRESS_CORPUS"], chunk_size=None, mode="bm25", top_k=5)
    retriever.search("warm-up", 1)
    return retriever
'''

#: The documented fixture: the full build, vector index included.
STACK_CONFTEST = r'''
import os
import pytest


@pytest.fixture(scope="session")
def rag_retriever():
    from pytest_ragmetrics.stack import Retriever

    retriever = Retriever(os.environ["PROGRESS_CORPUS"], chunk_size=120, overlap=20, mode="hybrid", top_k=5,
                          fetch_k=10, unique_docs=True)
    retriever.build()
    return retriever
'''

GOLDEN = CAR_GOLDEN[:4]  # the shared cold session's questions: the same project shape


def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, conftest: str) -> None:
    for name in ("RAGMETRICS_PROGRESS", "RAGMETRICS_DATA_DIR", "RAGMETRICS_MODE", "RAGMETRICS_CHUNK_SIZE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PROGRESS_CORPUS", str(CORPUS))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    monkeypatch.setenv("RAGMETRICS_PROGRESS_INTERVAL", "0.001")
    monkeypatch.setenv("RAGMETRICS_PROGRESS_MIN_SECONDS", "0")  # every step shown
    pytester.makeconftest(conftest)
    pytester.makefile(".jsonl", golden="".join(
        json.dumps({"qid": qid, "query": text, "candidates": [{"doc_id": d, "rel": 1} for d in gold]}) + "\n"
        for qid, text, gold in GOLDEN))
    pytester.makeini("[pytest]\nrag_golden = golden.jsonl\n")


def cold(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.setenv("RAGMETRICS_HOME", str(pytester.path / name))  # nothing stored: the fixture builds


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("--rag-eval", "-p", "no:cacheprovider", *args, timeout=600)


def without_torch(monkeypatch: pytest.MonkeyPatch) -> tuple[str, ...]:
    """Arguments for a run that must load no model: torch made unimportable there (tests/no_torch.py),
    so a run that needs a model fails naming the blocked import."""
    tests = str(Path(__file__).resolve().parents[1])
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [tests, os.environ.get("PYTHONPATH")])))
    return ("-p", "no_torch")


def test_the_build_shows_above_the_items_and_quiet_hides_it(pytester: pytest.Pytester,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    project(pytester, monkeypatch, BM25_CONFTEST)
    cold(pytester, monkeypatch, "loud")
    result = run(pytester)
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # no baseline: the baseline gate fails
    out = result.stdout.lines
    ended = [i for i, line in enumerate(out) if line.startswith("ragmetrics: tokenising for BM25: 30 chunks in ")]
    assert len(ended) == 1, result.stdout.str()  # once: the fixture builds once
    assert any(line.startswith("ragmetrics: tokenising for BM25: 30/30 chunks (100%)") for line in out)
    items = next(i for i, line in enumerate(out) if line.startswith("golden.jsonl ....F"))
    assert out[ended[0] - 2] == "golden.jsonl " and ended[0] < items  # under the item's file, above its results
    assert "tokenising" not in result.stderr.str()

    cold(pytester, monkeypatch, "quiet")
    quiet = run(pytester, "-q")
    assert "tokenising for BM25" not in quiet.stdout.str() + quiet.stderr.str()

    monkeypatch.setenv("RAGMETRICS_PROGRESS", "off")
    cold(pytester, monkeypatch, "off")
    off = run(pytester)
    assert "tokenising for BM25" not in off.stdout.str() + off.stderr.str()
    assert off.stdout.lines[out.index("golden.jsonl "):][0].startswith("golden.jsonl ....F")


#: A retriever whose fixture leaves the build to the first search.
LAZY_CONFTEST = r'''
import os
import pytest


@pytest.fixture(scope="session")
def rag_retriever():
    from pytest_ragmetrics.stack import Retriever

    return Retriever(os.environ["PROGRESS_CORPUS"], chunk_size=None, mode="bm25", top_k=5)
'''


def test_a_build_at_the_first_search_shows_too(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    project(pytester, monkeypatch, LAZY_CONFTEST)
    cold(pytester, monkeypatch, "lazy")
    result = run(pytester)
    out = result.stdout.lines
    ended = [i for i, line in enumerate(out) if line.startswith("ragmetrics: tokenising for BM25: 30 chunks in ")]
    assert len(ended) == 1, result.stdout.str()
    assert ended[0] < next(i for i, line in enumerate(out) if line.startswith("golden.jsonl ....F"))


def test_a_bad_progress_setting_stops_the_run_at_once(pytester: pytest.Pytester,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    project(pytester, monkeypatch, BM25_CONFTEST)
    monkeypatch.setenv("RAGMETRICS_PROGRESS", "loud")
    result = run(pytester)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "ragmetrics: RAGMETRICS_PROGRESS='loud': expected bar, lines, off or auto" in result.stderr.str()


@pytest.mark.slow  # loads MiniLM in fresh processes
def test_a_cold_build_of_the_stack_shows_each_step_once(pytester: pytest.Pytester,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    project(pytester, monkeypatch, STACK_CONFTEST)
    cold(pytester, monkeypatch, "serial")
    result = run(pytester, "-v")
    out = result.stdout.str()
    ours = [line for line in result.stdout.lines if line.startswith("ragmetrics: ") and " chunks" in line]
    assert [line.split(":")[1].strip() for line in ours if " chunks in " in line] == [
        "tokenising for BM25", "building the vector index"]
    assert out.index("ragmetrics: building the vector index: ") < out.index("golden.jsonl::q1 PASSED")
    assert "building the vector index" not in result.stderr.str()  # not in captured output either

    # the same build again from the embedding cache alone (no model loaded): shown step by step too,
    # and hidden by -q
    monkeypatch.setenv("RAGMETRICS_HOME", str(home_with_cache_of(pytester.path / "serial", pytester.path / "again")))
    again = run(pytester, "-v", *without_torch(monkeypatch))
    assert built_again(pytester.path / "again")
    assert [line.split(":")[1].strip() for line in again.stdout.lines
            if line.startswith("ragmetrics: ") and " chunks in " in line] == ["tokenising for BM25",
                                                                             "building the vector index"]
    monkeypatch.setenv("RAGMETRICS_HOME", str(home_with_cache_of(pytester.path / "serial", pytester.path / "quiet")))
    quiet = run(pytester, "-q", *without_torch(monkeypatch))
    assert built_again(pytester.path / "quiet")
    assert "building the vector index" not in quiet.stdout.str() + quiet.stderr.str()


@pytest.mark.slow  # loads MiniLM in fresh processes
def test_under_xdist_the_building_worker_says_so_live_on_stderr(pytester: pytest.Pytester,
                                                                 monkeypatch: pytest.MonkeyPatch,
                                                                 tmp_path_factory: pytest.TempPathFactory) -> None:
    pytest.importorskip("xdist", reason="pytest-xdist is in the dev extra, which CI installs")
    project(pytester, monkeypatch, STACK_CONFTEST)
    # the loud cold session (the documented fixture, every step shown) is shared with
    # test_xdist_index_once.py, which checks the build records its workers left
    result = cold_xdist_run(tmp_path_factory)
    err = result.stderr.splitlines()
    built = [line for line in err if line.startswith("[gw") and "ragmetrics: building the vector index: " in line
             and " chunks in " in line]
    assert len(built) == 1, result.stderr  # one worker built the index
    builder = built[0][1:4]
    # the other opened the finished index (saying so if it had to wait for the lock); both may tokenise for BM25
    others = [line for line in err if line.startswith("[gw") and not line.startswith(f"[{builder}]")]
    assert all(" ragmetrics: waiting for another process to finish building this index: " in line
               or " ragmetrics: tokenising for BM25: " in line for line in others), others
    assert "building the vector index" not in result.stdout

    # -q hides it: the same build from the session's embedding cache alone (every index made again,
    # no model loaded)
    monkeypatch.setenv("RAGMETRICS_HOME", str(home_with_cache_of(result.home, pytester.path / "xdist-quiet")))
    quiet = run(pytester, "-n", "2", "-q", *without_torch(monkeypatch))
    assert quiet.ret == pytest.ExitCode.TESTS_FAILED, quiet.stdout.str()  # no baseline: its gate fails
    assert built_again(pytester.path / "xdist-quiet")
    assert "ragmetrics: building" not in quiet.stdout.str() + quiet.stderr.str()


@pytest.mark.slow  # the shared cold session it rebuilds from loads MiniLM in fresh processes
def test_progress_off_hides_the_build_of_the_stack(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path_factory: pytest.TempPathFactory) -> None:
    """``RAGMETRICS_PROGRESS=off`` hides the vector index's build even when every index is made
    again, and without -q (which hides it too): the setting, not the verbosity, silences it."""
    project(pytester, monkeypatch, STACK_CONFTEST)
    # the embedding cache of the shared cold session (once per run): this run builds every index
    # again, as a cold one would, but reads each vector from the cache
    cold = cold_xdist_run(tmp_path_factory)
    monkeypatch.setenv("RAGMETRICS_HOME", str(home_with_cache_of(cold.home, pytester.path / "off")))
    monkeypatch.setenv("RAGMETRICS_PROGRESS", "off")
    off = run(pytester, "-v", *without_torch(monkeypatch))
    assert off.ret == pytest.ExitCode.TESTS_FAILED, off.stdout.str()  # no baseline: its gate fails
    assert "golden.jsonl::q1 PASSED" in off.stdout.str()  # the retriever was built and searched
    assert built_again(pytester.path / "off")
    assert "building the vector index" not in off.stdout.str() + off.stderr.str()
