"""The terminal summary of a ``pytest --rag-eval`` session, as one text.

The plugin gathers the session's plain data (the verdict, what it could not check,
what it could not write) and calls :func:`session_summary`, or :func:`refresh_summary`
for a ``--rag-update-baseline`` run; the order of the parts is decided here alone, so
the warnings a reader must not miss stay next to the verdict's headline.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Collection, Sequence

from pytest_ragmetrics.errors import listed
from pytest_ragmetrics.gate.verdict import AggregateRow, Verdict
from pytest_ragmetrics.report.tables import counted
from pytest_ragmetrics.report.text import retriever_hint, retriever_text, verdict_text

__all__ = ["session_summary", "refresh_summary"]


def _under_headline(text: str, line: str) -> str:
    head, _, rest = text.partition("\n")
    return f"{head}\n{line}\n{rest}"


def session_summary(verdict: Verdict, worst_n: int, *, lost: Collection[str] = (),
                    unused_thresholds: Any = None, gold_warning: str | None = None,
                    retriever_before: Any = None, retriever_now: Any = None, not_started: Sequence[str] = (),
                    late_gold: str | None = None, pooled: str | None = None, mismatch: Sequence[str] = (),
                    problems: Sequence[str] = (), leakage: str | None = None, unjudged: bool = False,
                    lowerings: str | None = None) -> str:
    """The summary of a run judged against its baseline.

    ``lost``: queries whose gold the corpus lacks (the gold warning lists them, with why, so the
    verdict does not); ``unused_thresholds``: a thresholds file that exists and that the run does not
    read (its ``why`` says why); ``gold_warning``: the gold check's warning; ``retriever_before``/``retriever_now``:
    the baseline's and this run's retriever descriptions; ``not_started``: queries the busy retriever
    could not start; ``late_gold``: what the gold check found after the header was printed;
    ``pooled``: the pooled set's part; ``mismatch``: what was measured differently
    (``--rag-accept-mismatch``); ``problems``: reports that could not be written; ``leakage``: the
    leakage warning; ``unjudged``: the run waits on documents nobody judged (gate ``unjudged``);
    ``lowerings``: what the baseline in use records it was lowered for (:mod:`.lowering`).
    """
    # a query whose gold the corpus lacks is listed, with why, by the gold warning below
    shown_verdict = dataclasses.replace(verdict, unscorable=[q for q in verdict.unscorable if q not in lost]) \
        if lost else verdict
    summary = verdict_text(shown_verdict, worst_n)
    if unused_thresholds is not None:  # said beside the verdict, not only in the header
        why = getattr(unused_thresholds, "why", "the built-in defaults gate this run")
        summary = _under_headline(summary, f"WARNING: {unused_thresholds} exists but this run does not read it: {why}")
    if gold_warning:  # near the top, once: a gold id the corpus lacks scores 0 forever and hides
        summary = _under_headline(summary, gold_warning)
    hint = retriever_hint(retriever_before, retriever_now) if not verdict.passed else None
    if hint:  # a reader scanning from the top must not take a changed retriever for a regression
        summary = _under_headline(summary, hint)
    if not_started:
        summary += (f"\n\n{counted(len(not_started), 'query', 'queries')} did not run, as the retriever "
                    "was still busy with a call abandoned at --rag-timeout (each item says which): "
                    f"{listed(list(not_started))}. Not run is not scored, so they are not regressions; "
                    "the run is partial and fails")
    if late_gold:  # the header said "none checked yet": the end says what was
        summary += f"\n{late_gold}"
    if pooled is not None:
        summary += "\n\n" + pooled
    if mismatch:
        summary += "\n\nCompared despite a different measurement (--rag-accept-mismatch):\n  - " + \
            "\n  - ".join(mismatch)
    if problems:
        summary += "\n\n" + "\n".join(problems)
    if lowerings:
        summary += "\n\n" + lowerings
    retriever = retriever_text(retriever_before, retriever_now, unjudged=unjudged)
    if retriever:
        summary += "\n\n" + retriever
    if leakage:
        summary += "\n\n" + leakage
    return summary


def refresh_summary(change: str, *, written: bool, gold_warning: str | None = None,
                    aggregate: Sequence[AggregateRow] = (), thresholds_name: str = "thresholds",
                    retriever_before: Any = None, retriever_now: Any = None, problems: Sequence[str] = (),
                    notes: Sequence[str] = (), leakage: str | None = None) -> str:
    """The summary of a ``--rag-update-baseline`` run: what changed in the baseline (``written``) or
    why it was not written, then the retriever and the reports that could not be written.

    A baseline under a floor makes every later run fail that gate, so a written one says so now
    (``aggregate``: this run's rows; ``thresholds_name``: where the floors come from). ``notes``: what
    reading the old baseline noted (an older format, upgraded by this write), said once. ``leakage``:
    golden questions found in the corpus, said here too, since the baseline now holds their scores.
    """
    summary = change
    if written:
        for note in notes:
            summary += f"\nNote: {note}"
        if gold_warning:  # written with --rag-allow-missing-gold: still said, first
            summary = f"{gold_warning}\n{summary}"
        for row in aggregate:
            if row.under_floor:
                summary += (f"\nWARNING: {row.metric} = {row.now:.4f} is under its floor {row.minimum:g} "
                            f"({thresholds_name}): every run will fail that gate "
                            "until retrieval improves or the floor is lowered.")
    retriever = retriever_text(retriever_before, retriever_now, refreshing=True)
    if retriever:
        summary += "\n\n" + retriever
    if leakage:
        summary += "\n\n" + leakage
    if problems:
        summary = "\n\n".join([summary or "", *problems]).strip()
    return summary
