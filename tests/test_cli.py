"""`ragmetrics evaluate` (pytest_ragmetrics.cli): output formats, options, errors, entry points."""

from __future__ import annotations

import json
import subprocess
import sys
from math import log2
from pathlib import Path

import pytest

from pytest_ragmetrics.cli import main

# Three judged queries; q3 is absent from the run. qnone is judged but has only grade 0.
QRELS = "qid\tdoc_id\trel\nq1\ta\t2\nq1\tb\t1\nq2\tc\t1\nq3\td\t1\nqnone\tz\t0\n"
# q1 ranking by score: x (0.9), a (0.8), b (0.7). q2: c first. qnone: z. qother: not judged.
RUN = (
    "q1 Q0 a 1 0.8 sys\nq1 Q0 x 2 0.9 sys\nq1 Q0 b 3 0.7 sys\n"
    "q2 Q0 c 1 2.0 sys\n"
    "qnone Q0 z 1 1.0 sys\n"
    "qother Q0 c 1 1.0 sys\n"
)


@pytest.fixture()
def files(tmp_path: Path) -> tuple[Path, Path]:
    qrels = tmp_path / "qrels.tsv"
    run = tmp_path / "run.txt"
    qrels.write_text(QRELS, encoding="utf-8")
    run.write_text(RUN, encoding="utf-8")
    return qrels, run


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def evaluate_json(capsys: pytest.CaptureFixture[str], files: tuple[Path, Path], *extra: str) -> dict[str, object]:
    qrels, run = files
    code, out, err = run_cli(capsys, "evaluate", "--qrels", str(qrels), "--run", str(run), "--format", "json", *extra)
    assert code == 0, err
    return json.loads(out)


def test_table_output_states_n_and_one_over_n(capsys: pytest.CaptureFixture[str], files: tuple[Path, Path]) -> None:
    qrels, run = files
    code, out, err = run_cli(capsys, "evaluate", "--qrels", str(qrels), "--run", str(run), "-m", "hit_rate@1", "-m", "recall@3")
    assert code == 0 and err == ""
    # scored: q1, q2, q3 (missing -> 0); hit_rate@1: q1 0 (x first), q2 1, q3 0 -> 1/3
    assert "| hit_rate@1 | 0.3333 |" in out
    # recall@3: q1 2/2, q2 1/1, q3 0 -> 2/3
    assert "| recall@3   | 0.6667 |" in out
    assert "n = 3 queries" in out and "1/n = 0.3333" in out
    assert "1 judged query has no document graded above 0 and was not scored, e.g. 'qnone'" in out
    assert "1 judged query is absent from the run (scored 0), e.g. 'q3'" in out
    assert "2 queries returned fewer than 3 documents" in out  # q2 (1 doc), q3 (0)


def test_table_per_query(capsys: pytest.CaptureFixture[str], files: tuple[Path, Path]) -> None:
    qrels, run = files
    code, out, _ = run_cli(capsys, "evaluate", "--qrels", str(qrels), "--run", str(run), "-m", "mrr@10", "--per-query")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == f"{run} against {qrels}: relevance level 1, exponential gain; ids: as given (no mapping)"
    assert lines[2].split("|")[1:3] == [" query ", " mrr@10 "]
    assert any(line.startswith("| q1 ") and "0.5000" in line for line in lines)  # a at rank 2
    assert any(line.startswith("| q2 ") and "1.0000" in line for line in lines)
    assert not any(line.startswith("| qnone ") for line in lines)
    assert "n = 3 queries" in out


