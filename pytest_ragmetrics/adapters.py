"""Plug a LangChain or LlamaIndex retriever in as ``rag_retriever`` with one line.

The plugin wants an object with ``search(query, k)`` returning ranked ids. Teams
that already built their retriever with LangChain or LlamaIndex should not have
to write that wrapper, so::

    # conftest.py
    @pytest.fixture(scope="session")
    def rag_retriever():
        return from_langchain(my_retriever)          # or from_llamaindex(my_retriever)

Both adapters are duck-typed: this module imports neither library, so neither is
a dependency. LangChain's ``retriever.invoke(query)`` returns ``Document`` objects;
LlamaIndex's ``retriever.retrieve(query)`` returns ``NodeWithScore`` objects. Each
result becomes a :class:`Hit` (``id``, ``score`` and, for a LlamaIndex node
mapped to its document, the node id as ``explain``), which the plugin's
normaliser accepts as it accepts any object with an ``.id``. With ``parent_key``
(a metadata key or a callable) each hit also carries the id of the parent chunk
the application hands to its generator, and the plugin reports chunk-level and
parent-level hit rate side by side (small-to-big retrieval, ``MultiVectorRetriever``
with ``id_key="doc_id"``, LlamaIndex's hierarchical nodes).

Two things decide whether the numbers mean anything, and neither adapter can fix
them for you:

- **Ids.** The golden set names documents; results must carry the same names.
  Vector stores give every document a random UUID when it was added without an
  id, and LlamaIndex does the same for documents and nodes, so ``doc.id`` or
  ``node.ref_doc_id`` may be a UUID no golden set will ever match. Put your
  document id in metadata (or set it when you load the documents) and name it
  with ``id_key``. A one-time :class:`AdapterWarning` is raised when the ids
  returned look like UUIDs. ``id_key`` may also be a callable, e.g.
  ``lambda doc: Path(doc.metadata["source"]).stem`` for loader file paths.
- **Depth.** These retrievers decide how many results they return (LangChain
  vector stores return 4 by default, LlamaIndex vector retrievers 2). The adapter
  cuts the list at ``k`` but cannot lengthen it: configure the retriever to return
  at least ``k`` results (``as_retriever(search_kwargs={"k": 10})``,
  ``as_retriever(similarity_top_k=10)``), or pass ``pass_k=True`` to LangChain
  retrievers that take ``k`` at call time. When the configured depth is visible
  on the retriever and smaller than ``k``, an :class:`AdapterWarning` says so once.

The retriever's order is the ranking: results are never re-sorted.
"""

from __future__ import annotations

import json
import re
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from pytest_ragmetrics.errors import RetrieverError

__all__ = ["AdapterWarning", "Hit", "LangChainRetriever", "LlamaIndexRetriever", "from_langchain", "from_llamaindex"]

#: An id rule: a metadata key ("id" also means the object's own ``.id``) or a function of the result.
IdKey = str | Callable[[Any], Any]

_UUID = re.compile(r"^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$", re.IGNORECASE)


class AdapterWarning(UserWarning):
    """An adapted retriever is probably configured so that its numbers mislead."""


@dataclass(frozen=True)
class Hit:
    """One adapted result: the id the golden set is judged by, the retriever's score,
    a note shown in reports next to what came back (the node behind a document id),
    and the parent chunk's id when the adapter was given a ``parent_key``."""

    id: str
    score: float | None = None
    explain: str | None = None
    parent_id: str | None = None


# ----------------------------------------------------------------------------- helpers


def _as_id(value: Any) -> str | None:
    """A usable id, or None. Integers become strings (golden ids are strings)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str) and value.strip():
        return value
    return None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _short(text: str, width: int = 80) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _name(obj: Any) -> str:
    cls = obj if isinstance(obj, type) else type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


def _metadata(obj: Any) -> Mapping[str, Any]:
    """A result's metadata; none, or something that is not a mapping, reads as empty."""
    metadata = getattr(obj, "metadata", None)
    return metadata if isinstance(metadata, Mapping) else {}


def _from_metadata(metadata: Mapping[str, Any], key: str) -> tuple[str, str] | None:
    """The id under ``key`` with where it was found (for describe()), or None."""
    value = _as_id(metadata.get(key))
    return (value, f"metadata[{key!r}]") if value is not None else None


def _keys_present(metadata: Mapping[str, Any]) -> str:
    """The metadata keys a result does have, for the message about the one it lacks."""
    return ", ".join(repr(k) for k in metadata) or "none"


