"""The progress reporters (pytest_ragmetrics.progress), on a fake clock: no test waits or reads real time."""

from __future__ import annotations

import io
from typing import Any

import pytest

from pytest_ragmetrics import progress
from pytest_ragmetrics.progress import (
    SILENT,
    BarProgress,
    LineProgress,
    ProgressSettingError,
    done_line,
    format_duration,
    format_eta,
    format_rate,
    hold,
    progress_line,
    reporter,
    resolve,
    settings,
    use,
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def at(self, seconds: float) -> None:
        """Move to ``seconds`` after the start (1000)."""
        self.now = 1000.0 + seconds


@pytest.fixture(autouse=True)
def _plain_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (progress.ENV_MODE, progress.ENV_INTERVAL, progress.ENV_MIN_SECONDS):
        monkeypatch.delenv(name, raising=False)


def lines_reporter(clock: Clock, **kwargs: Any) -> tuple[LineProgress, list[str]]:
    out: list[str] = []
    options = {"interval": 15.0, "min_seconds": 2.0, **kwargs}
    return LineProgress(out.append, clock=clock, **options), out


# ----------------------------------------------------------------------------- formatting


def test_the_line_of_a_running_step_has_count_share_rate_and_time_left() -> None:
    line = progress_line("building the vector index", 12_000, 31_592, "chunks", 141.0, 85.0)
    assert line == "building the vector index: 12,000/31,592 chunks (38%), 85 chunks/s, about 3 min 50 s left"
    # before any rate is known: the count alone
    assert progress_line("building the vector index", 0, 31_592, "chunks", 3.0, None) == \
        "building the vector index: 0/31,592 chunks (0%)"
    # 100% only when everything is done
    assert "(99%)" in progress_line("t", 31_590, 31_592, "chunks", 300.0, 85.0)
    assert progress_line("t", 31_592, 31_592, "chunks", 300.0, 85.0) == "t: 31,592/31,592 chunks (100%), 85 chunks/s"
    # without a total: how long so far
    assert progress_line("waiting for the lock", 0, None, "", 35.0, None) == "waiting for the lock: 35 s so far"


def test_the_line_of_an_ended_step() -> None:
    assert done_line("building the vector index", 31_592, 31_592, "chunks", 370.0) == \
        "building the vector index: 31,592 chunks in 6 min 10 s (85 chunks/s)"
    assert done_line("building the vector index", 12_000, 31_592, "chunks", 141.0) == \
        "building the vector index: stopped at 12,000/31,592 chunks after 2 min 21 s"
    assert done_line("waiting for the lock", 0, None, "", 65.0) == "waiting for the lock: done after 1 min 5 s"


@pytest.mark.parametrize(("seconds", "text"), [
    (0.04, "0.0 s"), (4.24, "4.2 s"), (50.4, "50 s"), (60, "1 min"), (230, "3 min 50 s"),
    (3600, "1 h"), (3900, "1 h 5 min"),
])
def test_durations(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


@pytest.mark.parametrize(("seconds", "text"), [
    (3, "a few seconds left"), (43, "about 45 s left"), (230.49, "about 3 min 50 s left"),
    (721, "about 12 min left"), (3910, "about 1 h 5 min left"),
])
def test_time_left_is_rounded_as_far_as_an_estimate_deserves(seconds: float, text: str) -> None:
    assert format_eta(seconds) == text


def test_rates() -> None:
    assert format_rate(85.4, "chunks") == "85 chunks/s"
    assert format_rate(1234.5, "chunks") == "1,234 chunks/s"
    assert format_rate(3.24, "chunks") == "3.2 chunks/s"
    assert format_rate(0.25, "questions") == "0.25 questions/s"


# ----------------------------------------------------------------------------------- lines


def test_lines_come_at_the_interval_and_once_at_the_end() -> None:
    clock = Clock()
    p, out = lines_reporter(clock)
    p.start("building the vector index", 10_000, "chunks")
    for second in range(1, 41):  # 250 chunks a second for 40 s
        clock.at(second)
        p.advance(250)
    clock.at(40.5)
    p.finish()
    # one line once the step has run 2 s, then one every 15 s, then the end
    assert out == [
        "building the vector index: 500/10,000 chunks (5%), 250 chunks/s, about 40 s left",
        "building the vector index: 4,250/10,000 chunks (42%), 250 chunks/s, about 25 s left",
        "building the vector index: 8,000/10,000 chunks (80%), 250 chunks/s, a few seconds left",
        "building the vector index: 10,000 chunks in 40 s (247 chunks/s)",
    ]


def test_a_step_under_the_minimum_prints_nothing() -> None:
    clock = Clock()
    p, out = lines_reporter(clock)
    p.start("tokenising for BM25", 3000, "chunks")
    for t in (0.5, 1.0, 1.9):
        clock.at(t)
        p.advance(1000)
    p.finish()
    assert out == []


def test_the_rate_follows_the_recent_work() -> None:
    """A slow start (the model loading) stops weighing on the time left once it is a minute old."""
    clock = Clock()
    p, out = lines_reporter(clock, interval=1.0)
    p.start("building the vector index", 100_000, "chunks")
    clock.at(30)
    p.advance(100)  # 30 s for the first slice
    for second in range(31, 101):
        clock.at(second)
        p.advance(100)  # then 100 chunks a second
    assert out[-1].startswith("building the vector index: 7,100/100,000 chunks (7%), 100 chunks/s, about 15 min left")


def test_nested_steps_end_in_order() -> None:
    clock = Clock()
    p, out = lines_reporter(clock, interval=1.0, min_seconds=0.0)
    p.start("searching mode bm25", 64, "questions")
    p.start("tokenising for BM25", 30, "chunks")
    clock.at(1)
    p.advance(30)
    p.finish()
    clock.at(2)
    p.advance(32)
    clock.at(3)
    p.advance(32)
    p.finish()
    assert out == [
        "tokenising for BM25: 30/30 chunks (100%), 30 chunks/s",
        "tokenising for BM25: 30 chunks in 1.0 s (30 chunks/s)",
        "searching mode bm25: 32/64 questions (50%), 16 questions/s, a few seconds left",
        "searching mode bm25: 64/64 questions (100%), 21 questions/s",
        "searching mode bm25: 64 questions in 3.0 s (21 questions/s)",
    ]


def test_a_status_line_is_rewritten_and_replaced_by_the_end_line() -> None:
    clock = Clock()
    statuses: list[str] = []
    p, out = lines_reporter(clock, status=statuses.append, status_interval=0.5)
    p.start("building the vector index", 100, "chunks")
    for t, n in ((1, 10), (2.5, 10), (2.7, 10), (3.2, 10)):
        clock.at(t)
        p.advance(n)
    clock.at(4)
    p.finish()
    assert statuses == ["building the vector index: 20/100 chunks (20%), 8.0 chunks/s, about 10 s left",
                        "building the vector index: 40/100 chunks (40%), 12 chunks/s, a few seconds left"]
    assert out == ["building the vector index: stopped at 40/100 chunks after 4.0 s"]


def test_close_ends_what_a_failure_left_open() -> None:
    clock = Clock()
    p, out = lines_reporter(clock)
    p.start("building the vector index", 100, "chunks")
    clock.at(5)
    p.close()
    assert out == ["building the vector index: stopped at 0/100 chunks after 5.0 s"]
    p.advance(3)
    p.finish()  # nothing open: nothing happens
    assert len(out) == 1


# ------------------------------------------------------------------------------- settings


def test_the_mode_comes_from_the_argument_then_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for off in ("off", "0", "none", "OFF "):
        monkeypatch.setenv(progress.ENV_MODE, off)
        assert reporter() is SILENT
    monkeypatch.setenv(progress.ENV_MODE, "lines")
    assert isinstance(reporter(), LineProgress)
    assert isinstance(reporter("bar"), BarProgress)  # the argument wins
    assert reporter("off") is SILENT
    monkeypatch.setenv(progress.ENV_MODE, "sometimes")
    with pytest.raises(ProgressSettingError, match="RAGMETRICS_PROGRESS='sometimes': expected bar, lines, off"):
        reporter()


def test_auto_is_a_bar_on_a_terminal_and_lines_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    class Stream(io.StringIO):
        def __init__(self, tty: bool) -> None:
            super().__init__()
            self.tty = tty

        def isatty(self) -> bool:
            return self.tty

    monkeypatch.setattr("sys.stderr", Stream(True))
    assert isinstance(reporter(), BarProgress)
    monkeypatch.setattr(progress, "_has_tqdm", lambda: False)  # no tqdm: plain lines
    assert isinstance(reporter(), LineProgress)
    monkeypatch.setattr("sys.stderr", Stream(False))
    assert isinstance(reporter(), LineProgress)


def test_interval_and_minimum_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert settings({}) == progress.Settings("auto", 15.0, 2.0)
    assert settings({progress.ENV_INTERVAL: "0.01", progress.ENV_MIN_SECONDS: "0"}) == \
        progress.Settings("auto", 0.01, 0.0)
    with pytest.raises(ProgressSettingError, match="RAGMETRICS_PROGRESS_INTERVAL='0': expected a number"):
        settings({progress.ENV_INTERVAL: "0"})
    with pytest.raises(ProgressSettingError, match="RAGMETRICS_PROGRESS_MIN_SECONDS='soon'"):
        settings({progress.ENV_MIN_SECONDS: "soon"})
    monkeypatch.setenv(progress.ENV_INTERVAL, "3")
    monkeypatch.setenv(progress.ENV_MIN_SECONDS, "0.5")
    lines = reporter("lines")
    assert (lines.interval, lines.min_seconds) == (3.0, 0.5)


def test_an_installed_reporter_is_the_default_in_its_context() -> None:
    recorded: list[Any] = []

    class Recorder:
        def start(self, task: str, total: int | None = None, unit: str = "items") -> None:
            recorded.append(task)

        def advance(self, n: int = 1) -> None:
            pass

        def finish(self) -> None:
            pass

    mine = Recorder()
    with use(mine):
        assert resolve(None) is mine and resolve("auto") is mine
        assert resolve("off") is SILENT  # an explicit mode wins
    assert resolve(None) is not mine
    with pytest.raises(ProgressSettingError, match="expected 'bar', 'lines', 'off', 'auto' or an object"):
        resolve(object())


def test_a_bar_shows_nothing_for_a_quick_step_and_a_bar_for_a_long_one() -> None:
    pytest.importorskip("tqdm", reason="tqdm comes with the stack extra, which CI installs")
    out = io.StringIO()
    bar = BarProgress(min_seconds=60.0, file=out)
    bar.start("tokenising for BM25", 100, "chunks")
    bar.advance(100)
    bar.finish()
    assert out.getvalue() == ""
    bar = BarProgress(min_seconds=0.0, file=out)
    bar.start("building the vector index", 100, "chunks")
    bar.advance(100)
    bar.finish()
    assert "building the vector index: 100%" in out.getvalue() and "100/100" in out.getvalue()


# ----------------------------------------------------------------------------------- waits


class Lock:
    def __init__(self, busy: int) -> None:
        self.busy = busy  # refusals before it is free
        self.held = False

    def acquire(self, timeout: float) -> None:
        if self.busy:
            self.busy -= 1
            raise TimeoutError
        self.held = True

    def release(self) -> None:
        self.held = False


class Calls:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def start(self, task: str, total: int | None = None, unit: str = "items") -> None:
        self.calls.append(("start", task, total))

    def advance(self, n: int = 1) -> None:
        self.calls.append(("advance", n))

    def finish(self) -> None:
        self.calls.append(("finish",))


def test_a_wait_for_a_lock_is_a_step_of_its_own() -> None:
    calls, lock = Calls(), Lock(busy=3)
    with hold(lock, calls, "waiting for another build"):
        assert lock.held
    assert not lock.held
    assert calls.calls == [("start", "waiting for another build", None), ("advance", 0), ("advance", 0),
                           ("finish",)]
    calls = Calls()
    with hold(Lock(busy=0), calls, "waiting"):
        pass
    assert calls.calls == []  # a free lock is no step


def test_the_wait_is_shown_in_lines_once_it_lasts() -> None:
    clock = Clock()
    p, out = lines_reporter(clock, interval=10.0)
    p.start("waiting for another process to finish building this index", None, "")
    for t in range(1, 26):
        clock.at(t)
        p.advance(0)
    p.finish()
    assert out == [
        "waiting for another process to finish building this index: 2.0 s so far",
        "waiting for another process to finish building this index: 12 s so far",
        "waiting for another process to finish building this index: 22 s so far",
        "waiting for another process to finish building this index: done after 25 s",
    ]
