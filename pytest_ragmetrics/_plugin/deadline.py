"""Calls into the user's retriever under ``--rag-timeout``, one at a time.

A Python call cannot be killed from outside, so with a timeout each call runs in
a daemon thread and, past its deadline, is abandoned there: it may still finish,
or hang, in the background (a daemon thread does not keep the process alive).
Most retrievers (chromadb, torch models, sqlite connections) are not safe to
call from two threads at once, so while an abandoned call is still running the
next call waits for it, unless the retriever declares ``thread_safe = True``.
The wait is not the next query's: its clock starts when its own call starts.
The wait is bounded by the limit; past it the query is not run at all
(:class:`RetrieverBusy`), which is not the same as being slow.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

from pytest_ragmetrics.errors import RetrieverError

__all__ = ["RetrievalTimeout", "RetrieverBusy", "RetrieverCaller"]


class RetrievalTimeout(RetrieverError):
    """A retriever call did not return within ``--rag-timeout``."""


class RetrieverBusy(RetrieverError):
    """A call could not start: the retriever was still running a call abandoned at its deadline.

    The query was not run, so it has no score to call a regression: it counts
    as not run (the run is partial, and fails), not as errored.
    """


class RetrieverCaller:
    """Runs each call into one retriever within ``timeout`` seconds (``None``: no limit).

    Without a timeout a call runs in the calling thread, as a plain call. With
    one, each call runs in a fresh thread, so a retriever must not hold
    thread-bound resources (a ``sqlite3`` connection needs
    ``check_same_thread=False``). Unless ``thread_safe``, a call starts only once
    the previous one has returned, even one abandoned at its deadline: it waits
    for it up to ``timeout`` more, and its own deadline counts from its start.
    A call that still cannot start raises :class:`RetrieverBusy`; later calls do
    not wait again for the same abandoned call, they only check it has returned.
    """

    def __init__(self, timeout: float | None, thread_safe: bool) -> None:
        self.timeout = timeout
        self.thread_safe = thread_safe
        self._busy = threading.Lock()  # held by the thread running a call (unless thread-safe)
        self._running = ""  # what that call is, for the message of a call that could not start
        self._started = 0.0  # when it started (time.monotonic())
        self._calls = 0  # calls started so far; the last one's number is the running call's
        self._waited_out = -1  # the number of an abandoned call a query already waited for in vain

    def call(self, what: str, function: Callable[..., Any], *args: Any) -> Any:
        """``function(*args)`` within the deadline; ``what`` names the call in messages.

        Whatever the call raises, KeyboardInterrupt included, is raised here;
        :class:`RetrievalTimeout` when it overran or could not start in time.
        """
        __tracebackhide__ = True
        if self.timeout is None:
            return function(*args)
        timeout = self.timeout
        serial = not self.thread_safe
        if serial and not self._busy.acquire(blocking=False):  # a call abandoned at its deadline still runs
            waited = self._waited_out == self._calls  # a query before this one already waited for it
            if waited or not self._busy.acquire(timeout=timeout):
                self._waited_out = self._calls
                raise RetrieverBusy(
                    f"{what}: not run: the retriever was still busy with the abandoned call for {self._running} "
                    f"({time.monotonic() - self._started:.1f} s after it started; --rag-timeout {timeout:g} s), "
                    "and a retriever that does not declare thread_safe = True is never called twice at once. "
                    "This query was not measured: it counts as not run, not as a regression"
                )
        start = time.monotonic()  # the query's own clock starts with its own call
        self._calls += 1
        self._running, self._started = what, start
        box: dict[str, Any] = {}

        def run() -> None:
            __tracebackhide__ = True
            try:
                box["value"] = function(*args)
            except BaseException as exc:  # handed to the waiting thread, which re-raises it
                box["error"] = exc
            finally:
                if serial:
                    self._busy.release()

        worker = threading.Thread(target=run, name="ragmetrics-retrieval", daemon=True)
        try:
            worker.start()
        except BaseException:
            if serial:
                self._busy.release()
            raise
        worker.join(max(0.0, timeout - (time.monotonic() - start)))
        if worker.is_alive():
            raise RetrievalTimeout(
                f"{what}: the retriever did not answer within {timeout:g} s (--rag-timeout); the call was "
                "abandoned in a background thread and this query counts as an error"
                + ("" if self.thread_safe else
                   "; later calls wait for it to return, as the retriever does not declare thread_safe = True")
            )
        if "error" in box:
            raise box["error"]
        return box.get("value")
