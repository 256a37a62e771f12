"""argparse value types and options shared by the ``ragmetrics`` verbs."""

from __future__ import annotations

import argparse
from typing import Any, Callable

from pytest_ragmetrics.measures import GAINS

__all__ = ["chunk_size_arg", "count_arg", "measurement_arguments", "seed_arg", "two_sided_verb"]


def _at_least(raw: str, minimum: int, expected: str) -> int:
    """``raw`` as an integer >= ``minimum``; else a usage error saying what was ``expected``."""
    try:
        value = int(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {raw!r}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {raw!r}")
    return value


def chunk_size_arg(raw: str) -> int | None:
    """A positive chunk size, or ``whole``/``none``/``0`` for whole documents (``None``)."""
    if raw.strip().lower() in ("none", "whole", "0"):
        return None
    return _at_least(raw, 1, "a positive integer or 'whole'")


def seed_arg(raw: str) -> int:
    """A random seed: an integer >= 0."""
    return _at_least(raw, 0, "an integer >= 0")


def count_arg(raw: str) -> int:
    """A count of at least one (questions, results, rows)."""
    return _at_least(raw, 1, "an integer >= 1")


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


def two_sided_verb(verbs: Any, name: str, help: str, run: Callable[[argparse.Namespace], int], *, a: str,
                   b: str) -> argparse.ArgumentParser:
    """The parser of a verb that reads two files side by side: positional ``A`` and ``B``, helped by ``a``
    and ``b``; the verb adds its options to it."""
    parser: argparse.ArgumentParser = verbs.add_parser(name, help=help)
    parser.set_defaults(command=run)
    parser.add_argument("a", metavar="A", help=a)
    parser.add_argument("b", metavar="B", help=b)
    return parser
