"""Failure harvesting with its bias visible, through the real surfaces.

Every golden record may say where its question came from (``source: log | curated | harvested |
variant``, curated by default); the run artifact records it per query; ``ragmetrics harvest`` turns
what nightly runs failed into candidates marked ``source: harvested``, which annotate's judgments and
``ragmetrics export`` keep; and the report gives per-source means and warns when harvested questions
exceed ``max_harvested_share`` of the golden set (they over-fit known failures).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from ragproject import GOLDEN, rag_summary
from ragproject import GOOD as GOLDEN_ANSWERS
from trust_helpers import TrustProject, no_traceback

from pytest_ragmetrics.cli import main
from pytest_ragmetrics.golden import load_golden

OVERFIT = "over-fits them"


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()  # what an in-process pytest run printed before
    code = main(list(args))
    out, err = capsys.readouterr()
    no_traceback(out + err)
    return code, out, err


# ---------------------------------------------------------------------------------- golden records


@pytest.mark.parametrize("suffix", [".yaml", ".jsonl", "folder"])
def test_every_golden_format_reads_source_and_defaults_to_curated(tmp_path: Path, suffix: str) -> None:
    if suffix == ".yaml":
        path = tmp_path / "g.yaml"
        path.write_text("- {id: a, question: qa, gold_chunks: [d1], source: log}\n"
                        "- {id: b, question: qb, gold_chunks: [d2]}\n", encoding="utf-8")
    elif suffix == ".jsonl":
        path = tmp_path / "g.jsonl"
        path.write_text('{"qid": "a", "query": "qa", "source": "log", "candidates": [{"doc_id": "d1", "rel": 1}]}\n'
                        '{"qid": "b", "query": "qb", "candidates": [{"doc_id": "d2", "rel": 1}]}\n', encoding="utf-8")
    else:
        path = tmp_path / "set"
        path.mkdir()
        (path / "queries.jsonl").write_text('{"qid": "a", "query": "qa", "source": "log"}\n'
                                            '{"qid": "b", "query": "qb"}\n', encoding="utf-8")
        (path / "qrels.tsv").write_text("a\td1\t1\nb\td2\t1\n", encoding="utf-8")
    golden = load_golden(path)
    assert [q.source for q in golden] == ["log", "curated"]
    assert golden.sources() == {"log": 1, "curated": 1}


@pytest.mark.parametrize("suffix,record,where", [
    (".yaml", "- {id: a, question: qa, gold_chunks: [d1], source: harvest}\n", "record 1 (line 1, id 'a')"),
    (".jsonl", '{"qid": "a", "query": "qa", "source": "Log", "candidates": [{"doc_id": "d1", "rel": 1}]}\n',
     "line 1 (qid 'a')"),
])
def test_a_source_outside_the_four_is_refused_naming_file_and_record(
        project: TrustProject, suffix: str, record: str, where: str) -> None:
    (project.path / f"golden{suffix}").write_text(record, encoding="utf-8")
    project.ini(rag_golden=f"golden{suffix}")
    result = project.run()
    out = result.stdout.str() + result.stderr.str()
    no_traceback(out)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"golden{suffix}" in out and where in out
    assert "source must be one of log, curated, harvested, variant" in out


def test_source_is_not_a_judgment_so_the_baseline_still_holds(baselined: TrustProject) -> None:
    project = baselined
    project.golden([{**r, "source": "variant"} for r in GOLDEN])
    result = project.run()
    assert result.ret == 0, result.stdout.str()


def test_export_keeps_source_in_yaml_and_jsonl(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "g.yaml"
    src.write_text("- {id: a, question: qa, gold_chunks: [d1], source: variant}\n"
                   "- {id: b, question: qb, gold_chunks: [d2]}\n", encoding="utf-8")
    for out in ("out.yaml", "out.jsonl"):
        code, _, _ = cli(capsys, "export", "--golden", str(src), "--golden-out", str(tmp_path / out))
        assert code == 0
        assert [q.source for q in load_golden(tmp_path / out)] == ["variant", "curated"]
    code, _, _ = cli(capsys, "export", "--golden", str(src), "--yaml-out", str(tmp_path / "appendable.yaml"))
    assert code == 0
    assert [q.source for q in load_golden(tmp_path / "appendable.yaml")] == ["variant", "curated"]


# ------------------------------------------------------------------------------------ thresholds


@pytest.mark.parametrize("value", [1.5, -0.1, "0.3", True, None])
def test_max_harvested_share_must_be_a_number_in_0_1(project: TrustProject, value: Any) -> None:
    path = project.thresholds({"max_harvested_share": value})
    result = project.run()
    out = result.stdout.str() + result.stderr.str()
    no_traceback(out)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert str(path.name) in out and "'max_harvested_share' must be a number in [0, 1]" in out


# ------------------------------------------------------------------------------ the whole chain


def _corpus(folder: Path, docs: list[str]) -> Path:
    folder.mkdir(exist_ok=True)
    for doc in docs:
        (folder / f"{doc}.md").write_text(f"# {doc}\n\nAbout {doc.replace('-', ' ')}.\n", encoding="utf-8")
    return folder


def test_failures_harvested_from_nightly_runs_reach_the_golden_set_and_the_report_warns(
        project: TrustProject, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Nightly runs over questions sampled from logs fail some; harvest, annotate and export bring them
    into the main golden set marked harvested; its report shows per-source means and the warning."""
    from pytest_ragmetrics.annotate import DEFAULT_GUIDELINES, JudgmentStore, Task, shown_questions
    from pytest_ragmetrics.tools.candidates import read_candidates

    monkeypatch.chdir(project.path)
    project.golden([{**r, "source": "log"} for r in GOLDEN])
    project.make_baseline()
    # night 1: q-002 loses its gold, q-004's retriever raises; night 2: only q-002 fails
    project.answer(q_002=["noise-doc", "chain-wax"], q_004={"raise": "index offline"})
    night1 = project.run("--rag-report=night1.json")
    assert night1.ret == 1
    project.answer(q_004=["derailleur", "shifter-cable"], q_002=["chain-wax", "noise-doc", "bottom-bracket"])
    night2 = project.run("--rag-report=night2.json")
    assert night2.ret == 1
    recorded = json.loads(Path("night2.json").read_text(encoding="utf-8"))["per_query"]
    assert {e["source"] for e in recorded.values()} == {"log"}

    corpus = _corpus(project.path / "corpus", ["noise-doc", "chain-wax", "bottom-bracket", "chain-lube",
                                               "chain-clean", "derailleur", "shifter-cable"])
    code, out, _ = cli(capsys, "harvest", "night1.json", "night2.json", "-o", "harvested.jsonl", "--seed", "3",
                       "--corpus", str(corpus))
    assert code == 0, out
    assert "Harvested 2 questions from 2 run artifacts (1 regressed, 1 errored" in out
    assert "q-002: failed on 2 of 2 runs (regressed)" in out
    assert "q-004: failed on 1 of 2 runs (errored)" in out
    lines = [json.loads(line) for line in Path("harvested.jsonl").read_text(encoding="utf-8").splitlines()]
    assert lines[0]["_meta"]["kind"] == "ragmetrics-candidates"
    q2, q4 = lines[1], lines[2]
    assert (q2["qid"], q4["qid"]) == ("q-002", "q-004")  # failed on more runs first
    assert q2["source"] == q4["source"] == "harvested"
    assert q2["harvest"] == {"failed": 2, "of": 2, "verdicts": ["regressed"], "runs": ["night1", "night2"]}
    found = {c["doc_id"]: c for c in q2["candidates"]}
    assert set(found) == {"noise-doc", "chain-wax", "bottom-bracket", "chain-lube", "chain-clean"}
    assert found["chain-wax"]["found_by"] == ["night1", "night2"]  # deduplicated across runs
    assert found["bottom-bracket"]["found_by"] == ["night2"]
    assert found["chain-lube"]["found_by"] == [] and found["chain-lube"]["rel"] == 1  # known gold kept
    assert {c["doc_id"] for c in q4["candidates"]} == {"derailleur", "shifter-cable"}  # errored: returned nothing

    # annotate: the task loader opens it, every candidate is graded, the judgments keep the source
    pool = read_candidates("harvested.jsonl")
    store = JudgmentStore.open("judgments.jsonl", pool, annotator="ann", candidates_label="harvested.jsonl",
                               guidelines_sha256="x")
    task = Task(shown_questions(pool), store, DEFAULT_GUIDELINES)
    gold = {"chain-lube", "chain-clean", "derailleur", "shifter-cable"}
    for q in pool.questions:
        for c in q.candidates:
            task.judge({"qid": q.qid, "doc_id": c.doc_id, "rel": 1 if c.doc_id in gold else 0})
    assert [q.source for q in load_golden("judgments.jsonl")] == ["harvested", "harvested"]

    # export --merge into the main set (curated questions only): the harvested ones join it, marked so
    main_records = [{k: v for k, v in r.items() if k != "source"} for r in GOLDEN
                    if r["id"] not in ("q-002", "q-004")]
    Path("main.yaml").write_text(yaml.safe_dump(main_records, sort_keys=False), encoding="utf-8")
    code, _, _ = cli(capsys, "export", "--golden", "main.yaml", "--merge", "judgments.jsonl", "--golden-out",
                     "main.yaml", "--force")
    assert code == 0
    merged = load_golden("main.yaml")
    assert merged.sources() == {"curated": 4, "harvested": 2}
    assert merged["q-002"].judgments == {"noise-doc": 0, "chain-wax": 0, "bottom-bracket": 0, "chain-lube": 1,
                                         "chain-clean": 1}

    # the report on the main set: per-source means, and the warning that says why (2 of 6 > 0.3)
    project.ini(rag_golden="main.yaml")
    project.restore()
    summary_file = project.path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary_file))
    result = project.run("--rag-update-baseline")
    assert result.ret == 0
    result = project.run("--rag-html=report.html", "--rag-report=main.json")
    assert result.ret == 0, result.stdout.str()
    summary = rag_summary(result)
    assert "All gates passed" in summary
    assert "WARNING: 2 of 6 golden questions (33%) are harvested failures (source: harvested), above " \
           "max_harvested_share 0.3" in summary
    assert OVERFIT in summary
    assert "Per source" in summary and "| curated" in summary and "| harvested" in summary
    markdown = summary_file.read_text(encoding="utf-8")
    assert "**Warning:** 2 of 6 golden questions (33%) are harvested failures" in markdown
    assert "<summary>Per source</summary>" in markdown
    html = (project.path / "report.html").read_text(encoding="utf-8")
    assert "2 of 6 golden questions (33%) are harvested failures" in html and "<h2>Per source</h2>" in html
    compare = json.loads(Path("main.json").read_text(encoding="utf-8"))["comparison"]
    assert set(compare["sources"]) == {"curated", "harvested"} and OVERFIT in compare["harvested"]
    code, out, _ = cli(capsys, "compare", "main.json", "main.json")  # the artifact's per-query source
    assert code == 0 and "| harvested" in out and "2 of 6 golden questions (33%) are harvested" in out

    # a share the team accepts on purpose: no warning, the per-source means stay
    project.thresholds({"max_harvested_share": 0.5})
    result = project.run()
    summary = rag_summary(result)
    assert OVERFIT not in summary and "Per source" in summary


