"""``ragmetrics leakage``: golden questions found verbatim or nearly so in the corpus."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from pytest_ragmetrics.cli import decided
from pytest_ragmetrics.cli.argtypes import chunk_size_arg, path_arg
from pytest_ragmetrics.errors import RagMetricsError
from pytest_ragmetrics.report.tables import counted
from pytest_ragmetrics.tools.leakage import CHAR_N, DEFAULT_THRESHOLD, WORD_N, check_leakage, render_table

HELP = 'find golden questions that appear verbatim or nearly so in the corpus'


def register(verbs: Any) -> None:
    parser = verbs.add_parser('leakage', help=HELP)
    parser.set_defaults(command=run)
    parser.add_argument("--golden", required=True, type=path_arg,
                        help="golden set: YAML, JSONL or a folder with queries.jsonl + qrels")
    parser.add_argument("--corpus", required=True, type=path_arg,
                        help="corpus: a folder of .md/.txt files, a corpus.jsonl, or a folder holding one")
    parser.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD, metavar="SHARE",
                        help="near-verbatim when at least this share of a question's n-grams occur in one "
                             "document or chunk (default 0.6)")
    parser.add_argument("--chunk-size", type=chunk_size_arg, default=None, metavar="N",
                        help="check chunks of N characters as the reference stack cuts them and name the chunk "
                             "(default: whole documents, which also finds questions split by a chunk boundary)")
    parser.add_argument("--overlap", type=int, default=60, metavar="N",
                        help="characters shared by consecutive chunks with --chunk-size (default 60)")
    parser.add_argument("--word-n", type=int, default=WORD_N, metavar="N",
                        help="word n-gram size for Latin-script questions (default 5; smaller tolerates more edits)")
    parser.add_argument("--char-n", type=int, default=CHAR_N, metavar="N",
                        help="character n-gram size for CJK questions (default 8)")
    parser.add_argument("--per-question", type=int, default=5, metavar="N",
                        help="table rows per question at most (default 5; JSON lists every match)")
    parser.add_argument("--format", choices=("table", "json"), default="table",
                        help="a table for people (default) or JSON for scripts")
    parser.add_argument("--fail", action="store_true", help="exit 1 when any question leaks (for CI)")


def run(args: argparse.Namespace) -> int:
    """Run the verb on parsed arguments: 0 done (leaks are a report), 1 leaks with --fail."""
    if args.per_question < 1:
        raise RagMetricsError(f"--per-question must be >= 1, got {args.per_question}")
    report = check_leakage(args.golden, args.corpus, threshold=args.threshold, chunk_size=args.chunk_size,
                           overlap=args.overlap, word_n=args.word_n, char_n=args.char_n)
    code = decided(args, 1 if args.fail and report.leaks else 0)  # before any output can fail
    if args.format == "json":
        json.dump(report.to_dict(), sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render_table(report, args.per_question))
    if args.fail and report.leaks:
        print(f"ragmetrics leakage: {counted(len(report.leaked_qids), 'question leaks', 'questions leak')} into the "
              "corpus (--fail)", file=sys.stderr)
    return code
