"""--rag-subset smoke|full and the --rag-report run artifact."""

from __future__ import annotations

import json
import re

import pytest

from ragproject import GATES_DEFAULT, QIDS, RagProject, dcg, ids_with, no_traceback, outcomes, rag_summary

SMOKE = ["q-001", "q-003", "q-006"]


@pytest.fixture
def smoke_project(project: RagProject) -> RagProject:
    """Baseline with q-002 (not a smoke query) at recall 1/2, so the full baseline mean
    (5.5/6) differs from the smoke queries' baseline mean (1.0)."""
    project.ini(rag_smoke="tag:smoke")
    project.answer(q_002=["chain-lube", "noise-doc"])
    project.make_baseline()
    assert project.baseline()["aggregate"]["recall@10"] == pytest.approx(5.5 / 6)
    project.reset_calls()
    return project


def test_smoke_runs_only_tagged_queries_against_their_own_baseline(smoke_project: RagProject) -> None:
    result = smoke_project.run("--rag-subset", "smoke")
    assert result.ret == pytest.ExitCode.OK
    assert outcomes(result) == {**{f"golden.yaml::{q}": "passed" for q in SMOKE}, **{g: "passed" for g in GATES_DEFAULT}}
    assert sorted(c.split("\t")[1] for c in smoke_project.calls() if c.startswith("search")) == sorted(
        r["question"] for r in smoke_project.records if r["id"] in SMOKE)
    summary = rag_summary(result)
    # compared with the same three queries' baseline (1.0), not the full set's mean (0.9167)
    assert re.search(r"\| recall@10 +\| 1\.0000 +\| 1\.0000 +\| ±0 +\|", summary)
    assert "n = 3 queries" in summary
    assert "gone from the golden set" not in summary  # queries outside the subset are not "removed"
    assert "ragmetrics: 3 of 6 queries (smoke: tag:smoke)" in result.stdout.str()


def test_smoke_ignores_regressions_outside_the_subset(smoke_project: RagProject) -> None:
    smoke_project.answer(q_005=["noise-doc"])  # not a smoke query
    assert smoke_project.run("--rag-subset", "smoke").ret == pytest.ExitCode.OK
    assert smoke_project.run("--rag-subset", "full").ret == pytest.ExitCode.TESTS_FAILED


def test_smoke_regression_is_compared_over_the_subset(smoke_project: RagProject) -> None:
    smoke_project.answer(q_006=["cassette"])  # recall 1 -> 1/3
    result = smoke_project.run("--rag-subset", "smoke")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert ids_with(result, "failed") == ["golden.yaml::gate::recall@10", "golden.yaml::q-006"]
    now = (1 + 1 + 1 / 3) / 3
    assert f"recall@10 fell {1 - now:.4f} against the baseline (1.0000 -> {now:.4f})" in rag_summary(result)


def test_subset_default_comes_from_ini(smoke_project: RagProject) -> None:
    smoke_project.ini(rag_subset="smoke")
    assert sorted(outcomes(smoke_project.run())) == sorted([f"golden.yaml::{q}" for q in SMOKE] + GATES_DEFAULT)
    # and the flag wins
    assert len(outcomes(smoke_project.run("--rag-subset", "full"))) == len(QIDS) + len(GATES_DEFAULT)


def test_stratified_sample_is_stable(baselined: RagProject) -> None:
    baselined.ini(rag_smoke="sample:2:7")
    first = baselined.run("--rag-subset", "smoke")
    second = baselined.run("--rag-subset", "smoke")
    assert first.ret == second.ret == pytest.ExitCode.OK
    chosen = sorted(n for n in outcomes(first) if "::gate::" not in n)
    assert chosen == sorted(n for n in outcomes(second) if "::gate::" not in n)
    assert len(chosen) == 2
    # one per stratum (first tag): standard = q-001/002/004, paraphrase = q-003/005/006
    qids = [n.split("::")[1] for n in chosen]
    assert len({q in ("q-001", "q-002", "q-004") for q in qids}) == 2
    assert "ragmetrics: 2 of 6 queries (smoke: sample:2:7)" in first.stdout.str()


def test_bad_smoke_rules_are_usage_errors(baselined: RagProject) -> None:
    baselined.ini(rag_smoke="tag:nightly")
    result = baselined.run("--rag-subset", "smoke")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "no query carries the tag 'nightly'" in result.stderr.str()
    no_traceback(result)
    baselined.ini(rag_smoke="sample:few")
    result = baselined.run("--rag-subset", "smoke")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "write sample:N or sample:N:SEED with a whole number N >= 1 and an integer SEED" in result.stderr.str()
    assert baselined.calls() == []


