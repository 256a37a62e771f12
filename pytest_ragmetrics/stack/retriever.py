"""The reference retriever: BM25, vector, hybrid (RRF) and rerank behind one ``search``.

Every switch is an argument (mode, top_k, fetch_k, rrf_k, chunking, models), so
one loop produces an ablation table, and every hit carries how each route
ranked it, so a surprising number can be traced to its mechanism. It satisfies
the plugin's retriever protocol as is: ``search(query, k)`` returns hits best
first, each with an ``id`` (the chunk id ``doc#i-n``).

``filters`` (``search(query, k, filters={"tenant": "acme"})``) keep the documents whose
metadata (the fields of a corpus.jsonl line beyond doc_id, title and text) match: the
vector route asks chromadb with ``where`` on the chunks' stored metadata, and BM25 scores
only the matching chunks before it ranks, so k results still come back when k match.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_ragmetrics import progress as _progress
from pytest_ragmetrics.chunking import Chunk, chunk_documents
from pytest_ragmetrics.corpus import Document, load_corpus

from .bm25 import BM25Index, make_tokenizer, stored_bm25
from .build_progress import VectorBuildProgress
from .choice import EncoderChoice, choose_encoder, coverage_warning
from .filters import checked_filters, chroma_where, chunk_mask, stored_metadata
from .index import VectorIndex
from .languages import coverage, dominant_script
from .paths import bm25_dir, cache_path, index_dir, settings_key
from .ranking import Candidates, Hit, combine, fetch_candidates, rerank_hits
from .rerank import Reranker
from .settings import (
    ENV_VARS,
    MODES,
    VERBATIM,
    StackSettings,
    check_fusion,
    checked_weights,
    parse_mode,
    positive,
)

__all__ = ["ENV_VARS", "MODES", "Hit", "Retriever", "StackSettings"]

_ROUTES = {"bm25": ("bm25",), "vector": ("vector",), "hybrid": ("bm25", "vector")}


class Retriever:
    """A corpus indexed for BM25 and vector search, searched in any mode.

    Construction loads and chunks the corpus (cheap; corpus errors surface
    here). The BM25 index and the chroma collection are built on first use, or
    all at once by :meth:`build`. Without ``data_dir`` the collection lives in
    ``.ragmetrics/index/<hash of the settings>`` under the project, so a sweep over
    settings never shares a directory; the embedding cache is shared by all.

    The settings (mode, chunking, models, backends, progress) are one
    :class:`StackSettings`, given whole or as keywords of the same names:
    ``Retriever(corpus, mode="bm25")`` or ``Retriever(corpus, StackSettings(mode="bm25"))``.
    :attr:`settings` keeps them; the attributes of the same names (``mode``, ``top_k``, ...)
    are what searches default to.
    """

    def __init__(
        self,
        corpus: str | Path | Sequence[Document],
        settings: StackSettings | None = None,
        **keywords: Any,
    ) -> None:
        # checked first (StackSettings does it when made), before the corpus is read or anything is created
        self.settings = settings = StackSettings.of(settings, keywords, "Retriever")
        self.progress = settings.progress
        self.top_k, self.fetch_k, self.rrf_k = settings.top_k, settings.fetch_k, settings.rrf_k
        self.mode, self.fusion = settings.mode, settings.fusion
        weights = settings.route_weights  # a mapping or None by now: StackSettings parses a string when made
        self.route_weights: dict[str, float] = dict(weights) if isinstance(weights, Mapping) else {}
        chunk_size, overlap, title_prefix = settings.chunk_size, settings.overlap, settings.title_prefix
        self.chunk_size, self.overlap, self.title_prefix = chunk_size, overlap, title_prefix
        self.bm25_backend, self.bm25_k1, self.bm25_b = settings.bm25_backend, settings.bm25_k1, settings.bm25_b
        self.hnsw, self.chroma_url = settings.hnsw, settings.chroma_url
        self.unique_docs = settings.unique_docs
        self.skip_uncovered = settings.skip_uncovered

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
        #: each document's metadata (its corpus.jsonl fields), what filters match; empty for a folder of files
        self.metadata: dict[str, dict[str, Any]] = {d.doc_id: dict(d.metadata) for d in self.documents
                                                    if getattr(d, "metadata", None)}
        digest = hashlib.sha256()
        for c in self.chunks:
            digest.update(c.chunk_id.encode() + b"\0" + c.text.encode() + b"\0")
        for doc_id, fields in sorted(self.metadata.items()):  # only a corpus with metadata: others keep their hash
            digest.update(json.dumps([doc_id, fields], sort_keys=True, ensure_ascii=False).encode() + b"\0")
        self.corpus_sha = digest.hexdigest()
        self.tokenizer = make_tokenizer(settings.language, [c.text for c in self.chunks])
        self.language = getattr(self.tokenizer, "language", settings.language)

        texts = [f"{d.title}\n{d.text}" for d in self.documents]
        embedder = settings.embedder
        if isinstance(embedder, EncoderChoice):  # shared by a factory, with why it was chosen
            self.encoder_choice = embedder
        elif embedder is not None:
            self.encoder_choice = EncoderChoice(embedder, switched=False)
        else:
            prompts = {k: v for k, v in (("query_prefix", settings.query_prefix),
                                         ("passage_prefix", settings.passage_prefix),
                                         ("languages", settings.model_languages)) if v is not None}
            self.encoder_choice = choose_encoder(texts, model=settings.model, backend=settings.embed_backend,
                                                 cache_path=cache_path(), **prompts)
        self.embedder = self.encoder_choice.embedder
        #: the corpus's documents by script, against the encoder's languages
        self.coverage = coverage(self.embedder.name, self.embedder.languages, texts)
        rerank_model = settings.rerank_model
        self.reranker = rerank_model if isinstance(rerank_model, Reranker) or rerank_model is None \
            else Reranker(rerank_model)
        self._data_dir = Path(settings.data_dir) if settings.data_dir is not None else None
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
        """A retriever whose ``defaults`` (keywords, or ``settings=StackSettings(...)`` with
        keywords on top) are overridden by ``RAGMETRICS_*`` variables.

        This is how a demo ``conftest.py`` lets CI or a developer try a degraded
        setting without editing code, e.g. ``RAGMETRICS_MODE=bm25`` or
        ``RAGMETRICS_CHUNK_SIZE=100`` (see :data:`ENV_VARS`). When only the chunk
        size is set and the default overlap would not fit, overlap becomes a fifth
        of the chunk size.
        """
        env = os.environ if environ is None else environ
        kwargs = dict(defaults)
        start = StackSettings.of(kwargs.pop("settings", None), kwargs, "Retriever.from_env")
        for var, (name, convert) in ENV_VARS.items():
            raw = env.get(var)
            if raw is None or raw.strip() == "":
                continue
            try:
                kwargs[name] = convert(raw if var in VERBATIM else raw.strip())
            except ValueError as exc:
                raise ValueError(f"environment variable {var}={raw!r}: {exc}") from None
        size = kwargs.get("chunk_size", start.chunk_size)
        if size is not None and "RAGMETRICS_OVERLAP" not in env:
            from .factory import (
                Chunking,  # the factory builds Retrievers: imported here, not at the top
            )

            kwargs["overlap"] = Chunking.of(size, kwargs.get("overlap", start.overlap)).overlap
        return cls(corpus, start, **kwargs)

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
            build = VectorBuildProgress(reporter)
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
                metadatas=[stored_metadata(self.metadata.get(d)) for d in self._doc_of] if self.metadata else None,
            )
            self.repaired.extend(index.repaired)
            self._vectors = index
        return self._vectors

    def build(self, progress: Any = None) -> dict[str, Any]:
        """Build (or reuse) the indexes the retriever's mode searches now; returns timings and how
        much was encoded.

        A ``bm25`` retriever builds no vector index: encoding a corpus nobody searches by vector
        took minutes on a large one. A search that asks for another ``mode`` builds it then.
        ``progress`` overrides the retriever's own for this build (see the class).
        """
        encoded_before = self.embedder.encoded
        t0 = time.perf_counter()
        self._ensure_bm25(progress)
        t1 = time.perf_counter()
        base, _ = parse_mode(self.mode, None)
        if base == "bm25" or (base == "hybrid" and self.skip_uncovered and not self._corpus_covered):
            # no query would reach the vector route: do not embed a corpus nobody searches by vector
            return self._record_build(t1 - t0)
        vectors = self._ensure_vectors(progress)
        return self._record_build(t1 - t0, vectors, time.perf_counter() - t1, self.embedder.encoded - encoded_before)

    def _record_build(self, bm25_seconds: float, vectors: VectorIndex | None = None,
                      vector_seconds: float | None = None, encoded: int = 0) -> dict[str, Any]:
        """Set and return :attr:`build_stats`; without ``vectors`` nothing was embedded."""
        self.build_stats = {
            "documents": len(self.documents),
            "chunks": len(self.chunks),
            "encoded": encoded,
            "vector_index_rebuilt": vectors.rebuilt if vectors is not None else None,
            "collection": vectors.name if vectors is not None else None,
            "bm25_seconds": round(bm25_seconds, 3),
            "vector_seconds": round(vector_seconds, 3) if vector_seconds is not None else None,
            # checking the stored indexes against their manifests (part of the two above)
            "manifest_seconds": round(self._manifest_seconds(), 3),
            "repaired": list(self.repaired),
        }
        return self.build_stats

    def _manifest_seconds(self) -> float:
        return sum(getattr(index, "manifest_seconds", 0.0) for index in (self._bm25, self._vectors)
                   if index is not None)

    # -- searching ------------------------------------------------------------------

    def search(self, query: str, top_k: int | None = None, fetch_k: int | None = None, mode: str | None = None,
               threshold: float | None = None, filters: Mapping[str, Any] | None = None,
               **options: Any) -> list[Hit]:
        """Ranked hits for one query, best first; at most ``top_k``, fewer under ``threshold``; with
        ``filters`` (``{"tenant": "acme"}``) only from documents whose metadata match.

        The arguments and ``options`` (``rerank``, ``rrf_k``, ``unique_docs``, ``fusion``,
        ``route_weights``) are :meth:`search_batch`'s.
        """
        return self.search_batch([query], top_k, fetch_k, mode, threshold, **options,
                                 filters=None if filters is None else [filters])[0]

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
        filters: Sequence[Mapping[str, Any] | None] | None = None,
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
        - ``filters``: one mapping (or None) per query, ``{"tenant": "acme"}``: only documents whose
          metadata hold each key with that value (or one of a list of values) are searched: chromadb's
          ``where`` on the vector route, a mask before ranking on BM25.
        """
        top_k = positive("top_k", self.top_k if top_k is None else top_k)
        fetch_k = positive("fetch_k", self.fetch_k if fetch_k is None else fetch_k)
        rrf_k = self.rrf_k if rrf_k is None else rrf_k
        how = self.fusion if fusion is None else check_fusion(fusion)
        weights = self.route_weights if route_weights is None else checked_weights(route_weights)
        by_doc = self.unique_docs if unique_docs is None else unique_docs
        base, use_rerank = parse_mode(mode or self.mode, rerank)
        if use_rerank and self.reranker is None:
            raise ValueError("reranking needs rerank_model (a CrossEncoder path)")
        # a route weighted 0 adds nothing, not even the candidates the other route missed: not searched
        routes = tuple(r for r in _ROUTES[base] if base != "hybrid" or weights.get(r, 1.0) != 0)
        pool = top_k if len(routes) == 1 and not use_rerank else max(fetch_k, top_k)
        queries = list(queries)
        if not queries:
            return []
        if filters is not None and len(filters) != len(queries):
            raise ValueError(f"filters: {len(filters)} given for {len(queries)} queries; give one (or None) per query")
        wanted = [checked_filters(f, self.metadata, self.corpus_source) for f in (filters or [None] * len(queries))]
        masks = [None if f is None else chunk_mask(f, self.metadata, self._doc_of) for f in wanted]

        def route_fetch(
            fetch: Callable[[list[int], int], list[Candidates]], n_queries: int
        ) -> list[Candidates]:
            return fetch_candidates(fetch, n_queries, pool, by_doc, self._doc_of, len(self.documents))

        found: dict[str, list[Candidates]] = {}
        if "bm25" in routes:
            bm25 = self._ensure_bm25()
            found["bm25"] = route_fetch(
                lambda idx, n: bm25.search_batch([queries[i] for i in idx], n, [masks[i] for i in idx]), len(queries))
        vector_for = list(range(len(queries)))
        if "vector" in routes:
            if base == "hybrid":  # a query the encoder cannot read is left to BM25 (skip_uncovered)
                vector_for = [i for i in vector_for if self._vector_serves(queries[i])]
            found["vector"] = [[] for _ in queries]
            if vector_for:
                vectors = self._ensure_vectors()
                qvecs = self.embedder.embed_queries([queries[i] for i in vector_for])

                def vector_fetch(idx: list[int], n: int) -> list[Candidates]:
                    out: dict[int, Candidates] = {}
                    groups: dict[str, list[int]] = {}  # one chromadb query per distinct filter
                    for i in idx:
                        groups.setdefault(json.dumps(wanted[vector_for[i]], sort_keys=True), []).append(i)
                    for group in groups.values():
                        where = chroma_where(wanted[vector_for[group[0]]])
                        for i, hits in zip(group, vectors.query(qvecs[group], n, where)):
                            out[i] = [(self._position[cid], score) for cid, score in hits]
                    return [out[i] for i in idx]

                for i, candidates in zip(vector_for, route_fetch(vector_fetch, len(vector_for))):
                    found["vector"][i] = candidates
        searched = set(vector_for)

        keep = pool if use_rerank else top_k  # hits past this are cut below: never build them
        ranked = [
            combine(self.chunks, {r: found[r][i] for r in routes if r != "vector" or i in searched}, rrf_k, by_doc,
                    keep, how, weights)
            for i in range(len(queries))
        ]
        if use_rerank:
            assert self.reranker is not None
            ranked = rerank_hits(self.reranker, queries, [hits[:pool] for hits in ranked])
        if threshold is not None:
            ranked = [[h for h in hits if h.score >= threshold] for hits in ranked]
        if self.metadata:  # each hit says what it is, so a caller can check it against a scope
            for hits in ranked:
                for hit in hits:
                    hit.metadata = self.metadata.get(hit.doc_id, {})
        return [hits[:top_k] for hits in ranked]

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
        base, _ = parse_mode(self.mode, None)
        return base == "vector" or (base == "hybrid" and self.route_weights.get("vector", 1.0) != 0)

    @property
    def _bm25_alone(self) -> bool:
        """Whether hybrid search leaves some of this corpus's scripts to BM25 alone."""
        base, _ = parse_mode(self.mode, None)
        return base == "hybrid" and self.skip_uncovered and bool(self.coverage.uncovered)

    @property
    def warnings(self) -> list[str]:
        """What the user must know about this retriever's results: an encoder that does not
        cover the corpus (with the share of documents and the fix). Also in :meth:`describe`."""
        if not self._uses_vectors:
            return []
        message = coverage_warning(self.coverage, self._bm25_alone)
        return [message] if message else []

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
            # the onnxruntime backends' recipe: vectors of another recipe are a settings change
            **({"embed_recipe": self.embedder.recipe} if self.embedder.recipe else {}),
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
