"""The reference retriever: BM25, vector, hybrid (RRF) and rerank behind one ``search``.

Every switch is an argument (mode, top_k, fetch_k, rrf_k, chunking, models), so
one loop produces an ablation table, and every hit carries how each route
ranked it, so a surprising number can be traced to its mechanism. It satisfies
the plugin's retriever protocol as is: ``search(query, k)`` returns hits best
first, each with an ``id`` (the chunk id ``doc#i-n``).
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from pytest_ragmetrics import progress as _progress
from pytest_ragmetrics.chunking import Chunk, chunk_documents
from pytest_ragmetrics.corpus import Document, load_corpus

from .bm25 import BACKENDS, DEFAULT_BACKEND, BM25Index, Language, check_language, make_tokenizer, stored_bm25
from .choice import EncoderChoice, choose_encoder, coverage_warning
from .embed import ENCODER_BACKENDS, MULTILINGUAL_MODEL_NAME, Embedder, missing_model
from .fusion import FUSIONS, check_route_weights, convex_fusion, parse_route_weights, reciprocal_rank_fusion
from .index import DEFAULT_HNSW, HnswSettings, VectorIndex
from .languages import coverage, dominant_script
from .paths import bm25_dir, cache_path, index_dir, settings_key
from .rerank import Reranker

__all__ = ["ENV_VARS", "MODES", "Hit", "Retriever"]

#: Base modes; each may take a ``+rerank`` suffix (``hybrid+rerank`` is the usual one).
MODES = ("bm25", "vector", "hybrid")
_ROUTES = {"bm25": ("bm25",), "vector": ("vector",), "hybrid": ("bm25", "vector")}


@dataclass
class Hit:
    """One ranked chunk and why it is where it is.

    ``explain`` holds ``{"bm25": {"rank", "score"}, "vector": {"rank", "score"}}`` for
    the routes that found the chunk, plus ``"fused"`` (the fused score, hybrid only;
    ``"fusion"`` names how: ``rrf``, ``convex-minmax``, ``convex-zscore``) and
    ``"rerank"`` (cross-encoder score) when those steps ran. ``score`` is the
    final one: rerank, else fused, else the single route's score.
    """

    id: str
    doc_id: str
    score: float
    text: str
    explain: dict[str, Any] = field(default_factory=dict)

    def explain_text(self) -> str:
        """One line, e.g. ``bm25 #3 (12.1) + vector #1 (0.83) -> rrf 0.0325``."""
        parts = [
            f"{route} #{self.explain[route]['rank']} ({self.explain[route]['score']:.3g})"
            for route in ("bm25", "vector")
            if route in self.explain
        ]
        line = " + ".join(parts) or "(no route)"
        if "fused" in self.explain:
            line += f" -> {self.explain.get('fusion', 'rrf')} {self.explain['fused']:.4f}"
        if "rerank" in self.explain:
            line += f" -> rerank {self.explain['rerank']:.4g}"
        return line


def _parse_mode(mode: str, rerank: bool | None) -> tuple[str, bool]:
    base, _, suffix = mode.partition("+")
    if base not in MODES or suffix not in ("", "rerank"):
        allowed = ", ".join([*MODES, *(f"{m}+rerank" for m in MODES)])
        raise ValueError(f"unknown mode {mode!r}: expected one of {allowed}")
    return base, (suffix == "rerank") if rerank is None else rerank


