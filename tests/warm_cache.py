"""A stack home that builds again without loading a model: only another home's embedding cache.

A cold build of the reference stack imports torch and loads MiniLM (about 8 s of CPU in a fresh
process) before it tokenises for BM25 and builds the vector index. A test that checks how a build
is shown (quiet, under xdist, in a log) needs the build's steps, not the model: a home holding only
a finished home's embedding cache builds every index again, showing every step a cold build shows,
and reads each vector from the cache, so the model is never loaded. The cold build itself stays
checked where it is made.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from pytest_ragmetrics.stack.index_folder import MANIFEST


def home_with_cache_of(source: Path, home: Path) -> Path:
    """``home``, made new, holding only the embedding cache of the stack home ``source`` (with its
    sqlite write-ahead files): no index, no BM25, so the next build makes them all again."""
    cache = source / "cache"
    files = sorted(cache.glob("embeddings.sqlite3*"))
    assert files, f"{source} holds no embedding cache: was it a stack home that built something?"
    (home / "cache").mkdir(parents=True)
    for file in files:
        shutil.copy2(file, home / "cache" / file.name)
    return home


def built_again(home: Path) -> bool:
    """Whether a build finished in ``home`` since :func:`home_with_cache_of` made it: a vector index
    with its manifest (written once the index is whole) and the BM25 store are there again."""
    return any((home / "index").glob(f"*/{MANIFEST}")) and (home / "bm25").is_dir()
