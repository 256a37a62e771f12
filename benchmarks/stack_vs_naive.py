"""The reference stack against the hand-written loop (``naive_scifact.py``), end to end on SciFact.

Usage:
    python benchmarks/stack_vs_naive.py [--runs bf16-cold,bf16-warm,naive,int8-cold,torch-cold]
                                        [--limit-docs N] [--limit-queries N] [--out DIR]
                                        [--torch-cache SQLITE]

Every run is a fresh subprocess, so wall time and peak RSS (``ru_maxrss`` of that
child, read with ``os.wait4``) belong to it alone:

- ``naive``: ``naive_scifact.py`` - cold build, then every query one at a time;
- ``bf16-cold``: the stack with ``embed_backend="torch-bf16"`` in an empty
  ``RAGMETRICS_HOME``, then all queries in one ``search_batch``;
- ``int8-cold``: the same with ``onnx-int8`` (the ONNX export and quantisation
  are part of its cold build);
- ``bf16-warm`` / ``int8-warm``: the same command again in the same home (nothing changed);
- ``torch-cold``: the stack with torch float32 in another empty home, the
  reference for nDCG@10 (``torch-cache`` instead copies an existing embedding
  cache into the home: its quality figures are valid, its build time is not);
- ``onnx-cold``: the stack with ONNX float32 (optional).

Both sides chunk 300/60 characters (the naive loop by plain slicing, the stack at
word boundaries, so their chunk counts differ; chunks/s is printed too), fetch 30
per route and fuse with RRF k = 60. The stack ranks unique documents to k = 100
(``unique_docs=True``), the naive loop ranks whatever documents its 60 chunks
cover. Results go to ``DIR/<run>.json`` as each run ends; the table at the end
reads them, so an interrupted series still reports what finished.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
COLLECTION = HERE.parent.parent / "shared" / "collections" / "scifact"
TOP_K, FETCH_K, RRF_K = 100, 30, 60
BACKEND_OF = {
    "bf16-cold": "torch-bf16",
    "bf16-warm": "torch-bf16",
    "int8-cold": "onnx-int8",
    "int8-warm": "onnx-int8",
    "onnx-cold": "onnx",
    "torch-cold": "torch",
}
DEFAULT_RUNS = "bf16-cold,bf16-warm,naive,int8-cold,torch-cold"
COLD_RUNS = ("bf16-cold", "int8-cold", "onnx-cold", "torch-cold")


# ----------------------------------------------------------------------------- child: the stack


def stack_child(args: argparse.Namespace) -> int:
    """Build the stack (cold or warm, as the home dictates), answer every query in one batch, score."""
    t_start = time.perf_counter()
    from naive_scifact import load, score_rankings  # the same reading and scoring as the naive side

    from pytest_ragmetrics.stack import Document, Retriever

    docs, queries, qrels = load(args.collection, args.limit_docs, args.limit_queries)
    corpus: Any = args.collection
    if args.limit_docs is not None:
        corpus = [Document(d["doc_id"], d.get("title", ""), d["text"]) for d in docs]
    r = Retriever(
        corpus,
        chunk_size=300,
        overlap=60,
        mode="hybrid",
        top_k=TOP_K,
        fetch_k=FETCH_K,
        rrf_k=RRF_K,
        unique_docs=True,
        embed_backend=args.backend,
    )
    stats = r.build()
    build_seconds = time.perf_counter() - t_start

    # time the two routes inside search_batch by wrapping them (no change to what runs)
    phases = {"embed_queries": 0.0, "bm25": 0.0}
    embed = r.embedder.embed

    def timed_embed(texts: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return embed(texts)
        finally:
            phases["embed_queries"] += time.perf_counter() - t0

    r.embedder.embed = timed_embed  # type: ignore[method-assign]
    bm25 = r._ensure_bm25()
    bm25_search = bm25.search_batch

    def timed_bm25(texts: Any, n: int) -> Any:
        t0 = time.perf_counter()
        try:
            return bm25_search(texts, n)
        finally:
            phases["bm25"] += time.perf_counter() - t0

    bm25.search_batch = timed_bm25  # type: ignore[method-assign]
    encoded_before = r.embedder.encoded
    qids = list(queries)
    t0 = time.perf_counter()
    results = r.search_batch([queries[q] for q in qids])
    query_seconds = time.perf_counter() - t0
    phases["vector_and_fusion"] = query_seconds - phases["embed_queries"] - phases["bm25"]

    # the naive loop's depth: 30 chunks per route, fused, no refetch (query vectors now cached,
    # so the first pass's encoding time is added to this one's)
    t0 = time.perf_counter()
    shallow = r.search_batch([queries[q] for q in qids], top_k=FETCH_K, fetch_k=FETCH_K, unique_docs=False)
    shallow_seconds = time.perf_counter() - t0 + phases["embed_queries"]

    def scored(rankings: dict[str, list[str]]) -> tuple[dict[str, dict[str, float]], dict[str, float]]:
        return score_rankings(rankings, qrels)

    rankings = {q: list(dict.fromkeys(h.doc_id for h in hits)) for q, hits in zip(qids, results)}
    per_query, mean = scored(rankings)
    shallow_rankings = {q: list(dict.fromkeys(h.doc_id for h in hits)) for q, hits in zip(qids, shallow)}
    _, shallow_mean = scored(shallow_rankings)
    result = {
        "side": f"stack {args.backend}",
        "documents": len(r.documents),
        "chunks": len(r.chunks),
        "queries": len(qids),
        "build_seconds": build_seconds,
        "build_phases": {k: v for k, v in stats.items() if k.endswith("seconds")},
        "encoded": stats["encoded"],
        "vector_index_rebuilt": stats["vector_index_rebuilt"],
        "query_seconds": query_seconds,
        "query_phases": phases,
        "queries_encoded": r.embedder.encoded - encoded_before,
        "metrics": mean,
        "per_query": per_query,
        "rankings": rankings,
        "shallow": {
            "query_seconds": shallow_seconds,
            "metrics": shallow_mean,
            "docs": [len(r) for r in shallow_rankings.values()],
        },
    }
    args.json.write_text(json.dumps(result), encoding="utf-8")
    return 0


# ----------------------------------------------------------------------------- parent


def run_child(cmd: list[str], env: dict[str, str], log: Path) -> tuple[float, float, int]:
    """(wall seconds, peak RSS in MB, exit code) of one child process."""
    t0 = time.perf_counter()
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=HERE.parent)
        _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - t0, usage.ru_maxrss / 1024, proc.returncode


def copy_cache(source: Path, home: Path) -> None:
    """Copy an embedding cache into ``home`` with SQLite's backup API (safe while others write it)."""
    (home / "cache").mkdir(parents=True, exist_ok=True)
    src = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
    dst = sqlite3.connect(home / "cache" / "embeddings.sqlite3")
    with dst:
        src.backup(dst)
    src.close()
    dst.close()


