"""Cross-encoder reranking: rescore (query, candidate) pairs with a ``CrossEncoder``.

A reranker replaces the fused score entirely; it does not nudge it. That is why
the ablation table keeps ``hybrid`` and ``hybrid+rerank`` as separate rows: a
stronger model can fix some queries and break others, and only the per-query
comparison of the two rows shows both.
No cross-encoder ships on PyPI, so the model is always a path the user gives.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .models import model_fingerprint

__all__ = ["Reranker"]


class Reranker:
    """Scores pairs with ``CrossEncoder(model_path)``; the model loads on first use."""

    def __init__(
        self,
        model: str | Path,
        *,
        model_name: str | None = None,
        batch_size: int = 32,
        device: str = "cpu",
    ) -> None:
        self.model_path = str(model)
        self.name = model_name or Path(self.model_path).name or self.model_path
        self.fingerprint = model_fingerprint(self.model_path)
        self.identity = hashlib.sha256(f"{self.name}\0{self.fingerprint}".encode()).hexdigest()
        self.batch_size = batch_size
        self.device = device
        self._model: Any = None

    def __repr__(self) -> str:
        return f"Reranker({self.name!r}, identity={self.identity[:12]})"

    @property
    def model(self) -> Any:
        """The loaded ``CrossEncoder``."""
        if self._model is None:
            from sentence_transformers import CrossEncoder

            from ._quiet import quiet_model_load

            with quiet_model_load():
                self._model = CrossEncoder(self.model_path, device=self.device)
        return self._model

    def score(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """One relevance score per text (higher is better; the model's own scale)."""
        return self.score_pairs([(query, t) for t in texts])

    def score_pairs(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """Scores for many (query, text) pairs in one batched call."""
        if not pairs:
            return np.zeros(0, dtype=np.float32)
        scores = self.model.predict(
            list(pairs), batch_size=self.batch_size, show_progress_bar=False
        )
        return np.asarray(scores, dtype=np.float32).reshape(len(pairs), -1)[:, 0]
