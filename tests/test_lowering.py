"""What a lowered baseline is, how a recorded reason carries it, and the file's record of it.

The pure functions of ``gate/lowering.py`` on hand-made baselines, the schema of
``_meta.lowerings`` through the baseline's own reader, and the git reads on a real repository.
The plugin's refresh and ratchet are tested through real sessions in
``tests/trust/test_baseline_lowerings.py``.
"""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from pytest_ragmetrics.errors import BaselineError, RagMetricsError
from pytest_ragmetrics.gate.baseline import Baseline, load_baseline, parse_baseline, write_baseline
from pytest_ragmetrics.gate.lowering import AGGREGATE, Lowering, carried, entries_since, find_lowerings, gated_in_files, gated_metrics, judge_lowerings, new_entry, recorded_lowerings, refresh_lowerings
from pytest_ragmetrics.gate.gitref import RefUnreadable, author_from_git, file_at_ref
from pytest_ragmetrics.gate.ratchet import ratchet_base
from pytest_ragmetrics.gate.thresholds import Thresholds
from pytest_ragmetrics.measures import MeasurementConfig, parse_measures

CONFIG = MeasurementConfig(parse_measures(["recall@10", "ndcg@10"]))
GATED = gated_metrics(Thresholds.defaults(CONFIG), CONFIG.metric_names)
TIME = "2026-12-03T10:00:00+00:00"


def baseline(values: dict[str, dict[str, float]], lowerings: list[dict[str, Any]] | None = None,
             **aggregate: float) -> Baseline:
    """A baseline of these per-query values, means computed (``aggregate`` overrides one)."""
    per_query = {qid: {**v, "_judgments": f"digest-{qid}"} for qid, v in values.items()}
    means: dict[str, float] = {}
    for metric in CONFIG.metric_names:
        rows = [v[metric] for v in values.values() if metric in v]
        if rows:
            means[metric] = sum(rows) / len(rows)
    no_answer = [v["false_retrieval"] for v in values.values() if "false_retrieval" in v]
    if no_answer:
        means["false_retrieval_rate"] = sum(no_answer) / len(no_answer)
    means.update({k.replace("_at_", "@"): v for k, v in aggregate.items()})
    meta: dict[str, Any] = {"measurement": CONFIG.to_dict(), "k": 10}
    if lowerings is not None:
        meta["lowerings"] = lowerings
    return Baseline(meta, means, per_query)


GOOD = {"a": {"recall@10": 1.0, "ndcg@10": 0.9}, "b": {"recall@10": 0.5, "ndcg@10": 0.5}}


# ------------------------------------------------------------------------ what is gated


def test_gated_metrics_follow_the_thresholds() -> None:
    assert GATED == {"recall@10", "false_retrieval", "aggregate.recall@10", "aggregate.false_retrieval_rate",
                     "significant.ndcg@10"}  # ndcg@10 has no tolerance: significant-drops judges it
    loose = Thresholds(tolerance={"ndcg@10": 0.02}, minimum={"mrr@10": 0.5}, query_tolerance={"recall@10": 0.1})
    assert gated_metrics(loose, ["recall@10", "ndcg@10", "mrr@10"]) == {
        "recall@10", "false_retrieval", "aggregate.ndcg@10", "aggregate.mrr@10", "aggregate.false_retrieval_rate",
        "significant.recall@10", "significant.mrr@10"}
    loose.fail_on_significant_drop = False
    assert not any(m.startswith("significant.") for m in gated_metrics(loose, ["recall@10", "ndcg@10", "mrr@10"]))


