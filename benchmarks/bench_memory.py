"""Peak memory of scoring 10k, 100k and 1M queries: ours against pytrec_eval, one fresh process per run.

    python benchmarks/bench_memory.py [--sizes 10000,100000,1000000] [--depth 100] [--limit-gb 8]

Same shape as bench_metrics.py: 100 ranked documents a query, graded judgments 0..3 (about 12 a
query), metrics ndcg@10 (linear gain), recall@100, mrr@10, precision@10, map@100. Document ids
come from a corpus of 50,000 ids, so a run refers to shared id strings, as a retriever's output
does (``--fresh-ids`` gives every ranked id its own string, as a file reader does). The input
is built query by query straight into each side's own form:

- ours: ``{qid: [doc, ...]}`` best first (``evaluate`` needs no scores), then ``evaluate``;
- pytrec_eval: ``{qid: {doc: score}}``, a ``RelevanceEvaluator`` for ndcg_cut_10, recall_100,
  P_10 and map_cut_100, and one for recip_rank on the run cut at 10 (for mrr@10).

Each child reports VmRSS after its imports (the interpreter), VmRSS after the input is built,
and VmHWM (peak RSS) after scoring, with the per-query results still held. Per-query bytes =
(peak - interpreter) / queries: flat across sizes means memory grows linearly. Every child runs
under an address-space limit (``--limit-gb``, default 8) so that no run can take the machine;
a run that hits it is reported as such. The parent checks that both sides' means agree to 1e-9.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import time
from typing import Any

METRICS = ("ndcg@10", "recall@100", "mrr@10", "precision@10", "map@100")
TREC = {"ndcg@10": "ndcg_cut_10", "recall@100": "recall_100", "precision@10": "P_10", "map@100": "map_cut_100"}
N_DOCS = 50_000


def status_kb(field: str) -> int:
    """A field of /proc/self/status in kB (VmRSS: now, VmHWM: peak)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def generate(n_queries: int, depth: int, with_scores: bool, fresh_ids: bool = False, seed: int = 42):  # type: ignore[no-untyped-def]
    """Yield (qid, ranked docs, scores or None, judgments) lazily; the same docs and judgments on both
    sides (scores come from a second generator so that they do not shift the first). ``fresh_ids``
    makes a new string object for every ranked id, as a file reader does, instead of sharing the
    corpus's id strings."""
    pool = [f"doc{i}" for i in range(N_DOCS)]
    rng, score_rng = random.Random(seed), random.Random(seed + 1)
    for q in range(n_queries):
        picked = rng.sample(range(N_DOCS), depth)  # the same draws as sampling the pool itself
        docs = [f"doc{i}" for i in picked] if fresh_ids else [pool[i] for i in picked]
        judged = rng.sample(docs, rng.randint(0, 8)) + rng.sample(pool, rng.randint(1, 15))
        grades = {d: rng.choice((0, 1, 1, 2, 3)) for d in judged}
        if not any(grades.values()):
            grades[judged[0]] = 1
        scores = sorted((score_rng.random() for _ in range(depth)), reverse=True) if with_scores else None
        yield f"q{q}", docs, scores, grades


