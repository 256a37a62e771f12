"""The verdict as text: the aggregate table, strata, and the worst-regressed list.

Used for the terminal summary, the gate reports and the CLI. Tables are Markdown
(padded), so the same text pastes into a pull request.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Mapping, NamedTuple, Sequence

from pytest_ragmetrics.errors import brief_repr, listed, shown, shown_lines
from pytest_ragmetrics.gate.verdict import EPS, Drop, Gate, Regression, Verdict
from pytest_ragmetrics.report.tables import counted, markdown_table, one_query_mark, p_text, sample_size_note
from pytest_ragmetrics.scope import scope_text, why_outside

if TYPE_CHECKING:
    from pytest_ragmetrics.gate.baseline import Baseline

__all__ = ["REFRESH_COMMAND", "shown", "shown_lines", "aggregate_table", "strata_table", "parent_table",
           "regressions_text", "regression_entry_lines", "moved_heading", "moved_text", "drops_text", "gate_line",
           "no_answer_text", "tradeoff_rows", "tradeoff_heading", "signed_delta", "verdict_text",
           "baseline_change_text", "retriever_warnings", "retriever_changes", "RetrieverNote", "retriever_note",
           "retriever_text", "changes_hint", "retriever_hint", "leak_summary", "leak_lines", "leaks_text",
           "retried_text"]


#: How to refresh a baseline, in every hint: the user's own command (its paths and options), but whole.
REFRESH_COMMAND = "this command with --rag-update-baseline, over the full set (without --rag-subset smoke)"


def signed_delta(value: float) -> str:
    """A change with its sign: ``±0`` for none (not ``-0.0000``), more digits for a tiny one."""
    if abs(value) < EPS:  # rounding noise from the stored baseline, not a change
        return "±0"
    text = f"{value:+.4f}"
    return text if float(text) != 0 else f"{value:+.1e}"


def _delta(value: float | None, n: int) -> str:
    if value is None:
        return "—"
    text = signed_delta(value)
    return text if text == "±0" else text + one_query_mark(value, n)


def _ci(stats: Any) -> str:
    return "—" if stats is None else f"[{stats.ci_low:+.4f}, {stats.ci_high:+.4f}]"


def _p(stats: Any) -> str:
    return p_text(None if stats is None else stats.p_value)


def aggregate_table(v: Verdict) -> str:
    rows = []
    failed = {g.name for g in v.failed_gates}
    for r in v.aggregate:
        status = "ok"
        if r.dropped_too_far:  # a pooled set's drop that new unjudged documents explain fails gate unjudged instead
            status = "FAIL: drop" if r.metric in failed else "inconclusive"
        if r.under_floor:
            status = "FAIL: floor" if status == "ok" else status + ", floor"
        if status == "ok" and r.metric in failed:  # its gate failed for want of a baseline value
            status = "FAIL: not compared"
        if r.tolerance is None and "significant-drops" in failed and r.significant_drop:
            status = "FAIL: beyond chance" if status == "ok" else status + ", beyond chance"
        elif not r.gated:
            status = "report only"
        rows.append([r.metric, r.baseline, r.now_common if v.has_baseline else r.now, _delta(r.delta, v.n_common),
                     _ci(r.stats), _p(r.stats),
                     "—" if r.tolerance is None else f"{r.tolerance:g}",
                     "—" if r.minimum is None else f"{r.minimum:g}", status])
    table = markdown_table(["metric", "baseline", "now", "delta", "95% CI (paired)", "p", "allowed drop",
                            "floor", "verdict"], rows)
    lines = [table, sample_size_note(v.n_common if v.has_baseline else v.n)]
    unguarded = [r for r in v.aggregate if r.tolerance is None and r.stats is not None and r.delta is not None
                 and r.delta < 0 and r.stats.p_value < 0.05
                 and not ("significant-drops" in failed and r.significant_drop)]
    if unguarded:
        off = not any(g.name == "significant-drops" for g in v.gates)
        lines.append("Not gated, but down beyond chance (p < 0.05): "
                     + ", ".join(f"{r.metric} {signed_delta(r.delta or 0.0)} (p={_p(r.stats)})" for r in unguarded)
                     + ". Give them a tolerance in thresholds.json to gate them"
                     + (" (the significant-drops gate is off: fail_on_significant_drop is false)." if off else "."))
    detectable = [(r.metric, r.stats.detectable) for r in v.aggregate if r.stats and r.stats.detectable]
    if detectable:
        lines.append("Smallest change this set can detect (95% confidence, 80% power, from the spread of "
                     "per-query deltas): " + ", ".join(f"{m} {d:.4f}" for m, d in detectable))
    if v.new:
        now_all = ", ".join(f"{r.metric} {r.now:.4f}" for r in v.aggregate if r.now is not None)
        lines.append(f"{counted(len(v.new), 'new query', 'new queries')} not in the baseline (scored, not compared): "
                     f"{listed(v.new)}; with them: {now_all}")
    return "\n".join(lines)


def strata_table(v: Verdict, by: str = "tag") -> str:
    """The per-tag table (``by="tag"``), or the per-source one (``by="source"``: empty unless the
    golden set mixes sources)."""
    strata, stats = (v.sources, v.sources_stats) if by == "source" else (v.strata, v.strata_stats)
    if not strata:
        return ""
    headers = [by, "n"]
    for m in v.metrics:
        headers += [m, "Δ"] if v.has_baseline else [m]
    rows = []
    for tag, (n, now, base) in strata.items():
        row: list[object] = [tag, n]
        for m in v.metrics:
            row.append(now[m])
            if v.has_baseline:
                b, x = base.get(m), now[m]
                cell = _delta(None if b is None or x is None else x - b, n)
                st = stats.get(tag, {}).get(m)
                if st is not None and cell not in ("—", "±0"):
                    cell += f" p={_p(st)}"
                row.append(cell)
        rows.append(row)
    return markdown_table(headers, rows)


def parent_table(v: Verdict) -> str:
    """Chunk-level vs parent-level hit rate, when the results carried parent ids ("" otherwise)."""
    pl = v.parent_level
    if pl is None:
        return ""
    rows = []
    for m in pl.metrics:
        missed = pl.chunk_only.get(m, [])
        rows.append([m, pl.chunk[m], pl.parent[m], f"{pl.parent[m] - pl.chunk[m]:+.4f}", len(missed),
                     ", ".join(map(shown, missed[:5])) + (" …" if len(missed) > 5 else "") or "—"])
    table = markdown_table(["metric", "chunk level", "parent level", "parent − chunk",
                            "chunk hit, parent missed", "e.g."], rows)
    return (f"Parent-chunk hit rate ({counted(pl.n, 'scored query', 'scored queries')} returned parent ids; "
            f"the parent is what the generator receives):\n" + table)


def drops_text(drops: Sequence[Drop], indent: str = "") -> str:
    """One line per fallen metric, the ones beyond tolerance first."""
    width = max((len(d.metric) for d in drops), default=0)
    lines = []
    for d in sorted(drops, key=lambda d: (not d.exceeded, -d.loss, d.metric)):
        if d.rise and d.exceeded:
            note = "an answer came back for a question marked answerable: false"
        elif d.exceeded:
            note = f"beyond tolerance {d.tolerance:g}"
        elif d.tolerance is None:
            note = "not gated per query"
        else:
            note = f"within tolerance {d.tolerance:g}"
        lines.append(f"{indent}{d.metric:<{width}}  {d.before:.4f} -> {d.after:.4f}  ({d.delta:+.4f})  {note}")
    return "\n".join(lines)


def regression_entry_lines(r: Regression, number: int | None = None, shown_returned: int = 5) -> list[str]:
    """One regressed query (question, drops, gold, what came back): numbered in a list, or
    without a number where it stands alone (a query item's failure)."""
    lead = f"{number:>3}. " if number is not None else "  "
    # TREC qrels have no text
    lines = [f"{lead}{shown(r.qid)}" + (f"  {shown(repr(r.question))}" if r.question else "")
             + (f"  filters {shown(scope_text(r.filters))}" if r.filters else "")]
    if r.error:
        lines.append(f"       ERROR: {shown(r.error)}")
    if r.drops:
        lines.append(drops_text(r.drops, indent="       "))
    gold = ", ".join(f"{shown(d)} ({g})" for d, g in r.gold) or (
        "none (answerable: false: anything that came back is a false retrieval)" if not r.answerable
        else "— (not in the inputs; pass --golden or --qrels to name it)")
    lines.append(f"       gold:     {gold}")
    if r.returned:
        golds = {d for d, _ in r.gold}
        for rank, doc in enumerate(r.returned[:shown_returned], start=1):
            mark = "*" if doc in golds else " "
            why = r.explains[rank - 1] if rank - 1 < len(r.explains) else None
            head = "returned: " if rank == 1 else "          "
            lines.append(f"       {head}{rank}.{mark}{shown(doc)}" + (f"  [{shown(why)}]" if why else ""))
    elif not r.error:
        lines.append("       returned: nothing")
    return lines


def _entries_text(entries: Sequence[Regression], limit: int, shown_returned: int) -> list[str]:
    """Numbered entries (question, drops, gold, what came back) and a "… and N more" line."""
    lines = []
    for i, r in enumerate(entries[:limit], start=1):
        lines += regression_entry_lines(r, i, shown_returned)
    if len(entries) > limit:
        rest = ", ".join(shown(r.qid) for r in entries[limit:limit + 20])
        lines.append(f"     … and {len(entries) - limit} more: {rest}{' …' if len(entries) > limit + 20 else ''}")
    return lines


def leak_summary(leaks: Sequence[Mapping[str, Any]], scope: Mapping[str, Any]) -> str:
    """A leaking query's first line, for pytest's short summary."""
    n = len(leaks)
    return (f"leak: {n} returned {'document is' if n == 1 else 'documents are'} outside the scope "
            f"{shown(scope_text(scope))}: {', '.join(shown(str(d['doc'])) for d in leaks)} "
            "(no threshold allows a leak)")


def leak_lines(qid: str, question: str, filters: Mapping[str, Any] | None, scope: Mapping[str, Any],
               leaks: Sequence[Mapping[str, Any]], lead: str = "  ") -> list[str]:
    """One leaking query: its question and filters, the scope, and each document outside it with its metadata."""
    lines = [f"{lead}{shown(qid)}" + (f"  {shown(repr(question))}" if question else "")
             + (f"  filters {shown(scope_text(filters))}" if filters else "")]
    lines.append(f"       scope:    {shown(scope_text(scope))}")
    for i, d in enumerate(leaks):
        head = "leaked:   " if i == 0 else "          "
        chunk = f"  (returned as {shown(str(d['id']))})" if d["id"] != d["doc"] else ""
        lines.append(f"       {head}{d['rank']}. {shown(str(d['doc']))}  metadata "
                     f"{shown(scope_text(d['metadata']))}{chunk}: {shown(why_outside(d['metadata'], scope))}")
    return lines


def leaks_text(v: Verdict) -> str:
    """Every query that returned documents outside its scope ("" if none)."""
    if not v.leaks:
        return ""
    n = sum(len(leak.docs) for leak in v.leaks)
    lines = [f"Leaks: {counted(n, 'returned document', 'returned documents')} outside their query's scope "
             f"({counted(len(v.leaks), 'query', 'queries')}; zero tolerance, whatever the thresholds say):"]
    for i, leak in enumerate(v.leaks, start=1):
        lines += leak_lines(leak.qid, leak.question, leak.filters, leak.scope, leak.docs, lead=f"{i:>3}. ")
    return "\n".join(lines)


def regressions_text(regressions: Sequence[Regression], limit: int, shown_returned: int = 5) -> str:
    if not regressions:
        return "No query fell beyond its per-query tolerance."
    shown = regressions[:limit]
    return "\n".join([f"Worst regressed queries ({len(shown)} of {len(regressions)}, largest drop first):",
                      *_entries_text(regressions, limit, shown_returned)])


def moved_heading(v: Verdict, shown: int) -> str:
    """The title of the "moved" list, shared by the text and Markdown reports."""
    return (f"Queries that moved {', '.join(v.moved_metrics)} most, within their per-query tolerance "
            f"({shown} of {len(v.moved)}, largest drop first)")


def moved_text(v: Verdict, limit: int, shown_returned: int = 5) -> str:
    """Queries behind a failed aggregate gate that no per-query tolerance flagged ("" if none).

    Without this list a gate on a metric that is not gated per query (nDCG, MRR)
    could fail with no query named at all.
    """
    if not v.moved:
        return ""
    return "\n".join([moved_heading(v, len(v.moved[:limit])) + ":", *_entries_text(v.moved, limit, shown_returned)])


def gate_line(v: Verdict, gate: Gate, named: int = 3) -> str:
    """A failed gate in one line, with the queries behind it.

    A failing gate item prints this, not the whole report: the report is printed
    once, in the terminal summary, however many gates fail.
    """
    if gate.name == "regressed-queries":
        names = [shown(r.qid) for r in v.regressions]
    elif gate.name == "unjudged":
        names = [shown(r.qid) for r in v.inconclusive]
    else:
        names = [f"{shown(r.qid)} ({d.delta:+.4f}{', beyond tolerance' if d.exceeded else ''})"
                 for r, d in v.movers(gate.name)]
    line = f"gate {gate.name}: {shown(gate.message)}"
    if names:
        line += f"; most: {', '.join(names[:named])}{' …' if len(names) > named else ''}"
    return line + " (full report in the ragmetrics summary)"


def threshold_text(threshold: float | None) -> str:
    return "none" if threshold is None else f"{threshold:g}"


def tradeoff_rows(v: Verdict) -> list[list[object]]:
    """The trade-off as table rows (threshold, recall@k, false_retrieval_rate), the one in force marked."""
    na = v.no_answer
    if na is None:
        return []
    return [[threshold_text(r.threshold) + (" (in force)" if r.in_force else ""), r.recall, r.rate]
            for r in na.tradeoff]


def tradeoff_heading(v: Verdict) -> str:
    k = v.no_answer.k if v.no_answer is not None else None
    return (f"Answer threshold trade-off (from this run's scores: recall@{k} of the answerable questions keeping "
            "only results scoring at or above the threshold, and the false-retrieval rate of the unanswerable ones; "
            "pick rag_answer_threshold from it)")


def no_answer_text(v: Verdict) -> str:
    """The questions marked answerable: false: their count, the false-retrieval rate against the
    baseline and its gates, which ones got an answer, and the threshold trade-off ("" if none ran)."""
    na = v.no_answer
    if na is None:
        return ""
    lines = [f"Questions with no answer: {na.n} (answerable: false; scored by false retrieval, outside the means "
             f"above; answer threshold: {threshold_text(na.threshold)})"]
    line = f"false_retrieval_rate {na.now:.4f}" if na.now is not None else "false_retrieval_rate —"
    if na.baseline is not None and na.delta is not None:
        line += (f" (baseline {na.baseline:.4f} over {counted(na.n_common, 'query', 'queries')}, "
                 f"{signed_delta(na.delta)})")
    limits = [f"allowed rise {na.tolerance:g}" if na.tolerance is not None else "",
              f"ceiling {na.maximum:g}" if na.maximum is not None else ""]
    limits = [x for x in limits if x]
    line += f"; {', '.join(limits)}" if limits else "; not gated (false_retrieval_rate_tolerance, _max)"
    if na.rose_too_far or na.over_max:
        line += "  FAIL"
    lines.append(line + ". Lower is better.")
    if na.new:
        lines.append(f"{counted(len(na.new), 'new question', 'new questions')} not in the baseline (scored, not "
                     f"compared): {listed(na.new)}")
    if na.retrieved:
        lines.append(f"Got a result counted as an answer: {listed(na.retrieved)}")
    if na.tradeoff:
        lines.append("")
        lines.append(tradeoff_heading(v) + ":")
        lines.append(markdown_table(["threshold", f"recall@{na.k}", "false_retrieval_rate"], tradeoff_rows(v)))
    return "\n".join(lines)


def within_text(v: Verdict, worst_n: int) -> str:
    """The queries that fell within their tolerances, largest fall first: allowed, and still named."""
    if not v.within or not worst_n:
        return ""
    n = len(v.within)
    lines = [f"Fell within their tolerances ({counted(n, 'query', 'queries')}, "
             f"{'the largest ' + str(min(n, worst_n)) + ' shown' if n > worst_n else 'all shown'}):"]
    for r in v.within[:worst_n]:
        order = {m: i for i, m in enumerate(v.metrics)}
        d = min(r.drops, key=lambda d: (-d.loss, order.get(d.metric, len(order))))  # ties: the metrics' order
        tol = "not gated per query" if d.tolerance is None else f"allowed drop {d.tolerance:g}"
        lines.append(f"  {shown(r.qid)}  {d.metric} {d.before:.4f} -> {d.after:.4f}  ({tol})"
                     + (f"; {len(r.drops) - 1} more metric{'s' if len(r.drops) > 2 else ''} fell"
                        if len(r.drops) > 1 else ""))
    return "\n".join(lines)


def coverage_text(v: Verdict) -> str:
    """What the hard gates judged, and what ran ungated with why (empty without a baseline)."""
    if v.coverage is None or not v.has_baseline:
        return ""
    return shown_lines("\n".join(v.coverage.lines()))


def verdict_text(v: Verdict, worst_n: int) -> str:
    """The whole report: gates, aggregate table, strata, notes, worst-N list."""
    parts = []
    failures = v.failures()
    if failures:
        head = "RETRIEVAL GATE FAILED" if not v.passed else \
            "RETRIEVAL GATE FAILED (report only: fail_on_regression is false)"
        parts.append(head + "\n" + "\n".join(f"  {shown(line)}" for line in failures))
    elif v.deferred:
        parts.append(f"No query of this shard regressed or errored. Its gates ({', '.join(v.deferred)}) judge the "
                     "whole set: `ragmetrics merge` judges them over every shard's artifact.")
    elif v.has_baseline:
        parts.append(f"All gates passed ({len(v.gates)} checked)."
                     + "".join(f"\nWARNING: {shown(w)}" for w in v.warnings))
    else:
        parts.append("No baseline: scores below are not compared.")
    if v.harvested:  # whatever the verdict: it is about the golden set, not the run
        parts[-1] += f"\nWARNING: {shown(v.harvested)}"
    parts.append(aggregate_table(v))
    coverage = coverage_text(v)
    if coverage:
        parts.append(coverage)
    strata = strata_table(v)
    if strata:
        parts.append("Per tag:\n" + strata)
    by_source = strata_table(v, by="source")
    if by_source:
        parts.append("Per source (each has its bias: harvested questions are known failures):\n" + by_source)
    parents = parent_table(v)
    if parents:
        parts.append(parents)
    notes = []
    if v.unscorable:
        notes.append(f"{counted(len(v.unscorable), 'query has', 'queries have')} no relevant document and "
                     f"{'was' if len(v.unscorable) == 1 else 'were'} not scored: {listed(v.unscorable)}")
    if v.short:
        notes.append(f"{counted(len(v.short), 'query', 'queries')} came back with fewer documents than the "
                     "deepest cutoff (after the id rule and dedup): "
                     + listed([f"{q} ({n})" for q, n in v.short.items()]))
    if v.renamed:
        notes.append(f"{counted(len(v.renamed), 'query was', 'queries were')} renamed since the baseline (same "
                     "question and judgments) and compared with their old entries: "
                     + listed([f"{old} -> {new}" for old, new in v.renamed.items()])
                     + "; refresh the baseline to record the new ids")
    if notes:
        parts.append("\n".join(notes))
    if v.labels is not None and v.labels.lines():
        parts.append(shown_lines("\n".join(v.labels.lines())))
    leaks = leaks_text(v)
    if leaks:
        parts.append(leaks)
    no_answer = no_answer_text(v)
    if no_answer:
        parts.append(no_answer)
    if v.has_baseline:
        if not v.regressions and v.inconclusive:
            n = len(v.inconclusive)
            parts.append(f"No query regressed beyond its per-query tolerance; {n} fell beyond it only as far as "
                         f"unjudged documents can explain ({'it is' if n == 1 else 'they are'} inconclusive, "
                         "listed below).")
        elif v.regressions or not v.moved:
            parts.append(regressions_text(v.regressions, worst_n))
        else:
            parts.append("No query regressed beyond its per-query tolerance.")
        within = within_text(v, worst_n)
        if within:
            parts.append(within)
        moved = moved_text(v, worst_n)
        if moved:
            parts.append(moved)
    return "\n\n".join(parts)


def baseline_change_text(old: Baseline | None, new: Baseline, metrics: Sequence[str],
                         unreadable: str | None = None) -> str:
    """What a baseline refresh changes, for the terminal and the pull request.

    ``unreadable`` is why the previous file could not be read, when there was one:
    it was replaced, and saying "no previous baseline" would hide that.
    """
    lines = [f"Baseline written: {new.path} ({counted(len(new.per_query), 'query', 'queries')})."]
    if old is None:
        lines.append(f"The previous file could not be read and was replaced, so nothing was compared: "
                     f"{shown(unreadable)}"
                     if unreadable else "No previous baseline.")
        lines.extend(f"  {m}: {new.aggregate[m]:.4f}" if new.aggregate.get(m) is not None else f"  {m}: no scored query"
                     for m in metrics)
        return "\n".join(lines)
    added = sorted(set(new.per_query) - set(old.per_query))
    removed = sorted(set(old.per_query) - set(new.per_query))
    if added:
        lines.append(f"Queries added: {len(added)} ({listed(added)})")
    if removed:
        lines.append(f"Queries removed: {len(removed)} ({listed(removed)})")
    both = sorted(set(new.per_query) & set(old.per_query))
    for m in metrics:
        before, after = old.aggregate.get(m), new.aggregate.get(m)
        ups, downs = [], []
        for qid in both:
            a, b = old.per_query[qid].get(m), new.per_query[qid].get(m)
            if a is None or b is None:
                continue
            if b > a + 1e-9:
                ups.append(qid)
            elif b < a - 1e-9:
                downs.append(qid)
        if after is None:
            lines.append(f"  {m}: no scored query")
        elif before is None:
            lines.append(f"  {m}: {after:.4f} (new metric)")
        else:
            moved = [f"{word} {len(q)}" + (f" ({listed(q, 3)})" if q else "")
                     for word, q in (("up", ups), ("down", downs))]
            lines.append(f"  {m}: {before:.4f} -> {after:.4f} ({signed_delta(after - before)}); "
                         f"queries {', '.join(moved)}")
    rate = new.aggregate.get("false_retrieval_rate")
    if rate is not None:  # the questions marked answerable: false (higher is worse)
        before = old.aggregate.get("false_retrieval_rate")
        lines.append(f"  false_retrieval_rate: {rate:.4f} (new)" if before is None else
                     f"  false_retrieval_rate: {before:.4f} -> {rate:.4f} ({signed_delta(rate - before)})")
    return "\n".join(lines)


def retriever_warnings(descriptions: Iterable[Any]) -> list[str]:
    """The ``warnings`` and ``encoder_choice`` a retriever's ``describe()`` carries, each once."""
    out: list[str] = []
    for described in descriptions:
        if not isinstance(described, dict):
            continue
        notes = described.get("warnings")
        found = [str(w) for w in notes] if isinstance(notes, list) else []
        if described.get("encoder_choice"):
            found.append(str(described["encoder_choice"]))
        out.extend(m for m in found if m not in out)
    return out


#: describe() keys that say what to know, not what was measured: never reported as a change.
_COMMENTARY = ("warnings", "encoder_choice")


def retriever_changes(before: Any, now: Any) -> list[str]:
    """``key: old -> new`` for each top-level setting two ``describe()`` results disagree on.

    Non-dict descriptions compare whole. Used to say, next to the verdict, that
    the retriever measured is not the one the baseline measured.
    """
    if before is None or now is None or before == now:
        return []
    if not (isinstance(before, dict) and isinstance(now, dict)):
        return [f"{brief_repr(before)} -> {brief_repr(now)}"]
    keys = [k for k in dict.fromkeys([*before, *now]) if k not in _COMMENTARY]
    missing = object()
    out = []
    for key in keys:
        old, new = before.get(key, missing), now.get(key, missing)
        if old != new:
            if old is missing or new is missing:
                shown = ["(absent)" if v is missing else brief_repr(v) for v in (old, new)]
            else:
                shown = list(_where_they_differ(old, new))
            out.append(f"{key}: {shown[0]} -> {shown[1]}")
    return out


def _where_they_differ(old: Any, new: Any, width: int = 80) -> tuple[str, str]:
    """Two values as text; when long, both cut to the same window around their first difference,
    so the change itself is what shows (a cut in the middle could hide it)."""
    a, b = _repr_bounded(old), _repr_bounded(new)
    if len(a) <= width and len(b) <= width:
        return a, b
    same = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    start = max(0, same - width // 4)

    def cut(text: str) -> str:
        part = text[start:start + width]
        return ("…" if start else "") + part + ("…" if start + width < len(text) else "")

    return cut(a), cut(b)


def _repr_bounded(value: Any, limit: int = 20_000) -> str:
    try:
        text = repr(value)
    except Exception:  # e.g. an integer too large to print
        return f"<{type(value).__name__}>"
    return text[:limit]


class RetrieverNote(NamedTuple):
    """What every report says when the retriever is not the baseline's: a heading, one line
    per changed setting, and (unless a refresh records them) how to make the change stay."""

    head: str
    changes: list[str]
    advice: str | None


def retriever_note(changes: Sequence[str], refreshing: bool = False, unjudged: bool = False) -> RetrieverNote | None:
    """The wording of the retriever change, for the terminal, the Markdown summary and the HTML
    report alike (``changes`` as :func:`retriever_changes` gives them); None when nothing changed.

    ``refreshing``: the run writes a new baseline over the one the changes are
    measured against (a refresh must not swap the retriever unnoticed).
    """
    if not changes:
        return None
    if refreshing:
        return RetrieverNote("Retriever settings differ from the previous baseline's (the new baseline records them):",
                             list(changes), None)
    return RetrieverNote("Retriever settings differ from the baseline's (the gate compares them as they are):",
                         list(changes),
                         ("If the change is meant to stay, judge the documents gate unjudged names first (a refresh "
                          "now would record them as not relevant), then refresh the baseline once "
                          f"({REFRESH_COMMAND}) so later runs are compared with this retriever.") if unjudged else
                         f"If the change is meant to stay, refresh the baseline once ({REFRESH_COMMAND}) so later "
                         "runs are compared with this retriever.")


def retriever_text(before: Any, now: Any, refreshing: bool = False, unjudged: bool = False) -> str | None:
    """What the summary says about the retriever: its warnings and notes, and what changed since the baseline.

    ``refreshing``: the run writes a new baseline over ``before``'s, which the
    changes then describe (a refresh must not swap the retriever unnoticed).
    ``unjudged``: the run waits on documents nobody judged (a pooled set's ``unjudged`` gate).
    """
    lines = [f"Retriever: {m}" for m in retriever_warnings([now])]
    note = retriever_note(retriever_changes(before, now), refreshing, unjudged)
    if note is not None:
        lines.append(note.head + "\n  - " + "\n  - ".join(note.changes))
        if note.advice:
            lines.append("  " + note.advice)
    return "\n".join(lines) or None


def changes_hint(changes: Sequence[str]) -> str | None:
    """The line that leads a failed verdict when the retriever is not the baseline's (``changes``
    as :func:`retriever_changes` gives them): a reader scanning from the top must not take a
    changed retriever for a regression."""
    if not changes:
        return None
    keys = [c.split(":", 1)[0] for c in changes]
    return f"(the retriever differs from the baseline's: {listed(keys, 5)}; see below)"


def retriever_hint(before: Any, now: Any) -> str | None:
    """One line for under a failed verdict's headline, when the retriever is not the baseline's."""
    hint = changes_hint(retriever_changes(before, now))
    return None if hint is None else "  " + hint


def retried_text(shards: Any) -> str | None:
    """The warning for a merge of shards of which some come from a re-run (attempt above 1), from the
    merged artifact's ``_meta.shards`` (``index``, ``count``, ``attempt``, ``file`` each); None when none
    was retried or the attempts were not recorded."""
    entries = [s for s in shards if isinstance(s, Mapping)] if isinstance(shards, list) else []

    def spec(s: Mapping[str, Any]) -> str:
        return f"{s.get('index')}/{s.get('count')}"

    def retried(s: Mapping[str, Any]) -> bool:
        attempt = s.get("attempt")
        return isinstance(attempt, int) and not isinstance(attempt, bool) and attempt > 1

    again = [s for s in entries if retried(s)]
    if not again:
        return None
    named = listed([f"{spec(s)} is attempt {s.get('attempt')} ({s.get('file')})" for s in again])
    by_attempt: dict[str, list[str]] = {}
    for s in entries:
        if not retried(s):
            attempt = s.get("attempt")
            by_attempt.setdefault(f"attempt {attempt}" if attempt is not None else "attempt not recorded",
                                  []).append(spec(s))
    others = "; ".join(f"{listed(specs)} {what}" for what, specs in by_attempt.items())
    return (f"WARNING: retried {'shard' if len(again) == 1 else 'shards'}: {named}"
            + (f"; {others}" if others else "")
            + ". A shard re-run until it passes can hide a flaky regression that failed an earlier attempt, and "
              "this merge judges only the attempts given: read the earlier attempts' logs before trusting it.")
