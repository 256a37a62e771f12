"""Progress of the long steps: encoding a corpus, building its indexes, searching every question of a table.

A step reports through a :class:`Progress`: ``start(task, total, unit)``, then
``advance(n)`` as work gets done, then ``finish()``. Three kinds ship:

- a live bar on a terminal (tqdm, imported when a step starts; plain lines where it is missing);
- plain lines where stderr is not a terminal, as in a CI log: one when a step has run two
  seconds, then one every 15 s (``building the vector index: 12,000/31,592 chunks (38%),
  85 chunks/s, about 3 min 50 s left``), and one when it ends;
- silence.

Steps shorter than two seconds show nothing, so a warm run (indexes reused, vectors
from the cache) stays as quiet as before.

Which reporter a step gets: the one passed to it; else the one installed by
:func:`use` (the pytest plugin installs one that writes through pytest's terminal
while the ``rag_retriever`` fixture builds); else ``RAGMETRICS_PROGRESS`` (``bar``,
``lines``, ``off``; ``0`` and ``none`` are off too); else a bar when stderr is a
terminal and lines otherwise. ``RAGMETRICS_PROGRESS_INTERVAL`` sets the seconds between
two lines and ``RAGMETRICS_PROGRESS_MIN_SECONDS`` how long a step runs before it is
shown at all (0 shows every step).

Tasks nest: a step started while another runs is shown until it finishes, then the
outer one continues.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from pytest_ragmetrics.errors import RagMetricsError

__all__ = [
    "DEFAULT_INTERVAL",
    "DEFAULT_MIN_SECONDS",
    "ENV_INTERVAL",
    "ENV_MIN_SECONDS",
    "ENV_MODE",
    "SILENT",
    "BarProgress",
    "LineProgress",
    "Progress",
    "ProgressSettingError",
    "Silent",
    "current",
    "done_line",
    "format_duration",
    "format_eta",
    "format_rate",
    "hold",
    "parse_mode",
    "progress_line",
    "reporter",
    "resolve",
    "settings",
    "use",
]

ENV_MODE = "RAGMETRICS_PROGRESS"
ENV_INTERVAL = "RAGMETRICS_PROGRESS_INTERVAL"
ENV_MIN_SECONDS = "RAGMETRICS_PROGRESS_MIN_SECONDS"
#: Seconds between two lines of a running step (lines mode).
DEFAULT_INTERVAL = 15.0
#: A step that ends sooner shows nothing.
DEFAULT_MIN_SECONDS = 2.0
#: Seconds of recent work the rate (and so the time left) is measured over: the model's
#: loading and a slow first slice stop weighing once they are that old.
RATE_WINDOW = 60.0

_OFF = ("off", "0", "none", "no", "false")
_MODES = ("auto", "bar", "lines", "off")


class ProgressSettingError(RagMetricsError, ValueError):
    """A progress setting (``RAGMETRICS_PROGRESS*`` or a ``progress=`` mode) that cannot be read."""


@runtime_checkable
class Progress(Protocol):
    """What a long step reports to: one task at a time, tasks may nest."""

    def start(self, task: str, total: int | None = None, unit: str = "items") -> None:
        """A step begins: ``task`` names it, ``total`` is how many ``unit`` it has (None: unknown)."""

    def advance(self, n: int = 1) -> None:
        """``n`` more units are done (0: still working, e.g. while waiting for a lock)."""

    def finish(self) -> None:
        """The step started last has ended."""


class Silent:
    """Shows nothing."""

    def start(self, task: str, total: int | None = None, unit: str = "items") -> None:
        pass

    def advance(self, n: int = 1) -> None:
        pass

    def finish(self) -> None:
        pass

    def close(self) -> None:
        pass

    def __repr__(self) -> str:
        return "Silent()"


SILENT = Silent()


# ------------------------------------------------------------------------------ settings


def parse_mode(raw: str | None, what: str = ENV_MODE) -> str:
    """``auto``, ``bar``, ``lines`` or ``off`` from a setting (empty or None: ``auto``)."""
    value = (raw or "").strip().lower()
    if value in ("", "auto"):
        return "auto"
    if value in _OFF:
        return "off"
    if value in ("bar", "lines"):
        return value
    raise ProgressSettingError(f"{what}={raw!r}: expected bar, lines, off or auto")


def _seconds(environ: Mapping[str, str], name: str, default: float, minimum: float) -> float:
    raw = environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not value >= minimum or math.isinf(value):
        bound = f"> {minimum:g}" if minimum > 0 else ">= 0"
        raise ProgressSettingError(f"{name}={raw!r}: expected a number of seconds {bound}")
    return value


@dataclass(frozen=True)
class Settings:
    """What the environment asks for: the mode, the seconds between lines, the shortest step shown."""

    mode: str = "auto"
    interval: float = DEFAULT_INTERVAL
    min_seconds: float = DEFAULT_MIN_SECONDS


def settings(environ: Mapping[str, str] | None = None) -> Settings:
    """The progress settings of ``environ`` (default ``os.environ``); raises :class:`ProgressSettingError`."""
    env = os.environ if environ is None else environ
    return Settings(
        parse_mode(env.get(ENV_MODE)),
        _seconds(env, ENV_INTERVAL, DEFAULT_INTERVAL, 1e-9),
        _seconds(env, ENV_MIN_SECONDS, DEFAULT_MIN_SECONDS, 0.0),
    )


# ---------------------------------------------------------------------------- formatting


def format_duration(seconds: float) -> str:
    """``4.2 s``, ``50 s``, ``3 min 50 s``, ``1 h 5 min``."""
    seconds = max(0.0, seconds)
    if seconds < 10:
        return f"{seconds:.1f} s"
    whole = int(round(seconds))
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        minutes, rest = divmod(whole, 60)
        return f"{minutes} min {rest} s" if rest else f"{minutes} min"
    hours, rest = divmod(whole, 3600)
    minutes = rest // 60
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"


def format_eta(seconds: float) -> str:
    """The time left, rounded as far as an estimate deserves: ``about 45 s left``,
    ``about 3 min 50 s left``, ``about 12 min left``, ``about 1 h 5 min left``."""
    if seconds < 10:
        return "a few seconds left"
    if seconds < 60:
        step = 5
    elif seconds < 600:
        step = 10
    else:
        step = 60
    return f"about {format_duration(max(step, round(seconds / step) * step))} left"


def format_rate(rate: float, unit: str) -> str:
    """``85 chunks/s``, ``3.2 chunks/s``, ``0.25 chunks/s``."""
    if rate >= 10:
        return f"{rate:,.0f} {unit}/s"
    if rate >= 1:
        return f"{rate:.1f} {unit}/s"
    return f"{rate:.2g} {unit}/s"


def progress_line(task: str, done: int, total: int | None, unit: str, elapsed: float,
                  rate: float | None) -> str:
    """A running step: ``building the vector index: 12,000/31,592 chunks (38%), 85 chunks/s,
    about 3 min 50 s left``; without a total, how much so far."""
    if total is None:
        if done:
            return f"{task}: {done:,} {unit} after {format_duration(elapsed)}"
        return f"{task}: {format_duration(elapsed)} so far"
    # rounded, but 100% only when it is all done
    percent = 100 if total <= 0 or done >= total else min(99, round(100 * done / total))
    line = f"{task}: {done:,}/{total:,} {unit} ({percent}%)"
    if rate and rate > 0:
        line += f", {format_rate(rate, unit)}"
        if done < total:
            line += f", {format_eta((total - done) / rate)}"
    return line


def done_line(task: str, done: int, total: int | None, unit: str, elapsed: float) -> str:
    """An ended step: ``building the vector index: 31,592 chunks in 6 min 10 s (85 chunks/s)``,
    or where it stopped when it did not reach its total."""
    took = format_duration(elapsed)
    if total is not None and done < total:
        return f"{task}: stopped at {done:,}/{total:,} {unit} after {took}"
    if not done:
        return f"{task}: done after {took}"
    line = f"{task}: {done:,} {unit} in {took}"
    if elapsed > 0:
        line += f" ({format_rate(done / elapsed, unit)})"
    return line


# ---------------------------------------------------------------------------------- lines


@dataclass
class _Task:
    name: str
    total: int | None
    unit: str
    started: float
    done: int = 0
    written: float | None = None  # when its last line was written
    samples: deque[tuple[float, int]] = field(default_factory=deque)

    def rate(self, now: float) -> float | None:
        """Units a second over the last :data:`RATE_WINDOW` seconds (since the start before that)."""
        while len(self.samples) > 1 and now - self.samples[1][0] >= RATE_WINDOW:
            self.samples.popleft()
        t, d = self.samples[0]
        if now <= t or self.done <= d:
            return None
        return (self.done - d) / (now - t)


def _stderr_line(text: str) -> None:
    stream = sys.stderr  # looked up at each line: pytest swaps it while it captures
    stream.write(text + "\n")
    stream.flush()


class LineProgress:
    """Plain lines: a step that has run ``min_seconds`` gets one, then one every ``interval``
    seconds while it advances, and one when it ends; a step that ends sooner gets none.

    ``write`` takes one line (default: stderr). With ``status``, a running step is shown by
    rewriting one status line in place (every ``status_interval`` seconds) instead of
    periodic lines; the line written when it ends replaces it. ``clock`` is for tests.
    """

    def __init__(
        self,
        write: Callable[[str], None] | None = None,
        *,
        status: Callable[[str], None] | None = None,
        interval: float | None = None,
        min_seconds: float | None = None,
        status_interval: float = 0.5,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        env = settings() if interval is None or min_seconds is None else None
        self.interval = interval if interval is not None else env.interval  # type: ignore[union-attr]
        self.min_seconds = min_seconds if min_seconds is not None else env.min_seconds  # type: ignore[union-attr]
        self.write = write or _stderr_line
        self.status = status
        self.status_interval = status_interval
        self.clock = clock
        self._tasks: list[_Task] = []
        self._status_at: float | None = None

    def start(self, task: str, total: int | None = None, unit: str = "items") -> None:
        now = self.clock()
        state = _Task(task, total, unit, now)
        state.samples.append((now, 0))
        self._tasks.append(state)

    def advance(self, n: int = 1) -> None:
        if not self._tasks:
            return
        task = self._tasks[-1]
        now = self.clock()
        task.done += n
        if n:
            task.samples.append((now, task.done))
        elapsed = now - task.started
        if elapsed < self.min_seconds:
            return
        line = progress_line(task.name, task.done, task.total, task.unit, elapsed, task.rate(now))
        if self.status is not None:
            if self._status_at is None or now - self._status_at >= self.status_interval:
                self._status_at = now
                self.status(line)
            return
        if task.written is not None and now - task.written < self.interval:
            return
        task.written = now
        self.write(line)

    def finish(self) -> None:
        if not self._tasks:
            return
        task = self._tasks.pop()
        elapsed = self.clock() - task.started
        self._status_at = None
        if elapsed >= self.min_seconds:
            self.write(done_line(task.name, task.done, task.total, task.unit, elapsed))

    def close(self) -> None:
        """End every step still open (one that raised), each with its line if it was long enough."""
        while self._tasks:
            self.finish()

    def __repr__(self) -> str:
        return f"LineProgress(interval={self.interval:g}, min_seconds={self.min_seconds:g})"


# ------------------------------------------------------------------------------------ bar


class BarProgress:
    """tqdm bars on stderr, shown once a step has run ``min_seconds``; a nested step gets
    its own bar below, removed when it ends."""

    def __init__(self, min_seconds: float | None = None, file: Any = None) -> None:
        self.min_seconds = settings().min_seconds if min_seconds is None else min_seconds
        self.file = file
        self._bars: list[Any] = []

    def start(self, task: str, total: int | None = None, unit: str = "items") -> None:
        from tqdm.auto import tqdm

        nested = bool(self._bars)
        options: dict[str, Any] = {"desc": task, "total": total, "delay": self.min_seconds,
                                   "file": self.file if self.file is not None else sys.stderr,
                                   "leave": not nested and total is not None, "position": len(self._bars),
                                   "dynamic_ncols": True, "mininterval": 0.5}
        if total is None:
            options["bar_format"] = "{desc}: {elapsed}"
        else:
            options["unit"] = f" {unit}"
        self._bars.append(tqdm(**options))

    def advance(self, n: int = 1) -> None:
        if self._bars:
            self._bars[-1].update(n)

    def finish(self) -> None:
        if self._bars:
            self._bars.pop().close()

    def close(self) -> None:
        while self._bars:
            self.finish()

    def __repr__(self) -> str:
        return f"BarProgress(min_seconds={self.min_seconds:g})"


def _has_tqdm() -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec("tqdm") is not None
    except (ImportError, ValueError):
        return False


# -------------------------------------------------------------------------------- choosing


def reporter(mode: str | None = None, environ: Mapping[str, str] | None = None) -> Any:
    """A new reporter: ``bar``, ``lines``, ``off``, or ``auto``/None (``RAGMETRICS_PROGRESS``,
    else a bar when stderr is a terminal, lines otherwise)."""
    env = settings(environ)
    chosen = parse_mode(mode, "progress") if mode is not None else env.mode
    if chosen == "auto" and mode is not None:
        chosen = env.mode
    if chosen == "off":
        return SILENT
    if chosen == "auto":
        isatty = getattr(sys.stderr, "isatty", None)
        chosen = "bar" if callable(isatty) and isatty() else "lines"
    if chosen == "bar" and _has_tqdm():
        return BarProgress(env.min_seconds)
    return LineProgress(interval=env.interval, min_seconds=env.min_seconds)


_CURRENT: ContextVar[Any] = ContextVar("ragmetrics_progress", default=None)


@contextlib.contextmanager
def use(progress: Any) -> Iterator[Any]:
    """Make ``progress`` what steps without a reporter of their own report to, in this context."""
    token = _CURRENT.set(progress)
    try:
        yield progress
    finally:
        _CURRENT.reset(token)


def current() -> Any:
    """The reporter installed by :func:`use`, else a new one as the environment asks."""
    installed = _CURRENT.get()
    return installed if installed is not None else reporter()


def resolve(progress: Any = None) -> Any:
    """A reporter from a ``progress=`` argument: a reporter as it is, a mode (``bar``, ``lines``,
    ``off``, ``auto``) or None (:func:`current`)."""
    if progress is None:
        return current()
    if isinstance(progress, str):
        if parse_mode(progress, "progress") == "auto":
            return current()
        return reporter(progress)
    for method in ("start", "advance", "finish"):
        if not callable(getattr(progress, method, None)):
            raise ProgressSettingError(f"progress={progress!r}: expected 'bar', 'lines', 'off', 'auto' or an "
                                       "object with start(task, total, unit), advance(n) and finish()")
    return progress


# ---------------------------------------------------------------------------------- waits


@contextlib.contextmanager
def hold(lock: Any, progress: Any, task: str, poll: float = 0.5) -> Iterator[None]:
    """Hold ``lock`` (``acquire(timeout=)`` raising ``TimeoutError``, ``release()``) for the block.

    When another holder has it, the wait is a step of its own, reported as ``task``
    (and so shown once it lasts ``min_seconds``).
    """
    try:
        lock.acquire(timeout=0)
    except TimeoutError:
        progress.start(task, None, "")
        try:
            while True:
                try:
                    lock.acquire(timeout=poll)
                    break
                except TimeoutError:
                    progress.advance(0)
        finally:
            progress.finish()
    try:
        yield
    finally:
        lock.release()
