"""Synthetic golden sets and an instant retriever for the scale benchmarks.

The retriever derives each query's ranking from the query number with a seeded
RNG, so it holds no table: whatever memory a run uses beyond plain pytest is the
plugin's, not the retriever's. The golden writer uses the same function, so
judgments overlap the rankings as on a real set (some hits, some misses, graded).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["RETRIEVER_CONFTEST", "PLAIN_TEST", "RSS_HOOK", "ranking", "write_golden", "write_plain"]

DEPTH = 15
N_DOCS = 50_000


def ranking(i: int, seed: int = 0) -> list[str]:
    """The ranked chunk ids the instant retriever returns for query ``i`` (15, some share a document)."""
    rng = random.Random(seed * 1_000_003 + i)
    return [f"doc{rng.randrange(N_DOCS)}#{rng.randrange(1, 4)}-3" for _ in range(DEPTH)]


def write_golden(path: Path, n: int, seed: int = 0) -> None:
    """A JSONL golden set of ``n`` queries: graded candidates (0-3) and two tags each."""
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(n):
            docs = list(dict.fromkeys(r.split("#")[0] for r in ranking(i, seed)))
            gold = rng.sample(docs[:10], 2) + [f"doc{rng.randrange(N_DOCS)}"]
            cands = [{"doc_id": d, "rel": rng.choice([1, 2, 3])} for d in gold]
            cands.append({"doc_id": docs[-1], "rel": 0})  # a judged non-relevant document
            fh.write(json.dumps({"qid": f"q{i:06d}", "query": f"question {i}",
                                 "mode": rng.choice(["standard", "paraphrase"]),
                                 "tags": [f"topic{i % 7}"], "candidates": cands}) + "\n")


#: Appended to every project's conftest: each process (serial run, xdist controller,
#: worker) writes its peak RSS as the very last thing pytest does.
RSS_HOOK = r'''
import json as _json, os as _os, resource as _resource, pathlib as _pathlib


def pytest_unconfigure(config):
    out = _os.environ.get("BENCH_RSS_DIR")
    if not out:
        return
    who = getattr(config, "workerinput", {}).get("workerid", "controller")
    peak_kb = _resource.getrusage(_resource.RUSAGE_SELF).ru_maxrss
    hwm = None
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            hwm = int(line.split()[1])
    _pathlib.Path(out, f"{_os.environ.get('BENCH_RUN', 'run')}-{who}.json").write_text(
        _json.dumps({"who": who, "maxrss_kb": peak_kb, "vmhwm_kb": hwm}))
'''

RETRIEVER_CONFTEST = r'''
import os, sys
import pytest

sys.path.insert(0, os.environ["BENCH_DIR"])
from _synthetic import ranking


class InstantRetriever:
    """No index, no table: the ranking is computed from the query number."""

    def search(self, query, k):
        return ranking(int(query.rsplit(" ", 1)[1]))[:k]


@pytest.fixture(scope="session")
def rag_retriever():
    return InstantRetriever()


if os.environ.get("BENCH_TRACEMALLOC"):  # diagnosis only: who holds the memory at the end
    import tracemalloc
    tracemalloc.start(int(os.environ["BENCH_TRACEMALLOC"]))

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(session):
        if hasattr(session.config, "workerinput"):
            return
        snap = tracemalloc.take_snapshot()
        lines = [f"traced now {tracemalloc.get_traced_memory()[0] / 2**20:.1f} MiB, "
                 f"peak {tracemalloc.get_traced_memory()[1] / 2**20:.1f} MiB"]
        for stat in snap.statistics("traceback")[:25]:
            lines.append(f"{stat.size / 2**20:8.1f} MiB {stat.count:9d} blocks")
            lines.extend("      " + str(f) for f in stat.traceback[-4:])
        with open(os.environ["BENCH_TRACEMALLOC_OUT"], "w") as fh:
            fh.write("\n".join(lines) + "\n")
''' + RSS_HOOK

PLAIN_TEST = '''
import pytest

@pytest.mark.parametrize("i", range({n}))
def test_trivial(i):
    assert i >= 0
'''


def write_plain(folder: Path, n: int) -> None:
    """A plain pytest project of ``n`` trivial parametrized tests, with the RSS hook."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "test_plain.py").write_text(PLAIN_TEST.format(n=n))
    (folder / "conftest.py").write_text(RSS_HOOK)
    (folder / "pytest.ini").write_text("[pytest]\n")


def timed_pytest(cwd: Path, *args: str, env_extra: dict[str, str] | None = None) -> float:
    """Wall seconds of one quiet ``pytest`` subprocess in ``cwd``; any failure stops the benchmark."""
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", **(env_extra or {}))
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
                          cwd=cwd, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"run in {cwd} {args} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}")
    return elapsed
