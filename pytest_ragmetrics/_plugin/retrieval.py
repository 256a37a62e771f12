"""How the retriever is called: in ``search_batch`` calls, or one query at a time
(always under ``--rag-timeout``: a batch cannot be timed query by query), never
twice at once unless it declares itself thread-safe.

A broken ``search_batch`` is said once (a warning at the user's own source line)
and not called again, so a run never pays for every query twice without knowing.

A golden record's ``filters`` go to the retriever by keyword, ``search(query, k,
filters=...)``; a record without them is searched as ``search(query, k)``, as ever. A batch
that holds a filtered query is sent as ``search_batch(queries, k, filters=[...])`` (one mapping
or None per query) when ``search_batch`` takes ``filters``; when it does not, the filtered
queries are searched one at a time with ``search`` and the others still go in batches.
"""

from __future__ import annotations

import copy
import functools
import warnings
from typing import Any, Callable, Sequence

from pytest_ragmetrics._plugin.deadline import RetrieverCaller
from pytest_ragmetrics._plugin.retriever import declares_thread_safe
from pytest_ragmetrics.errors import RagMetricsWarning, brief_repr
from pytest_ragmetrics.golden import Query
from pytest_ragmetrics.protocol import accepts_filters

__all__ = ["Retrieval"]


class Retrieval:
    """The calls into one process's retriever, and what ``search_batch`` fetched ahead."""

    def __init__(self, k: int, timeout: float | None, batching: bool, fallback_location: str) -> None:
        self.k = k
        self.timeout = timeout
        #: whether ``search_batch`` may be used at all (not with --rag-repeat, which calls search
        #: again, nor with --rag-timeout, whose limit is per query)
        self.batching = batching
        #: where a batch warning points when the retriever's source is unknown
        self.fallback_location = fallback_location
        self._prefetched: dict[str, Any] = {}
        self._batch_off = False  # set when search_batch answered out of shape
        self._batch_warned = False
        self._unbatched: set[str] = set()  # queries of a batch that raised: searched one at a time
        self._calls: RetrieverCaller | None = None

    def _caller(self, retriever: Any) -> RetrieverCaller:
        """The one caller of this process's retriever, made at its first query."""
        if self._calls is None:
            self._calls = RetrieverCaller(self.timeout, declares_thread_safe(retriever))
        return self._calls

    def search(self, retriever: Any, query: Query) -> Any:
        """One ``search`` call for ``query``, under the deadline and the one-call-at-a-time rule."""
        __tracebackhide__ = True
        search = retriever.search
        if query.filters:  # only then by keyword: every retriever without filters is called as before
            search = functools.partial(search, filters=copy.deepcopy(query.filters))
        return self._caller(retriever).call(f"query {brief_repr(query.qid)}", search, query.text, self.k)

    def _prefetch(self, retriever: Any, upcoming: Sequence[Query]) -> None:
        """Fill the cache with one ``search_batch`` call; on failure fall back to per-query.

        A batch that returns something other than one result list per query
        turns batching off for the rest of the run (each query then gets its own
        ``search``), and a warning says so once: the user would otherwise pay for
        every query twice without knowing.
        """
        __tracebackhide__ = True
        self._prefetched.clear()
        upcoming = [q for q in upcoming if q.qid not in self._unbatched]
        batch = retriever.search_batch
        if any(q.filters for q in upcoming):
            if accepts_filters(batch):
                each = [copy.deepcopy(q.filters) if q.filters else None for q in upcoming]
                batch = functools.partial(batch, filters=each)
            else:  # never dropped: a filtered query waits for its own search(query, k, filters=...)
                upcoming = [q for q in upcoming if not q.filters]
                if not upcoming:
                    return
        texts = [q.text for q in upcoming]
        what = f"search_batch of {len(texts)} queries"
        try:
            results = self._caller(retriever).call(what, batch, texts, self.k)
        except Exception as exc:  # one bad query must not fail its neighbours: retry one by one
            self._unbatched.update(q.qid for q in upcoming)  # and never batch them again
            self._warn_batch(retriever, f"search_batch raised {brief_repr(exc)}; the {len(texts)} queries "
                                        "of that batch are searched one at a time with search instead (later "
                                        "batches still use search_batch; their failures are not reported again)")
            return
        try:
            results = list(results)
        except TypeError:
            self._stop_batching(retriever, f"search_batch returned {brief_repr(results)} for a batch of "
                                           f"{len(texts)} queries, expected a list of {len(texts)} result lists")
            return
        if len(results) != len(upcoming):
            self._stop_batching(retriever, f"search_batch returned {len(results)} result lists for a batch of "
                                           f"{len(texts)} queries; it must return one per query, in order")
            return
        for q, r in zip(upcoming, results):
            self._prefetched[q.qid] = r

    def _stop_batching(self, retriever: Any, why: str) -> None:
        self._batch_off = True
        self._warn_batch(retriever, f"{why}. The plugin stopped calling search_batch and calls search once per "
                                    "query for the rest of this run")

    def _warn_batch(self, retriever: Any, text: str) -> None:
        """Warn once a run, pointing at the retriever's search_batch when its source is known."""
        if self._batch_warned:
            return
        self._batch_warned = True
        function = getattr(retriever.search_batch, "__func__", retriever.search_batch)
        code = getattr(function, "__code__", None)
        where = (code.co_filename, code.co_firstlineno) if code is not None else (self.fallback_location, 1)
        warnings.warn_explicit(f"ragmetrics: {text}", RagMetricsWarning, *where)

    def retrieve(self, retriever: Any, query: Query, upcoming: Callable[[], Sequence[Query]]) -> Any:
        """``query``'s raw results: from the last ``search_batch`` when it fetched them, else one ``search``."""
        __tracebackhide__ = True
        if query.qid in self._prefetched:
            return self._prefetched.pop(query.qid)
        if (callable(getattr(retriever, "search_batch", None)) and self.batching and not self._batch_off
                and query.qid not in self._unbatched
                and not (query.filters and not accepts_filters(retriever.search_batch))):
            self._prefetch(retriever, upcoming())
            if query.qid in self._prefetched:
                return self._prefetched.pop(query.qid)
        return self.search(retriever, query)
