"""The embedding cache's file: one SQLite table of float32 vectors, each under its sha256 key and
with a CRC-32 of its bytes.

sqlite checks its own pages but not the bytes of a value, so each vector carries
a CRC-32 (rows written before it existed are checked for unit length instead);
a vector that fails the check is left out of what a lookup finds. What an error
means for a run (a damaged file is set aside, anything else stops it) is
:class:`.embed.Embedder`'s to decide.
"""

from __future__ import annotations

import contextlib
import sqlite3
import zlib
from pathlib import Path

import numpy as np

from .index_folder import IndexStoreError

__all__ = ["cache_error", "file_damaged", "open_cache", "read_vectors", "write_vectors"]

_LOOKUP_BATCH = 500


def open_cache(path: Path) -> sqlite3.Connection:
    """The cache at ``path``, made if missing; sqlite's error is raised (the connection closed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # check_same_thread=False: with --rag-timeout the plugin calls the retriever from a
    # worker thread, and the connection may have been opened in another one (at build)
    db = sqlite3.connect(path, timeout=120, check_same_thread=False)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        # a rowid table: 1.5 KB vectors would overflow a WITHOUT ROWID tree (3x the size)
        db.execute(
            "CREATE TABLE IF NOT EXISTS embeddings (key BLOB PRIMARY KEY, vec BLOB NOT NULL, crc INTEGER)"
        )
        _add_crc_column(db)
        db.commit()
    except sqlite3.DatabaseError:
        db.close()
        raise
    return db


def read_vectors(db: sqlite3.Connection, keys: list[bytes]) -> tuple[dict[bytes, np.ndarray], int]:
    """The intact vectors stored under ``keys``, and how many stored ones were damaged (left out)."""
    found: dict[bytes, np.ndarray] = {}
    damaged = 0
    for start in range(0, len(keys), _LOOKUP_BATCH):
        part = keys[start : start + _LOOKUP_BATCH]
        marks = ",".join("?" * len(part))
        for key, blob, crc in db.execute(
            f"SELECT key, vec, crc FROM embeddings WHERE key IN ({marks})", part
        ):
            vec = _intact(blob, crc)
            if vec is None:
                damaged += 1
            else:
                found[key] = vec
    return found, damaged


def write_vectors(db: sqlite3.Connection, items: list[tuple[bytes, np.ndarray]]) -> None:
    """Store ``(key, vector)`` pairs with their checksums in one transaction; on sqlite's error it is
    rolled back and the error raised."""
    try:
        rows = []
        for k, v in items:
            blob = np.ascontiguousarray(v, dtype=np.float32).tobytes()
            rows.append((k, blob, zlib.crc32(blob)))
        db.executemany("INSERT OR REPLACE INTO embeddings (key, vec, crc) VALUES (?, ?, ?)", rows)
        db.commit()
    except sqlite3.DatabaseError:
        with contextlib.suppress(sqlite3.Error):
            db.rollback()
        raise


def _add_crc_column(db: sqlite3.Connection) -> None:
    """Give a cache written before vectors carried a checksum its ``crc`` column (NULL in old rows)."""
    if any(row[1] == "crc" for row in db.execute("PRAGMA table_info(embeddings)")):
        return
    try:
        db.execute("ALTER TABLE embeddings ADD COLUMN crc INTEGER")
    except sqlite3.OperationalError as exc:  # another process added it first
        if "duplicate column" not in str(exc):
            raise


def _intact(blob: bytes, crc: int | None) -> np.ndarray | None:
    """The stored vector, or None when its bytes are damaged.

    A row with a checksum must match it; an older row without one must be a
    finite vector of unit length, as every encoder here writes them.
    """
    if crc is not None:
        return np.frombuffer(blob, dtype=np.float32) if zlib.crc32(blob) == crc else None
    if len(blob) % 4:
        return None
    vec = np.frombuffer(blob, dtype=np.float32)
    norm = float(np.linalg.norm(vec)) if len(vec) else 0.0
    return vec if np.isfinite(norm) and abs(norm - 1.0) < 1e-3 else None


def file_damaged(exc: sqlite3.DatabaseError) -> bool:
    """Whether sqlite's error means the file's bytes are wrong (not a lock, a permission, a full disk)."""
    text = str(exc)
    # SQLITE_ERROR "unsupported file format": a header whose version bytes were overwritten
    return str(getattr(exc, "sqlite_errorname", "")).startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB")) or any(
        phrase in text for phrase in ("malformed", "not a database", "unsupported file format"))


def cache_error(path: Path | None, exc: sqlite3.DatabaseError) -> IndexStoreError:
    """The embedding cache's sqlite error as a message naming the file, and for a damaged file the fix.

    The cache is keyed by content, so it needs no manifest: a damaged file is
    reported, never repaired behind the user's back, and deleting it loses
    nothing but encoding time.
    """
    text = str(exc)
    if file_damaged(exc):
        return IndexStoreError(
            f"the embedding cache {path} is damaged ({text}). It is only a cache: delete it, with its -wal "
            "and -shm files if present, and the next run encodes again what it needs"
        )
    return IndexStoreError(f"cannot use the embedding cache {path}: {text}")
