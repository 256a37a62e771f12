"""A lowered baseline leaves a written trace, through real ``pytest --rag-eval`` sessions.

A refresh that lowers a gated value writes nothing without ``--rag-reason``; with it, the reason
is kept in ``_meta.lowerings`` and shown by every later run. The pure judgments are tested in
``tests/test_lowering.py``.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess

import pytest
import yaml
from ragproject import outcomes, rag_summary
from trust_helpers import TrustProject, assert_usage_error, no_traceback

from pytest_ragmetrics.gate.baseline import Baseline, write_baseline

NO_ANSWER = {"id": "q-none", "question": "who won the 1998 world cup", "answerable": False, "tags": ["offtopic"]}
#: q-002 finds one of its two gold documents: recall@10 1 -> 0.5, the mean 1 -> 11/12
HALF_OF_Q002 = ["chain-lube#1-2", "noise-doc"]


@pytest.fixture(autouse=True)
def _author(monkeypatch: pytest.MonkeyPatch) -> None:
    """Who records a lowering, as git would sign a commit; no CI's identity leaks in."""
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Ann")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "ann@example.com")
    monkeypatch.delenv("GITHUB_ACTOR", raising=False)


def _refresh(project: TrustProject, *args: str) -> pytest.RunResult:
    result = project.run("--rag-update-baseline", *args)
    no_traceback(result.stdout.str() + result.stderr.str())
    return result


# ------------------------------------------------------------------ a refresh that lowers


def test_a_refresh_that_lowers_a_gated_value_writes_nothing_without_a_reason(baselined: TrustProject) -> None:
    before = baselined.baseline_path.read_bytes()
    baselined.answer(q_002=HALF_OF_Q002)
    result = _refresh(baselined)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert baselined.baseline_path.read_bytes() == before
    summary = rag_summary(result)
    assert "not writing baselines/baseline.json: this refresh lowers 2 gated values against the baseline it " \
           "replaces" in summary
    assert "  - q-002 recall@10 1.0000 -> 0.5000\n  - mean recall@10 1.0000 -> 0.9167" in summary
    assert 'run the refresh again with --rag-reason "why it went down"' in summary
    assert "1 baseline refresh refused" in result.outlines[-1]


