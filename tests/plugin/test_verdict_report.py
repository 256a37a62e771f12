"""The verdict at its edges: a failed gate always names queries, the report is printed once,
JUnit XML carries flat properties, and the words and numbers read right."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from ragproject import GOOD, QIDS, RagProject, drop_line, entry, ids_with, rag_summary, worst_list

# A reranker bug: every gold document still comes back (recall holds), but lower.
# q-001's only gold document falls from rank 1 to rank 5: MRR 1 -> 0.2, nDCG 1 -> 1/log2(6).
# q-005's falls to rank 2: MRR 1 -> 0.5, nDCG 1 -> 1/log2(3).
REORDERED = {
    "q_001": ["noise-doc", "tube-patch", "rim-wear", "chain-lube", "tire-repair#1-3"],
    "q_005": ["noise-doc", "tire-pressure"],
}
NDCG_001, NDCG_005 = 1 / math.log2(6), 1 / math.log2(3)


def _report_count(output: str) -> int:
    """How many times the full report (its aggregate table) was printed."""
    return len(re.findall(r"^\| metric +\| baseline +\| now ", output, flags=re.M))


# ------------------------------------------------------------------ a failed gate names its queries

def test_an_aggregate_gate_that_fails_without_a_regressed_query_names_the_queries_that_moved_it(
        baselined: RagProject) -> None:
    baselined.thresholds({"ndcg@10_tolerance": 0, "mrr@10_tolerance": 0})
    baselined.answer(**REORDERED)
    result = baselined.run("--rag-report", "run.json", "--rag-markdown", "summary.md", "--rag-html", "report.html")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert ids_with(result, "failed") == ["golden.yaml::gate::mrr@10", "golden.yaml::gate::ndcg@10"]

    summary = rag_summary(result)
    assert "No query fell beyond its per-query tolerance." not in summary
    assert "No query regressed beyond its per-query tolerance." in summary
    moved = summary.split("Queries that moved mrr@10, ndcg@10 most, within their per-query tolerance "
                          "(2 of 2, largest drop first):", 1)[1]
    assert re.findall(r"^\s+\d+\. (\S+)  '", moved, flags=re.M) == ["q-001", "q-005"]
    q001 = moved.split("q-005", 1)[0]
    assert re.search(drop_line("mrr@10", 1, 0.2, "not gated per query"), q001)
    assert re.search(drop_line("ndcg@10", 1, NDCG_001, "not gated per query"), q001)
    assert "recall@10" not in q001  # recall held
    assert "gold:     tire-repair (1)" in q001
    assert re.search(r"returned: 1\. noise-doc\n(\s+\d\. \S+\n){3}\s+5\.\*tire-repair", q001)

    # each failing gate item names the queries behind it in its one line
    failures = result.stdout.str().split("= FAILURES =", 1)[1]
    assert (f"gate ndcg@10: ndcg@10 fell {(2 - NDCG_001 - NDCG_005) / 6:.4f} against the baseline") in failures
    assert f"most: q-001 ({NDCG_001 - 1:+.4f}), q-005 ({NDCG_005 - 1:+.4f})" in failures

    # the same list is in the verdict data, so every report shows it
    comparison = json.loads((baselined.path / "run.json").read_text())["comparison"]
    assert comparison["regressed"] == []
    assert comparison["moved_metrics"] == ["mrr@10", "ndcg@10"]
    assert [m["qid"] for m in comparison["moved"]] == ["q-001", "q-005"]
    drops = {d["metric"]: d for d in comparison["moved"][0]["drops"]}
    assert drops["mrr@10"]["now"] == pytest.approx(0.2) and drops["mrr@10"]["exceeded"] is False
    assert comparison["moved"][0]["returned"][-1] == "tire-repair"

    markdown = (baselined.path / "summary.md").read_text()
    assert "No query regressed beyond its per-query tolerance." in markdown
    table = markdown.split("### Queries that moved mrr@10, ndcg@10 most", 1)[1]
    assert re.search(r"^\| 1 +\| q-001 +\| how do I fix a flat tire +\| mrr@10 1\.0000 → 0\.2000; ndcg@10", table,
                     flags=re.M)
    html = (baselined.path / "report.html").read_text()
    assert "Queries that moved mrr@10, ndcg@10 most" in html
    assert html.index("<code>q-001</code>") < html.index("<code>q-005</code>")


def test_regressed_and_moved_queries_stay_apart(baselined: RagProject) -> None:
    """A query beyond its recall tolerance is in the worst list; one that only moved nDCG is
    listed apart, named as within its tolerance."""
    baselined.thresholds({"ndcg@10_tolerance": 0})
    baselined.answer(q_001=REORDERED["q_001"], q_004=["derailleur", "noise-doc"])  # q-004 loses shifter-cable
    summary = rag_summary(baselined.run())
    assert worst_list(summary.split("Queries that moved", 1)[0]) == ["q-004"]
    moved = summary.split("Queries that moved ndcg@10 most, within their per-query tolerance (1 of 1", 1)[1]
    assert re.findall(r"^\s+\d+\. (\S+)  '", moved, flags=re.M) == ["q-001"]
    assert re.search(drop_line("recall@10", 1, 0.5, "beyond tolerance 0"), entry(summary, "q-004"))


def test_compare_names_the_moved_queries_too(baselined: RagProject) -> None:
    """`ragmetrics compare` judges with the same verdict, so it lists the same queries."""
    thresholds = baselined.thresholds({"ndcg@10_tolerance": 0})
    baselined.answer(**REORDERED)
    baselined.run("--rag-report", "run.json")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest_ragmetrics", "compare", str(baselined.baseline_path),
         str(baselined.path / "run.json"), "--thresholds", str(thresholds), "--golden",
         str(baselined.path / "golden.yaml"), "--fail-on-regression"],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert "No query regressed beyond its per-query tolerance." in proc.stdout
    moved = proc.stdout.split("Queries that moved ndcg@10 most, within their per-query tolerance (2 of 2", 1)[1]
    assert re.findall(r"^\s+\d+\. (\S+)  '", moved, flags=re.M) == ["q-001", "q-005"]


# ------------------------------------------------------------------ the report, once

FOUR_GATES = {"ndcg@10_tolerance": 0, "mrr@10_tolerance": 0, "max_regressed_queries": 0}


@pytest.mark.parametrize("xdist", [False, True], ids=["serial", "xdist"])
def test_the_report_is_printed_once_however_many_gates_fail(baselined: RagProject, xdist: bool) -> None:
    baselined.thresholds(FOUR_GATES)
    baselined.answer(**REORDERED, q_004=["brake-pads"])
    result = baselined.run_subprocess("-n", "2") if xdist else baselined.run()
    failed_gates = [f"golden.yaml::gate::{g}" for g in ("mrr@10", "ndcg@10", "recall@10", "regressed-queries")]
    assert ids_with(result, "failed") == failed_gates + ["golden.yaml::q-004"]
    out = result.stdout.str()
    assert _report_count(out) == 1
    assert out.count("RETRIEVAL GATE FAILED") == 1
    assert out.index("RETRIEVAL GATE FAILED") > out.index("= ragmetrics =")
    # every failing gate says its one line, pointing at the summary
    failures = out.split("= FAILURES =", 1)[1].split("= ragmetrics =", 1)[0]
    lines = [line for line in failures.splitlines() if line.startswith("gate ")]
    assert [line.split(":", 1)[0] for line in lines] == [
        "gate recall@10", "gate mrr@10", "gate ndcg@10", "gate regressed-queries"]
    assert all(line.endswith("(full report in the ragmetrics summary)") for line in lines)
    assert "gate regressed-queries: 1 query regressed (errors included); at most 0 allowed; most: q-004" in failures


@pytest.mark.parametrize("xdist", [False, True], ids=["serial", "xdist"])
def test_the_report_is_printed_once_when_the_retriever_raises_everywhere(baselined: RagProject, xdist: bool) -> None:
    baselined.thresholds(FOUR_GATES)
    baselined.answer(**{q.replace("-", "_"): {"raise": "index offline"} for q in QIDS})
    result = baselined.run_subprocess("-n", "2") if xdist else baselined.run()
    assert len(ids_with(result, "failed")) == len(QIDS) + 4
    out = result.stdout.str()
    assert _report_count(out) == 1
    assert out.count("Worst regressed queries (") == 1


# ------------------------------------------------------------------ JUnit XML

def _junit_properties(path) -> dict[str, dict[str, str]]:
    """test case name -> its properties; fails on a property repeated within one case."""
    found = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        props = [(p.get("name"), p.get("value")) for p in case.iter("property")]
        assert len(props) == len(dict(props)), props
        found[case.get("name")] = dict(props)
    return found


@pytest.mark.parametrize("xdist", [False, True], ids=["serial", "xdist"])
def test_junit_xml_carries_flat_properties(baselined: RagProject, xdist: bool) -> None:
    baselined.answer(q_004=["derailleur"], q_005={"raise": "index offline"})
    baselined.add_query({"id": "q-007", "question": "truing a wheel", "gold_chunks": ["spoke-tension"]},
                        ["spoke-tension"])
    baselined.add_query({"id": "q-008", "question": "unrelated", "gold_chunks": {"noise-doc": 0}}, ["noise-doc"])
    args = ("--junitxml", "junit.xml")
    result = baselined.run_subprocess("-n", "2", *args) if xdist else baselined.run(*args)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    xml_text = (baselined.path / "junit.xml").read_text()
    assert 'name="ragmetrics"' not in xml_text and "'qid'" not in xml_text  # no Python repr
    props = _junit_properties(baselined.path / "junit.xml")
    assert props["q-001"] == {
        "recall@10": "1.0", "hit_rate@10": "1.0", "mrr@10": "1.0", "ndcg@10": "1.0",
        "baseline.recall@10": "1.0", "baseline.hit_rate@10": "1.0", "baseline.mrr@10": "1.0",
        "baseline.ndcg@10": "1.0", "verdict": "ok"}
    assert props["q-004"]["recall@10"] == "0.5" and props["q-004"]["baseline.recall@10"] == "1.0"
    assert props["q-004"]["verdict"] == "regressed"
    assert props["q-005"] == {"verdict": "error"}
    assert props["q-007"] == {"recall@10": "1.0", "hit_rate@10": "1.0", "mrr@10": "1.0", "ndcg@10": "1.0",
                              "verdict": "new"}
    assert props["q-008"] == {"verdict": "unscorable"}
    # the record still reached the controller: the verdict names both failures
    assert worst_list(rag_summary(result)) == ["q-005", "q-004"]


def test_junit_xml_marks_a_query_whose_setup_failed_as_error(baselined: RagProject) -> None:
    conftest = baselined.path / "conftest.py"
    conftest.write_text(conftest.read_text().replace('    _log("fixture")\n', '    raise OSError("index not built")\n'))
    baselined.run("--junitxml", "junit.xml")
    cases = list(ET.parse(baselined.path / "junit.xml").getroot().iter("testcase"))
    # the run stops at the first query: one error case, no verdict property (nothing was measured)
    assert [c.get("name") for c in cases] == ["q-001"]
    assert cases[0].find("error") is not None and not list(cases[0].iter("property"))


# ------------------------------------------------------------------ words and numbers

def test_gate_messages_say_fell_without_a_double_negative_and_count_right(baselined: RagProject) -> None:
    baselined.thresholds({"max_regressed_queries": 0})
    baselined.answer(q_005=["noise-doc"])  # recall 1 -> 0: the mean falls by 1/6
    baselined.remove_query("q-006")
    baselined.add_query({"id": "q-007", "question": "truing a wheel", "gold_chunks": ["spoke-tension"]},
                        ["spoke-tension"])
    baselined.add_query({"id": "q-008", "question": "unrelated", "gold_chunks": {"noise-doc": 0}}, ["noise-doc"])
    result = baselined.run()
    out = result.stdout.str()
    summary = rag_summary(result)
    assert "gate recall@10: recall@10 fell 0.2000 against the baseline (1.0000 -> 0.8000)" in summary
    assert "fell -" not in out
    assert "gate regressed-queries: 1 query regressed (errors included); at most 0 allowed" in summary
    assert "1 new query not in the baseline (scored, not compared): q-007" in summary
    assert "1 query has no relevant document and was not scored: q-008" in summary
    assert "gate baseline: 1 query of the baseline is gone from the golden set (q-006)" in summary
    assert not re.search(r"\b1 queries\b", out)


def test_a_baseline_update_names_the_queries_that_went_up_and_down(baselined: RagProject) -> None:
    baselined.answer(q_001=["noise-doc"], q_002=["chain-lube"], q_003=["rim-wear"], q_004=["derailleur"])
    baselined.run("--rag-update-baseline", "--rag-reason", "a worse retriever, on purpose")
    baselined.restore()
    baselined.answer(q_001=["noise-doc"])
    summary = rag_summary(baselined.run("--rag-update-baseline"))
    assert "recall@10: 0.5000 -> 0.8333 (+0.3333); queries up 3 (q-002, q-003, q-004), down 0" in summary
    assert "hit_rate@10: 0.6667 -> 0.8333 (+0.1667); queries up 1 (q-003), down 0" in summary
    baselined.answer(q_002=["chain-lube"], q_003=["rim-wear"], q_004=["derailleur"], q_005=["noise-doc"])
    summary = rag_summary(baselined.run("--rag-update-baseline", "--rag-reason", "worse again"))
    assert "recall@10: 0.8333 -> 0.3333 (-0.5000); queries up 0, down 4 (q-002, q-003, q-004 … and 1 more)" in summary


def test_an_unchanged_metric_reads_plus_minus_zero(baselined: RagProject) -> None:
    baselined.answer(q_002=["chain-lube", "noise-doc"])
    summary = rag_summary(baselined.run("--rag-update-baseline", "--rag-reason", "q-002 finds half its gold"))
    assert "hit_rate@10: 1.0000 -> 1.0000 (±0); queries up 0, down 0" in summary
    assert "-0.0000" not in summary and "+0.0000" not in summary


def test_replacing_an_unreadable_baseline_says_so(baselined: RagProject) -> None:
    baselined.baseline_path.write_text("{ not json", encoding="utf-8")
    result = baselined.run("--rag-update-baseline")
    assert result.ret == pytest.ExitCode.OK
    summary = rag_summary(result)
    assert "No previous baseline." not in summary
    assert re.search(r"The previous file could not be read and was replaced, so nothing was compared: "
                     r".*baseline\.json, line 1: not valid JSON", summary)


# ------------------------------------------------------------------ the head agrees with the exit code

def test_a_query_beyond_its_tolerance_fails_the_verdict_even_when_every_aggregate_gate_holds(
        baselined: RagProject) -> None:
    # recall@10 may fall by 0.5 on average, so the aggregate gate holds; one query's recall
    # falls to 0 and its item fails: the summary must not say "All gates passed".
    baselined.thresholds({"recall@10_tolerance": 0.5, "recall@10_query_tolerance": 0})
    baselined.answer(q_005=["noise-doc"])
    result = baselined.run("--rag-report", "run.json", "--rag-markdown", "summary.md")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert ids_with(result, "failed") == ["golden.yaml::q-005"]
    summary = rag_summary(result)
    assert "All gates passed" not in summary
    assert "RETRIEVAL GATE FAILED\n  1 query fell beyond its per-query tolerance: q-005" in summary
    artifact = json.loads((baselined.path / "run.json").read_text())
    assert artifact["comparison"]["passed"] is False
    assert artifact["comparison"]["failures"] == ["1 query fell beyond its per-query tolerance: q-005"]
    assert (baselined.path / "summary.md").read_text().startswith("## Retrieval gate: failed")


# ------------------------------------------------------------------ a part never passes for the whole

def test_a_partial_run_never_passes_the_gate(baselined: RagProject) -> None:
    baselined.answer(q_005=["noise-doc"])  # the query that fell is the one left out
    result = baselined.run("-k", "not q-005", "--rag-report=run.json")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert ids_with(result, "failed") == ["golden.yaml::gate::baseline"]
    summary = rag_summary(result)
    assert "All gates passed" not in summary
    assert ("gate baseline: partial run: 1 query meant to run did not (q-005; deselected with -k, --deselect "
            "or --lf, or the run stopped early); the gate judges the whole set, so run it unfiltered") in summary
    artifact = json.loads((baselined.path / "run.json").read_text())
    assert artifact["comparison"]["passed"] is False and artifact["comparison"]["not_run"] == ["q-005"]


def test_a_run_that_deselects_the_gate_items_does_not_end_on_a_green_line(baselined: RagProject) -> None:
    """-k q-001 deselects the gate items too: no item fails, yet the run is red, and pytest's
    last line must not read like a pass to someone (or a CI parser) glancing at it."""
    result = baselined.run("-k", "q-001")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert ids_with(result, "failed") == []
    last = result.stdout.lines[-1]
    assert "1 passed" in last and "1 retrieval gate failed" in last, last
    assert "partial run: 5 queries meant to run did not" in rag_summary(result)


def test_the_last_line_of_a_deselected_gate_survives_other_plugins_reading_the_stats(
        baselined: RagProject) -> None:
    """hypothesis' pytest plugin (loaded wherever hypothesis is installed) reads every entry of
    the terminal's stats as a report; what stands for the failed gate there must be one."""
    result = baselined.run("-k", "q-001", "-p", "_hypothesis_pytestplugin")
    out = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in out and "INTERNALERROR" not in out, out[-3000:]
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    last = result.stdout.lines[-1]
    assert "1 passed" in last and "1 retrieval gate failed" in last, last


