"""What checking the stored indexes against their manifests costs, against a warm open + search.

Usage: python benchmarks/stack_manifest.py [--rounds 7] [--home DIR] [--queries 300]

1. Hash throughput on a 64 MiB buffer: SHA-256 (what the manifests use),
   BLAKE2b, and xxh3-128 when the ``xxhash`` package happens to be installed
   (the stack does not depend on it).
2. Prepares, once, in ``--home`` (kept between runs):
   - a vector index of SciFact's size built through ``VectorIndex`` without the
     encoder: 31,592 random unit vectors of 384 floats (SciFact's 300/60 chunks
     under all-MiniLM-L6-v2), the stack's HNSW settings. Embedding SciFact itself
     takes minutes of CPU; the files chromadb writes depend on the count and the
     dimension, not on the values;
   - SciFact's real stored BM25 index (its 300/60 chunks, tokenised), when the
     collection is in ``../shared/collections/scifact``.
3. ``--rounds`` fresh processes, each doing what a warm run's retriever does
   after its imports: open the vector index (check the manifest, open chromadb,
   record the database's new hash), reuse the collection (its probe query),
   search ``--queries`` random vectors for 100 neighbours each; load the stored
   BM25 index (check, map) and search SciFact's queries for 100 chunks each.
   Each process times the manifest work (``manifest_seconds`` of both indexes)
   and the whole open + search, in the same process; the script prints the
   medians and the median of the per-process ratios.

The encoder is not loaded and no query is embedded, so the open + search here is
a small part of a warm ``pytest --rag-eval`` on SciFact, and the ratio an upper
bound on the check's share of such a run.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

COLLECTIONS = Path(__file__).resolve().parents[1].parent / "shared" / "collections"
N_VECTORS, DIM = 31_592, 384
NAME = "ragmetrics-bench-manifest"
SETTINGS = {"model": "random-384", "chunk_size": 300, "overlap": 60}


def cpu() -> str:
    model = platform.processor() or "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} logical CPUs"


def hash_speeds() -> dict[str, float]:
    data = os.urandom(64 << 20)
    hashers = {"sha256": lambda: hashlib.sha256(data).digest(), "blake2b": lambda: hashlib.blake2b(data).digest()}
    try:
        import xxhash

        hashers["xxh3_128 (xxhash)"] = lambda: xxhash.xxh3_128(data).digest()
    except ImportError:
        pass
    speeds = {}
    for name, run in hashers.items():
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            run()
            times.append(time.perf_counter() - t0)
        speeds[name] = 64 / 1024 / statistics.median(times)  # GB/s (GiB)
    return speeds


def vectors(n: int, seed: int) -> np.ndarray:
    rows = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def prepare(home: Path) -> None:
    from pytest_ragmetrics.stack.index import VectorIndex

    rows = vectors(N_VECTORS, 0)
    ids = [f"c{i}" for i in range(N_VECTORS)]
    position = {cid: i for i, cid in enumerate(ids)}
    t0 = time.perf_counter()
    index = VectorIndex(NAME, SETTINGS, data_dir=home / "vectors")
    built = index.sync(ids, ids, "synthetic-scifact", lambda texts: rows[[position[t] for t in texts]])
    print(f"vector index {'built' if built else 'present'} in {time.perf_counter() - t0:.1f} s", flush=True)
    scifact = COLLECTIONS / "scifact"
    if scifact.is_dir():
        texts, _ = scifact_chunks()
        from pytest_ragmetrics.stack.bm25 import make_tokenizer, stored_bm25

        t0 = time.perf_counter()
        stored_bm25(home / "bm25", corpus_key(texts), texts, make_tokenizer("auto", texts))
        print(f"SciFact BM25 store ready in {time.perf_counter() - t0:.1f} s", flush=True)


def scifact_chunks() -> tuple[list[str], list[str]]:
    from pytest_ragmetrics.chunking import chunk_documents
    from pytest_ragmetrics.corpus import load_corpus

    folder = COLLECTIONS / "scifact"
    chunks = chunk_documents(load_corpus(folder), 300, 60, with_title=True)
    queries = [json.loads(line)["query"] for line in (folder / "queries.jsonl").read_text().splitlines() if line]
    return [c.text for c in chunks], queries


def corpus_key(texts: list[str]) -> str:
    return hashlib.sha256("\0".join(texts).encode()).hexdigest()


def child(home: Path, n_queries: int) -> None:
    """One warm process: open + search both indexes, timing the manifest work inside."""
    from pytest_ragmetrics.stack.bm25 import make_tokenizer, stored_bm25
    from pytest_ragmetrics.stack.index import VectorIndex

    ids = [f"c{i}" for i in range(N_VECTORS)]
    queries_v = vectors(n_queries, 1)
    have_bm25 = (COLLECTIONS / "scifact").is_dir()
    texts, queries = scifact_chunks() if have_bm25 else ([], [])
    tokenizer = make_tokenizer("auto", texts) if have_bm25 else None
    key = corpus_key(texts) if have_bm25 else ""

    t0 = time.perf_counter()
    index = VectorIndex(NAME, SETTINGS, data_dir=home / "vectors")
    if index.sync(ids, ids, "synthetic-scifact", lambda _: (_ for _ in ()).throw(SystemExit("rebuilt: not warm"))):
        raise SystemExit("the vector index was rebuilt: the home is not warm")
    index.query(queries_v, 100)
    t1 = time.perf_counter()
    bm25_check = 0.0
    if have_bm25:
        bm25 = stored_bm25(home / "bm25", key, texts, tokenizer)
        if bm25.repaired:
            raise SystemExit(f"the BM25 store was repaired: {bm25.repaired}")
        bm25.search_batch(queries[:n_queries], 100)
        bm25_check = bm25.manifest_seconds
    t2 = time.perf_counter()
    check = index.manifest_seconds + bm25_check
    print(json.dumps({"check": check, "vector_check": index.manifest_seconds, "bm25_check": bm25_check,
                      "vector_open_search": t1 - t0, "bm25_open_search": t2 - t1, "total": t2 - t0,
                      "ratio": check / (t2 - t0)}))


def folder_bytes(folder: Path, pattern: str = "**/*") -> int:
    return sum(p.stat().st_size for p in folder.glob(pattern) if p.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--home", default="/tmp/ragmetrics-bench-manifest")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    home = Path(args.home)
    if args.child:
        child(home, args.queries)
        return

    import chromadb

    print(f"CPU: {cpu()}; Python {platform.python_version()}, chromadb {chromadb.__version__}", flush=True)
    for name, speed in hash_speeds().items():
        print(f"  {name:>18}: {speed:.2f} GiB/s", flush=True)
    prepare(home)
    vec = home / "vectors"
    hnsw = folder_bytes(vec, "*/*.bin") + folder_bytes(vec, "*/*.pickle")
    sqlite = (vec / "chroma.sqlite3").stat().st_size
    bm25 = folder_bytes(home / "bm25", "bm25s-*/*")
    print(f"checked per open: HNSW files {hnsw / 1e6:.1f} MB, chroma.sqlite3 {sqlite / 1e6:.1f} MB "
          f"(hashed twice: before and after chromadb opens it), BM25 store {bm25 / 1e6:.1f} MB", flush=True)

    rounds = []
    for i in range(args.rounds):
        out = subprocess.run([sys.executable, __file__, "--child", "--home", str(home), "--queries", str(args.queries)],
                             capture_output=True, text=True, check=False)
        if out.returncode != 0:
            sys.exit(out.stderr[-3000:])
        rounds.append(json.loads(out.stdout.strip().splitlines()[-1]))
        r = rounds[-1]
        print(f"  round {i + 1}: check {r['check'] * 1000:.0f} ms (vectors {r['vector_check'] * 1000:.0f}, "
              f"bm25 {r['bm25_check'] * 1000:.0f}) of {r['total']:.2f} s open + search = {r['ratio']:.1%}", flush=True)

    def med(key: str) -> float:
        return statistics.median(r[key] for r in rounds)

    print(f"median of {len(rounds)}: check {med('check') * 1000:.0f} ms (vector index {med('vector_check') * 1000:.0f}, "
          f"BM25 {med('bm25_check') * 1000:.0f}); warm open + search {med('total'):.2f} s (vectors "
          f"{med('vector_open_search'):.2f}, BM25 {med('bm25_open_search'):.2f}); check / open + search "
          f"{med('ratio'):.1%} (median of per-process ratios)")


if __name__ == "__main__":
    main()
