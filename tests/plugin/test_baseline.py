"""baselines/baseline.json: missing, written on purpose only, fingerprint checks, new/removed queries."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import re
import shutil
import subprocess

import pytest

from ragproject import GATES_DEFAULT, GOLDEN, QIDS, RagProject, dcg, ids_with, no_traceback, outcomes, rag_summary


def _sha256_of_golden(records: list[dict]) -> str:
    """The golden set fingerprint as DESIGN.md defines it: id, text, judgments (not tags)."""
    h = hashlib.sha256()
    for r in sorted(records, key=lambda r: r["id"]):
        gold = r["gold_chunks"]
        judgments = dict(gold) if isinstance(gold, dict) else {d: 1 for d in gold}
        h.update(json.dumps([r["id"], r["question"], sorted(judgments.items())], ensure_ascii=False).encode())
        h.update(b"\n")
    return h.hexdigest()


def _file_state(path):
    return path.read_bytes(), path.stat().st_mtime_ns


# ------------------------------------------------------------------ missing baseline

def test_missing_baseline_fails_the_baseline_gate_and_names_the_command(project: RagProject) -> None:
    result = project.run()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert ids_with(result, "failed") == ["golden.yaml::gate::baseline", "golden.yaml::gate::coverage"]
    assert ids_with(result, "passed") == sorted([f"golden.yaml::{q}" for q in QIDS] + ["golden.yaml::gate::recall@10", "golden.yaml::gate::significant-drops"])
    assert "pytest --rag-eval --rag-update-baseline" in rag_summary(result)
    # and in the gate item's own failure report
    failures = result.stdout.str().split("= FAILURES =", 1)[1]
    assert (f"gate baseline: no baseline at {project.baseline_path} to compare with; create it with "
            "`pytest --rag-eval --rag-update-baseline`") in failures
    assert not project.baseline_path.exists()  # a failing run never creates it


# ------------------------------------------------------------------ update round trip

def test_update_baseline_writes_the_documented_json(project: RagProject) -> None:
    result = project.run("--rag-update-baseline")
    assert result.ret == pytest.ExitCode.OK
    # queries pass; gates have nothing to compare while the baseline is being rewritten
    result.assert_outcomes(passed=len(QIDS), skipped=len(GATES_DEFAULT))
    summary = rag_summary(result)
    assert re.search(r"Baseline written: .*baselines/baseline\.json \(6 queries\)\.", summary)
    assert "No previous baseline." in summary

    data = project.baseline()
    assert set(data) == {"_meta", "aggregate", "per_query"}
    meta = data["_meta"]
    assert meta["golden"] == {"source": "golden.yaml", "sha256": _sha256_of_golden(GOLDEN), "n_queries": 6}
    assert meta["measurement"] == {
        "metrics": ["recall@10", "hit_rate@10", "mrr@10", "ndcg@10"],
        "relevance_level": 1, "gain": "exponential", "id_separator": "#", "dedup": "first",
    }
    assert meta["k"] == 10
    assert meta["retriever"] == {"name": "json-retriever", "version": 1}  # from describe()
    assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00$", meta["created"])
    assert meta["package_version"] == importlib.metadata.version("pytest-ragmetrics") and "git_commit" in meta
    # nDCG below 1 for two queries: q-002 (chain-lube, noise-doc, chain-clean) and
    # q-003 (brake-pads grade 2, rim-wear, brake-cable grade 1), exponential gain
    ndcg_002 = dcg([1, 0, 1]) / dcg([1, 1])
    ndcg_003 = dcg([2, 0, 1]) / dcg([2, 1])
    assert data["aggregate"] == {"recall@10": 1.0, "hit_rate@10": 1.0, "mrr@10": 1.0,
                                 "ndcg@10": pytest.approx((4 + ndcg_002 + ndcg_003) / 6, abs=1e-10)}
    assert sorted(data["per_query"]) == QIDS
    for qid, entry in data["per_query"].items():
        assert set(entry) == {"recall@10", "hit_rate@10", "mrr@10", "ndcg@10", "_judgments", "_top", "_seal"}
        assert re.fullmatch(r"[0-9a-f]{16}", entry["_judgments"])
        assert re.fullmatch(r"[0-9a-f]{16}", entry["_seal"])
        assert entry["recall@10"] == 1.0
    assert data["per_query"]["q-002"]["ndcg@10"] == pytest.approx(ndcg_002, abs=1e-10)
    assert data["per_query"]["q-003"]["ndcg@10"] == pytest.approx(ndcg_003, abs=1e-10)
    assert data["per_query"]["q-001"]["ndcg@10"] == 1.0
    # stable output: sorted keys, two-space indent, trailing newline
    text = project.baseline_path.read_text()
    assert text == json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    # no temp files left behind by the atomic write
    assert sorted(p.name for p in project.baseline_path.parent.iterdir()) == ["baseline.json"]


def test_plain_run_after_update_passes(project: RagProject) -> None:
    project.make_baseline()
    result = project.run()
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(passed=len(QIDS) + len(GATES_DEFAULT))


def test_second_update_says_what_changed(baselined: RagProject) -> None:
    # q-002 loses chain-clean (recall 1 -> 0.5), q-006 is gone, q-007 is new
    baselined.answer(q_002=["chain-lube", "noise-doc"])
    baselined.remove_query("q-006")
    baselined.add_query({"id": "q-007", "question": "truing a wheel", "gold_chunks": ["spoke-tension"],
                         "tags": ["standard"]}, ["spoke-tension#1-2"])
    # it lowers q-002 and drops q-006: a refresh says why (--rag-reason), or writes nothing
    result = baselined.run("--rag-update-baseline", "--rag-reason", "a trade-off made on purpose")
    assert result.ret == pytest.ExitCode.OK
    summary = rag_summary(result)
    assert "(6 queries)." in summary
    assert "Queries added: 1 (q-007)" in summary
    assert "Queries removed: 1 (q-006)" in summary
    # recall: baseline mean 1.0 over 6; now (1 + .5 + 1 + 1 + 1 + 1) / 6
    assert f"recall@10: 1.0000 -> {5.5 / 6:.4f} ({5.5 / 6 - 1:+.4f}); queries up 0, down 1 (q-002)" in summary
    assert "hit_rate@10: 1.0000 -> 1.0000 (±0); queries up 0, down 0" in summary
    data = baselined.baseline()
    assert sorted(data["per_query"]) == ["q-001", "q-002", "q-003", "q-004", "q-005", "q-007"]
    assert data["per_query"]["q-002"]["recall@10"] == 0.5
    assert data["_meta"]["golden"]["n_queries"] == 6
    # and the next plain run compares with the refreshed numbers: it passes
    assert baselined.run().ret == pytest.ExitCode.OK


def test_update_reports_metrics_going_up(project: RagProject) -> None:
    project.answer(q_004=["derailleur"])  # recall 0.5 in the first baseline
    project.make_baseline()
    project.restore()
    result = project.run("--rag-update-baseline")
    assert "recall@10: 0.9167 -> 1.0000 (+0.0833); queries up 1 (q-004), down 0" in rag_summary(result)


def test_baseline_is_never_written_without_the_flag(baselined: RagProject) -> None:
    before = _file_state(baselined.baseline_path)
    assert baselined.run().ret == pytest.ExitCode.OK
    assert _file_state(baselined.baseline_path) == before
    baselined.answer(q_001=["noise-doc"])  # a failing run
    assert baselined.run().ret == pytest.ExitCode.TESTS_FAILED
    assert _file_state(baselined.baseline_path) == before
    baselined.run("--rag-report", "out.json")
    assert _file_state(baselined.baseline_path) == before


def test_update_refused_on_the_smoke_subset(baselined: RagProject) -> None:
    before = _file_state(baselined.baseline_path)
    result = baselined.run("--rag-update-baseline", "--rag-subset", "smoke")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--rag-update-baseline needs the full set; drop --rag-subset smoke" in result.stderr.str()
    no_traceback(result)
    assert baselined.calls() == []
    assert _file_state(baselined.baseline_path) == before


def test_update_refused_when_k_deselects_queries(baselined: RagProject) -> None:
    before = _file_state(baselined.baseline_path)
    baselined.answer(q_001=["noise-doc"])  # would change the baseline if written
    result = baselined.run("--rag-update-baseline", "-k", "not q-001")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    summary = rag_summary(result)
    assert "not writing" in summary and "1 golden query did not run (e.g. q-001)" in summary
    assert "update the baseline from a full, unfiltered run" in summary
    assert _file_state(baselined.baseline_path) == before


def test_update_refused_when_a_query_errors(baselined: RagProject) -> None:
    before = _file_state(baselined.baseline_path)
    baselined.answer(q_004={"raise": "index shard offline"})
    result = baselined.run("--rag-update-baseline")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert ids_with(result, "failed") == ["golden.yaml::q-004"]
    assert "1 query errored (q-004); fix the retriever first" in rag_summary(result)
    assert _file_state(baselined.baseline_path) == before


def test_update_replaces_a_corrupt_baseline(baselined: RagProject) -> None:
    baselined.baseline_path.write_text("{ not json", encoding="utf-8")
    result = baselined.run()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "baseline.json, line 1: not valid JSON" in result.stderr.str()
    no_traceback(result)
    assert baselined.run("--rag-update-baseline").ret == pytest.ExitCode.OK
    assert baselined.baseline()["aggregate"]["recall@10"] == 1.0


def test_baseline_and_thresholds_paths_come_from_ini_or_flags(project: RagProject) -> None:
    project.ini(rag_baseline="ci/base.json")
    project.make_baseline()
    assert (project.path / "ci" / "base.json").is_file()
    assert not project.baseline_path.exists()
    assert project.run().ret == pytest.ExitCode.OK
    # the flag wins over the ini key (and is resolved against the invocation dir)
    result = project.run("--rag-baseline", "elsewhere.json")
    assert ids_with(result, "failed") == ["golden.yaml::gate::baseline", "golden.yaml::gate::coverage"]


# ------------------------------------------------------------------ fingerprint

@pytest.mark.parametrize(
    "args, ini, field",
    [
        (("--rag-metrics", "recall@10 mrr@10"), {}, "metrics: baseline ['recall@10', 'hit_rate@10', 'mrr@10', "
                                                    "'ndcg@10'], now ['recall@10', 'mrr@10']"),
        (("--rag-relevance-level", "2"), {}, "relevance_level: baseline 1, now 2"),
        (("--rag-gain", "linear"), {}, "gain: baseline 'exponential', now 'linear'"),
        ((), {"rag_id_separator": "none"}, "id_separator: baseline '#', now None"),
        (("--rag-id-separator", ":"), {}, "id_separator: baseline '#', now ':'"),
    ],
    ids=["metrics", "relevance-level", "gain", "no-separator", "other-separator"],
)
def test_baseline_measured_differently_is_refused(baselined: RagProject, args, ini, field) -> None:
    before = _file_state(baselined.baseline_path)
    if ini:
        baselined.ini(**ini)
    result = baselined.run(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "baselines/baseline.json was measured differently, so comparing would mislead" in err
    assert field in err
    assert "--rag-accept-mismatch" in err
    assert "this command with --rag-update-baseline, over the full set (without --rag-subset smoke)" in err
    no_traceback(result)
    assert baselined.calls() == []
    assert _file_state(baselined.baseline_path) == before


def test_accept_mismatch_compares_anyway_and_says_so(baselined: RagProject) -> None:
    result = baselined.run("--rag-gain", "linear", "--rag-accept-mismatch")
    assert result.ret == pytest.ExitCode.OK
    # linear gain: q-003's graded gold (2, 1) now scores (2 + 1/2) / (2 + 1/log2 3) < exponential's value,
    # but nDCG is not gated by default, so only recall@10 (unchanged) decides
    result.assert_outcomes(passed=len(QIDS) + len(GATES_DEFAULT))
    summary = rag_summary(result)
    assert "Compared despite a different measurement (--rag-accept-mismatch):" in summary
    assert "gain: baseline 'exponential', now 'linear'" in summary


def test_changed_judgments_are_refused_naming_the_query(baselined: RagProject) -> None:
    baselined.edit_query("q-003", gold_chunks={"brake-pads": 2, "brake-cable": 2})
    result = baselined.run()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "judgments or text changed for 1 query since the baseline: q-003" in err
    no_traceback(result)
    accepted = baselined.run("--rag-accept-mismatch")
    assert accepted.ret == pytest.ExitCode.OK
    assert "judgments or text changed for 1 query since the baseline: q-003" in rag_summary(accepted)


def test_retagging_is_not_a_mismatch(baselined: RagProject) -> None:
    baselined.edit_query("q-001", tags=["paraphrase"])
    assert baselined.run().ret == pytest.ExitCode.OK


# ------------------------------------------------------------------ new and removed queries

def test_new_queries_fail_the_coverage_gate_until_the_baseline_covers_them(baselined: RagProject) -> None:
    # q-007 is new and finds nothing relevant: no gate compares it, so the run cannot pass for it
    baselined.add_query({"id": "q-007", "question": "truing a wheel", "gold_chunks": ["spoke-tension"],
                         "tags": ["standard"]}, ["noise-doc"])
    result = baselined.run()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert ids_with(result, "failed") == ["golden.yaml::gate::coverage"]
    summary = rag_summary(result)
    assert ("gate coverage: 1 labelled question of the golden set has no entry in the baseline, so no gate judges "
            "it: q-007; refresh the baseline (`pytest --rag-eval --rag-update-baseline`) in the same change") in summary
    assert "Not judged, no entry in the baseline: q-007" in summary
    # allowed in words a reviewer sees, it passes, still named
    baselined.thresholds({"max_ungated_queries": 1})
    result = baselined.run()
    assert result.ret == pytest.ExitCode.OK
    assert outcomes(result) == {
        **{f"golden.yaml::{q}": "passed" for q in QIDS + ["q-007"]},
        **{g: "passed" for g in GATES_DEFAULT},
    }
    summary = rag_summary(result)
    assert "Not judged, no entry in the baseline: q-007" in summary
    # the comparison is over the 6 common queries; the mean with the new one is given too
    assert "1 new query not in the baseline (scored, not compared): q-007; with them: recall@10 0.8571" in summary
    assert "n = 6 queries" in summary
    assert "No query fell beyond its per-query tolerance." in summary
    # per tag too, the comparison is over the same queries: a new query scoring 0 is not a drop
    row = next(line for line in summary.splitlines() if line.startswith("| standard "))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert "-" not in "".join(cells[3::2]) and "±0" in cells[3], row


def test_removed_queries_fail_the_baseline_gate_until_it_is_refreshed(baselined: RagProject) -> None:
    """Dropping a query (or its judgments) from the golden set stops checking it: that must show in
    the baseline's diff, not pass quietly."""
    baselined.remove_query("q-006")
    result = baselined.run()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert ids_with(result, "failed") == ["golden.yaml::gate::baseline"]
    assert "1 query of the baseline is gone from the golden set (q-006)" in rag_summary(result)
    assert "refresh the baseline in the same change" in rag_summary(result)
    baselined.make_baseline("--rag-reason", "q-006 is no longer asked")
    assert baselined.run().ret == pytest.ExitCode.OK


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git to build the worktree")
@pytest.mark.parametrize("git_on_path", [True, False], ids=["git", "no-git-on-PATH"])
def test_the_commit_is_recorded_inside_a_git_worktree(pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory,
                                                      monkeypatch: pytest.MonkeyPatch, git_on_path: bool) -> None:
    """In a worktree ``.git`` is a file and the branch lives in the main repository's refs."""
    repo = tmp_path_factory.mktemp("repo")

    def git(*args: str) -> str:
        return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args], cwd=repo,
                              check=True, capture_output=True, text=True).stdout.strip()

    git("init", "-q")
    (repo / "README").write_text("main checkout\n")
    git("add", "README")
    git("commit", "-q", "-m", "first")
    git("worktree", "add", "-q", "-b", "feature", str(pytester.path))
    assert (pytester.path / ".git").is_file()
    head = git("rev-parse", "HEAD")
    project = RagProject(pytester)
    if not git_on_path:  # the fallback reads .git, its gitdir and the common refs itself
        monkeypatch.setenv("PATH", "")
    project.make_baseline()
    assert project.baseline()["_meta"]["git_commit"] == head
