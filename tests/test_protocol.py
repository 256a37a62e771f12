"""The retriever protocol as types: a type checker accepts every result shape the plugin
takes and refuses the mistakes it would otherwise only find at run time.

mypy runs in a subprocess on small files that import the installed package's
protocol, as a user's own code would.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

import pytest_ragmetrics
from pytest_ragmetrics import BatchRetriever, CorpusRetriever, DescribedRetriever, ResultWithId, Retriever
from pytest_ragmetrics.results import normalize_results

ROOT = Path(__file__).resolve().parent.parent

CONFORMING = """
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, NamedTuple

import numpy as np

from pytest_ragmetrics import BatchRetriever, CorpusRetriever, DescribedRetriever, Result, Retriever


@dataclass(frozen=True)
class Hit:
    id: str
    score: float
    parent_id: str | None = None


class Row(NamedTuple):
    id: str
    score: float


class Ids:
    def search(self, query: str, k: int) -> list[str]:
        return ["a"]


class Pairs:  # other parameter names and a default: the plugin passes both by position
    def search(self, text: str, top_k: int = 10) -> list[tuple[str, float]]:
        return [("a", 1.0)]


class NumpyScores:
    def search(self, query: str, k: int) -> list[tuple[str, np.float32 | None]]:
        return [("a", np.float32(1.0)), ("b", None)]


class Rows:
    def search(self, query: str, k: int) -> tuple[Row, ...]:
        return (Row("a", 1.0),)


class Mappings:
    def search(self, query: str, k: int) -> list[dict[str, Any]]:
        return [{"id": "a", "score": 1.0, "metadata": {}}]


class Mixed:
    def search(self, query: str, k: int) -> list[Result]:
        return ["a", ("b", 0.5), {"id": "c"}]


class Full:
    thread_safe = True

    def search(self, query: str, k: int) -> list[Hit]:
        return [Hit("a", 1.0)]

    def search_batch(self, queries: list[str], k: int) -> list[list[Hit]]:
        return [self.search(q, k) for q in queries]

    def describe(self) -> dict[str, Any]:
        return {"kind": "full"}

    def doc_ids(self) -> Iterator[str]:
        yield "a"


r: Retriever = Ids()
r = Pairs()
r = NumpyScores()
r = Rows()
r = Mappings()
r = Mixed()
r = Full()
b: BatchRetriever = Full()
c: CorpusRetriever = Full()
d: DescribedRetriever = Full()
"""

#: each case: a class that does not fit, and the assignment mypy must refuse
WRONG = {
    "no_k": "def search(self, query: str) -> list[str]: raise NotImplementedError",
    "int_ids": "def search(self, query: str, k: int) -> list[int]: raise NotImplementedError",
    "score_dict": "def search(self, query: str, k: int) -> dict[str, float]: raise NotImplementedError",
    "text_scores": "def search(self, query: str, k: int) -> list[tuple[str, str]]: raise NotImplementedError",
    "swapped": "def search(self, k: int, query: str) -> list[str]: raise NotImplementedError",
    "keyword_only_k": "def search(self, query: str, *, k: int) -> list[str]: raise NotImplementedError",
    "no_search": "def find(self, query: str, k: int) -> list[str]: raise NotImplementedError",
}


def _wrong_module() -> tuple[str, dict[int, str]]:
    lines = ["from __future__ import annotations", "from pytest_ragmetrics import Retriever", ""]
    for name, method in WRONG.items():
        lines += [f"class {name.title().replace('_', '')}:", f"    {method}", ""]
    assignments: dict[int, str] = {}
    for name in WRONG:
        lines.append(f"{name}: Retriever = {name.title().replace('_', '')}()")
        assignments[len(lines)] = name
    return "\n".join(lines) + "\n", assignments


@pytest.fixture(scope="module")
def mypy_errors(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    """mypy's errors for the conforming and the wrong module, each by file name; one mypy run."""
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed (it is in the dev extra)")
    folder = tmp_path_factory.mktemp("typed")
    (folder / "conforming.py").write_text(textwrap.dedent(CONFORMING), encoding="utf-8")
    (folder / "wrong.py").write_text(_wrong_module()[0], encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental", "--cache-dir", str(folder / ".cache"),
         "--python-version", "3.10", "--hide-error-context", "--no-error-summary", "conforming.py", "wrong.py"],
        capture_output=True, text=True, timeout=300, cwd=folder,
        env={**os.environ, "PYTHONPATH": str(ROOT), "MYPYPATH": str(ROOT)},
    )
    errors: dict[str, list[str]] = {"conforming.py": [], "wrong.py": []}
    for line in proc.stdout.splitlines():
        match = re.match(r"(\w+\.py):\d+: error: ", line)
        if match:
            errors[match.group(1)].append(line)
    assert proc.returncode in (0, 1) and not proc.stderr.strip(), proc.stdout + proc.stderr
    return errors


def test_mypy_accepts_every_result_shape_the_plugin_takes(mypy_errors: dict[str, list[str]]) -> None:
    assert mypy_errors["conforming.py"] == []


def test_mypy_refuses_a_retriever_that_does_not_fit(mypy_errors: dict[str, list[str]]) -> None:
    _, assignments = _wrong_module()
    refused = {assignments[int(line.split(":")[1])] for line in mypy_errors["wrong.py"]
               if int(line.split(":")[1]) in assignments and "Incompatible types in assignment" in line}
    assert refused == set(WRONG), mypy_errors["wrong.py"]
    # and nothing else in the file is wrong: each refusal is about the retriever, not the test's own code
    assert len(mypy_errors["wrong.py"]) == len(WRONG), mypy_errors["wrong.py"]


@dataclass(frozen=True)
class _Hit:
    id: str
    score: float | None = None


class _Batch:
    def search(self, query: str, k: int) -> list[_Hit]:
        return [_Hit("a", 0.5)]

    def search_batch(self, queries: list[str], k: int) -> list[list[_Hit]]:
        return [self.search(q, k) for q in queries]


def test_the_protocols_check_at_run_time_too() -> None:
    """``isinstance`` sees the methods (not their signatures), for a user's own sanity test."""
    retriever = _Batch()
    assert isinstance(retriever, Retriever) and isinstance(retriever, BatchRetriever)
    assert not isinstance(retriever, CorpusRetriever) and not isinstance(retriever, DescribedRetriever)
    assert not isinstance(object(), Retriever)
    assert isinstance(_Hit("a"), ResultWithId) and not isinstance("a", ResultWithId)
    # what the type says is a result is what the plugin reads
    assert normalize_results(retriever.search("q", 5), 5).ids == ["a"]


def test_the_protocol_is_public() -> None:
    for name in ("Retriever", "BatchRetriever", "CorpusRetriever", "DescribedRetriever", "Result", "ResultWithId"):
        assert name in pytest_ragmetrics.__all__
        assert getattr(pytest_ragmetrics, name) is getattr(pytest_ragmetrics.protocol, name)
