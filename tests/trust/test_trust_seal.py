"""A hand, a merge or a stripped key in the gate's own files never turns red into green.

Each case takes a run that the untouched files judge red (or a file the untouched
tool would read), changes the file the way a careless merge or a hand edit does,
and checks that the run is refused with the file, the record and the field, or
still fails, through a real ``pytest --rag-eval`` session or the real CLI.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_ragmetrics.errors import BaselineError
from pytest_ragmetrics.gate.baseline import FORMAT, Baseline, load_baseline, write_baseline
from ragproject import rag_summary
from trust_helpers import TrustProject, assert_usage_error, clean_env, no_traceback, snapshot


def _edit_baseline(project: TrustProject, change: Any, reseal: bool = False) -> None:
    data = project.baseline()
    change(data)
    if reseal:  # as if the file had been measured this way (the case under test is what it holds)
        write_baseline(project.baseline_path, Baseline(data["_meta"], data["aggregate"], data["per_query"]))
    else:
        project.baseline_path.write_text(json.dumps(data, indent=2), encoding="utf-8")


def _ragmetrics(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_ragmetrics", *args], cwd=cwd, capture_output=True,
                          text=True, env=clean_env(), timeout=120, stdin=subprocess.DEVNULL)


# ------------------------------------------------------------- gates that could not compare


def test_a_baseline_sharing_no_metric_fails_even_when_the_mismatch_is_accepted(baselined: TrustProject) -> None:
    """Measured at another k, accepted with --rag-accept-mismatch: every row had no baseline and passed."""
    baselined.ini(rag_metrics="recall@5 mrr@5")
    result = baselined.run("--rag-accept-mismatch")
    no_traceback(result.stdout.str() + result.stderr.str())
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    summary = rag_summary(result)
    assert "All gates passed" not in summary
    assert "recall@5 cannot be compared: the baseline holds no recall@5 (it measured hit_rate@10, mrr@10, ndcg@10, " \
           "recall@10)" in summary


def test_a_gated_metric_the_baseline_does_not_hold_fails_its_gate(project: TrustProject) -> None:
    """A serial run gating mrr@10 against a baseline measured without it showed that row as ok."""
    project.ini(rag_metrics="recall@10")
    project.make_baseline()
    project.ini(rag_metrics="recall@10 mrr@10")
    project.thresholds({"mrr@10_tolerance": 0.0})
    result = project.run("--rag-accept-mismatch")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    summary = rag_summary(result)
    assert "gate mrr@10: mrr@10 cannot be compared: the baseline holds no mrr@10" in summary
    assert "FAIL: not compared" in summary
    assert "it measured recall@10" in summary


# ------------------------------------------------------------------ baseline.json schema


def test_a_metric_key_dropped_from_one_entry_is_refused(baselined: TrustProject) -> None:
    """A merge that drops one key turned that metric's mean into NaN, then 'nothing to compare with'."""
    baselined.thresholds({"ndcg@10_tolerance": 0.0})
    _edit_baseline(baselined, lambda d: d["per_query"]["q-002"].pop("ndcg@10"))
    baselined.answer(q_002=["noise-doc"])  # the run is red when the file is whole
    before = snapshot(baselined.path)
    result = baselined.run()
    assert_usage_error(result, "baselines/baseline.json", "per_query.q-002 is missing 'ndcg@10'")
    assert snapshot(baselined.path) == before


def test_lowered_per_query_numbers_are_refused(baselined: TrustProject) -> None:
    """Lowering a query's numbers by hand made its real regression pass; the stored mean disagreed."""
    _edit_baseline(baselined, lambda d: d["per_query"]["q-002"].update({"recall@10": 0.0}))
    baselined.answer(q_002=["noise-doc"])
    result = baselined.run()
    assert_usage_error(result, "baselines/baseline.json", "does not match its seal", "per_query entries edited: q-002",
                       "ragmetrics baseline --reseal")


def test_a_stored_mean_must_be_the_mean_of_its_entries(baselined: TrustProject) -> None:
    """Checked on every read, the seal aside (a refresh reads an old file unsealed, to show the diff)."""
    _edit_baseline(baselined, lambda d: d["per_query"]["q-002"].update({"recall@10": 0.0}))
    with pytest.raises(BaselineError, match=r"aggregate.recall@10 = 1.0, but the mean of its 6 per-query values is "
                                            r"0.8333333333, so the file was edited by hand or by a merge"):
        load_baseline(baselined.baseline_path, sealed=False)