def test_a_mean_only_significant_drops_judges_is_lowered_when_that_gate_would_fail() -> None:
    """ndcg@10 has no tolerance: a refresh that lowers it on every query needs a reason (the gate would fail
    the same change), and one that moves it by less than one query's worth does not."""
    before = {f"q{i}": {"recall@10": 1.0, "ndcg@10": 1.0} for i in range(12)}
    after = copy.deepcopy(before)
    for entry in after.values():
        entry["ndcg@10"] = 0.5
    assert [x.text() for x in find_lowerings(baseline(before), baseline(after), GATED)] == \
        ["mean ndcg@10 1.0000 -> 0.5000"]
    after = copy.deepcopy(before)
    after["q0"]["ndcg@10"] = 0.5  # one query, by less than 1/n of the mean: chance, not a lowering
    assert find_lowerings(baseline(before), baseline(after), GATED) == []


def test_gated_in_files_reads_the_recorded_thresholds_of_both_files() -> None:
    meta = {"measurement": CONFIG.to_dict(), "k": 10}
    assert gated_in_files(meta) == GATED  # nothing recorded: the defaults of its measurement
    gated_ndcg = {**meta, "thresholds": {"source": "baselines/thresholds.json",
                                         "values": {"ndcg@10_query_tolerance": 0.0}}}
    assert "ndcg@10" in gated_in_files(meta, gated_ndcg)
    assert "ndcg@10" not in gated_in_files(meta, meta)


# ------------------------------------------------------------------------ what went down


def test_a_lower_gated_query_value_and_mean_are_lowerings_an_ungated_one_is_not() -> None:
    after = copy.deepcopy(GOOD)
    after["b"]["recall@10"] = 0.0
    after["a"]["ndcg@10"] = 0.1  # reported, not gated
    found = find_lowerings(baseline(GOOD), baseline(after), GATED)
    assert [x.text() for x in found] == ["b recall@10 0.5000 -> 0.0000", "mean recall@10 0.7500 -> 0.5000"]
    assert found[0].to_record() == {"qid": "b", "metric": "recall@10", "before": 0.5, "after": 0.0}
    assert found[1].to_record() == {"aggregate": True, "metric": "recall@10", "before": 0.75, "after": 0.5}


def test_a_gated_mean_alone_is_listed_as_a_mean() -> None:
    after = copy.deepcopy(GOOD)
    after["a"]["ndcg@10"] = 0.1
    gated = gated_metrics(Thresholds(tolerance={"ndcg@10": 0.0}, query_tolerance={"recall@10": 0.0}), ["ndcg@10"])
    assert [x.text() for x in find_lowerings(baseline(GOOD), baseline(after), gated)] == \
        ["mean ndcg@10 0.7000 -> 0.3000"]


def test_a_drop_under_1e_9_is_noise_and_a_rise_is_no_lowering() -> None:
    after = copy.deepcopy(GOOD)
    after["a"]["recall@10"] = 1.0 - 4e-10
    after["b"]["recall@10"] = 0.75
    assert find_lowerings(baseline(GOOD), baseline(after, **{"recall_at_10": 0.75 - 2e-10}), GATED) == []
    after["a"]["recall@10"] = 1.0 - 2e-9
    assert [x.text() for x in find_lowerings(baseline(GOOD), baseline(after), GATED)] == \
        ["a recall@10 1.0000 -> 1.0000"]


def test_a_question_added_lowers_no_mean() -> None:
    """A hard question added to the golden set pulls the mean down, but no query got worse: the means
    are compared over the queries both files hold, as the gate compares a run with its baseline."""
    after = {**copy.deepcopy(GOOD), "hard": {"recall@10": 0.0, "ndcg@10": 0.0}}
    assert find_lowerings(baseline(GOOD), baseline(after), GATED) == []
    after["b"]["recall@10"] = 0.25  # and a real fall still shows, in the query and the shared mean
    assert [x.text() for x in find_lowerings(baseline(GOOD), baseline(after), GATED)] == \
        ["b recall@10 0.5000 -> 0.2500", "mean recall@10 0.7500 -> 0.6250"]


