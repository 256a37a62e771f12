"""Plain-text/Markdown tables and the sample-size note every table carries."""

from __future__ import annotations

import re
import unicodedata
from typing import Sequence

from pytest_ragmetrics.errors import shown
from pytest_ragmetrics.evaluation import below_one_query

__all__ = ["p_text", "display_width", "markdown_table", "sample_size_note", "one_query_mark", "fmt", "escape_cell",
           "counted"]

#: what follows a change smaller than one query's worth in every report
ONE_QUERY_MARK = "(<1/n)"

_LINE_BREAKS = re.compile(r"[\t\r\n\v\f\x1c-\x1e\x85\u2028\u2029]+")
_ESCAPED_BACKSLASH = re.compile(r"\\(?=[!-/:-@\[-`{-~])")  # a backslash that would escape punctuation
_TAG_START = re.compile(r"<(?=[A-Za-z/!?])")  # where raw HTML, a comment or an autolink could begin


def counted(n: int, singular: str, plural: str | None = None) -> str:
    """``1 query``, ``2 queries``: a count with its noun in the right number."""
    return f"{n} {singular if n == 1 else (plural or singular + 's')}"


def fmt(value: object, digits: int = 4) -> str:
    """Format a cell: floats to fixed digits, ``None`` as an em dash."""
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def escape_cell(text: str) -> str:
    """Make ``text`` one literal table cell in Markdown (GFM) and one line in a terminal.

    Line breaks and tabs become spaces; other control and bidi characters (ANSI
    escapes included) are shown as their escapes (:func:`~pytest_ragmetrics.errors.shown`); ``|`` is escaped
    so it cannot split the row;
    ``<`` that could open an HTML tag, comment or autolink is escaped, so a query
    holding ``<script>`` stays text; a backslash that would escape the next
    character is doubled. Everything else is left as it reads.
    """
    text = _LINE_BREAKS.sub(" ", text)
    text = shown(text)
    text = _ESCAPED_BACKSLASH.sub(r"\\\\", text)
    return _TAG_START.sub(r"\\<", text.replace("|", "\\|"))


def display_width(text: str) -> int:
    """Terminal columns ``text`` takes: Chinese, Japanese and Korean characters take two."""
    if text.isascii():
        return len(text)
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 0 if unicodedata.combining(ch) else 1
               for ch in text)


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[object]], digits: int = 4) -> str:
    """A Markdown table whose columns are padded so it also reads well in a terminal.

    Every cell goes through :func:`escape_cell`: ids, tags and texts from a golden
    set cannot break the table or inject HTML.
    """
    cells = [[escape_cell(fmt(c, digits)) for c in row] for row in rows]
    head = [escape_cell(str(h)) for h in headers]
    widths = [max([display_width(head[i])] + [display_width(r[i]) for r in cells]) for i in range(len(head))]

    def line(values: Sequence[str]) -> str:
        return "| " + " | ".join(v + " " * (w - display_width(v)) for v, w in zip(values, widths)) + " |"

    out = [line(head), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out.extend(line(r) for r in cells)
    return "\n".join(out)


def sample_size_note(n: int, empty: str = "n = 0: no query was scored, so these numbers say nothing.") -> str:
    """Printed under every table: one query moves a mean by up to 1/n, so a smaller
    difference is a single question, not evidence of a better or worse system."""
    if n <= 0:
        return empty
    return (
        f"n = {counted(n, 'query', 'queries')}: one query moves a mean by up to 1/n = {1 / n:.4f}; "
        f"a difference smaller than that is a single question, not evidence."
    )


def one_query_mark(change: float | None, n: int) -> str:
    """`` (<1/n)`` after a change smaller than one query's worth of ``n``, else nothing."""
    return f" {ONE_QUERY_MARK}" if change is not None and below_one_query(change, n) else ""


def p_text(p_value: float | None) -> str:
    """A p-value as every report prints it: three decimals, ``<0.001`` below that, ``—`` for none."""
    if p_value is None:
        return "—"
    return "<0.001" if p_value < 0.001 else f"{p_value:.3f}"
