"""Under pytest-xdist the reference stack's index is built by one process only.

Every worker runs the session-scoped ``rag_retriever`` fixture, and with it
``Retriever.build()``. The build lock in ``stack/index.py`` must make the first
worker encode and build while the other waits and then opens the finished
collection: exactly one process encodes the corpus, and nothing is encoded or
rebuilt on the next run. A damaged index is repaired by one worker, from the
embedding cache, and the note is shown once. A real ``pytest -n 2`` session over a small corpus, with
the real model, chroma and BM25, in a fresh ``RAGMETRICS_HOME``.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest
import xdist  # noqa: F401  - dev extra: CI has it; missing must fail
from cold_xdist import ENV, GOLDEN, cold_xdist_run  # tests/plugin/cold_xdist.py


def _builds(path: Path, run: str) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((path / "builds").glob(f"{run}-*.json"))]


@pytest.mark.slow
def test_the_index_is_built_once_under_xdist(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                             tmp_path_factory: pytest.TempPathFactory) -> None:
    # the cold session is shared with test_build_progress.py, which checks what its workers printed
    cold = cold_xdist_run(tmp_path_factory)
    assert cold.returncode == pytest.ExitCode.OK, cold.stdout[-3000:] + cold.stderr[-2000:]
    builds = _builds(cold.project, "cold")
    # both workers ran queries, so both ran the fixture and build()
    assert sorted(b["who"] for b in builds) == ["gw0", "gw1"], builds
    assert len({b["data_dir"] for b in builds}) == 1  # the same index folder
    builder = [b for b in builds if b["rebuilt"]]
    opener = [b for b in builds if not b["rebuilt"]]
    assert len(builder) == 1 and len(opener) == 1, builds  # one built, the other opened the finished index
    assert builder[0]["encoded"] == builder[0]["chunks"] > len(GOLDEN)  # the builder encoded the corpus
    assert opener[0]["encoded"] == 0  # the other encoded nothing: it waited on the lock and reused

    # the reruns work on a copy of the project (with the baseline the cold run wrote) and of its home
    for name in ("conftest.py", "golden.jsonl", "pytest.ini", "baselines"):
        copy = shutil.copytree if (cold.project / name).is_dir() else shutil.copy
        copy(cold.project / name, pytester.path / name)
    home = Path(shutil.copytree(cold.home, pytester.path / "home"))
    monkeypatch.setenv("RAGMETRICS_HOME", str(home))
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)

    monkeypatch.setenv("COLD_XDIST_RUN", "warm")
    again = pytester.runpytest_subprocess("--rag-eval", "-n", "2", "-p", "no:cacheprovider", timeout=600)
    assert again.ret == pytest.ExitCode.OK, again.stdout.str()[-3000:]
    warm = _builds(pytester.path, "warm")
    assert sorted(b["who"] for b in warm) == ["gw0", "gw1"], warm
    assert [(b["rebuilt"], b["encoded"]) for b in warm] == [(False, 0), (False, 0)]  # nobody builds twice

    # a damaged vector index and BM25 store: one worker repairs each under its lock, the other
    # opens the repaired copy; the run passes, nothing is encoded, and each note is shown once
    (folder,) = {Path(b["data_dir"]) for b in warm}
    _damage(next(folder.glob("*/data_level0.bin")))
    _damage(next(home.glob("bm25/bm25s-*/data.csc.index.npy")))
    monkeypatch.setenv("COLD_XDIST_RUN", "damaged")
    repaired = pytester.runpytest_subprocess("--rag-eval", "-n", "2", "-p", "no:cacheprovider", timeout=600)
    assert repaired.ret == pytest.ExitCode.OK, repaired.stdout.str()[-3000:]
    damaged = _builds(pytester.path, "damaged")
    assert sorted((b["rebuilt"], b["encoded"]) for b in damaged) == [(False, 0), (True, 0)], damaged
    out = repaired.stdout.lines
    vector = [line for line in out if f"RagMetricsWarning: ragmetrics: the vector index in {folder} was damaged" in line]
    bm25 = [line for line in out if "RagMetricsWarning: ragmetrics: the stored BM25 index" in line]
    assert len(vector) == 1 and "/data_level0.bin has sha256 " in vector[0], repaired.stdout.str()[-3000:]
    assert len(bm25) == 1 and "data.csc.index.npy has sha256 " in bm25[0], repaired.stdout.str()[-3000:]


def _damage(path: Path) -> None:
    """50 random 64-byte writes at random offsets (a fixed seed): what a half-restored cache leaves."""
    rng = random.Random(0)
    size = path.stat().st_size
    with open(path, "r+b") as fh:
        for _ in range(50):
            fh.seek(rng.randrange(max(size - 64, 0) + 1))
            fh.write(rng.randbytes(64))
