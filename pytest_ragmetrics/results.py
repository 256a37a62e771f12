"""What a retriever returns, made into plain data the rest of the package can trust.

Retrievers return ranked results, best first, each a ``str`` id, an ``(id, score)``
pair, an object with an ``id`` attribute (and optionally ``score``, an
explanation: ``explain_text()`` or ``explain`` as text or a mapping, and a
``parent_id``: the larger chunk the application hands to its generator, see
:mod:`pytest_ragmetrics.parents`), or a mapping with the same keys (``{"id": ..., "score": ...}``, as
many vector-database clients return; other keys are ignored). A ``metadata`` mapping
(attribute or key) is kept: a golden record's ``scope`` is checked against it. The order
is the ranking; nothing here re-sorts it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from pytest_ragmetrics.errors import RetrieverError, brief_repr

__all__ = ["Returned", "normalize_results"]


@dataclass
class Returned:
    """A normalised result list: ids in rank order, with scores and explanations if given."""

    ids: list[str]
    scores: list[float | None] = field(default_factory=list)
    explains: list[str | None] = field(default_factory=list)
    parents: list[str | None] = field(default_factory=list)
    #: each result's own ``metadata`` mapping (None where it carries none)
    metadata: list[Mapping[str, Any] | None] = field(default_factory=list)
    truncated_from: int | None = None  # how many came back when more than k did


def _explain_text(result: Any) -> str | None:
    method = getattr(result, "explain_text", None)
    if callable(method):
        return str(method())
    return _explained(getattr(result, "explain", None))


def _explained(explain: Any) -> str | None:
    """An ``explain`` value (text, a mapping of parts, or a function returning one) as one line."""
    if explain is None:
        return None
    if callable(explain):
        explain = explain()
    if isinstance(explain, Mapping):
        parts = []
        for key, value in explain.items():
            if isinstance(value, Mapping):
                inner = ", ".join(f"{k} {_short(v)}" for k, v in value.items())
                parts.append(f"{key}({inner})")
            else:
                parts.append(f"{key} {_short(value)}")
        return " + ".join(parts)
    return str(explain)


def _short(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def normalize_results(results: Any, k: int, query_id: str = "?") -> Returned:
    """Check and normalise one query's results; keep at most ``k`` of them.

    Raises :class:`RetrieverError` naming the query, and the rank where one
    result is wrong, when the results are not a ranking (``None``, a string, ids
    that are not strings or are empty, a NaN score).
    """
    if results is None:
        raise RetrieverError(f"query {query_id!r}: the retriever returned None; expected a list of results")
    if isinstance(results, (str, bytes)) or isinstance(results, Mapping):
        raise RetrieverError(
            f"query {query_id!r}: the retriever returned a {type(results).__name__}; "
            "expected a list of ids, (id, score) pairs, objects with an .id or mappings with \"id\""
        )
    try:
        items: Sequence[Any] = list(results)
    except TypeError:
        raise RetrieverError(
            f"query {query_id!r}: the retriever returned {type(results).__name__}, which is not iterable"
        ) from None
    out = Returned([], [], [], [], [])
    if len(items) > k:
        out.truncated_from = len(items)
        items = items[:k]
    for rank, item in enumerate(items, start=1):
        score: Any = None
        explain: str | None = None
        parent: Any = None
        metadata: Any = None
        if isinstance(item, str):
            rid: Any = item
        elif isinstance(item, tuple) and len(item) == 2:
            rid, score = item
        elif isinstance(item, Mapping):
            if "id" not in item:
                keys = ", ".join(sorted(brief_repr(key) for key in item)[:8]) or "none"
                raise RetrieverError(
                    f"query {query_id!r}, result {rank}: a {type(item).__name__} without an \"id\" key (its keys: "
                    f"{keys}); a result given as a mapping needs \"id\", and may have \"score\", \"explain\" "
                    "and \"parent_id\" (a client's own key for the id must be renamed to \"id\")"
                )
            rid = item["id"]
            score = item.get("score")
            explain = _explained(item.get("explain"))
            parent = item.get("parent_id")
            metadata = item.get("metadata")
        elif hasattr(item, "id"):
            rid = item.id
            score = getattr(item, "score", None)
            explain = _explain_text(item)
            parent = getattr(item, "parent_id", None)
            metadata = getattr(item, "metadata", None)
        else:
            raise RetrieverError(
                f"query {query_id!r}, result {rank}: {type(item).__name__} {brief_repr(item)} is not an id, "
                "an (id, score) pair, an object with .id or a mapping with \"id\""
            )
        if not isinstance(rid, str):
            raise RetrieverError(
                f"query {query_id!r}, result {rank}: id {brief_repr(rid)} is a {type(rid).__name__}, expected str"
            )
        if not rid.strip():
            raise RetrieverError(f"query {query_id!r}, result {rank}: id {brief_repr(rid)} is empty; "
                                 "every result needs an id")
        if parent is not None and not isinstance(parent, str):
            raise RetrieverError(
                f"query {query_id!r}, result {rank}: parent_id {brief_repr(parent)} is a "
                f"{type(parent).__name__}, expected str or None"
            )
        value = _score(score)
        if value is _NOT_A_NUMBER:
            raise RetrieverError(
                f"query {query_id!r}, result {rank}: the score of {brief_repr(rid)} is {brief_repr(score)} "
                f"(a {type(score).__name__}); a score must be a number or None"
            )
        if value is not None and math.isnan(value):
            raise RetrieverError(
                f"query {query_id!r}, result {rank}: the score of {brief_repr(rid)} is NaN; a score must be a "
                "number or None (NaN usually means the retriever's arithmetic went wrong)"
            )
        out.ids.append(rid)
        out.scores.append(value)
        out.explains.append(explain)
        out.parents.append(parent)
        out.metadata.append(dict(metadata) if isinstance(metadata, Mapping) else None)
    return out


#: What :func:`_score` returns for a score that is no number (a string, a bool, a list).
_NOT_A_NUMBER: Any = object()


def _score(value: Any) -> Any:
    """A result's score as a float, None, or ``_NOT_A_NUMBER`` (scores are shown, never used to rank).

    Any real number counts, numpy's float32 and a one-element tensor included
    (anything ``float()`` takes); text is refused, never parsed: ``"0.8"`` is a bug.
    """
    if value is None:
        return None
    if isinstance(value, (str, bytes, bool)):
        return _NOT_A_NUMBER
    try:
        return float(value)
    except OverflowError:  # an int beyond float range
        return None
    except (TypeError, ValueError):
        return _NOT_A_NUMBER
