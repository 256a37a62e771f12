"""The gate fails closed: what it did not judge, it names; what it cannot judge, it fails.

Each case is a run that once exited 0 while a regression went unjudged, through a real
``pytest --rag-eval`` session: a baseline measured on part of the set, a question added in the
change that breaks it, a question left out by ``--rag-allow-missing-gold`` whose gold came back,
metrics without recall, a tolerance that can never fail, and a question whose kind changed with
``--rag-accept-mismatch``.
"""

from __future__ import annotations

import json

import pytest
import yaml

from ragproject import GOLDEN, ids_with, outcomes, rag_summary
from test_missing_gold import GONE, write_corpus
from trust_helpers import TrustProject, assert_usage_error, no_traceback

#: three queries lose every gold document
BROKEN = {"q_002": ["noise-doc"], "q_004": ["rim-wear"], "q_006": ["noise-doc"]}


def test_a_baseline_measured_on_part_of_the_set_does_not_pass_the_rest(project: TrustProject) -> None:
    (project.path / "tiny.yaml").write_text(yaml.safe_dump(GOLDEN[:2], sort_keys=False), encoding="utf-8")
    project.make_baseline("--rag-golden", "tiny.yaml")
    project.answer(**BROKEN)
    result = project.run()
    no_traceback(result.stdout.str())
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    summary = rag_summary(result)
    assert "All gates passed" not in summary
    assert outcomes(result)["golden.yaml::gate::coverage"] == "failed"
    assert ("gate coverage: 4 labelled questions of the golden set have no entry in the baseline, so no gate judges "
            "them: q-003, q-004, q-005, q-006") in summary
    assert "the baseline was measured on another version of the golden set (tiny.yaml" in summary
    assert "Judged: 2 queries against the baseline" in summary
    assert "Not judged, no entry in the baseline: q-003, q-004, q-005, q-006" in summary


def test_a_question_left_out_with_missing_gold_is_judged_once_its_gold_is_back(project: TrustProject) -> None:
    """q-005's gold left the corpus and the refresh allowed it; when the document comes back and the
    retriever still misses it, the question has no entry, so only the coverage gate can see it."""
    write_corpus(project, list(GONE))
    project.answer(q_005=["cassette", "degreaser"])
    assert project.run("--rag-update-baseline", "--rag-allow-missing-gold", "--rag-corpus=corpus").ret == 0
    assert "q-005" not in project.baseline()["per_query"]
    assert project.run("--rag-corpus=corpus").ret == 0  # still gone, allowed in the baseline's diff
    write_corpus(project, [*GONE, "tire-pressure"])  # it is back, and nothing finds it
    result = project.run("--rag-corpus=corpus")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    summary = rag_summary(result)
    assert "gate coverage: 1 labelled question of the golden set has no entry in the baseline" in summary
    assert ": q-005; refresh the baseline" in summary


def test_metrics_without_recall_still_gate_the_first_one(project: TrustProject) -> None:
    project.ini(rag_metrics="ndcg@10 mrr@10")
    project.make_baseline()
    project.answer(**BROKEN)
    result = project.run()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    failed = ids_with(result, "failed")
    assert "golden.yaml::gate::ndcg@10" in failed
    assert {"golden.yaml::q-002", "golden.yaml::q-004", "golden.yaml::q-006"} <= set(failed)
    assert "golden.yaml::gate::mrr@10" not in outcomes(result)  # the first metric only
    summary = rag_summary(result)
    assert "gate ndcg@10: ndcg@10 fell" in summary
    # a thresholds file that gates another metric takes over from the default
    project.thresholds({"mrr@10_tolerance": 0.5})
    result = project.run()
    assert "golden.yaml::gate::ndcg@10" not in outcomes(result)
    assert outcomes(result)["golden.yaml::gate::mrr@10"] == "passed"


@pytest.mark.parametrize("key", ["recall@10_tolerance", "recall@10_query_tolerance", "false_retrieval_rate_tolerance"])
def test_a_tolerance_of_one_is_refused(baselined: TrustProject, key: str) -> None:
    baselined.thresholds({key: 1})
    result = baselined.run()
    assert_usage_error(result, "baselines/thresholds.json", f"'{key}' is 1", "would never fail")


