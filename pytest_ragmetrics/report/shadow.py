"""The shadow comparison as a self-contained HTML page (``ragmetrics shadow --html``).

It reads the plain dictionary ``ShadowReport.to_dict()`` gives (``_meta``, ``summary``,
``missing``, ``per_query`` most changed first), so this layer needs nothing from ``tools/``.
Same rules as every page of the package (:mod:`.html_parts`): inline CSS, no script,
nothing fetched, every text from the data escaped.
"""

from __future__ import annotations

from html import escape
from typing import Any, Mapping, Sequence

from pytest_ragmetrics.report.html_parts import num, page, table
from pytest_ragmetrics.report.tables import counted

__all__ = ["render_shadow_html"]

_CSS = ".new{font-weight:600;color:#8250df}.same{color:#57606a}"

#: RBO buckets of the distribution table: (label, low, high), high exclusive except for 1.
_BUCKETS = (("1 (identical order)", 1.0, 1.01), ("0.9 – 1", 0.9, 1.0), ("0.7 – 0.9", 0.7, 0.9),
            ("0.5 – 0.7", 0.5, 0.7), ("0.3 – 0.5", 0.3, 0.5), ("0 – 0.3", 0.0, 0.3))


def _ranked(docs: Sequence[str], other: set[str], new: set[str]) -> str:
    items = []
    for d in docs:
        cls = "new" if d in new else ("same" if d in other else "")
        items.append(f"<li class={cls}>{escape(d)}</li>" if cls else f"<li>{escape(d)}</li>")
    return f"<ol class=returned>{''.join(items)}</ol>" if items else "<span class=note>nothing returned</span>"


def _short(row: Mapping[str, Any], side: str) -> str:
    if side not in (row.get("short") or ()):
        return ""
    return f"<br><span class=note>short: {len(row[side.lower()])} returned</span>"


def _filters(filters: Any) -> str:
    if not filters:
        return ""
    return "<br><code>" + escape(", ".join(f"{k}={v}" for k, v in filters.items())) + "</code>"


def render_shadow_html(data: Mapping[str, Any], detailed: int = 20, title: str = "Shadow comparison") -> str:
    """The page: what was compared, the summary, the RBO distribution, the ``detailed``
    most-changed questions with both rankings side by side, then every question's numbers."""
    meta, s, rows = data["_meta"], data["summary"], data["per_query"]
    k, p = meta["k"], meta["rbo"]["p"]
    a, b = meta["a"], meta["b"]
    n = s["n"]
    parts = [f"<h1>{escape(title)}</h1>",
             f"<p class=meta>B = <b>{escape(b['name'])}</b> ({escape(b['kind'])} {escape(b['spec'])}) against "
             f"A = <b>{escape(a['name'])}</b> ({escape(a['kind'])} {escape(a['spec'])}); top {k}; "
             f"{counted(n, 'question')}{' from ' + escape(meta['questions']) if meta.get('questions') else ''}. "
             "No labels: these numbers say how much the rankings differ, not which one is better.</p>"]
    parts.append("<h2>Summary</h2>")
    parts.append(table(["measure", "value"], [
        [f"<td>mean overlap@{k}</td>", f"<td class=num>{num(s['mean_overlap'])}</td>"],
        [f"<td>mean RBO (RBO_ext, p = {p})</td>", f"<td class=num>{num(s['mean_rbo'])}</td>"],
        ["<td>median RBO</td>", f"<td class=num>{num(s['median_rbo'])}</td>"],
        [f"<td>share of B's top {k} that A never returned</td>",
         f"<td class=num>{num(s['new_share'])} ({s['new_in_b']} of {s['b_documents']})</td>"],
        ["<td>questions ranked identically</td>", f"<td class=num>{s['identical']} of {n}</td>"],
        [f"<td>questions where a side returned fewer than {k}</td>",
         f"<td class=num>{s.get('short', 0)} of {n}</td>"],
    ]))
    parts.append(f"<p class=note>overlap@{k}: documents in both top {k}, over the longer list. RBO: rank-biased "
                 f"overlap (Webber, Moffat and Zobel 2010), extrapolated (RBO_ext); agreement at depth d weighs "
                 f"p<sup>d-1</sup>, so the top ranks count most. One question is 1/{n} = {1 / max(n, 1):.3f} of "
                 "any share. A side marked <i>short</i> returned fewer than k documents: RBO_ext extrapolates a "
                 "short list's agreement, so questions are ordered by the lower of RBO and overlap@k.</p>")
    parts.extend(f"<p class=note>note: {escape(note)}</p>" for note in meta.get("notes") or ())
    counts = [sum(1 for r in rows if lo <= r["rbo"] < hi) for _, lo, hi in _BUCKETS]
    parts.append("<h2>RBO distribution</h2>")
    parts.append(table(["RBO", "questions", ""], [
        [f"<td>{escape(label)}</td>", f"<td class=num>{c}</td>",
         f"<td><svg width=200 height=12 role=img aria-label='{counted(c, 'question')}'><rect width="
         f"{200 * c / max(n, 1):.1f} height=12 fill='#8250df'/></svg></td>"]
        for (label, _, _), c in zip(_BUCKETS, counts)]))
    changed = [r for r in rows if r["a"] != r["b"]]
    parts.append(f"<h2>Most changed questions ({min(detailed, len(changed))} of {len(changed)} changed)</h2>")
    if changed:
        parts.append("<p class=note>Label these first. In B's list, <span class=new>purple</span>: A never returned "
                     "it; grey: in both top k.</p>")
        detail_rows = []
        for r in changed[:detailed]:
            in_a, in_b, new = set(r["a"]), set(r["b"]), set(r["new_in_b"])
            detail_rows.append([
                f"<td><code>{escape(r['qid'])}</code><br>{escape(r['query'])}{_filters(r.get('filters'))}</td>",
                f"<td class=num>{num(r['overlap'], 3)}</td>", f"<td class=num>{num(r['rbo'], 3)}</td>",
                f"<td>{_ranked(r['a'], in_b, set())}{_short(r, 'A')}</td>",
                f"<td>{_ranked(r['b'], in_a, new)}{_short(r, 'B')}</td>"])
        parts.append(table(["question", f"overlap@{k}", "RBO", f"A: {a['name']}", f"B: {b['name']}"], detail_rows))
    else:
        parts.append("<p>Every question is ranked identically.</p>")
    parts.append("<h2>Every question</h2>")
    parts.append(table(["qid", "question", f"overlap@{k}", "RBO", "new in B", "short"], [
        [f"<td><code>{escape(r['qid'])}</code></td>", f"<td>{escape(r['query'])}</td>",
         f"<td class=num>{num(r['overlap'], 3)}</td>", f"<td class=num>{num(r['rbo'], 3)}</td>",
         f"<td class=num>{len(r['new_in_b'])} of {len(r['b'])}</td>",
         f"<td>{escape(', '.join(r.get('short') or ()))}</td>"] for r in rows]))
    missing = data.get("missing") or {}
    for side, who in (("a", a), ("b", b)):
        if missing.get(side):
            parts.append(f"<p class=note>{escape(who['name'])} ranks nothing for "
                         f"{counted(len(missing[side]), 'question')}, "
                         f"not compared: {escape(', '.join(missing[side][:50]))}"
                         f"{' …' if len(missing[side]) > 50 else ''}</p>")
    return page(title, "".join(parts), _CSS)