@pytest.mark.parametrize("rule", ["sample:\u00b2", "sample:3:\u00b9", "sample:3:--1", "sample:0"])
def test_a_sample_size_in_digits_other_than_ascii_is_a_usage_error(baselined: RagProject, rule: str) -> None:
    """str.isdigit() accepts '²', which int() then rejects: that was an INTERNALERROR."""
    baselined.ini(rag_smoke=rule)
    result = baselined.run("--rag-subset", "smoke")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"rag_smoke = {rule!r}: write sample:N or sample:N:SEED with a whole number N >= 1 and an integer SEED" in result.stderr.str()
    no_traceback(result)
    assert baselined.calls() == []


def _strata_project(project: RagProject, sizes: dict[str, int]) -> None:
    records, answers = [], {}
    for tag, n in sizes.items():
        for i in range(n):
            qid = f"{tag}-{i:03d}"
            records.append({"id": qid, "question": f"{tag} question {i}", "gold_chunks": [f"doc-{qid}"], "tags": [tag]})
            answers[qid] = [f"doc-{qid}"]
    project.answers = answers
    project.golden(records)
    project.make_baseline()


@pytest.mark.parametrize("size, expected", [(3, {"standard": 1, "hard": 1, "paraphrase": 1}),
                                            (5, {"standard": 3, "hard": 1, "paraphrase": 1}),
                                            (2, {"standard": 1, "hard": 1, "paraphrase": 0})])
def test_a_stratified_sample_takes_one_query_from_every_stratum_it_can(
        project: RagProject, size: int, expected: dict[str, int]) -> None:
    """Strata of 8, 1 and 1: proportional shares alone would give 3/0/0 for three places.
    With fewer places than strata the largest strata (then by name) go first."""
    _strata_project(project, {"standard": 8, "hard": 1, "paraphrase": 1})
    project.ini(rag_smoke=f"sample:{size}:11")
    result = project.run("--rag-subset", "smoke")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert f"ragmetrics: {size} of 10 queries (smoke: sample:{size}:11)" in result.stdout.str()
    chosen = [n.split("::")[1] for n in outcomes(result) if "::gate::" not in n]
    assert {tag: sum(q.startswith(tag + "-") for q in chosen) for tag in expected} == expected


# ------------------------------------------------------------------ run artifact

def _degrade(project: RagProject) -> None:
    project.answer(q_004=["brake-pads", "tire-repair#3-3"], q_002=["chain-lube#1-2", "noise-doc"])


def test_report_artifact_contents(baselined: RagProject) -> None:
    _degrade(baselined)
    result = baselined.run("--rag-report", "reports/run.json")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    report = json.loads((baselined.path / "reports" / "run.json").read_text())
    assert set(report) == {"_meta", "aggregate", "n", "per_query", "comparison"}
    meta = report["_meta"]
    assert meta["measurement"] == {"metrics": ["recall@10", "hit_rate@10", "mrr@10", "ndcg@10"],
                                   "relevance_level": 1, "gain": "exponential", "id_separator": "#",
                                   "dedup": "first"}
    assert meta["k"] == 10 and meta["subset"] == "full"
    assert meta["golden"]["n_queries"] == 6
    assert meta["retriever"] == {"name": "json-retriever", "version": 1}
    assert report["n"] == 6
    assert sorted(report["per_query"]) == QIDS
    q004 = report["per_query"]["q-004"]
    # the digest of the labels it was measured with, the same as the baseline's (compare checks them)
    baseline = json.loads(baselined.baseline_path.read_text())
    assert q004.pop("_judgments") == baseline["per_query"]["q-004"]["_judgments"]
    assert q004.pop("_top") == ["brake-pads", "tire-repair"]  # the top k, as the baseline records it
    assert q004 == {"status": "scored", "ranking": ["brake-pads", "tire-repair"], "tags": ["standard"],
                    "error": None, "n_docs": 2,
                    "metrics": {"recall@10": 0.0, "hit_rate@10": 0.0, "mrr@10": 0.0, "ndcg@10": 0.0},
                    "baseline": {"recall@10": 1.0, "hit_rate@10": 1.0, "mrr@10": 1.0, "ndcg@10": 1.0}}
    q002 = report["per_query"]["q-002"]
    assert q002["ranking"] == ["chain-lube", "noise-doc"]
    assert q002["metrics"]["recall@10"] == 0.5
    assert q002["metrics"]["ndcg@10"] == pytest.approx(dcg([1, 0]) / dcg([1, 1]), abs=1e-12)
    assert report["per_query"]["q-001"]["ranking"] == ["tire-repair", "tube-patch"]
    assert report["aggregate"]["recall@10"] == pytest.approx(4.5 / 6, abs=1e-12)
    comparison = report["comparison"]
    assert [r["qid"] for r in comparison["regressed"]] == ["q-004", "q-002"]
    q004_drops = {d["metric"]: d for d in comparison["regressed"][0]["drops"]}
    assert q004_drops["recall@10"] == {"metric": "recall@10", "baseline": 1.0, "now": 0.0, "delta": -1.0,
                                       "tolerance": 0.0, "exceeded": True}
    assert comparison["regressed"][0]["gold"] == [["derailleur", 1], ["shifter-cable", 1]]
    assert comparison["regressed"][0]["returned"] == ["brake-pads", "tire-repair"]
    assert {g["name"]: g["passed"] for g in comparison["gates"]} == {"baseline": True, "coverage": True, "recall@10": False,
                                                                   "significant-drops": True}
    assert comparison["passed"] is False
    recall_row = next(r for r in comparison["aggregate"] if r["metric"] == "recall@10")
    assert recall_row["baseline"] == 1.0 and recall_row["dropped_too_far"] is True
    assert recall_row["delta"] == pytest.approx(-1.5 / 6, abs=1e-12)
    assert comparison["strata"]["standard"]["n"] == 3