def test_null_removes_a_default_gate_in_words_and_all_null_is_refused(baselined: TrustProject) -> None:
    baselined.answer(q_004=["rim-wear"])
    baselined.thresholds({"recall@10_query_tolerance": None, "recall@10_tolerance": 0.5})
    result = baselined.run()
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert outcomes(result)["golden.yaml::q-004"] == "passed"
    baselined.thresholds({"recall@10_query_tolerance": None, "recall@10_tolerance": None})
    assert_usage_error(baselined.run(), "baselines/thresholds.json", "would gate no metric",
                       '"fail_on_regression": false')


@pytest.mark.parametrize("direction", ["to-unanswerable", "to-answerable"])
def test_a_question_whose_kind_changed_fails_even_with_accept_mismatch(project: TrustProject, direction: str) -> None:
    if direction == "to-answerable":
        project.add_query({"id": "q-007", "question": "who won the 1998 world cup", "answerable": False}, [])
    project.make_baseline()
    if direction == "to-unanswerable":
        project.edit_query("q-004", answerable=False, gold_chunks=[])
        project.answer(q_004=["derailleur"])  # now it answers a question marked as having no answer
        qid, how = "q-004", "now answerable: false"
    else:
        project.edit_query("q-007", answerable=True, gold_chunks=["world-cup"])
        qid, how = "q-007", "was answerable: false, now answerable"
    refused = project.run()
    assert refused.ret == pytest.ExitCode.USAGE_ERROR  # the judgments changed
    result = project.run("--rag-accept-mismatch")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    summary = rag_summary(result)
    assert f"gate coverage: 1 question changed kind since the baseline ({qid}: {how})" in summary
    assert "--rag-accept-mismatch does not allow this" in summary


def test_a_set_that_went_from_closed_to_pooled_fails_even_with_accept_mismatch(baselined: TrustProject) -> None:
    baselined.ini(rag_judgments="pooled")
    assert baselined.run().ret == pytest.ExitCode.USAGE_ERROR
    result = baselined.run("--rag-accept-mismatch")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    summary = rag_summary(result)
    assert "gate coverage: the golden set is judged pooled, but the baseline was measured with it closed" in summary


def test_a_refreshed_baseline_covers_the_set_and_the_gate_passes(project: TrustProject) -> None:
    """The other side of every case above: once the baseline covers the set, coverage passes and says so."""
    project.make_baseline()
    result = project.run("--rag-report", "run.json")
    assert result.ret == pytest.ExitCode.OK
    artifact = json.loads((project.path / "run.json").read_text(encoding="utf-8"))
    gate = next(g for g in artifact["comparison"]["gates"] if g["name"] == "coverage")
    assert gate["passed"] is True and gate["kind"] == "coverage"
    assert artifact["comparison"]["coverage"]["uncovered"] == []
    assert artifact["comparison"]["coverage"]["judged"] == 6


# ------------------------------------------------------------------ empty option values

from pytest_ragmetrics._plugin.options import OPTIONS  # noqa: E402

#: every ini key, and every flag that takes free text (argparse itself refuses "" for a number or a choice)
INI_KEYS = [spec.ini for spec in OPTIONS if spec.ini]
TEXT_FLAGS = [spec.flag for spec in OPTIONS if spec.flag and not spec.switch and spec.type is None and not spec.choices]


@pytest.mark.parametrize("key", INI_KEYS)
@pytest.mark.parametrize("how", ["-o", "ini"])
def test_an_empty_ini_value_is_refused_never_read_as_the_default(baselined: TrustProject, key: str, how: str) -> None:
    """An unset variable in CI (``-o rag_metrics=$METRICS``, or a templated ini file) must not switch a gate
    off or change what is measured without a word."""
    if how == "-o":
        result = baselined.run("-o", f"{key}=")
    else:
        baselined.ini(**{key: ""})
        result = baselined.run()
    message = assert_usage_error(result)
    assert key in message and "empty" in message


@pytest.mark.parametrize("flag", TEXT_FLAGS)
def test_an_empty_flag_value_is_refused(baselined: TrustProject, flag: str) -> None:
    message = assert_usage_error(baselined.run(f"{flag}="))
    assert flag in message and "empty" in message


