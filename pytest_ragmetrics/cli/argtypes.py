"""argparse value types shared by the ``ragmetrics`` verbs."""

from __future__ import annotations

import argparse

__all__ = ["chunk_size_arg"]


def chunk_size_arg(raw: str) -> int | None:
    """A positive chunk size, or ``whole``/``none``/``0`` for whole documents (``None``)."""
    if raw.strip().lower() in ("none", "whole", "0"):
        return None
    try:
        value = int(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer or 'whole', got {raw!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer or 'whole', got {raw!r}")
    return value
