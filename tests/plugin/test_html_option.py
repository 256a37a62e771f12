"""--rag-html writes the self-contained report from the judging process."""

from __future__ import annotations

import pytest

from ragproject import RagProject


def test_rag_html_writes_a_report_with_the_regressed_query(baselined: RagProject) -> None:
    baselined.answer(**{"q-003": ["rim-wear", "unrelated"]})
    out = baselined.pytester.path / "report.html"
    result = baselined.run(f"--rag-html={out}")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    page = out.read_text(encoding="utf-8")
    assert page.startswith("<!doctype html>")
    assert "q-003" in page and "why do my brakes squeal" in page
    assert "Gate failed" in page
    chart = page.split("Per-query change in recall@10", 1)[1].split("</svg>", 1)[0]
    assert chart.count("<rect") == 6  # one bar per query in both run and baseline


def test_separate_path_value_that_moves_the_rootdir_is_a_clear_usage_error(
        baselined: RagProject, tmp_path_factory: pytest.TempPathFactory) -> None:
    elsewhere = tmp_path_factory.mktemp("elsewhere") / "run.json"
    elsewhere.write_text("{}")
    result = baselined.run("--rag-report", str(elsewhere))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"write it as --rag-report={elsewhere}" in result.stderr.str()
