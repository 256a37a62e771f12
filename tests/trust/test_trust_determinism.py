"""Determinism: the same configuration gives byte-identical run artifacts and baselines
(the ``created`` timestamp aside), and serial and ``-n 2`` runs agree.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from demo_run import DemoRun
from ragproject import outcomes, rag_summary
from trust_helpers import TrustProject, clean_env

REPO = Path(__file__).resolve().parents[2]
#: ``_meta.created`` only (four spaces in): the artifact's ``_meta.baseline.created`` is the
#: baseline's own time, the same in both runs, and must be compared like the rest
_CREATED = re.compile(r'^ {4}"created": "[^"]*",?\n', flags=re.M)


#: an artifact's seal of its ``created`` (the baseline's own ``created`` is a time, not a digest)
_CREATED_SEAL = re.compile(r'^ {6}"created": "[0-9a-f]{16}",?\n', flags=re.M)


def _without_created(text: str) -> str:
    assert len(_CREATED.findall(text)) == 1, "expected exactly one created timestamp"
    return _CREATED_SEAL.sub("", _CREATED.sub("", text))


def _html_without_created(text: str, artifact: str) -> str:
    created = json.loads(artifact)["_meta"]["created"]
    assert created in text
    return text.replace(created, "<created>")


def _degraded(project: TrustProject) -> None:
    """A run with every kind of record: regressions, an error, an unscorable query, a new query."""
    project.thresholds({"max_regressed_queries": 1, "ndcg@10_tolerance": 0.05})
    project.answer(q_002=["chain-lube#1-2", "noise-doc"], q_004=["brake-pads", "tire-repair#3-3"],
                   q_005={"raise": "index shard offline"}, q_006=["degreaser", "cassette#2-2", "x", "chain-clean"])
    project.add_query({"id": "q-007", "question": "truing a wheel", "gold_chunks": {"spoke-tension": 0}},
                      ["spoke-tension"])
    project.add_query({"id": "q-008", "question": "bleeding hydraulic brakes", "gold_chunks": ["brake-bleed"]},
                      ["brake-bleed#2-3", "brake-pads"])


def test_two_runs_give_byte_identical_artifacts(baselined: TrustProject) -> None:
    _degraded(baselined)
    first = baselined.run("--rag-report=a.json", "--rag-html=a.html")
    second = baselined.run("--rag-report=b.json", "--rag-html=b.html")
    assert first.ret == second.ret == pytest.ExitCode.TESTS_FAILED
    assert outcomes(first) == outcomes(second)
    assert rag_summary(first) == rag_summary(second)
    a, b = ((baselined.path / f"{n}.json").read_text(encoding="utf-8") for n in "ab")
    assert _without_created(a) == _without_created(b)
    html_a, html_b = ((baselined.path / f"{n}.html").read_text(encoding="utf-8") for n in "ab")
    assert _html_without_created(html_a, a) == _html_without_created(html_b, b)
    artifact = json.loads(a)
    assert artifact["comparison"]["errored"] == ["q-005"] and artifact["comparison"]["unscorable"] == ["q-007"]


def test_two_baseline_updates_give_identical_baselines(project: TrustProject) -> None:
    project.answer(q_003=["rim-wear", "brake-pads#1-1"])
    for name in ("a", "b"):
        result = project.run("--rag-update-baseline", f"--rag-baseline=baselines/{name}.json")
        assert result.ret == pytest.ExitCode.OK
    a, b = ((project.path / "baselines" / f"{n}.json").read_text(encoding="utf-8") for n in "ab")
    assert _without_created(a) == _without_created(b)
    # and rewriting a baseline from an unchanged run changes only its timestamp
    before = _without_created(a)
    project.run("--rag-update-baseline", "--rag-baseline=baselines/a.json")
    assert _without_created((project.path / "baselines" / "a.json").read_text(encoding="utf-8")) == before


def _demo(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = clean_env(RAGMETRICS_HOME=str(home))
    return subprocess.run([sys.executable, "-m", "pytest", "--rag-eval", "-p", "no:cacheprovider", *args],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=900)


@pytest.mark.slow
def test_the_demo_is_deterministic_serial_and_under_xdist(tmp_path: Path, demo_cold: DemoRun,
                                                          warm_demo_home: Path) -> None:
    """The reference stack end to end (fresh index, then reused): the session's cold run
    (``demo_cold``), a serial and a ``-n 2`` run on a copy of the home it built give the same
    artifact, and two baseline updates the same baseline."""
    assert demo_cold.returncode == 0, demo_cold.stdout[-4000:] + demo_cold.stderr[-2000:]
    runs = {"cold": _without_created(demo_cold.report.read_text(encoding="utf-8"))}
    for name, extra in (("warm", []), ("xdist", ["-n", "2"])):
        proc = _demo(warm_demo_home, f"--rag-report={tmp_path / name}.json", *extra)
        assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
        runs[name] = _without_created((tmp_path / f"{name}.json").read_text(encoding="utf-8"))
    assert runs["cold"] == runs["warm"] == runs["xdist"]
    for name in ("a", "b"):
        proc = _demo(warm_demo_home, "--rag-update-baseline", f"--rag-baseline={tmp_path / name}.json")
        assert proc.returncode == 0, proc.stdout[-4000:]
    a, b = ((tmp_path / f"{n}.json").read_text(encoding="utf-8") for n in "ab")
    assert _without_created(a) == _without_created(b)
    committed = json.loads((REPO / "baselines" / "baseline.json").read_text(encoding="utf-8"))
    assert json.loads(a)["per_query"] == committed["per_query"]  # and it is the committed one
