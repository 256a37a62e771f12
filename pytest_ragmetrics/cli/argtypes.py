"""argparse value types and options shared by the ``ragmetrics`` verbs."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from pytest_ragmetrics.measures import GAINS

__all__ = ["chunk_size_arg", "check_outputs", "count_arg", "measurement_arguments", "module_arg", "output_argument",
           "path_arg", "seed_arg", "two_sided_verb"]

#: The namespace attribute listing a verb's output options, as (dest, option) pairs.
OUTPUTS = "output_options"


def path_arg(raw: str) -> str:
    """A path argument: an empty or blank one (an unset variable in a script) is refused, never
    read as the current folder or as the default."""
    if not raw.strip():
        raise argparse.ArgumentTypeError("an empty path (an unset variable?) is never read as a default; name "
                                          "the file, or leave the option out")
    return raw


def module_arg(raw: str) -> str:
    """A retriever named as ``[NAME=]MODULE:ATTR``: an empty or blank one is refused."""
    if not raw.strip():
        raise argparse.ArgumentTypeError("an empty retriever (an unset variable?); name it as MODULE:ATTR")
    return raw


def output_argument(parser: argparse.ArgumentParser, *flags: str, writes: str, **kwargs: Any) -> argparse.Action:
    """Declare an option naming a file the verb writes, and what kind of file it writes (``writes``, one of
    the kinds of :mod:`pytest_ragmetrics.files`: ``HTML``, ``ARTIFACT`` …). Every output declared here is
    checked by :func:`check_outputs`, one rule for every verb: never one of the inputs, never another
    output, and an existing file replaced only when it is of the kind the option writes."""
    action = parser.add_argument(*flags, type=path_arg, **kwargs)
    declared = parser.get_default(OUTPUTS) or ()
    parser.set_defaults(**{OUTPUTS: (*declared, (action.dest, max(flags, key=len), writes))})
    return action


def check_outputs(args: argparse.Namespace, inputs: Sequence[tuple[str, str | Path | None]], *,
                  also: Sequence[tuple[str, str | Path | None]] = (),
                  may_replace: Mapping[str, str] | None = None, writes: Mapping[str, str] | None = None) -> None:
    """Refuse, before any work, an output of the verb (every :func:`output_argument`, and ``also``)
    that is one of ``inputs`` ((what it is, path) pairs), a project configuration file, a file of
    the package or another output (:func:`pytest_ragmetrics.output_paths.check_output_paths`). ``--force``
    never overrides it."""
    from pytest_ragmetrics.output_paths import check_output_paths

    declared = getattr(args, OUTPUTS, ())
    outputs = [(option, getattr(args, dest)) for dest, option, _ in declared]
    kinds = {option: kind for _, option, kind in declared}
    check_output_paths([*outputs, *also], inputs, may_replace=may_replace, force=hasattr(args, "force"),
                       writes={**kinds, **(writes or {})}, forced=bool(getattr(args, "force", False)))


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
    parser.add_argument("a", metavar="A", type=path_arg, help=a)
    parser.add_argument("b", metavar="B", type=path_arg, help=b)
    return parser