def test_numbers_edited_consistently_break_the_seal_and_name_the_entry(baselined: TrustProject) -> None:
    def lower(d: dict[str, Any]) -> None:
        d["per_query"]["q-002"]["recall@10"] = 0.0
        d["aggregate"]["recall@10"] = 5 / 6
    _edit_baseline(baselined, lower)
    baselined.answer(q_002=["noise-doc"])
    message = assert_usage_error(baselined.run(), "baselines/baseline.json", "does not match its seal",
                                 "per_query entries edited: q-002", "aggregate edited")
    assert "ragmetrics baseline --reseal" in message


def test_stripped_judgment_digests_are_refused(baselined: TrustProject) -> None:
    """Without the digests a change of labels could no longer be told."""
    def strip(d: dict[str, Any]) -> None:
        for entry in d["per_query"].values():
            entry.pop("_judgments")
    _edit_baseline(baselined, strip, reseal=True)
    baselined.edit_query("q-003", gold_chunks=["rim-wear"])
    assert_usage_error(baselined.run(), "baselines/baseline.json", "per_query.q-001 has no _judgments digest")


def test_a_metric_key_in_another_case_is_refused(baselined: TrustProject) -> None:
    def recase(d: dict[str, Any]) -> None:
        d["per_query"]["q-001"]["Recall@10"] = d["per_query"]["q-001"].pop("recall@10")
    _edit_baseline(baselined, recase)
    assert_usage_error(baselined.run(), "per_query.q-001 is missing 'recall@10'")


def test_a_removed_entry_breaks_the_seal(baselined: TrustProject) -> None:
    def remove(d: dict[str, Any]) -> None:  # and the means made to agree, as a careful hand would
        d["per_query"].pop("q-006")
        for metric in d["aggregate"]:
            d["aggregate"][metric] = sum(e[metric] for e in d["per_query"].values()) / len(d["per_query"])
    _edit_baseline(baselined, remove)
    assert_usage_error(baselined.run(), "per_query entries added or removed (6 sealed, 5 now)")


def _unseal(d: dict[str, Any]) -> None:
    """The baseline as an older version wrote it: no format, no seals."""
    d["_meta"].pop("format")
    d["_meta"].pop("seal")
    for entry in d["per_query"].values():
        entry.pop("_seal")


def test_a_baseline_without_a_seal_is_refused_and_can_be_sealed(baselined: TrustProject) -> None:
    """Removing the seal is an edit too; an older file is sealed once, on purpose."""
    _edit_baseline(baselined, _unseal)
    assert_usage_error(baselined.run(), "this baseline has no seal", "ragmetrics baseline --reseal")
    done = _ragmetrics("baseline", "--reseal", "baselines/baseline.json", cwd=baselined.path)
    assert done.returncode == 0, done.stderr
    assert "no seal yet" in done.stdout
    assert baselined.baseline()["_meta"]["format"] == FORMAT
    assert baselined.run().ret == pytest.ExitCode.OK


def test_a_refresh_upgrades_an_older_baseline_and_says_so_once(baselined: TrustProject) -> None:
    """An older version's baseline (no format, no seal) is read to show the diff, written in the
    current format, and the summary says so once."""
    _edit_baseline(baselined, _unseal)
    result = baselined.run("--rag-update-baseline")
    assert result.ret == pytest.ExitCode.OK
    summary = rag_summary(result)
    assert summary.count("written by an older version (no _meta.format)") == 1, summary
    assert f"written again, it is sealed and upgraded to format {FORMAT}" in summary
    assert baselined.baseline()["_meta"]["format"] == FORMAT
    assert baselined.run().ret == pytest.ExitCode.OK  # sealed now: the gate reads it


def test_reseal_prints_what_it_seals_and_the_gate_then_uses_it(baselined: TrustProject) -> None:
    """An edit made on purpose: refused until sealed, then judged by the new numbers."""
    def lower(d: dict[str, Any]) -> None:
        d["per_query"]["q-002"]["recall@10"] = 0.0
        d["aggregate"]["recall@10"] = 5 / 6
    _edit_baseline(baselined, lower)
    check = _ragmetrics("baseline", "baselines/baseline.json", cwd=baselined.path)
    assert check.returncode == 2
    assert "per_query entries edited: q-002" in check.stderr
    done = _ragmetrics("baseline", "--reseal", "baselines/baseline.json", cwd=baselined.path)
    assert done.returncode == 0, done.stderr
    assert "per_query entries edited: q-002" in done.stdout
    assert _ragmetrics("baseline", "baselines/baseline.json", cwd=baselined.path).returncode == 0
    baselined.answer(q_002=["noise-doc"])
    assert baselined.run().ret == pytest.ExitCode.OK  # the sealed baseline says q-002 found nothing


