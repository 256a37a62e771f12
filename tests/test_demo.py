"""The demo as a user runs it: `pytest --rag-eval` at the repository root.

These drive real subprocess sessions over the reference stack (chromadb, bm25s,
the packaged MiniLM model) and the committed baseline, so they are slow-marked;
CI runs them. The first one builds the demo index (~340 chunks), later ones reuse
the embedding cache.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BASELINE = REPO / "baselines" / "baseline.json"

pytestmark = pytest.mark.slow


def run_demo(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", **env}
    for var in ("RAGMETRICS_MODE", "RAGMETRICS_CHUNK_SIZE", "RAGMETRICS_TOP_K", "RAGMETRICS_FETCH_K"):
        if var not in env:
            environ.pop(var, None)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "--rag-eval", "-p", "no:cacheprovider", *args],
        cwd=REPO, env=environ, capture_output=True, text=True, timeout=900,
    )


def test_demo_gate_passes_against_the_committed_baseline(tmp_path: Path) -> None:
    before = BASELINE.read_bytes()
    report = tmp_path / "run.json"
    proc = run_demo(f"--rag-report={report}")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "All gates passed" in proc.stdout
    artifact = json.loads(report.read_text())
    golden_ids = {line.split(":", 1)[1].strip() for line in (REPO / "eval" / "golden.yaml").read_text().splitlines()
                  if line.startswith("- id:")}
    assert set(artifact["per_query"]) == golden_ids
    assert artifact["comparison"]["regressed"] == []
    assert BASELINE.read_bytes() == before  # a normal run never writes the baseline


def test_bm25_only_setting_fails_and_names_the_fallen_queries(tmp_path: Path) -> None:
    before = BASELINE.read_bytes()
    report = tmp_path / "run.json"
    proc = run_demo(f"--rag-report={report}", RAGMETRICS_MODE="bm25")
    assert proc.returncode == 1, proc.stdout[-4000:]
    out = proc.stdout
    assert "RETRIEVAL GATE FAILED" in out
    assert "gate recall@10: recall@10 fell" in out
    assert "Worst regressed queries" in out
    artifact = json.loads(report.read_text())
    regressed = artifact["comparison"]["regressed"]
    assert regressed, "bm25 alone must lose some paraphrased questions"
    # The worst-regressed list names exactly the queries whose recall fell, worst first.
    base = json.loads(before)["per_query"]
    fell = {q for q, r in artifact["per_query"].items()
            if r["metrics"] and r["metrics"]["recall@10"] < base[q]["recall@10"] - 1e-9}
    assert {r["qid"] for r in regressed} == fell
    drops = [max(-d["delta"] for d in r["drops"] if d["exceeded"]) for r in regressed]
    assert drops == sorted(drops, reverse=True)
    assert regressed[0]["qid"] in out
    # Paraphrased questions suffer most without the vector route (seed 000's point).
    tags = {q: set(r["tags"]) for q, r in artifact["per_query"].items()}
    assert sum("paraphrase" in tags[r["qid"]] for r in regressed) > len(regressed) / 2
    assert BASELINE.read_bytes() == before
