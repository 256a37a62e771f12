"""`ragmetrics compare`: B judged against A with the plugin's rules, outside pytest."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_ragmetrics.gate.baseline import Baseline, write_baseline

from pytest_ragmetrics.cli import main as cli_main


def main(argv: list[str]) -> int:
    """`ragmetrics compare ARGV`, in process."""
    return cli_main(["compare", *argv])


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


def test_a_change_of_one_whole_query_is_not_marked_below_one_query(tmp_path: Path) -> None:
    """Stored scores keep 10 decimals: a fall of one query out of one, read back as 0.9999999999,
    is one query's worth (the gate says so too) and must not be marked (<1/n); half a query is."""
    a = artifact(tmp_path / "a.json", {"q1": (0.9999999999, 0.5)}, {"q1": ["standard"]})
    b = artifact(tmp_path / "b.json", {"q1": (0.0, 0.0)}, {"q1": ["standard"]})
    html = tmp_path / "cmp.html"
    assert main([str(a), str(b), "--html", str(html)]) == 0
    rows = {row.split("</td>", 1)[0]: row for row in html.read_text().split("<tr><td>")[1:]}
    assert "-0.5000 <span class=note>(&lt;1/n)</span>" in rows["ndcg@10"]
    assert "-1.0000</td>" in rows["recall@10"] and "&lt;1/n" not in rows["recall@10"]


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
    write_baseline(baseline, Baseline({"measurement": {"metrics": METRICS}, "k": 10}, dict(zip(METRICS, (1.0, 1.0))),
                                      {q: {**dict(zip(METRICS, (1.0, 1.0))), "_judgments": "0" * 16} for q in TAGS}))
    assert main([str(baseline), str(b), "--fail-on-regression"]) == 1


def test_bad_input_is_exit_2_with_the_file_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path / "missing.json"), str(tmp_path / "missing.json")]) == 2
    assert "missing.json" in capsys.readouterr().err
    run = tmp_path / "x.run"
    run.write_text("q1 Q0 a 1 1.0 x\n")
    assert main([str(run), str(run)]) == 2
    assert "needs --qrels" in capsys.readouterr().err


# ------------------------------------------------- through the command, as CI runs it


