"""The run artifact's schema (gate/artifact.py), checked through every verb that reads one.

A verdict drawn from a file is only as good as the file: a NaN, a metric out of
[0, 1], a missing metric, a key in another case, a hand-edited mean or malformed
recorded thresholds must stop `ragmetrics compare`, `history` and `export` with the
file, the query and the field named (exit 2), never pass a gate or raise a traceback.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from pytest_ragmetrics.cli import main
from pytest_ragmetrics.gate.artifact import ARTIFACT_FORMAT, load_artifact, seal_artifact

from trust_helpers import TrustProject

METRICS = ["recall@10", "ndcg@10"]


def valid_artifact(created: str = "2025-01-01T00:00:00+00:00", **overrides: Any) -> dict[str, Any]:
    """A small artifact as the plugin writes it: means consistent with the per-query rows."""
    per_query: dict[str, Any] = {
        "q1": {"status": "scored", "metrics": {"recall@10": 1.0, "ndcg@10": 0.8}, "ranking": ["d1"], "tags": ["a"],
               "error": None, "n_docs": 1},
        "q2": {"status": "scored", "metrics": {"recall@10": 0.5, "ndcg@10": 0.4}, "ranking": ["d2"], "tags": ["a"],
               "error": None, "n_docs": 1},
        "q3": {"status": "error", "metrics": None, "ranking": [], "tags": [], "error": "TimeoutError", "n_docs": 0},
        "q4": {"status": "unscorable", "metrics": {}, "ranking": ["d9"], "tags": [], "error": None, "n_docs": 1},
    }
    data: dict[str, Any] = {
        "_meta": {"format": ARTIFACT_FORMAT, "measurement": {"metrics": METRICS, "relevance_level": 1,
                                                              "gain": "exponential", "id_separator": "#"},
                  "k": 10, "created": created, "subset": "full",
                  "thresholds": {"source": "defaults", "values": {"recall@10_tolerance": 0.0,
                                                                  "recall@10_query_tolerance": 0.0,
                                                                  "max_regressed_queries": None, "worst_n": 10,
                                                                  "fail_on_regression": True}}},
        "aggregate": {"recall@10": 0.5, "ndcg@10": 0.4},  # (1 + .5 + 0) / 3, (.8 + .4 + 0) / 3
        "n": 3,
        "per_query": per_query,
        "comparison": {"regressed": [], "passed": True},
    }
    data.update(overrides)
    return data


def write(path: Path, data: Any) -> Path:
    """Write ``data``; an artifact of the current format is sealed as the plugin would, so each case
    meets the check it is about, not the seal (which is tested on its own)."""
    if isinstance(data, dict) and isinstance(data.get("_meta"), dict) and "format" in data["_meta"]:
        data = seal_artifact(copy.deepcopy(data))
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def ragmetrics(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """`python -m pytest_ragmetrics ARGS` from this checkout, whatever the test's working folder."""
    return subprocess.run([sys.executable, "-m", "pytest_ragmetrics", *map(str, args)],
                          capture_output=True, text=True, timeout=120, cwd=Path(__file__).resolve().parents[2])


