"""``ragmetrics merge SHARDS --out run.json``: the shards of one run (``--rag-shard I/N``), judged as one."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Sequence

from pytest_ragmetrics.cli import decided
from pytest_ragmetrics.cli.argtypes import check_outputs, output_argument, path_arg
from pytest_ragmetrics.errors import BaselineError, RagMetricsError, visible
from pytest_ragmetrics.files import atomic_write_json, atomic_write_text, write_problem
from pytest_ragmetrics.gate.artifact import seal_artifact
from pytest_ragmetrics.output_paths import ARTIFACT, HTML, MARKDOWN, check_output
from pytest_ragmetrics.report.tables import counted
from pytest_ragmetrics.tools.merge import (
    MAX_SPREAD_HOURS,
    Merged,
    merge_shards,
    refresh_baseline,
    shown_path,
    write_refreshed,
)

HELP = "judge the shards of one run (--rag-shard I/N) as one run: one verdict, artifact and report"


def register(verbs: Any) -> None:
    parser = verbs.add_parser("merge", help=HELP, description=HELP + ". Run it in the project's checkout: the "
                              "golden set and the baseline are read from there, and refused unless they are the "
                              "ones the shards ran with.")
    parser.set_defaults(command=run)
    parser.add_argument("shards", nargs="+", metavar="SHARD", type=path_arg,
                        help="every shard's run artifact (--rag-report)")
    output_argument(parser, "--out", writes=ARTIFACT, metavar="PATH",
                    help="write the merged run artifact here: the one a whole run "
                                                          "writes, its time aside")
    output_argument(parser, "--markdown", writes=MARKDOWN, metavar="PATH",
                    help="append the verdict as Markdown here (e.g. "
                                                               "\"$GITHUB_STEP_SUMMARY\")")
    output_argument(parser, "--html", writes=HTML, metavar="PATH", help="write the self-contained HTML report here")
    parser.add_argument("--worst", type=int, metavar="N", help="worst regressed queries to list (default: worst_n)")
    parser.add_argument("--update-baseline", action="store_true",
                        help="refresh the baseline from the merged shards, with the plugin's refusals (a query "
                             "that did not run or errored, gold ids not in the corpus)")
    parser.add_argument("--allow-missing-gold", action="store_true",
                        help="let --update-baseline write a baseline although relevant gold ids are not in the "
                             "corpus (as --rag-allow-missing-gold)")
    parser.add_argument("--golden", metavar="PATH", type=path_arg,
                        help="the golden set (default: the path the shards recorded, from the current folder)")
    parser.add_argument("--baseline", metavar="PATH", type=path_arg,
                        help="the baseline (default: the path the shards recorded, from the current folder)")
    parser.add_argument("--reason", metavar="TEXT",
                        help="with --update-baseline: why it lowers a gated value (as --rag-reason), kept in the "
                             "baseline's _meta.lowerings; a refresh that lowers one without it is refused")
    parser.add_argument("--baseline-ref", metavar="REF",
                        help="compare the baseline with its version at git REF, as --rag-baseline-ref does: gate "
                             "baseline-lowered fails on a gated value lower than there with no reason recorded "
                             "since (default: a GitHub Actions pull request's base branch, when fetched)")
    parser.add_argument("--max-spread", type=float, metavar="HOURS", default=MAX_SPREAD_HOURS,
                        help="when no shard records a run id (_meta.run_id, from --rag-run-id or the CI's run "
                             "variables), refuse shards whose times lie more than this apart, as not one run "
                             f"(default: {MAX_SPREAD_HOURS:g})")


def _check_outputs(args: argparse.Namespace, also: Sequence[tuple[str, str | Path | None]] = ()) -> None:
    """Refuse, before anything is read or written, an output that is one of the inputs (a shard, the
    golden set, the baseline), another output, or cannot be written: a refresh must not write the
    baseline and then fail on --out."""
    check_outputs(args, [*(("a shard", shard) for shard in args.shards), ("the golden set", args.golden),
                         ("the baseline", args.baseline), *also], writes={"--out": "a run artifact"})
    for flag in ("out", "html", "markdown"):
        if getattr(args, flag):
            check_output(getattr(args, flag), example="run.json" if flag == "out" else f"report.{flag[:4]}")


def _header(merged: Merged) -> str:
    """The merge's first line: which shards, with their query counts (and attempts, when recorded); a
    retried shard's warning follows it."""
    from pytest_ragmetrics.report.text import retried_text

    shards = ", ".join(f"{s.spec} {s.path} ({len(s.section['queries'])}"
                       + (f", attempt {s.attempt})" if s.attempt is not None else ")") for s in merged.shards)
    retried = retried_text(merged.artifact["_meta"].get("shards"))
    source = merged.meta.get("golden", {}).get("source") if isinstance(merged.meta.get("golden"), dict) else None
    return (f"Merged {counted(len(merged.shards), 'shard')} of {counted(len(merged.golden), 'query', 'queries')}"
            + (f" from {source}" if source else "") + f": {shards}" + (f"\n{retried}" if retried else ""))


