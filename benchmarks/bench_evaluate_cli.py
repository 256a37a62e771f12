"""`ragmetrics evaluate` on TREC files against a script that parses the same files for pytrec_eval.

    python benchmarks/bench_evaluate_cli.py [--queries 10000] [--depth 100] [--repeats 7] [--keep DIR]

The data is bench_metrics.py's (10,000 queries x 100 ranked documents, graded 0..3, seed 42),
written once as a TREC run file (1,000,000 lines, real scores) and a TREC qrels file. Then,
alternating, each side runs as a fresh subprocess and prints its five means:

- ours: ``ragmetrics evaluate --run RUN --qrels QRELS -m ndcg@10 -m recall@100 -m mrr@10
  -m precision@10 -m map@100 --gain linear`` (the default table output);
- peer: a plain Python script that reads both files line by line with ``str.split`` into
  dicts, runs a pytrec_eval ``RelevanceEvaluator`` for ndcg_cut_10, recall_100, P_10 and
  map_cut_100, and a second one for recip_rank on the run cut at 10 in trec_eval's order
  (score, then doc id, descending), then prints the means.

Wall time and peak RSS of each child come from ``os.wait4``. The means are checked once,
outside the timing, with ``--format json``: they must agree to 1e-9.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_metrics import METRICS, make_input  # noqa: E402

from pytest_ragmetrics import write_qrels, write_run  # noqa: E402

PEER_SCRIPT = '''\
"""Parse a TREC run and qrels the plain way and score them with pytrec_eval."""
import statistics
import sys

import pytrec_eval

run = {}
with open(sys.argv[1]) as f:
    for line in f:
        qid, _, doc, _, score, _ = line.split()
        run.setdefault(qid, {})[doc] = float(score)
qrels = {}
with open(sys.argv[2]) as f:
    for line in f:
        qid, _, doc, grade = line.split()
        qrels.setdefault(qid, {})[doc] = int(grade)
main = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.100", "P.10", "map_cut.100"}).evaluate(run)
# mrr@10 = recip_rank on the run cut at 10 in trec_eval's order (score desc, then doc id desc)
cut = {q: dict(sorted(d.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)[:10]) for q, d in run.items()}
rr = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(cut)
for name, key, res in (("ndcg@10", "ndcg_cut_10", main), ("recall@100", "recall_100", main),
                       ("mrr@10", "recip_rank", rr), ("precision@10", "P_10", main),
                       ("map@100", "map_cut_100", main)):
    print(name, repr(statistics.fmean(r[key] for r in res.values())))
'''


def ragmetrics_command() -> list[str]:
    """The installed console script next to this interpreter, else ``python -m pytest_ragmetrics``."""
    script = Path(sys.executable).with_name("ragmetrics")
    return [str(script)] if script.exists() else [sys.executable, "-m", "pytest_ragmetrics"]


def run_child(cmd: list[str]) -> tuple[float, float, str]:
    """Wall seconds, peak RSS in MB (ru_maxrss of this child only) and stdout."""
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        err = proc.stderr.read().decode() if proc.stderr else ""
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{err}")
        out.seek(0)
        return elapsed, usage.ru_maxrss / 1024, out.read().decode()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--keep", metavar="DIR", help="write the files here and keep them (default: a temp dir)")
    args = parser.parse_args(argv)

    workdir = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench_cli_"))
    workdir.mkdir(parents=True, exist_ok=True)
    run_path, qrels_path, script = workdir / "run.trec", workdir / "qrels.trec", workdir / "pytrec_eval_script.py"
    ranked, qrels = make_input(args.queries, args.depth)
    with run_path.open("w") as f:
        write_run(f, {q: [d for d, _ in h] for q, h in ranked.items()}, {q: [s for _, s in h] for q, h in ranked.items()})
    with qrels_path.open("w") as f:
        write_qrels(f, qrels)
    script.write_text(PEER_SCRIPT)
    n_lines = sum(len(h) for h in ranked.values())
    del ranked, qrels

    ours = ragmetrics_command() + ["evaluate", "--run", str(run_path), "--qrels", str(qrels_path),
                                   "--gain", "linear"] + [a for m in METRICS for a in ("-m", m)]
    theirs = [sys.executable, str(script), str(run_path), str(qrels_path)]
    print(f"run file {run_path.stat().st_size / 1e6:.1f} MB ({n_lines} lines, {args.queries} queries), "
          f"qrels {qrels_path.stat().st_size / 1e6:.1f} MB; metrics {', '.join(METRICS)}")
    print("ours:  " + " ".join(ours))
    print("peer:  " + " ".join(theirs))

    # agreement, outside the timing
    ours_json = json.loads(run_child(ours + ["--format", "json"])[2])["aggregate"]
    peer_means = {line.split()[0]: float(line.split()[1]) for line in run_child(theirs)[2].splitlines()}
    worst = max(abs(ours_json[m] - peer_means[m]) for m in METRICS)
    for m in METRICS:
        print(f"  {m:13s} ours {ours_json[m]:.12f}  pytrec_eval script {peer_means[m]:.12f}")
    assert worst <= 1e-9, f"means differ by {worst}"
    print(f"means agree: largest difference {worst:.1e}")

    run_child(ours)  # warm the page cache for both sides
    run_child(theirs)
    t_ours, t_theirs, m_ours, m_theirs = [], [], [], []
    for i in range(args.repeats):
        order = [(ours, t_ours, m_ours), (theirs, t_theirs, m_theirs)]
        for cmd, times, rss in order if i % 2 == 0 else order[::-1]:
            dt, peak, _ = run_child(cmd)
            times.append(dt)
            rss.append(peak)
    med = statistics.median
    print(f"ragmetrics evaluate        median {med(t_ours):6.2f} s  (min {min(t_ours):.2f})  peak RSS {max(m_ours):6.0f} MB")
    print(f"script + pytrec_eval       median {med(t_theirs):6.2f} s  (min {min(t_theirs):.2f})  peak RSS {max(m_theirs):6.0f} MB")
    print(f"ratio ours / peer: {med(t_ours) / med(t_theirs):.2f} (target <= 1.0); per-repeat: "
          + ", ".join(f"{a / b:.2f}" for a, b in zip(t_ours, t_theirs)))
    if not args.keep:
        shutil.rmtree(workdir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
