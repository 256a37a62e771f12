"""The retriever protocol: what an object needs so the package can search it.

Written twice on purpose, for two readers: as :class:`typing.Protocol` classes, so a
type checker can tell a user their retriever does not fit before any run, and as
:func:`search_problem`, the check at run time. One check serves the plugin (the
``rag_retriever`` fixture) and ``ragmetrics pool`` (``--retriever module:attr``), so
both say the same thing about the same mistake.
"""

from __future__ import annotations

import copy
import inspect
from typing import Any, Iterable, Mapping, Protocol, Sequence, SupportsFloat, TypeAlias, runtime_checkable

from pytest_ragmetrics.errors import brief_repr, listed

__all__ = ["BatchRetriever", "CorpusRetriever", "DescribedRetriever", "FilteredRetriever", "MetadataRetriever",
           "Result", "ResultWithId", "Retriever", "accepts_filters", "search_problem", "search_with_filters"]


@runtime_checkable
class ResultWithId(Protocol):
    """A result object: only ``id`` is required.

    Read when present, and not part of the type (a protocol cannot make an
    attribute optional): ``score`` (a number or None), ``explain_text()`` or
    ``explain`` (text or a mapping, shown in the failure report), ``parent_id``
    (a str or None, see docs/parent-chunk-hit-rate.md) and ``metadata`` (a mapping,
    checked against a golden record's ``scope``, see docs/filters.md). A dataclass or NamedTuple
    with an ``id: str`` field fits.
    """

    @property
    def id(self) -> str: ...


#: One ranked result: a ``str`` id, an ``(id, score)`` pair (any number ``float()``
#: takes, numpy's included, or None), an object with an ``.id`` or a mapping with
#: an ``"id"`` key (``"score"``, ``"explain"``, ``"parent_id"`` and ``"metadata"`` optional).
Result: TypeAlias = str | tuple[str, SupportsFloat | None] | ResultWithId | Mapping[str, Any]


@runtime_checkable
class Retriever(Protocol):
    """What the ``rag_retriever`` fixture returns: ``search(query, k)`` gives at most
    ``k`` results, best first; the order is the ranking and is never re-sorted.

    The plugin passes both arguments by position, so your parameters may have any
    names. The result type is a ``Sequence`` (a list or tuple), not any iterable,
    so that a dict of id -> score, which would be read as its keys in no set
    order, is caught by the type checker.
    """

    def search(self, query: str, k: int, /) -> Sequence[Result]: ...


@runtime_checkable
class BatchRetriever(Retriever, Protocol):
    """A retriever that can also answer many queries in one call: one result list
    per query, in the order given. Used when present (not with ``--rag-timeout``
    or ``--rag-repeat``); ``search`` is still required."""

    def search_batch(self, queries: list[str], k: int, /) -> Sequence[Sequence[Result]]: ...


@runtime_checkable
class FilteredRetriever(Protocol):
    """A retriever for a golden set whose records carry ``filters`` (``{tenant: acme}``): a record
    with filters is searched as ``search(query, k, filters=...)``, by keyword, and one without as
    ``search(query, k)``, as ever. A ``search`` that takes no ``filters`` keyword stops such a run
    before the first query: filters are never dropped without a word.

    ``search_batch(queries, k, filters=[...])`` (one mapping or None per query) is used for a batch
    holding filtered queries when it takes ``filters``; otherwise those queries are searched one
    at a time with ``search``.
    """

    def search(self, query: str, k: int, /, *, filters: Mapping[str, Any] | None = None) -> Sequence[Result]: ...


@runtime_checkable
class DescribedRetriever(Protocol):
    """A retriever that says what it is: ``describe()`` is recorded in the baseline and
    the run artifact (so keep it to JSON values), and a refresh that changes it is shown."""

    def describe(self) -> Mapping[str, Any] | str: ...


@runtime_checkable
class CorpusRetriever(Protocol):
    """A retriever that lists the document ids it holds, so gold ids it lacks are found
    without ``--rag-corpus``."""

    def doc_ids(self) -> Iterable[str]: ...


@runtime_checkable
class MetadataRetriever(Protocol):
    """A retriever that gives each document's metadata as its index stores it, read once at the first
    query: a golden record's ``scope`` is then checked against it as well as against what each result
    claims, so a layer that drops the filters and copies them into every result cannot hide a leak."""

    def doc_metadata(self) -> Mapping[str, Mapping[str, Any]]: ...


def accepts_filters(method: Any) -> bool:
    """Whether ``method`` can be called with a ``filters=`` keyword (a parameter of that name, or
    ``**kwargs``). A callable without a signature (a builtin) is taken at its word: it is tried."""
    try:
        signature = inspect.signature(method)
    except (TypeError, ValueError):
        return True
    return any(p.kind is p.VAR_KEYWORD or (p.name == "filters" and p.kind is not p.POSITIONAL_ONLY)
               for p in signature.parameters.values())


def search_problem(retriever: Any, what: str, filtered: Sequence[str] = ()) -> str | None:
    """What keeps ``retriever`` from being searched as ``search(query, k)``, in one sentence; None when
    nothing does. ``what`` says where it came from, e.g. ``"the rag_retriever fixture returned"``.
    ``filtered`` names the golden records that carry ``filters``: then ``search`` must also take
    ``filters=`` (a record's filters are never dropped)."""
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
    if filtered and not accepts_filters(search):
        n = len(filtered)
        return (f"{described}, whose search{signature} takes no filters keyword, but {n} golden "
                f"{'record carries' if n == 1 else 'records carry'} filters ({listed(list(filtered), 5)}); "
                "they would be dropped and the results judged as if filtered. Give search a "
                "filters=None keyword and apply it (see pytest_ragmetrics.FilteredRetriever)")
    return None


def search_with_filters(retriever: Any, query: str, k: int, filters: Mapping[str, Any] | None = None) -> Any:
    """One search, replaying the question's filters: ``search(query, k, filters=...)`` (a deep copy
    each time) when it has some, else ``search(query, k)`` as the plugin calls it (a retriever
    without filters still works)."""
    if filters:  # a copy of its own for every call: a retriever that edits it changes nothing for the next
        return retriever.search(query, k, filters=copy.deepcopy(dict(filters)))
    return retriever.search(query, k)
