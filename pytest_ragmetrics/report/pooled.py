"""The report's part on a pooled golden set: how far its judgments reach, the two bounds of
each gated metric, and the inconclusive queries with the documents that would decide them."""

from __future__ import annotations

from html import escape
from typing import Any, Mapping

from pytest_ragmetrics.errors import shown
from pytest_ragmetrics.gate.gates.unjudged import fix_command
from pytest_ragmetrics.gate.verdict import Verdict
from pytest_ragmetrics.report.html_parts import num, table
from pytest_ragmetrics.report.tables import counted, escape_cell, markdown_table

__all__ = ["pooled_text", "pooled_markdown", "pooled_html", "pooled_counts", "NEEDS_TOP", "snippet"]

#: Said once when the baseline predates ``_top``.
NEEDS_TOP = ("new unjudged documents cannot be told from old ones: the baseline was written before it recorded "
             "each query's top k (_top), so every unjudged document counts as new; a baseline refresh "
             "(--rag-update-baseline) adds _top")


def snippet(text: str, width: int = 100) -> str:
    """A document's text on one line, cut to ``width`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def pooled_text(v: Verdict, k: int, texts: Mapping[str, str] | None = None, lacks_top: bool = False,
                artifact: str | None = None, golden: str | None = None) -> str:
    """Judged@k and unjudged_new@k, the bounds table when judged@k < 1, and each inconclusive
    query's unjudged documents (with a snippet of their text when the corpus is known)."""
    judged = "—" if v.judged is None else f"{v.judged:.4f}"
    new = "not known" if v.unjudged_new is None else str(v.unjudged_new)
    lines = [f"Judgments: pooled (documents the golden set does not list are unjudged). judged@{k} = {judged} "
             f"(share of the top {k} that carries a judgment); unjudged_new@{k} = {new} (unjudged documents in the "
             f"top {k} that were not in the baseline's top {k})."]
    if lacks_top:
        lines.append(f"NOTE: {NEEDS_TOP}.")
    gated = [r for r in v.aggregate if r.gated]
    if v.judged is not None and v.judged < 1 and gated:
        rows = [[r.metric, r.now, v.upper.get(r.metric)] for r in gated]
        lines += ["", "Bounds of the gated metrics (mean over the scored queries):",
                  markdown_table(["metric", "unjudged = 0 (now)", "unjudged at the top grade"], rows)]
    if v.inconclusive:
        lines += ["", f"Inconclusive queries ({len(v.inconclusive)}): they fell beyond tolerance, but not if their "
                      "unjudged documents are relevant; judge these documents to decide them:"]
        for i, r in enumerate(v.inconclusive, start=1):
            lines.append(f"{i:>3}. {shown(r.qid)}  {shown(repr(r.question))}")
            for d in r.drops:
                if d.exceeded:
                    lines.append(f"       {d.metric}  {d.before:.4f} -> {d.after:.4f}  "
                                 f"beyond tolerance {d.tolerance:g}")
            for doc in r.unjudged:
                text = texts.get(doc) if texts else None
                lines.append(f"       unjudged: {shown(doc)}" + (f"  {shown(repr(snippet(text)))}" if text else ""))
    if v.to_judge:
        lines += ["", _then(len(v.to_judge), fix_command(artifact, golden))]
    return "\n".join(lines)


def _intro(judged: float | None, new: int | None, k: int) -> str:
    return (f"judged@{k} = {'—' if judged is None else f'{judged:.4f}'} (share of the top {k} that carries a "
            f"judgment); unjudged_new@{k} = {'not known' if new is None else new} (unjudged documents in the top {k} "
            f"that were not in the baseline's top {k}).")


def _then(n: int, command: str) -> str:
    return (f"To decide: {counted(n, 'document')} to judge; {command}, then `ragmetrics annotate` it and merge the "
            "grades back with `ragmetrics export --golden GOLDEN --merge JUDGMENTS --golden-out GOLDEN --force`.")


