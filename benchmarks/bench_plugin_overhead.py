"""Plugin overhead: `pytest --rag-eval` over 10,000 golden queries with an instant
retriever, against a plain pytest run of 10,000 trivial parametrized tests.

Both sessions run in subprocesses of this script, alternately, several times;
the script prints medians and their ratio (target <= 1.3), then the in-process
cost per query of mapping, dedup, scoring and comparison (target < 100 us).

    python benchmarks/bench_plugin_overhead.py [--queries 10000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _synthetic import timed_pytest  # noqa: E402

CONFTEST = '''
import json, pathlib, pytest

class InstantRetriever:
    """A dict lookup: the cheapest possible retriever, so only the plugin is measured."""
    def __init__(self, table):
        self.table = table
    def search(self, query, k):
        return self.table[query][:k]

@pytest.fixture(scope="session")
def rag_retriever():
    return InstantRetriever(json.loads(pathlib.Path(__file__).with_name("rankings.json").read_text()))
'''

PLAIN = '''
import pytest

@pytest.mark.parametrize("i", range({n}))
def test_trivial(i):
    assert i >= 0
'''


def make_projects(root: Path, n: int, seed: int = 0) -> tuple[Path, Path]:
    rng = random.Random(seed)
    rag = root / "rag"
    rag.mkdir()
    rankings = {}
    with open(rag / "golden.jsonl", "w") as fh:
        for i in range(n):
            text = f"question {i}"
            docs = [f"doc{rng.randrange(5000)}#{c}-3" for c in range(1, 16)]
            rankings[text] = docs
            gold = rng.sample(sorted({d.split('#')[0] for d in docs}) + [f"doc{rng.randrange(5000)}"], 2)
            cands = [{"doc_id": g, "rel": rng.choice([1, 2])} for g in gold]
            fh.write(json.dumps({"qid": f"q{i:05d}", "query": text, "mode": rng.choice(["standard", "paraphrase"]),
                                 "candidates": cands}) + "\n")
    (rag / "rankings.json").write_text(json.dumps(rankings))
    (rag / "conftest.py").write_text(CONFTEST)
    (rag / "pytest.ini").write_text("[pytest]\nrag_golden = golden.jsonl\n")
    plain = root / "plain"
    plain.mkdir()
    (plain / "test_plain.py").write_text(PLAIN.format(n=n))
    (plain / "pytest.ini").write_text("[pytest]\n")
    return rag, plain


def run(cwd: Path, *args: str) -> float:
    return timed_pytest(cwd, *args)


def per_query_cost(rag_dir: Path, n: int) -> float:
    """Microseconds per query inside QueryWorker.run_query (map, dedup, score, compare)."""
    sys.path.insert(0, str(rag_dir))
    from pytest_ragmetrics._plugin.options import build_options
    from pytest_ragmetrics._plugin.session import RagSession

    ini = {"rag_golden": "golden.jsonl", "rag_baseline": "baselines/baseline.json",
           "rag_thresholds": None, "rag_metrics": "", "rag_k": "",  # None: unset, as in pytest.ini
           "rag_relevance_level": "1", "rag_gain": "exponential", "rag_id_separator": "#",
           "rag_subset": "full", "rag_smoke": "tag:smoke"}
    options = build_options(lambda flag, key: None if flag else ini.get(key, ""), lambda v, cli: rag_dir / v)
    rag = RagSession(options, False, rag_dir)
    table = json.loads((rag_dir / "rankings.json").read_text())

    class Instant:
        def search(self, query: str, k: int) -> list[str]:
            return table[query][:k]

    retriever = Instant()
    queries = list(rag.golden)
    start = time.perf_counter()
    for q in queries:
        record = rag.worker.run_query(retriever, q)
        rag.worker.record_payload(record)
    return (time.perf_counter() - start) / len(queries) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rag, plain = make_projects(Path(tmp), args.queries)
        run(rag, "--rag-eval", "--rag-update-baseline")
        rag_times, plain_times = [], []
        for _ in range(args.repeats):
            plain_times.append(run(plain))
            rag_times.append(run(rag, "--rag-eval"))
        r, p = statistics.median(rag_times), statistics.median(plain_times)
        print(f"queries: {args.queries}, repeats: {args.repeats}")
        print(f"plain pytest, {args.queries} trivial parametrized tests: median {p:.2f} s  {[round(t, 2) for t in plain_times]}")
        print(f"pytest --rag-eval, {args.queries} golden queries:         median {r:.2f} s  {[round(t, 2) for t in rag_times]}")
        print(f"ratio rag/plain: {r / p:.3f}  (target <= 1.3)")
        cost = min(per_query_cost(rag, args.queries) for _ in range(3))
        print(f"per-query map+dedup+score+compare: {cost:.1f} us  (target < 100 us)")


if __name__ == "__main__":
    main()
