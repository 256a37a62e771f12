"""The nightly gate over SciFact with the reference stack: serial vs ``pytest-xdist -n 2``.

A temporary project wires ``rag_retriever`` to ``pytest_ragmetrics.stack.Retriever``
over the SciFact folder (hybrid, chunks 300/60, unique documents), with the golden
set = that folder (queries.jsonl + qrels.tsv). The index lives in the stack's warm
home (``RAGMETRICS_HOME``, default ``/work/main/.ragmetrics``), so no run builds
anything; the script checks that and stops if a run would encode or rebuild.

Serial and ``-n 2`` runs alternate (subprocesses of this script); the script prints
the medians, speed-up = serial wall / ``-n 2`` wall, whether the per-query results
of the two ``--rag-report`` artifacts are identical (and the whole file, apart from
``_meta.created``), what ``-n auto`` picks, and a per-process start-up profile
(written by a tiny conftest hook in every process) to find the break-even.

    python benchmarks/bench_xdist_scifact.py [--repeats 2] [--rag-repeat 1] [--copies 1]

``--rag-repeat N`` searches every query N times (the plugin's determinism check,
unbatched); ``--copies C`` turns the 300 judged queries into 300*C items (the same
texts under new ids), for a heavier per-query load.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SCIFACT = Path("/work/shared/collections/scifact")
DEFAULT_HOME = Path(__file__).resolve().parents[1] / ".ragmetrics"

CONFTEST = r'''
import json, os, pathlib, resource, time
import pytest

T_CONFTEST = time.time()
HERE = pathlib.Path(__file__).parent
CORPUS = os.environ["BENCH_CORPUS"]
_marks = {"conftest": T_CONFTEST}


def _who(config):
    return getattr(config, "workerinput", {}).get("workerid", "controller")


@pytest.fixture(scope="session")
def rag_retriever():
    _marks["fixture_start"] = time.time()
    from pytest_ragmetrics.stack import Retriever
    _marks["stack_imported"] = time.time()
    retriever = Retriever.from_env(CORPUS, mode="hybrid", top_k=100, fetch_k=100, unique_docs=True)
    _marks["retriever_made"] = time.time()
    _marks["build"] = retriever.build()
    _marks["built"] = time.time()
    return retriever


def pytest_sessionfinish(session):
    _marks["finish"] = time.time()
    _marks["items"] = session.testscollected


def pytest_unconfigure(config):
    _marks["unconfigure"] = time.time()
    _marks["maxrss_kb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    out = HERE / "marks" / f"{os.environ.get('BENCH_RUN', 'run')}-{_who(config)}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(_marks))
'''


def make_project(root: Path, copies: int) -> Path:
    """A project whose golden set is SciFact (or ``copies`` copies of its judged queries)."""
    project = root / "scifact-gate"
    project.mkdir()
    golden = SCIFACT
    if copies > 1:
        golden = project / "golden"
        golden.mkdir()
        texts = {}
        for line in (SCIFACT / "queries.jsonl").read_text(encoding="utf-8").splitlines():
            rec = json.loads(line)
            texts[str(rec.get("_id", rec.get("qid")))] = rec.get("text", rec.get("query"))
        qrels = [line.split("\t") for line in (SCIFACT / "qrels.tsv").read_text().splitlines()]
        qrels = [row for row in qrels if row and row[0] in texts]  # a header line has no query
        judged = list(dict.fromkeys(row[0] for row in qrels))
        with open(golden / "queries.jsonl", "w", encoding="utf-8") as fh:
            for c in range(copies):
                for qid in judged:
                    fh.write(json.dumps({"qid": f"{qid}~{c}", "query": texts[qid]}) + "\n")
        with open(golden / "qrels.tsv", "w", encoding="utf-8") as fh:
            for c in range(copies):
                for row in qrels:
                    fh.write("\t".join([f"{row[0]}~{c}", *row[1:]]) + "\n")
    (project / "conftest.py").write_text(CONFTEST)
    (project / "pytest.ini").write_text(
        "[pytest]\n"
        f"rag_golden = {golden}\n"
        "rag_metrics = ndcg@10 recall@100 mrr@10\n"
        "rag_baseline = baselines/baseline.json\n"
    )
    return project


def run(project: Path, env: dict[str, str], tag: str, *args: str) -> tuple[float, str]:
    """One pytest subprocess; returns its wall time and stdout. A failed gate is fine (exit 1)."""
    env = dict(env, BENCH_RUN=tag)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rag-eval", *args],
                          cwd=project, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        sys.exit(f"run {tag} {args} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}")
    return elapsed, proc.stdout


def marks_of(project: Path, tag: str) -> dict[str, dict]:
    return {p.stem.split("-", 1)[1]: json.loads(p.read_text()) for p in (project / "marks").glob(f"{tag}-*.json")}


def check_warm(marks: dict[str, dict], tag: str) -> None:
    for who, m in marks.items():
        build = m.get("build")
        if build and (build["encoded"] or build["vector_index_rebuilt"]):
            sys.exit(f"run {tag}: {who} encoded {build['encoded']} texts / rebuilt the index: the home is not warm")


def startup_profile(marks: dict[str, dict], launched: float, ended: float) -> dict[str, dict[str, float]]:
    """Per process: seconds from launch to conftest import, stack import, corpus load + chunking,
    index open (BM25 built in memory, chroma opened and probed), then running the items."""
    out = {}
    for who, m in sorted(marks.items()):
        row = {"to_conftest": m["conftest"] - launched}
        if "fixture_start" in m:
            row["import_stack"] = m["stack_imported"] - m["fixture_start"]
            row["make_retriever"] = m["retriever_made"] - m["stack_imported"]
            row["build_open"] = m["built"] - m["retriever_made"]
            row["bm25_s"] = m["build"]["bm25_seconds"]
            row["vector_s"] = m["build"]["vector_seconds"]
            row["items_s"] = m["finish"] - m["built"]  # the first item runs right after the fixture
        row["sessionfinish"] = m["finish"] - launched
        row["unconfigure"] = m["unconfigure"] - launched
        if who == "controller":
            row["exited"] = ended - launched
        row["maxrss_mb"] = m["maxrss_kb"] / 1024
        out[who] = row
    return out


def comparable(path: Path) -> tuple[dict, bytes]:
    """The artifact without ``_meta.created``, as data and as bytes with that line removed."""
    raw = path.read_bytes()
    data = json.loads(raw)
    data["_meta"].pop("created", None)
    stripped = re.sub(rb'\n\s*"created": "[^"]*",?', b"", raw)
    return data, stripped


def auto_workers() -> int:
    """What ``-n auto`` starts here, by xdist's own hook (psutil's core count, else the CPU affinity)."""
    from types import SimpleNamespace

    from xdist.plugin import pytest_xdist_auto_num_workers

    return pytest_xdist_auto_num_workers(SimpleNamespace(option=SimpleNamespace(numprocesses="auto")))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--rag-repeat", type=int, default=1, help="pass --rag-repeat N (N searches per query)")
    parser.add_argument("--copies", type=int, default=1, help="golden set = the judged queries C times")
    parser.add_argument("--home", default=os.environ.get("RAGMETRICS_HOME") or str(DEFAULT_HOME))
    parser.add_argument("--auto", action="store_true", help="also time one -n auto run")
    parser.add_argument("--keep", metavar="DIR", help="build the project in DIR (kept) instead of a temporary dir")
    args = parser.parse_args()
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", RAGMETRICS_HOME=args.home,
               BENCH_CORPUS=str(SCIFACT), PYTHONDONTWRITEBYTECODE="1")
    extra = ["--rag-repeat", str(args.rag_repeat)] if args.rag_repeat > 1 else []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.keep) if args.keep else Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        project = make_project(root, args.copies)
        t, _ = run(project, env, "warmup", "--rag-update-baseline", *extra)
        check_warm(marks_of(project, "warmup"), "warmup")
        print(f"home {args.home}; warm-up + baseline (serial): {t:.1f} s", flush=True)
        times: dict[str, list[float]] = {"serial": [], "n2": []}
        profiles: dict[str, list[dict]] = {"serial": [], "n2": []}
        for i in range(args.repeats):
            for side, flags in (("serial", []), ("n2", ["-n", "2"])):
                tag = f"{side}{i}"
                launched = time.time()
                t, out = run(project, env, tag, *flags, *extra, f"--rag-report=run-{tag}.json")
                ended = time.time()
                marks = marks_of(project, tag)
                check_warm(marks, tag)
                times[side].append(t)
                profiles[side].append(startup_profile(marks, launched, ended))
                print(f"  {tag}: {t:.2f} s", flush=True)
        if args.auto:
            t, out = run(project, env, "auto", "-n", "auto", *extra, "--rag-report=run-auto.json")
            print(f"-n auto: {auto_workers()} workers, {t:.2f} s")
        s, p = statistics.median(times["serial"]), statistics.median(times["n2"])
        golden = len(json.loads((project / "run-serial0.json").read_text())["per_query"])
        print(f"\nqueries: {golden} x --rag-repeat {args.rag_repeat}, repeats: {args.repeats}")
        print(f"serial wall: median {s:.2f} s  {[round(x, 2) for x in times['serial']]}")
        print(f"-n 2 wall:   median {p:.2f} s  {[round(x, 2) for x in times['n2']]}")
        print(f"speed-up serial/-n2: {s / p:.3f}")

        # Every artifact against the first serial one: per-query metrics, rankings, the whole file.
        ref_data, ref_bytes = comparable(project / "run-serial0.json")
        print("artifact vs run-serial0.json: queries whose metrics / ranking differ; whole file equal (bar "
              "_meta.created); bytes equal (bar the created line)")
        same_metrics = True
        for path in sorted(project.glob("run-*.json")):
            if path.name == "run-serial0.json":
                continue
            data, raw = comparable(path)
            ref_pq, pq = ref_data["per_query"], data["per_query"]
            metrics_diff = [q for q in ref_pq if ref_pq[q]["metrics"] != pq.get(q, {}).get("metrics")]
            ranking_diff = [q for q in ref_pq if ref_pq[q]["ranking"] != pq.get(q, {}).get("ranking")]
            same_metrics &= not metrics_diff and set(pq) == set(ref_pq)
            print(f"  {path.name:18} metrics {len(metrics_diff)}/{len(ref_pq)} {metrics_diff[:5]}  ranking "
                  f"{len(ranking_diff)} {ranking_diff[:5]}  file {data == ref_data}  bytes {raw == ref_bytes}")
        print(f"per-query metrics identical in every artifact: {same_metrics}")
        print(f"aggregate: {json.dumps(ref_data['aggregate'])}")

        print("\nstart-up profile (seconds from launch; last repeat):")
        for side in ("serial", "n2"):
            for who, row in profiles[side][-1].items():
                print(f"  {side:6} {who:10} " + "  ".join(f"{k} {v:.2f}" for k, v in row.items()))
        print(json.dumps({"times": times, "profiles": profiles, "same_metrics": same_metrics}), file=sys.stderr)


if __name__ == "__main__":
    main()
