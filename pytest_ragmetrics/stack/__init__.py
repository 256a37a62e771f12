"""The reference retrieval stack: corpus -> chunks -> BM25 + chromadb vectors -> RRF -> rerank.

Importing this package is cheap: torch, chromadb, sentence-transformers, jieba
and bm25s are imported only when an index is built or a model is used.

    from pytest_ragmetrics.stack import Retriever
    r = Retriever("eval/corpus", mode="hybrid")  # or Retriever("eval/corpus", StackSettings(mode="hybrid"))
    for hit in r.search("why does my app freeze", 5):
        print(hit.id, hit.explain_text())
"""

from pytest_ragmetrics.chunking import Chunk, chunk_documents, split_spans, split_text
from pytest_ragmetrics.corpus import CorpusError, Document, load_corpus

from .bm25 import (
    BACKENDS,
    DEFAULT_BACKEND,
    LANGUAGES,
    BM25Index,
    chinese_tokenizer,
    detect_language,
    english_tokenizer,
    make_tokenizer,
    mixed_tokenizer,
)
from .embed import DEFAULT_MODEL_NAME, ENCODER_BACKENDS, Embedder, default_model_path, model_fingerprint
from .factory import Chunking, RetrieverFactory, cached_factory, stack_factory
from .fusion import reciprocal_rank_fusion
from .index import DEFAULT_HNSW, HnswSettings, VectorIndex, connect
from .paths import ragmetrics_home
from .rerank import Reranker
from .retriever import ENV_VARS, MODES, Hit, Retriever
from .settings import StackSettings

__all__ = [
    "BACKENDS",
    "DEFAULT_BACKEND",
    "DEFAULT_HNSW",
    "DEFAULT_MODEL_NAME",
    "ENCODER_BACKENDS",
    "ENV_VARS",
    "LANGUAGES",
    "MODES",
    "BM25Index",
    "Chunk",
    "Chunking",
    "CorpusError",
    "Document",
    "Embedder",
    "Hit",
    "HnswSettings",
    "Reranker",
    "Retriever",
    "RetrieverFactory",
    "StackSettings",
    "VectorIndex",
    "cached_factory",
    "chinese_tokenizer",
    "chunk_documents",
    "connect",
    "default_model_path",
    "detect_language",
    "english_tokenizer",
    "load_corpus",
    "make_tokenizer",
    "mixed_tokenizer",
    "model_fingerprint",
    "ragmetrics_home",
    "reciprocal_rank_fusion",
    "split_spans",
    "split_text",
    "stack_factory",
]
