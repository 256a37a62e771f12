"""baselines/thresholds.json: every key, and every way of getting one wrong."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ragproject import GATES_DEFAULT, QIDS, RagProject, dcg, drop_line, ids_with, no_traceback, outcomes, rag_summary, worst_list

from pytest_ragmetrics.errors import ThresholdsError
from pytest_ragmetrics.gate.thresholds import load_thresholds
from pytest_ragmetrics.measures import MeasurementConfig

#: What the plugin measures by default (rag_k = 10).
DEFAULT_MEASUREMENT = MeasurementConfig(measures=("recall@10", "hit_rate@10", "mrr@10", "ndcg@10"))

# recall@10 per query after these answers: q-002 1/2, q-004 0, q-006 1/3 (all others 1)
THREE_DOWN = {
    "q_002": ["chain-lube", "noise-doc"],
    "q_004": ["brake-pads"],
    "q_006": ["cassette"],
}


def test_defaults_gate_recall_in_aggregate_and_per_query(baselined: RagProject) -> None:
    baselined.answer(q_005=["noise-doc"])
    result = baselined.run()
    assert ids_with(result, "failed") == ["golden.yaml::gate::recall@10", "golden.yaml::q-005"]
    summary = rag_summary(result)
    assert re.search(r"\| recall@10 +\| 1\.0000 +\| 0\.8333 +\| -0\.1667 +\|[^|]*\|[^|]*\| 0 +\| — +\| FAIL: drop", summary)
    assert re.search(r"\| ndcg@10 .*\| — +\| — +\| report only", summary)
    assert "Worst regressed queries (1 of 1" in summary


@pytest.mark.parametrize("tolerance, gate", [(0.1, "failed"), (0.166, "failed"), (0.1667, "passed"), (0.2, "passed")])
def test_aggregate_tolerance(baselined: RagProject, tolerance: float, gate: str) -> None:
    # q-005 loses its only gold document: the mean falls by 1/6 = 0.1667
    baselined.thresholds({"recall@10_tolerance": tolerance, "recall@10_query_tolerance": None})
    baselined.answer(q_005=["noise-doc"])
    result = baselined.run()
    assert outcomes(result)["golden.yaml::gate::recall@10"] == gate
    assert outcomes(result)["golden.yaml::q-005"] == "passed"  # within its own (generous) tolerance
    assert result.ret == (pytest.ExitCode.TESTS_FAILED if gate == "failed" else pytest.ExitCode.OK)
    summary = rag_summary(result)
    if gate == "failed":
        assert f"gate recall@10: recall@10 fell 0.1667 against the baseline (1.0000 -> 0.8333); allowed drop {tolerance:g}" \
            in summary
    else:
        assert f"All gates passed ({len(GATES_DEFAULT)} checked)." in summary
        # one query of six fell by 1: the exact sign-flip p-value is 1 (a single changed query)
        assert re.search(rf"\| recall@10 +\| 1\.0000 +\| 0\.8333 +\| -0\.1667 +\| \[-0\.\d+, \+?-?0\.\d+\] +\| 1\.000 +\| "
                         rf"{tolerance:g} +\| — +\| ok", summary)


def test_tolerance_on_another_metric_adds_a_gate(baselined: RagProject) -> None:
    baselined.thresholds({"mrr@10_tolerance": 0.05})
    baselined.answer(q_001=["noise-doc", "tire-repair"])  # mrr 1 -> 1/2, recall unchanged
    result = baselined.run()
    assert outcomes(result) == {
        **{f"golden.yaml::{q}": "passed" for q in QIDS},
        "golden.yaml::gate::baseline": "passed",
        "golden.yaml::gate::coverage": "passed",
        "golden.yaml::gate::recall@10": "passed",
        "golden.yaml::gate::mrr@10": "failed",
        "golden.yaml::gate::significant-drops": "passed",
    }
    assert ("gate mrr@10: mrr@10 fell 0.0833 against the baseline (1.0000 -> 0.9167); allowed drop 0.05"
            in rag_summary(result))


@pytest.mark.parametrize("floor, gate", [(0.9, "failed"), (0.834, "failed"), (0.8333, "passed")])
def test_floor(baselined: RagProject, floor: float, gate: str) -> None:
    # q-004 finds nothing: mean MRR = 5/6 = 0.8333
    baselined.thresholds({"mrr@10_min": floor, "recall@10_tolerance": 0.99, "recall@10_query_tolerance": None})
    baselined.answer(q_004=["noise-doc"])
    result = baselined.run()
    assert outcomes(result)["golden.yaml::gate::mrr@10"] == gate
    assert ids_with(result, "failed") == (["golden.yaml::gate::mrr@10"] if gate == "failed" else [])
    summary = rag_summary(result)
    if gate == "failed":
        assert f"gate mrr@10: mrr@10 = 0.8333 is under its floor {floor:g}" in summary
        assert re.search(rf"\| mrr@10 +\| 1\.0000 +\| 0\.8333 +\| -0\.1667 +\|[^|]*\|[^|]*\| — +\| {floor:g} +\| FAIL: floor", summary)


def test_floor_applies_without_a_baseline(project: RagProject) -> None:
    project.thresholds({"recall@10_min": 0.9})
    project.answer(q_004=["noise-doc"])
    result = project.run()
    assert ids_with(result, "failed") == ["golden.yaml::gate::baseline", "golden.yaml::gate::coverage",
                                          "golden.yaml::gate::recall@10"]
    assert "gate recall@10: recall@10 = 0.8333 is under its floor 0.9" in rag_summary(result)


@pytest.mark.parametrize("tolerance", [0.5, 0.666])
def test_query_tolerance(baselined: RagProject, tolerance: float) -> None:
    baselined.thresholds({"recall@10_query_tolerance": tolerance, "recall@10_tolerance": None})
    baselined.answer(**THREE_DOWN)
    result = baselined.run()
    # q-002 fell 0.5: within; q-006 fell 0.6667 and q-004 fell 1: beyond
    assert ids_with(result, "failed") == ["golden.yaml::q-004", "golden.yaml::q-006"]
    assert outcomes(result)["golden.yaml::q-002"] == "passed"
    summary = rag_summary(result)
    assert worst_list(summary) == ["q-004", "q-006"]
    failure = result.stdout.str().split("rag query q-006", 1)[1]
    assert re.search(rf"recall@10\s+1\.0000 -> 0\.3333\s+\(-0\.6667\)\s+beyond tolerance {tolerance:g}", failure)


def test_query_tolerance_on_a_metric_not_gated_by_default(baselined: RagProject) -> None:
    baselined.thresholds({"ndcg@10_query_tolerance": 0.0})
    # q-003 swaps its graded documents: recall stays 1, nDCG falls
    baselined.answer(q_003=["brake-cable", "brake-pads"])
    result = baselined.run()
    assert ids_with(result, "failed") == ["golden.yaml::q-003"]
    before, after = dcg([2, 0, 1]) / dcg([2, 1]), dcg([1, 2]) / dcg([2, 1])
    assert re.search(drop_line("ndcg@10", before, after, "beyond tolerance 0"),
                     result.stdout.str().split("rag query q-003", 1)[1])


@pytest.mark.parametrize("limit, gate", [(1, "failed"), (3, "passed")])
def test_max_regressed_queries(baselined: RagProject, limit: int, gate: str) -> None:
    baselined.thresholds({"max_regressed_queries": limit, "recall@10_tolerance": None})
    baselined.answer(**THREE_DOWN)
    result = baselined.run()
    assert outcomes(result)["golden.yaml::gate::regressed-queries"] == gate
    failed = ["golden.yaml::q-002", "golden.yaml::q-004", "golden.yaml::q-006"]
    if gate == "failed":
        failed = ["golden.yaml::gate::regressed-queries"] + failed
    assert ids_with(result, "failed") == failed
    message = f"3 queries regressed (errors included); at most {limit} allowed"
    assert (f"gate regressed-queries: {message}" in rag_summary(result)) == (gate == "failed")


def test_worst_n_cuts_the_list(baselined: RagProject) -> None:
    baselined.thresholds({"worst_n": 2})
    baselined.answer(**THREE_DOWN)
    summary = rag_summary(baselined.run())
    assert worst_list(summary) == ["q-004", "q-006"]
    assert "Worst regressed queries (2 of 3, largest drop first):" in summary
    assert "… and 1 more: q-002" in summary


def test_rag_worst_flag_overrides_worst_n(baselined: RagProject) -> None:
    baselined.thresholds({"worst_n": 2})
    baselined.answer(**THREE_DOWN)
    summary = rag_summary(baselined.run("--rag-worst", "1"))
    assert worst_list(summary) == ["q-004"]
    assert "… and 2 more: q-006, q-002" in summary


def test_report_only_mode(baselined: RagProject) -> None:
    baselined.thresholds({"fail_on_regression": False, "_comment": "report only while we tune chunking"})
    baselined.answer(**THREE_DOWN)
    result = baselined.run("-rs")
    assert result.ret == pytest.ExitCode.OK
    # the failed gate is skipped as reported only, never shown as a pass
    result.assert_outcomes(passed=len(QIDS) + len(GATES_DEFAULT) - 1, skipped=1)
    assert "failed, reported only (fail_on_regression is false): recall@10 fell" in result.stdout.str()
    summary = rag_summary(result)
    assert summary.startswith("RETRIEVAL GATE FAILED (report only: fail_on_regression is false)")
    assert "gate recall@10: recall@10 fell" in summary
    assert worst_list(summary) == ["q-004", "q-006", "q-002"]


def test_comment_keys_are_ignored(baselined: RagProject) -> None:
    baselined.thresholds({"_comment": "tolerances agreed in review", "_owner": {"team": "search"},
                          "recall@10_tolerance": 0.0})
    result = baselined.run()
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(passed=len(QIDS) + len(GATES_DEFAULT))


@pytest.mark.parametrize(
    "data, key, reason",
    [
        ({"recall@10_tolerence": 0.1}, "recall@10_tolerence", "unknown key"),
        ({"max_regressions": 2}, "max_regressions", "unknown key"),
        ({"recall@5_tolerance": 0.1}, "recall@5_tolerance", "which is not measured"),
        ({"precision@10_min": 0.2}, "precision@10_min", "which is not measured"),
        ({"recall@10_tolerance": -0.1}, "recall@10_tolerance", "must be >= 0"),
        ({"mrr@10_query_tolerance": -1}, "mrr@10_query_tolerance", "must be >= 0"),
        ({"recall@10_tolerance": "0.1"}, "recall@10_tolerance", "must be a number"),
        ({"mrr@10_min": -0.5}, "mrr@10_min", "a floor must lie in (0, 1]"),
        ({"mrr@10_min": 1.5}, "mrr@10_min", "above 1"),
        ({"recall@10_tolerance": 1.01}, "recall@10_tolerance", "above 1"),
        ({"worst_n": "5"}, "worst_n", "must be a non-negative integer"),
        ({"max_regressed_queries": 1.5}, "max_regressed_queries", "must be a non-negative integer"),
        ({"fail_on_regression": "no"}, "fail_on_regression", "must be true or false"),
    ],
)
def test_bad_thresholds_are_refused_naming_the_file_and_the_key(tmp_path: Path, data, key, reason) -> None:
    """The validator itself. That a real run turns its refusal into a usage error, retrieves
    nothing and changes no file is checked, case by case and message by message, by
    tests/trust/test_trust_inputs.py::test_malformed_thresholds."""
    path = tmp_path / "baselines" / "thresholds.json"
    path.parent.mkdir()
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ThresholdsError) as caught:
        load_thresholds(path, DEFAULT_MEASUREMENT)
    err = str(caught.value)
    assert err.startswith(f"{path}: ")
    assert "baselines/thresholds.json" in err
    assert repr(key) in err
    assert reason in err
    assert "\n\n" not in err and len(err) < 1500  # one bounded paragraph, as pytest prints it


def test_thresholds_that_are_not_json_are_a_usage_error(baselined: RagProject) -> None:
    baselined.thresholds('{"recall@10_tolerance": 0.1,}')
    result = baselined.run()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "baselines/thresholds.json, line 1: not valid JSON" in result.stderr.str()
    no_traceback(result)


def test_thresholds_path_from_the_flag(baselined: RagProject) -> None:
    (baselined.path / "strict.json").write_text('{"max_regressed_queries": 0}')
    baselined.answer(q_005=["noise-doc"])
    result = baselined.run("--rag-thresholds", "strict.json")
    assert "golden.yaml::gate::regressed-queries" in ids_with(result, "failed")


# ------------------------------------------------ which thresholds are in force, and from where


@pytest.mark.parametrize("how", ["flag", "ini", "override-ini"])
def test_a_thresholds_file_the_user_names_must_exist(baselined: RagProject, how: str) -> None:
    """A named file that is missing would silently gate with the defaults: fewer gates than asked."""
    baselined.thresholds({"max_regressed_queries": 0})  # the default file exists; the named one does not
    args = {"flag": ["--rag-thresholds=nope.json"], "ini": [], "override-ini": ["-o", "rag_thresholds=nope.json"]}
    if how == "ini":
        baselined.ini(rag_thresholds="nope.json")
    result = baselined.run(*args[how])
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert f"ragmetrics: {baselined.path / 'nope.json'}: thresholds file not found" in err
    no_traceback(result)
    assert baselined.calls() == []


def test_the_default_thresholds_file_may_be_absent(baselined: RagProject) -> None:
    result = baselined.run()
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines([
        f"ragmetrics: thresholds defaults (no {baselined.path / 'baselines' / 'thresholds.json'}); "
        "ids map to documents before '#', repeats dropped (first kept)"])


def test_the_header_names_the_thresholds_file_and_the_id_rule_in_force(baselined: RagProject) -> None:
    path = baselined.thresholds({"recall@10_tolerance": 0.0})
    result = baselined.run()
    result.stdout.fnmatch_lines([f"ragmetrics: thresholds {path}; ids map to documents before '#', repeats dropped (first kept)"])
    (baselined.path / "strict.json").write_text('{"max_regressed_queries": 0}')
    result = baselined.run("--rag-thresholds=strict.json", "--rag-id-separator=none", "--rag-accept-mismatch")
    result.stdout.fnmatch_lines([f"ragmetrics: thresholds {baselined.path / 'strict.json'}; "
                                 "ids: as given (no mapping)"])


@pytest.mark.parametrize("how", ["ini", "override-ini", "flag"])
def test_the_word_defaults_gates_with_the_built_in_defaults_and_names_the_file_left_unread(
        baselined: RagProject, how: str) -> None:
    """The built-in defaults on purpose are a word a reviewer sees in the diff, not an empty value."""
    baselined.thresholds({"max_regressed_queries": 0})
    args = {"ini": [], "override-ini": ["-o", "rag_thresholds=defaults"], "flag": ["--rag-thresholds=defaults"]}
    if how == "ini":
        baselined.ini(rag_thresholds="defaults")
    baselined.answer(q_005=["noise-doc"])
    result = baselined.run(*args[how])
    assert "golden.yaml::gate::regressed-queries" not in outcomes(result)
    result.stdout.fnmatch_lines(["ragmetrics: thresholds defaults (rag_thresholds = defaults: "
                                 "*/baselines/thresholds.json is not read); ids map to documents before '#', "
                                 "repeats dropped (first kept)"])
    assert (f"WARNING: {baselined.path / 'baselines' / 'thresholds.json'} exists but this run does not read it: "
            "rag_thresholds is set to defaults, so the built-in defaults gate this run") in rag_summary(result)


def test_a_thresholds_file_named_defaults_is_read_when_written_as_a_path(baselined: RagProject) -> None:
    (baselined.path / "defaults").write_text('{"max_regressed_queries": 0}', encoding="utf-8")
    baselined.ini(rag_thresholds="./defaults")
    baselined.answer(q_005=["noise-doc"])
    result = baselined.run()
    assert "golden.yaml::gate::regressed-queries" in ids_with(result, "failed")
    result.stdout.fnmatch_lines([f"ragmetrics: thresholds {baselined.path / 'defaults'}; *"])


# ------------------------------------------------ the default thresholds file: beside the baseline in use


def _move_baseline(project: RagProject, folder: str) -> Path:
    """Move the measured baseline to ``folder`` and point rag_baseline at it."""
    moved = project.path / folder / "baseline.json"
    moved.parent.mkdir(parents=True, exist_ok=True)
    project.baseline_path.rename(moved)
    project.ini(rag_baseline=f"{folder}/baseline.json")
    return moved


def test_the_thresholds_file_beside_the_baseline_in_use_is_read(baselined: RagProject) -> None:
    _move_baseline(baselined, "gate")
    beside = baselined.path / "gate" / "thresholds.json"
    beside.write_text('{"max_regressed_queries": 0}', encoding="utf-8")
    baselined.answer(q_005=["noise-doc"])
    result = baselined.run()
    assert "golden.yaml::gate::regressed-queries" in ids_with(result, "failed")
    result.stdout.fnmatch_lines([f"ragmetrics: thresholds {beside}; *"])


def test_a_thresholds_file_not_beside_the_baseline_in_use_is_named_as_not_read(baselined: RagProject) -> None:
    """baselines/thresholds.json with the baseline elsewhere: not read, and the header and summary say so."""
    _move_baseline(baselined, "gate")
    usual = baselined.thresholds({"max_regressed_queries": 0})
    baselined.answer(q_005=["noise-doc"])
    result = baselined.run()
    assert "golden.yaml::gate::regressed-queries" not in outcomes(result)
    result.stdout.fnmatch_lines([
        f"ragmetrics: thresholds defaults (no {baselined.path / 'gate' / 'thresholds.json'}; {usual} exists but is "
        "not read: it is not beside the baseline in use); *"])
    assert (f"WARNING: {usual} exists but this run does not read it: the thresholds file read is the one beside "
            f"the baseline in use, {baselined.path / 'gate' / 'thresholds.json'}, which does not exist") \
        in rag_summary(result)


def test_a_repeated_key_is_refused_not_last_one_wins(baselined: RagProject) -> None:
    """json keeps the last of two equal keys: 0.5 would silently loosen the gate set to 0 above it."""
    baselined.thresholds('{\n  "recall@10_tolerance": 0,\n  "recall@10_tolerance": 0.5\n}\n')
    baselined.answer(q_005=["noise-doc"])
    result = baselined.run()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert ("baselines/thresholds.json, line 3: not valid JSON (duplicate key 'recall@10_tolerance'"
            in result.stderr.str())
    no_traceback(result)
    assert baselined.calls() == []


def test_an_empty_flag_value_is_refused_not_read_as_no_file(baselined: RagProject) -> None:
    """`--rag-thresholds=$THRESHOLDS` with the variable unset must not switch the team's gates off."""
    baselined.thresholds({"max_regressed_queries": 0})
    result = baselined.run("--rag-thresholds=")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--rag-thresholds was given an empty path (an unset variable?)" in result.stderr.str()
