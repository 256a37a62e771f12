"""``ragmetrics history ARTIFACTS...``: nightly run artifacts read together (series, drift, flaky queries)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from pytest_ragmetrics.cli import decided
from pytest_ragmetrics.cli.argtypes import check_outputs, output_argument, path_arg
from pytest_ragmetrics.errors import RagMetricsError
from pytest_ragmetrics.files import atomic_write_text, dumps_stable, write_problem
from pytest_ragmetrics.output_paths import HTML
from pytest_ragmetrics.report.history import history_text
from pytest_ragmetrics.tools.history import build_history, load_artifacts

HELP = "read nightly run artifacts together: each metric over time, per tag, drift and flaky queries"

__all__ = ["HELP", "register", "run"]


def register(verbs: Any) -> None:
    parser = verbs.add_parser("history", help=HELP, description=HELP)
    parser.set_defaults(command=run)
    parser.add_argument("artifacts", metavar="ARTIFACT", nargs="+", type=path_arg,
                        help="run artifacts written by --rag-report, or folders (every *.json in them)")
    parser.add_argument("--format", choices=("text", "json", "markdown"), default="text",
                        help="text for the terminal (default), json for scripts, markdown for a job summary")
    output_argument(parser, "--html", writes=HTML, metavar="PATH",
                    help="also write a self-contained HTML page with the charts "
                                                           "(never one of the artifacts, nor inside a folder of them)")
    parser.add_argument("--fail-on-drift", action="store_true",
                        help="exit 1 when drift is flagged in the latest baseline period of the newest run's group")
    parser.add_argument("--skip-bad", action="store_true",
                        help="warn about a file that is not a run artifact and read the others (default: stop)")
    parser.add_argument("--min-flips", type=int, default=2, metavar="N",
                        help="list a query as flaky when its verdict changed at least N times (default 2)")


def run(args: argparse.Namespace) -> int:
    check_outputs(args, [("the run artifact", path) for path in args.artifacts])
    if args.min_flips < 1:
        raise RagMetricsError(f"--min-flips must be at least 1, got {args.min_flips}")
    artifacts, skipped = load_artifacts(args.artifacts, skip_bad=args.skip_bad)
    for path, problem in skipped:
        print(f"ragmetrics history: warning: skipped {path}: {problem}", file=sys.stderr)
    history = build_history(artifacts, args.min_flips, skipped)
    data = history.to_dict()
    code = decided(args, 1 if args.fail_on_drift and history.current_drift else 0)  # before any output can fail
    if args.html:
        from pytest_ragmetrics.report.trend_html import render_trend_html

        html_path = Path(args.html)
        try:
            atomic_write_text(html_path, render_trend_html(data))
        except OSError as exc:
            raise RagMetricsError(f"cannot write the HTML page {html_path}: {write_problem(html_path, exc)}") from None
    if args.format == "json":
        sys.stdout.write(dumps_stable(data))
    else:
        sys.stdout.write(history_text(data, markdown=args.format == "markdown"))
    return code
