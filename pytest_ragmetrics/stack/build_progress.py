"""How far a vector index build has come, as one count told from two places."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

__all__ = ["VectorBuildProgress"]


class VectorBuildProgress:
    """The vector index build as one count of chunks, told from two places: the embedder
    reports each slice it encodes, and the index each batch it inserts just after (chunks
    the cache answered included). A chunk counts once, when first told, so a cold build
    moves as the encoder does and a rebuild from the cache as the inserts do."""

    def __init__(self, progress: Any) -> None:
        self.progress = progress
        self._told = 0  # chunks passed on
        self._inserted = 0  # chunks the index has inserted
        #: what the embedder advances
        self.encoder = SimpleNamespace(advance=self._encoded)

    def start(self, task: str, total: int | None = None, unit: str = "items") -> None:
        self._told = self._inserted = 0
        self.progress.start(task, total, unit)

    def advance(self, n: int = 1) -> None:
        if n == 0:  # still working (a wait for the lock)
            self.progress.advance(0)
            return
        self._inserted += n
        if self._inserted > self._told:
            self.progress.advance(self._inserted - self._told)
            self._told = self._inserted

    def _encoded(self, n: int = 1) -> None:
        self._told += n
        self.progress.advance(n)

    def finish(self) -> None:
        self.progress.finish()
