"""Serves the multi-tenant demo: the reference stack over ``eval/tenants/corpus.jsonl``.

Items of a golden file are collected at that file's path, so for
``pytest --rag-eval --rag-golden eval/tenants/golden.yaml`` this fixture overrides the root
``conftest.py``'s. Each question carries ``filters`` (its shop), which the stack applies, and a
``scope`` every returned document must match. ``RAGMETRICS_DEMO_BUG=drop-filters`` wraps the
stack in :class:`DropsFilters`, the bug the leak gate exists for: a layer that accepts filters
and never passes them on.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping

import pytest

TENANTS_CORPUS = Path(__file__).parent / "corpus.jsonl"


class DropsFilters:
    """A retriever wrapper with a filter bug: it takes ``filters`` and searches without them."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def search(self, query: str, k: int, filters: Mapping[str, Any] | None = None) -> Any:
        return self.inner.search(query, k)  # the bug: filters are never passed on

    def describe(self) -> Any:
        return self.inner.describe()

    def doc_ids(self) -> list[str]:
        return self.inner.doc_ids()


@pytest.fixture(scope="session")
def rag_retriever() -> Any:
    # The model ships in a package; never ask a hub for it.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from pytest_ragmetrics.stack import Retriever

    retriever = Retriever.from_env(TENANTS_CORPUS, mode="hybrid", top_k=10, fetch_k=30, unique_docs=True)
    retriever.build()
    if os.environ.get("RAGMETRICS_DEMO_BUG") == "drop-filters":
        return DropsFilters(retriever)
    return retriever
