"""Scale: ``pytest --rag-eval`` over a synthetic golden set of up to 100,000 queries with an
instant retriever, serial and under ``pytest-xdist -n 2``, against plain pytest sessions of
as many trivial parametrized tests.

For every size the script writes the golden set (JSONL, graded 0-3, two tags a query),
measures a baseline (serial, ``--rag-update-baseline``), then runs, in subprocesses:
plain pytest, plain ``-n 2``, ``--rag-eval`` and ``--rag-eval -n 2`` (both with
``--rag-report``). Each process (serial session, xdist controller, every worker)
writes its peak RSS (``ru_maxrss``) from ``pytest_unconfigure``, the last hook pytest
calls. The script prints wall times, peak RSS per process, our extra RSS over plain
pytest per query, the slope between sizes (constant bytes a query = linear), and
whether the serial and ``-n 2`` artifacts agree.

    python benchmarks/bench_scale_100k.py [--sizes 10000,30000,100000]
    python benchmarks/bench_scale_100k.py --sizes 30000 --tracemalloc 8   # who holds the controller's memory
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _synthetic import RETRIEVER_CONFTEST, timed_pytest, write_golden, write_plain  # noqa: E402

SIDES = ("plain", "plain-n2", "rag", "rag-n2")


def make_rag(folder: Path, n: int) -> None:
    folder.mkdir(parents=True)
    write_golden(folder / "golden.jsonl", n)
    (folder / "conftest.py").write_text(RETRIEVER_CONFTEST)
    (folder / "pytest.ini").write_text("[pytest]\nrag_golden = golden.jsonl\n")


def run(cwd: Path, tag: str, rss_dir: Path, *args: str, env_extra: dict[str, str] | None = None) -> float:
    env = {"BENCH_DIR": str(HERE), "BENCH_RUN": tag, "BENCH_RSS_DIR": str(rss_dir), **(env_extra or {})}
    return timed_pytest(cwd, *args, env_extra=env)


def rss_of(rss_dir: Path, tag: str) -> dict[str, float]:
    """Peak RSS in MiB per process of one run: controller, gw0, gw1, ..."""
    out = {}
    for path in sorted(rss_dir.glob(f"{tag}-*.json")):
        data = json.loads(path.read_text())
        out[data["who"]] = data["maxrss_kb"] / 1024
    return out


def per_query(path: Path) -> dict:
    return json.loads(path.read_text())["per_query"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10000,30000,100000")
    parser.add_argument("--sides", default=",".join(SIDES))
    parser.add_argument("--tracemalloc", type=int, default=0, metavar="FRAMES",
                        help="instead of timing: one serial --rag-eval run per size under tracemalloc; print top holders")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    sides = args.sides.split(",")
    results: dict[int, dict[str, dict]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        rss_dir = root / "rss"
        rss_dir.mkdir()
        for n in sizes:
            rag, plain = root / f"rag{n}", root / f"plain{n}"
            make_rag(rag, n)
            write_plain(plain, n)
            t = run(rag, f"{n}-baseline", rss_dir, "--rag-eval", "--rag-update-baseline")
            print(f"n={n}: golden {os.path.getsize(rag / 'golden.jsonl') / 2**20:.1f} MiB, "
                  f"baseline {os.path.getsize(rag / 'baselines' / 'baseline.json') / 2**20:.1f} MiB "
                  f"(written in {t:.1f} s)", flush=True)
            if args.tracemalloc:
                out = root / f"trace{n}.txt"
                run(rag, f"{n}-trace", rss_dir, "--rag-eval", "--rag-report=run.json",
                    env_extra={"BENCH_TRACEMALLOC": str(args.tracemalloc), "BENCH_TRACEMALLOC_OUT": str(out)})
                print(out.read_text(), flush=True)
                continue
            results[n] = {}
            for side in sides:
                tag = f"{n}-{side}"
                flags = ["-n", "2"] if side.endswith("-n2") else []
                if side.startswith("rag"):
                    t = run(rag, tag, rss_dir, "--rag-eval", *flags, f"--rag-report=run-{side}.json")
                else:
                    t = run(plain, tag, rss_dir, *flags)
                results[n][side] = {"wall": t, "rss": rss_of(rss_dir, tag)}
                rss = "  ".join(f"{who} {mb:.0f} MiB" for who, mb in results[n][side]["rss"].items())
                print(f"  {side:9} {t:7.1f} s   {rss}", flush=True)
            if {"rag", "rag-n2"} <= set(sides):
                same = per_query(rag / "run-rag.json") == per_query(rag / "run-rag-n2.json")
                print(f"  per-query results serial == -n 2: {same}", flush=True)
                results[n]["same"] = same
    if args.tracemalloc:
        return
    print("\nsummary (peak RSS MiB; 'extra/query' = (rag - plain) / n in bytes)")
    print("| n | side | wall s | controller | workers | extra/query vs plain (controller) |")
    print("|---|---|---|---|---|---|")
    for n, by_side in results.items():
        for side in sides:
            r = by_side[side]
            ctl = r["rss"].get("controller", float("nan"))
            workers = " / ".join(f"{mb:.0f}" for who, mb in r["rss"].items() if who != "controller") or "-"
            extra = ""
            base = "plain-n2" if side == "rag-n2" else "plain"
            if side.startswith("rag") and base in by_side:
                delta = ctl - by_side[base]["rss"].get("controller", float("nan"))
                extra = f"{delta * 2**20 / n:.0f} B"
            print(f"| {n:,} | {side} | {r['wall']:.1f} | {ctl:.0f} | {workers} | {extra} |")
    if len(results) > 1:
        print("\nslope between sizes (bytes of controller peak RSS per extra query):")
        ns = sorted(results)
        for a, b in zip(ns, ns[1:]):
            row = []
            for side in sides:
                ra, rb = results[a][side]["rss"], results[b][side]["rss"]
                slope = (rb.get("controller", 0) - ra.get("controller", 0)) * 2**20 / (b - a)
                wslope = [(rb[w] - ra[w]) * 2**20 / (b - a) for w in rb if w != "controller" and w in ra]
                row.append(f"{side} {slope:.0f}" + (f" (workers {' / '.join(f'{x:.0f}' for x in wslope)})"
                                                      if wslope else ""))
            print(f"  {a:,} -> {b:,}: " + ";  ".join(row))
    print(json.dumps({str(k): v for k, v in results.items()}), file=sys.stderr)


if __name__ == "__main__":
    main()
