"""`ragmetrics compare`: B judged against A with the plugin's rules, outside pytest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_ragmetrics._compare import main

METRICS = ["recall@10", "ndcg@10"]


def artifact(path: Path, per_query: dict[str, tuple[float, float] | str], tags: dict[str, list[str]]) -> Path:
    """A run artifact as --rag-report writes it (only the fields compare reads)."""
    entries = {}
    for qid, value in per_query.items():
        if isinstance(value, str):
            entries[qid] = {"status": "error", "error": value, "metrics": None, "ranking": [], "tags": tags[qid]}
        else:
            entries[qid] = {"status": "scored", "metrics": dict(zip(METRICS, value)), "ranking": ["d1", "d2"],
                            "tags": tags[qid]}
    path.write_text(json.dumps({"_meta": {"measurement": {"metrics": METRICS}}, "per_query": entries,
                                "comparison": {}, "n": len(entries)}))
    return path


TAGS = {"q1": ["standard"], "q2": ["standard"], "q3": ["paraphrase"], "q4": ["paraphrase"]}


@pytest.fixture
def runs(tmp_path: Path) -> tuple[Path, Path]:
    a = artifact(tmp_path / "a.json", {"q1": (1.0, 1.0), "q2": (1.0, 0.5), "q3": (0.5, 0.4), "q4": (1.0, 0.9)}, TAGS)
    b = artifact(tmp_path / "b.json", {"q1": (1.0, 1.0), "q2": (0.0, 0.0), "q3": (1.0, 0.6), "q4": "TimeoutError"},
                 TAGS)
    return a, b


def test_table_reports_deltas_wins_and_the_worst_list(runs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    a, b = runs
    assert main([str(a), str(b)]) == 0  # without --fail-on-regression it only reports
    out = capsys.readouterr().out
    # recall@10: A mean (1 + 1 + .5 + 1)/4 = 0.875; B (1 + 0 + 1 + 0 for the error)/4 = 0.5
    assert "| recall@10 | 0.8750   | 0.5000 | -0.3750 |" in out
    # q1 tie, q2 loss, q3 win, q4 loss (an errored query scores 0)
    assert "| recall@10 | 1    | 1    | 2      |" in out
    worst = out.split("Worst regressed queries", 1)[1]
    assert worst.index("q4") < worst.index("q2")  # errors are listed first
    assert "ERROR: TimeoutError" in worst


def test_fail_on_regression_uses_the_plugins_gates(runs: tuple[Path, Path], tmp_path: Path) -> None:
    a, b = runs
    assert main([str(a), str(b), "--fail-on-regression"]) == 1  # default: no recall drop allowed
    assert main([str(a), str(a), "--fail-on-regression"]) == 0  # a run compared with itself passes
    lenient = tmp_path / "thresholds.json"
    lenient.write_text(json.dumps({"recall@10_tolerance": 0.5, "fail_on_regression": False}))
    assert main([str(a), str(b), "--fail-on-regression", "--thresholds", str(lenient)]) == 0


def test_json_output_and_html(runs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = runs
    html = tmp_path / "cmp.html"
    assert main([str(a), str(b), "--format", "json", "--html", str(html)]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["wins_ties_losses"]["ndcg@10"] == {"wins": 1, "ties": 1, "losses": 2}
    assert [r["qid"] for r in payload["regressed"]] == ["q4", "q2"]
    assert "p_value" in payload["aggregate"][0]["stats"]
    assert "<svg" in html.read_text() and "q2" in html.read_text()


def test_trec_runs_are_scored_against_qrels(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("q1 0 a 1\nq2 0 b 1\n")
    (tmp_path / "a.run").write_text("q1 Q0 a 1 2.0 x\nq2 Q0 b 1 2.0 x\n")
    (tmp_path / "b.run").write_text("q1 Q0 a 1 2.0 x\nq2 Q0 z 1 2.0 x\n")
    code = main([str(tmp_path / "a.run"), str(tmp_path / "b.run"), "--qrels", str(qrels), "-m", "recall@10",
                 "--fail-on-regression"])
    assert code == 1
    assert "| recall@10 | 1.0000   | 0.5000 | -0.5000 |" in capsys.readouterr().out


def test_a_baseline_file_is_a_valid_reference(runs: tuple[Path, Path], tmp_path: Path) -> None:
    _, b = runs
    baseline = tmp_path / "baseline.json"
    baseline.write_text(json.dumps({"_meta": {}, "aggregate": {},
                                    "per_query": {q: dict(zip(METRICS, (1.0, 1.0))) for q in TAGS}}))
    assert main([str(baseline), str(b), "--fail-on-regression"]) == 1


def test_bad_input_is_exit_2_with_the_file_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path / "missing.json"), str(tmp_path / "missing.json")]) == 2
    assert "missing.json" in capsys.readouterr().err
    run = tmp_path / "x.run"
    run.write_text("q1 Q0 a 1 1.0 x\n")
    assert main([str(run), str(run)]) == 2
    assert "needs --qrels" in capsys.readouterr().err
