"""The module-backed verbs are reachable through the one `ragmetrics` entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_ragmetrics.cli import main

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("verb", ["compare", "merge", "history", "agreement", "leakage", "sample", "shadow", "harvest"])
def test_verb_help_is_wired(verb: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([verb, "--help"])
    assert exit_info.value.code == 0
    assert f"ragmetrics {verb}" in capsys.readouterr().out


def test_compare_through_the_cli_gates(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def artifact(name: str, recall: float) -> Path:
        path = tmp_path / name
        path.write_text(json.dumps({"_meta": {"measurement": {"metrics": ["recall@10"]}}, "comparison": {}, "per_query": {
            "q1": {"status": "scored", "metrics": {"recall@10": recall}, "ranking": [], "tags": []},
            "q2": {"status": "scored", "metrics": {"recall@10": 1.0}, "ranking": [], "tags": []}}}))
        return path

    assert main(["compare", str(artifact("a.json", 1.0)), str(artifact("b.json", 0.0)), "--fail-on-regression"]) == 1
    assert "gate recall@10" in capsys.readouterr().out


def test_leakage_on_the_demo_finds_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["leakage", "--golden", str(REPO / "eval" / "golden.yaml"), "--corpus", str(REPO / "eval" / "corpus"),
                 "--fail"])
    assert code == 0
    assert "0 of 77" in capsys.readouterr().out


def test_errors_of_module_verbs_are_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["agreement", str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")]) == 2
    assert "a.jsonl" in capsys.readouterr().err
