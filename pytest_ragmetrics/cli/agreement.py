"""``ragmetrics agreement A B``: how far two annotators agree, and where they disagree most."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pytest_ragmetrics.cli import decided
from pytest_ragmetrics.cli.argtypes import two_sided_verb
from pytest_ragmetrics.errors import RagMetricsError
from pytest_ragmetrics.tools.agreement import WEIGHTS, agreement, format_kappa, render_table

HELP = "Cohen's kappa between two annotators' judgments, and where they disagree most"


def register(verbs: Any) -> None:
    parser = two_sided_verb(verbs, "agreement", HELP, run,
                            a="first annotator's judgments (JSONL, YAML or a folder with qrels)",
                            b="second annotator's judgments, same formats")
    parser.add_argument("--weights", choices=("auto", *WEIGHTS), default="auto",
                        help="kappa weighting: none, linear or quadratic (default auto: linear when more "
                             "than two grade values occur, else none)")
    parser.add_argument("--top", type=int, default=20, metavar="N",
                        help="how many of the most-disagreeing pairs to list, in the table and in JSON (default 20)")
    parser.add_argument("--relevance-level", type=int, default=1, metavar="L",
                        help="grade >= L counts as relevant for the relevant-or-not kappa (default 1)")
    parser.add_argument("--fail-below", type=float, default=None, metavar="KAPPA",
                        help="exit 1 when kappa is below this (or undefined), for CI")
    parser.add_argument("--annotators", metavar="NAME_A,NAME_B",
                        help="who made A and who made B; required when a file records no annotator "
                             "(_meta.annotator): golden YAML, qrels, a judgments file without _meta")
    parser.add_argument("--format", choices=("table", "json"), default="table",
                        help="a table for people (default) or JSON for scripts")


def run(args: argparse.Namespace) -> int:
    """Run the verb on parsed arguments: 0 done, 1 below --fail-below; errors raise."""
    if args.top < 0:
        raise RagMetricsError(f"--top must be >= 0, got {args.top}")
    annotators = args.annotators.split(",") if args.annotators is not None else None
    if annotators is not None and (len(annotators) != 2 or not all(n.strip() for n in annotators)):
        raise RagMetricsError(f"--annotators takes two names separated by a comma, one for A and one for B "
                              f"(e.g. alice,bob), got {args.annotators!r}")
    result = agreement(Path(args.a), Path(args.b), args.weights, relevance_level=args.relevance_level,
                       annotators=annotators)
    below = args.fail_below is not None and (result.kappa is None or result.kappa < args.fail_below)
    code = decided(args, 1 if below else 0)  # before any output can fail
    from pytest_ragmetrics.tools.candidates import file_meta

    pools = [(file_meta(path) or {}).get("pool_id") for path in (args.a, args.b)]
    if all(pools) and pools[0] != pools[1]:
        print(f"note: {args.a} and {args.b} were graded from different pools; only the pairs both judged are "
              "compared, and each saw its own set of candidates", file=sys.stderr)
    if args.format == "json":
        json.dump(result.to_dict(top=args.top), sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render_table(result, args.top))
    if below:
        print(f"ragmetrics agreement: kappa {format_kappa(result.kappa)} is below --fail-below {args.fail_below}",
              file=sys.stderr)
    return code
