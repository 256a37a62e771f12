"""Reciprocal rank fusion: combine ranked lists by rank, not by incomparable scores.

BM25 scores are unbounded and cosine similarities live in [-1, 1], so the stack
fuses ranks: ``score(c) = sum over routes of 1 / (k + rank_route(c))`` with
1-based ranks and ``k = 60`` by default (Cormack et al., 2009). A consequence worth
knowing: with k = 60 a candidate found by both routes at modest ranks
(1/61 + 1/74 = 0.0299) beats one found by a single route at rank 1 (1/61 = 0.0164),
so a larger ``fetch_k`` can lower MRR.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

__all__ = ["reciprocal_rank_fusion"]

K = TypeVar("K", bound=Hashable)


def reciprocal_rank_fusion(
    rankings: Mapping[str, Sequence[K]], k: int = 60
) -> list[tuple[K, float, dict[str, int]]]:
    """Fuse ``{route: [item, ...best first]}`` into ``[(item, fused score, {route: rank})]``.

    Ties on the fused score go to the item with the best single rank, then to
    the route listed first in ``rankings``, then to first appearance, so the
    output is deterministic. An item repeated within one route counts once, at
    its best rank.
    """
    if k < 0:
        raise ValueError(f"rrf k must be >= 0, got {k}")
    ranks: dict[K, dict[str, int]] = {}
    order: dict[K, tuple[int, int]] = {}
    for r_pos, (route, items) in enumerate(rankings.items()):
        for rank, item in enumerate(items, start=1):
            seen = ranks.setdefault(item, {})
            if route not in seen:
                seen[route] = rank
                order.setdefault(item, (r_pos, rank))
    fused = [(item, sum(1.0 / (k + r) for r in rs.values()), rs) for item, rs in ranks.items()]
    fused.sort(key=lambda x: (-x[1], min(x[2].values()), order[x[0]]))
    return fused
