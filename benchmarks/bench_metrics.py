"""Scoring speed: this package's `evaluate` against pytrec_eval, ranx and ir_measures on the same input.

    python benchmarks/bench_metrics.py [--queries 10000] [--depth 100] [--repeats 7] [--cold-repeats 3] [--profile]

Input: 10,000 queries x 100 ranked documents (seeded), graded judgments 0..3 (about 20 judged
documents a query, some of them retrieved). Metrics: ndcg@10 (gain=linear), recall@100, mrr@10,
precision@10, map@100.

Part 1, warm, in this process, sides interleaved. Each side pays for its own conversion from the
same starting point, {qid: [(doc, score), ...]} best first, plus qrels {qid: {doc: grade}}:
- ours: ranked id lists {qid: [doc, ...]} -> MeasurementConfig -> evaluate() -> aggregate means;
- pytrec_eval: the dict-of-dicts run {qid: {doc: score}} -> RelevanceEvaluator -> evaluate()
  -> means; mrr@10 needs recip_rank on the run cut at 10, so a second evaluator on the cut run
  (its time is reported separately too);
- ranx: the dict-of-dicts run -> ranx.Run + ranx.Qrels -> ranx.evaluate (numba, all cores by
  default; also shown with threads=1), after one untimed warm-up call that compiles it;
- ir_measures: the dict-of-dicts run -> ir_measures.calc_aggregate (it delegates ndcg/recall/P/AP
  to pytrec_eval and RR@10 to its own msmarco provider).
Every repeat checks that all per-query numbers agree with ours to 1e-9 (ranx: from run.scores;
ir_measures: iter_calc, once, outside the timing).

Part 2, cold start: for each side a fresh interpreter builds the input, then times the import
of the library and its first call, then --cold-repeats warm calls. ranx compiles its numba
kernels on first use and caches them on disk, so it runs twice: with an empty NUMBA_CACHE_DIR
(a fresh CI machine) and again with that cache filled (a second run on the same machine).
Peers that are not installed print "not installed" rows.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import os
import pstats
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable

METRICS = ("ndcg@10", "recall@100", "mrr@10", "precision@10", "map@100")
TREC = {"ndcg@10": "ndcg_cut_10", "recall@100": "recall_100", "precision@10": "P_10", "map@100": "map_cut_100"}

Ranked = dict[str, list[tuple[str, float]]]
Qrels = dict[str, dict[str, int]]


def make_input(n_queries: int, depth: int, seed: int = 42) -> tuple[Ranked, Qrels]:
    rng = random.Random(seed)
    ranked: Ranked = {}
    qrels: Qrels = {}
    n_docs = 50_000
    for q in range(n_queries):
        qid = f"q{q}"
        docs = [f"doc{i}" for i in rng.sample(range(n_docs), depth)]
        scores = sorted((rng.random() for _ in docs), reverse=True)
        ranked[qid] = list(zip(docs, scores))
        judged = rng.sample(docs, rng.randint(0, 8)) + [f"doc{i}" for i in rng.sample(range(n_docs), rng.randint(1, 15))]
        grades = {d: rng.choice((0, 1, 1, 2, 3)) for d in judged}
        if not any(grades.values()):
            grades[judged[0]] = 1
        qrels[qid] = grades
    return ranked, qrels


def ours(ranked: Ranked, qrels: Qrels) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    from pytest_ragmetrics import MeasurementConfig, evaluate

    run = {qid: [doc for doc, _ in hits] for qid, hits in ranked.items()}
    config = MeasurementConfig(measures=METRICS, gain="linear", id_separator=None)  # type: ignore[arg-type]
    result = evaluate(run, qrels, config)
    return result.aggregate, result.per_query


def theirs_main(ranked: Ranked, qrels: Qrels) -> dict[str, dict[str, float]]:
    import pytrec_eval

    run = {qid: dict(hits) for qid, hits in ranked.items()}
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.100", "P.10", "map_cut.100"})
    return evaluator.evaluate(run)


def theirs_rr(ranked: Ranked, qrels: Qrels) -> dict[str, dict[str, float]]:
    import pytrec_eval

    cut = {qid: dict(hits[:10]) for qid, hits in ranked.items()}  # input is best first, no ties
    return pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(cut)


def theirs(ranked: Ranked, qrels: Qrels) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    main = theirs_main(ranked, qrels)
    rr = theirs_rr(ranked, qrels)
    per_query = {
        qid: {**{name: row[trec] for name, trec in TREC.items()}, "mrr@10": rr[qid]["recip_rank"]}
        for qid, row in main.items()
    }
    aggregate = {name: statistics.fmean(row[name] for row in per_query.values()) for name in METRICS}
    return aggregate, per_query


def ranx_side(ranked: Ranked, qrels: Qrels, threads: int = 0) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """ranx's metric names match ours; its ndcg is Jarvelin's (linear gain), as trec_eval's.
    ``threads=0`` means all cores, as ranx's default; it is passed explicitly because ranx's
    ``set_num_threads`` sticks for later calls."""
    import ranx

    run = ranx.Run({qid: dict(hits) for qid, hits in ranked.items()})
    means = ranx.evaluate(ranx.Qrels(qrels), run, list(METRICS), threads=threads or (os.cpu_count() or 1))
    per_query = {qid: {m: float(run.scores[m][qid]) for m in METRICS} for qid in ranked}
    return {m: float(v) for m, v in means.items()}, per_query  # type: ignore[union-attr]


def _irm_measures() -> dict[Any, str]:
    from ir_measures import AP, RR, P, R, nDCG

    return {nDCG @ 10: "ndcg@10", R @ 100: "recall@100", RR @ 10: "mrr@10", P @ 10: "precision@10", AP @ 100: "map@100"}


def irm_side(ranked: Ranked, qrels: Qrels) -> dict[str, float]:
    import ir_measures

    names = _irm_measures()
    run = {qid: dict(hits) for qid, hits in ranked.items()}
    return {names[m]: v for m, v in ir_measures.calc_aggregate(list(names), qrels, run).items()}


def irm_per_query(ranked: Ranked, qrels: Qrels) -> dict[str, dict[str, float]]:
    import ir_measures

    names = _irm_measures()
    run = {qid: dict(hits) for qid, hits in ranked.items()}
    out: dict[str, dict[str, float]] = {}
    for row in ir_measures.iter_calc(list(names), qrels, run):
        out.setdefault(row.query_id, {})[names[row.measure]] = row.value
    return out


SIDES: dict[str, tuple[str, Callable[..., Any]]] = {
    # side -> (module whose import is timed cold, call)
    "ours": ("pytest_ragmetrics", ours),
    "pytrec_eval": ("pytrec_eval", theirs),
    "ranx": ("ranx", ranx_side),
    "ir_measures": ("ir_measures", irm_side),
}


def installed(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def timed(fn: Callable[[], object]) -> tuple[float, object]:
    gc.collect()
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def check(a: dict[str, dict[str, float]], b: dict[str, dict[str, float]], who: str = "pytrec_eval") -> float:
    assert a.keys() == b.keys(), f"{who}: different query sets"
    worst = max(abs(a[q][m] - b[q][m]) for q in a for m in METRICS)
    assert worst <= 1e-9, f"{who}: results differ by {worst}"
    return worst


def check_means(a: dict[str, float], b: dict[str, float], who: str) -> None:
    worst = max(abs(a[m] - b[m]) for m in METRICS)
    assert worst <= 1e-9, f"{who}: means differ by {worst}"


def child(side: str, queries: int, depth: int, repeats: int) -> int:
    """One fresh interpreter: input first (untimed), then import + first call, then warm calls."""
    ranked, qrels = make_input(queries, depth)
    module, call = SIDES[side]
    gc.collect()
    start = time.perf_counter()
    __import__(module)
    if side == "ours":
        from pytest_ragmetrics import MeasurementConfig, evaluate  # noqa: F401  (the lazy package root loads here)
    imported = time.perf_counter()
    call(ranked, qrels)
    first = time.perf_counter()
    warm = [timed(lambda: call(ranked, qrels))[0] for _ in range(repeats)]
    print(json.dumps({"import": imported - start, "first": first - imported, "warm": warm}))
    return 0


def cold_start(queries: int, depth: int, repeats: int, runs: int) -> list[tuple[str, list[dict[str, Any]] | None]]:
    """Fresh interpreters per side; ranx with an empty, then a filled numba cache."""
    rows: list[tuple[str, list[dict[str, Any]] | None]] = []
    cache = tempfile.mkdtemp(prefix="bench_numba_cache_")
    try:
        plan: list[tuple[str, str, dict[str, str]]] = [
            ("ours", "ours", {}),
            ("pytrec_eval", "pytrec_eval", {}),
            ("ir_measures", "ir_measures", {}),
            ("ranx, numba cache empty", "ranx", {"NUMBA_CACHE_DIR": cache}),
            ("ranx, numba cache filled", "ranx", {"NUMBA_CACHE_DIR": cache}),
        ]
        for label, side, extra in plan:
            if not installed(SIDES[side][0]):
                rows.append((label, None))
                continue
            results = []
            for _ in range(runs):
                if label.endswith("empty"):  # empty it before every run
                    shutil.rmtree(cache)
                    os.mkdir(cache)
                cmd = [sys.executable, __file__, "--child", side, "--queries", str(queries),
                       "--depth", str(depth), "--repeats", str(repeats)]
                out = subprocess.run(cmd, env={**os.environ, **extra}, capture_output=True, text=True, check=True)
                results.append(json.loads(out.stdout.strip().splitlines()[-1]))
            rows.append((label, results))
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--cold-repeats", type=int, default=3, help="fresh interpreters per side in part 2 (0: skip part 2)")
    parser.add_argument("--profile", action="store_true", help="cProfile one run of ours and print the top entries")
    parser.add_argument("--child", choices=list(SIDES), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args.child, args.queries, args.depth, args.repeats)

    import pytrec_eval

    ranked, qrels = make_input(args.queries, args.depth)
    have_ranx, have_irm = installed("ranx"), installed("ir_measures")
    versions = [f"python {sys.version.split()[0]}", f"pytrec_eval {pytrec_eval.__version__}"]
    if have_ranx:
        from importlib.metadata import version

        versions += [f"ranx {version('ranx')}", f"numba {version('numba')}"]
    if have_irm:
        import ir_measures

        versions.append(f"ir_measures {ir_measures.__version__}")
    print(f"{args.queries} queries x {args.depth} docs, {sum(map(len, qrels.values()))} judgments; "
          f"metrics {', '.join(METRICS)}; {', '.join(versions)}; {os.cpu_count()} cores")

    # ---- part 1: warm, in-process
    times: dict[str, list[float]] = {k: [] for k in ("ours", "pytrec_eval", "main", "rr", "ranx", "ranx1", "ir_measures")}
    worst: dict[str, float] = {}
    if have_ranx:
        t_first = timed(lambda: ranx_side(ranked, qrels))[0]
        print(f"(ranx warm-up call in this process, numba cache as found: {t_first:.2f} s)")
    if have_irm:
        agg_ref, pq_ref = ours(ranked, qrels)
        worst["ir_measures"] = check(pq_ref, irm_per_query(ranked, qrels), "ir_measures")
    for _ in range(args.repeats):
        dt, (agg_a, pq_a) = timed(lambda: ours(ranked, qrels))  # type: ignore[misc]
        times["ours"].append(dt)
        dt, (agg_b, pq_b) = timed(lambda: theirs(ranked, qrels))  # type: ignore[misc]
        times["pytrec_eval"].append(dt)
        times["main"].append(timed(lambda: theirs_main(ranked, qrels))[0])
        times["rr"].append(timed(lambda: theirs_rr(ranked, qrels))[0])
        worst["pytrec_eval"] = check(pq_a, pq_b)
        check_means(agg_a, agg_b, "pytrec_eval")
        if have_ranx:
            dt, (agg_c, pq_c) = timed(lambda: ranx_side(ranked, qrels))  # type: ignore[misc]
            times["ranx"].append(dt)
            worst["ranx"] = check(pq_a, pq_c, "ranx")
            check_means(agg_a, agg_c, "ranx")
            dt, (agg_c, pq_c) = timed(lambda: ranx_side(ranked, qrels, threads=1))  # type: ignore[misc]
            times["ranx1"].append(dt)
            check(pq_a, pq_c, "ranx threads=1")
        if have_irm:
            dt, agg_d = timed(lambda: irm_side(ranked, qrels))
            times["ir_measures"].append(dt)
            check_means(agg_a, agg_d, "ir_measures")  # type: ignore[arg-type]

    med = statistics.median
    base = med(times["ours"])
    print("\nPart 1, warm, in-process (median of %d; ratio = ours / side, < 1 means ours is faster)" % args.repeats)
    rows = [("pytest-ragmetrics evaluate", "ours"), ("pytrec_eval, all five metrics", "pytrec_eval"),
            ("  of which the main evaluator", "main"), ("  of which recip_rank on cut run", "rr"),
            (f"ranx, threads={os.cpu_count()} (default: all cores)", "ranx"), ("ranx, threads=1", "ranx1"),
            ("ir_measures calc_aggregate", "ir_measures")]
    for label, key in rows:
        if not times[key]:
            print(f"{label:40s} not installed")
            continue
        t = times[key]
        print(f"{label:40s} median {med(t) * 1000:8.1f} ms  (min {min(t) * 1000:7.1f})  "
              f"ours / this {base / med(t):5.2f}  per query {med(t) / args.queries * 1e6:6.1f} us")
    print("per-query results equal to ours to 1e-9: "
          + ", ".join(f"{k} (largest difference {v:.1e})" for k, v in worst.items()))

    # ---- part 2: cold start, fresh interpreters
    if args.cold_repeats > 0:
        print(f"\nPart 2, cold start: fresh interpreter per run, {args.cold_repeats} runs a side "
              "(median; warm = median of 3 further calls in the same interpreter)")
        print(f"{'side':28s} {'import':>9s} {'first call':>11s} {'import+first':>13s} {'warm call':>10s}  "
              f"{'(import+first) / ours':>21s}")
        cold = cold_start(args.queries, args.depth, 3, args.cold_repeats)
        ours_total = None
        for label, results in cold:
            if results is None:
                print(f"{label:28s} not installed")
                continue
            imp = med(r["import"] for r in results)
            first = med(r["first"] for r in results)
            total = med(r["import"] + r["first"] for r in results)
            warm = med(x for r in results for x in r["warm"])
            ours_total = ours_total or total
            print(f"{label:28s} {imp:8.2f}s {first:10.2f}s {total:12.2f}s {warm:9.2f}s  {total / ours_total:21.1f}")

    if args.profile:
        profiler = cProfile.Profile()
        profiler.runcall(ours, ranked, qrels)
        pstats.Stats(profiler).sort_stats("tottime").print_stats(12)
    return 0


if __name__ == "__main__":
    sys.exit(main())
