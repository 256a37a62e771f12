"""``ragmetrics compare A B``: judge run B against reference A, with the plugin's checks and report."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Mapping

from pytest_ragmetrics.cli import decided
from pytest_ragmetrics.cli.argtypes import (
    check_outputs,
    measurement_arguments,
    output_argument,
    path_arg,
    two_sided_verb,
)
from pytest_ragmetrics.errors import InputError, RagMetricsError, listed, shown
from pytest_ragmetrics.files import atomic_write_text, dumps_stable, write_problem
from pytest_ragmetrics.gate.thresholds import Thresholds, load_thresholds, recorded_thresholds, stricter
from pytest_ragmetrics.golden import GoldenSet, Query, load_golden, load_qrels
from pytest_ragmetrics.measures import MeasurementConfig
from pytest_ragmetrics.output_paths import HTML
from pytest_ragmetrics.report.tables import markdown_table
from pytest_ragmetrics.report.text import tradeoff_rows, verdict_text
from pytest_ragmetrics.tools.compare import (
    check_false_retrieval,
    check_recorded_metrics,
    check_scorability,
    compare,
    describe_measurement,
    gated,
    labels_of,
    load_run_data,
    metric_names,
    mismatch,
    missing_from,
    pooled_text_of,
    shared_only,
    stale_text,
    subset_of,
)

HELP = "judge run B against reference A with the plugin's gate (artifacts, baselines, TREC runs)"


def register(verbs: Any) -> None:
    parser = two_sided_verb(verbs, "compare", HELP, run, a="reference: run artifact, baseline.json or TREC run",
                            b="candidate: run artifact, baseline.json or TREC run")
    parser.add_argument("--qrels", type=path_arg,
                        help="judgments, needed when A or B is a TREC run; also the gold documents of the report "
                             "when --golden is not given")
    parser.add_argument("--golden", type=path_arg,
                        help="golden set, for question texts, tags and gold documents in the report; also "
                             "recomputes each side's per-query metrics from its recorded ranking and refuses a side "
                             "whose numbers differ")
    parser.add_argument("-m", "--metric", action="append", dest="metrics", metavar="NAME@K",
                        help="metrics to compare (default: those both sides have)")
    parser.add_argument("--thresholds", type=path_arg,
                        help="thresholds.json with the plugin's keys (default: the thresholds A and B were gated "
                             "with, as their artifacts record them, the stricter of the two per key when both do; "
                             "else no recall drop)")
    parser.add_argument("--worst", type=int, help="worst regressed queries to list (default: worst_n)")
    parser.add_argument("--fail-on-regression", action="store_true",
                        help="exit 1 when B fails against A with the plugin's rules: a gate fails, a query "
                             "falls beyond its per-query tolerance, errored, or is missing from B")
    parser.add_argument("--shared-only", action="store_true",
                        help="compare only the queries both A and B hold (a full run against a smoke run, "
                             "on the smoke run's queries); the output says how many were left out. Without it "
                             "a query of A missing from B counts as errored")
    parser.add_argument("--accept-mismatch", action="store_true",
                        help="compare even when A and B were measured differently (measurement config, k or "
                             "judgments); the differences are printed with the report")
    measurement_arguments(parser, scope="TREC runs")  # artifacts and baselines keep their own rules
    output_argument(parser, "--html", writes=HTML, metavar="PATH",
                    help="also write the self-contained HTML report (never one "
                                                           "of the inputs)")
    parser.add_argument("--format", choices=("table", "json"), default="table",
                        help="a table for people (default) or JSON for scripts")


def recorded_golden_of(side: Any, path: str) -> str | None:
    """The golden set a run artifact records it was judged with, where it is found from here (None if not)."""
    from pytest_ragmetrics.tools.pool import recorded_golden

    recorded = side.meta.get("golden") if isinstance(side.meta, Mapping) else None
    source = recorded.get("source") if isinstance(recorded, Mapping) else None
    found = recorded_golden(source, path)[0] if isinstance(source, str) and source else None
    return str(found) if found is not None else None


def run(args: argparse.Namespace) -> int:
    check_outputs(args, [("run A", args.a), ("run B", args.b), ("the qrels (--qrels)", args.qrels),
                         ("the golden set (--golden)", args.golden), ("the thresholds file (--thresholds)",
                                                                     args.thresholds)])
    trec_config = MeasurementConfig(tuple(args.metrics) if args.metrics else MeasurementConfig().measures,
                                    relevance_level=args.relevance_level, gain=args.gain,
                                    id_separator=args.id_separator or None)
    config = trec_config if args.metrics else None
    qrels = load_qrels(args.qrels) if args.qrels else None
    a = load_run_data(args.a, qrels, trec_config)
    b = load_run_data(args.b, qrels, trec_config)
    left_out: tuple[list[str], list[str]] = ([], [])
    if args.shared_only:
        a, b, *cut = shared_only(a, b)
        left_out = (cut[0], cut[1])
        if not a.has_any() or not b.has_any():
            raise RagMetricsError(f"{args.a} and {args.b} share no query, so --shared-only leaves nothing to compare")
    if args.thresholds and not Path(args.thresholds).exists():
        raise InputError(args.thresholds, None, "file not found")
    golden = load_golden(args.golden) if args.golden else None
    if golden is None and qrels is not None:  # gold documents for the report; TREC has no question texts
        golden = GoldenSet(args.qrels, tuple(Query(q, "", j) for q, j in qrels.items()))
    check_scorability(a, b, golden if args.golden else None)
    if args.golden:
        check_recorded_metrics(a, b, golden)  # type: ignore[arg-type]
        check_false_retrieval(a, b, golden)  # type: ignore[arg-type]
    problems = mismatch(a, b, golden if args.golden else None)
    if problems and not args.accept_mismatch:
        raise RagMetricsError(
            f"{args.a} and {args.b} were measured differently, so comparing them would mislead:\n  - "
            + "\n  - ".join(problems)
            + "\nMeasure both the same way (for TREC runs: --gain, --relevance-level, --id-separator), "
            "or pass --accept-mismatch to compare anyway."
        )
    measured_a, measured_b = metric_names(None, a), metric_names(None, b)
    wanted = config.metric_names if config is not None else None
    names_a = [m for m in wanted or measured_a if m in measured_a]
    names_b = [m for m in wanted or measured_b if m in measured_b]
    unmeasured = [m for m in wanted or () if m not in measured_a and m not in measured_b]
    if unmeasured:
        raise RagMetricsError(f"neither {args.a} nor {args.b} measured {', '.join(unmeasured)} (A: {measured_a}, "
                              f"B: {measured_b})")
    metrics = [m for m in names_a if m in names_b]
    if not metrics:
        raise RagMetricsError(f"{args.a} and {args.b} share no metric (A: {names_a}, B: {names_b})")
    # never narrowed silently: a metric A measured and B lacks fails the gate A has on it, else is named
    only_a, only_b = [m for m in names_a if m not in names_b], [m for m in names_b if m not in names_a]
    gating = MeasurementConfig(tuple(metrics + only_a))
    if args.thresholds:
        thresholds = load_thresholds(args.thresholds, gating)
    else:  # judge B as it was gated when it ran: a nightly compare must not be laxer than the gate
        recorded_a = recorded_thresholds(a.meta, gating, args.a)
        recorded_b = recorded_thresholds(b.meta, gating, args.b)
        if recorded_a and recorded_b:  # neither file alone may loosen the gate
            thresholds = stricter(recorded_a, recorded_b, f"the stricter of A's and B's recorded thresholds "
                                                          f"(A: {recorded_a.path}; B: {recorded_b.path})")
        else:
            thresholds = recorded_b or recorded_a or Thresholds.defaults(gating)
    thresholds_source = thresholds.path or f"defaults ({thresholds.defaults_text()})"
    level = b.meta.get("measurement", {}).get("relevance_level", 1) if isinstance(b.meta, Mapping) else 1
    labels = labels_of(b, thresholds)
    verdict, tally = compare(a, b, thresholds, metrics, golden, level if isinstance(level, int) else 1, only_a,
                             labels, args.golden or (recorded_golden_of(b, args.b) if b.pooled is not None else None))
    if labels is None and thresholds.fail_on_stale_labels:
        verdict.warnings.append(f"stale-labels not checked: fail_on_stale_labels is true ({thresholds_source}), but "
                                f"B ({b.source}) records no label ages (comparison.stale_labels); run it under "
                                "an age limit (max_label_age_days) to gate them")
    not_compared = [f"{m} (measured by A, not by B; {'its gate fails' if gated(m, thresholds) else 'not gated'})"
                    for m in only_a] + [f"{m} (measured by B, not by A)" for m in only_b]
    missing = missing_from(a, b)
    reasons = verdict.failures()  # a query missing from B is an errored query of B
    subsets = {"A": subset_of(a), "B": subset_of(b)}
    subset_note = None
    if missing and subsets["A"] != subsets["B"]:
        subset_note = (f"A ran the {subsets['A'] or 'unrecorded'} subset, B the {subsets['B'] or 'unrecorded'} "
                       f"subset (_meta.subset): the {len(missing)} queries of A that B did not run count as errored. "
                       "Pass --shared-only to compare only the queries both ran")
    failed = bool(reasons) and thresholds.fail_on_regression
    code = decided(args, 1 if args.fail_on_regression and failed else 0)  # before any output can fail
    worst = args.worst if args.worst is not None else thresholds.worst_n
    measured = {"A": describe_measurement(a), "B": describe_measurement(b)}
    no_answer = {label: {"n": len(side.no_answer), "false_retrieval_rate": side.false_retrieval_rate(),
                         "answer_threshold": side.answer_threshold}
                 for label, side in (("A", a), ("B", b))}
    if args.html:
        from pytest_ragmetrics.report.html import render_html

        artifact = {"_meta": {**b.meta, "worst_n": worst, "measurement": {"metrics": metrics}},
                    "n": verdict.n, "comparison": verdict.to_dict(),
                    "per_query": {q: {"status": "error" if q in b.errors or q in missing else "scored",
                                      "metrics": b.metrics.get(q), "baseline": a.metrics.get(q),
                                      "tags": b.tags.get(q, [])} for q in dict.fromkeys([*a.metrics, *b.metrics])}}
        html = Path(args.html)
        try:
            atomic_write_text(html, render_html(artifact, title=f"{Path(args.b).name} vs {Path(args.a).name}"))
        except OSError as exc:
            raise RagMetricsError(f"cannot write the HTML report {html}: {write_problem(html, exc)}") from None
    if args.format == "json":
        payload = verdict.to_dict()
        payload["wins_ties_losses"] = {m: dict(zip(("wins", "ties", "losses"), t)) for m, t in tally.items()}
        payload["missing"] = missing
        payload["measured"] = measured
        payload["mismatch"] = problems
        payload["failures"] = reasons
        payload["subsets"] = subsets
        payload["subset_note"] = subset_note
        payload["shared_only"] = ({"left_out_of_A": left_out[0], "left_out_of_B": left_out[1]} if args.shared_only
                                  else None)
        payload["passed"] = not failed
        payload["thresholds"] = thresholds_source
        payload["not_compared"] = {"only_in_A": only_a, "only_in_B": only_b}
        payload["metrics_recomputed"] = bool(args.golden)
        payload["stale_labels"] = {"A": a.stale_labels, "B": b.stale_labels}
        payload["pooled"] = {"A": a.pooled, "B": b.pooled}
        payload["no_answer"] = no_answer
        sys.stdout.write(dumps_stable(payload))
    else:
        print(f"{args.b} against {args.a}")
        if measured["A"] == measured["B"]:
            print(f"A and B: {measured['A']}")
        else:
            print(f"A: {measured['A']}\nB: {measured['B']}")
        print(f"Thresholds: {thresholds_source}")
        if a.stale_labels or b.stale_labels:
            print(f"Label ages: A: {stale_text(a)}; B: {stale_text(b)}")
        if a.pooled or b.pooled:
            print(f"Judgments: A: {pooled_text_of(a)}; B: {pooled_text_of(b)}")
        if args.shared_only:
            print(f"Shared queries only (--shared-only): {len(left_out[0])} queries of A and {len(left_out[1])} of B "
                  "left out, not in both" + (f" (A: {listed(left_out[0])})" if left_out[0] else "")
                  + (f" (B: {listed(left_out[1])})" if left_out[1] else ""))
        if not_compared:
            print(f"Not compared: {'; '.join(not_compared)}")
        if not args.golden:
            print("Per-query metrics are taken as recorded in A and B; pass --golden to recompute them from "
                  "each side's ranking")
        if problems:
            print("Measured differently (compared anyway, --accept-mismatch):\n  - " + "\n  - ".join(problems))
        print(f"Queries: {len(a.metrics)} scored in A; {len(missing)} missing from B"
              + (f" ({listed(missing)}; each counts as errored, "
                 "every metric 0)" if missing else "") + ", "
              f"{len(verdict.new)} new in B (scored, not compared)"
              + (f": {listed(verdict.new)}" if verdict.new else ""))
        if a.no_answer or b.no_answer:
            print("Questions with no answer (answerable: false, scored by false retrieval; lower is better): "
                  + "; ".join(f"{label} {row['n']}, false_retrieval_rate "
                              + ("—" if row["false_retrieval_rate"] is None else f"{row['false_retrieval_rate']:.4f}")
                              + " (answer threshold "
                                f"{'none' if row['answer_threshold'] is None else row['answer_threshold']})"
                              for label, row in no_answer.items()))
        if subset_note:
            print(subset_note + ".")
        print()
        tradeoff = verdict.no_answer.tradeoff if verdict.no_answer is not None else []
        no_recall = bool(tradeoff) and all(row.recall is None for row in tradeoff)
        rates = [[threshold, rate] for threshold, _, rate in tradeoff_rows(verdict)]
        if no_recall:  # a recall column of dashes says nothing: B's false-retrieval rates alone, after the report
            verdict.no_answer.tradeoff = []  # type: ignore[union-attr]
        print(verdict_text(verdict, worst))
        if no_recall:
            print("\nAnswer threshold trade-off of B (from its scores: the false-retrieval rate of the unanswerable "
                  "questions keeping only results scoring at or above the threshold; "
                  + ("pass --golden for the recall of the answerable questions beside it" if not args.golden else
                     "B records no scores for its answerable questions, so their recall is not known")
                  + "):")
            print(markdown_table(["threshold", "false_retrieval_rate"], rates))
        for r in verdict.inconclusive:
            print(f"Inconclusive: {shown(r.qid)}: judge {shown(', '.join(r.unjudged))} (B's new unjudged documents; "
                  "its drop against A is within tolerance if they are relevant)")
        print("\nPer query, B against A:")
        print(markdown_table(["metric", "wins", "ties", "losses"], [[m, *t] for m, t in tally.items()]))
        if failed and not args.fail_on_regression:
            print("\nexit 0: pass --fail-on-regression to exit 1 on a failed gate")
        elif reasons and not failed:
            print(f"\nexit 0: fail_on_regression is false in the thresholds ({thresholds_source})")
    return code