def test_a_removed_query_is_a_lowering_and_a_renamed_one_is_compared_under_its_new_id() -> None:
    after = {"b": GOOD["b"]}
    found = find_lowerings(baseline(GOOD), baseline(after), GATED)
    # the mean is compared over the queries both hold: the removal is the lowering, named once
    assert [x.text() for x in found] == ["a removed from the baseline (recall@10 was 1.0000)"]
    assert found[0].to_record()["after"] is None
    renamed = baseline({"a2": {"recall@10": 0.0, "ndcg@10": 0.9}, "b": GOOD["b"]})
    renamed.per_query["a2"]["_judgments"] = "digest-a"  # same text and judgments, new id
    found = find_lowerings(baseline(GOOD), renamed, GATED)
    assert found[0].text() == "a2 (was a) recall@10 1.0000 -> 0.0000"
    assert found[0].qid == "a2"


def test_false_retrieval_rising_is_a_lowering() -> None:
    before = {**GOOD, "none": {"false_retrieval": 0.0}}
    after = {**GOOD, "none": {"false_retrieval": 1.0}}
    assert [x.text() for x in find_lowerings(baseline(before), baseline(after), GATED)] == [
        "none false_retrieval 0.0000 -> 1.0000", "mean false_retrieval_rate 0.0000 -> 1.0000"]
    assert find_lowerings(baseline(after), baseline(before), GATED) == []


# ------------------------------------------------------------------------ a refresh


def test_a_refresh_that_lowers_needs_a_reason_and_records_it_after_the_older_entries() -> None:
    after = copy.deepcopy(GOOD)
    after["b"]["recall@10"] = 0.0
    with pytest.raises(BaselineError, match=r"(?s)not writing b\.json: this refresh lowers 2 gated values.*"
                                            r"b recall@10 0\.5000 -> 0\.0000.*--rag-reason"):
        refresh_lowerings(baseline(GOOD), baseline(after), GATED, None, time=TIME, author=None, path="b.json")
    older = new_entry("older", [Lowering("recall@10", 1.0, 0.5, "b")], "2026-01-01T00:00:00+00:00", None)
    done = refresh_lowerings(baseline(GOOD, [older]), baseline(after), GATED, "smaller model", time=TIME,
                             author="Ann <ann@example.com>", path="b.json")
    assert done.entries == [older, {"reason": "smaller model", "time": TIME, "author": "Ann <ann@example.com>",
                                    "lowered": [{"qid": "b", "metric": "recall@10", "before": 0.5, "after": 0.0},
                                                {"aggregate": True, "metric": "recall@10", "before": 0.75,
                                                 "after": 0.5}]}]
    assert "entry 2" in done.notes[0]


def test_a_refresh_that_lowers_nothing_carries_the_entries_and_records_no_reason() -> None:
    older = new_entry("older", [Lowering("recall@10", 1.0, 0.5, "b")], TIME, None)
    done = refresh_lowerings(baseline(GOOD, [older]), baseline(GOOD), GATED, None, time=TIME, author=None, path="b")
    assert done.entries == [older] and done.notes == []
    done = refresh_lowerings(baseline(GOOD, [older]), baseline(GOOD), GATED, "why", time=TIME, author=None, path="b")
    assert done.entries == [older]
    assert done.notes == ["--rag-reason was not needed: this refresh lowers no gated value, so the reason was not "
                          "recorded."]


# ------------------------------------------------------------------------ the ratchet


def _lowered_b(to: float, lowerings: list[dict[str, Any]] | None = None) -> Baseline:
    values = copy.deepcopy(GOOD)
    values["b"]["recall@10"] = to
    return baseline(values, lowerings)


def test_the_ratchet_fails_on_a_lowering_with_no_reason_recorded_since_the_ref() -> None:
    outcome = judge_lowerings(baseline(GOOD), _lowered_b(0.0), GATED, "HEAD~1", "baselines/baseline.json")
    assert not outcome.passed
    assert [x.text() for x in outcome.unexplained] == ["b recall@10 0.5000 -> 0.0000",
                                                       "mean recall@10 0.7500 -> 0.5000"]
    assert "lower than at HEAD~1 with no reason recorded since: b recall@10 0.5000 -> 0.0000" in outcome.message
    assert "--rag-reason" in outcome.message and "git checkout HEAD~1 -- baselines/baseline.json" in outcome.message


