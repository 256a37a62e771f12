"""Queries that were skipped (``pytest.skip``, a ``skip`` marker, ``pytest.importorskip`` in the
``rag_retriever`` fixture): not judged, so the run cannot pass for the whole set.

A skipped query has no record, like a query that did not run; the difference is that the run
knows why (the skip's reason), and says so instead of guessing at ``-k``. The ``baseline`` gate,
which holds only when every query meant to run did, fails naming each skipped query with its
reason; a skip of the retriever's fixture skips every query, and the gate then says that nothing
was judged.
"""

from __future__ import annotations

from typing import Mapping

from pytest_ragmetrics.errors import listed

__all__ = ["skipped_text"]


def skipped_text(skipped: Mapping[str, str], total: int) -> str:
    """Why the queries of ``skipped`` (query id -> the skip's reason) leave a run of ``total`` queries
    unjudged, grouped by reason: one skip of the retriever's fixture reads as one line."""
    by_reason: dict[str, list[str]] = {}
    for qid, reason in skipped.items():
        by_reason.setdefault(reason or "no reason given", []).append(qid)
    why = "; ".join(f"{listed(qids)} ({reason})" for reason, qids in by_reason.items())
    n = len(skipped)
    if n >= total:
        head = (f"every query was skipped ({'the 1 query' if n == 1 else f'all {n}'}), so nothing was judged: "
                f"{why}")
    else:
        head = f"{n} of {total} queries {'was' if n == 1 else 'were'} skipped, so not judged: {why}"
    return (f"{head}. A skipped query is not a pass: the gate judges the whole set, so make the skipped "
            "queries run (a skip in the rag_retriever fixture, such as an unreachable index, skips them all)")