def test_reseal_recomputes_the_means_of_edited_entries(baselined: TrustProject) -> None:
    """The refusal's advice must work: a lowered entry is sealed with its mean moved, not refused again."""
    _edit_baseline(baselined, lambda d: d["per_query"]["q-002"].update({"recall@10": 0.0}))
    done = _ragmetrics("baseline", "--reseal", "baselines/baseline.json", cwd=baselined.path)
    assert done.returncode == 0, done.stderr
    assert "aggregate.recall@10 recomputed from the entries: 1.0 -> 0.8333333333" in done.stdout
    assert load_baseline(baselined.baseline_path).aggregate["recall@10"] == 0.8333333333


def test_reseal_refuses_a_file_that_does_not_hold_together(baselined: TrustProject) -> None:
    _edit_baseline(baselined, lambda d: d["per_query"]["q-002"].pop("mrr@10"))
    before = baselined.baseline_path.read_bytes()
    done = _ragmetrics("baseline", "--reseal", "baselines/baseline.json", cwd=baselined.path)
    assert done.returncode == 2
    assert "per_query.q-002 is missing 'mrr@10'" in done.stderr and "Traceback" not in done.stderr
    assert baselined.baseline_path.read_bytes() == before


def test_a_refresh_replaces_an_edited_baseline(baselined: TrustProject) -> None:
    _edit_baseline(baselined, lambda d: d["per_query"]["q-002"].update({"recall@10": 0.0}))
    assert baselined.run("--rag-update-baseline").ret == pytest.ExitCode.OK
    assert load_baseline(baselined.baseline_path).per_query["q-002"]["recall@10"] == 1.0


# --------------------------------------------------------------------------- thresholds


@pytest.mark.parametrize("data, needle", [
    ({"Recall@10_tolerance": 0.5, "recall@10_tolerance": 0}, "spells metric 'recall@10' as 'Recall@10'"),
    ({"recall@010_tolerance": 0.5}, "spells metric 'recall@10' as 'recall@010'"),
    ({"RECALL@10_min": 0.5}, "spells metric 'recall@10' as 'RECALL@10'"),
], ids=["mixed-case-beside-canonical", "leading-zero", "upper-case"])
def test_thresholds_keys_have_one_spelling(baselined: TrustProject, data: dict[str, Any], needle: str) -> None:
    baselined.thresholds(json.dumps(data))
    baselined.answer(q_002=["noise-doc"])
    assert_usage_error(baselined.run(), "baselines/thresholds.json", needle)


# --------------------------------------------------------------- ordering regressions


def _ordering_project(project: TrustProject, n: int = 12) -> None:
    records = [{"id": f"o-{i:02d}", "question": f"question number {i}", "gold_chunks": [f"gold-{i}"]}
               for i in range(n)]
    project.answers = {r["id"]: [f"gold-{i}", f"other-{i}"] for i, r in enumerate(records)}
    project.golden(records)


def test_a_clear_drop_of_an_ungated_metric_fails_under_the_defaults(project: TrustProject) -> None:
    """Recall is untouched, MRR halves on every query: it passed with one line of note."""
    _ordering_project(project)
    project.make_baseline()
    project.answers = {qid: list(reversed(ranked)) for qid, ranked in project.answers.items()}
    project._write_rankings()
    result = project.run()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    summary = rag_summary(result)
    assert "gate significant-drops: mrr@10 fell 0.5000 against the baseline (1.0000 -> 0.5000, p=0.0005" in summary
    assert "more than 1/n = 0.0833" in summary
    assert "fail_on_significant_drop" in summary
    assert "Queries that moved mrr@10" in summary and "o-00" in summary  # and which queries are behind it
    assert "FAIL: beyond chance" in summary

    project.thresholds({"fail_on_significant_drop": False})
    assert project.run().ret == pytest.ExitCode.OK


def test_a_drop_within_chance_does_not_fail(project: TrustProject) -> None:
    _ordering_project(project)
    project.make_baseline()
    project.answers["o-00"] = ["other-0", "gold-0"]  # one query of twelve: p = 1, not evidence
    project._write_rankings()
    result = project.run()
    assert result.ret == pytest.ExitCode.OK, rag_summary(result)


# --------------------------------------------------------------- renamed and removed queries


