"""Unjudged documents in a pooled golden set, through a real ``pytest --rag-eval`` session and the CLI.

A pooled set (``judgments: pooled``) holds judgments for the documents someone looked at; a
document it does not list is unjudged, not irrelevant. The gate then says what it does not know:
judged@k, unjudged_new@k, two bounds, and ``inconclusive`` for a drop that new unjudged documents
could explain (it fails the gate with "judge these N documents", and is never counted as regressed).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ragproject import GOLDEN, outcomes, rag_summary
from trust_helpers import TrustProject

GATE = "golden.yaml::gate::unjudged"


def pooled(project: TrustProject) -> TrustProject:
    """The project's golden set declared pooled at the top of golden.yaml."""
    import yaml

    (project.path / "golden.yaml").write_text(
        yaml.safe_dump({"judgments": "pooled", "queries": project.records}, sort_keys=False), encoding="utf-8")
    return project


@pytest.fixture
def pooled_baseline(project: TrustProject) -> TrustProject:
    pooled(project)
    project.make_baseline()
    return project


def found_unjudged(project: TrustProject) -> None:
    """q-001's retriever now ranks an unjudged document first and drops its gold to rank 2...
    and q-004 loses one of its two gold documents to an unjudged one (a recall drop)."""
    project.answer(q_004=["derailleur", "hanger-alignment"])


def test_a_yaml_set_is_closed_by_default_and_says_so(project: TrustProject) -> None:
    project.make_baseline()
    result = project.run()
    assert result.ret == 0
    assert "ragmetrics: judgments closed (default for YAML gold_chunks)" in result.stdout.str()
    assert GATE not in outcomes(result)
    assert "judged@" not in rag_summary(result)


def test_a_closed_set_calls_an_unjudged_find_a_regression(project: TrustProject) -> None:
    project.make_baseline()
    found_unjudged(project)
    result = project.run()
    assert outcomes(result)["golden.yaml::q-004"] == "failed"
    assert "inconclusive" not in result.stdout.str()


def test_a_pooled_set_calls_an_unjudged_find_inconclusive_and_fails_with_judge_these(
        pooled_baseline: TrustProject) -> None:
    project = pooled_baseline
    found_unjudged(project)
    result = project.run("--rag-report=run.json")
    out = result.stdout.str()
    assert result.ret == 1
    assert "ragmetrics: judgments pooled (golden.yaml judgments:)" in out
    assert outcomes(result)[GATE] == "failed"
    assert outcomes(result)["golden.yaml::q-004"] == "failed"
    assert "inconclusive: recall@10 fell 1.0000 -> 0.5000" in out
    summary = rag_summary(result)
    assert "gate unjudged: judge these 1 document: 1 query is inconclusive (q-004)" in summary
    assert "ragmetrics pool --run run.json --unjudged-only -o unjudged.jsonl" in summary
    assert re.search(r"unjudged: hanger-alignment", summary)
    # not a regression: the recall gate and the regressed list leave it to the unjudged gate
    assert outcomes(result)["golden.yaml::gate::recall@10"] == "passed"
    assert "Worst regressed" not in summary
    assert "unjudged_new@10 = 1" in summary
    data = json.loads((project.path / "run.json").read_text(encoding="utf-8"))
    assert data["per_query"]["q-004"]["unjudged"]["inconclusive"] is True
    assert data["per_query"]["q-004"]["unjudged"]["new"] == ["hanger-alignment"]
    assert data["per_query"]["q-004"]["_top"] == ["derailleur", "hanger-alignment"]
    assert [r["qid"] for r in data["comparison"]["inconclusive"]] == ["q-004"]
    assert data["comparison"]["regressed"] == []
