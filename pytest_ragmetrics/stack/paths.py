"""Where the stack keeps its state: one home per project, one index dir per setting.

Experiments must never pollute each other's index (a sweep run against one
shared directory silently leaves the last setting's chunks behind), so every
setting gets a directory named after the hash of what it measures,
while the embedding cache is shared: it is keyed by content, never by setting.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

__all__ = ["HOME_ENV", "bm25_dir", "cache_path", "index_dir", "ragmetrics_home", "settings_key"]

#: Overrides the state folder (tests point it at a temporary directory).
HOME_ENV = "RAGMETRICS_HOME"
_PROJECT_MARKERS = ("pyproject.toml", "setup.cfg", "setup.py", ".git")


def ragmetrics_home() -> Path:
    """``$RAGMETRICS_HOME``, else ``.ragmetrics/`` in the project root found from the cwd.

    The project root is the nearest ancestor of the working directory holding a
    ``pyproject.toml``, ``setup.cfg``, ``setup.py`` or ``.git``; failing that, the
    working directory itself. Nothing is created here.
    """
    env = os.environ.get(HOME_ENV)
    if env:
        return Path(env)
    cwd = Path.cwd()
    for folder in (cwd, *cwd.parents):
        if any((folder / marker).exists() for marker in _PROJECT_MARKERS):
            return folder / ".ragmetrics"
    return cwd / ".ragmetrics"


def _ensure_home(home: Path) -> None:
    """Create ``home`` with a ``.gitignore`` of ``*`` so its state is never committed."""
    home.mkdir(parents=True, exist_ok=True)
    ignore = home / ".gitignore"
    if not ignore.exists():
        ignore.write_text("# created by pytest-ragmetrics: local indexes and caches\n*\n")


def settings_key(settings: dict[str, Any]) -> str:
    """A short stable hash of a JSON-able settings dict."""
    blob = json.dumps(settings, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


def index_dir(settings: dict[str, Any], home: Path | None = None) -> Path:
    """The index directory of one setting: ``<home>/index/<settings_key>``.

    A ``settings.json`` inside records, for humans, what the hash stands for.
    """
    home = home or ragmetrics_home()
    _ensure_home(home)
    folder = home / "index" / settings_key(settings)
    folder.mkdir(parents=True, exist_ok=True)
    note = folder / "settings.json"
    if not note.exists():
        note.write_text(json.dumps(settings, indent=2, sort_keys=True, default=str) + "\n")
    return folder


def cache_path(home: Path | None = None) -> Path:
    """The embedding cache shared by every setting: ``<home>/cache/embeddings.sqlite3``."""
    home = home or ragmetrics_home()
    _ensure_home(home)
    (home / "cache").mkdir(exist_ok=True)
    return home / "cache" / "embeddings.sqlite3"


def bm25_dir(home: Path | None = None) -> Path:
    """Stored BM25 indexes, shared by every setting with the same chunks: ``<home>/bm25``."""
    home = home or ragmetrics_home()
    _ensure_home(home)
    return home / "bm25"