def ragmetrics(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """``python -m pytest_ragmetrics …`` in a subprocess: the exit code and text a CI job sees."""
    return subprocess.run([sys.executable, "-m", "pytest_ragmetrics", *map(str, args)],
                          capture_output=True, text=True, timeout=120)


def measured_artifact(path: Path, per_query: dict[str, float], gain: str = "exponential",
                      digests: dict[str, str] | None = None) -> Path:
    """An artifact with a full measurement config, as the plugin records it (ndcg@10 only)."""
    measurement = {"metrics": ["ndcg@10"], "relevance_level": 1, "gain": gain, "id_separator": "#", "dedup": "first"}
    entries = {qid: {"status": "scored", "metrics": {"ndcg@10": v}, "ranking": ["d1"], "tags": []}
               for qid, v in per_query.items()}
    for qid, digest in (digests or {}).items():
        entries[qid]["_judgments"] = digest
    path.write_text(json.dumps({"_meta": {"measurement": measurement, "k": 10}, "per_query": entries,
                                "comparison": {}, "n": len(entries)}))
    return path


def test_queries_of_a_missing_from_b_fail_and_are_listed(tmp_path: Path) -> None:
    # ndcg@10, the only metric, is held as recall@k would be; q9, which A never measured, is not covered
    a = measured_artifact(tmp_path / "a.json", {"q1": 1.0, "q2": 0.5, "q3": 0.8})
    b = measured_artifact(tmp_path / "b.json", {"q1": 1.0, "q9": 0.7})
    proc = ragmetrics("compare", a, b, "--fail-on-regression")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "2 missing from B (q2, q3; each counts as errored, every metric 0)" in proc.stdout
    assert "Thresholds: defaults (ndcg@10 may not drop (no recall@k is measured" in proc.stdout
    assert "gate coverage: 1 labelled question of the golden set has no entry in A" in proc.stdout
    assert "\n  2 queries errored: q3, q2\n" in proc.stdout  # largest drop first
    assert "1 new in B (scored, not compared): q9" in proc.stdout
    worst = proc.stdout.split("Worst regressed queries", 1)[1]
    assert "q2" in worst and "q3" in worst and "missing from B" in worst
    payload = json.loads(ragmetrics("compare", a, b, "--format", "json").stdout)
    assert payload["missing"] == ["q2", "q3"] and payload["new"] == ["q9"] and payload["passed"] is False
    assert ragmetrics("compare", a, a, "--fail-on-regression").returncode == 0


def test_a_measurement_or_judgment_mismatch_is_refused_unless_accepted(tmp_path: Path) -> None:
    a = measured_artifact(tmp_path / "a.json", {"q1": 1.0, "q2": 0.5})
    linear = measured_artifact(tmp_path / "linear.json", {"q1": 1.0, "q2": 0.5}, gain="linear")
    proc = ragmetrics("compare", a, linear, "--fail-on-regression")
    assert proc.returncode == 2
    assert "measured differently" in proc.stderr and "gain: A 'exponential', B 'linear'" in proc.stderr
    assert "--accept-mismatch" in proc.stderr and "Traceback" not in proc.stderr
    accepted = ragmetrics("compare", a, linear, "--accept-mismatch")
    assert accepted.returncode == 0 and "gain: A 'exponential', B 'linear'" in accepted.stdout

    relabelled = measured_artifact(tmp_path / "a1.json", {"q1": 1.0, "q2": 0.5}, digests={"q1": "aaaa", "q2": "bbbb"})
    changed = measured_artifact(tmp_path / "b1.json", {"q1": 1.0, "q2": 0.5}, digests={"q1": "aaaa", "q2": "cccc"})
    proc = ragmetrics("compare", relabelled, changed)
    assert proc.returncode == 2
    assert "judgments or text changed for 1 queries between A and B: q2" in proc.stderr


def test_trec_runs_map_no_ids_unless_asked_in_evaluate_and_compare(tmp_path: Path) -> None:
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("q1 0 d1 1\n")
    run = tmp_path / "chunks.run"
    run.write_text("q1 Q0 d1#0 1 3.0 x\nq1 Q0 d2 2 2.0 x\n")  # d1#0 is not the judged document d1

    def both_verbs(*extra: str) -> tuple[float, float]:
        """mrr@10 of the run by evaluate and by compare, with the same options."""
        evaluated = ragmetrics("evaluate", "--qrels", qrels, "--run", run, "-m", "mrr@10", *extra)
        compared = ragmetrics("compare", run, run, "--qrels", qrels, "-m", "mrr@10", "--format", "json", *extra)
        assert evaluated.returncode == 0 and compared.returncode == 0, evaluated.stderr + compared.stderr
        mean = next(line for line in evaluated.stdout.splitlines() if line.startswith("| mrr@10"))
        return float(mean.split("|")[2]), json.loads(compared.stdout)["aggregate"][0]["now"]

    assert both_verbs() == (0.0, 0.0)  # one rule in both verbs: ids as given
    assert both_verbs("--id-separator", "#") == (1.0, 1.0)

    evaluated = ragmetrics("evaluate", "--qrels", qrels, "--run", run, "-m", "mrr@10")
    assert "ids: as given (no mapping)" in evaluated.stdout.splitlines()[0]
    compared = ragmetrics("compare", run, run, "--qrels", qrels, "-m", "mrr@10", "--id-separator", "#")
    assert "A and B: relevance level 1, exponential gain; ids map to documents before '#'" in compared.stdout


def test_trec_compare_shows_gold_from_the_qrels_and_no_empty_question(tmp_path: Path) -> None:
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("q1 0 good 2\nq1 0 ok 1\nq1 0 bad 0\n")
    (tmp_path / "a.run").write_text("q1 Q0 good 1 2.0 x\n")
    (tmp_path / "b.run").write_text("q1 Q0 other 1 2.0 x\n")
    proc = ragmetrics("compare", tmp_path / "a.run", tmp_path / "b.run", "--qrels", qrels, "-m", "recall@10")
    assert proc.returncode == 0, proc.stderr
    worst = proc.stdout.split("Worst regressed queries", 1)[1]
    assert "gold:     good (2), ok (1)" in worst
    assert "  1. q1\n" in worst and "''" not in worst


def test_compare_shows_bidi_controls_in_ids_escaped(tmp_path: Path) -> None:
    """A query or document id holding U+202E (right-to-left override) reversed the rest of its
    line on the terminal; the table output shows every such character as its escape."""
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("q\u202e1 0 good 1\nq2 0 good 1\n", encoding="utf-8")
    (tmp_path / "a.run").write_text("q\u202e1 Q0 good 1 2.0 x\nq2 Q0 good 1 2.0 x\n", encoding="utf-8")
    (tmp_path / "b.run").write_text("q\u202e1 Q0 ba\u2066d 1 2.0 x\nq2 Q0 good 1 2.0 x\n", encoding="utf-8")
    proc = ragmetrics("compare", tmp_path / "a.run", tmp_path / "b.run", "--qrels", qrels, "-m", "recall@10",
                      "--fail-on-regression")
    assert proc.returncode == 1, proc.stderr
    assert "\u202e" not in proc.stdout and "\u2066" not in proc.stdout
    assert "1 query fell beyond its per-query tolerance: q\\u202e1" in proc.stdout
    assert "  1. q\\u202e1\n" in proc.stdout and "returned: 1. ba\\u2066d" in proc.stdout


def test_compare_judges_with_the_thresholds_the_run_was_gated_with(tmp_path: Path) -> None:
    """Without --thresholds, an artifact's recorded thresholds apply: an nDCG drop the
    plugin failed on must not pass `compare --fail-on-regression` by default."""
    gated = {"source": "baselines/thresholds.json", "values": {"ndcg@10_tolerance": 0.01}}
    a = measured_artifact(tmp_path / "a.json", {"q1": 1.0, "q2": 1.0})
    b = measured_artifact(tmp_path / "b.json", {"q1": 0.5, "q2": 0.5})
    for path in (a, b):
        data = json.loads(path.read_text())
        data["_meta"]["thresholds"] = gated
        path.write_text(json.dumps(data))
    proc = ragmetrics("compare", a, b, "--fail-on-regression")
    assert proc.returncode == 1, proc.stdout
    assert (f"Thresholds: the stricter of A's and B's recorded thresholds (A: {a} (as gated: "
            f"baselines/thresholds.json); B: {b} (as gated: baselines/thresholds.json))") in proc.stdout
    assert "gate ndcg@10: ndcg@10 fell 0.5000 against A" in proc.stdout
    # an explicit file still wins
    lenient = tmp_path / "lenient.json"
    lenient.write_text('{"ndcg@10_tolerance": 0.6}')
    assert ragmetrics("compare", a, b, "--fail-on-regression", "--thresholds", lenient).returncode == 0


def test_a_golden_set_given_as_a_run_is_named_as_such(tmp_path: Path) -> None:
    golden = tmp_path / "golden.yaml"
    golden.write_text("- {id: q1, question: 'a?', gold_chunks: [d1]}\n")
    a = measured_artifact(tmp_path / "a.json", {"q1": 1.0})
    proc = ragmetrics("compare", a, golden)
    assert proc.returncode == 2
    assert "looks like a golden set, not a run" in proc.stderr


def test_a_full_run_against_a_smoke_run_names_the_subsets_and_can_compare_the_shared_queries(tmp_path: Path) -> None:
    full = measured_artifact(tmp_path / "full.json", {"q1": 1.0, "q2": 0.5, "q3": 0.8, "q4": 0.9})
    smoke = measured_artifact(tmp_path / "smoke.json", {"q1": 1.0, "q3": 0.8})
    for path, subset in ((full, "full"), (smoke, "smoke")):
        data = json.loads(path.read_text())
        data["_meta"]["subset"] = subset
        path.write_text(json.dumps(data))
    proc = ragmetrics("compare", full, smoke, "--fail-on-regression")
    assert proc.returncode == 1  # q2 and q4 did not run in B: errored, as before
    assert "A ran the full subset, B the smoke subset (_meta.subset)" in proc.stdout
    assert "Pass --shared-only" in proc.stdout
    proc = ragmetrics("compare", full, smoke, "--fail-on-regression", "--shared-only")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Shared queries only (--shared-only): 2 queries of A and 0 of B left out, not in both (A: q2, q4)" \
        in proc.stdout
    assert "Queries: 2 scored in A; 0 missing from B" in proc.stdout
    data = json.loads(ragmetrics("compare", full, smoke, "--shared-only", "--format", "json").stdout)
    assert data["shared_only"] == {"left_out_of_A": ["q2", "q4"], "left_out_of_B": []}
    assert data["subsets"] == {"A": "full", "B": "smoke"} and data["n"] == 2
    assert "--shared-only" in ragmetrics("compare", "--help").stdout
