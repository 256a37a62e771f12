"""The suite's own tools: work shared once per run (tests/once.py), the torch blocker for the fast
selection (tests/no_torch.py), the order the long modules run in (tests/order.py) and the stack home
that builds again from a cache alone (tests/warm_cache.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from once import once_per_run  # tests/once.py (tests/ is on sys.path)
from order import long_modules_first  # tests/order.py
from warm_cache import built_again, home_with_cache_of  # tests/warm_cache.py

REPO = Path(__file__).resolve().parents[1]


def test_the_work_runs_once_and_every_caller_reads_its_record(tmp_path_factory: pytest.TempPathFactory) -> None:
    calls: list[Path] = []

    def make(folder: Path) -> Any:
        calls.append(folder)
        (folder / "built").write_text("index", encoding="utf-8")
        return {"chunks": 30, "shape": (1, 384)}

    first = once_per_run(tmp_path_factory, "suite-tools-ok", make)
    again = once_per_run(tmp_path_factory, "suite-tools-ok", make)
    assert len(calls) == 1 and first == again
    folder, record = first
    assert record == {"chunks": 30, "shape": [1, 384]}  # read back as JSON, by the first caller too
    assert (folder / "built").read_text(encoding="utf-8") == "index" and not (folder / "done.json.tmp").exists()


def test_a_failure_is_kept_for_the_run_and_never_retried(tmp_path_factory: pytest.TempPathFactory) -> None:
    calls: list[Path] = []

    def make(folder: Path) -> Any:
        calls.append(folder)
        (folder / "half-built").write_text("", encoding="utf-8")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        once_per_run(tmp_path_factory, "suite-tools-fails", make)
    with pytest.raises(pytest.fail.Exception) as later:
        once_per_run(tmp_path_factory, "suite-tools-fails", make)
    assert len(calls) == 1  # the second caller meets the first one's error, not its leftovers
    worker = os.environ.get("PYTEST_XDIST_WORKER", "the test process")
    assert f"the shared work 'suite-tools-fails' failed earlier in this run:\nin {worker}: RuntimeError: disk full" \
        == str(later.value)


def test_a_skip_is_kept_for_the_run(tmp_path_factory: pytest.TempPathFactory) -> None:
    calls: list[Path] = []

    def make(folder: Path) -> Any:
        calls.append(folder)
        pytest.skip("no chromium here")

    for _ in range(2):
        with pytest.raises(pytest.skip.Exception, match="no chromium here"):
            once_per_run(tmp_path_factory, "suite-tools-skips", make)
    assert len(calls) == 1


def test_no_torch_makes_a_test_that_loads_torch_fail_with_the_fix(tmp_path: Path) -> None:
    """The check CONTRIBUTING gives for a new test: a test that needs torch fails on the blocked import."""
    test = tmp_path / "test_loads_torch.py"
    test.write_text("def test_it():\n    import sentence_transformers  # noqa: F401\n\n\n"
                    "def test_without():\n    import numpy  # noqa: F401\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER")}
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # no idle plugin needed here (tests/plugins_off.py)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.no_torch", "-p", "no:cacheprovider",
                           "-q", str(test)], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "sentence_transformers is blocked by -p tests.no_torch: a test that loads torch must be marked slow" \
        in proc.stdout
    assert "1 failed, 1 passed" in proc.stdout


def _item(path: str, slow: bool = False) -> Any:
    return SimpleNamespace(path=Path(path), name=f"{path}:{slow}",
                           get_closest_marker=lambda name: object() if slow and name == "slow" else None)


def test_the_modules_holding_slow_tests_run_first_each_whole_and_in_order() -> None:
    items = [_item("a.py"), _item("b.py"), _item("b.py", slow=True), _item("b.py"), _item("c.py"),
             _item("d.py", slow=True), _item("d.py")]
    long_modules_first(items)
    assert [(i.path.name, i.name.endswith("True")) for i in items] == [
        ("b.py", False), ("b.py", True), ("b.py", False), ("d.py", True), ("d.py", False),
        ("a.py", False), ("c.py", False)]
    fast = [_item("a.py"), _item("c.py"), _item("b.py")]
    long_modules_first(fast)
    assert [i.path.name for i in fast] == ["a.py", "c.py", "b.py"]  # no slow test: the order is kept


def test_a_home_with_the_cache_of_another_holds_only_its_cache(tmp_path: Path) -> None:
    source = tmp_path / "cold"
    for name, text in {"cache/embeddings.sqlite3": "db", "cache/embeddings.sqlite3-wal": "wal",
                       "index/0123/settings.json": "{}", "index/0123/manifest.json": "{}", "bm25/chunks.json": "[]",
                       "onnx/model.onnx": "graph"}.items():
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        (source / name).write_text(text, encoding="utf-8")
    assert built_again(source)
    home = home_with_cache_of(source, tmp_path / "warm")
    assert sorted(str(p.relative_to(home)) for p in home.rglob("*")) == [
        "cache", "cache/embeddings.sqlite3", "cache/embeddings.sqlite3-wal"]  # no index, BM25 or graph
    assert (home / "cache" / "embeddings.sqlite3-wal").read_text(encoding="utf-8") == "wal"
    assert not built_again(home)
    (home / "index" / "4567").mkdir(parents=True)
    (home / "index" / "4567" / "settings.json").write_text("{}", encoding="utf-8")  # written before a build
    (home / "bm25").mkdir()
    assert not built_again(home)  # an index is whole once its manifest is written
    (home / "index" / "4567" / "manifest.json").write_text("{}", encoding="utf-8")
    assert built_again(home)
    with pytest.raises(AssertionError, match="holds no embedding cache"):
        home_with_cache_of(tmp_path / "warm" / "index", tmp_path / "other")