def test_report_is_identical_between_runs_except_created(baselined: RagProject) -> None:
    _degrade(baselined)
    baselined.run("--rag-report", "a.json")
    baselined.run("--rag-report", "b.json")
    a = json.loads((baselined.path / "a.json").read_text())
    b = json.loads((baselined.path / "b.json").read_text())
    for data in (a, b):  # the time and its digest are each run's own
        data["_meta"].pop("created")
        data["_meta"]["seal"].pop("created")
    assert a == b


def test_report_is_written_on_a_passing_run_and_with_update(project: RagProject) -> None:
    result = project.run("--rag-update-baseline", "--rag-report", "run.json")
    assert result.ret == pytest.ExitCode.OK
    report = json.loads((project.path / "run.json").read_text())
    assert report["aggregate"]["recall@10"] == 1.0
    assert report["comparison"]["regressed"] == []
    (project.path / "run.json").unlink()
    assert project.run("--rag-report", "run.json").ret == pytest.ExitCode.OK
    assert json.loads((project.path / "run.json").read_text())["comparison"]["passed"] is True


def test_report_names_the_baseline_it_was_judged_against(project: RagProject) -> None:
    """``_meta.baseline``: the file's sha256, the digest of its numbers and its created time,
    so a history of artifacts can tell a baseline refresh from a change in retrieval; only the
    artifact carries it."""
    import hashlib

    from pytest_ragmetrics.gate.baseline import load_baseline

    def sha() -> str:
        return hashlib.sha256(project.baseline_path.read_bytes()).hexdigest()

    assert project.run("--rag-report", "none.json").ret == pytest.ExitCode.TESTS_FAILED  # no baseline yet
    assert json.loads((project.path / "none.json").read_text())["_meta"]["baseline"] is None

    project.run("--rag-update-baseline", "--rag-report", "wrote.json")
    wrote = json.loads((project.path / "wrote.json").read_text())["_meta"]
    first = project.baseline()
    content = load_baseline(project.baseline_path).content_digest()
    assert wrote["baseline"] == {"sha256": sha(), "content": content, "created": first["_meta"]["created"],
                                 "updated": True}
    assert "baseline" not in first["_meta"]  # the baseline file itself is unchanged

    project.run("--rag-report", "judged.json")
    judged = json.loads((project.path / "judged.json").read_text())["_meta"]
    assert judged["baseline"] == {"sha256": sha(), "content": content, "created": first["_meta"]["created"],
                                  "updated": False}


def test_no_report_without_the_flag(baselined: RagProject) -> None:
    def written() -> list[str]:  # the caches of pytest and of Python's bytecode are not reports
        return sorted(p.name for p in baselined.path.rglob("*")
                      if ".pytest_cache" not in p.parts and "__pycache__" not in p.parts)

    before = written()
    baselined.run()
    after = written()
    assert [p for p in after if p not in before] == ["calls.log"]  # the retriever's own log
