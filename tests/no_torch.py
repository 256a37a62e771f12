"""``-p tests.no_torch``: torch, transformers and sentence-transformers cannot be imported.

The fast selection (``-m "not slow"``) must pass with it: a test that needs torch is marked
``slow`` (its import alone costs about 6 s of CPU in every process that pays it)::

    python -m pytest -n 2 -m "not slow" -p tests.no_torch
"""

from __future__ import annotations

import importlib.abc
import sys
from typing import Any

BLOCKED = ("torch", "transformers", "sentence_transformers")


class _NoTorch(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name.partition(".")[0] in BLOCKED:
            raise ImportError(f"{name} is blocked by -p tests.no_torch: a test that loads torch is marked slow")
        return None


sys.meta_path.insert(0, _NoTorch())