def run(args: argparse.Namespace) -> int:
    if args.worst is not None and args.worst < 0:
        raise RagMetricsError(f"--worst must be an integer >= 0, got {args.worst}")
    if not args.max_spread >= 0:
        raise RagMetricsError(f"--max-spread must be a number of hours >= 0, got {args.max_spread}")
    _check_outputs(args)
    if args.reason is not None:
        args.reason = visible(args.reason)
        if not args.reason:
            raise RagMetricsError("--reason was given an empty reason (an unset variable?); say in words why the "
                                  "baseline goes down: the reason is kept in the baseline for review")
        if not args.update_baseline:
            raise RagMetricsError("--reason records why --update-baseline lowers the baseline; it goes with "
                                  "--update-baseline")
    if args.baseline_ref is not None and (not args.baseline_ref.strip() or args.baseline_ref.startswith("-")):
        raise RagMetricsError(f"--baseline-ref must be a git ref such as origin/main, got {args.baseline_ref!r}")
    merged = merge_shards(args.shards, golden=args.golden, baseline=args.baseline, out=args.out,
                          updating=args.update_baseline, max_spread=args.max_spread,
                          baseline_ref=args.baseline_ref)
    _check_outputs(args, [("the baseline", merged.baseline_path),
                          ("the golden set", merged.full_golden.source or None)])
    if args.update_baseline:
        return _refresh(args, merged)
    verdict = merged.verdict
    code = decided(args, 0 if verdict.passed else 1)  # before any output can fail
    worst = args.worst if args.worst is not None else merged.thresholds.worst_n
    _write_artifact(args, merged)
    if args.html:
        _write_html(args, merged, worst)
    if args.markdown:
        _append_markdown(args, merged, worst)
    print(_header(merged))
    print(_summary(args, merged, worst))
    return code


def _pooled(args: argparse.Namespace, merged: Merged, markdown: bool) -> str | None:
    """A pooled set's part of the report, as the plugin writes it (naming the merged artifact)."""
    if merged.verdict.judgments != "pooled":
        return None
    from pytest_ragmetrics.report.pooled import pooled_markdown, pooled_text
    from pytest_ragmetrics.unanswerable import FALSE_RETRIEVAL

    meta = merged.recorded
    base = merged.baseline
    lacks_top = base is not None and any("_top" not in e for e in base.per_query.values() if FALSE_RETRIEVAL not in e)
    golden = meta.get("golden", {}).get("source") if isinstance(meta.get("golden"), dict) else None
    return (pooled_markdown if markdown else pooled_text)(
        merged.verdict, int(meta.get("k") or 10), None, lacks_top, shown_path(Path(args.out)) if args.out else None,
        str(golden or merged.golden.source))


