"""The ``ragmetrics`` command: the library's calls, from a shell.

One module a verb, each with ``register(verbs)`` (its options) and ``run(args)``
(its work, through the library in ``tools/`` and the core): ``evaluate`` (score a
TREC run against qrels, trec_eval's job), ``compare`` (judge run B against A with the
plugin's gate), ``merge`` (the shards of one run, judged as one run), ``baseline`` (check a
baseline file, or seal an edit made on purpose),
``history`` (nightly artifacts read together: series, drift, flaky queries), ``ablate``
(compare the reference stack's modes and sweep its parameters), ``encoders`` (which
encoder backend is fastest on the CPU, at what cost in fidelity), ``pool`` (pool candidates
from several retrievers, runs or stack modes for annotation), ``harvest`` (the questions nightly
runs failed, as candidates marked ``source: harvested``),
``annotate`` (a local page to grade pooled candidates, and to adjudicate two
annotators), ``agreement`` (Cohen's kappa between two annotators), ``leakage`` (golden questions
found in the corpus), ``export`` (an artifact as a TREC run, a golden set as qrels), ``sample`` (a draft
golden set drawn from a query log: deduplicated, stratified, personal data redacted) and ``shadow``
(two retrievers or runs compared without labels: overlap, rank-biased overlap, what to label next).
Exit codes: 0 done, 1 a check failed (``--fail-on-regression``, ``--fail-on-drift``,
``--fail-below``, ``--fail``), 2 bad input or usage (the message names file, line and problem),
130 interrupted (Ctrl-C: one line, ``ragmetrics VERB: interrupted``, no traceback).
A verb with a check decides its code (:func:`decided`) before it prints or writes anything, so
an output error afterwards (a pipe closed by ``| head``, a full disk, an unwritable report)
never turns a failed check into 0 or 2: a failed check exits 1 whatever happens to its output.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import warnings
from typing import Any, Sequence

from pytest_ragmetrics.errors import RagMetricsError, RagMetricsWarning, shown_lines

__all__ = ["main", "build_parser", "decided", "VERBS"]

#: The verbs, in the order ``--help`` lists them; each is the module ``cli/<verb>.py``.
VERBS = ("evaluate", "compare", "merge", "baseline", "history", "ablate", "encoders", "pool", "harvest", "annotate",
         "agreement", "leakage", "export", "sample", "shadow")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ragmetrics", description="Retrieval metrics and regression gating.")
    from pytest_ragmetrics import __version__

    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
    for verb in VERBS:
        importlib.import_module(f"{__name__}.{verb}").register(verbs)
    return parser


def decided(args: argparse.Namespace, code: int) -> int:
    """Record a verb's exit code before it prints: :func:`main` keeps it when the output fails."""
    args.decided_code = code
    return code


def _after_output_error(args: argparse.Namespace, code: int) -> int:
    """The exit code when something went wrong: a failed check (1) decided before stays 1."""
    return 1 if getattr(args, "decided_code", None) == 1 else code


def _silence_stdout() -> None:
    """Point stdout at devnull, so the interpreter's flush at exit does not fail again on the
    closed pipe (which prints a traceback and exits 120)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # stdout is not a real file (captured, in-process)
        pass


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
            code = int(args.command(args))
            sys.stdout.flush()  # a closed pipe shows here, while the code can still be kept
            return code
        except BrokenPipeError:  # `ragmetrics compare ... | head`: the reader left; the verdict stands
            _silence_stdout()
            return getattr(args, "decided_code", 0)
        except KeyboardInterrupt:  # Ctrl-C: one line and the shell's code for SIGINT, not a traceback
            _report(args, "interrupted", prefix="")
            return 130
        except RagMetricsError as exc:
            _report(args, str(exc))
            return _after_output_error(args, 2)
        except OSError as exc:  # a full disk, a vanished folder: in words, not a traceback
            from pytest_ragmetrics.files import shown_filename

            name = shown_filename(exc)
            _report(args, f"{exc.strerror or exc}" + (f": {name}" if name else ""))
            try:
                sys.stdout.flush()
            except OSError:  # it was stdout: do not fail again at exit
                _silence_stdout()
            return _after_output_error(args, 2)


def _report(args: argparse.Namespace, message: str, prefix: str = "error: ") -> None:
    try:
        print(f"ragmetrics {args.verb}: {prefix}{shown_lines(message)}", file=sys.stderr)
    except OSError:  # stderr is gone too: the exit code is all that is left
        pass


if __name__ == "__main__":
    sys.exit(main())
