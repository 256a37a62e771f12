"""From each route's candidates to the hits a search returns: fetch, fuse, rerank.

Routes hand back ``(chunk position, score)`` pairs; these steps keep a document's
best chunk when asked to rank documents, fuse two routes, rescore with a
cross-encoder, and record in each :class:`Hit` how every step ranked it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_ragmetrics.chunking import Chunk

from .fusion import convex_fusion, reciprocal_rank_fusion
from .rerank import Reranker

__all__ = ["Hit", "combine", "fetch_candidates", "rerank_hits"]

#: what one route returns for one query: ``(chunk position, score)``, best first
Candidates = list[tuple[int, float]]


@dataclass
class Hit:
    """One ranked chunk and why it is where it is.

    ``explain`` holds ``{"bm25": {"rank", "score"}, "vector": {"rank", "score"}}`` for
    the routes that found the chunk, plus ``"fused"`` (the fused score, hybrid only;
    ``"fusion"`` names how: ``rrf``, ``convex-minmax``, ``convex-zscore``) and
    ``"rerank"`` (cross-encoder score) when those steps ran. ``score`` is the
    final one: rerank, else fused, else the single route's score.
    """

    id: str
    doc_id: str
    score: float
    text: str
    explain: dict[str, Any] = field(default_factory=dict)
    #: the document's metadata (its corpus.jsonl fields) when the corpus has any, else None
    metadata: dict[str, Any] | None = None

    @classmethod
    def of(cls, chunk: Chunk, score: float, explain: dict[str, Any]) -> Hit:
        return cls(chunk.chunk_id, chunk.doc_id, score, chunk.text, explain)

    def explain_text(self) -> str:
        """One line, e.g. ``bm25 #3 (12.1) + vector #1 (0.83) -> rrf 0.0325``."""
        parts = [
            f"{route} #{self.explain[route]['rank']} ({self.explain[route]['score']:.3g})"
            for route in ("bm25", "vector")
            if route in self.explain
        ]
        line = " + ".join(parts) or "(no route)"
        if "fused" in self.explain:
            line += f" -> {self.explain.get('fusion', 'rrf')} {self.explain['fused']:.4f}"
        if "rerank" in self.explain:
            line += f" -> rerank {self.explain['rerank']:.4g}"
        return line


def fetch_candidates(
    fetch: Callable[[list[int], int], list[Candidates]],
    n_queries: int,
    pool: int,
    by_doc: bool,
    doc_of: Sequence[str],
    n_documents: int,
) -> list[Candidates]:
    """One route's candidates per query: ``pool`` chunks, or ``pool`` distinct documents.

    ``fetch(query indexes, depth)`` asks the route; ``doc_of[position]`` is a chunk's
    document. With ``by_doc`` only a document's first (best) chunk is kept, and a query
    whose candidates cover fewer than ``pool`` documents is fetched again,
    twice as deep, until it has them or the route has nothing more. The
    first fetch already goes ``min(4, chunks per document)`` times deeper
    than ``pool``: on SciFact (6 chunks a document) 100 chunks covered a
    median 39 documents, so nearly every query paid a second round trip.
    """
    out: list[Candidates] = [[] for _ in range(n_queries)]
    todo, total = list(range(n_queries)), len(doc_of)
    depth = pool
    if by_doc:
        per_doc = -(-total // max(n_documents, 1))  # ceil: chunks per document
        depth = min(pool * max(1, min(4, per_doc)), total)
    while todo:
        pending = []
        for i, hits in zip(todo, fetch(todo, depth)):
            if not by_doc:
                out[i] = hits[:pool]
                continue
            seen: set[str] = set()
            kept = []
            for pos, score in hits:
                doc = doc_of[pos]
                if doc not in seen:
                    seen.add(doc)
                    kept.append((pos, score))
                    if len(kept) == pool:
                        break
            out[i] = kept
            if len(kept) < pool and len(hits) >= depth and depth < total:
                pending.append(i)
        todo, depth = pending, min(depth * 2, total)
    return out


def combine(
    chunks: Sequence[Chunk],
    per_route: dict[str, Candidates],
    rrf_k: int,
    by_doc: bool = False,
    limit: int | None = None,
    fusion: str = "rrf",
    weights: Mapping[str, float] | None = None,
) -> list[Hit]:
    """Single route: its own order and scores. Two routes: ``fusion`` of them.

    Fusion is over chunks, or over documents with ``by_doc`` (a document is
    then shown by the chunk its best-ranked route found).
    """
    if len(per_route) == 1:
        ((route, hits),) = per_route.items()
        return [
            Hit.of(chunks[pos], float(score), {route: {"rank": rank, "score": float(score)}})
            for rank, (pos, score) in enumerate(hits[:limit], start=1)
        ]
    explain: dict[Any, dict[str, Any]] = {}
    shown: dict[Any, tuple[int, int]] = {}  # key -> (best rank, chunk position)
    scored: dict[str, list[tuple[Any, float]]] = {}
    for route, hits in per_route.items():
        scored[route] = []
        for rank, (pos, score) in enumerate(hits, start=1):
            key = chunks[pos].doc_id if by_doc else pos
            scored[route].append((key, float(score)))
            explain.setdefault(key, {})[route] = {"rank": rank, "score": float(score)}
            if key not in shown or rank < shown[key][0]:
                shown[key] = (rank, pos)
    result = []
    if fusion == "rrf":
        fused = reciprocal_rank_fusion({r: [k for k, _ in pairs] for r, pairs in scored.items()}, rrf_k, weights)
    else:
        fused = convex_fusion(scored, weights, normalisation=fusion.partition("-")[2])
    for key, score, _ranks in fused[:limit]:
        explain[key]["fused"] = score
        if fusion != "rrf":
            explain[key]["fusion"] = fusion
        result.append(Hit.of(chunks[shown[key][1]], score, explain[key]))
    return result


def rerank_hits(reranker: Reranker, queries: list[str], candidates: list[list[Hit]]) -> list[list[Hit]]:
    """Replace each candidate's score with the cross-encoder's and reorder (stable on ties)."""
    pairs = [(q, h.text) for q, hits in zip(queries, candidates) for h in hits]
    scores = iter(reranker.score_pairs(pairs).tolist())
    out = []
    for hits in candidates:
        for h in hits:
            h.score = float(next(scores))
            h.explain["rerank"] = h.score
        out.append(sorted(hits, key=lambda h: -h.score))
    return out