def _key_label(key: IdKey) -> str:
    return key if isinstance(key, str) else f"callable {getattr(key, '__qualname__', repr(key))}"


def _jsonable(value: Any) -> Any:
    """``value`` if JSON can hold it, else its repr: describe() ends up in baseline.json."""
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return repr(value)


def _check_k(k: int) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")


def _as_list(results: Any, query: str, method: str) -> list[Any]:
    if results is None or isinstance(results, (str, bytes, Mapping)):
        raise RetrieverError(
            f"query {_short(query)!r}: {method} returned {type(results).__name__}; expected a list of results"
        )
    try:
        return list(results)
    except TypeError:
        raise RetrieverError(
            f"query {_short(query)!r}: {method} returned {type(results).__name__}, which is not iterable"
        ) from None


class _Adapter:
    """What both adapters share: the k cut, the depth warning and the UUID warning."""

    library = ""
    _depth_hint = ""

    def __init__(self, retriever: Any, id_key: IdKey | None, parent_key: IdKey | None = None) -> None:
        if parent_key is not None and not (callable(parent_key) or (isinstance(parent_key, str) and parent_key)):
            raise TypeError(f"parent_key must be None, a metadata key or a callable, got {parent_key!r}")
        self.retriever = retriever
        self.id_key = id_key
        self.parent_key = parent_key
        self._warned_depth = False
        self._warned_uuid = False

    def configured_depth(self) -> tuple[str, int] | None:  # pragma: no cover - overridden
        return None

    def _parent_of(self, obj: Any) -> str | None:
        """The parent chunk's id, or None: a result without one stands for itself."""
        key = self.parent_key
        if key is None:
            return None
        if callable(key):
            return _as_id(key(obj))
        return _as_id(_metadata(obj).get(key))

    def _warn_depth(self, k: int) -> None:
        if self._warned_depth:
            return
        found = self.configured_depth()
        if found is None or found[1] >= k:
            return
        self._warned_depth = True
        where, depth = found
        warnings.warn(
            f"{self.library} retriever {type(self.retriever).__name__} returns at most {depth} results "
            f"({where}) but {k} were asked for: recall@{k} and the like are capped. {self._depth_hint}",
            AdapterWarning,
            stacklevel=3,
        )

    def _warn_uuids(self, hits: Sequence[Hit], query: str) -> None:
        if self._warned_uuid or not hits or not all(_UUID.match(h.id) for h in hits):
            return
        self._warned_uuid = True
        warnings.warn(
            f"{self.library} results for {_short(query)!r} have UUID ids (e.g. {hits[0].id!r}), which the "
            "library assigns when documents are added without ids; a golden set rarely names documents "
            "that way. Store your document id in metadata and pass id_key='<that key>'.",
            AdapterWarning,
            stacklevel=3,
        )

    def search(self, query: str, k: int) -> list[Hit]:
        raise NotImplementedError  # pragma: no cover

    def describe(self) -> dict[str, Any]:
        depth = self.configured_depth()
        return {
            "adapter": f"pytest_ragmetrics.adapters.{type(self).__name__}",
            "retriever": _name(self.retriever),
            "id_key": None if self.id_key is None else _key_label(self.id_key),
            **({} if self.parent_key is None else {"parent_key": _key_label(self.parent_key)}),
            "configured_depth": None if depth is None else depth[1],
        }

    def __repr__(self) -> str:
        return f"{type(self).__name__}({type(self.retriever).__name__}, id_key={self.id_key!r})"


# --------------------------------------------------------------------------- LangChain


