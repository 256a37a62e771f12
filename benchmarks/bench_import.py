"""What the plugin costs a pytest session that does not ask for --rag-eval.

    python benchmarks/bench_import.py [--runs 15]

Times fresh interpreters, interleaved so that machine noise hits both sides alike, and prints
medians and the differences in milliseconds:
- `python -c "import pytest"` vs `python -c "import pytest, pytest_ragmetrics.plugin"`
- pytest start-up with the plugin (loaded through its pytest11 entry point) vs `-p no:ragmetrics`
  (entry point blocked), twice: `pytest --version --version` (a single `--version` returns before
  any plugin loads in pytest >= 8.1, so it would measure nothing) and a whole session that runs
  one trivial test in an empty directory
and lists any heavy module (torch, chromadb, ...) the plugin import pulled in.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time

HEAVY = ("torch", "chromadb", "sentence_transformers", "transformers", "jieba", "bm25s", "rank_bm25", "numpy", "yaml")


def wall(cmd: list[str], cwd: str) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=cwd)
    return time.perf_counter() - start


def compare(label_a: str, cmd_a: list[str], label_b: str, cmd_b: list[str], runs: int, cwd: str) -> None:
    for _ in range(2):  # warm the file cache
        wall(cmd_a, cwd)
        wall(cmd_b, cwd)
    a, b = [], []
    for _ in range(runs):
        a.append(wall(cmd_a, cwd))
        b.append(wall(cmd_b, cwd))
    ma, mb = statistics.median(a) * 1000, statistics.median(b) * 1000
    print(f"  {label_a:<44} median {ma:7.1f} ms")
    print(f"  {label_b:<44} median {mb:7.1f} ms")
    print(f"  difference {mb - ma:+.1f} ms")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args(argv)
    py = sys.executable
    # an empty directory, so no project's conftest or ini is involved
    with tempfile.TemporaryDirectory() as cwd:
        print(f"python {sys.version.split()[0]}, {args.runs} runs each, interleaved")
        print("import:")
        compare("python -c 'import pytest'", [py, "-c", "import pytest"],
                "python -c 'import pytest, pytest_ragmetrics.plugin'", [py, "-c", "import pytest, pytest_ragmetrics.plugin"],
                args.runs, cwd)
        print("pytest start-up (pytest --version --version):")
        version = [py, "-m", "pytest", "--version", "--version"]
        compare("-p no:ragmetrics", version + ["-p", "no:ragmetrics"],
                "plugin loaded via entry point", version, args.runs, cwd)
        print("a pytest session running one trivial test, without --rag-eval:")
        with open(f"{cwd}/test_one.py", "w", encoding="utf-8") as f:
            f.write("def test_one():\n    assert True\n")
        with open(f"{cwd}/pytest.ini", "w", encoding="utf-8") as f:
            f.write("[pytest]\n")
        session = [py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_one.py"]
        compare("-p no:ragmetrics", session + ["-p", "no:ragmetrics"],
                "plugin loaded via entry point", session, args.runs, cwd)
        code = ("import sys, json; import pytest; before = set(sys.modules); import pytest_ragmetrics.plugin; "
                "print(json.dumps(sorted(set(sys.modules) - before)))")
        added = json.loads(subprocess.run([py, "-c", code], check=True, capture_output=True, text=True, cwd=cwd).stdout)
        own = [m for m in added if m.startswith("pytest_ragmetrics")]
        heavy = sorted({m.split(".")[0] for m in added} & set(HEAVY))
        print(f"modules the plugin import adds after pytest: {len(added)} ({len(own)} of them pytest_ragmetrics.*)")
        print(f"of those, third-party packages worth noting: {', '.join(heavy) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
