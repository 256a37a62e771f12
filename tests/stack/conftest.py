"""Stack fixtures: a tiny corpus, a shared embedder, a tiny cross-encoder, a Chroma server.

``collections_dir`` (the shared real collections, skipped where absent) comes from
``tests/conftest.py``.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_ragmetrics.stack import Document, Embedder, Retriever, load_corpus
from tiny_models import build_tiny_cross_encoder  # tests/tiny_models.py (tests/ is on sys.path)

# No model hub at run time: a hub name would hang ~60 s before failing. (The stack
# imports transformers lazily, so setting these after the import above is in time.)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

#: A Chroma server started outside the tests (e.g. by CI); otherwise the fixture starts one.
EXTERNAL_CHROMA_URL = os.environ.get("RAGMETRICS_TEST_CHROMA_URL")

# A small original corpus on car care (data/car_corpus.jsonl): 30 short documents,
# so embedding it costs well under a second. Several share words on purpose
# (battery, brake, car) so BM25 and the vector route disagree on some queries.
CAR_CORPUS = Path(__file__).parent / "data" / "car_corpus.jsonl"


CAR_CHUNK_SIZE, CAR_OVERLAP = 120, 20


@pytest.fixture(scope="session")
def _session_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ragmetrics-home")


@pytest.fixture(autouse=True)
def ragmetrics_home(_session_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point RAGMETRICS_HOME at a temporary dir and hide other ``RAGMETRICS_*`` variables.

    Function-scoped on purpose: the environment is restored after each test, so
    a developer's ``RAGMETRICS_MODE=bm25 pytest --rag-eval`` still reaches the
    demo's retriever when these tests run in the same session.
    """
    monkeypatch.setenv("RAGMETRICS_HOME", str(_session_home))
    for var in [v for v in os.environ if v.startswith("RAGMETRICS_") and v != "RAGMETRICS_HOME"]:
        monkeypatch.delenv(var)
    return _session_home


@pytest.fixture(scope="session")
def car_docs() -> list[Document]:
    return load_corpus(CAR_CORPUS)


@pytest.fixture(scope="session")
def embedder(tmp_path_factory: pytest.TempPathFactory) -> Embedder:
    """One all-MiniLM-L6-v2 instance for the session (loading it costs seconds)."""
    return Embedder(cache_path=tmp_path_factory.mktemp("emb") / "cache.sqlite3")


@pytest.fixture(scope="session")
def tiny_cross_encoder(car_docs: list[Document], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A randomly initialised 2-layer BERT saved as a sentence-transformers CrossEncoder.

    This is the only stand-in in the stack's tests: no cross-encoder ships on
    PyPI and the hub is offline, so the real ``CrossEncoder`` code path runs on a
    tiny model whose vocabulary comes from the test corpus. Its scores are
    arbitrary but deterministic; tests check the plumbing, not the relevance.
    """
    return build_tiny_cross_encoder(
        tmp_path_factory.mktemp("tiny-cross-encoder"), (f"{d.title} {d.text}" for d in car_docs)
    )


@pytest.fixture(scope="session")
def car_retriever(
    car_docs: list[Document],
    embedder: Embedder,
    tiny_cross_encoder: Path,
    tmp_path_factory: pytest.TempPathFactory,
    _session_home: Path,
) -> Retriever:
    """The car corpus indexed once for the session, with the tiny reranker available.

    Chunks of 120 characters split the longer documents in two, so chunk ids
    other than ``#1-1`` appear in results.
    """
    # built before the function-scoped ragmetrics_home applies: point the stored BM25 index at the tests' home too
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RAGMETRICS_HOME", str(_session_home))
        return _build_car_retriever(car_docs, embedder, tiny_cross_encoder, tmp_path_factory)


def _build_car_retriever(car_docs: list[Document], embedder: Embedder, tiny_cross_encoder: Path,
                         tmp_path_factory: pytest.TempPathFactory) -> Retriever:
    r = Retriever(
        car_docs,
        data_dir=tmp_path_factory.mktemp("car-index"),
        embedder=embedder,
        rerank_model=tiny_cross_encoder,
        chunk_size=CAR_CHUNK_SIZE,
        overlap=CAR_OVERLAP,
        top_k=5,
        fetch_k=10,
    )
    r.build()
    return r


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _chroma_cli() -> str | None:
    beside = Path(sys.executable).parent / "chroma"
    return str(beside) if beside.exists() else shutil.which("chroma")


@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A ``chroma run`` server on a free loopback port; yields its URL and stops it afterwards.

    With ``RAGMETRICS_TEST_CHROMA_URL`` set, that server is used instead.
    """
    if EXTERNAL_CHROMA_URL:
        yield EXTERNAL_CHROMA_URL
        return
    cli = _chroma_cli()
    if cli is None:
        pytest.skip("the chroma CLI (installed with chromadb) is not on this machine")
    path = tmp_path_factory.mktemp("chroma-server")
    port = _free_port()
    log = (path / "server.log").open("w")
    proc = subprocess.Popen(
        [cli, "run", "--host", "127.0.0.1", "--port", str(port), "--path", str(path / "data")],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                pytest.fail(
                    f"chroma run exited with {proc.returncode}:\n"
                    f"{(path / 'server.log').read_text()}"
                )
            try:
                with urllib.request.urlopen(f"{url}/api/v2/heartbeat", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(
                    f"chroma run did not answer within 60 s:\n{(path / 'server.log').read_text()}"
                )
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
