"""The pieces every HTML page of the package shares: the page shell, its CSS, cells, tables.

One place for the rules of a self-contained page: inline CSS, no script, nothing
fetched (no font, image, stylesheet or link to another host), and every text from
the data escaped by the caller with ``html.escape`` before it reaches these
helpers (table headers are escaped here). The run report (:mod:`.html`) and the
history page (:mod:`.trend_html`) are both built from them.
"""

from __future__ import annotations

from html import escape
from typing import Any, Sequence

from pytest_ragmetrics.report.tables import one_query_mark

__all__ = ["CSS", "num", "delta_cell", "table", "page"]

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:1100px;\
color:#1b1f24;padding:0 16px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #d0d7de;padding-bottom:4px}
.meta{color:#57606a;font-size:12px}.banner{padding:10px 14px;border-radius:6px;margin:16px 0;font-weight:600}
.pass{background:#dafbe1;border:1px solid #4ac26b}.fail{background:#ffebe9;border:1px solid #ff8182}\
.warn{background:#fff8c5;border:1px solid #d4a72c}
table{border-collapse:collapse;margin:6px 0 10px;font-size:13px}\
th,td{border:1px solid #d0d7de;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f6f8fa}td.num{text-align:right;font-variant-numeric:tabular-nums}.down{color:#cf222e}.up{color:#1a7f37}
.note{color:#57606a;font-size:12px;margin:2px 0 8px}code{font-size:12px}\
svg text{font:11px system-ui,sans-serif;fill:#1b1f24}
ol.returned{margin:0;padding-left:20px}.gold{font-weight:600;color:#1a7f37}
"""


def num(value: Any, digits: int = 4) -> str:
    """A number to fixed digits, ``None`` as an em dash, anything else escaped."""
    if value is None:
        return "—"
    if isinstance(value, (int, float)):
        return f"{value:.{digits}f}"
    return escape(str(value))


def delta_cell(value: Any, n: int) -> str:
    """A signed change as a table cell, red down, green up; ``(<1/n)`` marks a change
    smaller than one question of ``n``."""
    if value is None:
        return '<td class="num">—</td>'
    if abs(value) < 1e-9:
        return '<td class="num">±0</td>'
    cls = "down" if value < 0 else "up"
    mark = one_query_mark(value, n)
    note = f" <span class=note>{escape(mark.strip())}</span>" if mark else ""
    return f'<td class="num {cls}">{value:+.4f}{note}</td>'


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A table from escaped headers and rows of ready ``<td>`` cells."""
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def page(title: str, body: str, css: str = "") -> str:
    """The whole document around ``body`` (already HTML), with the shared CSS and ``css`` after it."""
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        f"<meta name=viewport content='width=device-width,initial-scale=1'><title>{escape(title)}</title>"
        f"<style>{CSS}{css}</style></head><body>{body}</body></html>\n"
    )
