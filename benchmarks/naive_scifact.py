"""The retrieval loop a user writes by hand today (seed 000 style), on SciFact.

Usage:
    python benchmarks/naive_scifact.py [--collection DIR] [--limit-docs N] [--limit-queries N]
                                       [--json OUT]

What it does, deliberately without the stack's help:
- chunks ``title + " " + text`` into 300-character windows every 240 characters
  (60 overlap) by plain slicing: 33,670 chunks on SciFact;
- BM25: ``rank_bm25.BM25Okapi`` over every chunk, tokenised by lowercase + ``\\w+``;
- vectors: all-MiniLM-L6-v2 (sentence-transformers, torch) encodes every chunk
  into a chromadb collection (a persistent client in a temporary directory,
  cosine space, chroma's default HNSW settings);
- each query is embedded alone and searched alone: 30 chunks per route, reciprocal
  rank fusion (k = 60) over chunk ids, then chunks mapped to documents (first
  occurrence kept) - so the "top 100" holds however many documents 60 chunks cover;
- nDCG@10 and recall@100 with pytest_ragmetrics' own metric kernels.

It prints a summary and, with ``--json``, writes timings (build and per-query,
split by phase) and per-query rankings for ``stack_vs_naive.py``. This script is
the baseline the stack is measured against: it is not meant to be good.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

COLLECTION = Path(__file__).resolve().parents[1].parent / "shared" / "collections" / "scifact"
CHUNK, OVERLAP, FETCH, RRF_K = 300, 60, 30, 60
_WORD = re.compile(r"\w+")


def tokenize(text: str) -> list[str]:
    """What a hand-written loop uses: lowercase word characters, no stop words, no stemming."""
    return _WORD.findall(text.lower())


def load(collection: Path, limit_docs: int | None, limit_queries: int | None) -> tuple[
    list[dict[str, str]], dict[str, str], dict[str, dict[str, int]]
]:
    """Documents, judged queries and qrels, read the way a script would (no validation layer)."""
    docs = []
    with open(collection / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                docs.append(json.loads(line))
    qrels: dict[str, dict[str, int]] = {}
    for line in (collection / "qrels.tsv").read_text(encoding="utf-8").splitlines()[1:]:
        qid, doc, rel = line.split("\t")
        qrels.setdefault(qid, {})[doc] = int(rel)
    queries = {}
    for line in (collection / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        if rec["qid"] in qrels:
            queries[rec["qid"]] = rec["query"]
    if limit_docs is not None:  # keep the judged documents of the kept queries, then fill up
        qids = sorted(queries)[:limit_queries] if limit_queries else sorted(queries)
        wanted = {d for q in qids for d in qrels[q]}
        keep = [d for d in docs if d["doc_id"] in wanted]
        keep += [d for d in docs if d["doc_id"] not in wanted][: max(limit_docs - len(keep), 0)]
        docs = keep
    if limit_queries is not None:
        queries = {q: queries[q] for q in sorted(queries)[:limit_queries]}
    return docs, queries, qrels



def score_rankings(
    rankings: dict[str, list[str]], qrels: dict[str, dict[str, int]]
) -> tuple[dict[str, dict[str, float]], dict[str, float]]:
    """nDCG@10 and recall@100 per query and on average, through the package's own ``evaluate``
    (both sides of the comparison are scored by this one function)."""
    from pytest_ragmetrics import MeasurementConfig, evaluate

    result = evaluate(rankings, {q: qrels[q] for q in rankings}, MeasurementConfig(("ndcg@10", "recall@100")),
                      missing="skip")
    return result.per_query, result.aggregate

def chunk(docs: list[dict[str, str]]) -> tuple[list[str], list[str], list[str]]:
    """(chunk ids, chunk texts, doc id of each chunk): fixed windows by slicing."""
    ids, texts, doc_of = [], [], []
    for d in docs:
        text = f"{d.get('title', '')} {d['text']}"
        for n, start in enumerate(range(0, max(len(text) - OVERLAP, 1), CHUNK - OVERLAP)):
            ids.append(f"{d['doc_id']}#{n}")
            texts.append(text[start : start + CHUNK])
            doc_of.append(d["doc_id"])
    return ids, texts, doc_of


def rrf(rankings: list[list[str]], k: int = RRF_K) -> list[str]:
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
    return sorted(scores, key=lambda i: -scores[i])


def run(collection: Path, limit_docs: int | None, limit_queries: int | None) -> dict[str, Any]:
    """Build cold, answer every query one at a time, score; returns timings and rankings."""
    import chromadb
    import numpy as np
    from rank_bm25 import BM25Okapi
    from sentence_transformers import SentenceTransformer

    from pytest_ragmetrics.stack.embed import default_model_path

    t_start = time.perf_counter()
    docs, queries, qrels = load(collection, limit_docs, limit_queries)
    ids, texts, doc_of = chunk(docs)
    t = {"load_chunk": time.perf_counter() - t_start}

    t0 = time.perf_counter()
    bm25 = BM25Okapi([tokenize(x) for x in texts])
    t["bm25_build"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    model = SentenceTransformer(default_model_path(), device="cpu")
    t["model_load"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    vectors = model.encode(texts, normalize_embeddings=True, show_progress_bar=False)
    t["encode"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    store = tempfile.mkdtemp(prefix="naive-chroma-")
    client = chromadb.PersistentClient(path=store)
    col = client.create_collection("naive", metadata={"hnsw:space": "cosine"})
    step = 5000  # under chroma's max batch size
    for i in range(0, len(ids), step):
        col.add(ids=ids[i : i + step], embeddings=vectors[i : i + step].tolist(),
                documents=texts[i : i + step])
    t["chroma_add"] = time.perf_counter() - t0
    build_seconds = time.perf_counter() - t_start
    position = {cid: i for i, cid in enumerate(ids)}

    phases = {"encode": 0.0, "chroma": 0.0, "bm25": 0.0, "fuse": 0.0}
    rankings: dict[str, list[str]] = {}
    t_q = time.perf_counter()
    for qid, text in queries.items():
        t0 = time.perf_counter()
        qvec = model.encode(text, normalize_embeddings=True, show_progress_bar=False)
        t1 = time.perf_counter()
        vec_ids = col.query(query_embeddings=[qvec.tolist()], n_results=FETCH)["ids"][0]
        t2 = time.perf_counter()
        scores = bm25.get_scores(tokenize(text))
        bm25_ids = [ids[i] for i in np.argsort(-scores)[:FETCH]]
        t3 = time.perf_counter()
        fused = rrf([bm25_ids, vec_ids])
        rankings[qid] = list(dict.fromkeys(doc_of[position[c]] for c in fused))
        t4 = time.perf_counter()
        for name, dt in zip(phases, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
            phases[name] += dt
    query_seconds = time.perf_counter() - t_q

    per_query, mean = score_rankings(rankings, qrels)
    return {
        "side": "naive",
        "documents": len(docs),
        "chunks": len(ids),
        "queries": len(queries),
        "build_seconds": build_seconds,
        "build_phases": t,
        "query_seconds": query_seconds,
        "query_phases": phases,
        "metrics": mean,
        "per_query": per_query,
        "rankings": rankings,
        "chroma_dir": store,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--collection", type=Path, default=COLLECTION)
    parser.add_argument("--limit-docs", type=int, default=None, help="development slices only")
    parser.add_argument("--limit-queries", type=int, default=None, help="development slices only")
    parser.add_argument("--json", type=Path, default=None, help="write the full result here")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    result = run(args.collection, args.limit_docs, args.limit_queries)
    if args.json:
        args.json.write_text(json.dumps(result), encoding="utf-8")
    shutil.rmtree(result["chroma_dir"], ignore_errors=True)
    counts = sorted(len(r) for r in result["rankings"].values())
    nq = max(result["queries"], 1)
    print(f"naive: {result['documents']:,} documents, {result['chunks']:,} chunks, {result['queries']} queries")
    print(f"  build {result['build_seconds']:.1f} s: " + ", ".join(f"{k} {v:.1f} s" for k, v in result["build_phases"].items()))
    print(f"  query {1000 * result['query_seconds'] / nq:.1f} ms each: "
          + ", ".join(f"{k} {1000 * v / nq:.1f} ms" for k, v in result["query_phases"].items()))
    print("  " + ", ".join(f"{k} {v:.4f}" for k, v in result["metrics"].items())
          + f"; documents per ranking min {counts[0]} median {counts[len(counts) // 2]} max {counts[-1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
