"""Paired statistics against scipy and hand-worked cases."""

from __future__ import annotations

import math
import random
from statistics import NormalDist
from typing import Any

import numpy as np
import pytest

from pytest_ragmetrics.evaluation import below_one_query, drop_beyond_one_query
from pytest_ragmetrics.stats import bootstrap_ci, delta_stats, detectable_change, permutation_pvalue


def scipy_stats() -> Any:
    """scipy's statistics, imported by the tests that compare with them (a second of CPU at every
    worker's collection otherwise)."""
    import scipy.stats

    return scipy.stats


def scipy_sign_flip_p(deltas: list[float], resamples: float = np.inf) -> float:
    nonzero = np.array([d for d in deltas if d != 0.0])
    result = scipy_stats().permutation_test(
        (nonzero,), np.sum, permutation_type="samples", n_resamples=resamples, alternative="two-sided",
        random_state=1,
    )
    return float(result.pvalue)


@pytest.mark.parametrize("seed", range(8))
def test_exact_permutation_p_value_equals_scipy(seed: int) -> None:
    rng = random.Random(seed)
    deltas = [rng.choice([0.0, 1.0, -1.0, 0.5, -0.5, 0.25, 1 / 3]) for _ in range(rng.randint(3, 12))]
    deltas[0], deltas[1] = 1.0, -0.5  # scipy needs two non-zero deltas
    assert permutation_pvalue(deltas) == pytest.approx(scipy_sign_flip_p(deltas), abs=1e-12)


def test_hand_worked_permutation_p_value() -> None:
    # Three queries improved by 1; the 2^3 sign patterns give sums 3,1,1,-1,1,-1,-1,-3:
    # |sum| >= 3 for 2 of 8 patterns, so p = 0.25.
    assert permutation_pvalue([1.0, 1.0, 1.0, 0.0]) == pytest.approx(0.25)
    assert permutation_pvalue([0.0, 0.0]) == 1.0
    assert permutation_pvalue([]) == 1.0


def test_monte_carlo_p_value_is_seeded_and_close_to_scipy() -> None:
    rng = np.random.default_rng(3)
    deltas = list(rng.normal(0.03, 0.2, size=200))
    p1 = permutation_pvalue(deltas, resamples=20_000, seed=7)
    assert p1 == permutation_pvalue(deltas, resamples=20_000, seed=7)  # the same numbers every run
    assert p1 == pytest.approx(scipy_sign_flip_p(deltas, 20_000), abs=0.02)


def test_bootstrap_ci_close_to_scipy_percentile_and_seeded() -> None:
    rng = np.random.default_rng(5)
    deltas = rng.normal(-0.05, 0.3, size=300)
    low, high = bootstrap_ci(deltas, resamples=20_000, seed=11)
    assert (low, high) == bootstrap_ci(deltas, resamples=20_000, seed=11)
    ref = scipy_stats().bootstrap((deltas,), np.mean, method="percentile", n_resamples=20_000,
                                confidence_level=0.95, random_state=2).confidence_interval
    assert low == pytest.approx(ref.low, abs=0.005)
    assert high == pytest.approx(ref.high, abs=0.005)
    assert low < deltas.mean() < high


def test_bootstrap_of_constant_deltas_is_a_point() -> None:
    assert bootstrap_ci([0.0] * 10) == (0.0, 0.0)
    assert bootstrap_ci([0.2] * 3) == (0.2, 0.2)
    assert all(math.isnan(x) for x in bootstrap_ci([]))


def test_detectable_change_formula_by_hand() -> None:
    # Deltas +0.1 / -0.1, 50 each: sample sd = 0.1 * sqrt(100/99); n = 100.
    deltas = [0.1, -0.1] * 50
    z = NormalDist().inv_cdf(0.975) + NormalDist().inv_cdf(0.8)  # 1.95996 + 0.84162
    expected = z * 0.1 * math.sqrt(100 / 99) / 10
    assert detectable_change(deltas) == pytest.approx(expected, rel=1e-12)
    assert detectable_change([0.5]) is None
    assert detectable_change([0.0, 0.0, 0.0]) is None


def test_detectable_change_shrinks_with_more_queries() -> None:
    # Seed 000's point: 15 questions cannot resolve what 100 can.
    rng = random.Random(0)
    small = [rng.choice([-1.0, 0.0, 0.0, 1.0]) for _ in range(15)]
    large = small * 7  # same spread, about 7x the queries
    assert detectable_change(large) < detectable_change(small) / 2


def test_delta_stats_bundle() -> None:
    stats = delta_stats([1 / 15] + [0.0] * 14)
    assert stats.n == 15
    assert stats.mean == pytest.approx(1 / 225)
    assert stats.below_granularity  # smaller than one question of fifteen
    assert stats.p_value == 1.0  # a single changed query: both signs are equally extreme
    assert stats.to_dict()["ci95"][0] <= stats.mean <= stats.to_dict()["ci95"][1]


@pytest.mark.parametrize("n", [1, 3, 7, 72])
def test_one_query_rule_reads_a_stored_one_query_change_as_one_query(n: int) -> None:
    """The gate, the statistics and every report share one 1/n rule: a change of exactly one
    query's worth, stored to 10 decimals, is neither below one query nor beyond it."""
    worth = round(1 / n, 10)
    assert not below_one_query(worth, n) and not below_one_query(-worth, n)
    assert not drop_beyond_one_query(-worth, n)
    assert below_one_query(worth / 2, n) and not below_one_query(0.0, n) and not below_one_query(0.1, 0)
    assert drop_beyond_one_query(-worth - 1e-6, n) and not drop_beyond_one_query(-worth, 0)
    assert delta_stats([-worth] + [0.0] * (n - 1)).below_granularity is below_one_query(-worth / n, n)
