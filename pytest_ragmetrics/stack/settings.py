"""The reference retriever's settings as one value, and the ``RAGMETRICS_*`` variables that set them.

A :class:`StackSettings` is checked when made (before any corpus is read or index
created), can be varied with :func:`dataclasses.replace` for a sweep, and is what
``Retriever(corpus, settings)`` takes; each field may also be given to ``Retriever``
as a keyword of the same name.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from pytest_ragmetrics import progress as _progress

from .bm25 import BACKENDS, DEFAULT_BACKEND, Language, check_language
from .choice import EncoderChoice
from .embed import ENCODER_BACKENDS, MULTILINGUAL_MODEL_NAME, Embedder, missing_model
from .fusion import FUSIONS, check_route_weights, parse_route_weights
from .index import DEFAULT_HNSW, HnswSettings
from .rerank import Reranker

__all__ = ["ENV_VARS", "MODES", "StackSettings", "parse_mode"]

#: Base modes; each may take a ``+rerank`` suffix (``hybrid+rerank`` is the usual one).
MODES = ("bm25", "vector", "hybrid")


@dataclass(frozen=True)
class StackSettings:
    """Every setting of the reference retriever but the corpus (see ``docs/reference-stack.md``).

    ``route_weights`` may be given as ``"bm25=1,vector=0.5"``; it is kept as a mapping.

    ``embed_backend`` runs the encoder on ``torch`` (float32, the default),
    ``torch-bf16`` (bfloat16: ~3x faster on CPUs with AMX, ~2x with AVX512-BF16 alone),
    ``onnx`` (onnxruntime, the same vectors) or ``onnx-int8`` (int8 weights).
    All but float32 torch give slightly different vectors, so each has its own
    cache entries and collection. ``bm25_backend`` is unrelated: it picks the BM25 library.
    ``language`` picks the BM25 tokenisation: ``en``, ``zh`` (jieba), ``mixed`` (jieba
    for Chinese, the English analyser for the rest) or ``auto`` (``en`` for a corpus
    without Chinese characters, else ``mixed``); :meth:`Retriever.describe` reports the one used.

    Without ``model`` or ``embed_backend`` the encoder is chosen for the corpus:
    the packaged English all-MiniLM-L6-v2, or ``multilingual-e5-small`` (the
    ``multilingual`` extra) when more than 5% of the documents are in a script the
    English model does not cover (see :mod:`.choice`). With ``skip_uncovered``
    (the default), hybrid search gives a query written in a script the encoder
    does not cover to BM25 alone instead of fusing it with near-random vectors;
    :attr:`Retriever.warnings` says when that happens.

    ``progress`` is where the long steps of a build (tokenising for BM25, encoding the
    chunks into the vector index, waiting for another process's build) are shown:
    ``"bar"``, ``"lines"``, ``"off"``, a :class:`pytest_ragmetrics.progress.Progress`, or
    None for the default (``RAGMETRICS_PROGRESS``, else a bar on a terminal and lines
    otherwise; under ``pytest --rag-eval``, pytest's terminal). Steps under two seconds
    show nothing.
    """

    data_dir: str | Path | None = None
    chunk_size: int | None = 300
    overlap: int = 60
    mode: str = "hybrid"
    top_k: int = 10
    fetch_k: int = 30
    rrf_k: int = 60
    fusion: str = "rrf"
    route_weights: Mapping[str, float] | str | None = None
    model: str | Path | None = None
    embedder: Embedder | EncoderChoice | None = None
    embed_backend: str | None = None
    query_prefix: str | None = None
    passage_prefix: str | None = None
    model_languages: Sequence[str] | None = None
    skip_uncovered: bool = True
    rerank_model: str | Path | Reranker | None = None
    bm25_backend: str = DEFAULT_BACKEND
    bm25_k1: float = 1.5
    bm25_b: float = 0.75
    chroma_url: str | None = None
    language: Language = "auto"
    title_prefix: bool = True
    hnsw: HnswSettings = DEFAULT_HNSW
    unique_docs: bool = False
    progress: Any = field(default=None, compare=False)

    def __post_init__(self) -> None:
        # cheap checks only: the corpus is not read and nothing is created
        if isinstance(self.progress, str):
            _progress.parse_mode(self.progress, "progress")
        elif self.progress is not None:
            _progress.resolve(self.progress)  # checks it has start, advance and finish
        positive("top_k", self.top_k)
        positive("fetch_k", self.fetch_k)
        if self.rrf_k < 0:
            raise ValueError(f"rrf_k must be >= 0, got {self.rrf_k}")
        check_fusion(self.fusion)
        object.__setattr__(self, "route_weights", checked_weights(self.route_weights))
        _, wants_rerank = parse_mode(self.mode, None)
        if wants_rerank and self.rerank_model is None:
            raise ValueError(f"mode {self.mode!r} needs rerank_model (a CrossEncoder path)")
        if self.bm25_backend not in BACKENDS:
            raise ValueError(f"unknown BM25 backend {self.bm25_backend!r}: expected one of {BACKENDS}")
        check_language(self.language)
        if self.embedder is not None and (self.model is not None or self.query_prefix is not None
                                          or self.passage_prefix is not None or self.model_languages is not None):
            raise ValueError("pass either an embedder or the model settings (model, prefixes, languages), not both")
        if self.embed_backend is not None and self.embed_backend not in ENCODER_BACKENDS:
            raise ValueError(
                f"unknown embed_backend {self.embed_backend!r}: expected one of {ENCODER_BACKENDS}"
            )
        given = self.embedder.embedder if isinstance(self.embedder, EncoderChoice) else self.embedder
        if given is not None and self.embed_backend not in (None, given.backend):
            raise ValueError(
                f"embed_backend={self.embed_backend!r} contradicts the embedder's backend "
                f"{given.backend!r}: pass one or the other"
            )

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The settings' names: the keywords ``Retriever`` accepts besides ``settings``."""
        return tuple(f.name for f in fields(cls))

    @classmethod
    def of(cls, settings: StackSettings | None, keywords: Mapping[str, Any], caller: str) -> StackSettings:
        """``settings`` (or the defaults) with ``keywords`` put in; an unknown keyword is a
        TypeError naming the nearest setting, as a misspelt one must not pass silently."""
        if settings is not None and not isinstance(settings, StackSettings):
            raise TypeError(f"{caller}() takes the corpus and a StackSettings, got {type(settings).__name__}: "
                            f"pass other settings as keywords, e.g. {caller}(corpus, mode='bm25')")
        unknown = [k for k in keywords if k not in cls.names()]
        if unknown:
            near = difflib.get_close_matches(unknown[0], cls.names(), n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise TypeError(f"{caller}() got an unexpected keyword argument {unknown[0]!r}{hint}; "
                            f"the settings are StackSettings' fields: {', '.join(cls.names())}")
        if settings is None:
            return cls(**keywords)
        return replace(settings, **keywords) if keywords else settings


def parse_mode(mode: str, rerank: bool | None) -> tuple[str, bool]:
    """``(base mode, rerank?)`` of e.g. ``hybrid+rerank``; ``rerank`` overrides the suffix."""
    base, _, suffix = mode.partition("+")
    if base not in MODES or suffix not in ("", "rerank"):
        allowed = ", ".join([*MODES, *(f"{m}+rerank" for m in MODES)])
        raise ValueError(f"unknown mode {mode!r}: expected one of {allowed}")
    return base, (suffix == "rerank") if rerank is None else rerank


def positive(name: str, value: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value


def check_fusion(raw: str) -> str:
    if raw not in FUSIONS:
        raise ValueError(f"unknown fusion {raw!r}: expected one of {', '.join(FUSIONS)}")
    return raw


def checked_weights(raw: Mapping[str, float] | str | None) -> dict[str, float]:
    """Route weights from a mapping or ``"bm25=1,vector=0.5"``, as given (checked, not filled in)."""
    weights = parse_route_weights(raw) if isinstance(raw, str) else {k: float(v) for k, v in (raw or {}).items()}
    check_route_weights(("bm25", "vector"), weights)
    return weights


# -- the environment ------------------------------------------------------------------------


def _chunk_size(raw: str) -> int | None:
    if raw.lower() in ("0", "none", "whole"):
        return None
    try:
        return int(raw)
    except ValueError:
        raise ValueError("expected a number of characters, or 0, none or whole for whole documents") from None


def _integer(raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise ValueError("expected a whole number") from None


def _flag(raw: str) -> bool:
    value = raw.lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ValueError("expected 1/0, true/false, yes/no or on/off")


def _embed_backend(raw: str) -> str:
    if raw not in ENCODER_BACKENDS:
        raise ValueError(f"expected one of {', '.join(ENCODER_BACKENDS)}")
    return raw


def _model(raw: str) -> str:
    if raw != MULTILINGUAL_MODEL_NAME and missing_model(raw):
        raise ValueError("no such model folder; expected a sentence-transformers folder or "
                         f"{MULTILINGUAL_MODEL_NAME!r}")
    return raw


def _mode(raw: str) -> str:
    parse_mode(raw, None)
    return raw


#: Variables read as they are: a prefix such as ``"query: "`` ends in a space.
VERBATIM = frozenset({"RAGMETRICS_QUERY_PREFIX", "RAGMETRICS_PASSAGE_PREFIX"})

#: ``RAGMETRICS_*`` variable -> (setting, parser); read by ``Retriever.from_env``.
ENV_VARS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "RAGMETRICS_MODE": ("mode", _mode),
    "RAGMETRICS_CHUNK_SIZE": ("chunk_size", _chunk_size),
    "RAGMETRICS_OVERLAP": ("overlap", _integer),
    "RAGMETRICS_TOP_K": ("top_k", _integer),
    "RAGMETRICS_FETCH_K": ("fetch_k", _integer),
    "RAGMETRICS_RRF_K": ("rrf_k", _integer),
    "RAGMETRICS_FUSION": ("fusion", check_fusion),
    "RAGMETRICS_ROUTE_WEIGHTS": ("route_weights", checked_weights),
    "RAGMETRICS_RERANK_MODEL": ("rerank_model", str),
    "RAGMETRICS_BM25_BACKEND": ("bm25_backend", str),
    "RAGMETRICS_EMBED_BACKEND": ("embed_backend", _embed_backend),
    "RAGMETRICS_MODEL": ("model", _model),
    "RAGMETRICS_QUERY_PREFIX": ("query_prefix", str),
    "RAGMETRICS_PASSAGE_PREFIX": ("passage_prefix", str),
    "RAGMETRICS_SKIP_UNCOVERED": ("skip_uncovered", _flag),
    "RAGMETRICS_CHROMA_URL": ("chroma_url", str),
    "RAGMETRICS_DATA_DIR": ("data_dir", str),
    "RAGMETRICS_UNIQUE_DOCS": ("unique_docs", _flag),
}
