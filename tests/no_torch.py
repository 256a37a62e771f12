"""``-p tests.no_torch``: torch, transformers and sentence-transformers cannot be imported.

A test that needs torch must be marked ``slow`` (the import alone costs about 6 s of CPU in every
process that pays it). Check a new test by running it unmarked with this plugin (``python -m
pytest``, so that ``tests`` is importable); if it fails on the blocked import, mark it::

    python -m pytest -p tests.no_torch tests/stack/test_new.py

The fast selection passes with it: ``python -m pytest -n 2 -m "not slow" -p tests.no_torch``.
"""

from __future__ import annotations

import importlib.abc
import sys
from typing import Any

BLOCKED = ("torch", "transformers", "sentence_transformers")


class _NoTorch(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name.partition(".")[0] in BLOCKED:
            raise ImportError(f"{name} is blocked by -p tests.no_torch: a test that loads torch must be marked slow")
        return None


sys.meta_path.insert(0, _NoTorch())