def test_an_entry_recorded_since_the_ref_carries_the_lowering() -> None:
    entry = new_entry("smaller model", find_lowerings(baseline(GOOD), _lowered_b(0.0), GATED), TIME, None)
    outcome = judge_lowerings(baseline(GOOD), _lowered_b(0.0, [entry]), GATED, "HEAD~1")
    assert outcome.passed and "each with a reason recorded since" in outcome.message


def test_an_entry_already_at_the_ref_carries_nothing_new() -> None:
    entry = new_entry("old trade-off", [Lowering("recall@10", 1.0, 0.0, "b"), Lowering("recall@10", 1.0, 0.5)],
                      TIME, None)
    outcome = judge_lowerings(baseline(GOOD, [entry]), _lowered_b(0.0, [entry]), GATED, "main")
    assert not outcome.passed


def test_a_recorded_lowering_carries_a_later_partial_rise_but_not_a_further_fall() -> None:
    to_zero = Lowering("recall@10", 0.5, 0.0, "b")
    to_quarter = Lowering("recall@10", 0.5, 0.25, "b")
    entries = recorded_lowerings({"lowerings": [new_entry("r", [to_zero], TIME, None)]})
    assert carried(to_quarter, entries)  # lowered to 0 with a reason, then went back up to 0.25
    entries = recorded_lowerings({"lowerings": [new_entry("r", [to_quarter], TIME, None)]})
    assert not carried(to_zero, entries)  # the reason covered 0.25, not 0
    assert not carried(Lowering("recall@10", 0.5, 0.0, "a"), entries)  # another query
    assert not carried(Lowering("recall@10", 0.5, 0.25), entries)  # the mean, not the query
    removed = recorded_lowerings({"lowerings": [new_entry("r", [Lowering("recall@10", 0.5, None, "b")], TIME, None)]})
    assert carried(to_zero, removed) and carried(Lowering("recall@10", 0.5, None, "b"), removed)
    assert not carried(Lowering("recall@10", 0.5, None, "b"), entries)
    rate = recorded_lowerings({"lowerings": [new_entry("r", [Lowering("false_retrieval_rate", 0.0, 0.5)], TIME, None)]})
    assert carried(Lowering("false_retrieval_rate", 0.0, 0.25), rate)
    assert not carried(Lowering("false_retrieval_rate", 0.0, 1.0), rate)


def test_entries_since_counts_each_entry_once() -> None:
    entry = new_entry("r", [Lowering("recall@10", 0.5, 0.0, "b")], TIME, None)
    assert entries_since({"lowerings": [entry]}, {"lowerings": [entry]}) == []
    assert len(entries_since({"lowerings": [entry]}, {"lowerings": [entry, entry]})) == 1
    assert len(entries_since({}, {"lowerings": [entry]})) == 1


def test_a_baseline_new_at_the_ref_passes() -> None:
    outcome = judge_lowerings(None, _lowered_b(0.0), GATED, "origin/main", "baselines/baseline.json")
    assert outcome.passed and outcome.message == \
        "baselines/baseline.json is new at origin/main: nothing there to compare with"


# ------------------------------------------------------------------------ the file's record


def _written(tmp_path: Path, lowerings: Any) -> Path:
    path = tmp_path / "baseline.json"
    b = baseline(GOOD)
    b.meta["lowerings"] = lowerings
    write_baseline(path, b)
    return path


def test_recorded_lowerings_are_sealed_and_read_back(tmp_path: Path) -> None:
    entry = new_entry("smaller model", [Lowering("recall@10", 1.0, 0.5, "b"), Lowering("recall@10", 1.0, None, "c"),
                                        Lowering("recall@10", 1.0, 0.75)], TIME, "Ann <ann@example.com>")
    path = _written(tmp_path, [entry])
    loaded = load_baseline(path)
    assert recorded_lowerings(loaded.meta)[0].reason == "smaller model"
    data = json.loads(path.read_text(encoding="utf-8"))
    data["_meta"]["lowerings"][0]["reason"] = "something else"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(BaselineError, match="_meta edited"):
        load_baseline(path)


