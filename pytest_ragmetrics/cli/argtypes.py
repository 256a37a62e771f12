"""argparse value types and options shared by the ``ragmetrics`` verbs."""

from __future__ import annotations

import argparse

from pytest_ragmetrics.measures import GAINS

__all__ = ["chunk_size_arg", "measurement_arguments"]


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


def measurement_arguments(parser: argparse.ArgumentParser, *, ids: bool = True, scope: str = "") -> None:
    """``--relevance-level``, ``--gain`` and (with ``ids``) ``--id-separator``, worded
    alike in every verb that scores; ``scope`` says what they apply to ("TREC runs")."""
    prefix = f"{scope}: " if scope else ""
    parser.add_argument("--relevance-level", type=int, default=1, metavar="L",
                        help=f"{prefix}grade >= L counts as relevant (default 1)")
    parser.add_argument("--gain", choices=GAINS, default="exponential",
                        help=f"{prefix}nDCG gain: exponential 2^g-1 (default) or linear g (trec_eval)")
    if ids:
        parser.add_argument("--id-separator", default="", metavar="SEP",
                            help=f"{prefix}map ranked ids to documents by the prefix before SEP, then drop "
                                 "repeats (default: ids as given; TREC runs are document-level)")
