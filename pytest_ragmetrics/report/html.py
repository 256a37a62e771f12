"""A self-contained HTML report of a run artifact: verdict, tables, two charts.

Everything is inline (CSS and SVG; no script, font or image is fetched), so the
file opens offline and as a CI artifact; the page shell, CSS, cells and tables are
:mod:`.html_parts`'s, shared with the history page. Every text taken from the data
(query text, ids, tags, explanations) goes through ``html.escape``.

Input is the JSON run artifact (``docs/run-artifact.md``), so the plugin's
``--rag-html`` and the CLI's ``compare --html`` draw the same page.
"""

from __future__ import annotations

from html import escape
from typing import Any, Mapping, Sequence

from pytest_ragmetrics.errors import listed
from pytest_ragmetrics.report.html_parts import delta_cell, num, page, table
from pytest_ragmetrics.report.pooled import pooled_html
from pytest_ragmetrics.report.tables import counted, p_text, sample_size_note
from pytest_ragmetrics.report.text import changes_hint, retried_text, retriever_note

__all__ = ["render_html"]


def _delta_chart(deltas: Sequence[tuple[str, float]], metric: str) -> str:
    """One bar per query (sorted), red below zero, green above."""
    if not deltas:
        return "<p class=note>No query is in both the run and the baseline.</p>"
    width, height, pad = 1040, 220, 30
    bar = max(1.0, (width - 2 * pad) / len(deltas))
    span = max(1e-9, max(abs(d) for _, d in deltas))
    mid = height / 2
    parts = [f'<svg role="img" aria-label="per-query delta of {escape(metric)}" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}">',
             f'<line x1="{pad}" y1="{mid}" x2="{width - pad}" y2="{mid}" stroke="#8c959f"/>',
             f'<text x="2" y="14">+{span:.2f}</text><text x="2" y="{height - 4}">-{span:.2f}</text>']
    for i, (qid, d) in enumerate(deltas):
        h = abs(d) / span * (mid - 10)
        y = mid - h if d > 0 else mid
        color = "#cf222e" if d < 0 else ("#1a7f37" if d > 0 else "#8c959f")
        parts.append(f'<rect x="{pad + i * bar:.2f}" y="{y:.2f}" width="{max(bar - 0.5, 0.5):.2f}" '
                     f'height="{max(h, 0.5):.2f}" fill="{color}"><title>{escape(qid)}: {d:+.4f}</title></rect>')
    parts.append("</svg>")
    return "".join(parts)