def test_a_refused_baseline_refresh_does_not_end_on_a_green_line(baselined: RagProject) -> None:
    """A refresh from a partial run is refused (exit 1); pytest's last line must say so."""
    before = baselined.baseline_path.read_bytes()
    result = baselined.run("--rag-update-baseline", "-k", "q-001 or q-002 or q-003", "-p", "_hypothesis_pytestplugin")
    out = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in out and "INTERNALERROR" not in out, out[-3000:]
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "not writing" in rag_summary(result)
    last = result.stdout.lines[-1]
    assert "3 passed" in last and "1 baseline refresh refused" in last, last
    assert baselined.baseline_path.read_bytes() == before


def test_a_refresh_refused_for_an_errored_query_says_so_on_the_last_line(baselined: RagProject) -> None:
    baselined.answer(q_002={"raise": "index offline"})
    result = baselined.run("--rag-update-baseline")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "1 baseline refresh refused" in result.stdout.lines[-1], result.stdout.lines[-1]


def test_a_run_of_the_gate_items_alone_fails_and_says_why(baselined: RagProject) -> None:
    result = baselined.run("-k", "gate")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "golden.yaml::gate::baseline" in ids_with(result, "failed")
    assert "partial run: 6 queries meant to run did not (q-001, q-002, q-003, q-004, q-005 …" in rag_summary(result)


