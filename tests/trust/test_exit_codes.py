"""One exit-code rule: a failed check exits 1, whatever happens to its output afterwards.

`ragmetrics compare A B --fail-on-regression | head -5` under `set -o pipefail` (GitHub's
`shell: bash`) takes the verb's exit code: a closed pipe, a full disk or an unwritable
report must never turn a failed verdict into a green step.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trust_helpers import FAST, TrustProject, clean_env

WORKTREE = Path(__file__).resolve().parents[2]


def env() -> dict[str, str]:
    """This checkout's package first, wherever the command runs (the plugin through its entry point)."""
    return {k: v for k, v in clean_env(PYTHONPATH=os.pathsep.join(filter(None, [str(WORKTREE), os.environ.get("PYTHONPATH")]))).items()
            if k != "PYTEST_DISABLE_PLUGIN_AUTOLOAD"}


def artifact(path: Path, first: float, n: int = 400) -> Path:
    """A run artifact long enough that its report overflows a pipe's buffer."""
    per_query = {f"q{i:03d}": {"status": "scored", "metrics": {"recall@10": first if i == 0 else 1.0},
                               "ranking": ["d1"], "tags": []} for i in range(n)}
    path.write_text(json.dumps({"_meta": {"measurement": {"metrics": ["recall@10"]}}, "comparison": {},
                                "per_query": per_query}), encoding="utf-8")
    return path


def closed_pipe_exit(cmd: list[str], cwd: Path) -> tuple[int, str]:
    """Run ``cmd`` with its stdout a pipe whose reader is gone before the first byte: its exit code."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd, env=env())
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    return proc.wait(timeout=120), err


@pytest.fixture
def regressed(tmp_path: Path) -> tuple[Path, Path]:
    return artifact(tmp_path / "a.json", 1.0), artifact(tmp_path / "b.json", 0.0)


def test_compare_keeps_its_failed_verdict_when_the_pipe_closes(regressed: tuple[Path, Path], tmp_path: Path) -> None:
    a, b = regressed
    cmd = [sys.executable, "-m", "pytest_ragmetrics", "compare", str(a), str(b), "--fail-on-regression"]
    code, err = closed_pipe_exit(cmd, tmp_path)
    assert code == 1, err
    assert "Traceback" not in err and "BrokenPipe" not in err
    # the same through a shell with pipefail, as GitHub's `shell: bash` runs a step
    shell = " ".join(cmd) + " | head -1"
    proc = subprocess.run(["bash", "-o", "pipefail", "-c", shell], capture_output=True, text=True, cwd=tmp_path,
                          env=env(), timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.startswith(f"{b} against {a}")
    # a passing comparison read by `head` is still a pass
    passing = " ".join([*cmd[:-3], str(a), str(a), "--fail-on-regression"]) + " | head -1"
    assert subprocess.run(["bash", "-o", "pipefail", "-c", passing], capture_output=True, cwd=tmp_path, env=env(),
                          timeout=120).returncode == 0


def test_a_full_disk_or_an_unwritable_report_does_not_hide_a_failed_verdict(regressed: tuple[Path, Path],
                                                                             tmp_path: Path) -> None:
    a, b = regressed
    base = [sys.executable, "-m", "pytest_ragmetrics", "compare", str(a)]
    if Path("/dev/full").exists():
        with open("/dev/full", "w") as full:
            failed = subprocess.run([*base, str(b), "--fail-on-regression"], stdout=full, stderr=subprocess.PIPE,
                                    text=True, env=env(), timeout=120)
            passed = subprocess.run([*base, str(a), "--fail-on-regression"], stdout=full, stderr=subprocess.PIPE,
                                    text=True, env=env(), timeout=120)
        assert failed.returncode == 1 and "No space left on device" in failed.stderr, failed.stderr
        assert "Traceback" not in failed.stderr
        assert passed.returncode == 2, passed.stderr  # a pass whose report was lost is not a pass
    html = a / "report.html"  # a folder that is a file
    proc = subprocess.run([*base, str(b), "--fail-on-regression", "--html", str(html)], capture_output=True,
                          text=True, env=env(), timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert f"cannot write the HTML report {html}" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("verb", ["history", "agreement", "leakage"])
def test_every_verb_with_a_check_keeps_its_code_on_a_closed_pipe(verb: str, tmp_path: Path) -> None:
    """Each verb decides its code before printing; a closed pipe used to make every one exit 0."""
    if verb == "history":
        for day, recall in enumerate((1.0, 0.98, 0.96, 0.94, 0.92), start=1):
            per_query = {"q1": {"status": "scored", "metrics": {"recall@10": recall}},
                         "q2": {"status": "scored", "metrics": {"recall@10": 1.0}}}
            (tmp_path / f"night-{day}.json").write_text(json.dumps({
                "_meta": {"measurement": {"metrics": ["recall@10"]}, "created": f"2025-01-0{day}T00:00:00+00:00",
                          "thresholds": {"source": "t.json", "values": {"recall@10_tolerance": 0.015}}},
                "per_query": per_query, "comparison": {}}))
        args = ["history", str(tmp_path), "--fail-on-drift"]
    elif verb == "agreement":
        for name, grades in (("alice", [1, 0, 1, 0]), ("bob", [0, 1, 0, 1])):
            lines = [{"qid": f"q{i}", "query": f"question {i}", "candidates": [{"doc_id": "d", "rel": g}]}
                     for i, g in enumerate(grades)]
            (tmp_path / f"{name}.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
        args = ["agreement", str(tmp_path / "alice.jsonl"), str(tmp_path / "bob.jsonl"), "--fail-below", "0.5",
                "--annotators", "alice,bob"]
    else:
        corpus = tmp_path / "corpus"
        corpus.mkdir()
        question = "how do I reset the router to its factory settings quickly"
        (corpus / "doc.md").write_text(f"Notes.\n\n{question}\n\nUnplug it first.\n")
        (tmp_path / "golden.yaml").write_text(f"- id: q1\n  question: {question}\n  gold_chunks: [doc]\n")
        args = ["leakage", "--golden", str(tmp_path / "golden.yaml"), "--corpus", str(corpus), "--fail"]
    cmd = [sys.executable, "-m", "pytest_ragmetrics", *args]
    assert subprocess.run(cmd, capture_output=True, env=env(), timeout=120).returncode == 1  # the check fails
    code, err = closed_pipe_exit(cmd, tmp_path)
    assert code == 1, err


def test_the_plugin_keeps_a_failed_verdict_when_its_output_pipe_closes(baselined: TrustProject) -> None:
    baselined.answer(q_001=["noise"], q_002=["noise"])
    cmd = [sys.executable, "-m", "pytest", "--rag-eval", "-rA", *FAST]
    full = subprocess.run(cmd, capture_output=True, text=True, cwd=baselined.path, env=env(), timeout=300)
    assert full.returncode == 1, full.stdout
    code, err = closed_pipe_exit(cmd, baselined.path)
    assert code != 0, err
    proc = subprocess.run(["bash", "-o", "pipefail", "-c", " ".join(cmd) + " | head -1"], capture_output=True,
                          text=True, cwd=baselined.path, env=env(), timeout=300)
    assert proc.returncode != 0, proc.stderr
