"""``ragmetrics pool``: pool the top documents of several modes per question for annotators."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from pytest_ragmetrics.cli._stack import first_retriever, log, parse_modes, stack_arguments, stack_factory
from pytest_ragmetrics.errors import RagMetricsError


def register(verbs: Any) -> None:
    parser = verbs.add_parser(
        "pool",
        help="pool the top documents of several modes per question into a JSONL for annotation",
        description="Union and dedup (by document) the top --depth documents of each mode per question and "
                    "write a JSONL golden set with rel left null for annotators; judgments already in "
                    "the input are carried over.",
    )
    parser.set_defaults(command=run)
    stack_arguments(parser)
    parser.add_argument("--queries", required=True,
                        help="a golden set (YAML, JSONL, folder), a queries.jsonl, or a text file of questions")
    parser.add_argument("--modes", default="bm25,vector,hybrid", help="comma-separated modes (default bm25,vector,hybrid)")
    parser.add_argument("--depth", type=int, default=10, metavar="N", help="documents taken from each mode (default 10)")
    parser.add_argument("--fetch-k", type=int, default=30, metavar="N",
                        help="candidates per route before fusion (default 30; raised to --depth)")
    parser.add_argument("--out", required=True, help="output JSONL (refused if it exists, unless --force)")
    parser.add_argument("--force", action="store_true", help="overwrite --out if it exists")


def run(args: argparse.Namespace) -> int:
    from pytest_ragmetrics.tools.pool import pool, pool_summary, read_queries, write_pool

    modes = parse_modes(args.modes)
    if args.depth < 1:
        raise RagMetricsError(f"--depth must be >= 1, got {args.depth}")
    out = Path(args.out)
    if out.exists() and not args.force:  # before any retrieval: it may hold an annotator's work
        raise RagMetricsError(f"{out} already exists; pass --force to overwrite it (it may hold annotations)")
    if any(m.endswith("+rerank") for m in modes) and args.rerank_model is None:
        raise RagMetricsError("a +rerank mode needs --rerank-model PATH (a CrossEncoder folder)")
    queries = read_queries(args.queries)
    builds: list[dict[str, Any]] = []
    vectors = any(m.partition("+")[0] != "bm25" for m in modes)
    factory = stack_factory(args, builds, vectors=vectors, fetch_k=max(args.fetch_k, args.depth))
    retriever = first_retriever(factory)
    t0 = time.perf_counter()
    pooled = pool(queries, retriever, modes, args.depth)
    log(f"pooled {len(pooled)} questions in {time.perf_counter() - t0:.2f} s")
    path = write_pool(pooled, out, force=args.force)
    print(pool_summary(pooled, modes, args.depth))
    print(f"Wrote {path}: fill in each null rel (0 = not relevant) before using it as a golden set.")
    return 0
