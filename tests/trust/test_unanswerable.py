"""Questions with no answer (``answerable: false``): scored by false retrieval, outside the other means."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.plugin.ragproject import GOLDEN, RagProject, ids_with, no_traceback, rag_summary

pytest_plugins = ["pytester"]

NO_ANSWER = {"id": "q-none", "question": "who won the 1998 world cup", "answerable": False, "tags": ["offtopic"]}


@pytest.fixture
def project(pytester: pytest.Pytester) -> RagProject:
    p = RagProject(pytester)
    p.add_query(NO_ANSWER, [])
    return p


def _artifact(project: RagProject, *args: str) -> dict:
    result = project.run("--rag-report=run.json", *args)
    no_traceback(result)
    return json.loads((project.path / "run.json").read_text(encoding="utf-8"))


# ------------------------------------------------------------------- golden files


def test_yaml_unanswerable_needs_no_gold_and_stays_out_of_the_means(project: RagProject) -> None:
    # one answerable query misses its gold: recall over the 6 answerable ones is 5/6, not 5/7 or 6/7
    project.answer(q_001=["noise"], q_none=[["tire-repair", 0.9]])
    data = _artifact(project)
    assert data["per_query"]["q-none"]["status"] == "unanswerable"
    assert data["per_query"]["q-none"]["metrics"] is None
    assert data["per_query"]["q-none"]["false_retrieval"] == 1
    assert data["aggregate"]["recall@10"] == pytest.approx(5 / 6)
    assert data["n"] == 6
    assert data["comparison"]["no_answer"]["n"] == 1
    assert data["comparison"]["no_answer"]["false_retrieval_rate"] == 1.0
    assert "q-none" not in data["comparison"]["unscorable"]


def test_jsonl_unanswerable_with_and_without_zero_grades(pytester: pytest.Pytester) -> None:
    from pytest_ragmetrics.golden import load_golden

    path = pytester.path / "g.jsonl"
    rows = [{"qid": "a", "query": "x", "candidates": [{"doc_id": "d", "rel": 1}]},
            {"qid": "b", "query": "y", "answerable": False},
            {"qid": "c", "query": "z", "answerable": False, "candidates": [{"doc_id": "d", "rel": 0}]}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    golden = load_golden(path)
    assert [q.answerable for q in golden] == [True, False, False]
    assert golden.unanswerable() == ["b", "c"] and golden.unscorable() == []
    assert dict(golden["c"].judgments) == {"d": 0}


@pytest.mark.parametrize("gold", [["tire-repair"], {"tire-repair": 1}])
def test_yaml_gold_on_an_unanswerable_record_is_an_error(project: RagProject, gold: object) -> None:
    project.edit_query("q-none", gold_chunks=gold)
    result = project.run()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    text = result.stderr.str() + result.stdout.str()
    assert "golden.yaml" in text and "'q-none'" in text and "answerable: false" in text and "tire-repair" in text
    no_traceback(result)


def test_yaml_zero_graded_judgments_are_allowed_on_an_unanswerable_record(project: RagProject) -> None:
    project.edit_query("q-none", gold_chunks={"tire-repair": 0})
    project.make_baseline()
    assert project.run().ret == 0


def test_jsonl_positive_candidate_on_an_unanswerable_record_is_an_error(tmp_path: Path) -> None:
    from pytest_ragmetrics.errors import InputError
    from pytest_ragmetrics.golden import load_golden

    path = tmp_path / "g.jsonl"
    path.write_text(json.dumps({"qid": "b", "query": "y", "answerable": False,
                                "candidates": [{"doc_id": "d", "rel": 2}]}) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"g\.jsonl.*line 1 \(qid 'b'\).*answerable: false.*'d'"):
        load_golden(path)


@pytest.mark.parametrize("value", ["no", 0, None])
def test_answerable_must_be_a_bool(project: RagProject, value: object) -> None:
    project.edit_query("q-none", answerable=value)
    result = project.run()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert re.search(r"golden\.yaml.*q-none.*answerable must be true or false", result.stderr.str())


def test_flipping_answerable_changes_the_digest_but_not_for_other_queries() -> None:
    from pytest_ragmetrics.golden import GoldenSet, Query

    q = Query("a", "x", {"d": 0})
    assert q.judgments_digest() != Query("a", "x", {"d": 0}, answerable=False).judgments_digest()
    assert GoldenSet("s", (q,)).fingerprint() != GoldenSet("s", (Query("a", "x", {"d": 0}, answerable=False),)).fingerprint()


# ------------------------------------------------------------------- scoring


def test_false_retrieval_rules() -> None:
    from pytest_ragmetrics.unanswerable import false_retrieval

    assert false_retrieval([], None) == 0
    assert false_retrieval([0.1], None) == 1  # no threshold: any result
    assert false_retrieval([None], 0.5) == 1  # no score: any result
    assert false_retrieval([0.4, 0.2], 0.5) == 0
    assert false_retrieval([0.5], 0.5) == 1  # at the threshold
    assert false_retrieval([0.2, 0.7], 0.5) == 1


@pytest.mark.parametrize("answer, threshold, expected", [
    ([], None, 0), ([["tire-repair", 0.1]], None, 1), ([["tire-repair", 0.1]], "0.5", 0),
    ([["tire-repair", 0.6]], "0.5", 1), (["tire-repair"], "0.5", 1),
])
def test_false_retrieval_through_a_run(project: RagProject, answer: list, threshold: str | None,
                                       expected: int) -> None:
    project.answer(q_none=answer)
    data = _artifact(project, *([f"--rag-answer-threshold={threshold}"] if threshold else []))
    assert data["per_query"]["q-none"]["false_retrieval"] == expected
    assert data["_meta"]["answer_threshold"] == (float(threshold) if threshold else None)


@pytest.mark.parametrize("value", ["high", "nan", "inf"])
def test_bad_answer_threshold(project: RagProject, value: str) -> None:
    project.ini(rag_answer_threshold=value)
    result = project.run()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "rag_answer_threshold" in result.stderr.str() and value in result.stderr.str()
    no_traceback(result)


# ------------------------------------------------------------------- baseline and gates


def test_baseline_holds_false_retrieval_only_and_the_rate(project: RagProject) -> None:
    project.make_baseline()
    data = project.baseline()
    entry = {k: v for k, v in data["per_query"]["q-none"].items() if not k.startswith("_")}
    assert entry == {"false_retrieval": 0.0}
    assert data["aggregate"]["false_retrieval_rate"] == 0.0
    assert data["aggregate"]["recall@10"] == 1.0
    assert project.run().ret == 0


def test_a_new_false_retrieval_regresses_its_query_and_fails_the_gates(project: RagProject) -> None:
    project.add_query({"id": "q-none2", "question": "best pizza in town", "answerable": False}, [])
    project.make_baseline()
    project.thresholds({"false_retrieval_rate_tolerance": 0.0, "false_retrieval_rate_max": 0.4})
    project.answer(q_none=[["tire-repair#1-3", 0.83]])
    result = project.run()
    assert result.ret == 1
    failed = ids_with(result, "failed")
    assert "golden.yaml::q-none" in failed and "golden.yaml::gate::false_retrieval_rate" in failed
    summary = rag_summary(result)
    assert "false_retrieval_rate rose +0.5000" in summary and "above its ceiling 0.4" in summary
    assert re.search(r"q-none  'who won the 1998 world cup'.*false_retrieval\s+0\.0000 -> 1\.0000.*"
                     r"gold:\s+none \(answerable: false.*returned: 1\. tire-repair\s+\[score 0\.83", summary, re.S)


def test_only_the_max_gate(project: RagProject) -> None:
    project.make_baseline()
    project.thresholds({"false_retrieval_rate_max": 1.0})
    project.answer(q_none=[["x", 0.3]])
    result = project.run()
    # within the ceiling, but the query itself newly retrieved something: it regressed
    assert "golden.yaml::gate::false_retrieval_rate" in ids_with(result, "passed")
    assert "golden.yaml::q-none" in ids_with(result, "failed")


@pytest.mark.parametrize("key, hint", [("false_retrieval_tolerance", "false_retrieval_rate_tolerance"),
                                       ("false_retrieval_rate_maximum", "false_retrieval_rate_max")])
def test_misspelt_threshold_keys(project: RagProject, key: str, hint: str) -> None:
    project.thresholds({key: 0.1})
    result = project.run()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"did you mean {hint!r}" in result.stderr.str()


def test_threshold_value_out_of_range(project: RagProject) -> None:
    project.thresholds({"false_retrieval_rate_max": 2})
    result = project.run()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "'false_retrieval_rate_max' must be a number in [0, 1]" in result.stderr.str()


def test_baseline_refused_when_the_threshold_changed(project: RagProject) -> None:
    project.make_baseline("--rag-answer-threshold=0.5")
    result = project.run("--rag-answer-threshold=0.7")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "rag_answer_threshold: baseline 0.5, now 0.7" in result.stderr.str()
    assert project.run("--rag-answer-threshold=0.5").ret == 0


def test_threshold_does_not_matter_without_unanswerable_questions(project: RagProject) -> None:
    project.remove_query("q-none")
    project.make_baseline()
    assert project.run("--rag-answer-threshold=0.7").ret == 0


def test_junit_properties(project: RagProject) -> None:
    project.make_baseline()
    project.answer(q_none=["x"])
    project.run("--junitxml=j.xml")
    xml = (project.path / "j.xml").read_text(encoding="utf-8")
    case = re.search(r'<testcase [^>]*name="q-none".*?</testcase>', xml, re.S).group(0)
    assert '<property name="false_retrieval" value="1"' in case
    assert '<property name="verdict" value="regressed"' in case


# ------------------------------------------------------------------- the trade-off report


def _scored_project(project: RagProject) -> None:
    answers = {qid: [[doc, 0.9 - 0.1 * i] for i, doc in enumerate(docs)] for qid, docs in project.answers.items()
               if qid != "q-none"}
    project.answer(**{k.replace("-", "_"): v for k, v in answers.items()}, q_none=[["tire-repair", 0.65]])


def test_tradeoff_section_terminal_markdown_html(project: RagProject) -> None:
    _scored_project(project)
    project.make_baseline("--rag-answer-threshold=0.7")
    result = project.run("--rag-answer-threshold=0.7", "--rag-markdown=s.md", "--rag-html=r.html")
    summary = rag_summary(result)
    assert "Questions with no answer: 1" in summary
    assert "false_retrieval_rate 0.0000" in summary
    table = summary.partition("Answer threshold trade-off")[2]
    assert re.search(r"\|\s+0\.7\s+\(in force\)\s+\|", table)
    assert re.search(r"\|\s+none\s+\|\s+1\.0000\s+\|\s+1\.0000\s+\|", table)
    assert re.search(r"\|\s+0\.65\s+\|.*\|\s+1\.0000\s+\|", table)
    md = (project.path / "s.md").read_text(encoding="utf-8")
    assert "Answer threshold trade-off" in md and "(in force)" in md
    html = (project.path / "r.html").read_text(encoding="utf-8")
    assert "Answer threshold trade-off" in html and "<svg" in html and "in force" in html


def test_the_tradeoffs_no_threshold_row_is_the_gates_recall(project: RagProject) -> None:
    """A question that returned nothing, or errored, scores 0 in the gate's recall: the trade-off counts it
    too, so its "none" row is the gate's number, not a mean over fewer questions."""
    _scored_project(project)
    project.make_baseline("--rag-answer-threshold=0.7")
    project.answer(q_004=[], q_005={"raise": "index offline"})
    summary = rag_summary(project.run("--rag-answer-threshold=0.7"))
    gate = re.search(r"\| recall@10 +\| [0-9.]+ +\| ([0-9.]+) ", summary).group(1)
    assert gate == f"{4 / 6:.4f}"
    table = summary.partition("Answer threshold trade-off")[2]
    assert re.search(rf"\|\s+none\s+\|\s+{gate}\s+\|", table), table


