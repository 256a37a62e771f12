"""``ragmetrics evaluate``: score a TREC run against qrels, trec_eval's job."""

from __future__ import annotations

import argparse
import gc
import json
import sys
from typing import Any

from pytest_ragmetrics.cli.argtypes import measurement_arguments, path_arg
from pytest_ragmetrics.evaluation import evaluate, id_rule
from pytest_ragmetrics.golden import load_qrels
from pytest_ragmetrics.measures import DEFAULT_METRICS, MeasurementConfig
from pytest_ragmetrics.report.tables import counted, markdown_table, sample_size_note
from pytest_ragmetrics.trec import read_run


def register(verbs: Any) -> None:
    parser = verbs.add_parser("evaluate", help="score a TREC run file against qrels")
    parser.set_defaults(command=run)
    parser.add_argument("--qrels", required=True, type=path_arg,
                        help="qrels: TREC (qid iter doc grade) or TSV (qid doc grade)")
    parser.add_argument("--run", required=True, type=path_arg, help="TREC run file (qid Q0 doc rank score tag)")
    parser.add_argument("-m", "--metric", action="append", dest="metrics", metavar="NAME@K",
                        help=f"metric to compute, repeatable (default: {' '.join(DEFAULT_METRICS)})")
    measurement_arguments(parser)
    parser.add_argument("--skip-missing", action="store_true",
                        help="leave out judged queries absent from the run (trec_eval without -c); "
                             "by default they score 0")
    parser.add_argument("--per-query", action="store_true",
                        help="also print each query's metrics in the table (JSON output always has them)")
    parser.add_argument("--format", choices=("table", "json"), default="table",
                        help="a table for people (default) or JSON for scripts")


def run(args: argparse.Namespace) -> int:
    config = MeasurementConfig(
        measures=tuple(args.metrics or DEFAULT_METRICS),
        relevance_level=args.relevance_level,
        gain=args.gain,
        id_separator=args.id_separator or None,
    )
    # Reading and scoring build millions of acyclic containers; the collector would walk them
    # again and again for nothing (a fifth of the time or more on 1M run lines).
    collecting = gc.isenabled()
    gc.disable()
    try:
        qrels = load_qrels(args.qrels)
        run = read_run(args.run)
        result = evaluate(run, qrels, config, missing="skip" if args.skip_missing else "zero")
    finally:
        if collecting:
            gc.enable()
    if args.format == "json":
        payload: dict[str, object] = {"aggregate": result.aggregate, "per_query": result.per_query}
        payload["n"] = result.n
        payload["unscorable"] = result.unscorable
        payload["below_level"] = result.below_level
        payload["missing"] = result.missing
        payload["config"] = config.to_dict()
        json.dump(payload, sys.stdout, indent=2, sort_keys=False)
        sys.stdout.write("\n")
        return 0
    names = config.metric_names
    out = [f"{args.run} against {args.qrels}: relevance level {config.relevance_level}, {config.gain} gain; "
           f"{id_rule(config.id_separator)}", ""]
    if args.per_query:
        rows = [[qid] + [m[name] for name in names] for qid, m in result.per_query.items()]
        out.append(markdown_table(["query"] + names, rows))
        out.append("")
    out.append(markdown_table(["metric", "mean"], [[name, result.aggregate.get(name)] for name in names]))
    out.append("")
    out.append(sample_size_note(result.n))
    if result.unscorable:
        out.append(f"{counted(len(result.unscorable), 'judged query has', 'judged queries have')} no document "
                   f"graded above 0 and {'was' if len(result.unscorable) == 1 else 'were'} not scored, "
                   f"e.g. {result.unscorable[0]!r}.")
    if result.below_level:
        out.append(f"{counted(len(result.below_level), 'query has', 'queries have')} no document at level "
                   f"{config.relevance_level}, only lower grades, e.g. {result.below_level[0]!r}: scored as "
                   f"trec_eval scores them (nDCG from their grades, the other metrics 0).")
    if result.missing:
        verb = "left out" if args.skip_missing else "scored 0"
        out.append(f"{counted(len(result.missing), 'judged query is', 'judged queries are')} absent from the run "
                   f"({verb}), e.g. {result.missing[0]!r}.")
    if result.short:
        out.append(f"{counted(len(result.short), 'query', 'queries')} returned fewer than {config.depth} documents.")
    print("\n".join(out))
    return 0