def test_a_refresh_that_adds_a_hard_question_needs_no_reason(baselined: TrustProject) -> None:
    """Adding a question the retriever misses pulls the mean down, but nothing got worse: the coverage
    gate asks for the refresh, and the refresh must not then ask for a reason for a lowering."""
    baselined.add_query({"id": "q-007", "question": "truing a wheel", "gold_chunks": ["spoke-tension"],
                         "tags": ["standard"]}, ["noise-doc"])
    assert baselined.run().ret == pytest.ExitCode.TESTS_FAILED  # coverage: q-007 has no entry
    result = baselined.run("--rag-update-baseline")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-2000:]
    assert "lowerings" not in baselined.baseline()["_meta"]
    assert baselined.run().ret == pytest.ExitCode.OK


def test_a_passing_run_names_the_queries_that_fell_within_their_tolerances(baselined: TrustProject) -> None:
    """Allowed is not unseen: a query that lost its gold within a loosened tolerance is named on a green run."""
    baselined.thresholds({"recall@10_query_tolerance": None, "recall@10_tolerance": 0.5})
    baselined.answer(q_004=["rim-wear"])
    result = baselined.run("--rag-markdown", "summary.md", "--rag-report", "run.json")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-2000:]
    summary = rag_summary(result)
    assert "Fell within their tolerances (1 query, all shown):\n  q-004  recall@10 1.0000 -> 0.0000  (not gated " \
           "per query)" in summary
    assert "Fell within their tolerances (1 of 1)" in (baselined.path / "summary.md").read_text(encoding="utf-8")
    artifact = json.loads((baselined.path / "run.json").read_text(encoding="utf-8"))
    assert [r["qid"] for r in artifact["comparison"]["within"]] == ["q-004"]


# ------------------------------------------------------------------ report-only mode and floors


@pytest.mark.parametrize("case", ["skipped", "no-baseline", "uncovered"])
def test_report_only_mode_reports_regressions_but_never_passes_a_run_that_judged_nothing(
        project: TrustProject, case: str) -> None:
    """fail_on_regression: false lets regressions through as a report; a run with nothing to compare,
    nothing judged or questions no baseline covers is no regression report, so it still fails."""
    if case != "no-baseline":
        project.make_baseline()
    project.thresholds({"fail_on_regression": False})
    if case == "skipped":
        project.conftest_text += ('\n\n@pytest.fixture(scope="session")\ndef rag_retriever():\n'
                                  '    pytest.skip("vector DB not reachable")\n')
        (project.path / "conftest.py").write_text(project.conftest_text, encoding="utf-8")
    if case == "uncovered":
        project.add_query({"id": "q-007", "question": "truing a wheel", "gold_chunks": ["spoke-tension"]},
                          ["noise-doc"])
    result = project.run("--junitxml=junit.xml")
    no_traceback(result.stdout.str())
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()[-2000:]
    gate = {"skipped": "baseline", "no-baseline": "baseline", "uncovered": "coverage"}[case]
    assert outcomes(result)[f"golden.yaml::gate::{gate}"] == "failed"
    assert rag_summary(result).startswith("RETRIEVAL GATE FAILED\n")


@pytest.mark.parametrize("floor", [0, 0.0])
def test_a_floor_of_zero_is_refused(baselined: TrustProject, floor: float) -> None:
    baselined.thresholds({"mrr@10_min": floor})
    assert_usage_error(baselined.run(), "'mrr@10_min' is 0", "would never fail")


def test_a_floor_does_not_take_a_metric_out_of_significant_drops(project: TrustProject) -> None:
    """A floor judges a level, not a change: an ordering bug that halves MRR still fails significant-drops."""
    records = [{"id": f"q-{i:03d}", "question": f"question {i}", "gold_chunks": [f"doc-{i}"]} for i in range(1, 13)]
    project.answers = {r["id"]: [*r["gold_chunks"], "noise-doc"] for r in records}
    project.golden(records)
    project.thresholds({"mrr@10_min": 0.01, "ndcg@10_min": 0.01})
    project.make_baseline()
    project.answer(**{r["id"].replace("-", "_"): ["noise-doc", "noise-2", *r["gold_chunks"]] for r in records})
    result = project.run()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert outcomes(result)["golden.yaml::gate::significant-drops"] == "failed"
    assert "gate significant-drops: mrr@10 fell" in rag_summary(result)