_ENTRY = {"reason": "r", "time": TIME, "lowered": [{"qid": "b", "metric": "recall@10", "before": 0.5, "after": 0.0}]}


@pytest.mark.parametrize(("change", "needle"), [
    (lambda e: {"x": 1}, "_meta.lowerings must be a list"),
    (lambda e: [e, "why"], "_meta.lowerings[1] must be an object"),
    (lambda e: [{**e, "who": "x"}], "_meta.lowerings[0] holds 'who'"),
    (lambda e: [{k: v for k, v in e.items() if k != "reason"}], "_meta.lowerings[0] is missing 'reason'"),
    (lambda e: [{**e, "reason": "  "}], "_meta.lowerings[0].reason must be a non-empty string"),
    (lambda e: [{**e, "author": 3}], "_meta.lowerings[0].author must be a non-empty string"),
    (lambda e: [{**e, "time": "yesterday"}], "_meta.lowerings[0].time must be an ISO 8601 time"),
    (lambda e: [{**e, "time": "2026-12-03T10:00:00"}], "_meta.lowerings[0].time must be an ISO 8601 time with its UTC"),
    (lambda e: [{**e, "lowered": []}], "_meta.lowerings[0].lowered must be a non-empty list"),
    (lambda e: [e, {**e, "lowered": [{"metric": "recall@10", "before": 1, "after": 0}]}],
     "_meta.lowerings[1].lowered[0] must name either a query (qid) or the mean"),
    (lambda e: [{**e, "lowered": [{"qid": "b", "aggregate": True, "metric": "m", "before": 1, "after": 0}]}],
     "_meta.lowerings[0].lowered[0] must name either"),
    (lambda e: [{**e, "lowered": [{"aggregate": 1, "metric": "m", "before": 1, "after": 0}]}],
     "_meta.lowerings[0].lowered[0].aggregate must be true"),
    (lambda e: [{**e, "lowered": [{"qid": "b", "metric": "m", "before": "1", "after": 0}]}],
     "_meta.lowerings[0].lowered[0].before must be a finite number"),
    (lambda e: [{**e, "lowered": [{"qid": "b", "metric": "m", "before": 1, "after": 2}]}],
     "_meta.lowerings[0].lowered[0].after = 2 is outside [0, 1]"),
    (lambda e: [{**e, "lowered": [{"aggregate": True, "metric": "m", "before": 1, "after": None}]}],
     "_meta.lowerings[0].lowered[0].after is null (a removed query), but it names the mean"),
    (lambda e: [{**e, "lowered": [{"qid": "b", "metric": "m", "before": 1}]}],
     "_meta.lowerings[0].lowered[0] is missing 'after'"),
    (lambda e: [{**e, "lowered": [{"qid": "b", "metric": "m", "before": 1, "after": 0, "note": "x"}]}],
     "_meta.lowerings[0].lowered[0] holds 'note'"),
])
def test_a_bad_record_is_refused_naming_the_file_entry_and_field(tmp_path: Path, change: Any, needle: str) -> None:
    path = _written(tmp_path, change(copy.deepcopy(_ENTRY)))  # sealed: only the schema can refuse it
    with pytest.raises(BaselineError) as raised:
        load_baseline(path)
    assert str(raised.value).startswith(f"{path}: ")
    assert needle in str(raised.value)


def test_a_good_record_passes_the_schema(tmp_path: Path) -> None:
    load_baseline(_written(tmp_path, [_ENTRY, {**_ENTRY, "author": "Ann"}]))