class LangChainRetriever(_Adapter):
    """A LangChain retriever seen through ``search(query, k)``; see :func:`from_langchain`."""

    id_key: IdKey  # never None here: __init__ requires a key or a callable
    library = "LangChain"
    _depth_hint = ("Configure it to return at least k, e.g. vectorstore.as_retriever(search_kwargs={'k': K}), "
                   "or pass pass_k=True if it takes k at call time.")

    def __init__(self, retriever: Any, id_key: IdKey = "id", *, pass_k: bool = False,
                 parent_key: IdKey | None = None) -> None:
        if not callable(getattr(retriever, "invoke", None)):
            raise TypeError(
                f"from_langchain() needs a LangChain retriever with .invoke(query); got {type(retriever).__name__}"
            )
        if not (callable(id_key) or (isinstance(id_key, str) and id_key)):
            raise TypeError(f"id_key must be a metadata key or a callable, got {id_key!r}")
        super().__init__(retriever, id_key, parent_key)
        self.pass_k = pass_k

    def _keys(self) -> list[IdKey]:
        """The id rules tried in order: id_key first, then the usual metadata keys."""
        if callable(self.id_key):
            return [self.id_key]
        return list(dict.fromkeys([self.id_key, "doc_id", "source"]))

    def _tried(self) -> str:
        parts: list[str] = []
        for key in self._keys():
            if callable(key):
                parts.append(_key_label(key))
            elif key == "id":
                parts += ["doc.id", "metadata['id']"]
            else:
                parts.append(f"metadata[{key!r}]")
        return ", ".join(parts)

    def _id_of(self, doc: Any, query: str, position: int) -> tuple[str, str]:
        metadata = _metadata(doc)
        for key in self._keys():
            if callable(key):
                value = _as_id(key(doc))
                if value is not None:
                    return value, _key_label(key)
                continue
            if key == "id":
                value = _as_id(getattr(doc, "id", None))
                if value is not None:
                    return value, "doc.id"
            found = _from_metadata(metadata, key)
            if found is not None:
                return found
        raise RetrieverError(
            f"query {_short(query)!r}, result {position}: the LangChain document carries no id "
            f"(tried {self._tried()}; metadata keys present: {_keys_present(metadata)}). Put the document id "
            f"the golden set uses in its metadata and pass from_langchain(retriever, id_key='<key>')."
        )

    def configured_depth(self) -> tuple[str, int] | None:
        kwargs = getattr(self.retriever, "search_kwargs", None)
        if isinstance(kwargs, Mapping):
            k = kwargs.get("k")
            if isinstance(k, int) and not isinstance(k, bool):
                return "search_kwargs['k']", k
            if k is None:
                return "search_kwargs has no 'k'; LangChain vector stores then return 4", 4
        k = getattr(self.retriever, "k", None)
        if isinstance(k, int) and not isinstance(k, bool):
            return "its k", k
        return None

    def search(self, query: str, k: int) -> list[Hit]:
        """Invoke the retriever and keep the first ``k`` documents, in its order."""
        _check_k(k)
        if self.pass_k:
            raw = self.retriever.invoke(query, k=k)
        else:
            self._warn_depth(k)
            raw = self.retriever.invoke(query)
        docs = _as_list(raw, query, "invoke()")[:k]
        hits = []
        for position, doc in enumerate(docs, start=1):
            rid, _ = self._id_of(doc, query, position)
            metadata = getattr(doc, "metadata", None)
            metadata = metadata if isinstance(metadata, Mapping) else {}
            score = _number(metadata.get("score"))
            if score is None:
                score = _number(metadata.get("relevance_score"))
            hits.append(Hit(rid, score, parent_id=self._parent_of(doc)))
        self._warn_uuids(hits, query)
        return hits

    def describe(self) -> dict[str, Any]:
        out = super().describe()
        out["pass_k"] = self.pass_k
        for attr in ("search_type", "search_kwargs"):
            value = getattr(self.retriever, attr, None)
            if value is not None:
                out[attr] = _jsonable(dict(value) if isinstance(value, Mapping) else value)
        return out


def from_langchain(retriever: Any, *, id_key: IdKey = "id", pass_k: bool = False,
                   parent_key: IdKey | None = None) -> LangChainRetriever:
    """Wrap a LangChain retriever (anything with ``invoke(query) -> list[Document]``).

    A document's id is the first of: ``doc.id`` or ``metadata['id']`` (the default
    ``id_key="id"``; any other key is read from ``metadata``), then
    ``metadata['doc_id']``, then ``metadata['source']``. ``id_key`` may be a
    callable taking the document. A document with none of these raises
    :class:`~pytest_ragmetrics.RetrieverError` naming the query, the result
    position and the keys tried. A numeric ``metadata['score']`` (or
    ``relevance_score``, as rerankers set it) becomes the hit's score.

    The list is cut at ``k``; the retriever must be configured to return at least
    ``k`` documents (or take ``k`` at call time: ``pass_k=True`` calls
    ``invoke(query, k=k)``, which ``VectorStoreRetriever`` honours and other
    ``BaseRetriever`` subclasses without extra arguments ignore).

    ``parent_key`` (a metadata key such as ``"doc_id"``, or a callable) names the
    parent chunk each child belongs to; the plugin then reports parent-level hit
    rate next to chunk-level hit rate. A document without it stands for itself.
    """
    return LangChainRetriever(retriever, id_key, pass_k=pass_k, parent_key=parent_key)


