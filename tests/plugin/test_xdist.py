"""Under pytest-xdist (-n 2) the outcome, the worst list and the artifact match a serial run;
workers score, the controller alone aggregates, gates and writes."""

from __future__ import annotations

import json

import pytest

from ragproject import QIDS, RagProject, ids_with, outcomes, rag_summary, worst_list

import xdist  # noqa: F401  - dev extra: CI has it; missing must fail

DEGRADED = {
    "q_002": ["chain-lube#1-2", "noise-doc"],
    "q_004": ["brake-pads", "tire-repair#3-3"],
    "q_005": {"raise": "index shard offline"},
}


def _artifact(project: RagProject, name: str) -> dict:
    data = json.loads((project.path / name).read_text(encoding="utf-8"))
    data["_meta"].pop("created")
    data["_meta"]["seal"].pop("created")  # the time, and its digest, are each run's own
    return data


def _writes(project: RagProject) -> list[str]:
    return [c for c in project.calls() if c.startswith("write-")]


def test_degraded_run_is_the_same_under_xdist(baselined: RagProject) -> None:
    baselined.thresholds({"max_regressed_queries": 1})
    baselined.answer(**DEGRADED)
    serial = baselined.run("--rag-report", "serial.json")
    baselined.spy_writes()
    baselined.reset_calls()
    parallel = baselined.run_subprocess("-n", "2", "--rag-report", "parallel.json")

    assert serial.ret == parallel.ret == pytest.ExitCode.TESTS_FAILED
    assert "created: 2/2 workers" in parallel.stdout.str()
    expected_failed = [
        "golden.yaml::gate::recall@10", "golden.yaml::gate::regressed-queries",
        "golden.yaml::q-002", "golden.yaml::q-004", "golden.yaml::q-005",
    ]
    assert ids_with(serial, "failed") == ids_with(parallel, "failed") == expected_failed
    assert ids_with(serial, "passed") == ids_with(parallel, "passed") == [
        "golden.yaml::gate::baseline", "golden.yaml::gate::coverage", "golden.yaml::gate::significant-drops",
        "golden.yaml::q-001",
        "golden.yaml::q-003", "golden.yaml::q-006"]
    assert parallel.parseoutcomes() == {"failed": 5, "passed": 6}
    assert serial.parseoutcomes() == {"failed": 5, "passed": 6}

    # the same verdict text: gates, tables, worst list (errors first, then largest drop)
    assert rag_summary(parallel) == rag_summary(serial)
    assert worst_list(rag_summary(parallel)) == ["q-005", "q-004", "q-002"]
    # the controller reports each failed gate with the full verdict, as a serial gate item does
    assert "gate regressed-queries: 3 queries regressed (errors included); at most 1 allowed" in \
        parallel.stdout.str().split("= FAILURES =", 1)[1]

    assert _artifact(baselined, "parallel.json") == _artifact(baselined, "serial.json")
    # workers searched (every query exactly once), the controller alone wrote
    searches = sorted(c for c in baselined.calls() if c.startswith("search"))
    assert searches == sorted(f"search\t{r['question']}" for r in baselined.records)
    assert _writes(baselined) == ["write-artifact\tcontroller"]

    # q-005 errors: no baseline from a broken run, under xdist as in a serial run
    baselined.reset_calls()
    refused = baselined.run_subprocess("-n", "2", "--rag-update-baseline")
    assert "not writing" in rag_summary(refused) and "not writing" in rag_summary(
        baselined.run("--rag-update-baseline"))
    assert _writes(baselined) == []


def test_clean_run_is_the_same_under_xdist(baselined: RagProject) -> None:
    serial = baselined.run("--rag-report", "serial.json")
    parallel = baselined.run_subprocess("-n", "2", "--rag-report", "parallel.json")
    assert serial.ret == parallel.ret == pytest.ExitCode.OK
    expected = {**{f"golden.yaml::{q}": "passed" for q in QIDS},
                "golden.yaml::gate::baseline": "passed", "golden.yaml::gate::coverage": "passed",
                "golden.yaml::gate::recall@10": "passed",
                "golden.yaml::gate::significant-drops": "passed"}
    assert outcomes(serial) == outcomes(parallel) == expected
    assert rag_summary(parallel) == rag_summary(serial)
    assert _artifact(baselined, "parallel.json") == _artifact(baselined, "serial.json")


def test_update_baseline_under_xdist_writes_once_and_right(project: RagProject) -> None:
    project.answer(q_002=["chain-lube", "noise-doc"])
    project.make_baseline()
    serial = project.baseline()
    project.baseline_path.unlink()
    project.spy_writes()
    project.reset_calls()
    result = project.run_subprocess("-n", "2", "--rag-update-baseline", "--rag-report=run.json")
    assert result.ret == pytest.ExitCode.OK
    assert "Baseline written:" in rag_summary(result)
    parallel = project.baseline()
    serial["_meta"].pop("created")
    parallel["_meta"].pop("created")
    assert parallel == serial
    assert parallel["per_query"]["q-002"]["recall@10"] == 0.5
    assert sorted(_writes(project)) == ["write-artifact\tcontroller", "write-baseline\tcontroller"]
    assert sorted(p.name for p in project.baseline_path.parent.iterdir()) == ["baseline.json"]


def test_missing_baseline_under_xdist(project: RagProject) -> None:
    result = project.run_subprocess("-n", "2")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert ids_with(result, "failed") == ["golden.yaml::gate::baseline", "golden.yaml::gate::coverage"]
    assert "pytest --rag-eval --rag-update-baseline" in rag_summary(result)
    assert not project.baseline_path.exists()


def test_gate_node_ids_match_for_a_collection_folder(project: RagProject) -> None:
    """A folder golden set hangs its items from queries.jsonl; the controller's gate
    reports must use that node id too, as the serial gate items do."""
    folder = project.path / "collection"
    folder.mkdir()
    queries = [{"qid": r["id"], "query": r["question"], "tags": r["tags"]} for r in project.records]
    (folder / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries), encoding="utf-8")
    qrels = []
    for r in project.records:
        gold = r["gold_chunks"]
        for doc, grade in (gold.items() if isinstance(gold, dict) else ((d, 1) for d in gold)):
            qrels.append(f"{r['id']}\t{doc}\t{grade}\n")
    (folder / "qrels.tsv").write_text("".join(qrels), encoding="utf-8")
    project.ini(rag_golden="collection")
    project.make_baseline()
    project.answer(q_004=["noise-doc"])
    serial = project.run()
    parallel = project.run_subprocess("-n", "2")
    assert serial.ret == parallel.ret == pytest.ExitCode.TESTS_FAILED
    assert outcomes(serial) == outcomes(parallel)
    assert ids_with(parallel, "failed") == ["collection/queries.jsonl::gate::recall@10", "collection/queries.jsonl::q-004"]
    assert "collection/queries.jsonl::gate::baseline" in ids_with(parallel, "passed")
