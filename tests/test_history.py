"""The drift rule of ``ragmetrics history`` on hand-worked series, then as a property.

:func:`find_drift` sees one baseline period of one metric: a mean per run and the
allowed drop each run was gated with. The artifacts of real runs, grouping,
refreshes, flaky queries and the output formats are tested in
tests/plugin/test_history_nightly.py.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_ragmetrics.gate.verdict import EPS
from pytest_ragmetrics.tools.history import find_drift


def same(tol: float | None, n: int) -> list[float | None]:
    return [tol] * n


@pytest.mark.parametrize("values, tol, windows", [
    # the docs' example: up to 1.0, then two steps of 1/12 down to the start: 1/6 > 0.1
    ([5 / 6, 5.5 / 6, 1.0, 5.5 / 6, 5 / 6], 0.1, [(2, 4)]),
    # by hand: peak 0.90 (run 1), trough 0.79 (run 4); steps 0.04, 0.03, 0.04, each <= 0.05; 0.11 > 0.05
    ([0.80, 0.90, 0.86, 0.83, 0.79], 0.05, [(1, 4)]),
    # a total of exactly the allowed drop is not beyond it
    ([1.0, 0.97, 0.95], 0.05, []),
    # a one-step fall beyond the allowed drop is the gate's, and cuts the series in two stretches
    ([0.90, 0.87, 0.84, 0.70, 0.68, 0.66, 0.64], 0.05, [(0, 2), (3, 6)]),
    ([0.90, 0.80], 0.05, []),
    # the largest decline of a stretch, from the latest run holding the highest mean
    ([0.90, 0.86, 0.82, 0.88, 0.84], 0.05, [(0, 2)]),
    ([0.90, 0.90, 0.87, 0.84], 0.05, [(1, 3)]),
    # rising only, or one run
    ([0.5, 0.6, 0.7], 0.05, []),
    ([0.5], 0.05, []),
    # an allowed drop of 0 (recall's default): every fall is a one-step fall, never drift
    ([1.0, 0.99, 0.98, 0.97], 0.0, []),
])
def test_hand_worked_series(values: list[float], tol: float, windows: list[tuple[int, int]]) -> None:
    assert find_drift(values, same(tol, len(values))) == windows


def test_a_metric_without_an_allowed_drop_is_not_checked() -> None:
    assert find_drift([1.0, 0.9, 0.8, 0.7], same(None, 4)) == []


def test_a_run_without_a_value_or_a_tolerance_cuts_the_stretch() -> None:
    assert find_drift([1.0, 0.97, None, 0.94, 0.91], same(0.05, 5)) == []
    assert find_drift([1.0, 0.97, 0.94, 0.91], [0.05, 0.05, None, 0.05]) == []
    assert find_drift([1.0, 0.97, 0.94, 0.91], [None, 0.05, 0.05, 0.05]) == [(0, 3)]


def test_the_allowed_drop_of_the_trough_run_decides() -> None:
    values = [1.0, 0.96, 0.92]  # 0.08 in two steps of 0.04
    assert find_drift(values, [0.05, 0.05, 0.05]) == [(0, 2)]
    assert find_drift(values, [0.05, 0.05, 0.1]) == []  # the newest run was gated with 0.1


series = st.lists(st.floats(0, 1, allow_nan=False), min_size=1, max_size=12)


@settings(max_examples=400, deadline=None)
@given(series, st.floats(0, 0.3, allow_nan=False))
def test_every_window_is_small_steps_adding_up_and_nothing_else_is(values: list[float], tol: float) -> None:
    windows = find_drift(values, same(tol, len(values)))
    for start, end in windows:
        assert end - start >= 2  # no single step can exceed the allowed drop
        assert values[start] - values[end] > tol + EPS
        assert all(values[j - 1] - values[j] <= tol + EPS for j in range(start + 1, end + 1))
        assert values[start] >= max(values[start:end + 1]) - EPS  # it starts at the highest mean
    # brute force: a pair (i < j) with only small steps between that fell more than tol lies
    # in a stretch that has a flagged window
    flagged = {j for s, e in windows for j in range(s, e + 1)}
    for i in range(len(values)):
        for j in range(i + 1, len(values)):
            small = all(values[k - 1] - values[k] <= tol + EPS for k in range(i + 1, j + 1))
            if small and values[i] - values[j] > tol + 2 * EPS:
                stretch = _stretch(values, tol, i)
                assert any(stretch[0] <= s and e <= stretch[1] for s, e in windows), (i, j, windows, flagged)


def _stretch(values: list[float], tol: float, i: int) -> tuple[int, int]:
    """The stretch (between one-step falls beyond ``tol``) that holds run ``i``."""
    start = i
    while start > 0 and values[start - 1] - values[start] <= tol + EPS:
        start -= 1
    end = i
    while end + 1 < len(values) and values[end] - values[end + 1] <= tol + EPS:
        end += 1
    return start, end
