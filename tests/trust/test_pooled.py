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

from ragproject import GOLDEN, a_night_earlier, outcomes, rag_summary
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
    assert "gate unjudged: judge this 1 document: 1 query is inconclusive (q-004): it fell beyond tolerance" in summary
    assert "ragmetrics pool --run run.json --unjudged-only -o unjudged.jsonl" in summary
    assert re.search(r"To decide: 1 document to judge; write them out for annotation with `ragmetrics pool --run "
                     r"run\.json --unjudged-only -o unjudged\.jsonl --golden golden\.yaml`", summary), summary
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


def test_a_real_regression_in_a_pooled_set_is_still_regressed(pooled_baseline: TrustProject) -> None:
    project = pooled_baseline
    project.answer(q_004=["derailleur", "chain-lube"])  # chain-lube is judged for q-002, not for q-004: unjudged
    project.answer(q_002=["chain-lube#1-2", "noise-doc"])  # lost chain-clean, nothing new found in its place
    result = project.run()
    summary = rag_summary(result)
    assert outcomes(result)["golden.yaml::q-002"] == "failed"
    assert "inconclusive" not in [line.split(":")[0] for line in result.outlines if "q-002" in line]
    assert re.search(r"Worst regressed queries.*\n\s+1\. q-002", summary)
    # q-004 swapped a gold document for an unjudged one: inconclusive, not regressed
    assert "1 query is inconclusive (q-004)" in summary


def test_the_ini_option_overrides_the_file_and_goes_into_the_fingerprint(project: TrustProject) -> None:
    project.make_baseline()  # closed (the YAML default)
    project.ini(rag_judgments="pooled")
    result = project.run()
    assert result.ret != 0
    out = result.stdout.str() + result.stderr.str()
    assert "judgments: baseline 'closed', now 'pooled'" in out
    project.make_baseline()
    result = project.run()
    assert result.ret == 0
    assert "ragmetrics: judgments pooled (ini rag_judgments)" in result.stdout.str()
    assert project.baseline()["_meta"]["measurement"]["judgments"] == "pooled"
    assert outcomes(result)[GATE] == "passed"
    # the flag overrides the ini option
    result = project.run("--rag-judgments=closed")
    assert "judgments: baseline 'pooled', now 'closed'" in result.stdout.str() + result.stderr.str()