def test_no_tradeoff_without_scores(project: RagProject) -> None:
    project.answer(q_none=["x"])
    summary = rag_summary(project.run())
    assert "Questions with no answer: 1" in summary
    assert "trade-off" not in summary


# ------------------------------------------------------------------- ragmetrics compare and history


def _two_runs(project: RagProject, *args: str) -> tuple[Path, Path]:
    """A: q-none gets nothing; B: it gets a result above the threshold (a new false retrieval)."""
    project.add_query({"id": "q-none2", "question": "best pizza in town", "answerable": False}, [])
    project.make_baseline(*args)
    _artifact(project, *args)
    a = project.path / "a.json"
    (project.path / "run.json").replace(a)
    project.answer(q_none=[["tire-repair#1-3", 0.83]])
    _artifact(project, *args)
    b = project.path / "b.json"
    (project.path / "run.json").replace(b)
    return a, b


def _rewrite(path: Path, data: dict) -> None:
    """Write an edited artifact, resealed: only recomputing from the golden set can tell."""
    from pytest_ragmetrics.gate.artifact import seal_artifact

    path.write_text(json.dumps(seal_artifact(data)), encoding="utf-8")


def _compare(*argv: object) -> tuple[int, str, str]:
    import contextlib
    import io

    from pytest_ragmetrics.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["compare", *map(str, argv)])
    return code, out.getvalue(), err.getvalue()


