"""The recorded lowerings of a baseline (``_meta.lowerings``) as people read them: a run's summary
(the most recent and how many in all), its Markdown summary, and ``ragmetrics baseline FILE`` (all)."""

from __future__ import annotations

from typing import Sequence

from pytest_ragmetrics.errors import shown
from pytest_ragmetrics.gate.lowering import LoweringEntry
from pytest_ragmetrics.report.tables import escape_cell, markdown_table

__all__ = ["lowerings_listing", "lowerings_markdown", "lowerings_summary"]

#: Lowered values named in one line before "… and N more".
_NAMED = 5


def _what(entry: LoweringEntry, named: int = _NAMED) -> str:
    texts = [x.text() for x in entry.lowered]
    return "; ".join(texts[:named]) + (f"; … and {len(texts) - named} more" if len(texts) > named else "")


def _who(entry: LoweringEntry) -> str:
    return f"{entry.time} by {shown(entry.author)}" if entry.author else f"{entry.time} (author unknown)"


def _counted(n: int) -> str:
    return f"{n} lowering{'' if n == 1 else 's'}"


def lowerings_summary(entries: Sequence[LoweringEntry], path: str) -> str | None:
    """The run summary's lines on the baseline in use: how many lowerings it records, and the most recent
    (None when it records none)."""
    if not entries:
        return None
    last = entries[-1]
    return (f"Baseline {path} records {_counted(len(entries))} made on purpose; the most recent, {_who(last)}: "
            f"\"{shown(last.reason)}\" ({_what(last)}). `ragmetrics baseline {path}` lists "
            f"{'it' if len(entries) == 1 else 'them all'}.")


def lowerings_markdown(entries: Sequence[LoweringEntry], path: str) -> str | None:
    """The Markdown summary's section: the count, then a table of the entries, the most recent first."""
    if not entries:
        return None
    rows = [[e.time, e.author or "unknown", e.reason, _what(e)] for e in reversed(entries)]
    return (f"### Baseline lowerings: {len(entries)} recorded\n\n"
            + escape_cell(f"Lowered on purpose, with a reason kept in {path} (_meta.lowerings); the most recent "
                          "first.") + "\n\n"
            + markdown_table(["when (UTC)", "who", "reason", "lowered"], rows))


def lowerings_listing(entries: Sequence[LoweringEntry]) -> str:
    """Every entry, oldest first, each lowered value on a line of its own (``ragmetrics baseline FILE``)."""
    if not entries:
        return "No lowering recorded (_meta.lowerings): the baseline was never lowered with a reason."
    lines = [f"{_counted(len(entries))} recorded (_meta.lowerings), oldest first:"]
    for n, entry in enumerate(entries, 1):
        lines.append(f"  {n}. {_who(entry)}: \"{shown(entry.reason)}\"")
        lines += [f"       {x.text()}" for x in entry.lowered]
    return "\n".join(lines)