def test_a_set_of_one_source_shows_no_source_table(baselined: TrustProject) -> None:
    summary = rag_summary(baselined.run())
    assert "Per source" not in summary and OVERFIT not in summary


def test_the_warning_shows_on_a_failing_run_too(project: TrustProject) -> None:
    project.golden([{**r, "source": "harvested"} if r["id"] in ("q-001", "q-002") else r for r in GOLDEN])
    project.make_baseline()
    project.answer(q_003=["noise-doc"])
    result = project.run()
    assert result.ret == 1
    summary = rag_summary(result)
    assert "RETRIEVAL GATE FAILED" in summary and "2 of 6 golden questions (33%) are harvested failures" in summary


# ------------------------------------------------------------------------------- harvest's inputs


def test_harvest_names_an_unreadable_or_foreign_file(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("broken.json").write_text("{not json", encoding="utf-8")
    Path("baseline.json").write_text(json.dumps({"_meta": {}, "aggregate": {}, "per_query": {}}), encoding="utf-8")
    for name, fragment in (("missing.json", "missing.json: file not found"),
                           ("broken.json", "broken.json, line 1"),
                           ("baseline.json", "not a run artifact: it is a baseline")):
        code, out, err = cli(capsys, "harvest", name, "-o", "h.jsonl")
        assert code == 2, (out, err)
        assert fragment in err, err
    assert not Path("h.jsonl").exists()


def test_harvest_refuses_artifacts_of_different_golden_sets(
        baselined: TrustProject, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    project = baselined
    monkeypatch.chdir(project.path)
    project.answer(q_002=["noise-doc"])
    assert project.run("--rag-report=a.json").ret == 1
    data = json.loads(Path("a.json").read_text(encoding="utf-8"))
    Path("other").mkdir()
    Path("other/golden.yaml").write_text(Path("golden.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    project.ini(rag_golden="other/golden.yaml")
    project.restore()
    project.make_baseline()
    project.answer(q_002=["noise-doc"])
    assert project.run("--rag-report=b.json").ret == 1
    assert data["_meta"]["golden"]["source"] == "golden.yaml"
    code, out, err = cli(capsys, "harvest", "a.json", "b.json", "-o", "h.jsonl")
    assert code == 2
    assert "the artifacts come from 2 golden sets" in err and "a.json ran 'golden.yaml'" in err
    assert "b.json ran 'other/golden.yaml'" in err
    assert not Path("h.jsonl").exists()


def test_harvest_of_runs_that_failed_nothing_writes_nothing(
        baselined: TrustProject, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(baselined.path)
    assert baselined.run("--rag-report=ok.json").ret == 0
    code, out, _ = cli(capsys, "harvest", "ok.json", "-o", "h.jsonl")
    assert code == 0 and "Nothing to harvest" in out
    assert not Path("h.jsonl").exists()


def test_harvest_takes_inconclusive_questions_of_a_pooled_set(
        project: TrustProject, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(project.path)
    Path("golden.yaml").write_text(yaml.safe_dump({"judgments": "pooled", "queries": project.records},
                                                  sort_keys=False), encoding="utf-8")
    project.make_baseline()
    project.answer(q_004=["derailleur", "hanger-alignment"])  # a gold document swapped for an unjudged one
    assert project.run("--rag-report=night.json").ret == 1
    code, out, _ = cli(capsys, "harvest", "night.json", "-o", "h.jsonl", "--golden", "golden.yaml")
    assert code == 0, out
    assert "q-004: failed on 1 of 1 runs (inconclusive)" in out
    line = json.loads(Path("h.jsonl").read_text(encoding="utf-8").splitlines()[1])
    assert line["source"] == "harvested" and line["harvest"]["verdicts"] == ["inconclusive"]
    assert {c["doc_id"]: c["rel"] for c in line["candidates"]} == {"derailleur": 1, "hanger-alignment": None,
                                                                   "shifter-cable": 1}


def test_pool_and_annotate_keep_a_sampled_questions_source(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("draft.jsonl").write_text('{"qid": "l1", "query": "why is my bill higher", "source": "log"}\n'
                                   '{"qid": "c1", "query": "how do I cancel"}\n', encoding="utf-8")
    Path("run.trec").write_text("l1 Q0 d1 1 2.0 r\nl1 Q0 d2 2 1.0 r\nc1 Q0 d3 1 1.0 r\n", encoding="utf-8")
    code, out, _ = cli(capsys, "pool", "--queries", "draft.jsonl", "--run", "run.trec", "-o", "c.jsonl", "--seed", "1")
    assert code == 0, out
    lines = [json.loads(line) for line in Path("c.jsonl").read_text(encoding="utf-8").splitlines()[1:]]
    assert [line.get("source") for line in lines] == ["log", None]
    lines[0]["source"] = "logs"
    Path("c.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    code, _, err = cli(capsys, "annotate", "c.jsonl", "--annotator", "ann")
    assert code == 2
    assert "c.jsonl, line 1 (qid 'l1'): source must be one of log, curated, harvested, variant, got 'logs'" in err


def test_harvest_without_the_golden_set_takes_texts_and_gold_from_the_artifacts(
        baselined: TrustProject, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    project = baselined
    project.answer(q_002=["noise-doc"], q_004={"raise": "index offline"})
    assert project.run("--rag-report=night.json").ret == 1
    elsewhere = project.path.parent / f"{project.path.name}-downloaded"
    elsewhere.mkdir()
    (elsewhere / "night.json").write_bytes((project.path / "night.json").read_bytes())
    monkeypatch.chdir(elsewhere)
    code, out, _ = cli(capsys, "harvest", "night.json", "-o", "h.jsonl")
    assert code == 0, out
    assert "the golden set the runs name, golden.yaml, is not found here" in out
    lines = {r["qid"]: r for r in map(json.loads, Path("h.jsonl").read_text(encoding="utf-8").splitlines()[1:])}
    assert lines["q-002"]["query"] == "how often should the chain be lubricated"
    assert {c["doc_id"]: c["rel"] for c in lines["q-002"]["candidates"]} == {"noise-doc": None, "chain-lube": 1,
                                                                             "chain-clean": 1}
    assert {c["doc_id"] for c in lines["q-004"]["candidates"]} == {"derailleur", "shifter-cable"}
    assert "5 candidates have no text; pass --corpus to annotate them." in out


# ------------------------------------------------------------------ harvest's inputs, trusted less


def test_harvest_never_writes_over_an_input(baselined: TrustProject, capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(baselined.path)
    baselined.answer(q_002=["noise-doc"])
    assert baselined.run("--rag-report=night.json").ret == 1
    before = Path("night.json").read_bytes()
    for target in ("night.json", "./night.json", "golden.yaml"):
        code, out, err = cli(capsys, "harvest", "night.json", "-o", target, "--force", "--golden", "golden.yaml")
        assert (code, out) == (2, ""), target
        assert f"--out {target} is " in err and "an output is never written over an input (--force does not " \
               "change that)" in err
    assert Path("night.json").read_bytes() == before


def test_harvest_refuses_two_versions_of_a_question_at_one_path(
        baselined: TrustProject, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Same golden path, other sha256: a question id may name another question; its failures are not one."""
    monkeypatch.chdir(baselined.path)
    baselined.answer(q_002=["noise-doc"])
    assert baselined.run("--rag-report=a.json").ret == 1
    old_text = Path("golden.yaml").read_text(encoding="utf-8")
    baselined.edit_query("q-002", question="how do I replace a worn chain")
    baselined.answer(q_002=["noise-doc"])
    assert baselined.run("--rag-report=b.json", "--rag-accept-mismatch").ret == 1
    code, out, err = cli(capsys, "harvest", "a.json", "b.json", "-o", "h.jsonl")
    assert (code, out) == (2, "")
    assert "a.json and b.json ran different versions of 'golden.yaml' (sha256 " in err
    assert "this question was measured with another text or other judgments: q-002" in err
    assert not Path("h.jsonl").exists()
    # --golden must be the set the artifacts ran: its texts and judgments are taken for theirs
    Path("old.yaml").write_text(old_text, encoding="utf-8")
    code, out, err = cli(capsys, "harvest", "b.json", "-o", "h.jsonl", "--golden", "old.yaml")
    assert (code, out) == (2, "")
    assert "old.yaml is not the golden set the artifacts ran: its sha256 is " in err and "b.json: " in err
    code, out, _ = cli(capsys, "harvest", "b.json", "-o", "h.jsonl", "--golden", "golden.yaml")
    assert code == 0, out
    # versions that agree on every question both ran are one set: a question added is no conflict
    baselined.add_query({"id": "q-007", "question": "is a tubeless tire better", "gold_chunks": ["tubeless"],
                         "tags": ["standard"]}, ["tubeless"])
    assert baselined.run("--rag-report=c.json", "--rag-accept-mismatch").ret == 1
    code, out, _ = cli(capsys, "harvest", "b.json", "c.json", "-o", "h2.jsonl")
    assert code == 0, out
    assert "q-002: failed on 2 of 2 runs" in out


def test_harvest_counts_a_sharded_night_once(baselined: TrustProject, capsys: pytest.CaptureFixture[str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(baselined.path)
    for name in ("GITHUB_RUN_ID", "CI_PIPELINE_ID", "BUILDKITE_BUILD_ID", "CIRCLE_WORKFLOW_ID", "BUILD_TAG"):
        monkeypatch.delenv(name, raising=False)
    baselined.answer(q_002=["noise-doc"], q_005=["noise-doc"])
    for i in (1, 2):
        baselined.run(f"--rag-shard={i}/2", f"--rag-report=s{i}.json")
    assert cli(capsys, "merge", "s1.json", "s2.json", "--out", "run.json")[0] == 1
    code, out, _ = cli(capsys, "harvest", "s1.json", "s2.json", "run.json", "-o", "h.jsonl")
    assert code == 0, out
    assert "s1.json, s2.json are shards of the run merged in run.json: counted once, as that run" in out
    assert "Harvested 2 questions from 3 run artifacts (1 run) (2 regressed" in out
    assert "q-002: failed on 1 of 1 runs" in out and "q-005: failed on 1 of 1 runs" in out
    # the shards alone are one run too; another night's whole run is a second
    baselined.answer(q_002=["noise-doc", "chain-wax"])
    assert baselined.run("--rag-report=night2.json").ret == 1
    code, out, _ = cli(capsys, "harvest", "s1.json", "s2.json", "night2.json", "-o", "h2.jsonl")
    assert code == 0, out
    assert "q-002: failed on 2 of 2 runs" in out
    # with run ids: the same
    for i in (1, 2):
        baselined.run(f"--rag-shard={i}/2", f"--rag-report=r{i}.json", "--rag-run-id=n7")
    assert cli(capsys, "merge", "r1.json", "r2.json", "--out", "rrun.json")[0] == 1
    code, out, _ = cli(capsys, "harvest", "r1.json", "rrun.json", "r2.json", "-o", "h3.jsonl")
    assert code == 0 and "q-005: failed on 1 of 1 runs" in out


def test_harvest_summary_counts_questions_and_escapes_their_ids(
        baselined: TrustProject, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(baselined.path)
    baselined.answer(q_002=["noise-doc"])
    assert baselined.run("--rag-report=n1.json").ret == 1
    baselined.answer(q_002={"raise": "index offline"})
    assert baselined.run("--rag-report=n2.json").ret == 1
    code, out, _ = cli(capsys, "harvest", "n1.json", "n2.json", "-o", "h.jsonl")
    assert code == 0, out
    assert "Harvested 1 question from 2 run artifacts (failed as: 1 regressed, 1 errored; a question that " \
           "failed more than one way counts under each;" in out
    # an id that reorders the terminal's text is shown escaped
    odd = "q-\u202e200"
    baselined.answer(**{odd: GOLDEN_ANSWERS["q-002"]})
    baselined.golden([{**r, "id": odd} if r["id"] == "q-002" else r for r in GOLDEN])
    baselined.make_baseline()
    baselined.answer(**{odd: ["noise-doc"]})
    assert baselined.run("--rag-report=n3.json").ret == 1
    code, out, _ = cli(capsys, "harvest", "n3.json", "-o", "h3.jsonl")
    assert code == 0, out
    assert "\u202e" not in out and "q-\\u202e200: failed on 1 of 1 runs" in out