def test_compare_shows_both_rates_and_regresses_a_new_false_retrieval(project: RagProject) -> None:
    a, b = _two_runs(project, "--rag-answer-threshold=0.5")
    thresholds = project.thresholds({"false_retrieval_rate_tolerance": 0.0})
    code, out, err = _compare(a, b, "--fail-on-regression", "--thresholds", thresholds)
    assert code == 1, out + err
    assert "Questions with no answer" in out
    assert re.search(r"A 2, false_retrieval_rate 0\.0000 \(answer threshold 0\.5\); "
                     r"B 2, false_retrieval_rate 0\.5000", out)
    assert re.search(r"1\. q-none.*false_retrieval\s+0\.0000 -> 1\.0000", out, re.S)
    assert "false_retrieval_rate rose +0.5000 against A" in out
    code, out, _ = _compare(a, b, "--format", "json", "--thresholds", thresholds)
    payload = json.loads(out)
    assert payload["no_answer"]["A"] == {"n": 2, "false_retrieval_rate": 0.0, "answer_threshold": 0.5}
    assert payload["no_answer"]["B"]["false_retrieval_rate"] == 0.5
    assert [r["qid"] for r in payload["regressed"]] == ["q-none"]
    assert payload["no_answer"]["B"]["n"] == 2 and payload["n"] == 6  # outside the means
    # the same run on both sides: nothing regressed
    assert _compare(b, b, "--fail-on-regression", "--thresholds", thresholds)[0] == 0


