"""Write a plain BM25 TREC run over SciFact, for checking `ragmetrics evaluate` against trec_eval.

    python benchmarks/make_scifact_bm25_run.py /tmp/scifact.run
    ragmetrics evaluate --qrels ../shared/collections/scifact/qrels.tsv --run /tmp/scifact.run \
        -m ndcg@10 -m recall@100 --gain linear

BM25 as BEIR's baseline sets it up: Okapi BM25 (k1 = 0.9, b = 0.4, rank_bm25's BM25Okapi) over
title + " " + text, lower-cased word tokens (regex ``\\w+``), no stemming, no stop words. Every
query gets its top ``depth`` documents (default 100) with their BM25 scores. BEIR publishes
nDCG@10 0.665 for BM25 on SciFact (Elasticsearch, with its own analyzer); this simple version
gives 0.649 (recall@100 0.873).
Needs rank-bm25 (the ``stack`` extra); runs in a few seconds.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

DEFAULT_COLLECTION = Path(__file__).resolve().parents[1].parent / "shared" / "collections" / "scifact"
_TOKEN = re.compile(r"\w+")


def tokenize(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def _jsonl(path: Path) -> Iterator[dict[str, str]]:
    with path.open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def bm25_run(collection: Path = DEFAULT_COLLECTION, depth: int = 100, k1: float = 0.9, b: float = 0.4) -> dict[str, list[tuple[str, float]]]:
    """``{qid: [(doc_id, score), ...]}``, best first, for every query of the collection."""
    from rank_bm25 import BM25Okapi

    docs = list(_jsonl(collection / "corpus.jsonl"))
    doc_ids = [d["doc_id"] for d in docs]
    bm25 = BM25Okapi([tokenize(f"{d.get('title', '')} {d['text']}") for d in docs], k1=k1, b=b)
    scores_of = okapi_scorer(bm25)
    run: dict[str, list[tuple[str, float]]] = {}
    for q in _jsonl(collection / "queries.jsonl"):
        scores = scores_of(tokenize(q["query"]))
        top = np.argsort(-scores, kind="stable")[:depth]
        run[q["qid"]] = [(doc_ids[i], float(scores[i])) for i in top]
    return run


def okapi_scorer(bm25: Any) -> Callable[[list[str]], np.ndarray]:
    """``bm25.get_scores`` of a rank_bm25 ``BM25Okapi``, over postings: the same arithmetic, in the
    same order, for the documents that hold each query term; every other document would add
    ``idf * 0.0 = 0.0``, which changes no score. The same numbers, bit for bit, about 20 times
    faster (``get_scores`` builds a list over the whole corpus for every query term)."""
    by_term: dict[str, tuple[list[int], list[int]]] = {}
    for doc, freqs in enumerate(bm25.doc_freqs):
        for term, freq in freqs.items():
            docs, tfs = by_term.setdefault(term, ([], []))
            docs.append(doc)
            tfs.append(freq)
    postings = {term: (np.array(docs), np.array(tfs)) for term, (docs, tfs) in by_term.items()}
    doc_len = np.array(bm25.doc_len)

    def scores(query: list[str]) -> np.ndarray:
        score = np.zeros(bm25.corpus_size)
        for term in query:
            if term in postings:
                docs, tf = postings[term]
                score[docs] += (bm25.idf.get(term) or 0) * (tf * (bm25.k1 + 1) / (
                    tf + bm25.k1 * (1 - bm25.b + bm25.b * doc_len[docs] / bm25.avgdl)))
        return score

    return scores


def write_trec_run(run: dict[str, list[tuple[str, float]]], path: Path, tag: str = "bm25") -> None:
    with path.open("w", encoding="utf-8") as f:
        for qid, hits in run.items():
            for rank, (doc, score) in enumerate(hits, start=1):
                f.write(f"{qid} Q0 {doc} {rank} {score!r} {tag}\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="where to write the TREC run")
    parser.add_argument("--collection", type=Path, default=DEFAULT_COLLECTION, help="folder with corpus.jsonl, queries.jsonl")
    parser.add_argument("--depth", type=int, default=100, help="documents per query (default 100)")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    run = bm25_run(args.collection, args.depth)
    write_trec_run(run, args.out)
    print(f"wrote {sum(map(len, run.values()))} lines for {len(run)} queries to {args.out} "
          f"in {time.perf_counter() - start:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
