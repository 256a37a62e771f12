"""The vector index: one chromadb collection of chunk embeddings per setting.

The same code drives a local ``PersistentClient`` (a data dir of its own) or a
Chroma server (``chromadb.HttpClient``, for corpora that outgrow one machine);
only the client differs. Embeddings are always supplied by the stack
(``embeddings=`` / ``query_embeddings=``): given documents alone or
``query_texts=``, chromadb would fetch its own model from the network.

A collection is reused only when its recorded settings and corpus hash match
and it holds every chunk; otherwise it is dropped and rebuilt (from the
embedding cache), so a changed setting never mixes with an old one.

A collection holds ids and vectors only: the stack keeps the chunk texts and
their documents itself, and chromadb would otherwise build a full-text index of
the texts and an index of the metadata, half the time of an upsert (9.8 s
against 5.1 s for 9,252 chunks). Its ``sync_threshold`` is its size: chromadb
writes the HNSW graph to disk every ``sync_threshold`` additions (1,000 by
default) and every process that opens the collection replays the additions
since into its own copy of the graph, in an order that differs from process to
process, so near-ties came back in another order in another process (1-6 of
SciFact's 300 rankings, between serial runs and pytest-xdist workers alike).
Persisted whole, the graph is the same file for every reader, and opening it
replays nothing. ``LAYOUT`` in the collection's metadata marks collections
built this way; older ones are rebuilt (from the embedding cache).

The client and a local folder's checks and repairs (its manifest, the build
lock) are :mod:`.index_folder`; building and querying a collection is here.
"""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pytest_ragmetrics.progress import SILENT

from .index_folder import (
    _SQLITE,
    MANIFEST,
    UNVERIFIED,
    WAIT_TASK,
    IndexStoreError,
    _build_lock,
    _forget_system,
    _live_segments,
    _segment_folders,
    check_folder,
    check_writable,
    chroma_files,
    clear_folder,
    connect,
)
from .manifest import record, report_repair, write_manifest

__all__ = ["DEFAULT_HNSW", "MANIFEST", "WAIT_TASK", "HnswSettings", "IndexStoreError", "VectorIndex", "check_folder",
           "chroma_files", "clear_folder", "connect"]


@dataclass(frozen=True)
class HnswSettings:
    """HNSW graph parameters of a collection (cosine space).

    Recall@10 against exact search on SciFact (31,592 chunks, 1,000 queries:
    its 300 questions and 700 document titles): ef_search 10 loses 5.3%,
    chromadb's defaults (M 16, ef 100/100) 0.36%, ef 200/200 0.05%. With
    ef_search 400, ef_construction 400 loses 0.01% and inserts the vectors in
    13.1 s, 200 loses 0.04% in 8.8 s: the insert is the largest cost of a build
    after encoding, so construction stops at 200 and the search keeps the
    margin. A 9% loss has been reported for chromadb's defaults on another
    20k-vector set, which is why neither is left at 100. The settings are
    recorded with the collection: changing them rebuilds the index (from the
    embedding cache).
    """

    ef_construction: int = 200
    ef_search: int = 400
    max_neighbors: int = 16
    space: str = "cosine"

    def configuration(self, size: int | None = None) -> dict[str, Any]:
        """The ``configuration=`` argument of ``create_collection``.

        With ``size`` (the number of vectors the collection will hold), chromadb
        persists the graph once, when the last vector is in, and never leaves a
        tail for readers to replay.
        """
        hnsw: dict[str, Any] = asdict(self)
        if size:
            hnsw.update(sync_threshold=size, batch_size=min(size, 100))
        return {"hnsw": hnsw}

    def label(self) -> str:
        return f"{self.space}-M{self.max_neighbors}-efc{self.ef_construction}-efs{self.ef_search}"


DEFAULT_HNSW = HnswSettings()
#: How collections are written (see the module docstring); a collection recording another is rebuilt.
LAYOUT = 2


