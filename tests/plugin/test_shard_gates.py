"""A shard's gate items (``--rag-shard I/N``) are never reported as passed: a shard holds part of the
set, and its gates are judged by ``ragmetrics merge``. They are skipped, with that reason, on the
terminal and in JUnit XML, serial and under xdist."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from ragproject import GATES_DEFAULT, RagProject, ids_with, no_traceback, rag_summary

from pytest_ragmetrics.cli import main

REASON = "judged by `ragmetrics merge` over every shard"


def _junit_gates(project: RagProject, name: str) -> dict[str, list[tuple[str, str | None]]]:
    """gate name -> the (tag, message) of each child of its JUnit test case."""
    root = ET.parse(project.path / name).getroot()
    return {case.get("name", ""): [(child.tag, child.get("message")) for child in case]
            for case in root.iter("testcase") if case.get("classname", "").endswith(".gate")}


def _skip_lines(result: pytest.RunResult) -> list[str]:
    return sorted(line for line in result.outlines if line.startswith("SKIPPED "))


def _check_skipped_gates(project: RagProject, result: pytest.RunResult, junit: str) -> None:
    no_traceback(result)
    assert result.ret == pytest.ExitCode.OK
    assert not [n for n in ids_with(result, "passed") + ids_with(result, "failed") if "::gate::" in n]
    gates = [n.rpartition("::")[2] for n in GATES_DEFAULT]
    assert _skip_lines(result) == sorted(f"SKIPPED [1] golden.yaml: rag gate {g}: {REASON}" for g in gates)
    assert _junit_gates(project, junit) == {g: [("skipped", f"rag gate {g}: {REASON}")] for g in gates}
    assert result.parseoutcomes()["skipped"] == len(gates)


def test_a_shards_gate_items_are_skipped_never_passed(baselined: RagProject) -> None:
    result = baselined.run("--rag-shard=1/2", "--rag-report=shard1.json", "--junitxml=shard1.xml")
    _check_skipped_gates(baselined, result, "shard1.xml")
    assert "No query of this shard regressed or errored" in rag_summary(result)


def test_a_shards_gate_items_are_skipped_under_xdist(baselined: RagProject) -> None:
    """Under -n 2 the controller reported a shard's deferred gates as passed, in the log and in JUnit."""
    pytest.importorskip("xdist", reason="pytest-xdist is in the dev extra, which CI installs")
    result = baselined.run_subprocess("-n", "2", "--rag-shard=2/2", "--rag-report=shard2.json",
                                      "--junitxml=shard2.xml")
    assert "created: 2/2 workers" in result.stdout.str()
    _check_skipped_gates(baselined, result, "shard2.xml")


def test_a_shard_that_skipped_a_query_fails_and_merge_names_it(baselined: RagProject,
                                                               capsys: pytest.CaptureFixture[str],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A skipped query is not judged in a shard either: its baseline gate item fails (the others stay
    skipped), and the merge names the query with the skip's reason."""
    for name in ("GITHUB_RUN_ID", "GITHUB_RUN_ATTEMPT", "BUILDKITE_RETRY_COUNT"):
        monkeypatch.delenv(name, raising=False)
    baselined.conftest_text += ('\n\ndef pytest_collection_modifyitems(items):\n    for item in items:\n'
                                '        if item.name == "q-003":\n'
                                '            item.add_marker(pytest.mark.skip(reason="brake index offline"))\n')
    (baselined.path / "conftest.py").write_text(baselined.conftest_text, encoding="utf-8")
    results = [baselined.run(f"--rag-shard={i}/2", f"--rag-report=shard{i}.json") for i in (1, 2)]
    holding = next(r for r in results if "SKIPPED [1] golden.yaml: rag query q-003: brake index offline" in r.outlines)
    assert holding.ret == pytest.ExitCode.TESTS_FAILED
    assert ids_with(holding, "failed") == ["golden.yaml::gate::baseline"]
    assert "1 of 3 queries was skipped, so not judged: q-003 (brake index offline)" in rag_summary(holding)
    other = results[1 - results.index(holding)]
    assert other.ret == pytest.ExitCode.OK
    monkeypatch.chdir(baselined.path)
    capsys.readouterr()
    assert main(["merge", "shard1.json", "shard2.json"]) == 1
    out = capsys.readouterr().out
    assert "gate baseline: 1 of 6 queries was skipped, so not judged: q-003 (brake index offline)" in out