def test_json_shape(capsys: pytest.CaptureFixture[str], files: tuple[Path, Path]) -> None:
    payload = evaluate_json(capsys, files, "-m", "ndcg@3", "-m", "P@2", "--gain", "linear", "--per-query")
    assert isinstance(payload["aggregate"], dict) and isinstance(payload["per_query"], dict)
    assert list(payload["aggregate"]) == ["ndcg@3", "precision@2"]
    per_query = payload["per_query"]
    assert isinstance(per_query, dict)
    assert sorted(per_query) == ["q1", "q2", "q3"]
    # q1 ranking [x, a (2), b (1)]: linear DCG = 2/log2(3) + 1/2, IDCG = 2 + 1/log2(3)
    q1 = (2 / log2(3) + 1 / 2) / (2 + 1 / log2(3))
    assert per_query["q1"] == pytest.approx({"ndcg@3": q1, "precision@2": 1 / 2}, abs=1e-12)
    assert per_query["q2"] == {"ndcg@3": 1.0, "precision@2": 0.5}
    assert per_query["q3"] == {"ndcg@3": 0.0, "precision@2": 0.0}
    assert payload["aggregate"] == pytest.approx({"ndcg@3": (q1 + 1) / 3, "precision@2": (0.5 + 0.5) / 3}, abs=1e-12)
    assert payload["n"] == 3
    assert payload["unscorable"] == ["qnone"]
    assert payload["missing"] == ["q3"]
    assert payload["config"] == {"metrics": ["ndcg@3", "precision@2"], "relevance_level": 1, "gain": "linear",
                                 "id_separator": None, "dedup": "first"}


def test_default_gain_is_exponential(capsys: pytest.CaptureFixture[str], files: tuple[Path, Path]) -> None:
    payload = evaluate_json(capsys, files, "-m", "ndcg@3", "--per-query")
    # exponential gains: a (2) -> 3, b (1) -> 1: DCG = 3/log2(3) + 1/2, IDCG = 3 + 1/log2(3)
    assert payload["per_query"]["q1"]["ndcg@3"] == pytest.approx((3 / log2(3) + 1 / 2) / (3 + 1 / log2(3)), abs=1e-12)  # type: ignore[index]
    assert payload["config"]["gain"] == "exponential"  # type: ignore[index]


def test_default_metrics(capsys: pytest.CaptureFixture[str], files: tuple[Path, Path]) -> None:
    payload = evaluate_json(capsys, files)
    assert list(payload["aggregate"]) == ["recall@10", "hit_rate@10", "mrr@10", "ndcg@10"]  # type: ignore[arg-type]


def test_relevance_level(capsys: pytest.CaptureFixture[str], files: tuple[Path, Path]) -> None:
    payload = evaluate_json(capsys, files, "-m", "recall@3", "-m", "mrr@3", "--relevance-level", "2", "--per-query")
    # at level 2 only q1 (a: 2) has a relevant document; q2, q3 hold grade 1 only: scored as
    # trec_eval scores them (no relevant document, so recall and mrr 0); qnone has no positive grade
    assert payload["unscorable"] == ["qnone"]
    assert payload["below_level"] == ["q2", "q3"]
    assert payload["per_query"] == {"q1": {"recall@3": 1.0, "mrr@3": 0.5}, "q2": {"recall@3": 0.0, "mrr@3": 0.0},
                                    "q3": {"recall@3": 0.0, "mrr@3": 0.0}}
    assert payload["n"] == 3
    assert payload["config"]["relevance_level"] == 2  # type: ignore[index]


def test_skip_missing_versus_default_zero(capsys: pytest.CaptureFixture[str], files: tuple[Path, Path]) -> None:
    zero = evaluate_json(capsys, files, "-m", "hit_rate@3", "--per-query")
    assert zero["n"] == 3 and zero["missing"] == ["q3"]
    assert zero["per_query"]["q3"] == {"hit_rate@3": 0.0}  # type: ignore[index]
    assert zero["aggregate"] == {"hit_rate@3": 2 / 3}
    skip = evaluate_json(capsys, files, "-m", "hit_rate@3", "--per-query", "--skip-missing")
    assert skip["n"] == 2 and skip["missing"] == ["q3"]
    assert "q3" not in skip["per_query"]  # type: ignore[operator]
    assert skip["aggregate"] == {"hit_rate@3": 1.0}
    qrels, run = files
    _, out, _ = run_cli(capsys, "evaluate", "--qrels", str(qrels), "--run", str(run), "--skip-missing")
    assert "absent from the run (left out)" in out