def test_a_renamed_query_is_compared_with_its_old_entry(baselined: TrustProject) -> None:
    """Renaming failing queries (a zero-width space is invisible) made them 'new' and the run green."""
    baselined.answer(q_002=["noise-doc"], q_004=["noise-doc"])
    baselined.edit_query("q-002", id="q-002\u200b")
    baselined.edit_query("q-004", id="q-004-renamed")
    baselined.answers["q-002\u200b"] = baselined.answers.pop("q-002")
    baselined.answers["q-004-renamed"] = baselined.answers.pop("q-004")
    baselined._write_rankings()
    result = baselined.run()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    summary = rag_summary(result)
    assert "2 queries were renamed since the baseline (same question and judgments)" in summary
    assert "q-002 -> q-002\\u200b" in summary and "\u200b" not in summary  # shown escaped, never invisible
    assert "gate recall@10: recall@10 fell" in summary


def test_queries_dropped_with_their_judgments_fail_the_baseline_gate(baselined: TrustProject) -> None:
    baselined.answer(q_002=["noise-doc"])
    baselined.remove_query("q-002")
    result = baselined.run()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "1 query of the baseline is gone from the golden set (q-002)" in rag_summary(result)


def test_merge_conflict_markers_in_the_baseline_are_named_as_such(baselined: TrustProject) -> None:
    text = baselined.baseline_path.read_text(encoding="utf-8").split("\n")
    text[3:3] = ["<<<<<<< HEAD", "=======", ">>>>>>> feature"]
    baselined.baseline_path.write_text("\n".join(text), encoding="utf-8")
    assert_usage_error(baselined.run(), "baselines/baseline.json, line 4: holds a merge conflict marker",
                       "re-measuring")


@pytest.mark.parametrize("edit, needle", [
    (lambda d: d["_meta"].pop("k"), "_meta.k (results asked per query) must be a positive integer, got None"),
    (lambda d: d["_meta"]["measurement"].update({"relevance_level": True}),
     "_meta.measurement is not a measurement config: relevance level must be an integer >= 1, got True"),
    (lambda d: d["_meta"]["measurement"].update({"gain": "cubic"}), "_meta.measurement is not a measurement config"),
], ids=["no-k", "boolean-level", "unknown-gain"])
def test_a_sealed_fingerprint_must_still_say_what_it_means(baselined: TrustProject, edit: Any, needle: str) -> None:
    """``relevance_level: true`` equals 1 in Python, and a missing k skipped the k check."""
    _edit_baseline(baselined, edit, reseal=True)
    assert_usage_error(baselined.run(), needle)


def test_a_dangling_thresholds_link_is_not_taken_for_no_file(baselined: TrustProject) -> None:
    """A link to a moved file read as 'no thresholds file': the defaults, fewer gates, green."""
    link = baselined.path / "baselines" / "thresholds.json"
    link.symlink_to("../moved-thresholds.json")
    assert_usage_error(baselined.run(), "baselines/thresholds.json: a symbolic link to '../moved-thresholds.json', "
                       "which does not exist")


def test_a_misspelt_metric_in_thresholds_gets_a_suggestion(baselined: TrustProject) -> None:
    baselined.thresholds({"recal@10_tolerance": 0.0})
    assert_usage_error(baselined.run(), "did you mean 'recall@10_tolerance'?")


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_refused_check_names_the_removed_entry_against_git_head(baselined: TrustProject) -> None:
    def git(*args: str) -> None:
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args], cwd=baselined.path,
                       check=True, capture_output=True)
    git("init", "-q")
    git("add", "baselines/baseline.json")
    git("commit", "-qm", "baseline")

    def remove(d: dict[str, Any]) -> None:
        d["per_query"].pop("q-006")
        for metric in d["aggregate"]:
            d["aggregate"][metric] = sum(e[metric] for e in d["per_query"].values()) / len(d["per_query"])
    _edit_baseline(baselined, remove)
    done = _ragmetrics("baseline", "baselines/baseline.json", cwd=baselined.path)
    assert done.returncode == 2
    assert "per_query entries added or removed (6 sealed, 5 now)" in done.stderr
    assert "per_query.q-006: removed" in done.stdout


