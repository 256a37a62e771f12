"""A retried shard is named: each run records which attempt of it wrote the artifact (``_meta.attempt``),
and ``ragmetrics merge`` names every shard a re-run made in each of its outputs, and refuses the same
shard from two attempts."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from ragproject import RagProject, no_traceback

from pytest_ragmetrics._plugin.options import OPTIONS, build_options
from pytest_ragmetrics.cli import main
from pytest_ragmetrics.errors import RagMetricsError
from pytest_ragmetrics.gate.artifact import ArtifactError, load_artifact, seal_artifact

_CI = ("GITHUB_RUN_ID", "GITHUB_RUN_ATTEMPT", "CI_PIPELINE_ID", "BUILDKITE_BUILD_ID", "BUILDKITE_RETRY_COUNT",
       "CIRCLE_WORKFLOW_ID", "BUILD_TAG")


@pytest.fixture
def no_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _CI:
        monkeypatch.delenv(name, raising=False)


def _meta(project: RagProject, name: str) -> dict[str, Any]:
    return json.loads((project.path / name).read_text(encoding="utf-8"))["_meta"]


def _merge(project: RagProject, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
           *args: str) -> tuple[int, str, str]:
    monkeypatch.chdir(project.path)
    capsys.readouterr()
    code = main(["merge", *args])
    out, err = capsys.readouterr()
    return code, out, err


def _options(flag: str | None, monkeypatch: pytest.MonkeyPatch, **environ: str) -> Any:
    for name in _CI:
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    def get(name: str, ini: str) -> Any:  # the declared defaults, --rag-attempt as given
        if name == "rag_attempt":
            return flag
        if name:
            spec = next(s for s in OPTIONS if s.flag and s.dest == name)
            return False if spec.switch else spec.flag_default
        return next(s.ini_default for s in OPTIONS if s.ini == ini)

    return build_options(get, lambda value, cli: Path(value)).attempt


def test_the_attempt_comes_from_the_flag_or_the_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _options(None, monkeypatch) is None  # outside a CI that names one: not recorded
    assert _options(None, monkeypatch, GITHUB_RUN_ID="7001", GITHUB_RUN_ATTEMPT="3") == 3
    assert _options(None, monkeypatch, BUILDKITE_BUILD_ID="b-1", BUILDKITE_RETRY_COUNT="0") == 1  # counts retries
    assert _options(None, monkeypatch, BUILDKITE_RETRY_COUNT="2") == 3
    assert _options(None, monkeypatch, CI_PIPELINE_ID="55") is None  # GitLab names no attempt
    assert _options("2", monkeypatch, GITHUB_RUN_ATTEMPT="5") == 2  # the flag wins
    for bad in ("0", "-1", "two", "1.5"):
        with pytest.raises(RagMetricsError, match=r"--rag-attempt must be an integer >= 1, got"):
            _options(bad, monkeypatch)
    with pytest.raises(RagMetricsError, match=r"--rag-attempt was given an empty value \(an unset variable\?\)"):
        _options(" ", monkeypatch)
    for name, value in (("GITHUB_RUN_ATTEMPT", "0"), ("GITHUB_RUN_ATTEMPT", "first"), ("BUILDKITE_RETRY_COUNT", "-1")):
        with pytest.raises(RagMetricsError, match=rf"{name} is '{value}', not a run attempt .*--rag-attempt N"):
            _options(None, monkeypatch, **{name: value})


def test_a_run_records_its_attempt_in_its_artifact(baselined: RagProject, no_ci: None,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    baselined.run("--rag-report=plain.json")
    assert "attempt" not in _meta(baselined, "plain.json")
    monkeypatch.setenv("GITHUB_RUN_ID", "7001")
    monkeypatch.setenv("GITHUB_RUN_ATTEMPT", "2")
    result = baselined.run("--rag-shard=1/2", "--rag-report=shard1.json")
    assert result.ret == pytest.ExitCode.OK
    assert _meta(baselined, "shard1.json")["attempt"] == 2
    assert any(line.startswith("ragmetrics: shard 1/2 (attempt 2): ") for line in result.outlines)
    baselined.run("--rag-report=whole.json", "--rag-attempt=4")
    assert _meta(baselined, "whole.json")["attempt"] == 4
    assert "attempt" not in json.loads(baselined.baseline_path.read_text(encoding="utf-8"))["_meta"]
    monkeypatch.setenv("GITHUB_RUN_ATTEMPT", "x")
    for args, message in (((), "GITHUB_RUN_ATTEMPT is 'x', not a run attempt (a whole number >= 1); pass "
                                "--rag-attempt N"),
                          (("--rag-attempt=0",), "--rag-attempt must be an integer >= 1, got '0'")):
        refused = baselined.run(*args)
        no_traceback(refused)
        assert refused.ret == pytest.ExitCode.USAGE_ERROR
        assert f"ERROR: ragmetrics: {message}" in refused.stderr.str()


def _retried_run(project: RagProject, monkeypatch: pytest.MonkeyPatch) -> None:
    """Shard 1/2 passes at attempt 1; shard 2/2 is re-run ("Re-run failed jobs"): attempt 2."""
    monkeypatch.setenv("GITHUB_RUN_ID", "7001")
    monkeypatch.setenv("GITHUB_RUN_ATTEMPT", "1")
    project.run("--rag-shard=1/2", "--rag-report=shard1.json")
    project.answer(q_001=["noise-doc"], q_002=["noise-doc"], q_003=["noise-doc"], q_004=["noise-doc"],
                   q_005=["noise-doc"], q_006=["noise-doc"])
    assert project.run("--rag-shard=2/2", "--rag-report=shard2.json").ret == pytest.ExitCode.TESTS_FAILED
    (project.path / "shard2.json").rename(project.path / "shard2-attempt1.json")
    project.restore()  # the flaky regression is gone at the re-run
    monkeypatch.setenv("GITHUB_RUN_ATTEMPT", "2")
    assert project.run("--rag-shard=2/2", "--rag-report=shard2.json").ret == pytest.ExitCode.OK


def test_merge_names_a_retried_shard_in_every_output(baselined: RagProject, no_ci: None,
                                                     capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    _retried_run(baselined, monkeypatch)
    code, out, err = _merge(baselined, capsys, monkeypatch, "shard1.json", "shard2.json", "--out", "run.json",
                            "--markdown", "summary.md", "--html", "report.html")
    assert (code, err) == (0, "")  # green, as the retry passed: but not without a word
    n1 = len(json.loads((baselined.path / "shard1.json").read_text(encoding="utf-8"))["shard"]["queries"])
    warning = ("WARNING: retried shard: 2/2 is attempt 2 (shard2.json); 1/2 attempt 1. A shard re-run until it "
               "passes can hide a flaky regression that failed an earlier attempt")
    lines = out.splitlines()
    assert lines[0].startswith(f"Merged 2 shards of 6 queries from golden.yaml: 1/2 shard1.json ({n1}, attempt 1), "
                               f"2/2 shard2.json ({6 - n1}, attempt 2)")
    assert lines[1].startswith(warning)
    assert warning in (baselined.path / "summary.md").read_text(encoding="utf-8")
    assert warning in (baselined.path / "report.html").read_text(encoding="utf-8")
    data = load_artifact(baselined.path / "run.json")
    assert data["_meta"]["shards"] == [{"index": 1, "count": 2, "attempt": 1, "file": "shard1.json"},
                                       {"index": 2, "count": 2, "attempt": 2, "file": "shard2.json"}]
    assert data["_meta"]["retried"] == [2]
    assert "attempt" not in data["_meta"]  # each shard's is in _meta.shards
    # a merge of first attempts says nothing of retries
    monkeypatch.setenv("GITHUB_RUN_ATTEMPT", "1")
    baselined.run("--rag-shard=2/2", "--rag-report=shard2.json")
    code, out, _ = _merge(baselined, capsys, monkeypatch, "shard1.json", "shard2.json", "--out", "run.json")
    assert code == 0 and "retried" not in out
    assert load_artifact(baselined.path / "run.json")["_meta"]["retried"] == []


def test_merge_refuses_one_shard_from_two_attempts(baselined: RagProject, no_ci: None,
                                                  capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    _retried_run(baselined, monkeypatch)
    code, out, err = _merge(baselined, capsys, monkeypatch, "shard1.json", "shard2-attempt1.json", "shard2.json",
                            "--out", "run.json")
    assert (code, out) == (2, "")
    assert ("shard 2/2 is given twice, from two attempts of the run: shard2-attempt1.json (attempt 1) and "
            "shard2.json (attempt 2); give only the latest attempt of each shard (here shard2.json)") in err
    assert not (baselined.path / "run.json").exists()


def _resealed(path: Path, edit: Any) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    edit(data["_meta"])
    data["_meta"].pop("seal")
    path.write_text(json.dumps(seal_artifact(data)), encoding="utf-8")


@pytest.mark.parametrize("edit, where", [
    (lambda m: m.update(attempt=0), "_meta.attempt"),
    (lambda m: m.update(attempt=True), "_meta.attempt"),
    (lambda m: m.update(attempt="2"), "_meta.attempt"),
    (lambda m: m.update(retried=[]), "_meta.retried"),  # the retried shard made to read as a first attempt
    (lambda m: m.pop("retried"), "_meta.retried"),
    (lambda m: m.pop("shards"), "_meta.shards"),
    (lambda m: m["shards"][1].update(attempt=0), "_meta.shards[1]"),
    (lambda m: m["shards"][0].update(index=3), "_meta.shards[0]"),
], ids=["attempt-0", "attempt-true", "attempt-text", "retried-emptied", "retried-gone", "shards-gone",
        "shard-attempt-0", "shard-index-above-count"])
def test_the_artifact_schema_checks_attempts(baselined: RagProject, no_ci: None, capsys: pytest.CaptureFixture[str],
                                             monkeypatch: pytest.MonkeyPatch, edit: Any, where: str) -> None:
    _retried_run(baselined, monkeypatch)
    assert _merge(baselined, capsys, monkeypatch, "shard1.json", "shard2.json", "--out", "run.json")[0] == 0
    _resealed(baselined.path / "run.json", edit)
    with pytest.raises(ArtifactError, match=re.escape(f"run.json: {where} ")):
        load_artifact(baselined.path / "run.json")


def test_an_artifact_without_attempts_still_reads(baselined: RagProject, no_ci: None,
                                                  capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Artifacts written before attempts were recorded: a run's without ``attempt``, and shards without
    it merge (each shard's attempt null, none retried)."""
    result = baselined.run("--rag-report=run.json", "--rag-attempt=2")
    no_traceback(result)
    path = baselined.path / "run.json"
    _resealed(path, lambda m: m.pop("attempt"))
    assert "attempt" not in load_artifact(path)["_meta"]
    for i in (1, 2):
        baselined.run(f"--rag-shard={i}/2", f"--rag-report=shard{i}.json", "--rag-attempt=1")
        _resealed(baselined.path / f"shard{i}.json", lambda m: m.pop("attempt"))
    code, out, err = _merge(baselined, capsys, monkeypatch, "shard1.json", "shard2.json", "--out", "merged.json")
    assert (code, err) == (0, "") and "attempt" not in out
    assert [s["attempt"] for s in load_artifact(baselined.path / "merged.json")["_meta"]["shards"]] == [None, None]