def pooled_markdown(v: Verdict, k: int, texts: Mapping[str, str] | None = None, lacks_top: bool = False,
                    artifact: str | None = None, golden: str | None = None) -> str:
    """The terminal's pooled part for ``$GITHUB_STEP_SUMMARY``: the reviewer of a red pull request sees
    which documents to judge, and the command, without opening the log."""
    parts = ["### Judgments: pooled", escape_cell("Documents the golden set does not list are unjudged. "
                                                  + _intro(v.judged, v.unjudged_new, k))]
    if lacks_top:
        parts.append(f"**Note:** {escape_cell(NEEDS_TOP)}.")
    gated = [r for r in v.aggregate if r.gated]
    if v.judged is not None and v.judged < 1 and gated:
        parts.append("Bounds of the gated metrics (mean over the scored queries):\n\n"
                     + markdown_table(["metric", "unjudged = 0 (now)", "unjudged at the top grade"],
                                      [[r.metric, r.now, v.upper.get(r.metric)] for r in gated]))
    if v.inconclusive:
        rows = []
        for i, r in enumerate(v.inconclusive, start=1):
            fell = "; ".join(f"{d.metric} {d.before:.4f} → {d.after:.4f}" for d in r.drops if d.exceeded)
            docs = "; ".join(d + (f" ({snippet(texts[d], 80)})" if texts and texts.get(d) else "") for d in r.unjudged)
            rows.append([i, r.qid, r.question, fell or "—", docs])
        parts.append(f"#### Inconclusive queries ({len(v.inconclusive)})\n\n"
                     "They fell beyond tolerance, but not if their unjudged documents are relevant: "
                     "judge these documents to decide them.\n\n"
                     + markdown_table(["#", "query", "question", "fell", "unjudged documents"], rows))
    if v.to_judge:
        parts.append(escape_cell(_then(len(v.to_judge), fix_command(artifact, golden))))
    return "\n\n".join(parts)


def pooled_counts(comparison: Mapping[str, Any], per_query: Mapping[str, Any]) -> dict[str, Any] | None:
    """A run artifact's pooled counts (None for a closed set): judged@k, unjudged_new@k, the unjudged
    documents of its top k and its inconclusive queries, for ``compare`` and ``history``."""
    if comparison.get("judgments") != "pooled":
        return None
    inconclusive = [r.get("qid") for r in comparison.get("inconclusive") or [] if isinstance(r, Mapping)]
    unjudged = sum(len(e["unjudged"].get("docs") or []) for e in per_query.values()
                   if isinstance(e, Mapping) and isinstance(e.get("unjudged"), Mapping))
    return {"judged": comparison.get("judged"), "unjudged": unjudged, "unjudged_new": comparison.get("unjudged_new"),
            "inconclusive": inconclusive, "to_judge": len(comparison.get("to_judge") or [])}


def pooled_html(artifact: Mapping[str, Any], texts: Mapping[str, str] | None = None) -> str:
    """The run report's pooled section ("" for a closed set): judged@k, unjudged_new@k, the two bounds
    and each inconclusive query with the documents to judge (and their text when the corpus is known)."""
    comparison = artifact.get("comparison") or {}
    if comparison.get("judgments") != "pooled":
        return ""
    k = (artifact.get("_meta") or {}).get("k", "k")
    out = [f"<h2>Judgments: pooled</h2><p class=note>Documents the golden set does not list are unjudged. "
           f"{escape(_intro(comparison.get('judged'), comparison.get('unjudged_new'), k))}</p>"]
    upper = comparison.get("upper") or {}
    judged = comparison.get("judged")
    rows = [[f"<td>{escape(str(r.get('metric')))}</td>", f'<td class="num">{num(r.get("now"))}</td>',
             f'<td class="num">{num(upper.get(r.get("metric")))}</td>']
            for r in comparison.get("aggregate") or []
            if isinstance(r, Mapping) and (r.get("tolerance") is not None or r.get("min") is not None)]
    if isinstance(judged, (int, float)) and judged < 1 and rows:
        out.append("<p class=note>Bounds of the gated metrics (mean over the scored queries):</p>"
                   + table(["metric", "unjudged = 0 (now)", "unjudged at the top grade"], rows))
    inconclusive = [r for r in comparison.get("inconclusive") or [] if isinstance(r, Mapping)]
    if inconclusive:
        qrows = []
        for i, r in enumerate(inconclusive, start=1):
            fell = "; ".join(f"{d.get('metric')} {num(d.get('baseline'))} → {num(d.get('now'))}"
                             for d in r.get("drops") or [] if d.get("exceeded"))
            docs = "".join(f"<li><code>{escape(str(d))}</code>"
                           + (f" <span class=note>{escape(snippet(texts[d]))}</span>" if texts and texts.get(d) else "")
                           + "</li>" for d in r.get("unjudged") or [])
            qrows.append([f'<td class="num">{i}</td>', f"<td>{escape(str(r.get('qid')))}</td>",
                          f"<td>{escape(str(r.get('question') or ''))}</td>", f"<td>{escape(fell) or '—'}</td>",
                          f"<td><ul>{docs}</ul></td>"])
        out.append(f"<h2>Inconclusive queries ({len(inconclusive)})</h2><p class=note>They fell beyond tolerance, "
                   "but not if their unjudged documents are relevant: judge these documents to decide them.</p>"
                   + table(["#", "query", "question", "fell", "unjudged documents"], qrows))
    pairs = comparison.get("to_judge") or []
    if pairs:
        command = next((str(g.get("message", "")) for g in comparison.get("gates") or []
                        if isinstance(g, Mapping) and g.get("name") == "unjudged"), "")
        how = command[command.find("write them out"):] if "write them out" in command else fix_command(None)
        out.append(f"<p>{escape(_then(len(pairs), how))}</p>")
    return "".join(out)
