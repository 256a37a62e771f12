"""Plain-text/Markdown tables and the sample-size note every table carries."""

from __future__ import annotations

from typing import Sequence

__all__ = ["markdown_table", "sample_size_note", "fmt"]


def fmt(value: object, digits: int = 4) -> str:
    """Format a cell: floats to fixed digits, ``None`` as an em dash."""
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[object]], digits: int = 4) -> str:
    """A Markdown table whose columns are padded so it also reads well in a terminal."""
    cells = [[fmt(c, digits) for c in row] for row in rows]
    head = [str(h) for h in headers]
    widths = [max([len(head[i])] + [len(r[i]) for r in cells]) for i in range(len(head))]

    def line(values: Sequence[str]) -> str:
        return "| " + " | ".join(v.ljust(w) for v, w in zip(values, widths)) + " |"

    out = [line(head), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out.extend(line(r) for r in cells)
    return "\n".join(out)


def sample_size_note(n: int) -> str:
    """Seed 000's point, printed under every table: below 1/n a difference is one query."""
    if n <= 0:
        return "n = 0: no query was scored, so these numbers say nothing."
    return (
        f"n = {n} queries: one query moves a mean by up to 1/n = {1 / n:.4f}; "
        f"a difference smaller than that is a single question, not evidence."
    )
