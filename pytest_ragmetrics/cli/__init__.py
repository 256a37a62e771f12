"""The ``ragmetrics`` command: the library's calls, from a shell.

One module a verb, each with ``register(verbs)`` (its options) and ``run(args)``
(its work, through the library in ``tools/`` and the core): ``evaluate`` (score a
TREC run against qrels, trec_eval's job), ``compare`` (judge run B against A with the
plugin's gate), ``baseline`` (check a baseline file, or seal an edit made on purpose), ``history`` (nightly artifacts read together: series, drift, flaky
queries), ``ablate`` (compare the reference stack's modes and sweep its
parameters), ``encoders`` (which encoder backend is fastest on the CPU, at what cost in fidelity),
``pool`` (pool candidates from several retrievers, runs or stack modes for annotation),
``annotate`` (a local page to grade pooled candidates, and to adjudicate two
annotators), ``agreement`` (Cohen's kappa between two annotators), ``leakage`` (golden questions
found in the corpus) and ``export`` (an artifact as a TREC run, a golden set as qrels).
Exit codes: 0 done, 1 a check failed (``--fail-on-regression``, ``--fail-on-drift``,
``--fail-below``, ``--fail``), 2 bad input or usage (the message names file, line and problem).
"""

from __future__ import annotations

import argparse
import importlib
import sys
import warnings
from typing import Any, Sequence

from pytest_ragmetrics.errors import RagMetricsError, RagMetricsWarning

__all__ = ["main", "build_parser", "VERBS"]

#: The verbs, in the order ``--help`` lists them; each is the module ``cli/<verb>.py``.
VERBS = ("evaluate", "compare", "baseline", "history", "ablate", "encoders", "pool", "annotate", "agreement", "leakage", "export")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ragmetrics", description="Retrieval metrics and regression gating.")
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
    for verb in VERBS:
        importlib.import_module(f"{__name__}.{verb}").register(verbs)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    with warnings.catch_warnings():  # restores showwarning: main() may run inside another program
        shown = warnings.showwarning

        def show(message: Any, category: type[Warning], *rest: Any, **kwargs: Any) -> None:
            if issubclass(category, RagMetricsWarning):  # e.g. a stored index repaired: one line, as the verbs log
                print(f"warning: {str(message).removeprefix('ragmetrics: ')}", file=sys.stderr, flush=True)
            else:
                shown(message, category, *rest, **kwargs)

        warnings.showwarning = show
        try:
            return int(args.command(args))
        except RagMetricsError as exc:
            print(f"ragmetrics {args.verb}: error: {exc}", file=sys.stderr)
            return 2
        except BrokenPipeError:  # `ragmetrics evaluate ... | head`
            return 0


if __name__ == "__main__":
    sys.exit(main())
