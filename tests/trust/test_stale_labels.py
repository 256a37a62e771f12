"""Labels that age: ``judged_at`` on golden records and judgments, ``max_label_age_days`` (global
and per tag) and ``fail_on_stale_labels``, through real ``pytest --rag-eval`` sessions and the CLI.

Dates are relative to today, so these tests never go stale themselves.
"""

from __future__ import annotations

import datetime as dt
import json

import pytest

from ragproject import GATES_DEFAULT, a_night_earlier, ids_with, no_traceback, outcomes, rag_summary
from trust_helpers import TrustProject

def today() -> dt.date:
    """Read at each use, not once at import: a suite that runs past midnight UTC must not age its labels."""
    return dt.datetime.now(dt.timezone.utc).date()


TODAY = today()  # parameters only: a day later they still lie where they are meant to


def days_ago(n: int) -> dt.date:
    return today() - dt.timedelta(days=n)


def date_all(project: TrustProject, when: dt.date) -> None:
    """Every record judged on ``when`` (record-level judged_at)."""
    for r in project.records:
        r["judged_at"] = when
    project.golden(project.records)


# ----------------------------------------------------------------------------- golden dates


def test_record_and_judgment_dates_in_yaml_age_by_the_oldest_label(baselined: TrustProject) -> None:
    date_all(baselined, days_ago(10))
    # q-003: its record is fresh, but one judgment was made long ago: the judgment's own date wins
    baselined.edit_query("q-003", gold_chunks={"brake-pads": {"grade": 2, "judged_at": days_ago(400)},
                                               "brake-cable": 1})
    baselined.thresholds({"max_label_age_days": 365})
    result = baselined.run()
    assert result.ret == 0, result.stdout.str()
    header = [line for line in result.outlines if line.startswith("ragmetrics: labels:")]
    assert header == [f"ragmetrics: labels: 1 of 6 records stale, 0 undated (max_label_age_days 365; today "
                      f"{today().isoformat()} UTC)"]
    summary = rag_summary(result)
    assert "All gates passed" in summary
    assert "WARNING: stale labels: 1 of 6 records has labels older than their limit (q-003); see 'Label ages'" \
        in summary
    assert f"  stale    q-003 (oldest label {days_ago(400).isoformat()}, 400 days old; limit 365 days, " \
           "max_label_age_days)" in summary
    assert summary.count("q-003 (oldest label") == 1  # the details once, in the list
    # a warning: the gate items are as they always were
    assert set(GATES_DEFAULT) <= set(ids_with(result, "passed"))
    assert not any("stale-labels" in n for n in outcomes(result))


def test_dates_change_neither_fingerprint_nor_judgments_digest(baselined: TrustProject) -> None:
    before = baselined.baseline()
    date_all(baselined, days_ago(3))
    result = baselined.run()  # the baseline's judgments digests still match: no "judgments changed" refusal
    assert result.ret == 0, result.stdout.str()
    baselined.make_baseline()
    after = baselined.baseline()
    assert after["_meta"]["golden"]["sha256"] == before["_meta"]["golden"]["sha256"]
    assert {q: e["_judgments"] for q, e in after["per_query"].items()} == \
        {q: e["_judgments"] for q, e in before["per_query"].items()}