def _positive(name: str, value: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value


class Retriever:
    """A corpus indexed for BM25 and vector search, searched in any mode.

    Construction loads and chunks the corpus (cheap; corpus errors surface
    here). The BM25 index and the chroma collection are built on first use, or
    all at once by :meth:`build`. Without ``data_dir`` the collection lives in
    ``.ragmetrics/index/<hash of the settings>`` under the project, so a sweep over
    settings never shares a directory; the embedding cache is shared by all.

    ``embed_backend`` runs the encoder on ``torch`` (float32, the default),
    ``torch-bf16`` (bfloat16: ~3x faster on CPUs with AMX, ~2x with AVX512-BF16 alone),
    ``onnx`` (onnxruntime, the same vectors) or ``onnx-int8`` (int8 weights).
    All but float32 torch give slightly different vectors, so each has its own
    cache entries and collection. ``bm25_backend`` is unrelated: it picks the BM25 library.
    ``language`` picks the BM25 tokenisation: ``en``, ``zh`` (jieba), ``mixed`` (jieba
    for Chinese, the English analyser for the rest) or ``auto`` (``en`` for a corpus
    without Chinese characters, else ``mixed``); :meth:`describe` reports the one used.

    Without ``model`` or ``embed_backend`` the encoder is chosen for the corpus:
    the packaged English all-MiniLM-L6-v2, or ``multilingual-e5-small`` (the
    ``multilingual`` extra) when more than 5% of the documents are in a script the
    English model does not cover (see :mod:`.choice`). With ``skip_uncovered``
    (the default), hybrid search gives a query written in a script the encoder
    does not cover to BM25 alone instead of fusing it with near-random vectors;
    :attr:`warnings` says when that happens.

    ``progress`` is where the long steps of a build (tokenising for BM25, encoding the
    chunks into the vector index, waiting for another process's build) are shown:
    ``"bar"``, ``"lines"``, ``"off"``, a :class:`pytest_ragmetrics.progress.Progress`, or
    None for the default (``RAGMETRICS_PROGRESS``, else a bar on a terminal and lines
    otherwise; under ``pytest --rag-eval``, pytest's terminal). Steps under two seconds
    show nothing.
    """

    def __init__(
        self,
        corpus: str | Path | Sequence[Document],
        *,
        data_dir: str | Path | None = None,
        chunk_size: int | None = 300,
        overlap: int = 60,
        mode: str = "hybrid",
        top_k: int = 10,
        fetch_k: int = 30,
        rrf_k: int = 60,
        fusion: str = "rrf",
        route_weights: Mapping[str, float] | str | None = None,
        model: str | Path | None = None,
        embedder: Embedder | EncoderChoice | None = None,
        embed_backend: str | None = None,
        query_prefix: str | None = None,
        passage_prefix: str | None = None,
        model_languages: Sequence[str] | None = None,
        skip_uncovered: bool = True,
        rerank_model: str | Path | Reranker | None = None,
        bm25_backend: str = DEFAULT_BACKEND,
        bm25_k1: float = 1.5,
        bm25_b: float = 0.75,
        chroma_url: str | None = None,
        language: Language = "auto",
        title_prefix: bool = True,
        hnsw: HnswSettings = DEFAULT_HNSW,
        unique_docs: bool = False,
        progress: Any = None,
    ) -> None:
        # cheap argument checks first, before the corpus is read or anything is created
        if isinstance(progress, str):
            _progress.parse_mode(progress, "progress")
        elif progress is not None:
            _progress.resolve(progress)  # checks it has start, advance and finish
        self.progress = progress
        self.top_k = _positive("top_k", top_k)
        self.fetch_k = _positive("fetch_k", fetch_k)
        if rrf_k < 0:
            raise ValueError(f"rrf_k must be >= 0, got {rrf_k}")
        self.fusion = _fusion(fusion)
        self.route_weights = _route_weights(route_weights)
        _, wants_rerank = _parse_mode(mode, None)
        if wants_rerank and rerank_model is None:
            raise ValueError(f"mode {mode!r} needs rerank_model (a CrossEncoder path)")
        if bm25_backend not in BACKENDS:
            raise ValueError(f"unknown BM25 backend {bm25_backend!r}: expected one of {BACKENDS}")
        check_language(language)
        if embedder is not None and (model is not None or query_prefix is not None or passage_prefix is not None
                                     or model_languages is not None):
            raise ValueError("pass either an embedder or the model settings (model, prefixes, languages), not both")
        if embed_backend is not None and embed_backend not in ENCODER_BACKENDS:
            raise ValueError(
                f"unknown embed_backend {embed_backend!r}: expected one of {ENCODER_BACKENDS}"
            )
        given = embedder.embedder if isinstance(embedder, EncoderChoice) else embedder
        if given is not None and embed_backend not in (None, given.backend):
            raise ValueError(
                f"embed_backend={embed_backend!r} contradicts the embedder's backend "
                f"{given.backend!r}: pass one or the other"
            )
        self.mode, self.rrf_k = mode, rrf_k
        self.chunk_size, self.overlap, self.title_prefix = chunk_size, overlap, title_prefix
        self.bm25_backend, self.bm25_k1, self.bm25_b = bm25_backend, bm25_k1, bm25_b
        self.hnsw, self.chroma_url = hnsw, chroma_url
        self.unique_docs = unique_docs
        self.skip_uncovered = skip_uncovered

        if isinstance(corpus, (str, Path)):
            self.corpus_source: str = str(Path(corpus).resolve())
            self.documents = load_corpus(corpus)
        else:
            self.documents = list(corpus)
            self.corpus_source = "<documents>"
            if not self.documents:
                raise ValueError("the corpus holds no documents")
        self.chunks: list[Chunk] = chunk_documents(
            self.documents, chunk_size, overlap, with_title=title_prefix
        )
        if not self.chunks:
            raise ValueError("the corpus yields no chunks: every document is empty")
        self._position = {c.chunk_id: i for i, c in enumerate(self.chunks)}
        self._doc_of = [c.doc_id for c in self.chunks]
        digest = hashlib.sha256()
        for c in self.chunks:
            digest.update(c.chunk_id.encode() + b"\0" + c.text.encode() + b"\0")
        self.corpus_sha = digest.hexdigest()
        self.tokenizer = make_tokenizer(language, [c.text for c in self.chunks])
        self.language = getattr(self.tokenizer, "language", language)

        texts = [f"{d.title}\n{d.text}" for d in self.documents]
        if isinstance(embedder, EncoderChoice):  # shared by a factory, with why it was chosen
            self.encoder_choice = embedder
        elif embedder is not None:
            self.encoder_choice = EncoderChoice(embedder, switched=False)
        else:
            prompts = {k: v for k, v in (("query_prefix", query_prefix), ("passage_prefix", passage_prefix),
                                         ("languages", model_languages)) if v is not None}
            self.encoder_choice = choose_encoder(texts, model=model, backend=embed_backend,
                                                 cache_path=cache_path(), **prompts)
        self.embedder = self.encoder_choice.embedder
        #: the corpus's documents by script, against the encoder's languages
        self.coverage = coverage(self.embedder.name, self.embedder.languages, texts)
        if isinstance(rerank_model, Reranker) or rerank_model is None:
            self.reranker = rerank_model
        else:
            self.reranker = Reranker(rerank_model)
        self._data_dir = Path(data_dir) if data_dir is not None else None
        #: The local index directory in use (None with a Chroma server); set on build.
        self.data_dir: Path | None = self._data_dir
        self._bm25: BM25Index | None = None
        self._vectors: VectorIndex | None = None
        #: Timings and counts of the last :meth:`build` (seconds, texts encoded, reuse, repairs).
        self.build_stats: dict[str, Any] = {}
        #: One line per stored index found damaged (or unverified) and rebuilt while opening
        #: this retriever's indexes; each was also raised as a RagMetricsWarning.
        self.repaired: list[str] = []

    # -- construction -------------------------------------------------------------

    @classmethod
    def from_env(
        cls,
        corpus: str | Path | Sequence[Document],
        environ: Mapping[str, str] | None = None,
        **defaults: Any,
    ) -> Retriever:
        """A retriever whose keyword ``defaults`` are overridden by ``RAGMETRICS_*`` variables.

        This is how a demo ``conftest.py`` lets CI or a developer try a degraded
        setting without editing code, e.g. ``RAGMETRICS_MODE=bm25`` or
        ``RAGMETRICS_CHUNK_SIZE=100`` (see :data:`ENV_VARS`). When only the chunk
        size is set and the default overlap would not fit, overlap becomes a fifth
        of the chunk size.
        """
        env = os.environ if environ is None else environ
        kwargs = dict(defaults)
        for var, (name, convert) in ENV_VARS.items():
            raw = env.get(var)
            if raw is None or raw.strip() == "":
                continue
            try:
                kwargs[name] = convert(raw if var in _VERBATIM else raw.strip())
            except ValueError as exc:
                raise ValueError(f"environment variable {var}={raw!r}: {exc}") from None
        size = kwargs.get("chunk_size", 300)
        if size is not None and "RAGMETRICS_OVERLAP" not in env:
            from .factory import Chunking  # the factory builds Retrievers: imported here, not at the top

            kwargs["overlap"] = Chunking.of(size, kwargs.get("overlap", 60)).overlap
        return cls(corpus, **kwargs)

    def _index_settings(self) -> dict[str, str | int | float | bool]:
        """What the vector collection depends on (recorded in it and hashed into its name)."""
        return {
            "model": self.embedder.name,
            "model_id": self.embedder.identity[:16],
            "chunk_size": self.chunk_size or 0,
            "overlap": self.overlap if self.chunk_size else 0,
            "title_prefix": self.title_prefix,
        }

    def _reporter(self, progress: Any = None) -> Any:
        """Where a build reports: ``progress``, else this retriever's own, else the default."""
        return _progress.resolve(progress if progress is not None else self.progress)

    def _ensure_bm25(self, progress: Any = None) -> BM25Index:
        if self._bm25 is None and self.bm25_backend == "bm25s":
            # stored under the chunks' hash: every later process (each xdist worker) maps it
            self._bm25 = stored_bm25(
                bm25_dir(), self.corpus_sha, [c.text for c in self.chunks], self.tokenizer,
                k1=self.bm25_k1, b=self.bm25_b, progress=self._reporter(progress),
            )
            self.repaired.extend(self._bm25.repaired)
        if self._bm25 is None:
            self._bm25 = BM25Index(
                [c.text for c in self.chunks],
                self.tokenizer,
                backend=self.bm25_backend,
                k1=self.bm25_k1,
                b=self.bm25_b,
                progress=self._reporter(progress),
            )
        return self._bm25

    def _collection_identity(self) -> dict[str, Any]:
        """What names the collection and its default dir.

        The corpus *source* (resolved path, or ``<documents>`` for in-memory
        documents) is part of it; the corpus content hash is not: it decides
        reuse, so an edited corpus is rebuilt in place instead of piling up
        collections.
        """
        return {**self._index_settings(), "corpus": self.corpus_source, "hnsw": self.hnsw.label()}

    @property
    def collection_name(self) -> str:
        """The chromadb collection this retriever's settings map to."""
        return f"ragmetrics-{settings_key(self._collection_identity())}"

    def _ensure_vectors(self, progress: Any = None) -> VectorIndex:
        if self._vectors is None:
            reporter = self._reporter(progress)
            build = _VectorBuild(reporter)
            settings = self._index_settings()
            name = self.collection_name
            data_dir = self._data_dir
            if data_dir is None and not self.chroma_url:
                data_dir = index_dir(self._collection_identity())
            self.data_dir = data_dir
            index = VectorIndex(
                name, settings, data_dir=data_dir, chroma_url=self.chroma_url, hnsw=self.hnsw,
                progress=reporter,
            )
            index.sync(
                [c.chunk_id for c in self.chunks],
                [c.text for c in self.chunks],
                self.corpus_sha,
                lambda texts: self.embedder.embed(texts, progress=build.encoder),
                progress=build,
            )
            self.repaired.extend(index.repaired)
            self._vectors = index
        return self._vectors

    def build(self, progress: Any = None) -> dict[str, Any]:
        """Build (or reuse) both indexes now; returns timings and how much was encoded.

        ``progress`` overrides the retriever's own for this build (see the class).
        """
        encoded_before = self.embedder.encoded
        t0 = time.perf_counter()
        self._ensure_bm25(progress)
        t1 = time.perf_counter()
        base, _ = _parse_mode(self.mode, None)
        if base == "hybrid" and self.skip_uncovered and not self._corpus_covered:
            # no query would reach the vector route: do not embed a corpus the encoder cannot read
            self.build_stats = {
                "documents": len(self.documents), "chunks": len(self.chunks), "encoded": 0,
                "vector_index_rebuilt": None, "collection": None,
                "bm25_seconds": round(t1 - t0, 3), "vector_seconds": None,
                "manifest_seconds": round(self._manifest_seconds(), 3), "repaired": list(self.repaired),
            }
            return self.build_stats
        vectors = self._ensure_vectors(progress)
        t2 = time.perf_counter()
        self.build_stats = {
            "documents": len(self.documents),
            "chunks": len(self.chunks),
            "encoded": self.embedder.encoded - encoded_before,
            "vector_index_rebuilt": vectors.rebuilt,
            "collection": vectors.name,
            "bm25_seconds": round(t1 - t0, 3),
            "vector_seconds": round(t2 - t1, 3),
            # checking the stored indexes against their manifests (part of the two above)
            "manifest_seconds": round(self._manifest_seconds(), 3),
            "repaired": list(self.repaired),
        }
        return self.build_stats

    def _manifest_seconds(self) -> float:
        return sum(getattr(index, "manifest_seconds", 0.0) for index in (self._bm25, self._vectors)
                   if index is not None)

    # -- searching ------------------------------------------------------------------

    def search(
        self,
        query: str,
        top_k: int | None = None,
        fetch_k: int | None = None,
        mode: str | None = None,
        threshold: float | None = None,
        *,
        rerank: bool | None = None,
        rrf_k: int | None = None,
        unique_docs: bool | None = None,
        fusion: str | None = None,
        route_weights: Mapping[str, float] | str | None = None,
    ) -> list[Hit]:
        """Ranked hits for one query, best first; at most ``top_k``, fewer under ``threshold``.

        See :meth:`search_batch` for the meaning of each argument.
        """
        return self.search_batch(
            [query],
            top_k,
            fetch_k,
            mode,
            threshold,
            rerank=rerank,
            rrf_k=rrf_k,
            unique_docs=unique_docs,
            fusion=fusion,
            route_weights=route_weights,
        )[0]

    def search_batch(
        self,
        queries: Sequence[str],
        top_k: int | None = None,
        fetch_k: int | None = None,
        mode: str | None = None,
        threshold: float | None = None,
        *,
        rerank: bool | None = None,
        rrf_k: int | None = None,
        unique_docs: bool | None = None,
        fusion: str | None = None,
        route_weights: Mapping[str, float] | str | None = None,
    ) -> list[list[Hit]]:
        """Search many queries: one embedding batch, one chroma query, BM25 per query.

        - ``mode``: ``bm25``, ``vector``, ``hybrid``, optionally ``+rerank``
          (``rerank=True`` adds it, ``False`` removes it).
        - ``fetch_k``: candidates taken from each route before fusion or rerank,
          raised to ``top_k`` when smaller; a single route without rerank
          simply returns its ``top_k``.
        - rerank rescores the best ``max(fetch_k, top_k)`` candidates (fused ones
          in hybrid).
        - ``threshold``: hits whose final score is below it are dropped; the
          scale is the final score's (BM25 score, cosine, RRF or the
          cross-encoder's).
        - ``rrf_k``: the RRF constant for this call.
        - ``fusion``: how hybrid combines its routes: ``rrf`` (reciprocal rank
          fusion, the default), ``convex-minmax`` or ``convex-zscore`` (a weighted
          sum of each route's normalised scores; see :mod:`.fusion`).
        - ``route_weights``: each route's weight in the fusion, e.g.
          ``{"bm25": 1, "vector": 0.5}`` or ``"bm25=1,vector=0.5"`` (default 1 each);
          a weak route (an encoder that does not cover the corpus's language) can
          be weighted down or to 0 without leaving hybrid mode.
        - ``unique_docs``: rank documents instead of chunks: each route keeps
          only the best chunk of a document (fetching deeper until it has
          ``fetch_k`` distinct documents), fusion works on document ranks, and
          each hit is the document's best chunk. Without it, ``top_k`` chunks
          may cover fewer than ``top_k`` documents.
        """
        top_k = _positive("top_k", self.top_k if top_k is None else top_k)
        fetch_k = _positive("fetch_k", self.fetch_k if fetch_k is None else fetch_k)
        rrf_k = self.rrf_k if rrf_k is None else rrf_k
        how = self.fusion if fusion is None else _fusion(fusion)
        weights = self.route_weights if route_weights is None else _route_weights(route_weights)
        by_doc = self.unique_docs if unique_docs is None else unique_docs
        base, use_rerank = _parse_mode(mode or self.mode, rerank)
        if use_rerank and self.reranker is None:
            raise ValueError("reranking needs rerank_model (a CrossEncoder path)")
        # a route weighted 0 adds nothing, not even the candidates the other route missed: not searched
        routes = tuple(r for r in _ROUTES[base] if base != "hybrid" or weights.get(r, 1.0) != 0)
        pool = top_k if len(routes) == 1 and not use_rerank else max(fetch_k, top_k)
        queries = list(queries)
        if not queries:
            return []

        found: dict[str, list[list[tuple[int, float]]]] = {}
        if "bm25" in routes:
            bm25 = self._ensure_bm25()
            found["bm25"] = self._fetch(
                lambda idx, n: bm25.search_batch([queries[i] for i in idx], n),
                len(queries),
                pool,
                by_doc,
            )
        vector_for = list(range(len(queries)))
        if "vector" in routes:
            if base == "hybrid":  # a query the encoder cannot read is left to BM25 (skip_uncovered)
                vector_for = [i for i in vector_for if self._vector_serves(queries[i])]
            found["vector"] = [[] for _ in queries]
            if vector_for:
                vectors = self._ensure_vectors()
                qvecs = self.embedder.embed_queries([queries[i] for i in vector_for])

                def vector_fetch(idx: list[int], n: int) -> list[list[tuple[int, float]]]:
                    return [
                        [(self._position[cid], score) for cid, score in hits]
                        for hits in vectors.query(qvecs[idx], n)
                    ]

                for i, hits in zip(vector_for, self._fetch(vector_fetch, len(vector_for), pool, by_doc)):
                    found["vector"][i] = hits
        searched = set(vector_for)

        keep = pool if use_rerank else top_k  # hits past this are cut below: never build them
        ranked = [
            self._combine({r: found[r][i] for r in routes if r != "vector" or i in searched}, rrf_k, by_doc,
                          keep, how, weights)
            for i in range(len(queries))
        ]
        if use_rerank:
            ranked = self._rerank(queries, [hits[:pool] for hits in ranked])
        out = []
        for hits in ranked:
            if threshold is not None:
                hits = [h for h in hits if h.score >= threshold]
            out.append(hits[:top_k])
        return out

    def _vector_serves(self, query: str) -> bool:
        """Whether hybrid search gives ``query`` to the vector route.

        Not when ``skip_uncovered`` is on and the encoder's languages are known to
        leave out the query's script, or every document of the corpus.
        """
        covered = self.coverage.covered_scripts
        if not self.skip_uncovered or covered is None:
            return True
        return self._corpus_covered and dominant_script(query) in covered

    @property
    def _corpus_covered(self) -> bool:
        """Whether the encoder covers any document (else hybrid never needs the vector index)."""
        covered = self.coverage.covered_scripts
        return covered is None or any(script in covered for script in self.coverage.scripts)

    @property
    def _uses_vectors(self) -> bool:
        """Whether this retriever's own mode and weights ever run the encoder."""
        base, _ = _parse_mode(self.mode, None)
        return base == "vector" or (base == "hybrid" and self.route_weights.get("vector", 1.0) != 0)

    @property
    def _bm25_alone(self) -> bool:
        """Whether hybrid search leaves some of this corpus's scripts to BM25 alone."""
        base, _ = _parse_mode(self.mode, None)
        return base == "hybrid" and self.skip_uncovered and bool(self.coverage.uncovered)

    @property
    def warnings(self) -> list[str]:
        """What the user must know about this retriever's results: an encoder that does not
        cover the corpus (with the share of documents and the fix). Also in :meth:`describe`."""
        if not self._uses_vectors:
            return []
        message = coverage_warning(self.coverage, self._bm25_alone)
        return [message] if message else []

    def _fetch(
        self,
        fetch: Callable[[list[int], int], list[list[tuple[int, float]]]],
        n_queries: int,
        pool: int,
        by_doc: bool,
    ) -> list[list[tuple[int, float]]]:
        """One route's candidates per query: ``pool`` chunks, or ``pool`` distinct documents.

        With ``by_doc`` only a document's first (best) chunk is kept, and a query
        whose candidates cover fewer than ``pool`` documents is fetched again,
        twice as deep, until it has them or the route has nothing more. The
        first fetch already goes ``min(4, chunks per document)`` times deeper
        than ``pool``: on SciFact (6 chunks a document) 100 chunks covered a
        median 39 documents, so nearly every query paid a second round trip.
        """
        out: list[list[tuple[int, float]]] = [[] for _ in range(n_queries)]
        todo, total = list(range(n_queries)), len(self.chunks)
        doc_of = self._doc_of
        depth = pool
        if by_doc:
            per_doc = -(-total // max(len(self.documents), 1))  # ceil: chunks per document
            depth = min(pool * max(1, min(4, per_doc)), total)
        while todo:
            pending = []
            for i, hits in zip(todo, fetch(todo, depth)):
                if not by_doc:
                    out[i] = hits[:pool]
                    continue
                seen: set[str] = set()
                kept = []
                for pos, score in hits:
                    doc = doc_of[pos]
                    if doc not in seen:
                        seen.add(doc)
                        kept.append((pos, score))
                        if len(kept) == pool:
                            break
                out[i] = kept
                if len(kept) < pool and len(hits) >= depth and depth < total:
                    pending.append(i)
            todo, depth = pending, min(depth * 2, total)
        return out

    def _hit(self, pos: int, score: float, explain: dict[str, Any]) -> Hit:
        chunk = self.chunks[pos]
        return Hit(chunk.chunk_id, chunk.doc_id, score, chunk.text, explain)

    def _combine(
        self,
        per_route: dict[str, list[tuple[int, float]]],
        rrf_k: int,
        by_doc: bool = False,
        limit: int | None = None,
        fusion: str = "rrf",
        weights: Mapping[str, float] | None = None,
    ) -> list[Hit]:
        """Single route: its own order and scores. Two routes: ``fusion`` of them.

        Fusion is over chunks, or over documents with ``by_doc`` (a document is
        then shown by the chunk its best-ranked route found).
        """
        if len(per_route) == 1:
            ((route, hits),) = per_route.items()
            return [
                self._hit(pos, float(score), {route: {"rank": rank, "score": float(score)}})
                for rank, (pos, score) in enumerate(hits[:limit], start=1)
            ]
        explain: dict[Any, dict[str, Any]] = {}
        shown: dict[Any, tuple[int, int]] = {}  # key -> (best rank, chunk position)
        scored: dict[str, list[tuple[Any, float]]] = {}
        for route, hits in per_route.items():
            scored[route] = []
            for rank, (pos, score) in enumerate(hits, start=1):
                key = self.chunks[pos].doc_id if by_doc else pos
                scored[route].append((key, float(score)))
                explain.setdefault(key, {})[route] = {"rank": rank, "score": float(score)}
                if key not in shown or rank < shown[key][0]:
                    shown[key] = (rank, pos)
        result = []
        if fusion == "rrf":
            fused = reciprocal_rank_fusion({r: [k for k, _ in pairs] for r, pairs in scored.items()}, rrf_k,
                                           weights)
        else:
            fused = convex_fusion(scored, weights, normalisation=fusion.partition("-")[2])
        for key, score, _ranks in fused[:limit]:
            explain[key]["fused"] = score
            if fusion != "rrf":
                explain[key]["fusion"] = fusion
            result.append(self._hit(shown[key][1], score, explain[key]))
        return result

    def _rerank(self, queries: list[str], candidates: list[list[Hit]]) -> list[list[Hit]]:
        """Replace each candidate's score with the cross-encoder's and reorder (stable on ties)."""
        assert self.reranker is not None
        pairs = [(q, h.text) for q, hits in zip(queries, candidates) for h in hits]
        scores = iter(self.reranker.score_pairs(pairs).tolist())
        out = []
        for hits in candidates:
            for h in hits:
                h.score = float(next(scores))
                h.explain["rerank"] = h.score
            out.append(sorted(hits, key=lambda h: -h.score))
        return out

    # -- self-description -------------------------------------------------------------

    def doc_ids(self) -> list[str]:
        """The ids of the corpus's documents, in corpus order: the plugin checks gold ids against
        them, as a gold id no document carries can never be retrieved."""
        return [d.doc_id for d in self.documents]

    def describe(self) -> dict[str, Any]:
        """What this retriever measures with, JSON-able, for baseline fingerprints.

        Paths are left out (they differ between machines); models appear by name
        and content hash.
        """
        return {
            "retriever": "pytest_ragmetrics.stack.Retriever",
            "mode": self.mode,
            "top_k": self.top_k,
            "fetch_k": self.fetch_k,
            "rrf_k": self.rrf_k,
            "model": self.embedder.name,
            "model_sha": self.embedder.fingerprint[:12],
            "embed_backend": self.embedder.backend,
            "chunk_size": self.chunk_size,
            "overlap": self.overlap if self.chunk_size else 0,
            "title_prefix": self.title_prefix,
            "reranker": self.reranker.name if self.reranker else None,
            "reranker_sha": self.reranker.fingerprint[:12] if self.reranker else None,
            "bm25_backend": self.bm25_backend,
            "bm25": {"k1": self.bm25_k1, "b": self.bm25_b, "language": self.language},
            "hnsw": self.hnsw.label(),
            "unique_docs": self.unique_docs,
            # only when set: baselines measured before these existed keep their description
            **({"fusion": self.fusion} if self.fusion != "rrf" else {}),
            **({"route_weights": dict(self.route_weights)} if self.route_weights else {}),
            **({"query_prefix": self.embedder.query_prefix} if self.embedder.query_prefix else {}),
            **({"passage_prefix": self.embedder.passage_prefix} if self.embedder.passage_prefix else {}),
            **({"encoder_choice": note} if (note := self.encoder_choice.note()) and self._uses_vectors else {}),
            **({"bm25_alone_for": sorted(self.coverage.uncovered)} if self._bm25_alone else {}),
            **({"warnings": self.warnings} if self.warnings else {}),
            "corpus": {
                "documents": len(self.documents),
                "chunks": len(self.chunks),
                "sha": self.corpus_sha[:12],
            },
        }

    def __repr__(self) -> str:
        return (
            f"Retriever(mode={self.mode!r}, chunks={len(self.chunks)}, "
            f"chunk_size={self.chunk_size}, model={self.embedder.name!r})"
        )


class _VectorBuild:
    """The vector index build as one count of chunks, told from two places: the embedder
    reports each slice it encodes, and the index each batch it inserts just after (chunks
    the cache answered included). A chunk counts once, when first told, so a cold build
    moves as the encoder does and a rebuild from the cache as the inserts do."""

    def __init__(self, progress: Any) -> None:
        self.progress = progress
        self._told = 0  # chunks passed on
        self._inserted = 0  # chunks the index has inserted
        #: what the embedder advances
        self.encoder = SimpleNamespace(advance=self._encoded)

    def start(self, task: str, total: int | None = None, unit: str = "items") -> None:
        self._told = self._inserted = 0
        self.progress.start(task, total, unit)

    def advance(self, n: int = 1) -> None:
        if n == 0:  # still working (a wait for the lock)
            self.progress.advance(0)
            return
        self._inserted += n
        if self._inserted > self._told:
            self.progress.advance(self._inserted - self._told)
            self._told = self._inserted

    def _encoded(self, n: int = 1) -> None:
        self._told += n
        self.progress.advance(n)

    def finish(self) -> None:
        self.progress.finish()


def _fusion(raw: str) -> str:
    if raw not in FUSIONS:
        raise ValueError(f"unknown fusion {raw!r}: expected one of {', '.join(FUSIONS)}")
    return raw


def _route_weights(raw: Mapping[str, float] | str | None) -> dict[str, float]:
    """Route weights from a mapping or ``"bm25=1,vector=0.5"``, as given (checked, not filled in)."""
    weights = parse_route_weights(raw) if isinstance(raw, str) else {k: float(v) for k, v in (raw or {}).items()}
    check_route_weights(("bm25", "vector"), weights)
    return weights


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
        raise ValueError(f"no such model folder; expected a sentence-transformers folder or {MULTILINGUAL_MODEL_NAME!r}")
    return raw


def _mode(raw: str) -> str:
    _parse_mode(raw, None)
    return raw


#: Variables read as they are: a prefix such as ``"query: "`` ends in a space.
_VERBATIM = frozenset({"RAGMETRICS_QUERY_PREFIX", "RAGMETRICS_PASSAGE_PREFIX"})

#: ``RAGMETRICS_*`` variable -> (keyword argument, parser); read by :meth:`Retriever.from_env`.
ENV_VARS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "RAGMETRICS_MODE": ("mode", _mode),
    "RAGMETRICS_CHUNK_SIZE": ("chunk_size", _chunk_size),
    "RAGMETRICS_OVERLAP": ("overlap", _integer),
    "RAGMETRICS_TOP_K": ("top_k", _integer),
    "RAGMETRICS_FETCH_K": ("fetch_k", _integer),
    "RAGMETRICS_RRF_K": ("rrf_k", _integer),
    "RAGMETRICS_FUSION": ("fusion", _fusion),
    "RAGMETRICS_ROUTE_WEIGHTS": ("route_weights", _route_weights),
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
