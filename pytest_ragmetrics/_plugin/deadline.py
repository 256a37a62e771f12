"""Calls into the user's retriever under ``--rag-timeout``, one at a time.

A Python call cannot be killed from outside, so with a timeout each call runs in
a daemon thread and, past its deadline, is abandoned there: it may still finish,
or hang, in the background (a daemon thread does not keep the process alive).
Most retrievers (chromadb, torch models, sqlite connections) are not safe to
call from two threads at once, so while an abandoned call is still running the
next call waits for it, within its own deadline, unless the retriever declares
``thread_safe = True``.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

from pytest_ragmetrics.errors import RetrieverError

__all__ = ["RetrievalTimeout", "RetrieverCaller"]


class RetrievalTimeout(RetrieverError):
    """A retriever call did not return, or could not start, within ``--rag-timeout``."""


class RetrieverCaller:
    """Runs each call into one retriever within ``timeout`` seconds (``None``: no limit).

    Without a timeout a call runs in the calling thread, as a plain call. With
    one, each call runs in a fresh thread, so a retriever must not hold
    thread-bound resources (a ``sqlite3`` connection needs
    ``check_same_thread=False``). Unless ``thread_safe``, a call starts only once
    the previous one has returned, even one abandoned at its deadline; the time
    spent waiting counts against the new call's own deadline.
    """

    def __init__(self, timeout: float | None, thread_safe: bool) -> None:
        self.timeout = timeout
        self.thread_safe = thread_safe
        self._busy = threading.Lock()  # held by the thread running a call (unless thread-safe)
        self._running = ""  # what that call is, for the message of a call that could not start

    def call(self, what: str, function: Callable[..., Any], *args: Any) -> Any:
        """``function(*args)`` within the deadline; ``what`` names the call in messages.

        Whatever the call raises, KeyboardInterrupt included, is raised here;
        :class:`RetrievalTimeout` when it overran or could not start in time.
        """
        __tracebackhide__ = True
        if self.timeout is None:
            return function(*args)
        timeout = self.timeout
        start = time.monotonic()
        serial = not self.thread_safe
        if serial and not self._busy.acquire(timeout=timeout):
            raise RetrievalTimeout(
                f"{what}: could not start within {timeout:g} s (--rag-timeout): the retriever was still "
                f"running the abandoned call for {self._running}, and a retriever that does not declare "
                "thread_safe = True is never called twice at once; this query counts as an error"
            )
        self._running = what
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