# -------------------------------------------------------------------------- LlamaIndex


class LlamaIndexRetriever(_Adapter):
    """A LlamaIndex retriever seen through ``search(query, k)``; see :func:`from_llamaindex`."""

    library = "LlamaIndex"
    _depth_hint = "Configure it to return at least k, e.g. index.as_retriever(similarity_top_k=K)."

    def __init__(self, retriever: Any, id_key: IdKey | None = None, parent_key: IdKey | None = None) -> None:
        if not callable(getattr(retriever, "retrieve", None)):
            raise TypeError(
                f"from_llamaindex() needs a LlamaIndex retriever with .retrieve(query); got {type(retriever).__name__}"
            )
        if id_key is not None and not (callable(id_key) or (isinstance(id_key, str) and id_key)):
            raise TypeError(f"id_key must be None, a metadata key or a callable, got {id_key!r}")
        super().__init__(retriever, id_key, parent_key)

    def _id_of(self, node: Any, query: str, position: int) -> tuple[str, str]:
        key = self.id_key
        if callable(key):
            value = _as_id(key(node))
            if value is not None:
                return value, _key_label(key)
            raise RetrieverError(
                f"query {_short(query)!r}, result {position}: {_key_label(key)} gave no id for node "
                f"{getattr(node, 'node_id', '?')!r}"
            )
        if key is not None:
            # No fallback here: every node has a node_id, so falling back would hide a missing key.
            metadata = _metadata(node)
            found = _from_metadata(metadata, key)
            if found is not None:
                return found
            raise RetrieverError(
                f"query {_short(query)!r}, result {position}: node {getattr(node, 'node_id', '?')!r} has no "
                f"metadata[{key!r}] (metadata keys present: {_keys_present(metadata)}); id_key=None uses "
                "ref_doc_id, then node_id"
            )
        for attr in ("ref_doc_id", "node_id"):
            value = _as_id(getattr(node, attr, None))
            if value is not None:
                return value, attr
        raise RetrieverError(
            f"query {_short(query)!r}, result {position}: the LlamaIndex node carries no id "
            f"(tried node.ref_doc_id, node.node_id); pass from_llamaindex(retriever, id_key='<metadata key>')"
        )

    def configured_depth(self) -> tuple[str, int] | None:
        for attr in ("similarity_top_k", "_similarity_top_k"):
            k = getattr(self.retriever, attr, None)
            if isinstance(k, int) and not isinstance(k, bool):
                return attr, k
        return None

    def search(self, query: str, k: int) -> list[Hit]:
        """Retrieve and keep the first ``k`` nodes, in the retriever's order, with their scores."""
        _check_k(k)
        self._warn_depth(k)
        results = _as_list(self.retriever.retrieve(query), query, "retrieve()")[:k]
        hits = []
        for position, item in enumerate(results, start=1):
            node = getattr(item, "node", item)  # NodeWithScore, or a bare node
            rid, source = self._id_of(node, query, position)
            node_id = _as_id(getattr(node, "node_id", None))
            explain = f"node {node_id}" if source == "ref_doc_id" and node_id and node_id != rid else None
            hits.append(Hit(rid, _number(getattr(item, "score", None)), explain, self._parent_of(node)))
        self._warn_uuids(hits, query)
        return hits


def from_llamaindex(retriever: Any, *, id_key: IdKey | None = None,
                    parent_key: IdKey | None = None) -> LlamaIndexRetriever:
    """Wrap a LlamaIndex retriever (anything with ``retrieve(query) -> list[NodeWithScore]``).

    With ``id_key=None`` a node's id is its source document's id
    (``node.ref_doc_id``), else its own ``node.node_id``; the node id is kept as
    the hit's explanation. With a metadata key, ``node.metadata[id_key]`` is
    required (a node without it raises, naming query and position); a callable
    receives the node. Scores are kept; the order is the retriever's. The list is
    cut at ``k``: set ``similarity_top_k`` to at least ``k``.

    ``parent_key`` (a metadata key, or a callable such as
    ``lambda node: node.parent_node.node_id`` for hierarchical nodes) names each
    node's parent chunk; the plugin then reports parent-level hit rate next to
    chunk-level hit rate. A node without it stands for itself.
    """
    return LlamaIndexRetriever(retriever, id_key, parent_key)