# ------------------------------------------------------------------------ git


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for key in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GITHUB_ACTOR", "GIT_DIR", "GIT_WORK_TREE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "no-global-config"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    root = tmp_path / "repo"
    (root / "baselines").mkdir(parents=True)
    _git(root, "init", "-q")
    _git(root, "config", "user.name", "Ann")
    _git(root, "config", "user.email", "ann@example.com")
    write_baseline(root / "baselines" / "baseline.json", baseline(GOOD))
    _git(root, "add", ".")
    _git(root, "commit", "-q", "-m", "baseline")
    return root


def test_file_at_ref_reads_the_committed_version_and_tells_a_missing_file(repo: Path) -> None:
    path = repo / "baselines" / "baseline.json"
    write_baseline(path, _lowered_b(0.0))
    text = file_at_ref(path, "HEAD")
    assert text is not None and parse_baseline(text, "x").per_query["b"]["recall@10"] == 0.5
    assert file_at_ref(repo / "baselines" / "other.json", "HEAD") is None
    assert file_at_ref(repo / "missing-folder" / "baseline.json", "HEAD") is None
    with pytest.raises(RefUnreadable, match="bad revision 'nope'"):
        file_at_ref(path, "nope")


def test_file_at_ref_outside_git_says_so(tmp_path: Path) -> None:
    with pytest.raises(RefUnreadable, match="not a git repository"):
        file_at_ref(tmp_path / "baseline.json", "HEAD")


def test_an_explicit_ref_that_git_cannot_read_names_it_and_gits_message(repo: Path) -> None:
    with pytest.raises(RagMetricsError, match=r"--rag-baseline-ref 'nope': git cannot read it from .*bad revision"):
        ratchet_base(repo / "baselines" / "baseline.json", "nope", "--rag-baseline-ref", "b.json", {})


def test_the_pull_request_base_is_the_default_ref_when_the_clone_has_it(repo: Path) -> None:
    path = repo / "baselines" / "baseline.json"
    pr = {"GITHUB_EVENT_NAME": "pull_request", "GITHUB_BASE_REF": "main"}
    assert ratchet_base(path, None, "", "b.json", {}) is None  # not a pull request: off
    assert ratchet_base(path, None, "", "b.json", {**pr, "GITHUB_EVENT_NAME": "push"}) is None
    missing = ratchet_base(path, None, "", "b.json", pr)
    assert missing is not None and missing.ref is None
    assert "origin/main (the pull request's base, GITHUB_BASE_REF) is not in this clone" in missing.header("b.json")
    assert "fetch-depth: 0" in missing.header("b.json")
    _git(repo, "update-ref", "refs/remotes/origin/main", "HEAD")
    found = ratchet_base(path, None, "", "b.json", {**pr, "GITHUB_EVENT_NAME": "pull_request_target"})
    assert found is not None and found.ref == "origin/main" and found.at_ref is not None
    assert found.header("b.json").startswith("baseline ratchet: b.json compared with origin/main (the pull request's")


def test_a_ref_whose_file_is_broken_fails_the_gate(repo: Path) -> None:
    path = repo / "baselines" / "baseline.json"
    path.write_text("{", encoding="utf-8")
    _git(repo, "commit", "-q", "-am", "broken")
    write_baseline(path, baseline(GOOD))
    base = ratchet_base(path, "HEAD", "--rag-baseline-ref", "b.json", {})
    assert base is not None and base.unreadable is not None
    outcome = base.judge(baseline(GOOD), GATED, "b.json")
    assert not outcome.passed and "the baseline at HEAD cannot be read" in outcome.message


