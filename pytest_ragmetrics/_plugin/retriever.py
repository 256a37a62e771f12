"""What the plugin needs of the object the ``rag_retriever`` fixture returns.

Checked once, before the first query, so a fixture that returns the wrong thing
stops the run with one message instead of failing every query the same way.
"""

from __future__ import annotations

from typing import Any, Sequence

from pytest_ragmetrics.protocol import search_problem

__all__ = ["MISSING", "PROTOCOL", "declares_thread_safe", "retriever_problem"]

#: The retriever protocol, in the words every message about it uses.
PROTOCOL = (
    "The session-scoped fixture `rag_retriever` (usually in conftest.py) must return an object with "
    "search(query: str, k: int) returning ranked results, best first: str ids, (id, score) pairs, objects "
    "with an .id or mappings with \"id\" (e.g. {\"id\": ..., \"score\": ...}); "
    "search_batch(queries: list[str], k: int) is optional; a golden set whose records carry filters needs "
    "search(query, k, filters=...) too; a class attribute "
    "thread_safe = True lets --rag-timeout start the next call while an abandoned one still runs. "
    "pytest_ragmetrics.Retriever states this as a typing.Protocol a type checker can check your retriever against."
)


class _Missing:
    """What the plugin's own ``rag_retriever`` returns: the project defines none."""

    def __repr__(self) -> str:
        return "<no rag_retriever fixture>"


#: Returned by the plugin's default fixture, so the missing fixture is reported once, as any other problem.
MISSING = _Missing()


def declares_thread_safe(retriever: Any) -> bool:
    """True when the retriever says it may be called from two threads at once (``thread_safe = True``)."""
    return getattr(retriever, "thread_safe", False) is True


def retriever_problem(retriever: Any, filtered: Sequence[str] = ()) -> str | None:
    """What keeps ``retriever`` from being searched, in one sentence; ``None`` when it can be.
    ``filtered``: the golden records with ``filters`` (then ``search`` must take ``filters=``)."""
    if retriever is MISSING:
        return "no retriever: no fixture named rag_retriever is defined"
    if retriever is None:
        return "the rag_retriever fixture returned None"
    return search_problem(retriever, "the rag_retriever fixture returned", filtered)
