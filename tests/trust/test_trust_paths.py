"""Path options fail closed: an empty value is refused however it is given, and no output of a run
is ever one of its inputs. Each case is a real ``pytest --rag-eval`` session that must stop with
a usage error (exit code 4) before anything is retrieved or written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from trust_helpers import TrustProject, assert_usage_error, snapshot

from pytest_ragmetrics._plugin.options import PATH_OPTIONS

FLAGS = [f"--{dest.replace('_', '-')}" for dest, _, _ in PATH_OPTIONS]
INI_KEYS = [ini for _, ini, _ in PATH_OPTIONS if ini]


def _refused_before_anything(project: TrustProject, *args: str) -> str:
    before = snapshot(project.path)
    result = project.run(*args)
    assert project.calls() == []
    assert snapshot(project.path) == before
    return assert_usage_error(result)


def test_every_path_option_is_checked_here() -> None:
    """The options table's path options are the ones these tests cover (a new one joins PATH_OPTIONS)."""
    from pytest_ragmetrics._plugin.options import OPTIONS

    path_flags = {spec.flag for spec in OPTIONS if spec.metavar == "PATH"}
    assert path_flags == set(FLAGS)


# ------------------------------------------------------------------ empty values


@pytest.mark.parametrize("value", ["", "  "])
@pytest.mark.parametrize("flag", FLAGS)
def test_an_empty_flag_value_is_refused(baselined: TrustProject, flag: str, value: str) -> None:
    message = _refused_before_anything(baselined, f"{flag}={value}")
    assert f"{flag} was given an empty path (an unset variable?)" in message
    assert "never read as the default" in message


@pytest.mark.parametrize("ini", INI_KEYS)
def test_an_empty_ini_value_in_the_ini_file_is_refused(baselined: TrustProject, ini: str) -> None:
    baselined.ini(**{ini: ""})
    message = _refused_before_anything(baselined)
    assert f"{ini} in pytest.ini is an empty path (an unset variable?)" in message


@pytest.mark.parametrize("value", ["", "   "])
@pytest.mark.parametrize("ini", INI_KEYS)
def test_an_empty_override_ini_value_is_refused(baselined: TrustProject, ini: str, value: str) -> None:
    message = _refused_before_anything(baselined, "-o", f"{ini}={value}")
    assert f"-o {ini}= is an empty path (an unset variable?)" in message


