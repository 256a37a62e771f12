"""Scope: the metadata every document a query returns must match, and the leaks that break it.

A golden record's ``scope`` (``{tenant: acme}``) says which documents the query may see at
all. A returned document outside it is a **leak**: one tenant's document shown to another is
a failure whatever the metrics say, so it fails its query and the ``leak`` gate, and no
threshold can allow it. A document's metadata comes from the result itself (a ``metadata``
attribute or key) and from the corpus (the fields of its JSONL line); when both are known,
both must be in scope. A returned document whose metadata is known to neither cannot be
checked: an error for that query, never a pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from pytest_ragmetrics.errors import RagMetricsError, RetrieverError, brief_repr, listed
from pytest_ragmetrics.metrics import document_of

__all__ = ["Leak", "ScopeUnchecked", "find_leaks", "in_scope", "scope_text"]


class ScopeUnchecked(RagMetricsError):
    """A scoped record whose documents have no metadata source at all (no result carries metadata and
    no corpus gives any): a usage error naming the golden file and the record."""


@dataclass(frozen=True)
class Leak:
    """One returned document outside its query's scope."""

    rank: int
    id: str
    doc: str
    metadata: Mapping[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "id": self.id, "doc": self.doc, "metadata": dict(self.metadata)}


def in_scope(metadata: Mapping[str, Any], scope: Mapping[str, Any]) -> bool:
    """Whether a document's metadata matches a scope: every scope key present, with the scope's value
    (or one of its list of values); a metadata list matches when it holds one of them."""
    for key, wanted in scope.items():
        if key not in metadata:
            return False
        allowed = wanted if isinstance(wanted, list) else [wanted]
        have = metadata[key]
        values = have if isinstance(have, list) else [have]
        if not any(_same(v, a) for v in values for a in allowed):
            return False
    return True


def _same(a: Any, b: Any) -> bool:
    """Equal as metadata: ``True`` is not ``1``, and a number is not its text."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return type(a) is type(b) and a == b


def scope_text(mapping: Mapping[str, Any]) -> str:
    """``{tenant: acme, lang: [en, de]}`` as one short line for reports."""
    def one(value: Any) -> str:
        if isinstance(value, list):
            return "[" + ", ".join(one(v) for v in value) + "]"
        return str(value).lower() if isinstance(value, bool) else str(value)
    return "{" + ", ".join(f"{k}: {one(v)}" for k, v in mapping.items()) + "}"


def find_leaks(ids: Sequence[str], result_metadata: Sequence[Mapping[str, Any] | None], scope: Mapping[str, Any],
               corpus: Mapping[str, Mapping[str, Any]] | None, separator: str | None, qid: str,
               record: str, corpus_name: str | None) -> list[Leak]:
    """The returned documents outside ``scope``, in rank order.

    ``ids`` are the ranked ids as returned (chunk ids map to their document through ``separator``),
    ``result_metadata`` each result's own metadata, ``corpus`` each document's metadata by id (None:
    no corpus metadata). Raises :class:`ScopeUnchecked` when there is no source of metadata at all,
    and :class:`~pytest_ragmetrics.errors.RetrieverError` naming the documents whose metadata
    cannot be found.
    """
    carried = any(m is not None for m in result_metadata)
    if ids and not carried and corpus is None:
        where = "no corpus is given" if not corpus_name else (
            f"the corpus {corpus_name} gives its documents no metadata (a folder of text files has none; a "
            "corpus.jsonl gives each field beyond doc_id, title and text)")
        raise ScopeUnchecked(
            f"{record}: scope {scope_text(scope)}, but its documents have no metadata source: the results carry no "
            f"metadata and {where}. Return a metadata mapping with each result (an attribute or a \"metadata\" "
            "key), or pass --rag-corpus a corpus.jsonl whose lines carry the scope's fields")
    corpus_docs = {document_of(d, separator): m for d, m in corpus.items()} if corpus is not None else {}
    leaks: list[Leak] = []
    unknown: list[str] = []
    for rank, (rid, own) in enumerate(zip(ids, list(result_metadata) + [None] * (len(ids) - len(result_metadata))),
                                      start=1):
        doc = document_of(rid, separator)
        sources = [m for m in (own, corpus_docs.get(doc)) if m is not None]
        if not sources:
            unknown.append(rid)
            continue
        outside = next((m for m in sources if not in_scope(m, scope)), None)
        if outside is not None:
            leaks.append(Leak(rank, rid, doc, outside))
    if unknown:
        source = f"neither the results nor the corpus ({corpus_name}) give" if corpus_name else "the results give no"
        raise RetrieverError(
            f"query {qid!r}: scope {scope_text(scope)} cannot be checked: {source} metadata for "
            f"{listed([brief_repr(u) for u in unknown], 5)}; a document that cannot be checked is never passed")
    return leaks