def test_a_refresh_slipped_into_a_job_by_pytest_addopts_cannot_lower_the_baseline(
        baselined: TrustProject, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_ADDOPTS", os.environ["PYTEST_ADDOPTS"] + " --rag-update-baseline")
    before = baselined.baseline_path.read_bytes()
    baselined.answer(q_002=HALF_OF_Q002)
    result = baselined.run()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert baselined.baseline_path.read_bytes() == before
    assert "q-002 recall@10 1.0000 -> 0.5000" in rag_summary(result)


def test_a_reason_is_recorded_with_what_it_lowered_and_older_reasons_are_kept(baselined: TrustProject) -> None:
    baselined.answer(q_002=HALF_OF_Q002)
    result = _refresh(baselined, "--rag-reason", "  a smaller encoder, for latency  ")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    summary = rag_summary(result)
    assert 'Lowered on purpose, recorded in _meta.lowerings (entry 1): "a smaller encoder, for latency" by Ann ' \
           '<ann@example.com>' in summary
    assert "  - q-002 recall@10 1.0000 -> 0.5000" in summary
    [entry] = baselined.baseline()["_meta"]["lowerings"]
    assert entry["reason"] == "a smaller encoder, for latency"
    assert entry["author"] == "Ann <ann@example.com>"
    assert entry["lowered"] == [{"qid": "q-002", "metric": "recall@10", "before": 1.0, "after": 0.5},
                                {"aggregate": True, "metric": "recall@10", "before": 1.0, "after": 0.9166666667}]
    written = dt.datetime.fromisoformat(entry["time"])
    assert written.utcoffset() == dt.timedelta(0)
    assert abs((dt.datetime.now(dt.timezone.utc) - written).total_seconds()) < 600

    baselined.answer(q_001=["tube-patch"])  # a second trade-off, a second reason, after the first
    assert _refresh(baselined).ret == pytest.ExitCode.TESTS_FAILED
    assert _refresh(baselined, "--rag-reason", "no tyre documents in the new index").ret == pytest.ExitCode.OK
    entries = baselined.baseline()["_meta"]["lowerings"]
    assert [e["reason"] for e in entries] == ["a smaller encoder, for latency", "no tyre documents in the new index"]
    assert entries[1]["lowered"][0] == {"qid": "q-001", "metric": "recall@10", "before": 1.0, "after": 0.0}

    baselined.restore()  # back up: nothing lowered, the record stays, no reason needed
    result = _refresh(baselined)
    assert result.ret == pytest.ExitCode.OK
    assert baselined.baseline()["_meta"]["lowerings"] == entries
    assert "Lowered on purpose" not in rag_summary(result)


def test_a_reason_that_is_not_needed_is_said_and_not_recorded(baselined: TrustProject) -> None:
    result = _refresh(baselined, "--rag-reason", "just in case")
    assert result.ret == pytest.ExitCode.OK
    assert "--rag-reason was not needed: this refresh lowers no gated value, so the reason was not recorded." in \
        rag_summary(result)
    assert "lowerings" not in baselined.baseline()["_meta"]


def test_a_first_baseline_needs_no_reason(project: TrustProject) -> None:
    result = _refresh(project, "--rag-reason", "first")
    assert result.ret == pytest.ExitCode.OK
    assert "--rag-reason was not needed: there is no previous baseline to lower" in rag_summary(result)
    assert "lowerings" not in project.baseline()["_meta"]


@pytest.mark.parametrize("args", [("--rag-reason", "   "), ("--rag-reason=",), ("--rag-reason", "\u200b\u2060"),
                                  ("--rag-reason", "\u2800")])
def test_an_empty_reason_is_refused(baselined: TrustProject, args: tuple[str, ...]) -> None:
    assert_usage_error(_refresh(baselined, *args), "--rag-reason was given an empty reason")


def test_a_reason_without_a_refresh_is_refused(baselined: TrustProject) -> None:
    assert_usage_error(baselined.run("--rag-reason", "why"), "--rag-reason records why --rag-update-baseline "
                                                               "lowers the baseline")


def test_a_query_removed_from_the_golden_set_is_a_lowering(baselined: TrustProject) -> None:
    baselined.remove_query("q-006")
    result = _refresh(baselined)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "this refresh lowers 1 gated value against the baseline it replaces:\n" \
           "  - q-006 removed from the baseline (recall@10 was 1.0000)" in rag_summary(result)
    assert _refresh(baselined, "--rag-reason", "the question was about a discontinued part").ret == 0
    [entry] = baselined.baseline()["_meta"]["lowerings"]
    assert entry["lowered"] == [{"qid": "q-006", "metric": "recall@10", "before": 1.0, "after": None}]


def test_a_renamed_query_is_no_removal_and_is_compared_under_its_new_id(baselined: TrustProject) -> None:
    baselined.edit_query("q-006", id="q-006-cassette")
    baselined.answers["q-006-cassette"] = ["cassette", "noise-doc"]  # finds 1 of its 3 gold documents
    baselined._write_rankings()
    result = _refresh(baselined)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    summary = rag_summary(result)
    assert "  - q-006-cassette (was q-006) recall@10 1.0000 -> 0.3333\n  - mean recall@10" in summary
    assert "removed" not in summary
    baselined.answers["q-006-cassette"] = baselined.answers["q-006"]
    baselined._write_rankings()
    assert _refresh(baselined).ret == pytest.ExitCode.OK


def test_a_question_with_no_answer_that_now_gets_one_is_a_lowering(project: TrustProject) -> None:
    project.add_query(NO_ANSWER, [])
    project.make_baseline()
    project.answer(q_none=["tire-repair"])
    result = _refresh(project)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    summary = rag_summary(result)
    assert "  - q-none false_retrieval 0.0000 -> 1.0000\n  - mean false_retrieval_rate 0.0000 -> 1.0000" in summary


def test_only_gated_values_need_a_reason(baselined: TrustProject) -> None:
    """q-002's gold comes back lower in the list: recall@10 holds, ndcg@10 and mrr@10 fall."""
    baselined.answer(q_002=["noise-doc", "other-doc", "chain-lube", "chain-clean"])
    assert _refresh(baselined).ret == pytest.ExitCode.OK  # ndcg@10 and mrr@10 are reported, not gated
    baselined.restore()
    assert _refresh(baselined).ret == pytest.ExitCode.OK
    baselined.thresholds({"ndcg@10_tolerance": 0.0})
    baselined.answer(q_002=["noise-doc", "other-doc", "chain-lube", "chain-clean"])
    result = _refresh(baselined)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    summary = rag_summary(result)
    assert "this refresh lowers 1 gated value" in summary and "  - mean ndcg@10 0.9806 -> 0.9224" in summary
    assert "q-002 ndcg@10" not in summary  # gated as a mean, not per query


# ------------------------------------------------------------------ shown by every later run


def test_the_runs_summaries_show_the_lowerings_of_the_baseline_in_use(baselined: TrustProject) -> None:
    baselined.answer(q_002=HALF_OF_Q002)
    assert _refresh(baselined, "--rag-reason", "a smaller encoder").ret == pytest.ExitCode.OK
    baselined.answer(q_001=["tube-patch"])
    assert _refresh(baselined, "--rag-reason", "tyre documents moved out").ret == pytest.ExitCode.OK
    entries = baselined.baseline()["_meta"]["lowerings"]
    result = baselined.run("--rag-markdown=summary.md")
    assert result.ret == pytest.ExitCode.OK
    assert f"Baseline baselines/baseline.json records 2 lowerings made on purpose; the most recent, " \
           f'{entries[1]["time"]} by Ann <ann@example.com>: "tyre documents moved out" (q-001 recall@10 1.0000 -> ' \
           "0.0000; mean recall@10 0.9167 -> 0.7500). `ragmetrics baseline baselines/baseline.json` lists them " \
           "all." in rag_summary(result)
    markdown = (baselined.path / "summary.md").read_text(encoding="utf-8")
    assert "### Baseline lowerings: 2 recorded" in markdown
    rows = [line for line in markdown.splitlines() if line.startswith(f"| {entries[0]['time'][:10]}")]
    assert [row.split("|")[3].strip() for row in rows] == ["tyre documents moved out", "a smaller encoder"]


def test_a_baseline_never_lowered_adds_nothing_to_the_summary(baselined: TrustProject) -> None:
    assert "lowering" not in rag_summary(baselined.run())


def test_a_record_that_breaks_the_schema_stops_the_run_naming_the_entry_and_field(baselined: TrustProject) -> None:
    """Sealed as it is (a seal proves nothing about the content): the schema still refuses it."""
    data = baselined.baseline()
    data["_meta"]["lowerings"] = [{"reason": "ok", "time": "2026-12-03T10:00:00+00:00",
                                   "lowered": [{"qid": "q-002", "metric": "recall@10", "before": 1.0, "after": 0.5}]},
                                  {"reason": "", "time": "2026-12-04T10:00:00+00:00", "lowered": []}]
    write_baseline(baselined.baseline_path, Baseline(data["_meta"], data["aggregate"], data["per_query"]))
    assert_usage_error(baselined.run(), "baselines/baseline.json: _meta.lowerings[1].reason must be a non-empty "
                                        "string, got ''")


# ------------------------------------------------------------------ the ratchet against a git ref


def _git(project: TrustProject, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=project.path, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def in_git(baselined: TrustProject, monkeypatch: pytest.MonkeyPatch) -> TrustProject:
    """The baselined project in a git repository of its own, its baseline committed."""
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(baselined.path / ".no-global-gitconfig"))
    _git(baselined, "init", "-q")
    _git(baselined, "config", "user.name", "Ann")
    _git(baselined, "config", "user.email", "ann@example.com")
    _git(baselined, "add", ".")
    _git(baselined, "commit", "-qm", "baseline")
    return baselined


def _header(result: pytest.RunResult) -> str:
    return "\n".join(line for line in result.outlines if line.startswith("ragmetrics: baseline ratchet"))


def test_a_ref_given_that_git_cannot_read_stops_the_run(in_git: TrustProject) -> None:
    assert_usage_error(in_git.run("--rag-baseline-ref", "no-such-branch"),
                       "--rag-baseline-ref 'no-such-branch': git cannot read it", "bad revision 'no-such-branch'")
    in_git.ini(rag_baseline_ref="main~5")
    assert_usage_error(in_git.run(), "ini rag_baseline_ref 'main~5': git cannot read it")


def test_a_ref_given_outside_git_stops_the_run(baselined: TrustProject) -> None:
    assert_usage_error(baselined.run("--rag-baseline-ref", "HEAD"), "--rag-baseline-ref 'HEAD'",
                       "not a git repository")


@pytest.mark.parametrize(("args", "needle"), [(("--rag-baseline-ref=",), "was given an empty ref"),
                                              (("--rag-baseline-ref=--cached",), "must be a git ref")])
def test_a_ref_that_is_no_ref_is_refused(in_git: TrustProject, args: tuple[str, ...], needle: str) -> None:
    assert_usage_error(in_git.run(*args), needle)


def test_a_pull_request_whose_base_is_not_fetched_says_the_ratchet_did_not_run(
        in_git: TrustProject, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_EVENT_NAME", "pull_request")
    monkeypatch.setenv("GITHUB_BASE_REF", "main")
    result = in_git.run("--rag-markdown=summary.md", "--rag-report=run.json")
    assert result.ret == pytest.ExitCode.OK
    header = _header(result)
    assert header.startswith("ragmetrics: baseline ratchet: not checked: origin/main (the pull request's base, "
                             "GITHUB_BASE_REF) is not in this clone")
    assert "fetch-depth: 0" in header and "git fetch origin main" in header
    # and beside the verdict, where a reviewer reads: the summary, the job summary, the artifact
    assert "WARNING: baseline ratchet not checked: origin/main" in rag_summary(result)
    assert "baseline ratchet not checked: origin/main" in (in_git.path / "summary.md").read_text(encoding="utf-8")
    warnings = json.loads((in_git.path / "run.json").read_text(encoding="utf-8"))["comparison"]["warnings"]
    assert any(w.startswith("baseline ratchet not checked") for w in warnings)


def _lower_and_reseal(project: TrustProject, qid: str, value: float) -> None:
    """Lower one query's recall@10 and seal the file again, as anyone can: the seal is a digest of the
    content, so it cannot tell a deliberate edit from a measurement."""
    data = project.baseline()
    data["per_query"][qid]["recall@10"] = value
    rows = [e["recall@10"] for e in data["per_query"].values() if "recall@10" in e]
    data["aggregate"]["recall@10"] = sum(rows) / len(rows)
    write_baseline(project.baseline_path, Baseline(data["_meta"], data["aggregate"], data["per_query"]))


def _lowered_and_degraded(in_git: TrustProject) -> TrustProject:
    """q-002 now finds half its gold, and the committed baseline was lowered to match: green without
    the ratchet."""
    in_git.answer(q_002=HALF_OF_Q002)
    _lower_and_reseal(in_git, "q-002", 0.5)
    _git(in_git, "commit", "-qam", "lower q-002")
    assert in_git.run().ret == pytest.ExitCode.OK
    return in_git


def test_a_lowered_and_resealed_baseline_fails_against_the_ref(in_git: TrustProject) -> None:
    project = _lowered_and_degraded(in_git)
    result = project.run("--rag-baseline-ref", "HEAD~1")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert outcomes(result)["golden.yaml::gate::baseline-lowered"] == "failed"
    assert _header(result) == ("ragmetrics: baseline ratchet: baselines/baseline.json compared with HEAD~1 "
                               "(--rag-baseline-ref): a gated value lower than there without a recorded reason "
                               "fails gate baseline-lowered")
    summary = rag_summary(result)
    assert "gate baseline-lowered: 2 gated values of baselines/baseline.json lower than at HEAD~1 with no reason " \
           "recorded since: q-002 recall@10 1.0000 -> 0.5000; mean recall@10 1.0000 -> 0.9167" in summary
    assert "git checkout HEAD~1 -- baselines/baseline.json" in summary
    assert 'pytest --rag-eval --rag-update-baseline --rag-reason "why it went down"' in summary
    assert project.run("--rag-baseline-ref", "HEAD").ret == pytest.ExitCode.OK  # nothing lowered since HEAD


def test_a_lowering_with_a_recorded_reason_passes_the_ratchet(in_git: TrustProject) -> None:
    project = _lowered_and_degraded(in_git)
    _git(project, "checkout", "HEAD~1", "--", "baselines/baseline.json")  # as the failing gate advises
    assert _refresh(project).ret == pytest.ExitCode.TESTS_FAILED
    assert _refresh(project, "--rag-reason", "q-002's second document is out of scope now").ret == 0
    _git(project, "commit", "-qam", "lower q-002, with a reason")
    result = project.run("--rag-baseline-ref", "HEAD~2")
    assert result.ret == pytest.ExitCode.OK, rag_summary(result)
    assert outcomes(result)["golden.yaml::gate::baseline-lowered"] == "passed"
    assert "q-002's second document is out of scope now" in rag_summary(result)


def test_a_reason_recorded_before_the_ref_does_not_carry_a_new_lowering(in_git: TrustProject) -> None:
    in_git.answer(q_002=HALF_OF_Q002)
    assert _refresh(in_git, "--rag-reason", "an old trade-off").ret == pytest.ExitCode.OK
    _git(in_git, "commit", "-qam", "lower q-002, with a reason")
    _lower_and_reseal(in_git, "q-002", 0.0)  # lower still, the old entry kept: it does not cover 0
    in_git.answer(q_002=["noise-doc"])
    _git(in_git, "commit", "-qam", "lower q-002 again")
    result = in_git.run("--rag-baseline-ref", "HEAD~1")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "no reason recorded since: q-002 recall@10 0.5000 -> 0.0000" in rag_summary(result)
    assert in_git.run("--rag-baseline-ref", "HEAD~2").ret == pytest.ExitCode.TESTS_FAILED  # 1 -> 0, reason covers 0.5


def test_a_reseal_with_a_reason_passes_the_ratchet(in_git: TrustProject) -> None:
    from pytest_ragmetrics.cli import main

    in_git.answer(q_002=HALF_OF_Q002)
    data = in_git.baseline()
    data["per_query"]["q-002"]["recall@10"] = 0.5
    in_git.baseline_path.write_text(json.dumps(data), encoding="utf-8")
    path = str(in_git.baseline_path)
    assert main(["baseline", "--reseal", path]) == 1
    assert main(["baseline", "--reseal", path, "--reason", "q-002 is answered from one document now"]) == 0
    _git(in_git, "commit", "-qam", "lower q-002 by hand, with a reason")
    assert in_git.run("--rag-baseline-ref", "HEAD~1").ret == pytest.ExitCode.OK


def test_a_pull_request_compares_with_its_base_branch(in_git: TrustProject, monkeypatch: pytest.MonkeyPatch) -> None:
    project = _lowered_and_degraded(in_git)
    _git(project, "update-ref", "refs/remotes/origin/main", "HEAD~1")  # as `git fetch origin main` leaves it
    monkeypatch.setenv("GITHUB_EVENT_NAME", "pull_request")
    monkeypatch.setenv("GITHUB_BASE_REF", "main")
    result = project.run()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert _header(result).startswith("ragmetrics: baseline ratchet: baselines/baseline.json compared with "
                                      "origin/main (the pull request's base, GITHUB_BASE_REF)")
    assert "lower than at origin/main with no reason recorded since: q-002" in rag_summary(result)


def test_a_baseline_new_at_the_ref_passes_the_ratchet(baselined: TrustProject, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    _git(baselined, "init", "-q")
    _git(baselined, "-c", "user.name=Ann", "-c", "user.email=ann@example.com", "commit", "-q", "--allow-empty",
         "-m", "start")
    _git(baselined, "add", ".")
    _git(baselined, "-c", "user.name=Ann", "-c", "user.email=ann@example.com", "commit", "-qm", "baseline")
    result = baselined.run("--rag-baseline-ref", "HEAD~1")
    assert result.ret == pytest.ExitCode.OK
    assert "baselines/baseline.json is new there" in _header(result)
    assert outcomes(result)["golden.yaml::gate::baseline-lowered"] == "passed"


def test_the_ratchet_fails_under_xdist_too(in_git: TrustProject) -> None:
    pytest.importorskip("xdist")
    project = _lowered_and_degraded(in_git)
    result = project.run_subprocess("-n", "2", "--rag-baseline-ref", "HEAD~1")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert outcomes(result)["golden.yaml::gate::baseline-lowered"] == "failed"
    assert "no reason recorded since: q-002 recall@10 1.0000 -> 0.5000" in rag_summary(result)


def test_a_refresh_is_not_judged_by_the_ratchet(in_git: TrustProject) -> None:
    result = _refresh(in_git, "--rag-baseline-ref", "HEAD")
    assert result.ret == pytest.ExitCode.OK
    assert "golden.yaml::gate::baseline-lowered" not in outcomes(result)


def test_without_a_ref_there_is_no_ratchet(in_git: TrustProject) -> None:
    result = in_git.run()
    assert "golden.yaml::gate::baseline-lowered" not in outcomes(result) and _header(result) == ""


def test_a_baseline_moved_in_the_change_that_lowers_it_is_compared_with_where_it_was(in_git: TrustProject) -> None:
    """Moving the file must not make it 'new at the ref': the baseline of the same golden set there is it."""
    project = in_git
    project.answer(q_002=HALF_OF_Q002)
    _lower_and_reseal(project, "q-002", 0.5)
    (project.path / "gate").mkdir()
    _git(project, "mv", "baselines/baseline.json", "gate/baseline.json")
    project.ini(rag_baseline="gate/baseline.json")
    _git(project, "add", "-A")
    _git(project, "commit", "-qm", "moved and lowered")
    result = project.run("--rag-baseline-ref", "HEAD~1")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, rag_summary(result)
    assert "gate/baseline.json was baselines/baseline.json there" in _header(result)
    assert "gate baseline-lowered: 2 gated values of gate/baseline.json lower than at HEAD~1" in rag_summary(result)


def test_an_old_reason_rewritten_cannot_carry_a_new_lowering(in_git: TrustProject) -> None:
    """The reasons only grow: an entry recorded before the ref, its time moved so that it reads as new, is
    no reason recorded since, and the ratchet says the history was rewritten."""
    project = in_git
    project.answer(q_002=HALF_OF_Q002)
    assert _refresh(project, "--rag-reason", "an old trade-off").ret == 0
    project.restore()
    assert _refresh(project).ret == 0  # back up; the old entry is carried over
    _git(project, "commit", "-qam", "history")
    project.answer(q_002=HALF_OF_Q002)
    _lower_and_reseal(project, "q-002", 0.5)
    data = project.baseline()
    data["_meta"]["lowerings"][0]["time"] = "2099-01-01T00:00:00+00:00"
    write_baseline(project.baseline_path, Baseline(data["_meta"], data["aggregate"], data["per_query"]))
    _git(project, "commit", "-qam", "lowered, an old reason re-timed")
    result = project.run("--rag-baseline-ref", "HEAD~1")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "gate baseline-lowered: the 1 reason recorded in _meta.lowerings at HEAD~1 was removed, reordered or " \
           "rewritten" in rag_summary(result)


def test_a_baseline_moved_with_its_golden_set_changed_is_still_followed(in_git: TrustProject) -> None:
    """Moving the golden set, adding a question and refreshing at the new path changes the golden set's
    source and digest; the baseline at the ref that shares the queries is still the one compared with."""
    project = in_git
    (project.path / "gate").mkdir()
    _git(project, "mv", "baselines/baseline.json", "gate/baseline.json")
    _git(project, "mv", "golden.yaml", "golden-v2.yaml")
    project.ini(rag_baseline="gate/baseline.json", rag_golden="golden-v2.yaml")
    (project.path / "golden.yaml").unlink(missing_ok=True)
    project.records.append({"id": "q-007", "question": "truing a wheel", "gold_chunks": ["spoke-tension"]})
    (project.path / "golden-v2.yaml").write_text(yaml.safe_dump(project.records, sort_keys=False), encoding="utf-8")
    project.answer(q_002=HALF_OF_Q002, q_007=["spoke-tension"])
    (project.path / "gate" / "baseline.json").unlink()
    assert _refresh(project).ret == pytest.ExitCode.OK  # no baseline at the new path: no lowering to ask about
    _git(project, "add", "-A")
    _git(project, "commit", "-qm", "moved, changed, re-measured lower")
    result = project.run("--rag-baseline-ref", "HEAD~1")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, rag_summary(result)
    assert "gate/baseline.json was baselines/baseline.json there" in _header(result)
    assert "q-002 recall@10 1.0000 -> 0.5000" in rag_summary(result)


def test_relabelling_a_failing_question_as_unanswerable_is_a_lowering(baselined: TrustProject) -> None:
    baselined.answer(q_004=["rim-wear"])
    assert _refresh(baselined).ret == pytest.ExitCode.TESTS_FAILED  # q-004 lost its gold: a lowering
    baselined.edit_query("q-004", answerable=False, gold_chunks=[])
    result = _refresh(baselined)
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()[-2000:]
    assert "q-004" in result.stdout.str() and "--rag-reason" in result.stdout.str()


def test_a_refresh_that_loosens_the_thresholds_still_needs_a_reason_for_what_they_guarded(
        baselined: TrustProject) -> None:
    baselined.thresholds({"mrr@10_tolerance": 0.0})
    baselined.make_baseline()
    baselined.answer(q_002=["noise-doc", "chain-lube#1-2", "chain-clean#1-1"])  # MRR halves, recall holds
    assert _refresh(baselined).ret == pytest.ExitCode.TESTS_FAILED
    result = _refresh(baselined, "--rag-thresholds=defaults")  # the file that guarded MRR, left out
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()[-2000:]
    assert "q-002" in result.stdout.str() or "mean mrr@10" in result.stdout.str()