@pytest.mark.parametrize("where", ["ini", "yaml", "jsonl"])
def test_a_judgments_value_other_than_closed_or_pooled_is_refused_naming_where(project: TrustProject,
                                                                               where: str) -> None:
    import yaml

    if where == "ini":
        project.ini(rag_judgments="open")
        expected = "ini rag_judgments must be closed or pooled, got 'open'"
    elif where == "yaml":
        (project.path / "golden.yaml").write_text(
            yaml.safe_dump({"judgments": "Pooled", "queries": project.records}), encoding="utf-8")
        expected = "golden.yaml, top-level key 'judgments': must be 'closed' or 'pooled', got 'Pooled'"
    else:
        lines = [{"_meta": {"judgments": True}}] + [
            {"qid": r["id"], "query": r["question"], "candidates": [{"doc_id": "x", "rel": 1}]} for r in GOLDEN]
        (project.path / "golden.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
        project.ini(rag_golden="golden.jsonl")
        expected = "golden.jsonl, line 1 (_meta.judgments): must be 'closed' or 'pooled', got True"
    result = project.run()
    assert result.ret == 4
    assert expected in result.stderr.str() + result.stdout.str()
    assert "Traceback" not in result.stderr.str() + result.stdout.str()


def test_a_jsonl_golden_set_is_pooled_by_default(project: TrustProject) -> None:
    lines = [{"qid": r["id"], "query": r["question"],
              "candidates": [{"doc_id": d, "rel": 1} for d in r["gold_chunks"]]} for r in GOLDEN]
    (project.path / "golden.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    project.ini(rag_golden="golden.jsonl")
    result = project.run()
    assert "ragmetrics: judgments pooled (default for JSONL candidates)" in result.stdout.str()
    assert "judged@10 = " in rag_summary(result)


def test_top_is_in_the_baseline_and_sealed(pooled_baseline: TrustProject) -> None:
    project = pooled_baseline
    data = project.baseline()
    assert data["per_query"]["q-002"]["_top"] == ["chain-lube", "noise-doc", "chain-clean"]
    data["per_query"]["q-002"]["_top"] = ["chain-lube", "chain-clean"]  # hide noise-doc: it would then read as new
    project.baseline_path.write_text(json.dumps(data), encoding="utf-8")
    result = project.run()
    assert result.ret == 4
    assert "per_query entries edited: q-002" in result.stdout.str() + result.stderr.str()


def test_a_top_that_breaks_the_schema_is_refused(pooled_baseline: TrustProject) -> None:
    from pytest_ragmetrics.cli import main

    project = pooled_baseline
    data = project.baseline()
    data["per_query"]["q-002"]["_top"] = ["chain-lube", "chain-lube"]
    project.baseline_path.write_text(json.dumps(data), encoding="utf-8")
    assert main(["baseline", "--reseal", str(project.baseline_path)]) == 2


def test_a_baseline_without_top_still_works_and_says_new_unjudged_needs_a_refresh(
        pooled_baseline: TrustProject) -> None:
    from pytest_ragmetrics.cli import main

    project = pooled_baseline
    data = project.baseline()
    for entry in data["per_query"].values():
        del entry["_top"]
    project.baseline_path.write_text(json.dumps(data), encoding="utf-8")
    assert main(["baseline", "--reseal", str(project.baseline_path)]) == 0
    found_unjudged(project)
    result = project.run()
    summary = rag_summary(result)
    assert "unjudged_new@10 = not known" in summary
    assert summary.count("a baseline refresh (--rag-update-baseline) adds _top") == 1
    # without the baseline's top k its numbers cannot be re-scored with hanger-alignment judged relevant,
    # so the swap of a gold document for it stays a regression until the refresh
    assert re.search(r"Worst regressed queries.*\n\s+1\. q-004", summary)
    project.restore()
    project.make_baseline()
    assert "_top" in project.baseline()["per_query"]["q-001"]
    assert "adds _top" not in rag_summary(project.run())


def test_two_bounds_are_shown_when_judged_is_under_one(pooled_baseline: TrustProject) -> None:
    summary = rag_summary(pooled_baseline.run())
    # q-001 returns tube-patch and q-002 noise-doc, q-003 rim-wear: unjudged, judged@10 < 1
    assert "Bounds of the gated metrics" in summary
    assert re.search(r"\| recall@10 \| 1\.0000 +\| 1\.0000 +\|", summary)


def test_junit_carries_judged_unjudged_new_and_the_inconclusive_verdict(pooled_baseline: TrustProject) -> None:
    project = pooled_baseline
    found_unjudged(project)
    project.run("--junitxml=junit.xml")
    xml = (project.path / "junit.xml").read_text(encoding="utf-8")
    case = re.search(r'<testcase[^>]*name="q-004".*?</testcase>', xml, re.S).group(0)
    assert '<property name="verdict" value="inconclusive"' in case
    assert '<property name="unjudged_new@10" value="1"' in case
    assert '<property name="judged@10" value="0.5"' in case


# ------------------------------------------------------------------ the command that fixes it


def test_pool_unjudged_only_writes_exactly_the_pairs_and_the_loop_closes(pooled_baseline: TrustProject,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_ragmetrics.annotate.judgments import JudgmentStore
    from pytest_ragmetrics.cli import main
    from pytest_ragmetrics.golden import load_golden
    from pytest_ragmetrics.tools.candidates import read_candidates

    project = pooled_baseline
    found_unjudged(project)
    result = project.run("--rag-report=run.json")
    assert outcomes(result)[GATE] == "failed"
    run, out = project.path / "run.json", project.path / "unjudged.jsonl"
    # by default exactly the pairs the gate asks to judge, as many as its message says
    capsys.readouterr()
    assert main(["pool", "--run", str(run), "--unjudged-only", "-o", str(out), "--seed", "1"]) == 0
    assert "Wrote " + str(out) + ": the 1 document gate unjudged asks to judge, for 1 query" in capsys.readouterr().out
    assert [(q.qid, c.doc_id) for q in read_candidates(out).questions for c in q.candidates] == \
           [("q-004", "hanger-alignment")]
    # --all: every unjudged document of the top k
    assert main(["pool", "--run", str(run), "--unjudged-only", "--all", "--golden", str(project.path / "golden.yaml"),
                 "-o", str(out), "--seed", "1", "--force"]) == 0
    pool = read_candidates(out)
    pairs = [(q.qid, c.doc_id) for q in pool.questions for c in q.candidates]
    assert pairs[0] == ("q-004", "hanger-alignment")  # the inconclusive query first
    assert sorted(pairs) == sorted([("q-004", "hanger-alignment"), ("q-001", "tube-patch"),
                                    ("q-002", "noise-doc"), ("q-003", "rim-wear")])
    # the annotator grades them (as `ragmetrics annotate` saves them): hanger-alignment is relevant
    store = JudgmentStore.open(project.path / "unjudged.alice.jsonl", pool, annotator="alice",
                               candidates_label="unjudged.jsonl", guidelines_sha256="")
    for qid, doc in pairs:
        store.judge(qid, doc, 1 if doc == "hanger-alignment" else 0)
    golden = project.path / "golden.yaml"
    assert main(["export", "--golden", str(golden), "--merge", str(project.path / "unjudged.alice.jsonl"),
                 "--golden-out", str(golden), "--force"]) == 0
    merged = load_golden(golden)
    assert merged.judgments == "pooled"
    assert merged["q-004"].judgments == {"derailleur": 1, "shifter-cable": 1, "hanger-alignment": 1}
    assert merged["q-001"].judgments["tube-patch"] == 0
    # the judgments changed, so the baseline is re-measured (with the old retriever, as on the main branch);
    # judged now, the document the new retriever found makes its drop no drop at all
    project.restore()
    project.make_baseline("--rag-reason", "q-004 has a third relevant document now")
    found_unjudged(project)
    result = project.run()
    assert result.ret == 0, rag_summary(result)
    assert outcomes(result)[GATE] == "passed"


def test_pool_unjudged_only_with_nothing_unjudged_says_so_and_exits_0(project: TrustProject,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_ragmetrics.cli import main

    pooled(project)
    project.answer(q_001=["tire-repair"], q_002=["chain-lube", "chain-clean"], q_003=["brake-pads"])
    project.make_baseline("--rag-report=run.json")
    out = project.path / "none.jsonl"
    capsys.readouterr()
    assert main(["pool", "--run", str(project.path / "run.json"), "--unjudged-only", "--golden",
                 str(project.path / "golden.yaml"), "-o", str(out)]) == 0
    assert "No unjudged documents" in capsys.readouterr().out
    assert not out.exists()


def test_pool_unjudged_only_refuses_a_file_that_is_not_a_run_artifact(pooled_baseline: TrustProject,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_ragmetrics.cli import main

    project = pooled_baseline
    code = main(["pool", "--run", str(project.baseline_path), "--unjudged-only", "-o", str(project.path / "x.jsonl")])
    assert code == 2
    err = capsys.readouterr().err
    assert "not a run artifact: it is a baseline" in err
    assert "Traceback" not in err


def test_pool_unjudged_only_finds_the_recorded_golden_set_from_another_folder(
        pooled_baseline: TrustProject, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """The artifact records golden.yaml relative to the project root: found from runs/ (the artifact's
    folder's parent), and when found nowhere the error names the paths tried and --golden."""
    import shutil

    from pytest_ragmetrics.cli import main
    from pytest_ragmetrics.tools.candidates import read_candidates

    project = pooled_baseline
    found_unjudged(project)
    (project.path / "runs").mkdir()
    result = project.run("--rag-report=runs/v2.json")
    assert outcomes(result)[GATE] == "failed"
    assert json.loads((project.path / "runs" / "v2.json").read_text())["_meta"]["golden"]["source"] == "golden.yaml"
    monkeypatch.chdir(project.path / "runs")
    capsys.readouterr()
    assert main(["pool", "--run", "v2.json", "--unjudged-only", "-o", "unjudged.jsonl", "--seed", "1"]) == 0, \
        capsys.readouterr().err
    assert f"--golden {project.path / 'golden.yaml'}" in capsys.readouterr().out
    pool = read_candidates(project.path / "runs" / "unjudged.jsonl")
    assert [(q.qid, c.doc_id) for q in pool.questions for c in q.candidates] == [("q-004", "hanger-alignment")]

    elsewhere = tmp_path_factory.mktemp("elsewhere")
    shutil.copy(project.path / "runs" / "v2.json", elsewhere / "v2.json")
    monkeypatch.chdir(elsewhere)
    assert main(["pool", "--run", "v2.json", "--unjudged-only", "-o", "unjudged.jsonl"]) == 2
    err = capsys.readouterr().err
    assert "v2.json: the golden set the run was judged with, golden.yaml (_meta.golden.source" in err, err
    assert f"tried golden.yaml (from the current directory), then {elsewhere / 'golden.yaml'} and the same " \
           f"under each folder above {elsewhere}; pass --golden PATH to name it" in err, err
    assert "Traceback" not in err and not (elsewhere / "unjudged.jsonl").exists()


def test_the_pool_command_the_gate_prints_names_the_golden_set(pooled_baseline: TrustProject) -> None:
    """The printed command works as printed, wherever the artifact's recorded golden set would resolve."""
    project = pooled_baseline
    found_unjudged(project)
    (project.path / "runs").mkdir()
    result = project.run("--rag-report=runs/v2.json")
    assert "gate unjudged: judge this 1 document" in rag_summary(result)
    assert "`ragmetrics pool --run runs/v2.json --unjudged-only -o unjudged.jsonl --golden golden.yaml`" \
        in rag_summary(result)


def test_pool_unjudged_only_says_how_many_candidates_have_no_text(
        pooled_baseline: TrustProject, capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_ragmetrics.cli import main

    project = pooled_baseline
    found_unjudged(project)
    project.run("--rag-report=run.json")
    run, out = str(project.path / "run.json"), str(project.path / "unjudged.jsonl")
    capsys.readouterr()
    assert main(["pool", "--run", run, "--unjudged-only", "--all", "-o", out]) == 0
    assert "4 candidates have no text; pass --corpus to annotate them." in capsys.readouterr().out
    corpus = with_corpus(project)
    assert main(["pool", "--run", run, "--unjudged-only", "--all", "-o", out, "--force", "--corpus",
                 str(corpus)]) == 0
    assert "no text" not in capsys.readouterr().out


# ------------------------------------------------------------------ everywhere


DOCS = ["tire-repair", "tube-patch", "chain-lube", "noise-doc", "chain-clean", "brake-pads", "rim-wear",
        "brake-cable", "derailleur", "shifter-cable", "tire-pressure", "cassette", "degreaser", "hanger-alignment"]


def with_corpus(project: TrustProject) -> Path:
    """A corpus folder holding every document the project's retriever returns, one text each."""
    corpus = project.path / "corpus"
    corpus.mkdir(exist_ok=True)
    for doc in DOCS:
        (corpus / f"{doc}.md").write_text(f"All about {doc.replace('-', ' ')}: the {doc} page of the manual.\n",
                                          encoding="utf-8")
    return corpus


def test_markdown_and_html_carry_judged_unjudged_new_inconclusive_and_the_documents_to_judge(
        pooled_baseline: TrustProject) -> None:
    project = pooled_baseline
    with_corpus(project)
    found_unjudged(project)
    result = project.run("--rag-corpus=corpus", "--rag-report=run.json", "--rag-markdown=summary.md",
                         "--rag-html=report.html")
    assert outcomes(result)[GATE] == "failed"
    # the terminal shows the snippet too
    assert "unjudged: hanger-alignment  'All about hanger alignment" in rag_summary(result)
    markdown = (project.path / "summary.md").read_text(encoding="utf-8")
    assert "### Judgments: pooled" in markdown
    assert re.search(r"judged@10 = 0\.\d{4} .*unjudged_new@10 = 1 ", markdown)
    assert "#### Inconclusive queries (1)" in markdown
    row = next(line for line in markdown.splitlines() if line.startswith("| 1 ") and "q-004" in line)
    assert "recall@10 1.0000 → 0.5000" in row
    assert "hanger-alignment (All about hanger alignment" in row
    assert "ragmetrics pool --run run.json --unjudged-only -o unjudged.jsonl --golden golden.yaml" in markdown
    assert "| recall@10 | 0.9167 " in markdown  # the bounds table: judged@10 < 1
    assert "Worst regressed queries" not in markdown
    html = (project.path / "report.html").read_text(encoding="utf-8")
    assert "<h2>Judgments: pooled</h2>" in html and "unjudged_new@10 = 1 " in html
    assert "<h2>Inconclusive queries (1)</h2>" in html
    assert "<code>hanger-alignment</code> <span class=note>All about hanger alignment" in html
    assert "unjudged at the top grade" in html
    assert "ragmetrics pool --run run.json --unjudged-only -o unjudged.jsonl" in html


def test_a_closed_set_has_no_pooled_part_in_markdown_or_html(project: TrustProject) -> None:
    project.make_baseline()
    project.run("--rag-markdown=summary.md", "--rag-html=report.html")
    assert "Judgments: pooled" not in (project.path / "summary.md").read_text(encoding="utf-8")
    assert "Judgments: pooled" not in (project.path / "report.html").read_text(encoding="utf-8")


def test_compare_shows_both_runs_pooled_counts_and_keeps_an_inconclusive_query_out_of_regressed(
        pooled_baseline: TrustProject, capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_ragmetrics.cli import main

    project = pooled_baseline
    assert project.run("--rag-report=a.json").ret == 0
    found_unjudged(project)
    assert project.run("--rag-report=b.json").ret == 1
    a, b = str(project.path / "a.json"), str(project.path / "b.json")
    capsys.readouterr()
    assert main(["compare", a, b, "--fail-on-regression"]) == 1
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if line.startswith("Judgments: "))
    assert re.fullmatch(r"Judgments: A: pooled, judged@10 0\.\d{4}, 0 inconclusive, 3 unjudged in the top 10 "
                        r"\(0 new\); B: pooled, judged@10 0\.\d{4}, 1 inconclusive \(q-004\), 4 unjudged in the top "
                        r"10 \(1 new\)", line), line
    assert "gate unjudged: judge this 1 document: 1 query is inconclusive (q-004): it fell beyond tolerance" in out
    assert f"ragmetrics pool --run {b} --unjudged-only -o unjudged.jsonl --golden golden.yaml" in out
    assert "Inconclusive: q-004: judge hanger-alignment" in out
    assert "gate regressed-queries" not in out and "Worst regressed" not in out
    assert main(["compare", a, b, "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["regressed"] == [] and [r["qid"] for r in data["inconclusive"]] == ["q-004"]
    assert data["to_judge"] == [["q-004", "hanger-alignment"]]
    assert data["pooled"]["A"]["inconclusive"] == [] and data["pooled"]["B"]["inconclusive"] == ["q-004"]
    assert data["pooled"]["B"]["unjudged"] == 4 and data["pooled"]["B"]["unjudged_new"] == 1
    assert data["pooled"]["B"]["judged"] == pytest.approx(json.loads(Path(b).read_text())["comparison"]["judged"])


def test_history_shows_judged_and_the_inconclusive_count_per_night(
        pooled_baseline: TrustProject, capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_ragmetrics.cli import main

    project = pooled_baseline
    assert project.run("--rag-report=night1.json").ret == 0
    a_night_earlier(project.path / "night1.json")  # another night: another created time
    found_unjudged(project)
    assert project.run("--rag-report=night2.json").ret == 1
    nights = [str(project.path / "night1.json"), str(project.path / "night2.json")]
    judged = [json.loads(Path(n).read_text(encoding="utf-8"))["comparison"]["judged"] for n in nights]
    capsys.readouterr()
    for fmt in ("text", "markdown"):
        assert main(["history", *nights, "--format", fmt]) == 0
        out = capsys.readouterr().out
        header = next(line for line in out.splitlines() if "| run " in line)
        assert re.search(r"\| judged@10 +\| inconclusive +\|$", header.rstrip()), header
        first = next(line for line in out.splitlines() if line.startswith("| #1 "))
        second = next(line for line in out.splitlines() if line.startswith("| #2 "))
        assert re.search(rf"\| {judged[0]:.4f} +\| 0 +\|$", first.rstrip()), first
        assert re.search(rf"\| {judged[1]:.4f} +\| 1 \(1 to judge\) +\|$", second.rstrip()), second
    assert main(["history", *nights, "--format", "json"]) == 0
    runs = json.loads(capsys.readouterr().out)["groups"][0]["runs"]
    assert [r["pooled"]["inconclusive"] for r in runs] == [[], ["q-004"]]
    assert [r["pooled"]["judged"] for r in runs] == judged
    html = project.path / "history.html"
    assert main(["history", *nights, "--html", str(html)]) == 0
    page = html.read_text(encoding="utf-8")
    assert "<th>judged@10</th><th>inconclusive</th>" in page
    assert "<td class=num>1 (1 to judge)</td>" in page


def test_a_pooled_run_under_xdist_gives_the_serial_verdict_judged_and_unjudged_counts(
        pooled_baseline: TrustProject) -> None:
    pytest.importorskip("xdist", reason="pytest-xdist is in the dev extra, which CI installs")
    project = pooled_baseline
    found_unjudged(project)
    serial = project.run("--rag-report=serial.json")
    pooled_run = project.run_subprocess("-n", "2", "--rag-report=xdist.json")
    assert serial.ret == pooled_run.ret == 1
    assert outcomes(pooled_run)[GATE] == outcomes(serial)[GATE] == "failed"
    assert outcomes(pooled_run)["golden.yaml::q-004"] == outcomes(serial)["golden.yaml::q-004"] == "failed"
    assert "gate unjudged: judge this 1 document: 1 query is inconclusive (q-004): it fell beyond tolerance" in rag_summary(pooled_run)
    one, two = (json.loads((project.path / f"{n}.json").read_text(encoding="utf-8")) for n in ("serial", "xdist"))
    for key in ("judged", "unjudged_new", "upper", "to_judge", "regressed"):
        assert two["comparison"][key] == one["comparison"][key], key
    assert [r["qid"] for r in two["comparison"]["inconclusive"]] == ["q-004"]
    assert {q: e["unjudged"] for q, e in two["per_query"].items()} == \
           {q: e["unjudged"] for q, e in one["per_query"].items()}
    assert {q: e["_top"] for q, e in two["per_query"].items()} == {q: e["_top"] for q, e in one["per_query"].items()}
