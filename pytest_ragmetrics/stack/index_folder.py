"""Where the vector index lives: the chromadb client, and a local folder's checks and repairs.

A local folder carries a manifest (:mod:`.manifest`): the size and SHA-256 of
``chroma.sqlite3`` and of each live segment's HNSW files (``data_level0.bin``,
``header.bin``, ``length.bin``, ``link_lists.bin``, ``index_metadata.pickle``),
written under the build lock when a build completes and checked, under the same
lock, before chromadb opens the folder: chromadb maps the HNSW files unchecked,
and damaged ones crash the process. A mismatch is named in one line and the
folder's chroma files are deleted and rebuilt from the embedding cache; a folder
without a manifest (an older version's, or a build that did not finish) is
rebuilt once the same way. chromadb writes ``chroma.sqlite3`` when it opens a
folder (a row of its ``acquire_write`` table), so each open records the file's
new hash. After a build, segment folders of deleted collections (chromadb leaves
them) are removed and the database is vacuumed: the log of the vectors just
added leaves its pages free (65 of the 69 MB of a SciFact-size index), and every open hashes the file.

:class:`.index.VectorIndex` drives these.
"""

from __future__ import annotations

import contextlib
import errno
import re
import shlex
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from pytest_ragmetrics.errors import RagMetricsError
from pytest_ragmetrics.progress import SILENT, hold

from .manifest import ManifestError, describe_problems, mismatches, read_manifest

__all__ = ["MANIFEST", "UNVERIFIED", "WAIT_TASK", "IndexStoreError", "check_folder", "check_writable",
           "chroma_files", "clear_folder", "connect"]


class IndexStoreError(RagMetricsError, RuntimeError):
    """A local store the stack cannot read or repair: an index folder (damaged and not
    writable, or one chromadb cannot open), the embedding cache, or a folder an ONNX
    graph cannot be exported to."""


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
    check_writable(Path(data_dir))
    try:
        return chromadb.PersistentClient(path=str(data_dir), settings=settings)
    except Exception as exc:  # chromadb.errors.InternalError: "file is not a database", "malformed", …
        check_writable(Path(data_dir))  # a file in it that turned read-only since is not damage either
        raise IndexStoreError(
            f"cannot open the chroma index in {data_dir}: {exc}. The folder may be corrupt or half-written "
            "(a disk problem, or a copy taken mid-build); delete it and the next run rebuilds it "
            "(embeddings come back from the cache)"
        ) from None


def check_writable(folder: Path) -> None:
    """Raise :class:`IndexStoreError` when ``folder`` (made if missing) or chroma's files in it cannot be written.

    chromadb writes to its folder even to read an index (the build lock, the
    database's journal), so a read-only folder cannot be opened at all; said
    as what it is, it is not mistaken for damage, and an intact index is not
    deleted. Probed by writing, not from the mode bits: root ignores those, not
    an immutable flag or a read-only mount.
    """
    where = folder
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):  # a new file in it, as the journal is
            pass
        for name in (".build.lock", _SQLITE, MANIFEST):
            where = folder / name
            if where.is_file():
                with open(where, "r+b"):  # opened for writing, nothing written
                    pass
    except OSError as exc:
        if exc.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):  # a read-only mount is no PermissionError
            raise
        raise IndexStoreError(
            f"the vector index folder {folder} is not writable ({exc.strerror}: {where}). That says nothing "
            "against the index in it, which may be intact: chromadb writes to its folder (a lock, the "
            "database's journal) even to read it, so it cannot be opened read-only. Make the folder and its "
            f"files writable by this user (chmod -R u+w {shlex.quote(str(folder))}; a folder made immutable "
            "needs chattr -R -i, a read-only mount a writable one), or copy it to a writable place and use "
            "that as the data dir"
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


#: The manifest of a local index folder: chroma's files as the last build or open left them.
MANIFEST = "manifest.json"
_SQLITE = "chroma.sqlite3"
#: Left beside the database by an interrupted transaction or another journal mode.
_SQLITE_SIDECARS = ("-journal", "-wal", "-shm")
#: chromadb names a segment's folder by its UUID.
_SEGMENT = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def _segment_folders(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_dir() and _SEGMENT.match(p.name)) if folder.is_dir() else []


def _live_segments(folder: Path) -> set[str] | None:
    """The vector segments ``chroma.sqlite3`` refers to; None when it cannot be read this way
    (then every segment folder counts as live)."""
    try:
        db = sqlite3.connect(f"{(folder / _SQLITE).resolve().as_uri()}?mode=ro", uri=True)
        try:
            return {row[0] for row in db.execute("SELECT id FROM segments WHERE scope = 'VECTOR'")}
        finally:
            db.close()
    except sqlite3.Error:
        return None


def chroma_files(folder: Path, segments: set[str] | None = None) -> list[str]:
    """chroma's files in ``folder``, relative: ``chroma.sqlite3`` and the files of the segment
    folders in ``segments`` (default: every segment folder)."""
    names = [_SQLITE] if (folder / _SQLITE).is_file() else []
    for sub in _segment_folders(folder):
        if segments is None or sub.name in segments:
            names.extend(f.relative_to(folder).as_posix() for f in sorted(sub.rglob("*")) if f.is_file())
    return names


#: What :func:`check_folder` says of chroma files without a manifest.
UNVERIFIED = ("it had no manifest (an older version wrote it, or its build did not finish), "
              "so its files could not be checked")


def check_folder(folder: Path) -> tuple[str | None, dict[str, Any] | None]:
    """Compare a local index folder's chroma files with its manifest, before chromadb reads them.

    Returns ``(problem, manifest)``: ``problem`` is None when every listed file
    matches (or the folder holds no chroma file yet), else one line saying what
    is wrong (:data:`UNVERIFIED` without a manifest); ``manifest`` is the
    manifest read when it matched.
    """
    try:
        manifest = read_manifest(folder / MANIFEST)
    except FileNotFoundError:
        if not chroma_files(folder):
            return None, None  # a new folder
        return UNVERIFIED, None
    except ManifestError as exc:
        return str(exc), None
    bad = mismatches(folder, manifest["files"])
    return (describe_problems(bad), None) if bad else (None, manifest)


def clear_folder(folder: Path) -> None:
    """Delete chroma's files from ``folder`` (database, segment folders) and the manifest;
    the settings note and the lock stay."""
    (folder / MANIFEST).unlink(missing_ok=True)
    for suffix in ("", *_SQLITE_SIDECARS):
        (folder / (_SQLITE + suffix)).unlink(missing_ok=True)
    for sub in _segment_folders(folder):
        shutil.rmtree(sub)


def _forget_system(folder: Path) -> None:
    """Drop chromadb's in-process client of ``folder``, if any: its files are about to go."""
    try:
        from chromadb.api.shared_system_client import SharedSystemClient

        system = SharedSystemClient._identifier_to_system.pop(str(folder), None)
        SharedSystemClient._identifier_to_refcount.pop(str(folder), None)
    except (ImportError, AttributeError):  # another chromadb: nothing cached to drop, or no way to
        return
    if system is not None:
        with contextlib.suppress(Exception):
            system.stop()

