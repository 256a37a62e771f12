"""A limit on how long the ``rag_retriever`` fixture may take (``--rag-setup-timeout``).

Building a retriever (embedding a corpus, opening an index, connecting to a
server) runs in pytest's main thread, where a call cannot be abandoned the way
``--rag-timeout`` abandons a search. On POSIX a ``SIGALRM`` interrupts it: the
handler raises :class:`SetupTimeout` inside the fixture, whose traceback then
shows where it was stuck, and the run stops once. Code that holds the
interpreter in C for long cannot see the signal; a watchdog thread then ends
the process after as long again (at most :data:`GRACE_SECONDS`), with every
thread's stack on stderr and exit code 4, so a CI job never hangs without a word.
Code that never lets another Python thread run (a C loop holding the GIL) stops
that thread too; for it, :func:`faulthandler.dump_traceback_later`, whose timer is
a C thread, ends the process :data:`BACKSTOP_SECONDS` later with every thread's
stack under a ``Timeout`` header and exit code 1.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from pytest_ragmetrics.errors import RagMetricsError

__all__ = ["BACKSTOP_SECONDS", "GRACE_SECONDS", "SetupTimeout", "setup_deadline"]

#: How long past the limit the watchdog waits, at most, for the signal to take effect before ending
#: the process (as long again as the limit when that is shorter).
GRACE_SECONDS = 30.0
#: How long after the watchdog's turn faulthandler ends a process whose GIL was never released.
BACKSTOP_SECONDS = 5.0


class SetupTimeout(RagMetricsError):
    """The ``rag_retriever`` fixture did not finish within ``--rag-setup-timeout``."""


def _message(seconds: float, subject: str = "it") -> str:
    return (f"{subject} did not finish within {seconds:g} s (--rag-setup-timeout / rag_setup_timeout); raise the "
            "limit if building the retriever really takes longer, e.g. a first build that embeds the corpus")


@contextmanager
def setup_deadline(seconds: float | None, grace: float = GRACE_SECONDS,
                   release_output: Callable[[], None] = lambda: None,
                   stderr_fd: int | None = None) -> Iterator[None]:
    """Raise :class:`SetupTimeout` in this thread once ``seconds`` have passed (no limit with ``None``).

    ``release_output`` is called before the watchdog writes: pytest captures the
    fixture's output into a file that a process ending this way never prints.
    ``stderr_fd`` is where the faulthandler backstop writes, which cannot call
    ``release_output`` (default: ``sys.stderr`` as it is now).
    """
    if seconds is None:
        yield
        return
    done = threading.Event()
    alarm = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    old: Any = None

    def on_alarm(signum: int, frame: Any) -> None:
        raise SetupTimeout(_message(seconds))

    def watchdog() -> None:
        if done.wait(seconds + (min(grace, seconds) if alarm else 0)):
            return
        try:
            release_output()
        except Exception:  # best effort: the process ends either way
            pass
        sys.stderr.write(f"\nragmetrics: {_message(seconds, 'the rag_retriever fixture')}. "
                         "It could not be interrupted; "
                         "ending the process (exit code 4). Where each thread was:\n")
        sys.stderr.flush()
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        os._exit(4)

    backstop = _backstop_file(stderr_fd)
    if alarm:
        old = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, seconds)
    threading.Thread(target=watchdog, name="ragmetrics-setup-watchdog", daemon=True).start()
    if backstop is not None:
        # one timer per process: this replaces pytest's own faulthandler_timeout for the fixture's setup
        faulthandler.dump_traceback_later(seconds + (min(grace, seconds) if alarm else 0) + BACKSTOP_SECONDS,
                                          exit=True, file=backstop)
    try:
        yield
    finally:
        done.set()
        if backstop is not None:
            faulthandler.cancel_dump_traceback_later()
            backstop.close()
        if alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)


def _backstop_file(stderr_fd: int | None) -> Any:
    """A file of our own on ``stderr_fd`` (or the current stderr) for faulthandler; None if there is none."""
    try:
        fd = stderr_fd if stderr_fd is not None else sys.stderr.fileno()
        return open(os.dup(fd), "w", closefd=True)  # noqa: SIM115 - closed when the deadline ends
    except (AttributeError, OSError, ValueError):  # a stderr without a file descriptor
        return None
