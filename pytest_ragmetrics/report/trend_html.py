"""A self-contained HTML page of a history of run artifacts: one line chart per metric.

Drawn from the JSON of ``ragmetrics history --format json``. Per group of runs
measured alike: the runs table, an inline SVG line chart per metric over time
(baseline refreshes and retriever changes marked, drift windows shaded), per-tag
small multiples, the drift found and the flaky queries. Built from
:mod:`.html_parts` under the same rules as the run report: inline CSS and SVG, no
script, nothing fetched, every text from an artifact through ``html.escape``.
"""

from __future__ import annotations

from html import escape
from typing import Any, Mapping, Sequence

from pytest_ragmetrics.errors import listed
from pytest_ragmetrics.report.history import (
    DRIFT_RULE,
    FLAKY_RULE,
    drift_line,
    gate_label,
    judged_cells,
    judged_headers,
    measured_line,
    no_answer_shown,
    stale_cell,
    timeline_marks,
)
from pytest_ragmetrics.report.html_parts import delta_cell, num, page, table
from pytest_ragmetrics.report.tables import counted, sample_size_note

__all__ = ["render_trend_html", "line_chart"]

_CSS = """
td.when{white-space:nowrap}.multiples{display:flex;flex-wrap:wrap;gap:8px;margin:4px 0 12px}\
.multiples figure{margin:0;border:1px solid #d0d7de;
border-radius:4px;padding:4px 6px}figcaption{font-size:12px;color:#57606a}.legend span{margin-right:14px}
.swatch{display:inline-block;width:18px;height:10px;vertical-align:middle;margin-right:4px}
"""

_LINE, _REFRESH, _RETRIEVER, _DRIFT = "#0969da", "#1a7f37", "#8250df", "#ffcecb"


def _short(created: str) -> str:
    return escape(created[:16].replace("T", " "))


