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
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import numpy as np

from pytest_ragmetrics.errors import RagMetricsError
from pytest_ragmetrics.progress import SILENT, hold

__all__ = ["DEFAULT_HNSW", "HnswSettings", "IndexStoreError", "VectorIndex", "connect"]


class IndexStoreError(RagMetricsError, RuntimeError):
    """A local index folder chromadb cannot open (a corrupt or half-written ``chroma.sqlite3``)."""


@dataclass(frozen=True)
class HnswSettings:
    """HNSW graph parameters of a collection (cosine space).

    Measured with ``benchmarks/stack_hnsw.py`` on scifact (31,592 chunks of
    300/60, 1,000 queries), recall@10 against exact search: ef_search 10 loses
    5.3%, chromadb's defaults (M 16, ef 100/100) 0.36%, ef 200/200 0.05%, and
    ef_construction/ef_search 400 with M 16 nothing, at ~1 ms a query and ~37 s
    to index the 31.6k vectors. The design notes report a 9% loss for the
    defaults on another 20k-vector set, so the defaults keep this margin. They
    are recorded in the collection's settings: changing them rebuilds the index.
    """

    ef_construction: int = 400
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


def connect(data_dir: str | Path | None = None, chroma_url: str | None = None) -> Any:
    """A chromadb client: ``HttpClient`` for ``chroma_url``, else ``PersistentClient(data_dir)``.

    Telemetry is off in both; ``chroma_url`` is ``http[s]://host[:port]``.
    """
    import chromadb
    from chromadb.config import Settings

    settings = Settings(anonymized_telemetry=False)
    if chroma_url:
        url = urlparse(chroma_url if "://" in chroma_url else f"http://{chroma_url}")
        if not url.hostname:
            raise ValueError(f"chroma_url {chroma_url!r} has no host")
        ssl = url.scheme == "https"
        port = url.port or (443 if ssl else 8000)
        return chromadb.HttpClient(host=url.hostname, port=port, ssl=ssl, settings=settings)
    if data_dir is None:
        raise ValueError("either data_dir or chroma_url is required")
    Path(data_dir).mkdir(parents=True, exist_ok=True)
    try:
        return chromadb.PersistentClient(path=str(data_dir), settings=settings)
    except Exception as exc:  # chromadb.errors.InternalError: "file is not a database", "malformed", …
        raise IndexStoreError(
            f"cannot open the chroma index in {data_dir}: {exc}. The folder may be corrupt or half-written "
            "(a disk problem, or a copy taken mid-build); delete it and the next run rebuilds it "
            "(embeddings come back from the cache)"
        ) from None


#: How the wait for another process's build is reported (see :func:`_build_lock`).
WAIT_TASK = "waiting for another process to finish building this index"


@contextlib.contextmanager
def _build_lock(data_dir: Path | None, progress: Any = None) -> Iterator[None]:
    """Serialise builds of one local data dir across processes (e.g. pytest-xdist workers).

    An OS lock on every platform (``flock`` on POSIX, ``msvcrt`` on Windows): it
    dies with its holder, so a build killed half-way never leaves the folder locked.
    Waiting for another holder is reported to ``progress`` as a step of its own.
    """
    if data_dir is None:
        yield
        return
    from filelock import FileLock  # installed with the stack; imported only when an index is opened

    data_dir.mkdir(parents=True, exist_ok=True)
    with hold(FileLock(data_dir / ".build.lock"), progress or SILENT, WAIT_TASK):
        yield


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
        batch_size: int = 1000,
        progress: Any = None,
    ) -> None:
        self.name = name
        self.settings = dict(settings)
        self.settings["hnsw"] = hnsw.label()
        self.hnsw = hnsw
        self.data_dir = Path(data_dir) if data_dir is not None and not chroma_url else None
        self.chroma_url = chroma_url
        self.batch_size = batch_size
        #: Where waits for the lock and the build are reported (a pytest_ragmetrics.progress.Progress).
        self.progress = progress or SILENT
        # Opening a fresh folder creates chroma's tables: two processes doing it at once
        # race ("table collections already exists"), so opening takes the build lock too.
        with _build_lock(self.data_dir, self.progress):
            self._client = connect(self.data_dir, chroma_url)
        self._collection: Any = None
        #: Set by :meth:`sync`: whether the last sync had to (re)build the collection.
        self.rebuilt = False

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
    ) -> bool:
        """Make the collection hold exactly these chunks; returns True if it was (re)built.

        Chunks are embedded (through ``embed``, normally the cache) and upserted
        in batches of ``batch_size``. A (re)build is reported to ``progress`` (default:
        the index's) as ``building the vector index``, advanced after each batch.
        """
        progress = progress or self.progress
        with _build_lock(self.data_dir, progress):
            collection = self._get()
            if collection is not None:
                if self._usable(collection, corpus_sha, len(ids)):
                    self._collection = collection
                    self.rebuilt = False
                    return False
                self._client.delete_collection(self.name)
            collection = self._client.create_collection(
                self.name,
                configuration=self.hnsw.configuration(len(ids)),
                metadata=self._metadata(corpus_sha, len(ids)),
                embedding_function=None,
            )
            step = min(self.batch_size, self._client.get_max_batch_size())
            progress.start("building the vector index", len(ids), "chunks")
            for start in range(0, len(ids), step):
                end = start + step
                collection.upsert(ids=list(ids[start:end]), embeddings=embed(texts[start:end]))
                progress.advance(len(ids[start:end]))
            progress.finish()
            self._collection = collection
            self.rebuilt = True
            return True

    def count(self) -> int:
        return 0 if self._collection is None else int(self._collection.count())

    def query(self, vectors: np.ndarray, n: int) -> list[list[tuple[str, float]]]:
        """Nearest ``n`` chunks for each query vector, as ``(chunk_id, cosine similarity)``."""
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
        )
        return [
            [(cid, 1.0 - float(d)) for cid, d in zip(ids, dists)]
            for ids, dists in zip(res["ids"], res["distances"])
        ]
