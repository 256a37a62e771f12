"""Paired statistics for a run against its baseline: the pair is the query.

Resampling baseline and candidate independently ignores that both answered the
same questions and hides real regressions; every function here works on the
per-query deltas (now − baseline). All resampling is seeded, so the same input
prints the same interval and p-value on every run and machine.

- :func:`bootstrap_ci`: percentile interval of the mean delta, resampling queries.
- :func:`permutation_pvalue`: two-sided paired randomization test (sign flips of
  the deltas), exact when there are few non-zero deltas.
- :func:`detectable_change`: the smallest mean change the set can detect at 95%
  confidence with 80% power, from n and the deltas' standard deviation.

:func:`delta_stats`, which the gate and ``ragmetrics compare`` both call, sorts the
deltas first, so the statistics depend on the queries' deltas, not on their order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Sequence

import numpy as np

from pytest_ragmetrics.evaluation import below_one_query

__all__ = ["DeltaStats", "bootstrap_ci", "permutation_pvalue", "detectable_change", "delta_stats"]

DEFAULT_RESAMPLES = 10_000
DEFAULT_SEED = 0
_BLOCK = 1_000  # resamples drawn at a time, so memory stays at BLOCK x n


def bootstrap_ci(
    deltas: Sequence[float],
    confidence: float = 0.95,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of paired deltas."""
    d = np.asarray(deltas, dtype=float)
    n = d.size
    if n == 0:
        return (math.nan, math.nan)
    if np.all(d == d[0]):
        return (float(d[0]), float(d[0]))
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    for start in range(0, resamples, _BLOCK):
        stop = min(start + _BLOCK, resamples)
        idx = rng.integers(0, n, size=(stop - start, n))
        means[start:stop] = d[idx].mean(axis=1)
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(means, [tail, 1.0 - tail])
    return (float(low), float(high))


def permutation_pvalue(
    deltas: Sequence[float],
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> float:
    """Two-sided p-value of "no difference" by flipping the sign of each query's delta.

    Zero deltas cannot change sign and are left out. With at most
    log2(resamples) non-zero deltas every sign pattern is enumerated (exact);
    otherwise ``resamples`` random patterns are drawn and p = (hits + 1) / (resamples + 1).
    """
    d = np.asarray(deltas, dtype=float)
    d = d[d != 0.0]
    n_all = len(deltas)
    if d.size == 0 or n_all == 0:
        return 1.0
    observed = abs(d.sum())
    tol = 1e-12 * max(1.0, observed)
    if 2 ** d.size <= resamples:
        signs = ((np.arange(2 ** d.size)[:, None] >> np.arange(d.size)) & 1) * 2 - 1
        sums = np.abs(signs @ d)
        return float(np.mean(sums >= observed - tol))
    rng = np.random.default_rng(seed)
    hits = 0
    for start in range(0, resamples, _BLOCK):
        stop = min(start + _BLOCK, resamples)
        signs = rng.integers(0, 2, size=(stop - start, d.size)) * 2 - 1
        hits += int(np.sum(np.abs(signs @ d) >= observed - tol))
    return (hits + 1) / (resamples + 1)


def detectable_change(deltas: Sequence[float], confidence: float = 0.95, power: float = 0.8) -> float | None:
    """Smallest mean change a paired test on this many queries would detect.

    (z_{1-alpha/2} + z_power) * sd(deltas) / sqrt(n); ``None`` when it cannot be
    estimated (fewer than two queries, or no query changed at all).
    """
    d = np.asarray(deltas, dtype=float)
    if d.size < 2:
        return None
    sd = float(d.std(ddof=1))
    if sd == 0.0:
        return None
    z = NormalDist().inv_cdf(1 - (1 - confidence) / 2) + NormalDist().inv_cdf(power)
    return z * sd / math.sqrt(d.size)


@dataclass(frozen=True)
class DeltaStats:
    n: int
    mean: float
    ci_low: float
    ci_high: float
    p_value: float
    detectable: float | None
    #: queries whose delta is not zero: only they can flip sign, so they bound the smallest p
    changed: int = 0

    @property
    def below_granularity(self) -> bool:
        """True when the change is smaller than one query's worth (1/n)."""
        return below_one_query(self.mean, self.n)

    def to_dict(self) -> dict[str, float | int | list[float] | None]:
        return {"n": self.n, "mean": self.mean, "ci95": [self.ci_low, self.ci_high],
                "p_value": self.p_value, "detectable": self.detectable, "changed": self.changed}

    @property
    def smallest_p(self) -> float:
        """The smallest two-sided p-value the sign-flip test can give with this many changed queries."""
        return min(1.0, 2.0 / 2.0 ** self.changed) if self.changed < 64 else 0.0


def delta_stats(deltas: Sequence[float], seed: int = DEFAULT_SEED, resamples: int = DEFAULT_RESAMPLES) -> DeltaStats:
    """Mean, 95% bootstrap interval, permutation p-value and detectable change.

    The deltas are taken in ascending order: resampling is seeded by position, so the
    same queries listed in another order (the golden set's in the plugin, the file's in
    ``ragmetrics compare``) must not give another interval.
    """
    d = sorted(float(x) for x in deltas)
    mean = math.fsum(d) / len(d) if d else math.nan
    low, high = bootstrap_ci(d, resamples=resamples, seed=seed)
    return DeltaStats(len(d), mean, low, high, permutation_pvalue(d, resamples, seed), detectable_change(d),
                      sum(1 for x in d if x != 0.0))