def test_id_separator_maps_and_dedups(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    qrels = tmp_path / "qrels.tsv"
    run = tmp_path / "run.txt"
    qrels.write_text("q 0 guide 1\n", encoding="utf-8")
    run.write_text("q Q0 guide#1-3 1 0.9 s\nq Q0 guide#2-3 2 0.8 s\nq Q0 faq#1-1 3 0.7 s\n", encoding="utf-8")
    base = ["evaluate", "--qrels", str(qrels), "--run", str(run), "--format", "json", "-m", "recall@3", "-m", "P@3"]
    code, out, _ = run_cli(capsys, *base)
    assert code == 0 and json.loads(out)["aggregate"] == {"recall@3": 0.0, "precision@3": 0.0}  # off by default
    code, out, _ = run_cli(capsys, *base, "--id-separator", "#")
    assert code == 0 and json.loads(out)["aggregate"] == {"recall@3": 1.0, "precision@3": pytest.approx(1 / 3)}


def test_bad_run_file_exits_2_naming_file_and_line(capsys: pytest.CaptureFixture[str], files: tuple[Path, Path], tmp_path: Path) -> None:
    qrels, _ = files
    bad = tmp_path / "bad.run"
    bad.write_text("q1 Q0 a 1 0.8 sys\nq1 Q0 b 2 0.7\n", encoding="utf-8")
    code, out, err = run_cli(capsys, "evaluate", "--qrels", str(qrels), "--run", str(bad))
    assert code == 2
    assert out == ""
    assert err.startswith("ragmetrics evaluate: error: ")
    assert str(bad) in err and "line 2" in err and "expected 6 columns" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["-m", "ndcg@0"], "bad cutoff in 'ndcg@0'"),
        (["-m", "ndgc@10"], "unknown metric 'ndgc'"),
        (["-m", "ndcg@²"], "bad cutoff"),
        (["--relevance-level", "0"], "relevance level must be an integer >= 1"),
    ],
)
def test_bad_options_exit_2_without_traceback(capsys: pytest.CaptureFixture[str], files: tuple[Path, Path], args: list[str], fragment: str) -> None:
    qrels, run = files
    code, _, err = run_cli(capsys, "evaluate", "--qrels", str(qrels), "--run", str(run), *args)
    assert code == 2 and fragment in err and "Traceback" not in err


def test_bad_qrels_and_missing_files_exit_2(capsys: pytest.CaptureFixture[str], files: tuple[Path, Path], tmp_path: Path) -> None:
    qrels, run = files
    code, _, err = run_cli(capsys, "evaluate", "--qrels", str(tmp_path / "nope.tsv"), "--run", str(run))
    assert code == 2 and str(tmp_path / "nope.tsv") in err and "file not found" in err
    bad_qrels = tmp_path / "bad_qrels.tsv"
    bad_qrels.write_text("q1 a 1\nq1 b x\n", encoding="utf-8")
    code, _, err = run_cli(capsys, "evaluate", "--qrels", str(bad_qrels), "--run", str(run))
    assert code == 2 and str(bad_qrels) in err and "line 2" in err and "grade 'x' is not an integer" in err


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str], files: tuple[Path, Path]) -> None:
    qrels, run = files
    with pytest.raises(SystemExit) as info:
        main(["evaluate", "--qrels", str(qrels)])  # --run missing
    assert info.value.code == 2
    with pytest.raises(SystemExit) as info:
        main(["evaluate", "--qrels", str(qrels), "--run", str(run), "--gain", "cubic"])
    assert info.value.code == 2
    with pytest.raises(SystemExit) as info:
        main([])
    assert info.value.code == 2
    capsys.readouterr()


def _check_subprocess_output(proc: subprocess.CompletedProcess[str]) -> None:
    assert proc.returncode == 0, proc.stderr
    payload = json.loads(proc.stdout)
    assert payload["aggregate"] == {"hit_rate@3": 2 / 3}
    assert payload["n"] == 3


def test_python_dash_m_works(files: tuple[Path, Path]) -> None:
    qrels, run = files
    proc = subprocess.run(
        [sys.executable, "-m", "pytest_ragmetrics", "evaluate", "--qrels", str(qrels), "--run", str(run),
         "-m", "hit_rate@3", "--format", "json"],
        capture_output=True, text=True, timeout=60,
    )
    _check_subprocess_output(proc)


