"""Fusing the ranked lists of several routes (BM25, vectors) into one.

Two families, both pure functions over ``{route: [candidate, ...best first]}``:

- **Reciprocal rank fusion** (Cormack et al., 2009) combines ranks, not scores:
  ``score(c) = sum over routes of w_route / (k + rank_route(c))`` with 1-based
  ranks, ``k = 60`` and every weight 1 by default. BM25 scores are unbounded and
  cosine similarities live in [-1, 1], so ranks are the safe common ground. A
  consequence worth knowing: with k = 60 a candidate found by both routes at
  modest ranks (1/61 + 1/74 = 0.0299) beats one found by a single route at rank 1
  (1/61 = 0.0164), so a larger ``fetch_k`` can lower MRR, and a weak route drags
  a strong one down unless its weight is lowered.
- **Convex combination** of normalised scores: each route's scores are scaled to
  a common range (``minmax``: to [0, 1] over the route's own candidates;
  ``zscore``: to mean 0 and standard deviation 1), then
  ``score(c) = sum over routes of w_route * norm_route(c)`` with the weights
  scaled to sum to 1. A candidate a route did not return gets that route's
  lowest normalised value (0 under ``minmax``). Analyses of hybrid retrieval
  (Bruch et al., 2023) found it more robust than RRF once the weights are tuned,
  and it keeps how far apart the candidates were, which RRF throws away.

Ties go to the candidate with the best single rank, then to the route listed
first, then to first appearance, so the output is deterministic. A candidate
repeated within one route counts once, at its best rank (and that rank's score).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

__all__ = ["FUSIONS", "reciprocal_rank_fusion", "convex_fusion", "check_route_weights", "parse_route_weights"]

K = TypeVar("K", bound=Hashable)

#: The fusions a retriever can use: ``rrf``, or a convex combination by normalisation.
FUSIONS = ("rrf", "convex-minmax", "convex-zscore")


def check_route_weights(routes: Sequence[str], weights: Mapping[str, float] | None) -> dict[str, float]:
    """One finite weight >= 0 per route (1 when not given); at least one above 0."""
    weights = dict(weights or {})
    unknown = sorted(set(weights) - set(routes))
    if unknown:
        raise ValueError(f"route weights name unknown routes {unknown}; the routes are {list(routes)}")
    out = {route: float(weights.get(route, 1.0)) for route in routes}
    for route, w in out.items():
        if not math.isfinite(w) or w < 0:
            raise ValueError(f"route weight of {route!r} must be a finite number >= 0, got {w}")
    if routes and not any(out.values()):
        raise ValueError("at least one route weight must be above 0")
    return out


def _first_ranks(rankings: Mapping[str, Sequence[K]]) -> tuple[dict[K, dict[str, int]], dict[K, tuple[int, int]]]:
    """Each candidate's best rank in each route, and its first appearance (route index, rank)."""
    ranks: dict[K, dict[str, int]] = {}
    order: dict[K, tuple[int, int]] = {}
    for r_pos, (route, items) in enumerate(rankings.items()):
        for rank, item in enumerate(items, start=1):
            seen = ranks.setdefault(item, {})
            if route not in seen:
                seen[route] = rank
                order.setdefault(item, (r_pos, rank))
    return ranks, order


def _sorted(fused: list[tuple[K, float, dict[str, int]]],
            order: Mapping[K, tuple[int, int]]) -> list[tuple[K, float, dict[str, int]]]:
    fused.sort(key=lambda x: (-x[1], min(x[2].values()), order[x[0]]))
    return fused


def reciprocal_rank_fusion(
    rankings: Mapping[str, Sequence[K]], k: int = 60, weights: Mapping[str, float] | None = None
) -> list[tuple[K, float, dict[str, int]]]:
    """Fuse ``{route: [item, ...best first]}`` into ``[(item, fused score, {route: rank})]``.

    ``weights`` scales each route's contribution (default 1 each, plain RRF).
    """
    if k < 0:
        raise ValueError(f"rrf k must be >= 0, got {k}")
    w = check_route_weights(list(rankings), weights)
    ranks, order = _first_ranks(rankings)
    fused = [(item, sum(w[route] / (k + r) for route, r in rs.items()), rs) for item, rs in ranks.items()]
    return _sorted(fused, order)


def _normalise(scores: Sequence[float], how: str) -> tuple[list[float], float]:
    """Scores scaled by ``how``, and the value a missing candidate gets (the lowest)."""
    if not scores:
        return [], 0.0
    if how == "minmax":
        low, high = min(scores), max(scores)
        span = high - low
        scaled = [(s - low) / span if span > 0 else 1.0 for s in scores]
        return scaled, 0.0
    if how == "zscore":
        mean = sum(scores) / len(scores)
        std = math.sqrt(sum((s - mean) ** 2 for s in scores) / len(scores))
        scaled = [(s - mean) / std if std > 0 else 0.0 for s in scores]
        return scaled, min(scaled)
    raise ValueError(f"normalisation must be minmax or zscore, got {how!r}")


def convex_fusion(
    scored: Mapping[str, Sequence[tuple[K, float]]],
    weights: Mapping[str, float] | None = None,
    normalisation: str = "minmax",
) -> list[tuple[K, float, dict[str, int]]]:
    """Fuse ``{route: [(item, score), ...best first]}`` by a weighted sum of normalised scores.

    Returns ``[(item, fused score, {route: rank})]`` as :func:`reciprocal_rank_fusion`
    does. Weights are scaled to sum to 1; a single route with one candidate, or
    equal scores, normalises to 1 (``minmax``) or 0 (``zscore``).
    """
    w = check_route_weights(list(scored), weights)
    total = sum(w.values())
    w = {route: value / total for route, value in w.items()} if total else w
    ranks, order = _first_ranks({route: [item for item, _ in pairs] for route, pairs in scored.items()})
    normalised: dict[str, dict[K, float]] = {}
    missing: dict[str, float] = {}
    for route, pairs in scored.items():
        best: dict[K, float] = {}
        for item, score in pairs:  # the first (best-ranked) score of a repeated item
            if not math.isfinite(float(score)):
                raise ValueError(f"route {route!r}: score of {item!r} is {score}; fusion needs finite scores")
            best.setdefault(item, float(score))
        scaled, missing[route] = _normalise(list(best.values()), normalisation)
        normalised[route] = dict(zip(best, scaled))
    fused = [(item, sum(w[route] * normalised[route].get(item, missing[route]) for route in scored), rs)
             for item, rs in ranks.items()]
    return _sorted(fused, order)


def parse_route_weights(text: str) -> dict[str, float]:
    """``"bm25=1,vector=0.5"`` (or ``"1:0.5"``, bm25 then vector) as ``{route: weight}``."""
    text = text.strip()
    if not text:
        return {}
    try:
        if "=" not in text:
            values = [float(v) for v in text.split(":")]
            if len(values) != 2:
                raise ValueError
            return {"bm25": values[0], "vector": values[1]}
        out = {}
        for part in text.split(","):
            route, _, value = part.partition("=")
            out[route.strip()] = float(value)
        return out
    except ValueError:
        raise ValueError(f"route weights must look like 'bm25=1,vector=0.5' or '1:0.5', got {text!r}") from None