class VectorIndex:
    """Chunk vectors in one chromadb collection; query by vectors, get ``(chunk_id, cosine)``."""

    def __init__(
        self,
        name: str,
        settings: dict[str, str | int | float | bool],
        *,
        data_dir: str | Path | None = None,
        chroma_url: str | None = None,
        hnsw: HnswSettings = DEFAULT_HNSW,
        batch_size: int | None = None,
        progress: Any = None,
    ) -> None:
        self.name = name
        self.settings = dict(settings)
        self.settings["hnsw"] = hnsw.label()
        self.hnsw = hnsw
        self.data_dir = Path(data_dir) if data_dir is not None and not chroma_url else None
        self.chroma_url = chroma_url
        #: Vectors per ``upsert``; default: as many as chromadb takes in one call (5,461 in 1.5).
        #: Each call costs a fixed ~0.1 s beside its vectors: SciFact's 31,592 went in in 17.1 s
        #: in calls of 1,000 and in 13.8 s in calls of 5,000.
        self.batch_size = batch_size
        #: One line per repair of the local folder (a damaged or unverified index rebuilt), said by :meth:`sync`.
        self.repaired: list[str] = []
        self._unsaid: list[str] = []
        #: Seconds spent checking and recording the folder's manifest (hashing its files).
        self.manifest_seconds = 0.0
        self._manifest: dict[str, Any] | None = None
        # Opening a fresh folder creates chroma's tables: two processes doing it at once
        # race ("table collections already exists"), so opening takes the build lock too.
        # The manifest is checked under it, before chromadb reads a byte of the folder.
        #: Where waits for the lock and the build are reported (a pytest_ragmetrics.progress.Progress).
        self.progress = progress or SILENT
        if self.data_dir is not None:  # before the lock, which is a file in the folder too
            check_writable(self.data_dir)
        with _build_lock(self.data_dir, self.progress):
            if self.data_dir is not None:
                self._check_before_open(self.data_dir)
            self._client = connect(self.data_dir, chroma_url)
            if self.data_dir is not None:
                self._record_after_open(self.data_dir)
        self._collection: Any = None
        #: Set by :meth:`sync`: whether the last sync had to (re)build the collection.
        self.rebuilt = False

    def _check_before_open(self, folder: Path) -> None:
        """Verify the folder against its manifest; a mismatch deletes chroma's files there (rebuilt by sync)."""
        t0 = time.perf_counter()
        problem, self._manifest = check_folder(folder)
        self.manifest_seconds += time.perf_counter() - t0
        if problem is None:
            return
        if problem == UNVERIFIED:
            note = (f"the vector index in {folder} was rebuilt (from the embedding cache where it held the "
                    f"vectors): {problem}; "
                    "it is checked on every open from now on")
        else:
            note = (f"the vector index in {folder} was damaged and was rebuilt (from the embedding cache where it "
                    f"held the vectors): {problem}")
        _forget_system(folder)
        try:
            clear_folder(folder)
        except OSError as exc:
            raise IndexStoreError(
                f"the vector index in {folder} cannot be used ({problem}) and cannot be rebuilt there "
                f"({exc.strerror or exc}: {exc.filename or folder}): delete that folder, or make it writable, "
                "and the next run rebuilds it from the embedding cache"
            ) from None
        self.repaired.append(note)
        self._unsaid.append(note)

    def _record_after_open(self, folder: Path) -> None:
        """chromadb writes its database on opening a folder: record the new hash (or, for a folder
        without a verified manifest, every chroma file) so the next open checks what is there now."""
        t0 = time.perf_counter()
        try:
            if self._manifest is None:
                self._write_manifest(folder, chroma_files(folder))
            else:  # hashed again, not judged by its mtime: a write in the same clock tick keeps it
                files = dict(self._manifest["files"])
                files.update(record(folder, [_SQLITE]))
                if files != self._manifest["files"]:
                    write_manifest(folder / MANIFEST, files)
                    self._manifest = {"files": files}
        except OSError:
            pass  # a folder chromadb could open but we cannot write: the next open checks it again
        self.manifest_seconds += time.perf_counter() - t0

    def _write_manifest(self, folder: Path, names: list[str]) -> None:
        files = record(folder, names)
        write_manifest(folder / MANIFEST, files)
        self._manifest = {"files": files}

    def _after_build(self, folder: Path) -> None:
        """Under the build lock, once a build is complete: drop dead segment folders, vacuum the
        database, and write the manifest of what is left."""
        t0 = time.perf_counter()
        live = _live_segments(folder)
        if live is not None:
            for sub in _segment_folders(folder):
                if sub.name not in live:
                    shutil.rmtree(sub, ignore_errors=True)
        with contextlib.suppress(sqlite3.Error):  # what chromadb's own `chroma utils vacuum` runs
            db = sqlite3.connect(folder / _SQLITE, timeout=10)
            try:
                db.execute("VACUUM")
            finally:
                db.close()
        self._write_manifest(folder, chroma_files(folder, live))
        self.manifest_seconds += time.perf_counter() - t0

    def _get(self) -> Any:
        """The existing collection, or None (older chromadb raised ValueError when absent)."""
        from chromadb.errors import NotFoundError

        try:
            return self._client.get_collection(self.name, embedding_function=None)
        except (NotFoundError, ValueError):
            return None

    def _metadata(self, corpus_sha: str, count: int) -> dict[str, Any]:
        """What a collection records about itself, and what reuse checks."""
        return {**self.settings, "corpus_sha": corpus_sha, "chunks": count, "layout": LAYOUT}

    def _usable(self, collection: Any, corpus_sha: str, count: int) -> bool:
        meta = collection.metadata or {}
        wanted = self._metadata(corpus_sha, count)
        if not all(meta.get(k) == v for k, v in wanted.items()):
            return False
        try:  # a collection whose vector segment cannot be read is rebuilt, not trusted
            if collection.count() != count:
                return False
            if count:  # one nearest-neighbour probe reads the HNSW files, not only sqlite
                probe = collection.get(limit=1, include=["embeddings"])["embeddings"]
                collection.query(query_embeddings=np.asarray(probe, dtype=np.float32), n_results=1,
                                 include=["distances"])
            return True
        except Exception:
            return False

    def sync(
        self,
        ids: Sequence[str],
        texts: Sequence[str],
        corpus_sha: str,
        embed: Callable[[Sequence[str]], np.ndarray],
        progress: Any = None,
        metadatas: Sequence[Mapping[str, Any] | None] | None = None,
    ) -> bool:
        """Make the collection hold exactly these chunks; returns True if it was (re)built.

        Chunks are embedded (through ``embed``, normally the cache) and upserted
        in batches of ``batch_size`` (default: chromadb's largest). A (re)build is reported to ``progress`` (default:
        the index's) as ``building the vector index``, advanced after each batch. ``metadatas`` (one mapping
        or None per chunk) is stored with the chunks, for :meth:`query`'s ``where``; ``corpus_sha`` must
        cover it, since reuse is decided by it.
        """
        progress = progress or self.progress
        with _build_lock(self.data_dir, progress):
            collection = self._get()
            if collection is not None:
                if self._usable(collection, corpus_sha, len(ids)):
                    self._collection = collection
                    self.rebuilt = False
                    self._say_repairs()
                    return False
            if self.data_dir is not None:  # a build that does not finish leaves the folder unverified
                (self.data_dir / MANIFEST).unlink(missing_ok=True)
            if collection is not None:
                self._client.delete_collection(self.name)
            collection = self._client.create_collection(
                self.name,
                configuration=self.hnsw.configuration(len(ids)),
                metadata=self._metadata(corpus_sha, len(ids)),
                embedding_function=None,
            )
            most = self._client.get_max_batch_size()
            step = most if self.batch_size is None else min(self.batch_size, most)
            progress.start("building the vector index", len(ids), "chunks")
            for start in range(0, len(ids), step):
                end = start + step
                extra = {"metadatas": [dict(m) if m else None for m in metadatas[start:end]]} \
                    if metadatas is not None and any(metadatas[start:end]) else {}
                collection.upsert(ids=list(ids[start:end]), embeddings=embed(texts[start:end]), **extra)
                progress.advance(len(ids[start:end]))
            progress.finish()
            if self.data_dir is not None:
                self._after_build(self.data_dir)
            self._collection = collection
            self.rebuilt = True
        self._say_repairs()
        return True

    def _say_repairs(self) -> None:
        """Warn about each repair once, now that the folder is sound again."""
        while self._unsaid:
            report_repair(self._unsaid.pop(0), stacklevel=3)  # the caller of sync()

    def count(self) -> int:
        return 0 if self._collection is None else int(self._collection.count())

    def query(self, vectors: np.ndarray, n: int,
              where: Mapping[str, Any] | None = None) -> list[list[tuple[str, float]]]:
        """Nearest ``n`` chunks for each query vector, as ``(chunk_id, cosine similarity)``; with ``where``
        (a chromadb filter on the chunks' metadata) only among the chunks it keeps."""
        if self._collection is None:
            raise RuntimeError("VectorIndex.query before sync()")
        total = self.count()
        if len(vectors) == 0:
            return []
        if n <= 0 or total == 0:
            return [[] for _ in range(len(vectors))]
        res = self._collection.query(
            query_embeddings=np.asarray(vectors, dtype=np.float32),
            n_results=min(n, total),
            include=["distances"],
            **({"where": dict(where)} if where else {}),
        )
        return [
            [(cid, 1.0 - float(d)) for cid, d in zip(ids, dists)]
            for ids, dists in zip(res["ids"], res["distances"])
        ]
