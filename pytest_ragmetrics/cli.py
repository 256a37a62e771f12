"""The ``ragmetrics`` command: the library's calls, from a shell.

Verbs: ``evaluate`` (score a TREC run against qrels, trec_eval's job).
Exit codes: 0 done, 2 bad input or usage (the message names file, line and problem).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Sequence

from ._errors import RagMetricsError
from ._evaluate import evaluate
from ._golden import load_qrels
from ._measures import GAINS, MeasurementConfig
from ._tables import markdown_table, sample_size_note
from ._trec import read_run

__all__ = ["main", "build_parser"]

_DEFAULT_METRICS = ["recall@10", "hit_rate@10", "mrr@10", "ndcg@10"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ragmetrics", description="Retrieval metrics and regression gating.")
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")

    ev = verbs.add_parser("evaluate", help="score a TREC run file against qrels")
    ev.add_argument("--qrels", required=True, help="qrels: TREC (qid iter doc grade) or TSV (qid doc grade)")
    ev.add_argument("--run", required=True, help="TREC run file (qid Q0 doc rank score tag)")
    ev.add_argument("-m", "--metric", action="append", dest="metrics", metavar="NAME@K",
                    help=f"metric to compute, repeatable (default: {' '.join(_DEFAULT_METRICS)})")
    ev.add_argument("--relevance-level", type=int, default=1, metavar="L",
                    help="grade >= L counts as relevant (default 1)")
    ev.add_argument("--gain", choices=GAINS, default="exponential",
                    help="nDCG gain: exponential 2^g-1 (default) or linear g (trec_eval)")
    ev.add_argument("--id-separator", default="", metavar="SEP",
                    help="map ranked ids to documents by the prefix before SEP, then dedup (default: off)")
    ev.add_argument("--skip-missing", action="store_true",
                    help="leave out judged queries absent from the run (trec_eval without -c); "
                         "by default they score 0")
    ev.add_argument("--per-query", action="store_true",
                    help="also print each query's metrics in the table (JSON output always has them)")
    ev.add_argument("--format", choices=("table", "json"), default="table")
    return parser


def _cmd_evaluate(args: argparse.Namespace) -> int:
    config = MeasurementConfig(
        measures=tuple(args.metrics or _DEFAULT_METRICS),
        relevance_level=args.relevance_level,
        gain=args.gain,
        id_separator=args.id_separator or None,
    )
    qrels = load_qrels(args.qrels)
    run = read_run(args.run)
    result = evaluate(run, qrels, config, missing="skip" if args.skip_missing else "zero")
    if args.format == "json":
        payload: dict[str, object] = {"aggregate": result.aggregate, "per_query": result.per_query}
        payload["n"] = result.n
        payload["unscorable"] = result.unscorable
        payload["missing"] = result.missing
        payload["config"] = config.to_dict()
        json.dump(payload, sys.stdout, indent=2, sort_keys=False)
        sys.stdout.write("\n")
        return 0
    names = config.metric_names
    out = []
    if args.per_query:
        rows = [[qid] + [m[name] for name in names] for qid, m in result.per_query.items()]
        out.append(markdown_table(["query"] + names, rows))
        out.append("")
    out.append(markdown_table(["metric", "mean"], [[name, result.aggregate.get(name)] for name in names]))
    out.append("")
    out.append(sample_size_note(result.n))
    if result.unscorable:
        out.append(f"{len(result.unscorable)} judged queries have no relevant document at level "
                   f"{config.relevance_level} and were not scored, e.g. {result.unscorable[0]!r}.")
    if result.missing:
        verb = "left out" if args.skip_missing else "scored 0"
        out.append(f"{len(result.missing)} judged queries are absent from the run ({verb}), e.g. {result.missing[0]!r}.")
    if result.short:
        depth = config.depth
        out.append(f"{len(result.short)} queries returned fewer than {depth} documents.")
    print("\n".join(out))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.verb == "evaluate":
            return _cmd_evaluate(args)
    except RagMetricsError as exc:
        print(f"ragmetrics {args.verb}: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `ragmetrics evaluate ... | head`
        return 0
    parser.error(f"unknown verb {args.verb!r}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
