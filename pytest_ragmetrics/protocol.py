"""The retriever protocol: what an object needs so the package can search it.

One check serves the plugin (the ``rag_retriever`` fixture) and ``ragmetrics
pool`` (``--retriever module:attr``), so both say the same thing about the same
mistake.
"""

from __future__ import annotations

import inspect
from typing import Any

from pytest_ragmetrics.errors import brief_repr

__all__ = ["search_problem"]


def search_problem(retriever: Any, what: str) -> str | None:
    """What keeps ``retriever`` from being searched as ``search(query, k)``, in one sentence; None when
    nothing does. ``what`` says where it came from, e.g. ``"the rag_retriever fixture returned"``."""
    if retriever is None:
        return f"{what} None"
    search = getattr(retriever, "search", None)
    described = f"{what} {type(retriever).__name__} {brief_repr(retriever)}"
    if search is None:
        return f"{described}, which has no search method"
    if not callable(search):
        return f"{described}, whose search is a {type(search).__name__}, not a method"
    try:
        signature = inspect.signature(search)
    except (TypeError, ValueError):  # a builtin or an extension without a signature: try it
        return None
    try:
        signature.bind("query", 10)
    except TypeError as exc:
        return f"{described}, whose search{signature} cannot be called as search(query, k): {exc}"
    return None
