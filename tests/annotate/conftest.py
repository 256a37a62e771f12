"""Fixtures for the annotate tests: a small candidates file and a server on a free port."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
import pytest

from annotate_helpers import write_pool

from pytest_ragmetrics.annotate import DEFAULT_GUIDELINES, JudgmentStore, Task, shown_questions
from pytest_ragmetrics.annotate.judgments import sha256_text
from pytest_ragmetrics.tools.candidates import read_candidates


@pytest.fixture
def pool_path(tmp_path: Path) -> Path:
    return write_pool(tmp_path / "pool.jsonl")


@pytest.fixture
def make_task(pool_path: Path) -> Callable[..., Task]:
    """A task over ``pool_path`` for ``annotator``, saving to ``out`` (default beside the pool)."""
    def make(annotator: str = "alice", out: Path | None = None) -> Task:
        pool = read_candidates(pool_path)
        store = JudgmentStore.open(out or pool_path.with_name(f"pool.{annotator}.jsonl"), pool,
                                   annotator=annotator, candidates_label=str(pool_path),
                                   guidelines_sha256=sha256_text(DEFAULT_GUIDELINES))
        return Task(shown_questions(pool), store, DEFAULT_GUIDELINES)
    return make


@pytest.fixture
def serve() -> Iterator[Callable[[Task], Any]]:
    """Start an :class:`AnnotateServer` on a free port in a thread; stopped after the test."""
    from pytest_ragmetrics.annotate.server import AnnotateServer

    started: list[tuple[AnnotateServer, threading.Thread]] = []

    def start(task: Task) -> AnnotateServer:
        server = AnnotateServer(task, 0)
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        thread.start()
        started.append((server, thread))
        return server

    yield start
    for server, thread in started:
        server.shutdown()
        server.server_close()
        thread.join(5)