def test_a_skip_marker_on_a_gate_item_never_crashes(baselined: TrustProject) -> None:
    baselined.conftest_text += ("\n\ndef pytest_collection_modifyitems(items):\n    for it in items:\n"
                                "        if 'gate::' in it.nodeid:\n"
                                "            it.add_marker(pytest.mark.skip(reason='later'))\n")
    (baselined.path / "conftest.py").write_text(baselined.conftest_text, encoding="utf-8")
    baselined.answer(q_004=["rim-wear"])
    result = baselined.run()
    no_traceback(result.stdout.str())
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # the verdict still fails the run, named
    assert "RETRIEVAL GATE FAILED" in rag_summary(result)


def test_a_refresh_cannot_write_down_a_fall_significant_drops_would_fail(project: TrustProject,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """MRR and nDCG have no tolerance; significant-drops fails their clear fall. A refresh slipped into the job
    (PYTEST_ADDOPTS) must not write that fall down without a reason."""
    records = [{"id": f"q-{i:03d}", "question": f"question {i}", "gold_chunks": [f"doc-{i}"]} for i in range(1, 13)]
    project.answers = {r["id"]: [*r["gold_chunks"], "noise-doc"] for r in records}
    project.golden(records)
    project.make_baseline()
    before = project.baseline_path.read_bytes()
    project.answer(**{r["id"].replace("-", "_"): ["noise-doc", "noise-2", *r["gold_chunks"]] for r in records})
    assert project.run().ret == pytest.ExitCode.TESTS_FAILED  # significant-drops
    monkeypatch.setenv("PYTEST_ADDOPTS", "--rag-update-baseline")
    result = project.run()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "mean mrr@10 1.0000 -> 0.3333" in result.stdout.str()
    assert project.baseline_path.read_bytes() == before


@pytest.mark.parametrize("target", [".git/HEAD", ".pytest_cache/v/cache/lastfailed", "other/baseline.json"])
def test_the_plugin_never_writes_over_git_its_cache_or_another_baseline(baselined: TrustProject, target: str) -> None:
    for folder in (".git", ".pytest_cache/v/cache", "other"):
        (baselined.path / folder).mkdir(parents=True, exist_ok=True)
    (baselined.path / ".git" / "HEAD").write_text("ref: refs/heads/main\n", encoding="utf-8")
    (baselined.path / ".pytest_cache/v/cache/lastfailed").write_text("{}", encoding="utf-8")
    (baselined.path / "other" / "baseline.json").write_bytes(baselined.baseline_path.read_bytes())
    before = (baselined.path / target).read_bytes()
    assert_usage_error(baselined.run(f"--rag-report={target}"), "--rag-report")
    assert (baselined.path / target).read_bytes() == before


def test_without_recall_a_floor_keeps_the_first_metrics_no_drop_default(project: TrustProject) -> None:
    """A floor judges a level, not a change: an ordering bug that halves MRR above the floor still fails."""
    project.ini(rag_metrics="mrr@10 ndcg@10")
    project.make_baseline()
    project.thresholds({"ndcg@10_min": 0.1})
    project.answer(q_002=["noise-doc", "chain-lube", "chain-clean"], q_004=["rim-wear", "derailleur", "shifter-cable"])
    result = project.run()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert outcomes(result)["golden.yaml::gate::mrr@10"] == "failed"


def test_a_run_that_compared_nothing_fails_in_report_only_mode(project: TrustProject) -> None:
    """The baseline was measured at another k and compared anyway: no metric is comparable, so nothing was
    judged, and report-only mode does not make that a pass."""
    project.ini(rag_metrics="recall@5 mrr@5")
    project.make_baseline()
    project.ini(rag_metrics="recall@10 mrr@10")
    project.thresholds({"fail_on_regression": False})
    project.answer(q_002=["noise-doc"], q_004=["rim-wear"])
    result = project.run("--rag-accept-mismatch")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, rag_summary(result)
    summary = rag_summary(result)
    assert "recall@10 cannot be compared" in summary
    assert "no query of this run could be compared with the baseline" in summary
