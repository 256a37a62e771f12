"""The worker side of a ``pytest --rag-eval`` session: retrieve, score and compare one query.

Every process that runs query items (a serial run, an xdist worker) has one
:class:`QueryWorker`. It compares each query with its baseline entry once, and the
record it returns carries the answer (its drops, whether it is inconclusive) to the
query item, and through the report's ``user_properties`` to the process that judges.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from pytest_ragmetrics._plugin.deadline import RetrieverBusy
from pytest_ragmetrics._plugin.retrieval import Retrieval
from pytest_ragmetrics.errors import RetrieverError
from pytest_ragmetrics.evaluation import score_query
from pytest_ragmetrics.gate.verdict import QueryRecord, ScopeCheck, judge_query
from pytest_ragmetrics.gold import check_gold, retriever_doc_ids
from pytest_ragmetrics.golden import Query
from pytest_ragmetrics.metrics import document_of, document_ranking, ideal_grades
from pytest_ragmetrics.parents import score_parents
from pytest_ragmetrics.results import normalize_results
from pytest_ragmetrics.scope import Leak, ScopeUnchecked, find_leaks, scope_text
from pytest_ragmetrics.unanswerable import false_retrieval
from pytest_ragmetrics.unjudged import measure_unjudged

if TYPE_CHECKING:
    from pytest_ragmetrics._plugin.session import RagSession

__all__ = ["QueryWorker"]


class QueryWorker:
    """Runs this process's queries against the session's golden set, baseline and thresholds."""

    def __init__(self, rag: RagSession) -> None:
        self.rag = rag
        options = rag.options
        # --rag-repeat calls search again; a batch cannot be timed query by query
        self.retrieval = Retrieval(options.k, options.timeout,
                                   batching=options.repeat == 1 and options.timeout is None,
                                   fallback_location=str(rag.collect_path))
        self._ideal = {q.qid: ideal_grades(q.judgments) for q in rag.golden}
        self._described = False
        self._sent_description = False  # a worker sends the description with its first record only

    def run_query(self, retriever: Any, query: Query,
                  upcoming: Callable[[], Sequence[Query]] = lambda: ()) -> QueryRecord:
        """Retrieve, map, dedup, score and compare one query; the record carries its drops.

        Raises what the retriever raised (after recording the error), or
        :class:`RetrieverError` for a result that is not a ranking.
        """
        rag = self.rag
        __tracebackhide__ = True  # a failing retriever's own frames are what its user needs to see
        if not self._described:
            self._described = True
            describe = getattr(retriever, "describe", None)
            try:
                rag.retriever_description = describe() if callable(describe) else type(retriever).__name__
            except Exception as exc:  # describing is optional; never fail a query on it
                rag.retriever_description = f"{type(retriever).__name__} (describe() raised {exc!r})"
            self._check_gold_with(retriever)
            if query.scope is not None or rag.full_golden.scoped():
                self._scope_metadata_from(retriever)
        try:
            returned = normalize_results(self.retrieval.retrieve(retriever, query, upcoming), rag.options.k, query.qid)
            leaks = self._leaks(query, returned) if query.scope else []
            # What is scored is the document ranking: chunks of one document trading places change nothing.
            ranked = document_ranking(returned.ids, rag.config.id_separator) if rag.options.repeat > 1 else []
            for _ in range(rag.options.repeat - 1):
                again = document_ranking(normalize_results(self.retrieval.search(retriever, query), rag.options.k,
                                                           query.qid).ids, rag.config.id_separator)
                if again != ranked:
                    first = next(i for i, (a, b) in enumerate(zip(ranked + [None], again + [None])) if a != b)
                    raise RetrieverError(
                        f"query {query.qid!r} is not deterministic: the documents it ranks changed between "
                        f"repeated runs (first difference at rank {first + 1}: {ranked[first:first + 1]} vs "
                        f"{again[first:first + 1]}); a system compared with itself must score identically"
                    )
        except RetrieverBusy:
            raise  # never started: no record, so the query counts as not run
        except Exception as exc:
            # The item re-raises this; the record rides along so the gate counts the error.
            exc.ragmetrics_record = QueryRecord(  # type: ignore[attr-defined]
                query.qid, "error", error=f"{type(exc).__name__}: {exc}",
                leaks=[leak.to_dict() for leak in getattr(exc, "leaks", ())])
            raise
        record = self._score(query, returned, {d for leak in leaks  # as the corpus holds it, and as scored
                                               for d in (leak.doc, document_of(leak.id, rag.config.id_separator))})
        record.leaks = [leak.to_dict() for leak in leaks]
        return record

    def _leaks(self, query: Query, returned: Any) -> list[Leak]:
        """The returned documents outside the query's scope (see :mod:`pytest_ragmetrics.scope`)."""
        rag = self.rag
        corpus = rag._shown_path(rag.options.corpus) if rag.options.corpus is not None else None
        record = f"{rag._shown_path(rag.options.golden)}, record {query.qid!r}"
        if rag.options.corpus is not None and rag.corpus_metadata is None and rag.gold_unchecked:
            raise ScopeUnchecked(f"{record}: scope {scope_text(query.scope or {})} is checked against the corpus "
                                 f"{corpus}, which could not be read: {rag.gold_unchecked}")
        return find_leaks(returned.ids, returned.metadata, query.scope, rag.corpus_metadata,  # type: ignore[arg-type]
                          rag.config.id_separator, query.qid, record, corpus)

    def _score(self, query: Query, returned: Any, outside: set[str] | frozenset[str] = frozenset()) -> QueryRecord:
        """Score and compare one query's normalised results; ``outside``: its returned documents outside its
        scope, known not relevant, so a pooled set counts them judged (grade 0), never unjudged."""
        rag = self.rag
        docs, metrics = score_query(returned.ids, query.judgments, rag.config, self._ideal.get(query.qid))
        explains = _explains_per_document(returned, docs, rag.config.id_separator)
        scores = _scores_per_document(returned, docs, rag.config.id_separator)
        entry = rag.baseline_id.get(query.qid, query.qid)  # a renamed query keeps its old entry
        compared = rag.baseline is not None and entry in rag.baseline.per_query and not rag.options.update_baseline
        if not query.answerable:  # scored by false retrieval alone (see pytest_ragmetrics.unanswerable)
            found = false_retrieval(returned.scores, rag.options.answer_threshold)
            record = QueryRecord(query.qid, "unanswerable", None, docs, explains, len(docs),
                                 truncated_from=returned.truncated_from, scores=scores, false_retrieval=found)
            if compared:
                record.drops, _ = judge_query(record, rag.baseline.per_query[entry], rag.thresholds,  # type: ignore[union-attr]
                                              answerable=False)
            return record
        lost = rag.gold_check.reason(query.qid) if rag.gold_check is not None else None
        if metrics is None or lost is not None:  # a query whose gold cannot be retrieved would score 0 forever
            return QueryRecord(query.qid, "unscorable", None, docs, explains, len(docs), error=lost,
                               truncated_from=returned.truncated_from)
        record = QueryRecord(query.qid, "scored", metrics, docs, explains, len(docs),
                             truncated_from=returned.truncated_from, scores=scores)
        if any(p is not None for p in returned.parents):
            record.parent_level = score_parents(returned.ids, returned.parents, query.judgments,
                                                rag.config, rag.options.k)
        if rag.pooled:
            top = rag.baseline.per_query[entry].get("_top") if compared else None  # type: ignore[union-attr]
            known = {**{d: 0 for d in outside}, **query.judgments}
            unjudged = measure_unjudged(docs, known, metrics, rag.config, rag.top_grade,
                                     top if isinstance(top, list) else None)
            record.judged, record.unjudged, record.upper, record.upper_new, record.baseline_upper_new = \
                unjudged.judged, unjudged.docs, unjudged.upper, unjudged.upper_new, unjudged.baseline_upper_new
            record.baseline_upper = unjudged.baseline_upper
            record.unjudged_new = unjudged.new if compared else None
        if compared:  # once, here: the item, the gate and the JUnit properties read it off the record
            record.drops, record.inconclusive = judge_query(record, rag.baseline.per_query[entry],  # type: ignore[union-attr]
                                                            rag.thresholds, pooled=rag.pooled)
        return record

    def _check_gold_with(self, retriever: Any) -> None:
        """Without rag_corpus, check the gold ids against the retriever's ``doc_ids()`` when it has one."""
        rag = self.rag
        if rag.gold_check is not None or rag.gold_unchecked is not None:
            return
        try:
            ids = retriever_doc_ids(retriever)
        except Exception as exc:  # the check is optional; never fail a query on it, but say so in the summary
            rag._gold_from_retriever = True
            rag.gold_unchecked = f"the retriever's doc_ids() raised {type(exc).__name__}: {exc}"
            return
        if ids is not None:
            rag._gold_from_retriever = True
            rag.gold_check = check_gold(rag.full_golden, ids, f"the retriever's doc_ids() ({len(ids)} documents)",
                                        rag.config.relevance_level, rag.config.id_separator)

    def _scope_metadata_from(self, retriever: Any) -> None:
        """Without rag_corpus, each document's metadata from the retriever's ``doc_metadata()`` when it has
        one: an independent source for the scope check, beside what each result claims."""
        rag = self.rag
        if rag.corpus_metadata is not None or rag.scope_from_retriever is not None:
            return
        method = getattr(retriever, "doc_metadata", None)
        if not callable(method):
            return
        try:
            found = method()
        except Exception as exc:  # optional: the scope is still checked against each result's metadata
            rag.scope_from_retriever = ScopeCheck("results", f"only the metadata the retriever returned with each "
                                                             f"result: its doc_metadata() raised "
                                                             f"{type(exc).__name__}: {exc}")
            return
        if not isinstance(found, Mapping) or not all(isinstance(k, str) and isinstance(v, Mapping)
                                                      for k, v in found.items()):
            rag.scope_from_retriever = ScopeCheck("results", "only the metadata the retriever returned with each "
                                                             "result: its doc_metadata() did not return a mapping of "
                                                             "document id -> metadata mapping")
            return
        rag.corpus_metadata = {k: dict(v) for k, v in found.items()}
        rag.scope_from_retriever = ScopeCheck("doc_metadata", f"the retriever's doc_metadata() ({len(found)} "
                                                              "documents) and the metadata of each result")

    def record_payload(self, record: QueryRecord) -> dict[str, Any]:
        rag = self.rag
        data = record.to_dict()
        if rag.retriever_description is not None and not self._sent_description:
            self._sent_description = True
            data["retriever"] = rag.retriever_description
            if rag._gold_from_retriever and rag.gold_check is not None:  # a worker's check reaches the controller
                data["gold_check"] = rag.gold_check.to_dict()
            elif rag._gold_from_retriever and rag.gold_unchecked is not None:
                data["gold_unchecked"] = rag.gold_unchecked
            if rag.scope_from_retriever is not None:
                data["scope_check"] = {"source": rag.scope_from_retriever.source,
                                       "detail": rag.scope_from_retriever.detail}
        return data


def _scores_per_document(returned: Any, docs: list[str], separator: str | None) -> list[float | None]:
    """The score of the best-ranked result behind each document (empty when no result has one)."""
    if not any(s is not None for s in returned.scores):
        return []
    first: dict[str, float | None] = {}
    for rid, score in zip(returned.ids, returned.scores):
        first.setdefault(document_of(rid, separator), score)
    return [first.get(d) for d in docs]


def _explains_per_document(returned: Any, docs: list[str], separator: str | None) -> list[str | None]:
    """The explanation of the best-ranked result behind each document."""
    if not any(returned.explains):
        return []
    first: dict[str, str | None] = {}
    for rid, why in zip(returned.ids, returned.explains):
        doc = document_of(rid, separator)
        if doc not in first:
            first[doc] = (f"{rid}: {why}" if rid != doc and why else why)
    return [first.get(d) for d in docs]


