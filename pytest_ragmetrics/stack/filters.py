"""A query's filters in the reference stack: checked against the corpus's metadata, applied to
BM25 as a mask over the chunks before ranking, and to chromadb as a ``where``.

Both routes must keep the same documents for the same filters, so what either cannot compare
(lists or objects in the metadata, a list of mixed kinds, a key no document has) is refused
before any search rather than answered differently by each.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["checked_filters", "chroma_where", "chunk_mask", "stored_metadata"]


def checked_filters(filters: Mapping[str, Any] | None, metadata: Mapping[str, Mapping[str, Any]],
                    corpus: str) -> dict[str, Any] | None:
    """One query's filters, checked: a mapping of metadata keys the corpus has to a text, number or
    boolean (or a list of them). A key no document carries is a typo, not an empty answer."""
    if not filters:
        return None
    if not isinstance(filters, Mapping):
        raise ValueError(f"filters must be a mapping such as {{'tenant': 'acme'}}, got {type(filters).__name__}")
    known = {k for fields in metadata.values() for k in fields}
    for key, value in filters.items():
        if key not in known:
            where = (f"its documents carry {', '.join(sorted(known))}" if known else
                     "it has no metadata (give a corpus.jsonl whose lines carry the fields to filter on)")
            raise ValueError(f"filter key {key!r} is in no document's metadata of the corpus {corpus}: {where}")
        if any(isinstance(fields.get(key), (list, dict)) for fields in metadata.values()):
            raise ValueError(f"filter key {key!r}: some documents hold a list or an object under it; the "
                             "reference stack filters on text, number and boolean metadata")
        values = value if isinstance(value, list) else [value]
        if not values or not all(isinstance(v, (str, int, float)) for v in values):
            raise ValueError(f"filter {key!r}: {value!r}; the reference stack filters on a text, number or "
                             "boolean, or a non-empty list of them (any of)")
        if len({_kind(v) for v in values}) > 1:
            raise ValueError(f"filter {key!r}: {value!r} mixes kinds of value; the vector index matches a list "
                             "of one kind only (all texts, all numbers or all booleans)")
    return dict(filters)


def chunk_mask(filters: Mapping[str, Any], metadata: Mapping[str, Mapping[str, Any]],
               doc_of: Sequence[str]) -> np.ndarray:
    """Which chunks a query's filters keep (``doc_of``: each chunk's document): those of the
    documents whose metadata match."""
    from pytest_ragmetrics.scope import in_scope

    keep = {d for d, fields in metadata.items() if in_scope(fields, filters)}
    return np.fromiter((d in keep for d in doc_of), dtype=bool, count=len(doc_of))


def stored_metadata(fields: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """What chromadb stores of a document's metadata with each of its chunks: the text, number and boolean
    values, the only values a filter compares."""
    if not fields:
        return None
    kept = {k: v for k, v in fields.items() if isinstance(v, (str, int, float))}
    return kept or None


def chroma_where(filters: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A query's filters as a chromadb ``where``: ``{key: value}``, ``$in`` for a list, ``$and`` for several."""
    if not filters:
        return None
    parts = [{key: {"$in": value} if isinstance(value, list) else {"$eq": value}} for key, value in filters.items()]
    return parts[0] if len(parts) == 1 else {"$and": parts}


def _kind(value: Any) -> str:
    """A filter value's kind as chromadb matches it: text, number or boolean."""
    return "boolean" if isinstance(value, bool) else "number" if isinstance(value, (int, float)) else "text"
