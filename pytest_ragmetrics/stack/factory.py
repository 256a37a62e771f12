"""Reference-stack retrievers made to order: one per chunking, all on one embedder.

Chunking changes the index, so a comparison across chunkings needs a retriever
(and an index directory) per chunking. A factory ``f(chunking) -> retriever``
builds each one once and hands every later caller the same object, and all of
them share one embedder (and one cross-encoder): the model loads once, and the
rows of a comparison differ only in what they are meant to differ in.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, NamedTuple

from pytest_ragmetrics.corpus import load_corpus

from .choice import choose_encoder
from .paths import cache_path
from .rerank import Reranker
from .retriever import Retriever

__all__ = ["Chunking", "RetrieverFactory", "cached_factory", "stack_factory"]


class Chunking(NamedTuple):
    """How the corpus is cut: ``size`` characters with ``overlap`` (``size=None``: whole documents)."""

    size: int | None
    overlap: int

    @classmethod
    def of(cls, size: int | None, overlap: int) -> Chunking:
        """Normalised, so one chunking has one spelling: whole documents have no overlap,
        and an overlap that does not fit the size becomes a fifth of it (a chunk size
        chosen alone still gets a usable overlap)."""
        if size is None:
            return cls(None, 0)
        if overlap >= size:
            overlap = size // 5
        return cls(size, overlap)

    @property
    def label(self) -> str:
        return "whole" if self.size is None else f"{self.size}/{self.overlap}"


#: stack_factory's chunking when none is asked for (a tuple: safe to share as a default)
_DEFAULT_CHUNKING = Chunking(300, 60)


#: ``f(chunking) -> retriever``; ``None`` asks for the factory's default chunking.
RetrieverFactory = Callable[[Chunking | None], Any]


def cached_factory(make: Callable[[Chunking | None], Any]) -> RetrieverFactory:
    """Wrap ``make(chunking)`` so each chunking is built once (tables share their indexes)."""
    built: dict[Chunking | None, Any] = {}

    def factory(chunking: Chunking | None) -> Any:
        if chunking not in built:
            built[chunking] = make(chunking)
        return built[chunking]

    factory.built = built  # type: ignore[attr-defined]
    return factory


def stack_factory(
    corpus: str | Path,
    *,
    data_dir: str | Path | None = None,
    default_chunking: Chunking = _DEFAULT_CHUNKING,
    rerank_model: str | Path | None = None,
    model: str | Path | None = None,
    embed_backend: str | None = None,
    on_build: Callable[[Chunking, Any], None] | None = None,
    vectors: bool = True,
    progress: Any = None,
    **retriever_kwargs: Any,
) -> RetrieverFactory:
    """A cached factory of reference-stack retrievers over ``corpus``, one per chunking.

    Each chunking gets its own index: ``data_dir/chunks-<size>-<overlap>`` (or
    ``whole``) when ``data_dir`` is given, else the stack's settings-hashed
    directory under ``RAGMETRICS_HOME``. Each retriever is built when made
    (BM25 only with ``vectors=False``: a BM25-only comparison never embeds the
    corpus); ``model`` and ``embed_backend`` pick the shared encoder (chosen for
    the corpus when neither is given, as ``Retriever`` does); ``on_build(chunking, retriever)``
    is called after each build, e.g. to log ``retriever.build_stats``; ``progress`` is every
    retriever's (see ``Retriever``).
    """
    encoder_settings = {k: retriever_kwargs.pop(k) for k in ("query_prefix", "passage_prefix", "model_languages")
                        if retriever_kwargs.get(k) is not None}
    if "model_languages" in encoder_settings:
        encoder_settings["languages"] = encoder_settings.pop("model_languages")
    # one encoder for every chunking, chosen for the corpus when none is named (see .choice)
    texts = [f"{d.title}\n{d.text}" for d in load_corpus(corpus)] if model is None and embed_backend is None else []
    embedder = choose_encoder(texts, model=model, backend=embed_backend, cache_path=cache_path(), **encoder_settings)
    reranker = Reranker(rerank_model) if rerank_model is not None else None

    def make(chunking: Chunking | None) -> Retriever:
        chunking = chunking or default_chunking
        folder = None
        if data_dir is not None:
            name = "whole" if chunking.size is None else f"chunks-{chunking.size}-{chunking.overlap}"
            folder = Path(data_dir) / name
        r = Retriever(
            corpus,
            data_dir=folder,
            chunk_size=chunking.size,
            overlap=chunking.overlap,
            embedder=embedder,
            rerank_model=reranker,
            progress=progress,
            **retriever_kwargs,
        )
        if vectors:
            r.build()
        else:  # the BM25 index alone, through the public search (it builds on first use)
            t0 = time.perf_counter()
            r.search_batch(["index warm-up"], top_k=1, mode="bm25")
            r._record_build(time.perf_counter() - t0)
        if on_build is not None:
            on_build(chunking, r)
        return r

    cached = cached_factory(make)

    def factory(chunking: Chunking | None) -> Any:
        return cached(chunking or default_chunking)

    factory.built = cached.built  # type: ignore[attr-defined]
    return factory
