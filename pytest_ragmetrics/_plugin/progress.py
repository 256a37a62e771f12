"""The ``rag_retriever`` fixture's build, shown through pytest's terminal while it runs.

The fixture runs in the first query item's setup, where pytest captures output:
what the stack would print there is only shown if the item fails, so a cold build
looked like a hang. For the length of that setup the plugin installs a reporter
(:func:`pytest_ragmetrics.progress.use`) that the stack's default reporter defers to.
It writes with capture suspended:

- a serial run writes through pytest's terminal reporter, above the item progress:
  one status line rewritten in place on a terminal, plain lines (one at 2 s, then
  every 15 s, then the end) otherwise, as in a CI log;
- an xdist worker has no terminal: it writes plain lines to its own stderr, which
  pytest-xdist's workers share with the controller on POSIX, prefixed with the
  worker's id (``[gw0] ragmetrics: ...``). A worker waiting for another's build
  says so while it waits, but not when the wait ends: by then the builder has said
  the index is ready, and the controller may be printing results. On Windows a
  worker's stderr goes nowhere, so the build shows there in serial runs only.

``-q`` and ``RAGMETRICS_PROGRESS=off`` silence it.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from pytest_ragmetrics import progress

__all__ = ["PREFIX", "fixture_progress", "fixture_reporter"]

#: What every line starts with, so the user knows which plugin speaks.
PREFIX = "ragmetrics: "


def _uncaptured(config: pytest.Config) -> Any:
    capture = config.pluginmanager.getplugin("capturemanager")
    return capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext()


class _TerminalLines:
    """Lines through pytest's terminal reporter; on a terminal, one status line rewritten in place."""

    def __init__(self, config: pytest.Config, terminal: Any, nodeid: str) -> None:
        self.config = config
        self.terminal = terminal
        self.nodeid = nodeid
        self._status_open = False
        self._wrote = False

    def _flush(self) -> None:
        flush = getattr(self.terminal, "flush", None)  # a pipe (a CI log) holds what is not flushed
        if callable(flush):
            flush()

    def _width(self) -> int:
        writer = self.config.get_terminal_writer()
        return max(20, int(getattr(writer, "fullwidth", 80)) - 1)

    def line(self, text: str) -> None:
        self._wrote = True
        with _uncaptured(self.config):
            if self._status_open:  # the end line takes the status line's place
                self._status_open = False
                self.terminal.rewrite(PREFIX + text, erase=True)
                self.terminal.write("\n")
            else:
                self.terminal.write_line(PREFIX + text)
            self._flush()

    def status(self, text: str) -> None:
        self._wrote = True
        with _uncaptured(self.config):
            if not self._status_open:
                self.terminal.ensure_newline()  # below the "golden.jsonl " the item started
                self._status_open = True
            self.terminal.rewrite((PREFIX + text)[: self._width()], erase=True)
            self._flush()

    def close(self) -> None:
        if not self._wrote:
            return
        with _uncaptured(self.config):
            if self._status_open:  # a build that raised: leave the last status on its own line
                self.terminal.write("\n")
                self._status_open = False
            # the item's result letter follows its file name again, as pytest wrote it before the build
            if self.config.option.verbose <= 0 and getattr(self.terminal, "showfspath", False):
                self.terminal.write_fspath_result(self.nodeid, "")
            self._flush()


class _WorkerLines:
    """Lines on an xdist worker's own stderr, which reaches the terminal the controller writes to."""

    def __init__(self, config: pytest.Config, worker: str) -> None:
        self.config = config
        self.prefix = f"[{worker}] {PREFIX}"
        # in verbose mode the controller leaves the line of the item that started open
        self._first = config.option.verbose > 0

    def line(self, text: str) -> None:
        with _uncaptured(self.config):
            lead, self._first = ("\n" if self._first else ""), False
            sys.stderr.write(f"{lead}{self.prefix}{text}\n")
            sys.stderr.flush()

    def close(self) -> None:
        pass


class _Reporter(progress.LineProgress):
    """Plain lines (and on a terminal a status line) through one of the writers above."""

    def __init__(self, writer: Any, *, status: bool, settings: progress.Settings) -> None:
        super().__init__(writer.line, status=writer.status if status else None, interval=settings.interval,
                         min_seconds=settings.min_seconds)
        self.writer = writer

    def close(self) -> None:
        super().close()
        self.writer.close()


class _WorkerReporter(_Reporter):
    """A worker's lines, but a wait ends without a line: the builder's last line says the index
    is ready, and by the time the waiter would say so the controller may be printing results."""

    def finish(self) -> None:
        if self._tasks and self._tasks[-1].total is None:
            self._tasks.pop()
            return
        super().finish()


def fixture_reporter(config: pytest.Config, nodeid: str = "") -> Any:
    """The reporter for this process's fixture build: silent under ``-q`` or ``RAGMETRICS_PROGRESS=off``."""
    settings = progress.settings()
    if settings.mode == "off" or config.option.verbose < 0:
        return progress.SILENT
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        return _WorkerReporter(_WorkerLines(config, str(workerinput.get("workerid", "worker"))), status=False,
                               settings=settings)
    terminal = config.pluginmanager.get_plugin("terminalreporter")
    if terminal is None:  # -p no:terminal
        return progress.SILENT
    on_terminal = bool(getattr(terminal, "isatty", False)) and settings.mode != "lines"
    return _Reporter(_TerminalLines(config, terminal, nodeid), status=on_terminal, settings=settings)


@contextlib.contextmanager
def fixture_progress(config: pytest.Config, nodeid: str = "") -> Iterator[None]:
    """Show what the stack builds in this block (the setup of item ``nodeid``, where the
    ``rag_retriever`` fixture runs) on the terminal."""
    reporter = fixture_reporter(config, nodeid)
    try:
        with progress.use(reporter):
            yield
    finally:
        close = getattr(reporter, "close", None)
        if callable(close):
            close()