def line_chart(runs: Sequence[Mapping[str, Any]], values: Sequence[float | None], label: str, *,
               drift: Sequence[tuple[int, int, str]] = (), width: int = 1040, height: int = 230,
               small: bool = False) -> str:
    """An SVG line chart of ``values`` (one per run, ``None`` for a gap) over ``runs``.

    The y axis spans the values (padded, within [0, 1]) so a slow slide is visible;
    its bounds are printed. A green dashed line marks a baseline refresh (between the
    run before and the run that starts the new period), a purple dotted line a
    retriever change, a red band each drift window ``(start index, end index, note)``.
    """
    pad_l, pad_r, pad_t, pad_b = (34, 8, 8, 16) if small else (52, 16, 18, 34)
    plot_w, plot_h = width - pad_l - pad_r, height - pad_t - pad_b
    n = len(runs)
    known = [v for v in values if v is not None]
    if not known:
        return f"<p class=note>No value of {escape(label)} in these runs.</p>"
    mid, span = (min(known) + max(known)) / 2, max(max(known) - min(known), 0.05) * 1.3  # 15% room each side
    lo, hi = mid - span / 2, mid + span / 2
    if hi > 1.0:  # slide the span back inside [0, 1] rather than squash it
        lo, hi = lo - (hi - 1.0), 1.0
    if lo < 0.0:
        lo, hi = 0.0, min(1.0, hi - lo)
    step = plot_w / (n - 1) if n > 1 else 0.0

    def x(i: int) -> float:  # i: 0-based position
        return pad_l + (i * step if n > 1 else plot_w / 2)

    def y(v: float) -> float:
        return pad_t + (hi - v) / (hi - lo) * plot_h

    index = {int(r["index"]): i for i, r in enumerate(runs)}
    parts = [f'<svg role="img" aria-label="{escape(label)} over {n} runs" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}">']
    for start, end, note in drift:
        if start in index and end in index:
            x0, x1 = x(index[start]), x(index[end])
            parts.append(f'<rect class="drift" x="{x0:.1f}" y="{pad_t}" width="{max(x1 - x0, 2):.1f}" '
                         f'height="{plot_h}" fill="{_DRIFT}"><title>{escape(note)}</title></rect>')
    for tick in (lo, hi) if small else (lo, (lo + hi) / 2, hi):
        parts.append(f'<line x1="{pad_l}" y1="{y(tick):.1f}" x2="{width - pad_r}" y2="{y(tick):.1f}" stroke="#eaeef2"/>'
                     f'<text x="2" y="{y(tick) + 4:.1f}">{tick:.3f}</text>')
    for i, r in enumerate(runs):
        xm = x(i) - step / 2 if i else x(i)
        if r.get("refresh"):
            parts.append(f'<line class="refresh" x1="{xm:.1f}" y1="{pad_t}" x2="{xm:.1f}" y2="{pad_t + plot_h}" '
                         f'stroke="{_REFRESH}" stroke-width="2" stroke-dasharray="6 3"><title>#{r["index"]}: '
                         f'baseline refreshed: {escape(str(r["refresh"]))}</title></line>')
        if r.get("retriever_changes"):
            parts.append(f'<line class="retriever" x1="{xm + 3:.1f}" y1="{pad_t}" x2="{xm + 3:.1f}" '
                         f'y2="{pad_t + plot_h}" stroke="{_RETRIEVER}" stroke-width="2" stroke-dasharray="2 3">'
                         f'<title>#{r["index"]}: retriever changed: '
                         f'{escape("; ".join(map(str, r["retriever_changes"])))}</title></line>')
    line: list[str] = []
    for i, v in enumerate(values):
        if v is None:
            if len(line) > 1:
                parts.append(f'<polyline fill="none" stroke="{_LINE}" stroke-width="2" points="{" ".join(line)}"/>')
            line = []
            continue
        line.append(f"{x(i):.1f},{y(v):.1f}")
    if len(line) > 1:
        parts.append(f'<polyline fill="none" stroke="{_LINE}" stroke-width="2" points="{" ".join(line)}"/>')
    every = max(1, n // (8 if small else 20))
    for i, (r, v) in enumerate(zip(runs, values)):
        if v is not None:
            parts.append(f'<circle cx="{x(i):.1f}" cy="{y(v):.1f}" r="{2.5 if small else 3.5}" fill="{_LINE}">'
                         f'<title>#{r["index"]} {_short(str(r["created"]))}: {escape(label)} {v:.4f}</title></circle>')
        if not small and (i % every == 0 or i == n - 1):
            parts.append(f'<text x="{x(i):.1f}" y="{height - 18}" text-anchor="middle">#{r["index"]}</text>')
    if not small:
        parts.append(f'<text x="{pad_l}" y="{height - 4}">{_short(str(runs[0]["created"]))}</text>'
                     f'<text x="{width - pad_r}" y="{height - 4}" text-anchor="end">'
                     f'{_short(str(runs[-1]["created"]))}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _runs_table(group: Mapping[str, Any]) -> str:
    metrics = group["metrics"]
    n = group["runs"][-1]["n"]
    commits = any(r.get("git_commit") for r in group["runs"])  # a project outside git records none
    aged = any(r.get("stale_labels") for r in group["runs"])  # a column only when a night aged its labels
    pooled = any(r.get("pooled") for r in group["runs"])  # likewise when a night's golden set was pooled
    shown = no_answer_shown(group)  # questions marked answerable: false: their count and false-retrieval rate
    rows = []
    for r in group["runs"]:
        row = [f'<td class="num" title="{escape(str(r["path"]))}">#{r["index"]}</td>',
               f"<td class=when>{_short(str(r['created']))}</td>"]
        if commits:
            row.append(f"<td><code>{escape(str(r.get('git_commit') or '—')[:7])}</code></td>")
        for m in metrics:
            row.append(f'<td class="num">{num(r["aggregate"].get(m))}</td>')
            cell = delta_cell(r["delta"].get(m), n)
            if m in r["beyond"]:
                cell = cell.replace("</td>", " <b title='fell more than the allowed drop in one step'>!</b></td>")
            row.append(cell)
        v = r["verdicts"]
        row.append(f"<td>{gate_label(r)}</td><td class=num>{v['ok']}/{v['regressed']}/{v['error']}</td>")
        marks = [(letter, text) for letter, text in zip("RC", (r.get("refresh"), r.get("retriever_changes"))) if text]
        row.append("<td>" + " ".join(f"<b title='{escape(line)}'>{letter}</b>"
                                     for (letter, _), line in zip(marks, timeline_marks(r))) + "</td>")
        if aged:
            row.append(f"<td class=num>{escape(stale_cell(r.get('stale_labels')))}</td>")
        if pooled:
            row += [f"<td class=num>{escape(c)}</td>" for c in judged_cells(r.get("pooled"))]
        if shown:
            row.append(f'<td class="num">{int(r.get("no_answer") or 0)}</td>'
                       f'<td class="num">{num(r.get("false_retrieval_rate"))}</td>')
        rows.append(row)
    headers = ["run", "created"] + ["commit"] * commits + [h for m in metrics for h in (m, "Δ")] + \
              ["gate", "ok/regr/err", "marks"] + ["stale labels"] * aged + judged_headers(group) * pooled + \
              ["no answer", "false_retrieval_rate"] * shown
    return table(headers, rows)


def _flaky_table(group: Mapping[str, Any]) -> str:
    rows = []
    for f in group["flaky"]:
        flips = "<br>".join(f"#{x['run']} {_short(str(x['created']))}: {escape(str(x['before']))} → "
                            f"{escape(str(x['after']))}" for x in f["flips"])
        rows.append([f"<td><code>{escape(str(f['qid']))}</code></td>", f'<td class="num">{f["n_flips"]}</td>',
                     f'<td class="num">{f["runs"]}</td>', f"<td>{flips}</td>"])
    return table(["query", "changes", "runs", "changes: run, before → after"], rows)


def _group_html(group: Mapping[str, Any], min_flips: int) -> str:
    runs = group["runs"]
    metrics = group["metrics"]
    out = [f"<h2>Group {int(group['group'])}: {counted(len(runs), 'run')}</h2>",
           f"<p class=meta>Measured: {escape(measured_line(group['measured']))}<br>"
           f"Files: {escape(listed([str(r['path']) for r in runs]))}</p>"]
    if group["differs"]:
        out.append("<p class='banner warn'>Not comparable with group 1, so never in its series: "
                   + "; ".join(escape(str(d)) for d in group["differs"]) + "</p>")
    out.append(_runs_table(group))
    out.append(f"<p class=note>Δ: change from the run before; ! fell more than the allowed drop in one step (the "
               f"gate's to judge). Marks: R baseline refreshed, C retriever changed. "
               f"{escape(sample_size_note(runs[-1]['n']))}</p>")
    marks = [f"<li>#{int(r['index'])} {_short(str(r['created']))}: {escape(line)}</li>"
             for r in runs for line in timeline_marks(r)]
    if marks:
        out.append(f"<h3>Timeline</h3><ul>{''.join(marks)}</ul>")
    if len(runs) < 2:  # nothing to draw over time: the run's means per tag, as a table
        if group["tags"]:
            rows = [[f"<td>{escape(tag)}</td>", f'<td class="num">{int(runs[0]["tags"][tag]["n"])}</td>']
                    + [f'<td class="num">{num(runs[0]["tags"][tag]["means"].get(m))}</td>' for m in metrics]
                    for tag in group["tags"] if tag in runs[0]["tags"]]
            out.append("<h3>Per tag</h3>" + table(["tag", "n", *metrics], rows))
        out.append("<p class=note>One run: no series to chart, and no drift or flaky query to find.</p>")
        return "".join(out)
    drift = group["drift"]
    if drift:
        cls = "fail" if any(d.get("current") for d in drift) else "warn"  # an answered drift is history
        out.append(f"<div class='banner {cls}'>" + "<br>".join(escape("DRIFT " + drift_line(d)) for d in drift)
                   + "</div>")
    out.append("<p class='note legend'>"
               f"<span><span class=swatch style='background:{_LINE}'></span>mean of the run</span>"
               f"<span><span class=swatch style='border-top:3px dashed {_REFRESH}'></span>baseline refreshed</span>"
               f"<span><span class=swatch style='border-top:3px dotted {_RETRIEVER}'></span>retriever changed</span>"
               f"<span><span class=swatch style='background:{_DRIFT}'></span>drift</span></p>")
    for m in metrics:
        windows = [(d["start"], d["end"], drift_line(d)) for d in drift if d["metric"] == m]
        out.append(f"<h3>{escape(m)}</h3>")
        out.append(line_chart(runs, [r["aggregate"].get(m) for r in runs], m, drift=windows))
        if group["tags"]:
            figures = []
            for tag in group["tags"]:
                series = [(r["tags"].get(tag) or {}).get("means", {}).get(m) for r in runs]
                n = (runs[-1]["tags"].get(tag) or {}).get("n", "—")
                figures.append(f"<figure>{line_chart(runs, series, f'{m} {tag}', width=250, height=110, small=True)}"
                               f"<figcaption>{escape(tag)} (n={escape(str(n))})</figcaption></figure>")
            out.append(f"<p class=note>{escape(m)} per tag:</p><div class=multiples>{''.join(figures)}</div>")
    if no_answer_shown(group):
        out.append("<h3>false_retrieval_rate</h3><p class=note>Questions marked answerable: false that got a result "
                   "counted as an answer (lower is better; outside n and the means above).</p>")
        out.append(line_chart(runs, [r.get("false_retrieval_rate") for r in runs], "false_retrieval_rate"))
    out.append("<h3>Flaky queries</h3>")
    if group["flaky"]:
        out.append(_flaky_table(group))
    else:
        out.append(f"<p>No query changed verdict {counted(min_flips, 'time')} or more.</p>")
    return "".join(out)


def render_trend_html(data: Mapping[str, Any], title: str = "Retrieval history") -> str:
    """The whole page for the JSON of ``ragmetrics history``."""
    groups = data["groups"]
    min_flips = int(data.get("min_flips", 2))
    if data.get("current_drift"):
        cls, banner = "fail", "Drift flagged in the latest baseline period."
    elif data.get("drift_flagged"):
        cls, banner = "warn", "Drift flagged earlier; none in the latest baseline period."
    else:
        cls, banner = "pass", "No drift flagged."
    skipped = "".join(f"<li><code>{escape(str(s['path']))}</code>: {escape(str(s['problem']))}</li>"
                      for s in data.get("skipped") or [])
    head = (f"{counted(int(data['n_artifacts']), 'run artifact')} in {counted(len(groups), 'group')}"
            + (" measured differently (never mixed in one series)" if len(groups) > 1 else ""))
    return page(
        title,
        f"<h1>{escape(title)}</h1><div class=meta>{escape(head)}</div>"
        f"<div class='banner {cls}'>{escape(banner)}</div>"
        + (f"<p>Skipped:</p><ul>{skipped}</ul>" if skipped else "")
        + "".join(_group_html(g, min_flips) for g in groups)
        + f"<h2>Rules</h2><p class=note>{escape(DRIFT_RULE)}.</p><p class=note>"
        f"{escape(FLAKY_RULE)}; a query is listed from {counted(min_flips, 'change')}.</p>",
        _CSS,
    )
