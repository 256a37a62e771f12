"""A history of run artifacts as text (the terminal) or Markdown (a job summary).

Drawn from the JSON of ``ragmetrics history --format json`` (the ``to_dict`` of
:class:`pytest_ragmetrics.tools.history.History`), so every format says the same.
The line helpers return plain text, shared with the HTML page (which escapes it
for HTML); here every line and cell goes through ``escape_cell``, so a path, query
id, tag or retriever setting from an artifact cannot break a table or open a tag.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from pytest_ragmetrics.errors import listed
from pytest_ragmetrics.report.tables import counted, escape_cell, markdown_table, one_query_mark, sample_size_note
from pytest_ragmetrics.report.text import signed_delta

__all__ = ["history_text", "short_time", "measured_line", "drift_line", "flip_text", "timeline_marks", "gate_label",
           "DRIFT_RULE", "FLAKY_RULE"]

#: One sentence each, shared by every format, so the rule printed is the rule applied.
DRIFT_RULE = ("Drift: since the last baseline refresh, a mean that fell more than its allowed drop (the metric's "
              "_tolerance in thresholds.json, as each run recorded it) below the highest mean before it, over "
              "consecutive runs none of which fell more than that drop in one step (such a step is the gate's to "
              "judge, and the count starts again after it)")
FLAKY_RULE = ("Flaky: a query whose verdict (ok, regressed, error, unscorable) changed between consecutive runs "
              "that hold it; a change across a baseline refresh is the refresh's and is not counted")


def short_time(created: str) -> str:
    """``2026-03-01T03:00:00+00:00`` as ``2026-03-01 03:00``: enough to tell nightly runs apart."""
    return created[:16].replace("T", " ")


def measured_line(measured: Mapping[str, Any]) -> str:
    """How a group's runs were measured, on one line."""
    metrics = " ".join(str(m) for m in measured.get("metrics") or [])
    sha = str(measured.get("golden_sha256") or "not recorded")[:12]
    n = measured.get("n_queries")
    size = f"{counted(n, 'query', 'queries')}, " if isinstance(n, int) else ""
    golden = f"{measured.get('golden_source') or 'golden set'} ({size}sha256 {sha}…)"
    k = measured.get("k")
    return (f"{metrics}; k {'not recorded' if k is None else k}; relevance level {measured.get('relevance_level')}, "
            f"{measured.get('gain')} gain; {golden}; subset {measured.get('subset')}")


def drift_line(d: Mapping[str, Any]) -> str:
    """One flagged drift: the window, the values, the total move and the allowed drop."""
    return (f"{d['metric']}: runs #{d['start']} -> #{d['end']} "
            f"({short_time(d['start_created'])} -> {short_time(d['end_created'])}): "
            f"{d['start_value']:.4f} -> {d['end_value']:.4f} ({signed_delta(d['move'])}) over {d['steps']} steps "
            f"(the largest {signed_delta(d['largest_step'])}); allowed drop {d['tolerance']:g}"
            + (" [current: fails --fail-on-drift]" if d.get("current") else ""))


def flip_text(f: Mapping[str, Any]) -> str:
    return f"#{f['run']} {short_time(f['created'])} {f['before']} -> {f['after']}"


def timeline_marks(run: Mapping[str, Any]) -> list[str]:
    """What happened at a run besides its numbers: a baseline refresh, a retriever change."""
    marks = []
    if run.get("refresh"):
        marks.append(f"baseline refreshed: {run['refresh']}")
    if run.get("retriever_changes"):
        marks.append("retriever changed: " + "; ".join(run["retriever_changes"]))
    return marks


def gate_label(run: Mapping[str, Any]) -> str:
    """How the run's gate ended: passed, FAILED, or the baseline written (gates skipped)."""
    baseline = run.get("baseline")
    if isinstance(baseline, Mapping) and baseline.get("updated"):
        return "wrote baseline"
    return {True: "passed", False: "FAILED"}.get(run.get("passed"), "—")  # type: ignore[arg-type]


