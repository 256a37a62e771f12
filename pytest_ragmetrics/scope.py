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

import unicodedata
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from pytest_ragmetrics.errors import InputError, RagMetricsError, RetrieverError, brief_repr, listed
from pytest_ragmetrics.metrics import document_of

__all__ = ["Leak", "ScopeUnchecked", "check_gold_scope", "find_leaks", "in_scope", "scope_text", "why_outside"]


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


def why_outside(metadata: Mapping[str, Any], scope: Mapping[str, Any]) -> str:
    """Why ``metadata`` is outside ``scope``, for the report: the missing key, or the value it holds,
    with its type when the text alone would read the same (``1`` against ``"1"``, ``café`` in two
    Unicode forms, a trailing space)."""
    for key, wanted in scope.items():
        if key not in metadata:
            return f"no {key!r} in its metadata"
        if not in_scope({key: metadata[key]}, {key: wanted}):
            have = metadata[key]
            if _looks(have) == _looks(wanted):  # reads the same: show what differs
                return (f"{key} is {ascii(have)} ({type(have).__name__}), the scope wants {ascii(wanted)} "
                        f"({type(wanted).__name__})")
            return f"{key} is {scope_text({key: have})[len(key) + 3:-1]}"
    return "inside the scope"


def _looks(value: Any) -> str:
    """How a value reads to a person: Unicode forms, case, spaces and quotes aside."""
    return unicodedata.normalize("NFKC", scope_text({"": value})).strip().casefold().replace(" ", "")


def _same(a: Any, b: Any) -> bool:
    """Equal as metadata: ``True`` is not ``1``, and a number is not its text."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return type(a) is type(b) and a == b


def scope_text(mapping: Mapping[str, Any]) -> str:
    """``{lang: [en, de], tenant: acme}`` as one short line for reports, keys sorted so every report
    and every command prints one mapping alike."""
    def one(value: Any) -> str:
        if isinstance(value, list):
            return "[" + ", ".join(one(v) for v in value) + "]"
        return str(value).lower() if isinstance(value, bool) else str(value)
    return "{" + ", ".join(f"{k}: {one(mapping[k])}" for k in sorted(mapping, key=str)) + "}"


def check_gold_scope(queries: Any, corpus: Mapping[str, Mapping[str, Any]] | None, separator: str | None,
                     golden_name: str, corpus_name: str) -> None:
    """Refuse a relevant gold document (grade > 0) outside its record's scope: the gate fails a query that
    returns it (a leak), so such a label penalises the retriever that respects the scope. Checked when
    the corpus gives metadata; a document the corpus does not hold is the missing-gold check's concern."""
    if corpus is None:
        return
    problems = []
    for query in queries:
        scope = getattr(query, "scope", None)
        if not scope:
            continue
        for doc, grade in query.judgments.items():
            metadata = corpus.get(doc) if doc in corpus else corpus.get(document_of(doc, separator))
            if grade > 0 and metadata is not None and not in_scope(metadata, scope):
                problems.append(f"record {query.qid!r}: gold document {doc!r} (grade {grade}) has metadata "
                                f"{scope_text(metadata)} in {corpus_name} ({why_outside(metadata, scope)}), outside "
                                f"the record's scope {scope_text(scope)}")
    if problems:
        shown = "; ".join(problems[:10]) + (f"; … and {len(problems) - 10} more" if len(problems) > 10 else "")
        raise InputError(golden_name, None,
                         f"{len(problems)} relevant gold {'document is' if len(problems) == 1 else 'documents are'} "
                         f"outside {'its' if len(problems) == 1 else 'their'} record's scope: {shown}. A query "
                         "returning it would fail as a leak; grade it 0 or remove it (or fix the scope)")


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
    leaks: list[Leak] = []
    unknown: list[str] = []
    for rank, (rid, own) in enumerate(zip(ids, list(result_metadata) + [None] * (len(ids) - len(result_metadata))),
                                      start=1):
        # the corpus line of the id as returned, else of its document: a corpus id may itself hold the separator
        doc = rid if corpus is not None and rid in corpus else document_of(rid, separator)
        sources = [m for m in (own, corpus.get(doc) if corpus is not None else None) if m is not None]
        if not sources:
            unknown.append(rid)
            continue
        outside = next((m for m in sources if not in_scope(m, scope)), None)
        if outside is not None:
            leaks.append(Leak(rank, rid, doc, outside))
    if unknown:
        source = f"neither the results nor the corpus ({corpus_name}) give" if corpus_name else "the results give no"
        found = (f"; {len(leaks)} other returned {'document is' if len(leaks) == 1 else 'documents are'} outside "
                 f"it: {listed([leak.doc for leak in leaks], 5)}") if leaks else ""
        error = RetrieverError(
            f"query {qid!r}: scope {scope_text(scope)} cannot be checked: {source} metadata for "
            f"{listed([brief_repr(u) for u in unknown], 5)}; a document that cannot be checked is never passed{found}")
        error.leaks = leaks  # type: ignore[attr-defined]  # the leaks it did find still fail the leak gate
        raise error
    return leaks