def test_compare_against_the_baseline_file(project: RagProject) -> None:
    _, b = _two_runs(project)
    code, out, err = _compare(project.baseline_path, b, "--fail-on-regression")
    assert code == 1, out + err
    assert "A 2, false_retrieval_rate 0.0000" in out and "B 2, false_retrieval_rate 0.5000" in out
    assert re.search(r"1\. q-none.*false_retrieval\s+0\.0000 -> 1\.0000", out, re.S)


def test_compare_golden_recomputes_false_retrieval(project: RagProject) -> None:
    a, b = _two_runs(project, "--rag-answer-threshold=0.5")
    golden = project.path / "golden.yaml"
    assert _compare(a, b, "--golden", golden)[0] == 0
    data = json.loads(b.read_text(encoding="utf-8"))
    data["per_query"]["q-none"]["false_retrieval"] = 0  # hide the new false retrieval
    _rewrite(b, data)
    code, _, err = _compare(a, b, "--golden", golden)
    assert code == 2
    assert re.search(r"b\.json.*per_query\.q-none.*false_retrieval = 0.*give 1 under rag_answer_threshold 0\.5", err)
    # the recorded threshold is the one used: above the score, 0 is right
    data["_meta"]["answer_threshold"] = 0.9
    _rewrite(b, data)
    a_data = json.loads(a.read_text(encoding="utf-8"))
    a_data["_meta"]["answer_threshold"] = 0.9
    _rewrite(a, a_data)
    code, out, err = _compare(a, b, "--golden", golden)
    assert code == 0, err
    assert "traceback" not in err.lower()


def test_compare_golden_refuses_an_answerable_question_turned_unanswerable(project: RagProject) -> None:
    a, b = _two_runs(project)
    data = json.loads(b.read_text(encoding="utf-8"))
    entry = data["per_query"]["q-001"]
    data["per_query"]["q-001"] = {**entry, "status": "unanswerable", "metrics": None, "answerable": False,
                                  "false_retrieval": 1}
    scored = [e["metrics"] for e in data["per_query"].values() if e["status"] == "scored"]
    data["n"] = len(scored)  # a consistent file, its means without q-001
    data["aggregate"] = {m: sum(e[m] for e in scored) / len(scored) for m in data["aggregate"]}
    _rewrite(b, data)
    code, _, err = _compare(a, b, "--golden", project.path / "golden.yaml")
    assert code == 2
    assert re.search(r"b\.json.*per_query\.q-001.*B says unanswerable", err)


