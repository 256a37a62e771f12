"""Manifests: what a stored index held when it was written, checked before anything reads it.

chromadb reads and memory-maps its HNSW files without checking them: a few
damaged bytes in ``data_level0.bin`` (a half-restored CI cache, a full disk)
crash the process that queries it (SIGSEGV), with no message. So each stored
index records, once it is complete, the size and SHA-256 of every file it holds,
and every open compares the files with that record before chromadb or bm25s
reads a byte. A mismatch is named (the file, expected and actual size or hash)
and the index rebuilt.

Only a hash of every byte finds random damage: a size, an mtime or a sample of
blocks would let a 64-byte write through. SHA-256 comes with Python and, on a
CPU with SHA extensions (x86 since about 2017, ARMv8), hashes faster than
BLAKE2b (1.34 against 0.73 GiB/s in ``benchmarks/stack_manifest.py``): checking
a SciFact-size vector and BM25 index took 69 ms a process, 0.8% of a warm
SciFact gate run (docs/benchmarks/manifest.md).

A manifest is JSON: ``{"format": 1, "hash": "sha256", "files": {name: {"size":
bytes, "sha256": hex}}, "checksum": hex}``, names relative to the folder with
``/``, plus what the index records of itself (the BM25 store's ``size``).
``checksum`` is the SHA-256 of the rest, so damage to the manifest itself is
told apart from damage to the files it lists.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import warnings
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from pytest_ragmetrics.errors import RagMetricsWarning
from pytest_ragmetrics.files import atomic_write_text

__all__ = ["FORMAT", "HASH", "ManifestError", "describe_problems", "file_lock", "file_sha256", "mismatches",
           "read_manifest", "record", "report_repair", "write_manifest"]

FORMAT = 1
HASH = "sha256"
_BLOCK = 1 << 20


class ManifestError(ValueError):
    """A manifest that cannot be read or trusted (the message says why, naming the file)."""


def file_sha256(path: Path) -> str:
    """SHA-256 of a file's bytes, read in 1 MiB blocks into one buffer."""
    digest = hashlib.sha256()
    buffer = bytearray(_BLOCK)
    view = memoryview(buffer)
    with open(path, "rb", buffering=0) as fh:
        while True:
            n = fh.readinto(buffer)
            if not n:
                break
            digest.update(view[:n])
    return digest.hexdigest()


def record(folder: Path, names: Iterable[str]) -> dict[str, dict[str, Any]]:
    """``{name: {"size", "sha256"}}`` for each file ``folder / name``."""
    return {name: {"size": (folder / name).stat().st_size, HASH: file_sha256(folder / name)}
            for name in sorted(names)}


def mismatches(folder: Path, files: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Each listed file that is missing or differs from its entry, as ``name is/has what``.

    A file of another size is not hashed (it differs already); hashes are shortened
    to 12 hex digits, enough to tell two apart in a message.
    """
    out = []
    for name, want in sorted(files.items()):
        path = folder / name
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            out.append(f"{name} is missing ({want['size']:,} bytes expected)")
            continue
        if size != want["size"]:
            out.append(f"{name} is {size:,} bytes, expected {want['size']:,}")
            continue
        got = file_sha256(path)
        if got != want[HASH]:
            out.append(f"{name} has sha256 {got[:12]}, expected {want[HASH][:12]} (same size, {size:,} bytes)")
    return out


def _checksum(body: Mapping[str, Any]) -> str:
    blob = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(blob.encode("ascii")).hexdigest()


def write_manifest(path: Path, files: Mapping[str, Mapping[str, Any]], **extra: Any) -> None:
    """Write a manifest of ``files`` (from :func:`record`) and ``extra`` fields to ``path``, atomically."""
    body = {**extra, "format": FORMAT, "hash": HASH, "files": dict(files)}
    atomic_write_text(path, json.dumps({**body, "checksum": _checksum(body)}, indent=1, sort_keys=True) + "\n")


def read_manifest(path: Path) -> dict[str, Any]:
    """The manifest at ``path`` without its checksum; :class:`ManifestError` when it cannot be trusted.

    ``FileNotFoundError`` passes through: a folder without a manifest is the
    caller's case to name (an older version wrote it, or its build did not finish).
    """
    name = path.name
    try:
        data = json.loads(path.read_bytes())
    except FileNotFoundError:
        raise
    except (OSError, ValueError) as exc:  # ValueError: not JSON, not UTF-8
        raise ManifestError(f"{name} is unreadable ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("checksum"), str):
        raise ManifestError(f"{name} is not a manifest")
    body = {k: v for k, v in data.items() if k != "checksum"}
    if _checksum(body) != data["checksum"]:
        raise ManifestError(f"{name} does not match its own checksum")
    if body.get("format") != FORMAT or body.get("hash") != HASH:
        raise ManifestError(f"{name} has format {body.get('format')!r} and hash {body.get('hash')!r}, "
                            f"expected {FORMAT} and {HASH!r}")
    files = body.get("files")
    if not isinstance(files, dict) or not all(_entry_ok(k, v) for k, v in files.items()):
        raise ManifestError(f"{name} lists files it cannot describe")
    return body


def _entry_ok(name: Any, entry: Any) -> bool:
    """A relative path inside the folder, with an integer size and a hex digest."""
    if not isinstance(name, str) or not name or not isinstance(entry, dict):
        return False
    parts = PurePosixPath(name).parts
    if PurePosixPath(name).is_absolute() or ".." in parts or "\\" in name:
        return False
    size, digest = entry.get("size"), entry.get(HASH)
    return (isinstance(size, int) and not isinstance(size, bool) and size >= 0
            and isinstance(digest, str) and len(digest) == 64 and all(c in "0123456789abcdef" for c in digest))


def describe_problems(problems: list[str], shown: int = 3) -> str:
    """Damaged files in one line: the first ``shown``, ``; ``-separated, then how many more."""
    more = f" … and {len(problems) - shown} more" if len(problems) > shown else ""
    return "; ".join(problems[:shown]) + more


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An OS lock on ``path`` (``flock`` on POSIX, ``msvcrt`` on Windows), released when its holder dies."""
    from filelock import FileLock  # installed with the stack; imported only when an index is opened

    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(path):
        yield


def report_repair(message: str, stacklevel: int = 3) -> None:
    """Say once that a stored index was repaired: a :class:`RagMetricsWarning`.

    pytest lists it in its warnings summary (once, under pytest-xdist too, since
    only the process holding the lock repairs); ``ragmetrics`` prints it as a
    ``warning:`` line. It is raised after the repair is complete, so a run that
    turns warnings into errors still leaves a sound index behind. ``stacklevel``
    (as for :func:`warnings.warn`, counted from the caller) should point at the
    code that opened the index.
    """
    warnings.warn(f"ragmetrics: {message}", RagMetricsWarning, stacklevel=stacklevel + 1)