def _runs_table(group: Mapping[str, Any]) -> str:
    metrics = group["metrics"]
    n = group["runs"][-1]["n"]
    aged = any(r.get("stale_labels") for r in group["runs"])  # the column only when a night aged its labels
    pooled = any(r.get("pooled") for r in group["runs"])  # likewise when a night's golden set was pooled
    rows = []
    for r in group["runs"]:
        row: list[object] = [f"#{r['index']}", short_time(r["created"]), (r.get("git_commit") or "—")[:7]]
        for m in metrics:
            row.append(r["aggregate"].get(m))
            d = r["delta"].get(m)
            text = "—" if d is None else signed_delta(d)
            if text != "±0":
                text += one_query_mark(d, n)
            row.append(text + (" !" if m in r["beyond"] else ""))
        v = r["verdicts"]
        row.append(gate_label(r))
        row.append(f"{v['ok']}/{v['regressed']}/{v['error']}")
        row.append(" ".join(s for s, on in (("R", r.get("refresh")), ("C", r.get("retriever_changes"))) if on))
        if aged:
            row.append(stale_cell(r.get("stale_labels")))
        if pooled:
            row += judged_cells(r.get("pooled"))
        if no_answer_shown(group):
            row += [r.get("no_answer", 0), r.get("false_retrieval_rate")]
        rows.append(row)
    headers = ["run", "created", "commit"] + [h for m in metrics for h in (m, "Δ")] + \
              ["gate", "ok/regr/err", "marks"] + ["stale labels"] * aged + judged_headers(group) * pooled + \
              (["no answer", "false_retrieval_rate"] if no_answer_shown(group) else [])
    return markdown_table(headers, rows)


def no_answer_shown(group: Mapping[str, Any]) -> bool:
    """Whether any run of the group had questions marked answerable: false (their columns are shown then)."""
    return any(r.get("no_answer") for r in group["runs"])


def judged_headers(group: Mapping[str, Any]) -> list[str]:
    """The pooled columns' headers, with the k the last pooled night measured at."""
    k = next((r["pooled"].get("k") for r in reversed(group["runs"]) if r.get("pooled")), None) or "k"
    return [f"judged@{k}", "inconclusive"]


def judged_cells(pooled: Mapping[str, Any] | None) -> list[str]:
    """A night's judged@k and inconclusive count (with its unjudged documents); ``—`` for a closed set."""
    if not pooled:
        return ["—", "—"]
    judged = pooled.get("judged")
    return ["—" if judged is None else f"{judged:.4f}",
            f"{len(pooled['inconclusive'])} ({pooled['to_judge']} to judge)" if pooled["inconclusive"]
            else "0"]


def stale_cell(ages: Mapping[str, Any] | None) -> str:
    """A night's share of stale labels: ``2/40 (5.0%), 1 undated``; ``—`` when it set no age limit."""
    if not ages:
        return "—"
    share = ages.get("share")
    text = f"{ages['stale']}/{ages['checked']}" + (f" ({share:.1%})" if share is not None else "")
    return text + (f", {ages['undated']} undated" if ages.get("undated") else "")


def _tags_table(group: Mapping[str, Any]) -> str:
    metrics = group["metrics"]
    first, last = group["runs"][0], group["runs"][-1]
    since = len(group["runs"]) > 1
    rows = []
    for tag in group["tags"]:
        a, b = first["tags"].get(tag), last["tags"].get(tag)
        row: list[object] = [tag, b["n"] if b else "—"]
        for m in metrics:
            old = a["means"].get(m) if a else None
            new = b["means"].get(m) if b else None
            row.append(new)
            if since:
                row.append("—" if old is None or new is None else signed_delta(new - old))
        rows.append(row)
    headers = [h for m in metrics for h in ((m, f"Δ since #{first['index']}") if since else (m,))]
    return markdown_table(["tag", "n", *headers], rows)