def _summary(args: argparse.Namespace, merged: Merged, worst: int) -> str:
    from pytest_ragmetrics.report.summary import session_summary

    verdict, gold = merged.verdict, merged.gold_check
    meta = merged.recorded
    pooled = _pooled(args, merged, markdown=False)
    late = None if gold is not None or merged.gold_unchecked is None \
        else f"WARNING: gold ids not checked: {merged.gold_unchecked}"
    return session_summary(verdict, worst, lost=set(gold.lost) if gold is not None else set(),
                           gold_warning=gold.warning() if gold is not None else late,
                           retriever_before=meta.get("baseline_retriever"), retriever_now=meta.get("retriever"),
                           unjudged=bool(verdict.to_judge), pooled=pooled, mismatch=merged.mismatch)


def _refresh(args: argparse.Namespace, merged: Merged) -> int:
    from pytest_ragmetrics.report.summary import refresh_summary

    meta = merged.recorded
    try:
        change, new = refresh_baseline(merged, args.allow_missing_gold, args.reason)
    except BaselineError as exc:
        change, new = str(exc), None
    written = new is not None
    code = decided(args, 0 if written else 1)
    _write_artifact(args, merged)  # first: the baseline is written last, once everything else was
    if new is not None:
        try:
            write_refreshed(merged, new)
        except BaselineError:
            if args.out:  # it names a baseline that was not written
                Path(args.out).unlink(missing_ok=True)
            raise
    print(_header(merged))
    print(refresh_summary(change, written=written,
                          gold_warning=merged.gold_check.warning() if written and merged.gold_check else None,
                          aggregate=merged.verdict.aggregate if written else (),
                          thresholds_name=merged.thresholds.path or "thresholds",
                          retriever_before=meta.get("baseline_retriever"), retriever_now=meta.get("retriever")))
    return code


def _write_artifact(args: argparse.Namespace, merged: Merged) -> None:
    if not args.out:
        return
    out = Path(args.out)
    data = merged.artifact
    try:
        atomic_write_json(out, seal_artifact({**data, "_meta": dict(data["_meta"])}))
    except OSError as exc:
        raise RagMetricsError(f"cannot write the merged run artifact {out}: {write_problem(out, exc)}") from None


def _write_html(args: argparse.Namespace, merged: Merged, worst: int) -> None:
    from pytest_ragmetrics.report.html import render_html

    html = Path(args.html)
    data = {**merged.artifact, "_meta": {**merged.artifact["_meta"], "worst_n": worst}}
    try:
        atomic_write_text(html, render_html(data))
    except OSError as exc:
        raise RagMetricsError(f"cannot write the HTML report {html}: {write_problem(html, exc)}") from None


def _append_markdown(args: argparse.Namespace, merged: Merged, worst: int) -> None:
    from pytest_ragmetrics.report.markdown import verdict_markdown
    from pytest_ragmetrics.report.tables import escape_cell
    from pytest_ragmetrics.report.text import retried_text, retriever_changes

    meta = merged.recorded
    verdict = merged.verdict
    pooled = _pooled(args, merged, markdown=True)
    path = Path(args.markdown)
    text = verdict_markdown(verdict, worst, retriever_changes=retriever_changes(
        meta.get("baseline_retriever"), meta.get("retriever")), pooled=pooled)
    retried = retried_text(merged.artifact["_meta"].get("shards"))
    if retried:  # under the headline: a green merge of retried shards is read with it
        head, _, rest = text.partition("\n")
        text = f"{head}\n\n**{escape_cell(retried)}**\n{rest}"
    try:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(text + "\n")
    except OSError as exc:  # it only presents the verdict printed below: a warning, as in the plugin
        print(f"ragmetrics merge: warning: cannot append the Markdown summary to {path}: {write_problem(path, exc)}; "
              "the verdict stands", file=sys.stderr)