def set_metric(qid: str, metric: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(data: dict[str, Any]) -> None:
        data["per_query"][qid]["metrics"][metric] = value
    return edit


def test_a_valid_artifact_loads_and_an_older_one_without_a_format_too(tmp_path: Path) -> None:
    assert load_artifact(write(tmp_path / "new.json", valid_artifact()))["n"] == 3
    old = valid_artifact()
    del old["_meta"]["format"]
    assert load_artifact(write(tmp_path / "old.json", old))["_meta"]["k"] == 10
    # the keys another part of the product records are accepted
    extra = valid_artifact()
    extra["_meta"]["baseline_retriever"] = {"name": "bm25", "settings": [1, None]}
    extra["comparison"]["retriever_changes"] = ["mode: bm25 -> hybrid"]
    load_artifact(write(tmp_path / "extra.json", extra))


@pytest.mark.parametrize("value, problem", [
    ("NaN", "per_query.q2.metrics.recall@10 must be a finite number, got nan"),
    ("1e308", "per_query.q2.metrics.recall@10 = 1e+308 is outside [0, 1]"),
])
def test_compare_refuses_a_nan_or_huge_metric_instead_of_passing(tmp_path: Path, value: str, problem: str) -> None:
    good = write(tmp_path / "a.json", valid_artifact())
    text = json.dumps(valid_artifact()).replace('"recall@10": 0.5, "ndcg@10": 0.4}, "ranking": ["d2"]',
                                                f'"recall@10": {value}, "ndcg@10": 0.4}}, "ranking": ["d2"]')
    bad = write(tmp_path / "b.json", text)
    proc = ragmetrics("compare", good, bad, "--fail-on-regression")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"{bad}: {problem}" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_compare_refuses_a_missing_metric_without_a_traceback(tmp_path: Path) -> None:
    data = valid_artifact()
    del data["per_query"]["q1"]["metrics"]["ndcg@10"]
    good, bad = write(tmp_path / "a.json", valid_artifact()), write(tmp_path / "b.json", data)
    proc = ragmetrics("compare", good, bad, "--fail-on-regression")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"{bad}: per_query.q1.metrics.ndcg@10 is missing" in proc.stderr
    assert "Traceback" not in proc.stderr and "KeyError" not in proc.stderr


def _drop_status(data: dict[str, Any]) -> None:
    del data["per_query"]["q2"]["status"]


def _edit_mean(data: dict[str, Any]) -> None:
    data["aggregate"]["recall@10"] = 0.9


@pytest.mark.parametrize("edit, field, words", [
    (_drop_status, "per_query.q2.status", "is missing"),
    (lambda d: d["per_query"]["q2"].update(status="ok"), "per_query.q2.status", "is 'ok'; expected one of"),
    (set_metric("q1", "recall@10", True), "per_query.q1.metrics.recall@10", "must be a finite number, got True"),
    (set_metric("q1", "recall@10", -0.1), "per_query.q1.metrics.recall@10", "is outside [0, 1]"),
    (set_metric("q1", "Recall@10", 1.0), "per_query.q1.metrics.Recall@10", "is an unknown metric"),
    (_edit_mean, "aggregate.recall@10", "the file was edited by hand"),
    (lambda d: d["aggregate"].update({"mrr@10": 0.5}), "aggregate.mrr@10", "is not a measured metric"),
    (lambda d: d["_meta"].update(thresholds="garbage"), "_meta.thresholds", "is 'garbage'"),
    (lambda d: d["_meta"]["thresholds"]["values"].update({"recall@10_tolerance": 7}),
     "_meta.thresholds.values", "above 1"),
    (lambda d: d["comparison"].update(regressed={"q1": 1}), "comparison.regressed", "expected a list of objects"),
    (lambda d: d["comparison"].update(regressed=["q1"]), "comparison.regressed[0]", "expected an object"),
    (lambda d: d["_meta"].update(format=ARTIFACT_FORMAT + 1), "_meta.format", "newer pytest-ragmetrics"),
    (lambda d: d["_meta"].update(created="20261105T030000Z"), "_meta.created",
     "is '20261105T030000Z'; expected an ISO-8601 time as the plugin writes it (2026-12-01T02:37:05+00:00)"),
    (lambda d: d["_meta"].update(created="2026-13-01T00:00:00+00:00"), "_meta.created", "expected an ISO-8601 time"),
    (lambda d: d["_meta"].update(baseline={"sha256": None, "created": None, "updated": "yes"}),
     "_meta.baseline.updated", "is 'yes'; expected true (the run wrote the baseline) or false"),
    (lambda d: d["_meta"].update(baseline={"sha256": 5, "created": None, "updated": False}),
     "_meta.baseline.sha256", "is 5; expected a string or null"),
    (lambda d: d["_meta"].update(baseline="baseline.json"), "_meta.baseline", "expected null or an object"),
    (lambda d: d["per_query"]["q1"].update(ranking=["d1", "d5", "d1"]), "per_query.q1.ranking",
     "holds the document 'd1' twice"),
    (lambda d: d["per_query"]["q1"].update(_top=[f"d{i}" for i in range(11)]), "per_query.q1._top",
     "holds 11 documents, more than _meta.k = 10"),
    (lambda d: d["_meta"].update(k=None), "_meta.k", "is None; expected a positive integer"),
    (lambda d: d["_meta"].update(k=0), "_meta.k", "is 0; expected a positive integer"),
    (lambda d: d["_meta"].update(golden=[1]), "_meta.golden", "is [1]; expected an object"),
    (lambda d: d["_meta"].update(golden={"sha256": 5}), "_meta.golden.sha256", "is 5; expected a string"),
    (lambda d: d["_meta"].update(golden={"n_queries": "6"}), "_meta.golden.n_queries",
     "is '6'; expected a non-negative integer"),
    (lambda d: d["per_query"]["q1"].update(_judgments=5), "per_query.q1._judgments", "is 5; expected a string"),
])
def test_every_reader_refuses_a_broken_artifact_naming_file_record_and_field(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: Callable[[dict[str, Any]], None], field: str,
        words: str) -> None:
    data = copy.deepcopy(valid_artifact())
    edit(data)
    bad = write(tmp_path / "bad.json", data)
    good = write(tmp_path / "good.json", valid_artifact("2024-12-31T00:00:00+00:00"))
    for argv in (["compare", str(good), str(bad), "--fail-on-regression"],
                 ["history", str(good), str(bad), "--fail-on-drift"],
                 ["export", "--artifact", str(bad), "--run-out", str(tmp_path / "run.trec"), "--force"]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert f"{bad}: {field}" in err and words in err, (argv, err)
    assert not (tmp_path / "run.trec").exists()


def test_history_refuses_garbage_recorded_thresholds_instead_of_passing_the_drift(tmp_path: Path) -> None:
    """A night whose thresholds read as "none recorded" cut the drift window and --fail-on-drift passed."""
    nights = tmp_path / "nights"
    nights.mkdir()
    for day, recall in enumerate((1.0, 0.98, 0.96, 0.94, 0.92), start=1):  # mean: -0.0067 a night
        data = valid_artifact(f"2025-01-0{day}T00:00:00+00:00")
        data["_meta"]["thresholds"]["source"] = "baselines/thresholds.json"  # a team's, not the defaults
        data["_meta"]["thresholds"]["values"]["recall@10_tolerance"] = 0.01
        data["per_query"]["q1"]["metrics"]["recall@10"] = recall
        data["aggregate"]["recall@10"] = (recall + 0.5) / 3
        if day == 3:
            data["_meta"]["thresholds"] = "garbage"
        write(nights / f"night-{day}.json", data)
    proc = ragmetrics("history", nights, "--fail-on-drift")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"{nights / 'night-3.json'}: _meta.thresholds is 'garbage'" in proc.stderr
    fixed = json.loads((nights / "night-2.json").read_text())
    fixed["_meta"]["created"] = "2025-01-03T00:00:00+00:00"
    fixed["per_query"]["q1"]["metrics"]["recall@10"] = 0.96
    fixed["aggregate"]["recall@10"] = (0.96 + 0.5) / 3
    write(nights / "night-3.json", fixed)
    assert ragmetrics("history", nights, "--fail-on-drift").returncode == 1  # the slide, seen whole


def test_history_does_not_take_a_string_updated_for_a_baseline_refresh(tmp_path: Path) -> None:
    """``"updated": "yes"`` read as a refresh, and the drift before it no longer failed the job."""
    nights = tmp_path / "nights"
    nights.mkdir()
    for day, recall in enumerate((1.0, 0.98, 0.96, 0.94, 0.92), start=1):  # mean: -0.0067 a night
        data = valid_artifact(f"2025-01-0{day}T00:00:00+00:00")
        data["_meta"]["thresholds"] = {"source": "baselines/thresholds.json",
                                       "values": {**data["_meta"]["thresholds"]["values"], "recall@10_tolerance": 0.01}}
        data["_meta"]["baseline"] = {"sha256": "a" * 64, "created": "2024-12-01T00:00:00+00:00", "updated": False}
        data["per_query"]["q1"]["metrics"]["recall@10"] = recall
        data["aggregate"]["recall@10"] = (recall + 0.5) / 3
        write(nights / f"night-{day}.json", data)
    assert ragmetrics("history", nights, "--fail-on-drift").returncode == 1
    last = json.loads((nights / "night-5.json").read_text())
    last["_meta"]["baseline"]["updated"] = "yes"
    write(nights / "night-5.json", last)
    proc = ragmetrics("history", nights, "--fail-on-drift")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"{nights / 'night-5.json'}: _meta.baseline.updated is 'yes'; expected true" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_history_refuses_a_malformed_regressed_list_without_a_traceback(tmp_path: Path) -> None:
    data = valid_artifact()
    data["comparison"]["regressed"] = 5
    bad = write(tmp_path / "bad.json", data)
    proc = ragmetrics("history", bad, "--fail-on-drift")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"{bad}: comparison.regressed is 5; expected a list of objects" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_the_plugin_writes_a_versioned_artifact_every_reader_accepts(baselined: TrustProject) -> None:
    result = baselined.run("--rag-report=run.json")
    assert result.ret == 0, result.stdout.str()
    data = load_artifact(baselined.path / "run.json")
    assert data["_meta"]["format"] == ARTIFACT_FORMAT


def test_compare_and_the_plugin_give_the_same_interval_and_p_value_for_the_same_run(baselined: TrustProject) -> None:
    """The plugin resampled the deltas in golden order, compare in the artifact's (sorted) qid order:
    one run, two intervals. Both now resample one order."""
    records = list(reversed(baselined.records))  # golden order unlike sorted order
    for i, r in enumerate(records):
        r["id"] = f"q-{9 - i}"
    baselined.golden(records)
    baselined.answers = {r["id"]: ans for r, ans in zip(records, reversed(list(baselined.answers.values())))}
    baselined._write_rankings()
    assert baselined.run("--rag-update-baseline").ret == 0
    worse = {records[0]["id"]: ["noise"], records[2]["id"]: ["noise", "x", "y", "z"] + baselined.answers[records[2]["id"]],
             records[3]["id"]: list(reversed(baselined.answers[records[3]["id"]])) + ["noise"]}
    baselined.answers.update(worse)
    baselined._write_rankings()
    result = baselined.run("--rag-report=run.json")
    assert result.ret == 1, result.stdout.str()
    plugin = json.loads((baselined.path / "run.json").read_text())["comparison"]["aggregate"]
    proc = ragmetrics("compare", baselined.baseline_path, baselined.path / "run.json", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    cli = json.loads(proc.stdout)["aggregate"]
    by_metric = {row["metric"]: row["stats"] for row in cli}
    moved = 0
    for row in plugin:
        assert row["stats"] == by_metric[row["metric"]], row["metric"]
        moved += row["stats"]["ci95"][0] != row["stats"]["ci95"][1]
    assert moved  # the deltas vary, so the order they are resampled in matters