def test_console_script_works(files: tuple[Path, Path]) -> None:
    qrels, run = files
    script = Path(sys.executable).parent / ("ragmetrics.exe" if sys.platform == "win32" else "ragmetrics")
    assert script.is_file(), f"console script not installed next to {sys.executable}"
    proc = subprocess.run(
        [str(script), "evaluate", "--qrels", str(qrels), "--run", str(run), "-m", "hit_rate@3", "--format", "json"],
        capture_output=True, text=True, timeout=60,
    )
    _check_subprocess_output(proc)


def test_console_script_error_exit_code(tmp_path: Path) -> None:
    script = Path(sys.executable).parent / ("ragmetrics.exe" if sys.platform == "win32" else "ragmetrics")
    bad = tmp_path / "bad.run"
    bad.write_text("q1 Q0 a 1 notanumber sys\n", encoding="utf-8")
    qrels = tmp_path / "q.tsv"
    qrels.write_text("q1 a 1\n", encoding="utf-8")
    proc = subprocess.run([str(script), "evaluate", "--qrels", str(qrels), "--run", str(bad)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert f"{bad}, line 1: score 'notanumber' is not a number" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_relevance_level_above_one_scores_what_trec_eval_scores(tmp_path: Path) -> None:
    """A query graded only below the level keeps its nDCG (gain comes from every positive
    grade) and gets 0 for the level-based metrics, as trec_eval reports; the output says so."""
    import pytrec_eval

    qrels, run = tmp_path / "qrels.txt", tmp_path / "run.txt"
    qrels.write_text("lo 0 a 1\nlo 0 b 1\nhi 0 a 2\nhi 0 b 1\n")
    run.write_text("lo Q0 a 1 3.0 x\nlo Q0 c 2 2.0 x\nhi Q0 b 1 2.0 x\nhi Q0 a 2 1.0 x\n")
    names = {"ndcg@10": "ndcg_cut_10", "recall@10": "recall_10", "precision@10": "P_10",
             "hit_rate@10": "success_10", "mrr@10": "recip_rank", "map@10": "map_cut_10"}
    argv = [sys.executable, "-m", "pytest_ragmetrics", "evaluate", "--qrels", str(qrels), "--run", str(run),
            "--relevance-level", "2", "--gain", "linear"]
    for name in names:
        argv += ["-m", name]
    proc = subprocess.run([*argv, "--format", "json"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    payload = json.loads(proc.stdout)
    with open(qrels) as q, open(run) as r:
        evaluator = pytrec_eval.RelevanceEvaluator(pytrec_eval.parse_qrel(q), set(names.values()), relevance_level=2)
        theirs = evaluator.evaluate(pytrec_eval.parse_run(r))
    assert sorted(payload["per_query"]) == sorted(theirs) == ["hi", "lo"]
    for qid, row in theirs.items():
        for ours, trec in names.items():
            assert abs(payload["per_query"][qid][ours] - row[trec]) <= 1e-9, (qid, ours)
    assert payload["per_query"]["lo"]["ndcg@10"] > 0 and payload["per_query"]["lo"]["recall@10"] == 0
    assert payload["below_level"] == ["lo"] and payload["unscorable"] == []

    table = subprocess.run(argv, capture_output=True, text=True, timeout=60).stdout
    assert "1 query has no document at level 2, only lower grades, e.g. 'lo': scored as trec_eval" in table


def test_the_version_is_written_once_in_pyproject(capsys: pytest.CaptureFixture[str]) -> None:
    """``__version__`` and ``ragmetrics --version`` read the installed metadata, which pyproject.toml
    writes; after changing the version there, reinstall (``pip install -e .``) to refresh it."""
    import importlib.metadata
    import re

    import pytest_ragmetrics

    pyproject = (Path(__file__).resolve().parent.parent / "pyproject.toml").read_text(encoding="utf-8")
    declared = re.search(r'^version = "([^"]+)"$', pyproject, re.MULTILINE)
    assert declared is not None
    assert pytest_ragmetrics.__version__ == importlib.metadata.version("pytest-ragmetrics") == declared.group(1)
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out == f"ragmetrics {declared.group(1)}\n"


def test_console_script_prints_the_version() -> None:
    import importlib.metadata

    script = Path(sys.executable).parent / ("ragmetrics.exe" if sys.platform == "win32" else "ragmetrics")
    proc = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"ragmetrics {importlib.metadata.version('pytest-ragmetrics')}\n"