def test_jsonl_record_and_candidate_dates(baselined: TrustProject) -> None:
    lines = []
    for r in baselined.records:
        gold = r["gold_chunks"]
        grades = gold if isinstance(gold, dict) else {d: 1 for d in gold}
        cands = [{"doc_id": d, "rel": g} for d, g in grades.items()]
        record = {"qid": r["id"], "query": r["question"], "tags": r["tags"], "candidates": cands,
                  "judged_at": days_ago(5).isoformat()}
        if r["id"] == "q-002":
            cands[1]["judged_at"] = days_ago(90).isoformat() + "T08:00:00Z"  # a full ISO time: its date counts
        if r["id"] == "q-004":
            del record["judged_at"]
        lines.append(json.dumps(record))
    (baselined.path / "golden.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    baselined.ini(rag_golden="golden.jsonl")
    baselined.thresholds({"max_label_age_days": 30})
    result = baselined.run("--rag-accept-mismatch")
    no_traceback(result)
    summary = rag_summary(result)
    assert f"  stale    q-002 (oldest label {days_ago(90).isoformat()}, 90 days old; limit 30 days" in summary
    assert "  undated  q-004 (a label without judged_at; limit 30 days, max_label_age_days)" in summary
    assert "q-001 (" not in summary.split("Label ages (", 1)[1]


@pytest.mark.parametrize("value, problem", [
    ("'last spring'", "judged_at 'last spring' is not a date"),
    ("2026-02-30", "judged_at '2026-02-30' is not a date"),
    (None, "is in the future"),
    ("12", "judged_at must be an ISO date such as 2026-03-01, got int 12"),
    ("[2026-01-01]", "judged_at must be an ISO date such as 2026-03-01, got list"),
    ("{a: 1}", "judged_at must be an ISO date such as 2026-03-01, got dict {'a': 1}"),
    # 23:59 on the day after tomorrow at UTC-12 is already two days ahead in UTC
    ("'" + (TODAY + dt.timedelta(days=1)).isoformat() + "T23:59:00-12:00'", "is in the future"),
])
def test_bad_judged_at_in_yaml_names_file_and_record(project: TrustProject, value: str | None, problem: str) -> None:
    value = value or (TODAY + dt.timedelta(days=5)).isoformat()
    text = (project.path / "golden.yaml").read_text(encoding="utf-8")
    text = text.replace("- id: q-002\n", f"- id: q-002\n  judged_at: {value}\n", 1)
    (project.path / "golden.yaml").write_text(text, encoding="utf-8")
    result = project.run()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    out = result.stdout.str() + result.stderr.str()
    assert "golden.yaml, record 2 (line" in out and "id 'q-002'" in out
    assert problem in out
    no_traceback(result)


def test_bad_judged_at_on_a_judgment_and_in_jsonl(project: TrustProject) -> None:
    project.edit_query("q-003", gold_chunks={"brake-pads": {"grade": 2, "judged_at": "soon"}, "brake-cable": 1})
    result = project.run()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "id 'q-003'): judged_at of 'brake-pads' 'soon' is not a date" in result.stdout.str() + result.stderr.str()
    future = (today() + dt.timedelta(days=3)).isoformat()
    (project.path / "golden.jsonl").write_text(json.dumps(
        {"qid": "n1", "query": "q", "candidates": [{"doc_id": "d", "rel": 1, "judged_at": future}]}) + "\n",
        encoding="utf-8")
    project.ini(rag_golden="golden.jsonl")
    result = project.run()
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"golden.jsonl, line 1 (qid 'n1'): candidate 1 ('d') judged_at {future} is in the future" in out


# -------------------------------------------------------------------------------- limits


def test_per_tag_limit_is_the_strictest_and_undated_records_are_listed(baselined: TrustProject) -> None:
    date_all(baselined, days_ago(20))
    del baselined.records[4]["judged_at"]  # q-005 (paraphrase): undated
    baselined.golden(baselined.records)
    baselined.thresholds({"max_label_age_days": 365, "tag:paraphrase/max_label_age_days": 14})
    result = baselined.run()
    assert result.ret == 0, result.stdout.str()
    assert any(line == "ragmetrics: labels: 2 of 6 records stale, 1 undated (max_label_age_days 365, "
               f"tag:paraphrase/max_label_age_days 14; today {today().isoformat()} UTC)" for line in result.outlines)
    summary = rag_summary(result)
    for qid in ("q-003", "q-006"):
        assert f"  stale    {qid} (oldest label {days_ago(20).isoformat()}, 20 days old; limit 14 days, " \
               "tag:paraphrase/max_label_age_days)" in summary
    assert "  undated  q-005 (a label without judged_at; limit 14 days, tag:paraphrase/max_label_age_days)" in summary


def test_a_question_with_no_answer_ages_by_its_record_date(baselined: TrustProject) -> None:
    """'The corpus has no answer' is a judgment too: undated without judged_at, stale when old."""
    date_all(baselined, days_ago(2))
    baselined.add_query({"id": "q-no-1", "question": "passport renewal", "answerable": False}, [])
    baselined.add_query({"id": "q-no-2", "question": "sourdough starter", "answerable": False,
                         "judged_at": days_ago(500)}, [])
    baselined.thresholds({"max_label_age_days": 365})
    summary = rag_summary(baselined.run())
    assert "  stale    q-no-2 (oldest label " + days_ago(500).isoformat() in summary
    assert "  undated  q-no-1 (a label without judged_at; limit 365 days, max_label_age_days)" in summary
    assert "2 new questions not in the baseline (scored, not compared): q-no-1, q-no-2" in summary


def test_fail_on_stale_labels_fails_a_gate_naming_the_queries(baselined: TrustProject) -> None:
    date_all(baselined, days_ago(2))
    baselined.edit_query("q-001", judged_at=days_ago(100))
    del baselined.records[3]["judged_at"]  # q-004: undated fails too under fail_on_stale_labels
    baselined.golden(baselined.records)
    baselined.thresholds({"max_label_age_days": 60, "fail_on_stale_labels": True})
    result = baselined.run()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert outcomes(result)["golden.yaml::gate::stale-labels"] == "failed"
    assert all(outcomes(result)[g] == "passed" for g in GATES_DEFAULT)
    summary = rag_summary(result)
    assert "RETRIEVAL GATE FAILED" in summary
    assert "gate stale-labels: 1 of 6 records has labels older than their limit (q-001); 1 is undated: under an " \
           "age limit, with a label that has no judged_at (q-004)" in summary
    assert f"  stale    q-001 (oldest label {days_ago(100).isoformat()}, 100 days old; limit 60 days, " \
           "max_label_age_days)" in summary
    assert "  undated  q-004 (a label without judged_at; limit 60 days, max_label_age_days)" in summary
    # fresh labels: the gate passes
    baselined.edit_query("q-001", judged_at=days_ago(1))
    baselined.edit_query("q-004", judged_at=days_ago(1))
    result = baselined.run()
    assert result.ret == 0, result.stdout.str()
    assert outcomes(result)["golden.yaml::gate::stale-labels"] == "passed"


@pytest.mark.parametrize("data, problem", [
    ({"max_label_age_days": -1}, "'max_label_age_days' must be a positive whole number of days, got -1"),
    ({"max_label_age_days": "30"}, "'max_label_age_days' must be a positive whole number of days, got '30' "
                                   "(write the number without quotes)"),
    ({"max_label_age_days": 1.5}, "got 1.5"),
    ({"tags:news/max_label_age_days": 7}, "unknown key 'tags:news/max_label_age_days'; a per-tag key is written "
                                          "'tag:<tag>/max_label_age_days' (did you mean "
                                          "'tag:news/max_label_age_days'?)"),
    ({"tag:standard/max_age_days": 7}, "did you mean 'tag:standard/max_label_age_days'?"),
    ({"tag:standrd/max_label_age_days": 7}, "names tag 'standrd', which no record of the golden set carries "
                                            "(tags: paraphrase, smoke, standard); did you mean "
                                            "'tag:standard/max_label_age_days'?"),
    ({"max_label_age_day": 7}, "did you mean 'max_label_age_days'?"),
    ({"fail_on_stale_labels": "yes", "max_label_age_days": 7}, "'fail_on_stale_labels' must be true or false"),
    ({"fail_on_stale_labels": True}, "'fail_on_stale_labels' is true but no label has an age limit"),
])
def test_bad_label_age_thresholds_are_clear_errors(project: TrustProject, data: dict, problem: str) -> None:
    path = project.thresholds(data)
    result = project.run()
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, out
    assert "thresholds.json" in out and problem in out, out
    no_traceback(result)
    assert path.exists()


# ---------------------------------------------------------------------------- everywhere


def test_stale_counts_reach_artifact_junit_markdown_html_history_and_compare(
        baselined: TrustProject, capsys: pytest.CaptureFixture[str]) -> None:
    import xml.etree.ElementTree as ET

    from pytest_ragmetrics.cli import main
    from pytest_ragmetrics.gate.artifact import load_artifact

    date_all(baselined, days_ago(5))
    baselined.thresholds({"max_label_age_days": 30})
    first = baselined.run("--rag-report=night1.json")
    assert first.ret == 0, first.stdout.str()
    a_night_earlier(baselined.path / "night1.json")  # another night: another created time
    baselined.edit_query("q-002", judged_at=days_ago(45))
    del baselined.records[5]["judged_at"]  # q-006: undated
    baselined.golden(baselined.records)
    second = baselined.run("--rag-report=night2.json", "--junitxml=junit.xml", "--rag-markdown=summary.md",
                           "--rag-html=report.html")
    assert second.ret == 0, second.stdout.str()
    path = baselined.path
    ages = load_artifact(path / "night2.json")["comparison"]["stale_labels"]  # the checked schema reads it
    assert ages["checked"] == 6 and [r["qid"] for r in ages["stale"]] == ["q-002"]
    assert ages["stale"][0] == {"qid": "q-002", "oldest": days_ago(45).isoformat(), "age_days": 45,
                                "limit_days": 30, "limit_key": "max_label_age_days"}
    assert [r["qid"] for r in ages["undated"]] == ["q-006"]
    props = {case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")}
             for case in ET.parse(path / "junit.xml").getroot().iter("testcase")}
    assert props["q-002"]["stale_label"] == "stale" and props["q-006"]["stale_label"] == "undated"
    assert "stale_label" not in props["q-001"]
    markdown = (path / "summary.md").read_text(encoding="utf-8")
    assert "### Label ages: 1 of 6 records stale, 1 undated" in markdown and "| q-002" in markdown
    html = (path / "report.html").read_text(encoding="utf-8")
    assert "<h2>Label ages</h2>" in html and "1 of 6 records stale, 1 undated" in html

    capsys.readouterr()
    assert main(["history", str(path / "night1.json"), str(path / "night2.json")]) == 0
    text = capsys.readouterr().out
    assert "stale labels" in text
    assert "0/6 (0.0%)" in text and "1/6 (16.7%), 1 undated" in text
    assert main(["history", str(path / "night1.json"), str(path / "night2.json"), "--format", "json"]) == 0
    runs = json.loads(capsys.readouterr().out)["groups"][0]["runs"]
    assert [r["stale_labels"]["share"] for r in runs] == [0.0, pytest.approx(1 / 6)]
    assert main(["compare", str(path / "night1.json"), str(path / "night2.json")]) == 0
    out = capsys.readouterr().out
    assert "Label ages: A: 0 of 6 records stale, 0 undated (max_label_age_days 30); B: 1 of 6 records stale, " \
           "1 undated (max_label_age_days 30)" in out


def test_a_hand_edited_stale_count_is_refused(baselined: TrustProject) -> None:
    from pytest_ragmetrics.errors import InputError
    from pytest_ragmetrics.gate.artifact import check_artifact, seal_artifact, load_artifact

    date_all(baselined, days_ago(5))
    baselined.thresholds({"max_label_age_days": 30})
    assert baselined.run("--rag-report=run.json").ret == 0
    data = load_artifact(baselined.path / "run.json")
    data["comparison"]["stale_labels"]["checked"] = "6"
    with pytest.raises(InputError, match=r"run\.json: comparison\.stale_labels\.checked is '6'"):
        check_artifact(seal_artifact(data), str(baselined.path / "run.json"))


def test_compare_fails_the_stale_labels_gate_a_run_failed(
        baselined: TrustProject, capsys: pytest.CaptureFixture[str]) -> None:
    """B failed its stale-labels gate: compare --fail-on-regression must fail it too, with the thresholds
    B recorded, with --thresholds that say fail_on_stale_labels, in JSON and with --shared-only."""
    from pytest_ragmetrics.cli import main

    date_all(baselined, days_ago(5))
    baselined.thresholds({"max_label_age_days": 30})
    assert baselined.run("--rag-report=night1.json").ret == 0
    baselined.edit_query("q-002", judged_at=days_ago(45))
    baselined.thresholds({"max_label_age_days": 30, "fail_on_stale_labels": True})
    second = baselined.run("--rag-report=night2.json")
    assert outcomes(second)["golden.yaml::gate::stale-labels"] == "failed"
    a, b = str(baselined.path / "night1.json"), str(baselined.path / "night2.json")

    capsys.readouterr()
    assert main(["compare", a, b, "--fail-on-regression"]) == 1
    out = capsys.readouterr().out
    assert "All gates passed" not in out
    assert "gate stale-labels: 1 of 6 records has labels older than their limit (q-002)" in out, out
    assert main(["compare", a, b, "--fail-on-regression", "--shared-only"]) == 1
    assert "gate stale-labels: 1 of 6 records" in capsys.readouterr().out

    assert main(["compare", a, b, "--format", "json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert {g["name"]: g["passed"] for g in payload["gates"]}["stale-labels"] is False
    assert payload["passed"] is False

    # A's artifact recorded labels that only warn, B's too: --thresholds asking to fail on them decides
    baselined.thresholds({"max_label_age_days": 30})
    assert baselined.run("--rag-report=night2.json").ret == 0
    strict = baselined.path / "strict.json"
    strict.write_text(json.dumps({"max_label_age_days": 30, "fail_on_stale_labels": True}), encoding="utf-8")
    assert main(["compare", a, b, "--fail-on-regression"]) == 0
    out = capsys.readouterr().out
    assert "All gates passed" in out and "WARNING: stale labels: 1 of 6 records" in out, out
    assert main(["compare", a, b, "--fail-on-regression", "--thresholds", str(strict)]) == 1
    assert "gate stale-labels: 1 of 6 records has labels older than their limit (q-002)" in capsys.readouterr().out
