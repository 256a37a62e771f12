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
from pathlib import Path

import pytest

import xdist  # noqa: F401  - dev extra: CI has it; missing must fail

CORPUS = Path(__file__).resolve().parents[1] / "stack" / "data" / "car_corpus.jsonl"

CONFTEST = r'''
import json, os, pathlib
import pytest

HERE = pathlib.Path(__file__).parent


@pytest.fixture(scope="session")
def rag_retriever(request):
    from pytest_ragmetrics.stack import Retriever

    retriever = Retriever(os.environ["INDEX_ONCE_CORPUS"], chunk_size=120, overlap=20, mode="hybrid",
                          top_k=5, fetch_k=10, unique_docs=True)
    stats = retriever.build()
    who = getattr(request.config, "workerinput", {}).get("workerid", "serial")
    run = os.environ["INDEX_ONCE_RUN"]
    (HERE / "builds").mkdir(exist_ok=True)
    (HERE / "builds" / f"{run}-{who}-{os.getpid()}.json").write_text(json.dumps(
        {"who": who, "encoded": stats["encoded"], "rebuilt": stats["vector_index_rebuilt"],
         "chunks": stats["chunks"], "data_dir": str(retriever.data_dir)}))
    return retriever
'''

#: Questions on the car corpus and the documents that answer them.
GOLDEN = [
    ("q1", "my car battery dies on cold mornings", ["battery-cold"]),
    ("q2", "squealing noise when braking", ["brake-pads"]),
    ("q3", "how often to change the engine oil", ["oil-change", "oil-level"]),
    ("q4", "correct tyre pressure", ["tyre-pressure"]),
    ("q5", "engine temperature gauge in the red", ["overheating", "coolant"]),
    ("q6", "start a car with a flat battery using cables", ["jump-start"]),
    ("q7", "wipers leave streaks on the windscreen", ["wipers"]),
    ("q8", "car pulls to one side", ["alignment"]),
]


def _builds(path: Path, run: str) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((path / "builds").glob(f"{run}-*.json"))]


@pytest.mark.slow
def test_the_index_is_built_once_under_xdist(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    home = pytester.path / "home"
    monkeypatch.setenv("RAGMETRICS_HOME", str(home))  # cold: no cache, no index
    monkeypatch.setenv("INDEX_ONCE_CORPUS", str(CORPUS))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    pytester.makeconftest(CONFTEST)
    pytester.makefile(".jsonl", golden="".join(
        json.dumps({"qid": qid, "query": text, "candidates": [{"doc_id": d, "rel": 1} for d in gold]}) + "\n"
        for qid, text, gold in GOLDEN))
    pytester.makeini("[pytest]\nrag_golden = golden.jsonl\n")

    monkeypatch.setenv("INDEX_ONCE_RUN", "cold")
    first = pytester.runpytest_subprocess("--rag-eval", "-n", "2", "--rag-update-baseline", "-p", "no:cacheprovider",
                                          timeout=600)
    assert first.ret == pytest.ExitCode.OK, first.stdout.str()[-3000:]
    builds = _builds(pytester.path, "cold")
    # both workers ran queries, so both ran the fixture and build()
    assert sorted(b["who"] for b in builds) == ["gw0", "gw1"], builds
    assert len({b["data_dir"] for b in builds}) == 1  # the same index folder
    builder = [b for b in builds if b["rebuilt"]]
    opener = [b for b in builds if not b["rebuilt"]]
    assert len(builder) == 1 and len(opener) == 1, builds  # one built, the other opened the finished index
    assert builder[0]["encoded"] == builder[0]["chunks"] > len(GOLDEN)  # the builder encoded the corpus
    assert opener[0]["encoded"] == 0  # the other encoded nothing: it waited on the lock and reused

    monkeypatch.setenv("INDEX_ONCE_RUN", "warm")
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
    monkeypatch.setenv("INDEX_ONCE_RUN", "damaged")
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