def _strata_chart(strata: Mapping[str, Any], metric: str) -> str:
    """Grouped bars per tag: baseline (grey) and now (blue), on a 0–1 scale."""
    tags = [t for t, s in strata.items() if s.get("now", {}).get(metric) is not None]
    if not tags:
        return ""
    row_h, label_w, scale_w = 34, 160, 700
    height = row_h * len(tags) + 24
    parts = [f'<svg role="img" aria-label="{escape(metric)} per tag" width="{label_w + scale_w + 80}" '
             f'height="{height}">']
    for i, tag in enumerate(tags):
        y = 10 + i * row_h
        s = strata[tag]
        now = s["now"].get(metric)
        base = (s.get("baseline") or {}).get(metric)
        parts.append(f'<text x="0" y="{y + 15}">{escape(tag)} (n={int(s.get("n", 0))})</text>')
        if base is not None:
            parts.append(f'<rect x="{label_w}" y="{y}" width="{base * scale_w:.1f}" height="11" fill="#afb8c1">'
                         f'<title>baseline {base:.4f}</title></rect>')
        parts.append(f'<rect x="{label_w}" y="{y + 12}" width="{now * scale_w:.1f}" height="11" fill="#0969da">'
                     f'<title>now {now:.4f}</title></rect>')
        parts.append(f'<text x="{label_w + scale_w + 6}" y="{y + 21}">{now:.3f}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _strata_table(strata: Mapping[str, Any], metrics: Sequence[str], by: str) -> str:
    """A breakdown's table (per tag, per source) from the artifact's verdict: n, each metric and its change."""
    rows = []
    for tag, s in strata.items():
        row = [f"<td>{escape(tag)}</td>", f'<td class="num">{int(s.get("n", 0))}</td>']
        for m in metrics:
            now_v, base_v = s.get("now", {}).get(m), (s.get("baseline") or {}).get(m)
            row.append(f'<td class="num">{num(now_v)}</td>')
            cell = delta_cell(None if now_v is None or base_v is None else now_v - base_v, int(s.get("n", 0)))
            p_value = ((s.get("stats") or {}).get(m) or {}).get("p_value")
            if p_value is not None and "±0" not in cell and "—" not in cell:
                cell = cell.replace("</td>", f" <span class=note>p={escape(p_text(p_value))}</span></td>")
            row.append(cell)
        rows.append(row)
    return table([by, "n"] + [h for m in metrics for h in (m, "Δ")], rows) if rows else ""


_QUERY_HEADERS = ["#", "query", "question", "fell", "gold", "returned instead"]


def _query_rows(entries: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    """Rows of a query list (regressed or moved) from the artifact's verdict entries."""
    rows = []
    for i, r in enumerate(entries, start=1):
        golds = {g[0] for g in r.get("gold", [])}
        drops = "<br>".join(
            f"{escape(d['metric'])} {d['baseline']:.4f} → {d['now']:.4f} ({d['delta']:+.4f})"
            + ("" if d.get("exceeded") else " <span class=note>"
               + ("not gated" if d.get("tolerance") is None else "within tolerance") + "</span>")
            for d in r.get("drops", []))
        returned = "".join(
            f"<li{' class=gold' if doc in golds else ''}>{escape(doc)}"
            + (f" <span class=note>{escape(str(why))}</span>" if why else "") + "</li>"
            for doc, why in zip(r.get("returned", [])[:5], (r.get("explains") or []) + [None] * 5))
        rows.append([
            f'<td class="num">{i}</td>', f"<td><code>{escape(r['qid'])}</code></td>",
            f"<td>{escape(r['question'])}"
            + (f" <span class=note>filters {escape(_mapping_text(r['filters']))}</span>" if r.get("filters") else "")
            + "</td>",
            f"<td>{drops or escape(r.get('error') or '')}</td>",
            f"<td>{', '.join(f'{escape(d)} ({int(g)})' for d, g in r.get('gold', []))}</td>",
            f"<td><ol class=returned>{returned}</ol></td>",
        ])
    return rows


def _mapping_text(value: Any) -> str:
    """A filters, scope or metadata mapping from the artifact as one line (anything else as it is)."""
    from pytest_ragmetrics.scope import scope_text

    return scope_text(value) if isinstance(value, Mapping) else str(value)


def _leaks_section(leaks: Any) -> str:
    """Every returned document outside its query's scope: the document, its metadata, the scope."""
    if not leaks:
        return ""
    rows = [[f"<td><code>{escape(str(leak.get('qid')))}</code></td>",
             f"<td>{escape(str(leak.get('question')))}</td>",
             f"<td>{escape(_mapping_text(leak.get('filters'))) if leak.get('filters') else '—'}</td>",
             f"<td>{escape(_mapping_text(leak.get('scope')))}</td>",
             f'<td class="num">{escape(str(d.get("rank")))}</td>',
             f"<td><code>{escape(str(d.get('doc')))}</code></td>",
             f"<td>{escape(_mapping_text(d.get('metadata')))}</td>"]
            for leak in leaks for d in leak.get("docs", [])]
    return ("<h2>Leaks</h2><p class=note>Returned documents outside their query's scope. Zero tolerance: no "
            "threshold allows a leak.</p>"
            + table(["query", "question", "filters", "scope", "rank", "document", "metadata"], rows))


def render_html(artifact: Mapping[str, Any], metric: str | None = None, title: str = "Retrieval evaluation",
                texts: Mapping[str, str] | None = None) -> str:
    """The whole page for one run artifact; ``metric`` picks the charted metric; ``texts`` (document
    id -> text, when the corpus is known) gives a pooled set's documents to judge a snippet."""
    meta = artifact.get("_meta", {})
    comparison = artifact.get("comparison", {})
    per_query = artifact.get("per_query", {})
    metrics = list(meta.get("measurement", {}).get("metrics", [])) or list(artifact.get("aggregate", {}))
    failing = [g.get("name") for g in comparison.get("gates", []) if not g.get("passed")]
    # chart what failed: a reranker bug moves MRR and nDCG, and a recall chart would show nothing
    metric = metric or next((m for m in failing if m in metrics), None) or (metrics[0] if metrics else "")
    n = int(comparison.get("n_common") or artifact.get("n") or 0)

    failures = comparison.get("failures")
    if failures is None:  # an artifact written before failures were recorded
        failures = [f"gate {g['name']}: {g['message']}" for g in comparison.get("gates", []) if not g.get("passed")]
    if failures:
        cls = "fail" if comparison.get("passed") is False else "warn"
        banner = "Gate failed: " + "; ".join(failures)
    else:
        cls, banner = "pass", f"All gates passed ({len(comparison.get('gates', []))} checked)."

    agg_rows = []
    for row in comparison.get("aggregate", []):
        stats = row.get("stats") or {}
        ci = stats.get("ci95")
        agg_rows.append([
            f"<td>{escape(row['metric'])}</td>", f'<td class="num">{num(row.get("baseline"))}</td>',
            f'<td class="num">{num(row.get("now_common") if row.get("baseline") is not None else row.get("now"))}</td>',
            delta_cell(row.get("delta"), n),
            f'<td class="num">{"—" if not ci else f"[{ci[0]:+.4f}, {ci[1]:+.4f}]"}</td>',
            f'<td class="num">{escape(p_text(stats.get("p_value")))}</td>',
            f'<td class="num">{num(stats.get("detectable"))}</td>',
            f"<td>{'—' if row.get('tolerance') is None else escape(format(row['tolerance'], 'g'))}</td>",
            f"<td>{'—' if row.get('min') is None else escape(format(row['min'], 'g'))}</td>",
        ])
    aggregate = table(["metric", "baseline", "now", "delta", "95% CI", "p", "detectable", "allowed drop", "floor"],
                       agg_rows)
    note = sample_size_note(n, empty="n = 0: nothing was compared.")

    deltas = []
    for qid, entry in per_query.items():
        now = (entry.get("metrics") or {}).get(metric)
        base = (entry.get("baseline") or {}).get(metric)
        if entry.get("status") == "error" and base is not None:
            now = 0.0
        if now is not None and base is not None:
            deltas.append((qid, now - base))
    deltas.sort(key=lambda p: (p[1], p[0]))

    strata = comparison.get("strata", {})
    strata_table = _strata_table(strata, metrics, "tag")
    by_source = comparison.get("sources")
    sources_table = _strata_table(by_source, metrics, "source") if isinstance(by_source, Mapping) else ""
    if sources_table:
        sources_table = ("<h2>Per source</h2><p class=note>Each source of questions has its bias: harvested "
                         "questions are failures someone already saw.</p>" + sources_table)
    harvested = comparison.get("harvested")
    harvested_banner = f"<div class='banner warn'>{escape(str(harvested))}</div>" if harvested else ""
    retried = retried_text(meta.get("shards"))  # a merge of shards, some of them re-run
    if retried:
        harvested_banner = f"<div class='banner warn'>{escape(retried)}</div>" + harvested_banner

    limit = int(meta.get("worst_n", 0) or 25)
    worst_rows = _query_rows(comparison.get("regressed", [])[:limit])
    worst = (table(_QUERY_HEADERS, worst_rows) if worst_rows
             else "<p>No query fell beyond its per-query tolerance.</p>")
    moved_entries = comparison.get("moved") or []
    if moved_entries:
        if not worst_rows:
            worst = "<p>No query regressed beyond its per-query tolerance.</p>"
        worst += (f"<h2>Queries that moved {escape(', '.join(comparison.get('moved_metrics') or []))} most</h2>"
                  f"<p class=note>Within their per-query tolerance, largest drop first "
                  f"({min(limit, len(moved_entries))} of {len(moved_entries)}).</p>"
                  + table(_QUERY_HEADERS, _query_rows(moved_entries[:limit])))

    parents = ""
    parent_level = comparison.get("parent_level")
    if parent_level:
        parent_rows = []
        for m, row in parent_level.get("metrics", {}).items():
            missed = row.get("chunk_hit_parent_missed", [])
            parent_rows.append([
                f"<td>{escape(m)}</td>", f'<td class="num">{num(row.get("chunk"))}</td>',
                f'<td class="num">{num(row.get("parent"))}</td>', f'<td class="num">{len(missed)}</td>',
                f"<td>{escape(listed(missed))}</td>",
            ])
        scored = counted(int(parent_level.get('n', 0)), 'scored query', 'scored queries')
        parents = (f"<h2>Parent-chunk hit rate</h2><p class=note>{scored} "
                   "returned parent ids; the parent is what the generator receives.</p>"
                   + table(["metric", "chunk level", "parent level", "chunk hit, parent missed", "queries"],
                            parent_rows))

    changed = _retriever_section(comparison)
    labels = _labels_section(comparison.get("stale_labels"))
    pooled = pooled_html(artifact, texts)
    no_answer = _no_answer_section(comparison.get("no_answer"))

    golden = meta.get("golden", {})
    head = (f"golden set <code>{escape(str(golden.get('source', '?')))}</code> "
            f"({counted(int(golden.get('n_queries', 0)), 'query', 'queries')}, "
            f"subset {escape(str(meta.get('subset', 'full')))}) · metrics {escape(' '.join(metrics))} · "
            f"k {escape(str(meta.get('k', '?')))} · version {escape(str(meta.get('package_version', '?')))} · "
            f"commit {escape(str(meta.get('git_commit') or '—'))[:12]} · {escape(str(meta.get('created', '')))}")
    return page(
        title,
        f"<h1>{escape(title)}</h1><div class=meta>{head}</div>"
        f"<div class='banner {cls}'>{escape(banner)}</div>{harvested_banner}{changed}"
        f"{_leaks_section(comparison.get('leaks'))}"
        f"<h2>Aggregate</h2>{aggregate}<p class=note>{escape(note)}</p>"
        f"<h2>Per-query change in {escape(metric)}</h2>{_delta_chart(deltas, metric)}"
        f"<p class=note>{counted(len(deltas), 'query', 'queries')}, sorted by change; hover a bar for its query.</p>"
        f"<h2>Per tag</h2><p class=note>{escape(metric)}: grey bar baseline, blue bar now.</p>"
        f"{_strata_chart(strata, metric)}{strata_table}{sources_table}{parents}{no_answer}{labels}{pooled}"
        f"<h2>Worst regressed queries</h2>{worst}",
        _CSS,
    )


def _threshold(value: Any) -> str:
    return "none" if value is None else f"{value:g}"


def _no_answer_section(na: Any) -> str:
    """The questions marked answerable: false: their false-retrieval rate, and the threshold
    trade-off as a chart (recall blue, false-retrieval rate red, the threshold in force marked)."""
    if not isinstance(na, Mapping):
        return ""
    rate, base = na.get("false_retrieval_rate"), na.get("baseline")
    out = (f"<h2>Questions with no answer</h2><p>{counted(int(na.get('n', 0)), 'question', 'questions')} marked "
           f"answerable: false, scored by false retrieval outside the other means: false_retrieval_rate "
           f"<b>{num(rate)}</b>" + (f" (baseline {num(base)})" if base is not None else "")
           + f"; answer threshold {escape(_threshold(na.get('answer_threshold')))}. Lower is better.</p>")
    if na.get("retrieved"):
        out += f"<p class=note>Got a result counted as an answer: {escape(listed(na['retrieved']))}</p>"
    rows = [r for r in na.get("tradeoff") or [] if isinstance(r, Mapping)]
    if not rows:
        return out
    k = na.get("k")
    out += (f"<h2>Answer threshold trade-off</h2><p class=note>From this run's scores: recall@{escape(str(k))} of the "
            "answerable questions keeping only results scoring at or above the threshold (blue), and the "
            "false-retrieval rate (red). The threshold in force is marked; pick rag_answer_threshold here.</p>")
    width, height, pad = 720, 240, 40
    step = (width - 2 * pad) / max(1, len(rows) - 1)

    def y(v: float) -> float:
        return height - pad - v * (height - 2 * pad)

    parts = [f'<svg role="img" aria-label="answer threshold trade-off" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}">',
             f'<line x1="{pad}" y1="{y(0)}" x2="{width - pad}" y2="{y(0)}" stroke="#8c959f"/>',
             f'<text x="2" y="{y(1) + 4}">1</text><text x="2" y="{y(0) + 4}">0</text>']
    for key, color in (("recall", "#0969da"), ("false_retrieval_rate", "#cf222e")):
        points = [(pad + i * step, y(r[key])) for i, r in enumerate(rows) if r.get(key) is not None]
        if points:
            parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="'
                         + " ".join(f"{px:.1f},{py:.1f}" for px, py in points) + '"/>')
    for i, r in enumerate(rows):
        x = pad + i * step
        label = escape(_threshold(r.get("threshold")))
        if r.get("in_force"):
            parts.append(f'<line x1="{x:.1f}" y1="{pad - 10}" x2="{x:.1f}" y2="{y(0)}" stroke="#1a7f37" '
                         f'stroke-dasharray="4 3"><title>in force: {label}</title></line>'
                         f'<text x="{x + 4:.1f}" y="{pad - 14}" fill="#1a7f37">in force</text>')
        parts.append(f'<text x="{x:.1f}" y="{height - pad + 16}" text-anchor="middle">{label}</text>')
    parts.append("</svg>")
    body = [[f"<td>{escape(_threshold(r.get('threshold')))}{' (in force)' if r.get('in_force') else ''}</td>",
             f'<td class="num">{num(r.get("recall"))}</td>',
             f'<td class="num">{num(r.get("false_retrieval_rate"))}</td>'] for r in rows]
    return out + "".join(parts) + table(["threshold", f"recall@{k}", "false_retrieval_rate"], body)


_CSS = ".changed{background:#fff8c5;border:1px solid #d4a72c;border-radius:6px;padding:2px 14px;margin:0 0 16px}"


def _labels_section(ages: Any) -> str:
    """Stale and undated records under the label age limits ("" when none is set or none is listed)."""
    if not isinstance(ages, Mapping) or not (ages.get("stale") or ages.get("undated")):
        return ""
    rows = [[f"<td>{escape(str(r.get('qid')))}</td>", f"<td>{'stale' if r.get('oldest') else 'undated'}</td>",
             f"<td>{escape(str(r.get('oldest') or '—'))}</td>",
             f'<td class="num">{escape(str(r.get("age_days") if r.get("age_days") is not None else "—"))}</td>',
             f'<td class="num">{escape(str(r.get("limit_days")))}</td>', f"<td>{escape(str(r.get('limit_key')))}</td>"]
            for r in [*ages.get("stale", []), *ages.get("undated", [])]]
    limits = ", ".join(f"{k} {v}" for k, v in (ages.get("limits") or {}).items())
    return (f"<h2>Label ages</h2><p class=note>{len(ages.get('stale', []))} of {ages.get('checked')} records stale, "
            f"{len(ages.get('undated', []))} undated ({escape(limits)}; today {escape(str(ages.get('today')))} UTC)"
            "</p>" + table(["query", "state", "oldest label", "age (days)", "limit (days)", "from"], rows))


def _retriever_section(comparison: Mapping[str, Any]) -> str:
    """The retriever settings that differ from the baseline's, in the terminal's words, under the
    banner (a failed run leads with the terminal's hint); "" when none differ or none were recorded."""
    changes = comparison.get("retriever_changes")
    note = retriever_note([str(c) for c in changes] if isinstance(changes, list) else [])
    if note is None:
        return ""
    hint = changes_hint(note.changes) if comparison.get("passed") is False else None
    return ("<div class=changed>" + (f"<p><strong>{escape(hint)}</strong></p>" if hint else "")
            + f"<p>{escape(note.head)}</p><ul>" + "".join(f"<li><code>{escape(c)}</code></li>" for c in note.changes)
            + "</ul>" + (f"<p class=note>{escape(note.advice)}</p>" if note.advice else "") + "</div>")