def test_an_empty_value_from_pytest_addopts_is_refused(baselined: TrustProject,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """`PYTEST_ADDOPTS="-o rag_thresholds=$THRESHOLDS"` with the variable unset in CI."""
    baselined.thresholds({"max_regressed_queries": 0})
    monkeypatch.setenv("PYTEST_ADDOPTS", f"{os.environ.get('PYTEST_ADDOPTS', '')} -o rag_thresholds=")
    message = _refused_before_anything(baselined)
    assert "-o rag_thresholds= is an empty path" in message
    assert "write 'defaults' to gate with the built-in defaults on purpose" in message


# ------------------------------------------------------------------ no output is an input


@pytest.mark.parametrize("args, needles", [
    (["--rag-report=baselines/baseline.json"], ["--rag-report", "baselines/baseline.json is the baseline"]),
    (["--rag-html=conftest.py"], ["--rag-html", "conftest.py is a project configuration file (conftest.py)"]),
    (["--rag-markdown=golden.yaml"], ["--rag-markdown", "golden.yaml is the golden set"]),
    (["--rag-report=pytest.ini"], ["--rag-report", "pytest.ini is the ini file"]),
    (["--rag-html=baselines/thresholds.json"], ["--rag-html", "baselines/thresholds.json is the thresholds file"]),
    (["--rag-report=sub/../golden.yaml"], ["--rag-report", "is the golden set"]),
    (["--rag-report=out.json", "--rag-html=out.json"], ["--rag-report and --rag-html are the same file"]),
    (["--rag-update-baseline", "--rag-baseline=golden.yaml"], ["--rag-update-baseline", "is the golden set"]),
    (["--junitxml=baselines/baseline.json"], ["--junitxml", "baselines/baseline.json is the baseline"]),
], ids=["report-baseline", "html-conftest", "markdown-golden", "report-ini", "html-thresholds", "dotdot",
        "two-outputs", "update-baseline-golden", "junitxml-baseline"])
def test_an_output_that_is_an_input_is_refused_before_anything(baselined: TrustProject, args: list[str],
                                                               needles: list[str]) -> None:
    baselined.thresholds({"max_regressed_queries": 0})
    (baselined.path / "sub").mkdir()
    before = snapshot(baselined.path)
    result = baselined.run(*args)
    assert_usage_error(result, *needles)
    assert baselined.calls() == []
    assert snapshot(baselined.path) == before


def test_an_output_through_a_symlink_to_an_input_is_refused(baselined: TrustProject) -> None:
    (baselined.path / "report.json").symlink_to(baselined.path / "golden.yaml")
    message = _refused_before_anything(baselined, "--rag-report=report.json")
    assert "--rag-report" in message and "is the golden set" in message


def test_a_thresholds_file_beside_the_baseline_is_an_input_even_when_absent(baselined: TrustProject) -> None:
    """A report written there would be read as the thresholds of the next run."""
    message = _refused_before_anything(baselined, "--rag-report=baselines/thresholds.json")
    assert "baselines/thresholds.json is the thresholds file" in message


def test_an_output_inside_the_corpus_folder_is_refused(baselined: TrustProject) -> None:
    """A report written into a folder corpus would become one of its documents."""
    corpus = baselined.path / "corpus"
    corpus.mkdir()
    (corpus / "tire-repair.md").write_text("Patch the tube.", encoding="utf-8")
    message = _refused_before_anything(baselined, "--rag-corpus=corpus", "--rag-markdown=corpus/report.md")
    assert "--rag-markdown" in message and "is inside the corpus" in message and "read whole" in message


def test_an_output_inside_a_folder_golden_set_is_refused(baselined: TrustProject) -> None:
    folder = baselined.path / "set"
    folder.mkdir()
    (folder / "queries.jsonl").write_text('{"qid": "q-001", "query": "how do I fix a flat tire"}\n', encoding="utf-8")
    (folder / "qrels.tsv").write_text("qid\tdoc_id\trel\nq-001\ttire-repair\t1\n", encoding="utf-8")
    message = _refused_before_anything(baselined, "--rag-golden=set", "--rag-report=set/qrels.tsv")
    assert "--rag-report" in message and "is inside the golden set" in message


def test_the_step_summary_is_an_output_too(baselined: TrustProject, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(baselined.path / "golden.yaml"))
    message = _refused_before_anything(baselined)
    assert "$GITHUB_STEP_SUMMARY" in message and "is the golden set" in message


def test_a_file_of_the_package_itself_is_refused(baselined: TrustProject) -> None:
    import pytest_ragmetrics

    target = Path(pytest_ragmetrics.__file__).resolve().parent / "report-written-by-a-test.html"
    try:
        message = _refused_before_anything(baselined, f"--rag-html={target}")
        assert "--rag-html" in message and "is a file of pytest-ragmetrics itself" in message
    finally:
        target.unlink(missing_ok=True)  # written only when the check is missing


def test_outputs_apart_from_the_inputs_are_written(baselined: TrustProject, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rule refuses only what it must: reports beside the inputs, and the step summary named twice."""
    summary = baselined.path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    result = baselined.run("--rag-report=reports/run.json", "--rag-html=reports/run.html", f"--rag-markdown={summary}")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-2000:]
    assert (baselined.path / "reports" / "run.json").is_file() and (baselined.path / "reports" / "run.html").is_file()
    assert summary.read_text(encoding="utf-8").count("## Retrieval gate: passed") == 1