def test_the_author_is_whom_git_would_sign_a_commit_as(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert author_from_git(repo, {}) == "Ann <ann@example.com>"
    assert author_from_git(repo, {"GIT_AUTHOR_NAME": "Bo", "GIT_AUTHOR_EMAIL": "bo@example.com"}) == \
        "Bo <bo@example.com>"
    _git(repo, "config", "--unset", "user.name")
    _git(repo, "config", "--unset", "user.email")
    assert author_from_git(repo, {"GITHUB_ACTOR": "octocat"}) == "octocat"
    assert author_from_git(repo, {}) is None


def test_the_aggregate_prefix_is_what_names_a_mean() -> None:
    assert AGGREGATE + "recall@10" in GATED and "ndcg@10" not in GATED


# ------------------------------------------------------------------------ ragmetrics baseline


def _hand_edit(path: Path, qid: str, value: float) -> None:
    """What an editor does: a number changed, the seal left as it was."""
    data = json.loads(path.read_text(encoding="utf-8"))
    data["per_query"][qid]["recall@10"] = value
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")


def test_a_reseal_in_git_refuses_to_seal_a_lowering_without_a_reason(repo: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_ragmetrics.cli import main

    path = repo / "baselines" / "baseline.json"
    _hand_edit(path, "b", 0.0)
    before = path.read_bytes()
    assert main(["baseline", "--reseal", str(path)]) == 1
    out = capsys.readouterr().out
    assert "not sealed: against the version committed at HEAD, this edit lowers 2 gated values:\n" \
           "  - b recall@10 0.5000 -> 0.0000\n  - mean recall@10 0.7500 -> 0.5000" in out
    assert '--reason "why it went down"' in out
    assert path.read_bytes() == before

    assert main(["baseline", "--reseal", str(path), "--reason", "b's document left the corpus"]) == 0
    out = capsys.readouterr().out
    assert 'Lowered on purpose, recorded in _meta.lowerings (entry 1): "b\'s document left the corpus" by Ann ' \
           "<ann@example.com>" in out
    [entry] = recorded_lowerings(load_baseline(path).meta)  # sealed, with the record
    assert entry.reason == "b's document left the corpus" and entry.author == "Ann <ann@example.com>"
    assert [x.text() for x in entry.lowered] == ["b recall@10 0.5000 -> 0.0000", "mean recall@10 0.7500 -> 0.5000"]

    assert main(["baseline", str(path)]) == 0
    out = capsys.readouterr().out
    assert "1 lowering recorded (_meta.lowerings), oldest first:\n" \
           f"  1. {entry.time} by Ann <ann@example.com>: \"b's document left the corpus\"\n" \
           "       b recall@10 0.5000 -> 0.0000\n       mean recall@10 0.7500 -> 0.5000" in out


def test_a_reseal_never_drops_a_recorded_reason(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The reasons in _meta.lowerings are the baseline's history: a hand edit that deletes one, resealed,
    would leave the ratchet the only witness. The reseal refuses it."""
    from pytest_ragmetrics.cli import main

    path = repo / "baselines" / "baseline.json"
    _hand_edit(path, "b", 0.0)
    assert main(["baseline", "--reseal", str(path), "--reason", "b's document left the corpus"]) == 0
    _git(repo, "commit", "-qam", "lowered with a reason")
    data = json.loads(path.read_text(encoding="utf-8"))
    del data["_meta"]["lowerings"]
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    before = path.read_bytes()
    capsys.readouterr()
    assert main(["baseline", "--reseal", str(path)]) == 1
    out = capsys.readouterr().out
    assert "not sealed: this edit removes or rewrites 1 of the 1 reasons recorded in _meta.lowerings at HEAD" in out
    assert path.read_bytes() == before


def test_a_reseal_that_raises_values_needs_no_reason(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_ragmetrics.cli import main

    path = repo / "baselines" / "baseline.json"
    _hand_edit(path, "b", 1.0)
    assert main(["baseline", "--reseal", str(path), "--reason", "just in case"]) == 0
    assert "--reason was not needed: against HEAD this seal lowers no gated value" in capsys.readouterr().out
    assert "lowerings" not in load_baseline(path).meta


def test_a_reseal_carries_a_lowering_recorded_since_head(repo: Path) -> None:
    """A refresh recorded a reason (not yet committed); a later edit elsewhere needs none."""
    from pytest_ragmetrics.cli import main

    path = repo / "baselines" / "baseline.json"
    lowered = _lowered_b(0.0)
    lowered.meta["lowerings"] = [new_entry("recorded", find_lowerings(baseline(GOOD), lowered, GATED), TIME, None)]
    write_baseline(path, lowered)
    data = json.loads(path.read_text(encoding="utf-8"))
    data["per_query"]["a"]["ndcg@10"] = 0.2  # not gated
    data["aggregate"]["ndcg@10"] = 0.35
    path.write_text(json.dumps(data), encoding="utf-8")
    assert main(["baseline", "--reseal", str(path)]) == 0
    assert len(load_baseline(path).meta["lowerings"]) == 1


def test_a_reseal_outside_git_seals_and_says_no_check_was_possible(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_ragmetrics.cli import main

    path = tmp_path / "baseline.json"
    write_baseline(path, baseline(GOOD))
    _hand_edit(path, "b", 0.0)
    assert main(["baseline", "--reseal", str(path), "--reason", "r"]) == 0
    out = capsys.readouterr().out
    assert "No lowering check was possible: not in a git checkout with a commit" in out
    assert "--reason was not recorded" in out
    assert load_baseline(path).per_query["b"]["recall@10"] == 0.0


def test_a_reseal_of_a_file_git_does_not_track_says_no_check_was_possible(
        repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_ragmetrics.cli import main

    path = repo / "baselines" / "other.json"
    write_baseline(path, baseline(GOOD))
    _hand_edit(path, "b", 0.0)
    assert main(["baseline", "--reseal", str(path)]) == 0
    assert "No lowering check was possible: the file is not committed at HEAD" in capsys.readouterr().out


@pytest.mark.parametrize(("args", "needle"), [
    (["--reseal", "--reason", "  "], "--reason was given an empty reason"),
    (["--reason", "why"], "--reason records why a reseal lowers the baseline; it goes with --reseal"),
])
def test_a_bad_reason_is_bad_usage(repo: Path, capsys: pytest.CaptureFixture[str], args: list[str],
                                   needle: str) -> None:
    from pytest_ragmetrics.cli import main

    assert main(["baseline", *args, str(repo / "baselines" / "baseline.json")]) == 2
    assert needle in capsys.readouterr().err


def test_the_check_says_when_nothing_was_lowered_on_purpose(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_ragmetrics.cli import main

    assert main(["baseline", str(repo / "baselines" / "baseline.json")]) == 0
    assert "No lowering recorded (_meta.lowerings)" in capsys.readouterr().out


def test_a_hand_edit_committed_before_the_reseal_is_still_checked(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Committing the lowered, unsealed file first must not make it what the reseal compares with: the last
    commit where the file was sealed is."""
    from pytest_ragmetrics.cli import main

    path = repo / "baselines" / "baseline.json"
    _hand_edit(path, "b", 0.0)
    _git(repo, "commit", "-qam", "a hand edit, unsealed")
    assert main(["baseline", "--reseal", str(path)]) == 1
    out = capsys.readouterr().out
    assert "(the last commit where it was sealed), this edit lowers 2 gated values" in out


def test_the_ratchet_says_when_a_lowering_is_gated_now_but_was_not_at_the_ref() -> None:
    """A lowering made while ndcg@10 was not gated per query, and gated since: the reason recorded then does
    not name it, and the message says so rather than looking like a lowering nobody explained."""
    after = copy.deepcopy(GOOD)
    after["a"]["ndcg@10"] = 0.1
    gated = gated_metrics(Thresholds(tolerance={"recall@10": 0.0}, query_tolerance={"recall@10": 0.0,
                                                                                       "ndcg@10": 0.0}), [])
    outcome = judge_lowerings(baseline(GOOD), baseline(after), gated, "main")
    assert not outcome.passed
    assert "(ndcg@10 is gated now but was not at main: a reason recorded before the thresholds gated it does not " \
           "name it)" in outcome.message