def test_collect_only_judges_nothing(baselined: RagProject) -> None:
    result = baselined.run("--collect-only")
    assert result.ret == pytest.ExitCode.OK
    assert "ragmetrics ==" not in result.stdout.str()


def test_a_missing_baseline_is_named_where_it_was_looked_for(project: RagProject) -> None:
    result = project.run()
    assert f"gate baseline: no baseline at {project.path / 'baselines' / 'baseline.json'} to compare with" \
        in rag_summary(result)


def test_the_html_chart_shows_the_metric_whose_gate_failed(baselined: RagProject) -> None:
    baselined.thresholds({"mrr@10_tolerance": 0})
    baselined.answer(**REORDERED)  # recall holds: a recall chart would show nothing
    baselined.run("--rag-html=report.html")
    html = (baselined.path / "report.html").read_text()
    assert "<h2>Per-query change in mrr@10</h2>" in html


def test_a_baseline_written_under_a_floor_is_warned_about(baselined: RagProject) -> None:
    baselined.thresholds({"mrr@10_min": 0.95})
    baselined.answer(**REORDERED)  # MRR falls to about 0.78, under the floor
    result = baselined.run("--rag-update-baseline", "--rag-reason", "a cheaper ranking")
    assert result.ret == pytest.ExitCode.OK  # the baseline is written: the trade-off may be intended
    summary = rag_summary(result)
    assert "Baseline written:" in summary
    assert re.search(r"WARNING: mrr@10 = 0\.\d{4} is under its floor 0\.95 \(.*thresholds\.json\): every run will "
                     r"fail that gate", summary)


def test_a_pass_names_the_ungated_metrics_that_fell_beyond_chance(baselined: RagProject) -> None:
    """Out of the box only recall@k is gated: a ranking that keeps every gold document but
    pushes each down two places passes, and the summary says what fell instead of staying quiet."""
    baselined.answer(**{qid.replace("-", "_"): ["noise-a", "noise-b", *ranking] for qid, ranking in GOOD.items()})
    result = baselined.run()
    assert result.ret == pytest.ExitCode.OK
    summary = rag_summary(result)
    line = next(x for x in summary.splitlines() if x.startswith("Not gated, but down beyond chance (p < 0.05): "))
    assert "mrr@10 -0.6667" in line and "recall@" not in line
    assert line.endswith("Give them a tolerance in thresholds.json to gate them.")


def test_an_unchanged_run_names_no_ungated_drop(baselined: RagProject) -> None:
    assert "Not gated" not in rag_summary(baselined.run())