def test_a_small_set_says_when_significant_drops_cannot_judge(project: TrustProject, tmp_path: Path) -> None:
    """Seven queries cannot reach p < 0.01: the gate cannot fail there, and a pass must say so."""
    _ordering_project(project, n=7)
    project.make_baseline()
    project.answers = {qid: list(reversed(ranked)) for qid, ranked in project.answers.items()}
    project._write_rankings()
    result = project.run(f"--rag-markdown={tmp_path / 'summary.md'}")
    assert result.ret == pytest.ExitCode.OK
    summary = rag_summary(result)
    assert ("WARNING: significant-drops could not judge mrr@10: it fell 0.5000 against the baseline (1.0000 -> "
            "0.5000) on 7 changed queries, too few for p < 0.01 (the smallest p they allow is 0.0156)") in summary
    assert "give mrr@10 a tolerance" in summary
    assert "**Warning:** significant-drops could not judge mrr@10" in (tmp_path / "summary.md").read_text()


def test_an_artifact_of_a_run_compared_despite_other_metrics_is_readable(baselined: TrustProject) -> None:
    """Its per-query baseline held metrics the run did not measure, and every reader refused it."""
    baselined.ini(rag_metrics="recall@10 hit_rate@10")
    baselined.run("--rag-accept-mismatch", "--rag-report=run.json")
    done = _ragmetrics("export", "--artifact", "run.json", "--run-out", "run.trec", cwd=baselined.path)
    assert done.returncode == 0, done.stderr


def test_rag_thresholds_defaults_says_the_committed_file_is_not_read(baselined: TrustProject) -> None:
    baselined.thresholds({"mrr@10_tolerance": 0.0})
    result = baselined.run("-o", "rag_thresholds=defaults")
    summary = rag_summary(result)
    assert "WARNING: " in summary and "baselines/thresholds.json exists but this run does not read it: " \
           "rag_thresholds is set to defaults" in summary
    assert "rag_thresholds = defaults:" in result.stdout.str()  # the header says it too


def test_edited_and_removed_entries_are_both_named(baselined: TrustProject) -> None:
    def edit(d: dict[str, Any]) -> None:
        d["per_query"]["q-001"]["ndcg@10"] = 0.5
        d["per_query"].pop("q-006")
    _edit_baseline(baselined, edit)
    done = _ragmetrics("baseline", "baselines/baseline.json", cwd=baselined.path)
    assert "per_query entries edited: q-001" in done.stderr
    assert "per_query entries added or removed (6 sealed, 5 now)" in done.stderr


def test_an_artifact_edited_consistently_is_refused_by_its_seal(baselined: TrustProject) -> None:
    """Numbers lowered with the means recomputed pass every schema rule; only the seal can tell."""
    baselined.run("--rag-report=good.json")
    baselined.answer(q_002=["noise-doc"])
    baselined.run("--rag-report=bad.json")
    data = json.loads((baselined.path / "good.json").read_text(encoding="utf-8"))
    data["per_query"]["q-002"]["metrics"] = {m: 0.0 for m in data["per_query"]["q-002"]["metrics"]}
    for metric in data["aggregate"]:
        rows = [e["metrics"][metric] for e in data["per_query"].values() if e["status"] == "scored"]
        data["aggregate"][metric] = sum(rows) / len(rows)
    (baselined.path / "edited.json").write_text(json.dumps(data), encoding="utf-8")
    done = _ragmetrics("compare", "edited.json", "bad.json", "--fail-on-regression", cwd=baselined.path)
    assert done.returncode == 2
    assert "edited.json: _meta.seal does not match the file: aggregate, per_query changed after the run wrote it" \
        in done.stderr


@pytest.mark.parametrize("edit, needle", [
    (lambda d: d["_meta"].pop("seal"), "_meta.seal is missing: the plugin seals every artifact it writes"),
    (lambda d: d["_meta"].update(created="2020-01-01T00:00:00+00:00"),
     "_meta.seal does not match the file: created changed after the run wrote it"),
], ids=["seal-removed", "time-moved"])
def test_an_artifacts_seal_cannot_be_removed_nor_its_time_moved(baselined: TrustProject, edit: Any,
                                                               needle: str) -> None:
    """Without its seal an edited file read as an older one; a moved time reordered history's runs."""
    baselined.run("--rag-report=good.json")
    baselined.answer(q_002=["noise-doc"])
    baselined.run("--rag-report=bad.json")
    data = json.loads((baselined.path / "bad.json").read_text(encoding="utf-8"))
    edit(data)
    (baselined.path / "bad.json").write_text(json.dumps(data), encoding="utf-8")
    for verb in (["compare", "good.json", "bad.json", "--fail-on-regression"], ["history", "good.json", "bad.json"]):
        done = _ragmetrics(*verb, cwd=baselined.path)
        assert done.returncode == 2, (verb, done.stdout, done.stderr)
        assert needle in done.stderr
