"""Build timings of the reference stack and HNSW recall against exact search.

Usage: python benchmarks/stack_hnsw.py [collection] [--chunk-size N] [--queries N]

1. Builds a :class:`Retriever` over ``../shared/collections/<collection>`` (default
   scifact, 300/60 chunks) and reports the build time: cold when the embedding
   cache (``$RAGMETRICS_HOME``, default ``.ragmetrics/`` in the project) is empty;
   then a warm rebuild (a new index dir, cache kept) and a reuse (nothing changed).
2. Measures recall@10 of chromadb's HNSW against exact cosine search (numpy
   over the same cached vectors) for several HNSW settings, with the
   collection's queries plus document titles as extra queries.
3. Times vector / bm25 / hybrid search per query through ``search_batch``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from pytest_ragmetrics.stack import (
    DEFAULT_HNSW,
    Embedder,
    HnswSettings,
    Retriever,
    VectorIndex,
    load_corpus,
)

COLLECTIONS = Path(__file__).resolve().parents[1].parent / "shared" / "collections"
SETTINGS = [
    # a small ef, for scale
    HnswSettings(ef_construction=100, ef_search=10, max_neighbors=16),
    HnswSettings(ef_construction=100, ef_search=100, max_neighbors=16),  # chromadb 1.x default
    HnswSettings(ef_construction=200, ef_search=200, max_neighbors=16),
    HnswSettings(ef_construction=200, ef_search=400, max_neighbors=16),
    HnswSettings(ef_construction=400, ef_search=400, max_neighbors=16),
    HnswSettings(ef_construction=400, ef_search=400, max_neighbors=32),
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("collection", nargs="?", default="scifact")
    ap.add_argument("--chunk-size", type=int, default=300)
    ap.add_argument("--overlap", type=int, default=60)
    ap.add_argument("--queries", type=int, default=1000)
    args = ap.parse_args()
    folder = COLLECTIONS / args.collection

    t0 = time.perf_counter()
    r = Retriever(folder, chunk_size=args.chunk_size, overlap=args.overlap)
    stats = r.build()
    print(f"build 1: {time.perf_counter() - t0:.1f}s {json.dumps(stats)}", flush=True)
    # a fresh data dir, as if the index had been deleted: everything comes from the cache
    # (deleting the live dir instead would not do: chromadb keeps the collection in memory)
    scratch = Path(tempfile.mkdtemp(prefix="warm-"))
    try:
        t0 = time.perf_counter()
        r2 = Retriever(
            folder,
            chunk_size=args.chunk_size,
            overlap=args.overlap,
            embedder=r.embedder,
            data_dir=scratch,
        )
        stats = r2.build()
        print(
            f"warm rebuild (new index dir, cache kept): {time.perf_counter() - t0:.1f}s "
            f"{json.dumps(stats)}"
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    t0 = time.perf_counter()
    r3 = Retriever(folder, chunk_size=args.chunk_size, overlap=args.overlap, embedder=r.embedder)
    stats = r3.build()
    print(
        f"reuse (nothing changed): {time.perf_counter() - t0:.1f}s {json.dumps(stats)}", flush=True
    )

    queries = [
        json.loads(line)["query"] for line in (folder / "queries.jsonl").open(encoding="utf-8")
    ]
    titles = [d.title for d in load_corpus(folder) if d.title]
    rng = np.random.default_rng(0)
    extra = max(0, args.queries - len(queries))
    picks = rng.choice(len(titles), size=min(extra, len(titles)), replace=False)
    queries = (queries + [titles[i] for i in picks])[: args.queries]
    qvecs = r.embedder.embed_queries(queries)
    ids = [c.chunk_id for c in r.chunks]
    texts = [c.text for c in r.chunks]
    cvecs = r.embedder.embed(texts)
    sims = qvecs @ cvecs.T
    exact = [set(ids[j] for j in np.argsort(-row, kind="stable")[:10]) for row in sims]
    print(f"recall@10 vs exact: {len(queries)} queries over {len(ids)} vectors")

    tmp = Path(tempfile.mkdtemp(prefix="hnsw-"))
    try:
        for i, hnsw in enumerate(SETTINGS):
            index = VectorIndex(f"bench-{i}", {"b": i}, data_dir=tmp / str(i), hnsw=hnsw)
            t0 = time.perf_counter()
            index.sync(ids, texts, "x", r.embedder.embed)
            build = time.perf_counter() - t0
            t0 = time.perf_counter()
            got = index.query(qvecs, 10)
            per_q = (time.perf_counter() - t0) / len(queries) * 1000
            rec = np.mean(
                [len(exact[q] & {cid for cid, _ in got[q]}) / 10 for q in range(len(queries))]
            )
            mark = " (default)" if hnsw == DEFAULT_HNSW else ""
            print(
                f"  {hnsw.label():28s} recall@10={rec:.4f} loss={1 - rec:.2%} "
                f"build={build:.1f}s query={per_q:.2f}ms{mark}",
                flush=True,
            )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    # query timings with embeddings computed afresh (an Embedder without cache; the
    # index itself is reused, so nothing of the corpus is encoded)
    cold = Retriever(
        folder, chunk_size=args.chunk_size, overlap=args.overlap, embedder=Embedder(cache_path=None)
    )
    cold.build()
    sample = queries[:300]
    cold.search_batch(sample[:5], 10, mode="hybrid")
    for mode in ("bm25", "vector", "hybrid"):
        t0 = time.perf_counter()
        cold.search_batch(sample, 10, mode=mode)
        print(
            f"search_batch {mode:6s}: "
            f"{(time.perf_counter() - t0) / len(sample) * 1000:.2f} ms/query"
        )
    t0 = time.perf_counter()
    for q in sample[:100]:
        cold.search(q, 10, mode="hybrid")
    print(f"search (one at a time) hybrid: {(time.perf_counter() - t0) / 100 * 1000:.2f} ms/query")


if __name__ == "__main__":
    main()