def _history(*argv: object) -> tuple[int, str, str]:
    import contextlib
    import io

    from pytest_ragmetrics.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["history", *map(str, argv)])
    return code, out.getvalue(), err.getvalue()


def test_history_shows_the_no_answer_count_and_rate_per_night(project: RagProject) -> None:
    a, b = _two_runs(project)
    code, out, err = _history(a, b, "--html", project.path / "trend.html")
    assert code == 0, err
    header = next(line for line in out.splitlines() if line.startswith("| run"))
    assert header.rstrip(" |").endswith("no answer | false_retrieval_rate")
    rows = [line for line in out.splitlines() if line.startswith("| #")]
    assert re.search(r"\|\s+2\s+\|\s+0\.0000\s+\|$", rows[0]) and re.search(r"\|\s+2\s+\|\s+0\.5000\s+\|$", rows[1])
    assert re.search(r"\|\s+6/0/0\s+\|", rows[0]) and re.search(r"\|\s+6/1/0\s+\|", rows[1])  # q-none regressed
    runs = json.loads(_history(a, b, "--format", "json")[1])["groups"][0]["runs"]
    assert [(r["n"], r["no_answer"], r["false_retrieval_rate"]) for r in runs] == [(6, 2, 0.0), (6, 2, 0.5)]
    html = (project.path / "trend.html").read_text(encoding="utf-8")
    assert "false_retrieval_rate" in html and "no answer" in html


def test_history_without_unanswerable_questions_has_no_such_columns(project: RagProject) -> None:
    project.remove_query("q-none")
    _artifact(project)
    code, out, _ = _history(project.path / "run.json")
    assert code == 0 and "no answer" not in out and "false_retrieval_rate" not in out


def test_an_errored_unanswerable_question_fails_but_stays_out_of_the_means(project: RagProject) -> None:
    project.make_baseline()
    project.answer(q_none={"raise": "index offline"})
    result = project.run("--rag-report=run.json")
    assert result.ret == 1 and "golden.yaml::q-none" in ids_with(result, "failed")
    data = json.loads((project.path / "run.json").read_text(encoding="utf-8"))
    assert data["per_query"]["q-none"]["status"] == "error"
    assert data["n"] == 6 and data["aggregate"]["recall@10"] == 1.0  # not a 0 among the answerable questions
    assert data["comparison"]["no_answer"]["false_retrieval_rate"] == 1.0  # an error is no proof of no answer


def test_compare_tradeoff_has_recall_only_with_golden(project: RagProject) -> None:
    """Without --golden compare holds no judgments: no recall column of dashes, a note that --golden
    gives it; with --golden the recall of the answerable questions is computed from B's scores."""
    _scored_project(project)
    project.make_baseline("--rag-answer-threshold=0.7")
    a = project.path / "a.json"
    _artifact(project, "--rag-answer-threshold=0.7")
    (project.path / "run.json").replace(a)
    b = project.path / "b.json"
    _artifact(project, "--rag-answer-threshold=0.7")
    (project.path / "run.json").replace(b)

    code, out, err = _compare(a, b)
    assert code == 0, out + err
    table = out.partition("Answer threshold trade-off")[2].partition("Per query")[0]
    assert table, out
    assert "recall@" not in table and "—" not in table, table
    assert "pass --golden for the recall of the answerable questions" in table
    assert re.search(r"\|\s+0\.7\s+\(in force\)\s+\|\s+0\.0000\s+\|", table)
    assert re.search(r"\|\s+none\s+\|\s+1\.0000\s+\|", table)

    code, out, err = _compare(a, b, "--golden", project.path / "golden.yaml")
    assert code == 0, out + err
    table = out.partition("Answer threshold trade-off")[2].partition("\n\n")[0]
    assert "recall@" in table and "—" not in table, table
    assert re.search(r"\|\s+none\s+\|\s+1\.0000\s+\|\s+1\.0000\s+\|", table)