def child(side: str, n_queries: int, depth: int, fresh_ids: bool) -> dict[str, Any]:
    if side == "ours":
        from pytest_ragmetrics import MeasurementConfig, evaluate
    else:
        import pytrec_eval
    rss_start = status_kb("VmRSS")
    t0 = time.perf_counter()
    qrels: dict[str, dict[str, int]] = {}
    if side == "ours":
        run_ids: dict[str, list[str]] = {}
        for qid, docs, _, grades in generate(n_queries, depth, with_scores=False, fresh_ids=fresh_ids):
            run_ids[qid] = docs
            qrels[qid] = grades
        rss_input = status_kb("VmRSS")
        t1 = time.perf_counter()
        config = MeasurementConfig(measures=METRICS, gain="linear", id_separator=None)  # type: ignore[arg-type]
        result = evaluate(run_ids, qrels, config)
        means = result.aggregate
        n_scored = result.n
    else:
        run: dict[str, dict[str, float]] = {}
        for qid, docs, scores, grades in generate(n_queries, depth, with_scores=True, fresh_ids=fresh_ids):
            run[qid] = dict(zip(docs, scores))
            qrels[qid] = grades
        rss_input = status_kb("VmRSS")
        t1 = time.perf_counter()
        main = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.100", "P.10", "map_cut.100"}).evaluate(run)
        cut = {qid: dict(list(d.items())[:10]) for qid, d in run.items()}  # built best first
        rr = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(cut)
        means = {m: sum(row[t] for row in main.values()) / len(main) for m, t in TREC.items()}
        means["mrr@10"] = sum(row["recip_rank"] for row in rr.values()) / len(rr)
        n_scored = len(main)
    t2 = time.perf_counter()
    return {"side": side, "queries": n_queries, "scored": n_scored, "rss_start_kb": rss_start,
            "rss_input_kb": rss_input, "peak_kb": status_kb("VmHWM"), "build_s": t1 - t0,
            "score_s": t2 - t1, "means": means}


def run_child(side: str, n: int, depth: int, limit_gb: float, fresh_ids: bool) -> dict[str, Any] | str:
    limit = int(limit_gb * 2**30)

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    cmd = [sys.executable, __file__, "--child", side, "--sizes", str(n), "--depth", str(depth)] + (["--fresh-ids"] if fresh_ids else [])
    proc = subprocess.run(cmd, capture_output=True, text=True, preexec_fn=cap)
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["(no message)"])[-1]
        out_of_memory = ("MemoryError", "bad_alloc", "cannot allocate memory")  # Python, C++, the loader
        if any(text in proc.stderr for text in out_of_memory) or proc.returncode < 0:
            return f"over the {limit_gb:g} GB limit ({tail})"
        raise SystemExit(f"{side} at {n} queries failed ({proc.returncode}):\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000,1000000", help="comma-separated query counts")
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--sides", default="ours,pytrec_eval")
    parser.add_argument("--limit-gb", type=float, default=8.0, help="address-space limit of each child")
    parser.add_argument("--fresh-ids", action="store_true",
                        help="a new string object for every ranked id (as read from a file) instead of shared corpus ids")
    parser.add_argument("--child", choices=("ours", "pytrec_eval"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.child:
        print(json.dumps(child(args.child, sizes[0], args.depth, args.fresh_ids)))
        return 0

    ids = "a new string per ranked id" if args.fresh_ids else "shared id strings"
    print(f"{args.depth} ranked docs a query from a {N_DOCS}-id corpus ({ids}); metrics {', '.join(METRICS)}; "
          f"each child limited to {args.limit_gb:g} GB of address space")
    print(f"{'side':12s} {'queries':>9s} {'interpreter':>12s} {'input built':>12s} {'peak RSS':>10s} "
          f"{'bytes/query':>12s} {'input/query':>12s} {'scoring/query':>14s} {'build s':>8s} {'score s':>8s}")
    means: dict[int, dict[str, dict[str, float]]] = {}
    for n in sizes:
        for side in args.sides.split(","):
            res = run_child(side, n, args.depth, args.limit_gb, args.fresh_ids)
            if isinstance(res, str):
                print(f"{side:12s} {n:9d} {res}")
                continue
            start, built, peak = res["rss_start_kb"] * 1024, res["rss_input_kb"] * 1024, res["peak_kb"] * 1024
            print(f"{side:12s} {n:9d} {start / 2**20:10.0f}MB {built / 2**20:10.0f}MB {peak / 2**20:8.0f}MB "
                  f"{(peak - start) / n:12.0f} {(built - start) / n:12.0f} {(peak - built) / n:14.0f} "
                  f"{res['build_s']:8.1f} {res['score_s']:8.1f}", flush=True)
            means.setdefault(n, {})[side] = res["means"]
    for n, by_side in means.items():
        if len(by_side) == 2:
            a, b = by_side.values()
            worst = max(abs(a[m] - b[m]) for m in METRICS)
            assert worst <= 1e-9, f"{n} queries: means differ by {worst}"
            print(f"{n} queries: means agree to {worst:.1e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
