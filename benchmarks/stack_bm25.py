"""BM25 backends compared: ranking quality, agreement and speed on the shared collections.

Usage: python benchmarks/stack_bm25.py [scifact|cmrc2018|nfcorpus|cranfield ...]

For each collection, both backends index the same tokens (whole documents,
title + text, and 300/60 chunks) and are scored with nDCG@10 (linear gain) and
Recall@100 at document level (chunk ids mapped to documents, first occurrence
kept). Agreement is the mean overlap of the two top-10 lists. The scorer here is
a few lines on purpose: this script checks the stack, not the metrics module.
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

from pytest_ragmetrics.stack.bm25 import BACKENDS, BM25Index, make_tokenizer
from pytest_ragmetrics.chunking import chunk_documents
from pytest_ragmetrics.corpus import load_corpus

COLLECTIONS = Path(__file__).resolve().parents[1].parent / "shared" / "collections"


def load_judged(folder: Path) -> tuple[dict[str, str], dict[str, dict[str, int]]]:
    qrels: dict[str, dict[str, int]] = {}
    lines = (folder / "qrels.tsv").read_text(encoding="utf-8").splitlines()[1:]
    for line in lines:
        qid, doc, rel = line.split("\t")
        qrels.setdefault(qid, {})[doc] = int(rel)
    queries = {}
    for line in (folder / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        if rec["qid"] in qrels and any(v > 0 for v in qrels[rec["qid"]].values()):
            queries[rec["qid"]] = rec["query"]
    return queries, qrels


def doc_ranking(hits: list[tuple[int, float]], doc_of: list[str]) -> list[str]:
    seen: dict[str, None] = {}
    for idx, _ in hits:
        seen.setdefault(doc_of[idx], None)
    return list(seen)


def ndcg(ranked: list[str], rels: dict[str, int], k: int) -> float:
    dcg = sum(
        rels.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:k]) if rels.get(d, 0) > 0
    )
    ideal = sorted((g for g in rels.values() if g > 0), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def recall(ranked: list[str], rels: dict[str, int], k: int) -> float:
    rel = {d for d, g in rels.items() if g > 0}
    return len(rel & set(ranked[:k])) / len(rel)


def run(name: str, k1: float, b: float, max_queries: int = 1000) -> None:
    folder = COLLECTIONS / name
    docs = load_corpus(folder)
    queries, qrels = load_judged(folder)
    qids = sorted(queries)[:max_queries]
    texts_q = [queries[q] for q in qids]
    for label, size in (("whole docs", None), ("chunks 300/60", 300)):
        chunks = chunk_documents(docs, chunk_size=size, overlap=60)
        texts = [c.text for c in chunks]
        doc_of = [c.doc_id for c in chunks]
        tok = make_tokenizer("auto", texts)
        fetch = 1000 if size else 100
        tops: dict[str, list[list[int]]] = {}
        for backend in BACKENDS:
            t0 = time.perf_counter()
            index = BM25Index(texts, tok, backend=backend, k1=k1, b=b)
            build = time.perf_counter() - t0
            t0 = time.perf_counter()
            results = index.search_batch(texts_q, fetch)
            per_query = (time.perf_counter() - t0) / len(qids) * 1000
            rankings = [doc_ranking(r, doc_of) for r in results]
            nd = sum(ndcg(r, qrels[q], 10) for r, q in zip(rankings, qids)) / len(qids)
            rc = sum(recall(r, qrels[q], 100) for r, q in zip(rankings, qids)) / len(qids)
            tops[backend] = [[i for i, _ in r[:10]] for r in results]
            print(
                f"{name:9s} {label:14s} k1={k1} b={b} {backend:9s} n={len(qids)} "
                f"items={len(texts)} nDCG@10={nd:.4f} R@100={rc:.4f} "
                f"build={build:.1f}s query={per_query:.2f}ms",
                flush=True,
            )
        a, b_ = tops["bm25s"], tops["rank_bm25"]
        overlap = sum(len(set(x) & set(y)) / max(1, len(x)) for x, y in zip(a, b_)) / len(a)
        top1 = sum(1 for x, y in zip(a, b_) if x[:1] == y[:1]) / len(a)
        print(
            f"{name:9s} {label:14s} agreement: top-10 overlap {overlap:.3f}, same top-1 {top1:.3f}"
        )


if __name__ == "__main__":
    names = sys.argv[1:] or ["scifact", "cmrc2018"]
    for nm in names:
        for k1, b in ((1.5, 0.75), (0.9, 0.4)):
            run(nm, k1, b, max_queries=500)
