"""``ragmetrics export``: a run artifact as a TREC run, a golden set as TREC qrels.

So anyone can check the numbers with trec_eval, ranx or ir_measures: the run
keeps each query's ranking (documents after chunk mapping and dedup) in order,
written with descending scores so trec_eval's sort reproduces it exactly.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence

from ._errors import InputError, RagMetricsError
from ._golden import load_golden, loads_json
from ._trec import write_qrels, write_run

__all__ = ["add_arguments", "run", "main"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--artifact", help="run artifact written by --rag-report")
    parser.add_argument("--run-out", help="where to write the TREC run (with --artifact)")
    parser.add_argument("--golden", help="golden set in any format load_golden reads")
    parser.add_argument("--qrels-out", help="where to write TREC qrels (with --golden)")
    parser.add_argument("--tag", default="ragmetrics", help="run tag, the sixth column (default ragmetrics)")
    parser.add_argument("--force", action="store_true", help="overwrite existing output files")


def _target(path: str, force: bool) -> Path:
    out = Path(path)
    if out.exists() and not force:
        raise InputError(str(out), None, "exists; pass --force to overwrite it")
    return out


def run(args: argparse.Namespace) -> int:
    if not (args.artifact and args.run_out) and not (args.golden and args.qrels_out):
        raise RagMetricsError("give --artifact with --run-out, and/or --golden with --qrels-out")
    if bool(args.artifact) != bool(args.run_out) or bool(args.golden) != bool(args.qrels_out):
        raise RagMetricsError("--artifact goes with --run-out, --golden with --qrels-out")
    if args.artifact:
        path = Path(args.artifact)
        try:
            data = loads_json(path.read_text(encoding="utf-8"))
            per_query = data["per_query"]
            rankings = {qid: list(entry.get("ranking") or []) for qid, entry in per_query.items()}
        except FileNotFoundError:
            raise InputError(str(path), None, "file not found") from None
        except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:
            raise InputError(str(path), None, f"not a run artifact (written by --rag-report): {exc}") from None
        out = _target(args.run_out, args.force)
        with out.open("w", encoding="utf-8") as fh:
            write_run(fh, rankings, tag=args.tag)
        print(f"wrote {sum(map(len, rankings.values()))} lines for {len(rankings)} queries to {out}")
    if args.golden:
        golden = load_golden(args.golden)
        out = _target(args.qrels_out, args.force)
        with out.open("w", encoding="utf-8") as fh:
            write_qrels(fh, golden.qrels)
        print(f"wrote {sum(len(q.judgments) for q in golden)} judgments for {len(golden)} queries to {out}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``ragmetrics export …`` from Python: the command's own parsing and exit codes."""
    from .cli import main as cli_main

    return cli_main(["export", *(sys.argv[1:] if argv is None else argv)])