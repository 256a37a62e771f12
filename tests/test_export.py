"""Export to TREC and score the export with pytrec_eval: the numbers must survive the trip."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import pytrec_eval

from pytest_ragmetrics import MeasurementConfig, evaluate, load_qrels, read_run
from pytest_ragmetrics.cli import main

GOLDEN = """
- id: q1
  question: first
  gold_chunks: {a: 2, b: 1}
- id: q2
  question: second
  gold_chunks: [c]
"""


def test_artifact_and_golden_round_trip_through_trec(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "golden.yaml").write_text(GOLDEN)
    artifact = tmp_path / "run.json"
    artifact.write_text(json.dumps({"per_query": {"q1": {"ranking": ["b", "x", "a"]},
                                                  "q2": {"ranking": ["y", "z"]}}}))
    run_out, qrels_out = tmp_path / "run.trec", tmp_path / "qrels.txt"
    assert main(["export", "--artifact", str(artifact), "--run-out", str(run_out),
                 "--golden", str(tmp_path / "golden.yaml"), "--qrels-out", str(qrels_out)]) == 0
    assert read_run(run_out) == {"q1": ["b", "x", "a"], "q2": ["y", "z"]}  # order survives trec_eval's sort
    qrels = load_qrels(qrels_out)
    assert qrels == {"q1": {"a": 2, "b": 1}, "q2": {"c": 1}}
    ours = evaluate(read_run(run_out), qrels, MeasurementConfig(("ndcg@10",), gain="linear")).per_query
    scored = {q: {d: -float(r) for r, d in enumerate(docs, 1)} for q, docs in read_run(run_out).items()}
    ref = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut_10"}).evaluate(scored)
    for qid in ours:
        assert ours[qid]["ndcg@10"] == pytest.approx(ref[qid]["ndcg_cut_10"], abs=1e-12)
    # Existing files are not overwritten by accident.
    assert main(["export", "--artifact", str(artifact), "--run-out", str(run_out)]) == 2
    assert "--force" in capsys.readouterr().err


def test_export_needs_a_pair_of_options(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", "--artifact", "x.json"]) == 2
    assert "--run-out" in capsys.readouterr().err
