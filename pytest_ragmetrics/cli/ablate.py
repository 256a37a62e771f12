"""``ragmetrics ablate``: the reference stack's modes and one-at-a-time sweeps, one table each."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from pytest_ragmetrics.cli._stack import (
    build_stack,
    check_corpus_covers,
    log,
    parse_modes,
    progress_for,
    quiet_argument,
    stack_arguments,
)
from pytest_ragmetrics.cli.argtypes import measurement_arguments, path_arg
from pytest_ragmetrics.errors import RagMetricsError
from pytest_ragmetrics.measures import DEFAULT_METRICS, MeasurementConfig

#: The flags that set what the library's notes name by parameter, so the notes tell a user of
#: this command what to type (``ablate(spelling=...)``).
FLAGS = {"rerank_model": "--rerank-model PATH", "unique_docs": "--unique-docs", "breakdown": "--per-query"}


def register(verbs: Any) -> None:
    parser = verbs.add_parser(
        "ablate",
        help="compare modes and sweep top_k/fetch_k/rrf_k/chunk_size/fusion over the reference stack",
        description="One loop over retrieval modes (and one-at-a-time sweeps) of the reference stack: "
                    "a Markdown table per comparison, the n and 1/n note under it, and the questions "
                    "whose value differs between rows.",
    )
    parser.set_defaults(command=run)
    stack_arguments(parser)
    parser.add_argument("--golden", required=True, type=path_arg,
                        help="golden set: YAML, JSONL or a folder with queries.jsonl + qrels")
    parser.add_argument("-m", "--metric", action="append", dest="metrics", metavar="NAME@K",
                        help=f"metric column, repeatable; NAME@k follows each row's top_k "
                             f"(default: {' '.join(DEFAULT_METRICS)})")
    parser.add_argument("--modes", default="bm25,vector,hybrid,hybrid+rerank",
                        help="comma-separated rows of the main table (default: bm25,vector,hybrid,hybrid+rerank; "
                             "rerank rows need --rerank-model and are skipped, with a note, without it)")
    parser.add_argument("--top-k", type=int, default=None, metavar="K",
                        help="results per question (default: the deepest metric cutoff, else 10)")
    parser.add_argument("--fetch-k", type=int, default=30, metavar="N",
                        help="candidates per route before fusion/rerank (default 30)")
    parser.add_argument("--rrf-k", type=int, default=60, metavar="K", help="RRF constant (default 60)")
    parser.add_argument("--sweep", action="append", default=[], metavar="PARAM=V1,V2",
                        help="one extra table varying PARAM (top_k, fetch_k, rrf_k, chunk_size, fusion, "
                             "route_weights; chunk_size accepts 'whole', fusion rrf/convex-minmax/convex-zscore, "
                             "route_weights B:V such as 1:0.5), everything else at its base value; repeatable")
    parser.add_argument("--sweep-mode", default=None, metavar="MODE",
                        help="mode the sweeps run in (default: hybrid if among --modes, else the first mode)")
    parser.add_argument("--unique-docs", action="store_true",
                        help="rank distinct documents (each route fills its list with distinct documents)")
    parser.add_argument("--per-query", action="store_true",
                        help="list the questions whose value differs between rows (JSON always has every query)")
    parser.add_argument("--by", default=None, metavar="METRIC",
                        help="metric of the per-query breakdown (default: the first column)")
    measurement_arguments(parser, ids=False)
    parser.add_argument("--format", choices=("markdown", "json"), default="markdown",
                        help="markdown tables for people (default) or JSON for scripts")
    quiet_argument(parser)


def run(args: argparse.Namespace) -> int:
    from pytest_ragmetrics.golden import load_golden
    from pytest_ragmetrics.report.ablation import render_json, render_markdown
    from pytest_ragmetrics.tools.ablate import Setting, ablate, bind_metrics, sweep_settings

    modes = parse_modes(args.modes)
    sweeps = [parse_sweep(s) for s in args.sweep]
    specs = list(args.metrics or DEFAULT_METRICS)
    config = MeasurementConfig(relevance_level=args.relevance_level, gain=args.gain, id_separator="#")
    if args.top_k is None:  # deep enough for the deepest fixed cutoff (recall@100 needs 100 results)
        fixed = [m for m in specs if not m.strip().lower().endswith("@k")]
        top_k = (MeasurementConfig(measures=tuple(fixed)).depth if fixed else None) or 10
    else:
        top_k = args.top_k
    for name, value, low in (("--top-k", top_k, 1), ("--fetch-k", args.fetch_k, 1), ("--rrf-k", args.rrf_k, 0)):
        if value < low:
            raise RagMetricsError(f"{name} must be >= {low}, got {value}")
    columns, _ = bind_metrics(specs, top_k)
    by = bind_metrics([args.by], top_k)[0][0] if args.by else columns[0]
    if by not in columns:
        raise RagMetricsError(f"--by {args.by}: not among the metrics ({', '.join(columns)})")
    sweep_mode = args.sweep_mode or ("hybrid" if "hybrid" in modes else modes[0])
    parse_modes(sweep_mode)
    golden = load_golden(args.golden)  # validated before anything is built

    builds: list[dict[str, Any]] = []
    progress = progress_for(args)
    factory, default = build_stack(args, modes + ([sweep_mode] if sweeps else []), builds, rrf_k=args.rrf_k,
                                   fetch_k=args.fetch_k, top_k=top_k, progress=progress)
    check_corpus_covers({q.qid: set(q.relevant(args.relevance_level)) for q in golden}, default)

    base = Setting(mode=sweep_mode, top_k=top_k, fetch_k=args.fetch_k, rrf_k=args.rrf_k,
                   unique_docs=args.unique_docs)
    chunk_label = "whole documents" if args.chunk_size is None else f"chunks {default.chunk_size}/{default.overlap}"
    common = f"top_k={top_k}, fetch_k={args.fetch_k}, rrf_k={args.rrf_k}, {chunk_label}" + \
             (", unique docs" if args.unique_docs else "")
    plans = [("mode", f"Modes ({common})", [
        Setting(mode=m, top_k=top_k, fetch_k=args.fetch_k, rrf_k=args.rrf_k, unique_docs=args.unique_docs)
        for m in modes
    ])]
    for param, values in sweeps:
        title = f"Sweep {param} (mode {sweep_mode}; otherwise {common})"
        plans.append((param, title, sweep_settings(base, param, values, overlap=args.overlap)))

    ablations = []
    for param, title, settings in plans:
        try:
            result = ablate(golden, factory, settings, config, metrics=specs, parameter=param, title=title,
                            spelling=FLAGS, progress=progress)
        except ValueError as exc:
            if isinstance(exc, RagMetricsError):
                raise
            raise RagMetricsError(f"{title}: {exc}") from None
        for row in result.rows:
            if row.skipped is None and not args.quiet:
                log(f"{param} {row.label}: {row.n + len(row.unscorable)} questions in {row.seconds:.2f} s "
                     f"({1000 * row.seconds / max(row.n + len(row.unscorable), 1):.1f} ms a question)")
        ablations.append(result)

    if args.format == "json":
        payload = render_json(ablations, {"corpus": str(args.corpus), "golden": str(args.golden),
                                          "builds": builds}, column=by)
        json.dump(payload, sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
        return 0
    no_answer = len(golden.unanswerable())
    header = (f"Ablation of {args.corpus} on {args.golden}: {len(golden) - no_answer} questions"
              + (f" ({no_answer} more marked answerable: false, left out)" if no_answer else "") + "; "
              f"relevance level {args.relevance_level}, {args.gain} gain")
    sys.stdout.write(header + "\n\n" + render_markdown(ablations, breakdown=args.per_query, column=by))
    return 0


def _int_value(param: str, raw: str, minimum: int) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise RagMetricsError(f"--sweep {param}: {raw!r} is not an integer") from None
    if value < minimum:
        raise RagMetricsError(f"--sweep {param}: {value} must be >= {minimum}")
    return value


def _fusion_value(param: str, part: str) -> str:
    """A ``fusion`` name or ``route_weights`` as ``B:V`` (bm25 weight, vector weight), checked now."""
    from pytest_ragmetrics.stack.fusion import FUSIONS, check_route_weights, parse_route_weights

    if param == "fusion":
        if part not in FUSIONS:
            raise RagMetricsError(f"--sweep fusion: unknown fusion {part!r}; expected some of {', '.join(FUSIONS)}")
        return part
    try:
        if "=" in part:
            raise ValueError("write route_weights in a sweep as B:V, e.g. 1:0.5 (bm25 1, vector 0.5)")
        check_route_weights(("bm25", "vector"), parse_route_weights(part))
    except ValueError as exc:
        raise RagMetricsError(f"--sweep route_weights: {part!r}: {exc}") from None
    return part


def parse_sweep(text: str) -> tuple[str, list[Any]]:
    """``"top_k=5,10,20"`` -> ``("top_k", [5, 10, 20])``; chunk sizes may be ``none``/``whole``."""
    from pytest_ragmetrics.tools.ablate import SWEEPABLE

    param, sep, raw = text.partition("=")
    param = param.strip().replace("-", "_")
    if not sep or not raw.strip():
        raise RagMetricsError(f"--sweep {text!r}: write it as PARAM=V1,V2,... e.g. top_k=5,10,20")
    if param not in SWEEPABLE:
        raise RagMetricsError(f"--sweep {text!r}: cannot sweep {param!r}; sweepable: {', '.join(SWEEPABLE)}")
    values: list[Any] = []
    for part in raw.split(","):
        part = part.strip()
        if not part:
            continue
        if param == "chunk_size":
            value: Any = None if part.lower() in ("none", "whole", "0") else _int_value(param, part, 1)
        elif param in ("fusion", "route_weights"):
            value = _fusion_value(param, part)
        else:
            value = _int_value(param, part, 0 if param == "rrf_k" else 1)
        if value not in values:
            values.append(value)
    if not values:
        raise RagMetricsError(f"--sweep {text!r}: no values")
    return param, values
