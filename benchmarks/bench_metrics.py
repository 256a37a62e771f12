"""Scoring speed: this package's `evaluate` against pytrec_eval on the same in-memory input.

    python benchmarks/bench_metrics.py [--queries 10000] [--depth 100] [--repeats 7] [--profile]

Input: 10,000 queries x 100 ranked documents (seeded), graded judgments 0..3 (about 20 judged
documents a query, some of them retrieved). Metrics: ndcg@10 (gain=linear), recall@100, mrr@10,
precision@10, map@100.

Both sides pay for their own conversion from the same starting point, {qid: [(doc, score), ...]}
best first, plus qrels {qid: {doc: grade}}:
- ours: ranked id lists {qid: [doc, ...]} -> MeasurementConfig -> evaluate() -> aggregate means;
- pytrec_eval: the dict-of-dicts run {qid: {doc: score}} -> RelevanceEvaluator -> evaluate()
  -> means; mrr@10 needs recip_rank on the run cut at 10, so a second evaluator on the cut run
  (its time is reported separately too).
Every repeat checks that all per-query numbers agree to 1e-9. Prints medians and ours/pytrec_eval.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import random
import statistics
import sys
import time
from typing import Callable

import pytrec_eval

from pytest_ragmetrics import MeasurementConfig, evaluate

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
    run = {qid: [doc for doc, _ in hits] for qid, hits in ranked.items()}
    config = MeasurementConfig(measures=METRICS, gain="linear", id_separator=None)  # type: ignore[arg-type]
    result = evaluate(run, qrels, config)
    return result.aggregate, result.per_query


def theirs_main(ranked: Ranked, qrels: Qrels) -> dict[str, dict[str, float]]:
    run = {qid: dict(hits) for qid, hits in ranked.items()}
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.100", "P.10", "map_cut.100"})
    return evaluator.evaluate(run)


def theirs_rr(ranked: Ranked, qrels: Qrels) -> dict[str, dict[str, float]]:
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


def timed(fn: Callable[[], object]) -> tuple[float, object]:
    gc.collect()
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def check(a: dict[str, dict[str, float]], b: dict[str, dict[str, float]]) -> None:
    assert a.keys() == b.keys(), "different query sets"
    worst = max(abs(a[q][m] - b[q][m]) for q in a for m in METRICS)
    assert worst <= 1e-9, f"results differ by {worst}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--profile", action="store_true", help="cProfile one run of ours and print the top entries")
    args = parser.parse_args(argv)

    ranked, qrels = make_input(args.queries, args.depth)
    print(f"{args.queries} queries x {args.depth} docs, {sum(map(len, qrels.values()))} judgments; "
          f"metrics {', '.join(METRICS)}; python {sys.version.split()[0]}, pytrec_eval {pytrec_eval.__version__}")

    t_ours, t_theirs, t_main, t_rr = [], [], [], []
    for _ in range(args.repeats):
        dt, (agg_a, pq_a) = timed(lambda: ours(ranked, qrels))  # type: ignore[misc]
        t_ours.append(dt)
        dt, (agg_b, pq_b) = timed(lambda: theirs(ranked, qrels))  # type: ignore[misc]
        t_theirs.append(dt)
        t_main.append(timed(lambda: theirs_main(ranked, qrels))[0])
        t_rr.append(timed(lambda: theirs_rr(ranked, qrels))[0])
        check(pq_a, pq_b)
        assert all(abs(agg_a[m] - agg_b[m]) <= 1e-9 for m in METRICS)

    med = statistics.median
    print(f"pytest-ragmetrics evaluate        median {med(t_ours) * 1000:8.1f} ms  (min {min(t_ours) * 1000:.1f})")
    print(f"pytrec_eval, all five metrics     median {med(t_theirs) * 1000:8.1f} ms  (min {min(t_theirs) * 1000:.1f})")
    print(f"  of which the main evaluator     median {med(t_main) * 1000:8.1f} ms")
    print(f"  of which recip_rank on cut run  median {med(t_rr) * 1000:8.1f} ms")
    print(f"ratio ours / pytrec_eval (all five):          {med(t_ours) / med(t_theirs):.2f}")
    print(f"ratio ours / pytrec_eval (main evaluator only): {med(t_ours) / med(t_main):.2f}")
    print(f"per query: ours {med(t_ours) / args.queries * 1e6:.1f} us, pytrec_eval {med(t_theirs) / args.queries * 1e6:.1f} us")
    print("results equal to 1e-9: yes")

    if args.profile:
        profiler = cProfile.Profile()
        profiler.runcall(ours, ranked, qrels)
        pstats.Stats(profiler).sort_stats("tottime").print_stats(12)
    return 0


if __name__ == "__main__":
    sys.exit(main())
