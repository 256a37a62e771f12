"""The verdict as GitHub-flavoured Markdown, for ``$GITHUB_STEP_SUMMARY`` and PR comments.

The aggregate and per-tag tables are the terminal's (they are Markdown already);
the worst-N list becomes a table whose cells are escaped by ``markdown_table``.
"""

from __future__ import annotations

from typing import Callable, Sequence

from pytest_ragmetrics.gate.verdict import Drop, Regression, Verdict
from pytest_ragmetrics.report.tables import escape_cell, markdown_table
from pytest_ragmetrics.report.text import (
    aggregate_table,
    changes_hint,
    moved_heading,
    no_answer_text,
    parent_table,
    retriever_note,
    strata_table,
)
from pytest_ragmetrics.scope import scope_text

__all__ = ["verdict_markdown"]


def verdict_markdown(v: Verdict, worst_n: int, title: str = "Retrieval gate",
                     retriever_changes: Sequence[str] = (), pooled: str | None = None,
                     lowerings: str | None = None) -> str:
    """The summary; ``retriever_changes`` (from :func:`.text.retriever_changes`) is shown near the
    top, as the likely cause of a red run, and a failed verdict leads with the terminal's hint;
    ``pooled`` is a pooled set's part (:func:`.pooled.pooled_markdown`), after the label ages;
    ``lowerings`` the baseline's recorded lowerings (:func:`.lowering.lowerings_markdown`), last."""
    failures = v.failures()
    if failures and not v.passed:  # a strict gate (a leak, nothing judged) fails in report-only mode too
        head = f"## {title}: failed"
    elif failures:
        head = f"## {title}: regressions (report only)"
    elif v.deferred:
        head = f"## {title}: no query regressed in this shard (gates deferred to `ragmetrics merge`)"
    else:
        head = f"## {title}: passed"
    parts = [head]
    hint = changes_hint(retriever_changes) if not v.passed else None
    if hint:
        parts.append(escape_cell(hint))
    if failures:
        parts.append("\n".join(f"- {escape_cell(line)}" for line in failures))
    elif v.warnings:
        parts.append("\n".join(f"- **Warning:** {escape_cell(w)}" for w in v.warnings))
    if v.harvested:  # about the golden set, so said whatever the verdict
        parts.append(f"- **Warning:** {escape_cell(v.harvested)}")
    note = retriever_note(retriever_changes)
    if note is not None:
        parts.append(escape_cell(note.head) + "\n\n" + "\n".join(f"- {escape_cell(c)}" for c in note.changes)
                     + (f"\n\n{escape_cell(note.advice)}" if note.advice else ""))
    table, sep, notes = aggregate_table(v).partition("\nn = ")
    parts.append(table + ("\n\nn = " + notes.replace("\n", "\n\n") if sep else ""))  # notes outside the table
    if v.coverage is not None and v.has_baseline:
        parts.append("\n".join(f"- {escape_cell(line)}" for line in v.coverage.lines()))
    strata = strata_table(v)
    if strata:
        parts.append("<details><summary>Per tag</summary>\n\n" + strata + "\n\n</details>")
    by_source = strata_table(v, by="source")
    if by_source:
        parts.append("<details><summary>Per source</summary>\n\n" + by_source + "\n\n</details>")
    parents = parent_table(v)
    if parents:
        intro, _, table = parents.partition("\n")
        parts.append(intro + "\n\n" + table)
    no_answer = no_answer_text(v)
    if no_answer:  # its own lines are escaped; its table (from markdown_table) already is
        text, _, table = no_answer.partition("\n\n")
        parts.append("\n\n".join(escape_cell(line) for line in text.split("\n")))
        if table:
            heading, _, rows = table.partition("\n")
            parts.append(f"<details><summary>{escape_cell(heading.rstrip(':'))}</summary>\n\n{rows}\n\n</details>")
    if v.labels is not None and (v.labels.stale or v.labels.undated):
        ages = v.labels
        parts.append(f"### Label ages: {len(ages.stale)} of {ages.checked} records stale, "
                     f"{len(ages.undated)} undated\n\n"
                     + escape_cell(f"Limits: {ages.limits_text()}; today {ages.today} UTC") + "\n\n"
                     + markdown_table(["query", "state", "oldest label", "age (days)", "limit (days)", "from"],
                                      [[r.qid, "stale" if r.oldest else "undated", r.oldest or "—",
                                        "—" if r.age is None else r.age, r.limit, r.limit_key]
                                       for r in [*ages.stale, *ages.undated]]))
    if v.leaks:
        n = sum(len(leak.docs) for leak in v.leaks)
        parts.append(f"### Leaks: {n} returned {'document' if n == 1 else 'documents'} outside their query's scope\n\n"
                     "Zero tolerance: no threshold allows a leak.\n\n"
                     + markdown_table(["query", "question", "filters", "scope", "rank", "document", "metadata"],
                                      [[leak.qid, leak.question, scope_text(leak.filters) if leak.filters else "—",
                                        scope_text(leak.scope), d["rank"], d["doc"], scope_text(d["metadata"])]
                                       for leak in v.leaks for d in leak.docs]))
    if pooled:
        parts.append(pooled)
    if v.has_baseline:
        worst = _query_rows(v.regressions[:worst_n], lambda d: d.exceeded)
        if worst:
            parts.append(f"### Worst regressed queries ({len(worst)} of {len(v.regressions)})\n\n"
                         + markdown_table(_HEADERS, worst))
        elif v.moved:
            parts.append("No query regressed beyond its per-query tolerance.")
        else:
            parts.append("No query fell beyond its per-query tolerance.")
        if v.moved:
            moved = _query_rows(v.moved[:worst_n], lambda d: d.metric in v.moved_metrics)
            parts.append(f"### {moved_heading(v, len(moved))}\n\n" + markdown_table(_HEADERS, moved))
        if v.within and worst_n:
            within = _query_rows(v.within[:worst_n], lambda d: False)
            parts.append(f"<details><summary>Fell within their tolerances ({len(within)} of {len(v.within)})"
                         "</summary>\n\n" + markdown_table(_HEADERS, within) + "\n\n</details>")
    if lowerings:
        parts.append(lowerings)
    return "\n\n".join(parts) + "\n"


_HEADERS = ["#", "query", "question", "fell", "gold", "returned instead"]


def _query_rows(entries: Sequence[Regression], shown: Callable[[Drop], bool]) -> list[list[object]]:
    """One row per listed query; ``shown`` picks the drops the "fell" cell names."""
    rows: list[list[object]] = []
    for i, r in enumerate(entries, start=1):
        fell = "; ".join(f"{d.metric} {d.before:.4f} → {d.after:.4f}" for d in r.drops if shown(d))
        question = r.question + (f" (filters {scope_text(r.filters)})" if r.filters else "")
        rows.append([i, r.qid, question, r.error or fell or "—",
                     ", ".join(f"{d} ({g})" for d, g in r.gold)
                     or ("none (answerable: false)" if not r.answerable else ""),
                     ", ".join(r.returned[:5]) or "nothing"])
    return rows
