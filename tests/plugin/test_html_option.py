"""--rag-html writes the self-contained report from the judging process."""

from __future__ import annotations

import pytest

from ragproject import RagProject, rag_summary


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


def test_markdown_summary_is_appended_to_the_github_step_summary(
        baselined: RagProject, monkeypatch: pytest.MonkeyPatch) -> None:
    summary = baselined.pytester.path / "step_summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    baselined.answer(**{"q-003": ["rim-wear", "unrelated"]})
    result = baselined.run()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    text = summary.read_text()
    assert text.startswith("earlier step\n")  # appended, never replaced
    assert "## Retrieval gate: failed" in text
    assert "| 1 | q-003 | why do my brakes squeal |" in text


def test_rag_markdown_path_on_a_passing_run(baselined: RagProject, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    out = baselined.pytester.path / "summary.md"
    result = baselined.run(f"--rag-markdown={out}")
    assert result.ret == pytest.ExitCode.OK
    assert out.read_text().startswith("## Retrieval gate: passed")


def test_gate_summary_warns_about_questions_found_in_the_corpus(baselined: RagProject) -> None:
    corpus = baselined.pytester.path / "corpus"
    corpus.mkdir()
    (corpus / "tire-repair.md").write_text(
        "# Tire repair\n\nHow do I fix a flat tire on the road? Carry a spare tube and levers.\n")
    (corpus / "chains.md").write_text("# Chains\n\nA worn chain skips under load and wears the cassette.\n")
    for doc in ("tube-patch", "chain-clean", "chain-lube", "brake-cable", "brake-pads", "derailleur",
                "shifter-cable", "tire-pressure", "cassette", "degreaser"):  # every gold document is there
        (corpus / f"{doc}.md").write_text(f"# {doc}\n\nAbout {doc.replace('-', ' ')}.\n")
    result = baselined.run(f"--rag-corpus={corpus}")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()  # a warning, not a failure
    summary = rag_summary(result)
    assert "WARNING: 1 of 6 golden questions appear verbatim or nearly so" in summary
    assert "q-001 (tire-repair, verbatim 1.00)" in summary

    # a refresh says it too: the baseline it writes now holds the copied question's score
    refreshed = baselined.run(f"--rag-corpus={corpus}", "--rag-update-baseline")
    assert refreshed.ret == pytest.ExitCode.OK, refreshed.stdout.str()
    summary = rag_summary(refreshed)
    assert summary.count("WARNING: 1 of 6 golden questions appear verbatim or nearly so") == 1
    assert "q-001 (tire-repair, verbatim 1.00)" in summary


def test_no_leakage_warning_without_a_match_or_a_corpus(baselined: RagProject) -> None:
    corpus = baselined.pytester.path / "corpus"
    corpus.mkdir()
    (corpus / "chains.md").write_text("# Chains\n\nA worn chain skips under load and wears the cassette.\n")
    # (this corpus lacks the gold documents: that warning is another one)
    assert "verbatim" not in rag_summary(baselined.run(f"--rag-corpus={corpus}"))
    assert "WARNING" not in rag_summary(baselined.run())


def test_a_corpus_that_does_not_exist_is_a_usage_error(baselined: RagProject) -> None:
    # a typo must not switch the leakage check off with a line at the end of a green run
    result = baselined.run("--rag-corpus=nope")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"--rag-corpus / rag_corpus: {baselined.pytester.path / 'nope'}: no such corpus file or folder" in \
        result.stderr.str()
