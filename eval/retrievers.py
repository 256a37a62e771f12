"""Two settings of the demo's retriever, for pooling candidates from both (docs/cli.md#pool).

    ragmetrics pool --queries eval/golden.yaml --out candidates.jsonl --corpus eval/corpus \
        --retriever eval.retrievers:hybrid --retriever eval.retrievers:small_chunks

Each is a zero-argument function returning the reference stack's retriever over
``eval/corpus``: ``hybrid`` is the setting the demo gate measures (``conftest.py``),
``small_chunks`` the same search over 120-character chunks. A project pools its own
retrievers the same way: any object with ``search(query, k)``, or a function returning one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

CORPUS = Path(__file__).resolve().parent / "corpus"


def hybrid() -> Any:
    from pytest_ragmetrics.stack import Retriever  # imported when called: the stack loads only when used

    return Retriever(CORPUS, mode="hybrid", top_k=10, fetch_k=30, unique_docs=True)


def small_chunks() -> Any:
    from pytest_ragmetrics.stack import Retriever

    return Retriever(CORPUS, mode="hybrid", chunk_size=120, overlap=20, top_k=10, fetch_k=30, unique_docs=True)