def run_all(args: argparse.Namespace) -> None:
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="stack-vs-naive-"))
    homes = {backend: scratch / f"home-{backend}" for backend in BACKEND_OF.values()}
    limits: list[str] = []
    if args.limit_docs is not None:
        limits += ["--limit-docs", str(args.limit_docs)]
    if args.limit_queries is not None:
        limits += ["--limit-queries", str(args.limit_queries)]
    base_env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    base_env = {k: v for k, v in base_env.items() if not k.startswith("RAGMETRICS_")}
    try:
        for run in args.runs:
            env = dict(base_env)
            result_file = out / f"{run}.json"
            if run == "naive":
                tmp = scratch / "naive-tmp"
                tmp.mkdir(exist_ok=True)
                env["TMPDIR"] = str(tmp)  # its chroma directory
                cmd = [sys.executable, str(HERE / "naive_scifact.py"), "--collection", str(args.collection),
                       "--json", str(result_file), *limits]
            elif run in BACKEND_OF:
                backend = BACKEND_OF[run]
                home = homes[backend]
                if run.endswith("cold"):
                    shutil.rmtree(home, ignore_errors=True)
                    if backend == "torch" and args.torch_cache:
                        copy_cache(args.torch_cache, home)
                env["RAGMETRICS_HOME"] = str(home)
                env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH")]))
                cmd = [sys.executable, str(HERE / "stack_vs_naive.py"), "--child", "--backend", backend,
                       "--collection", str(args.collection), "--json", str(result_file), *limits]
            else:
                raise SystemExit(f"unknown run {run!r}: expected naive, {', '.join(BACKEND_OF)}")
            load_before = os.getloadavg()
            print(f"[{time.strftime('%H:%M:%S')}] {run}: load {load_before[0]:.2f}", flush=True)
            wall, rss, code = run_child(cmd, env, out / f"{run}.log")
            if code != 0:
                print(f"  {run} failed (exit {code}); see {out / f'{run}.log'}", flush=True)
                continue
            data = json.loads(result_file.read_text())
            data.update(wall_seconds=wall, peak_rss_mb=rss, load_before=load_before, load_after=os.getloadavg(),
                        torch_cache_copied=bool(run == "torch-cold" and args.torch_cache))
            result_file.write_text(json.dumps(data))
            print(f"  wall {wall:.1f} s, build {data['build_seconds']:.1f} s, "
                  f"query {1000 * data['query_seconds'] / max(data['queries'], 1):.2f} ms/q, "
                  f"peak RSS {rss:.0f} MB, nDCG@10 {data['metrics']['ndcg@10']:.4f}", flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


# ----------------------------------------------------------------------------- the table


def _docs(data: dict[str, Any]) -> tuple[int, float, int]:
    counts = [len(r) for r in data["rankings"].values()]
    return min(counts), statistics.median(counts), max(counts)


def report(out: Path) -> str:
    """Markdown tables of figures and ratios from whatever runs finished."""
    runs = {p.stem: json.loads(p.read_text()) for p in sorted(out.glob("*.json"))}
    runs = {k: v for k, v in runs.items() if "wall_seconds" in v}
    if not runs:
        return "no finished runs"
    order = [r for r in ("naive", *BACKEND_OF) if r in runs]
    lines = ["| run | chunks | build s | chunks/s (cold) | query ms/q | wall s | peak RSS MB | "
             "nDCG@10 | recall@100 | docs per ranking min/median/max | rankings < 100 docs | load before→after |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name in order:
        d = runs[name]
        lo, med, hi = _docs(d)
        short = sum(1 for r in d["rankings"].values() if len(r) < TOP_K)
        rate = d["chunks"] / d["build_seconds"] if name.endswith("cold") else float("nan")
        note = " (cache copied: build not cold)" if d.get("torch_cache_copied") else ""
        lines.append(
            f"| {name}{note} | {d['chunks']:,} | {d['build_seconds']:.1f} | {rate:.1f} | "
            f"{1000 * d['query_seconds'] / d['queries']:.2f} | {d['wall_seconds']:.1f} | {d['peak_rss_mb']:.0f} | "
            f"{d['metrics']['ndcg@10']:.4f} | {d['metrics']['recall@100']:.4f} | {lo}/{med:g}/{hi} | {short} | "
            f"{d['load_before'][0]:.2f}→{d['load_after'][0]:.2f} |"
        )
    shallow = [(n, runs[n]["shallow"]) for n in order if "shallow" in runs[n]]
    if shallow:
        lines += ["", "At the naive loop's depth (top_k 30, fetch_k 30 chunks per route, no unique-docs "
                  "refetch; the first pass's query-encoding time added):", "",
                  "| run | query ms/q | nDCG@10 | recall@100 | docs per ranking min/median/max |", "|---|---|---|---|---|"]
        for name, sh in shallow:
            docs = sorted(sh["docs"])
            lines.append(f"| {name} | {1000 * sh['query_seconds'] / len(docs):.2f} | {sh['metrics']['ndcg@10']:.4f} | "
                         f"{sh['metrics']['recall@100']:.4f} | {docs[0]}/{statistics.median(docs):g}/{docs[-1]} |")
    lines.append("")
    lines.append("| ratio | value | target | met |")
    lines.append("|---|---|---|---|")

    def add(label: str, value: float, target: str, ok: bool, fmt: str = "{:.3g}") -> None:
        lines.append(f"| {label} | {fmt.format(value)} | {target} | {'yes' if ok else 'no'} |")

    naive, torch = runs.get("naive"), runs.get("torch-cold")
    for cold_name in [n for n in COLD_RUNS if n in runs]:
        cold, backend = runs[cold_name], BACKEND_OF[cold_name]
        warm = runs.get(cold_name.replace("-cold", "-warm"))
        if naive:
            nq, cq = naive["query_seconds"] / naive["queries"], cold["query_seconds"] / cold["queries"]
            add(f"hybrid query time per query, stack {backend} filling k=100 distinct docs / naive", cq / nq,
                "≤ 0.05 (1/20)", cq / nq <= 0.05)
            if "shallow" in cold:
                sq = cold["shallow"]["query_seconds"] / cold["queries"]
                add(f"hybrid query time at the naive depth (30 chunks/route, no refetch), stack {backend} / naive",
                    sq / nq, "≤ 0.05 (1/20)", sq / nq <= 0.05)
            if not cold.get("torch_cache_copied"):
                speedup = naive["build_seconds"] / cold["build_seconds"]
                add(f"cold build, naive / stack {backend} (wall of the build)", speedup, "≥ 2", speedup >= 2)
                rate = (cold["chunks"] / cold["build_seconds"]) / (naive["chunks"] / naive["build_seconds"])
                add(f"cold build throughput, stack {backend} / naive (chunks/s)", rate, "≥ 2 (equal chunking)",
                    rate >= 2)
            add(f"peak RSS, stack {backend} cold / naive", cold["peak_rss_mb"] / naive["peak_rss_mb"], "≤ 1",
                cold["peak_rss_mb"] <= naive["peak_rss_mb"])
        if warm:
            add(f"warm / cold run, stack {backend} (process wall)", warm["wall_seconds"] / cold["wall_seconds"],
                "≤ 0.10", warm["wall_seconds"] / cold["wall_seconds"] <= 0.10)
            add(f"warm / cold build, stack {backend}", warm["build_seconds"] / cold["build_seconds"], "≤ 0.10",
                warm["build_seconds"] / cold["build_seconds"] <= 0.10)
            if naive:
                add(f"peak RSS, stack {backend} warm / naive", warm["peak_rss_mb"] / naive["peak_rss_mb"], "≤ 1",
                    warm["peak_rss_mb"] <= naive["peak_rss_mb"])
        if torch and cold is not torch:
            delta = cold["metrics"]["ndcg@10"] - torch["metrics"]["ndcg@10"]
            add(f"nDCG@10, stack {backend} − stack torch float32", delta, "|Δ| ≤ 0.005", abs(delta) <= 0.005,
                "{:+.4f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--collection", type=Path, default=COLLECTION)
    parser.add_argument("--runs", default=DEFAULT_RUNS, help=f"comma-separated, in order (default: {DEFAULT_RUNS})")
    parser.add_argument("--limit-docs", type=int, default=None, help="development slices only")
    parser.add_argument("--limit-queries", type=int, default=None, help="development slices only")
    parser.add_argument("--out", type=Path, default=Path("/tmp/stack_vs_naive"), help="result folder")
    parser.add_argument("--torch-cache", type=Path, default=None,
                        help="copy this embeddings.sqlite3 into the torch run's home (quality only)")
    parser.add_argument("--report-only", action="store_true", help="print the table from --out and stop")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--backend", default="onnx-int8", help=argparse.SUPPRESS)
    parser.add_argument("--json", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return stack_child(args)
    args.runs = [r.strip() for r in args.runs.split(",") if r.strip()]
    if not args.report_only:
        run_all(args)
    print(report(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