def _group_text(group: Mapping[str, Any], md: bool, min_flips: int) -> list[str]:
    """One group's section; plain lines (escaped here) and ready tables."""
    runs = group["runs"]
    out: list[str] = []

    def say(line: str = "") -> None:
        out.append(escape_cell(line))

    h2, h3 = ("## ", "### ") if md else ("== ", "")
    bullet = "- " if md else "  "

    def heading(title: str) -> None:
        say()
        say(f"{h3}{title}" if md else f"{title}:")

    span = (f"{short_time(runs[0]['created'])} to {short_time(runs[-1]['created'])}" if len(runs) > 1
            else short_time(runs[0]["created"]))
    say(f"{h2}Group {group['group']}: {counted(len(runs), 'run')}, {span}" + ("" if md else " =="))
    say(f"Measured: {measured_line(group['measured'])}")
    say(f"Files: {listed([r['path'] for r in runs])}")
    if group["differs"]:
        say("Not comparable with group 1, so never in its series: " + "; ".join(group["differs"]))
    say()
    out.append(_runs_table(group))
    if len(runs) > 1:
        say("Δ: change from the run before; ! fell more than the allowed drop in one step (the gate's to judge). "
            "Marks: R baseline refreshed, C retriever changed.")
    if no_answer_shown(group):
        say("No answer: questions marked answerable: false, outside n and the means; false_retrieval_rate is the "
            "share that got a result counted as an answer (lower is better).")
    say(sample_size_note(runs[-1]["n"]))
    marks = [(r, line) for r in runs for line in timeline_marks(r)]
    if marks:
        heading("Timeline")
        for r, line in marks:
            say(f"{bullet}#{r['index']} {short_time(r['created'])}: {line}")
    if len(runs) > 1:
        heading("Drift")
        checked = [m for m in group["metrics"] if any(m in r["tolerance"] for r in runs)]
        unchecked = [m for m in group["metrics"] if m not in checked]
        for d in group["drift"]:
            say(f"{bullet}DRIFT {drift_line(d)}")
        if not group["drift"]:
            say(f"{bullet}No drift in {', '.join(checked) or 'any metric'}.")
        if unchecked:
            say(f"{bullet}Not checked (no allowed drop recorded): {', '.join(unchecked)}.")
    if group["tags"]:
        since = (f", and its change since run #{runs[0]['index']} (every run: --format json or --html)"
                 if len(runs) > 1 else "")
        heading(f"Per tag, run #{runs[-1]['index']}" + since)
        out.append(_tags_table(group))
    if len(runs) > 1:
        heading("Flaky queries")
        for f in group["flaky"]:
            say(f"{bullet}{f['qid']}: {counted(f['n_flips'], 'change')} in {counted(f['runs'], 'run')}: "
                + "; ".join(flip_text(x) for x in f["flips"]))
        if not group["flaky"]:
            say(f"{bullet}None changed verdict {counted(min_flips, 'time')} or more.")
    return out


def history_text(data: Mapping[str, Any], markdown: bool = False) -> str:
    """The whole history: one section a group, largest group first, then the rules applied."""
    groups: Sequence[Mapping[str, Any]] = data["groups"]
    min_flips = int(data.get("min_flips", 2))
    title = (f"{counted(data['n_artifacts'], 'run artifact')} in {counted(len(groups), 'group')}"
             + (" measured differently (never mixed in one series)" if len(groups) > 1 else ""))
    out = [("# Retrieval history: " if markdown else "ragmetrics history: ") + title]
    for skipped in data.get("skipped") or []:
        out.append(escape_cell(f"Skipped {skipped['path']}: {skipped['problem']}"))
    if data.get("current_drift"):
        out.append("DRIFT in the latest baseline period: see below.")
    for group in groups:
        out.append("")
        out.extend(_group_text(group, markdown, min_flips))
    out.append("")
    out.append("## Rules" if markdown else "Rules:")
    out.append(escape_cell(f"{DRIFT_RULE}."))
    out.append(escape_cell(f"{FLAKY_RULE}; a query is listed from {counted(min_flips, 'change')}."))
    return "\n".join(_paragraphs(out) if markdown else out).rstrip() + "\n"


def _paragraphs(lines: list[str]) -> list[str]:
    """Markdown needs a blank line around a table (a line right after one is read as a row)
    and between two lines meant as two paragraphs; list items stay together."""
    out: list[str] = []
    for line in lines:
        block = line.startswith("|") or line.startswith("#")
        if out and out[-1] and line and (block or out[-1].startswith(("|", "#"))
                                         or not (line.startswith("- ") and out[-1].startswith("- "))):
            out.append("")
        out.append(line)
    return out
