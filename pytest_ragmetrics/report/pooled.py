"""The report's part on a pooled golden set: how far its judgments reach, the two bounds of
each gated metric, and the inconclusive queries with the documents that would decide them."""

from __future__ import annotations

from typing import Mapping

from pytest_ragmetrics.errors import shown
from pytest_ragmetrics.gate.verdict import Verdict, fix_command
from pytest_ragmetrics.report.tables import counted, markdown_table

__all__ = ["pooled_text", "NEEDS_TOP", "snippet"]

#: Said once when the baseline predates ``_top``.
NEEDS_TOP = ("new unjudged documents cannot be told from old ones: the baseline was written before it recorded "
             "each query's top k (_top), so every unjudged document counts as new; a baseline refresh "
             "(--rag-update-baseline) adds _top")


def snippet(text: str, width: int = 100) -> str:
    """A document's text on one line, cut to ``width`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def pooled_text(v: Verdict, k: int, texts: Mapping[str, str] | None = None, lacks_top: bool = False,
                artifact: str | None = None) -> str:
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
                      "new unjudged documents are relevant; judge these documents to decide them:"]
        for i, r in enumerate(v.inconclusive, start=1):
            lines.append(f"{i:>3}. {shown(r.qid)}  {shown(repr(r.question))}")
            for d in r.drops:
                if d.exceeded:
                    lines.append(f"       {d.metric}  {d.before:.4f} -> {d.after:.4f}  beyond tolerance {d.tolerance:g}")
            for doc in r.unjudged:
                text = texts.get(doc) if texts else None
                lines.append(f"       unjudged: {shown(doc)}" + (f"  {shown(repr(snippet(text)))}" if text else ""))
    if v.to_judge:
        lines += ["", f"To decide: {counted(len(v.to_judge), 'document')} to judge; "
                      + fix_command(artifact) + ", then `ragmetrics annotate` it and merge the grades back with "
                      "`ragmetrics export --golden GOLDEN --merge JUDGMENTS --golden-out GOLDEN --force`."]
    return "\n".join(lines)
