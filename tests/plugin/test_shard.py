"""Sharded runs: ``--rag-shard I/N`` runs a stable share of the set on one machine, and
``ragmetrics merge`` judges every shard's artifact as one run, identical to a whole run of the set."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ragproject import QIDS, RagProject, ids_with, no_traceback, rag_summary

from pytest_ragmetrics.cli import main
from pytest_ragmetrics.gate.artifact import load_artifact
from pytest_ragmetrics.gate.shard import select_shard, shard_of
from pytest_ragmetrics.golden import load_golden

DEGRADED = {
    "q_002": ["chain-lube#1-2", "noise-doc"],
    "q_004": ["brake-pads", "tire-repair#3-3"],
    "q_005": {"raise": "index shard offline"},
}


def _normalised(data: dict[str, Any]) -> dict[str, Any]:
    """An artifact without what is each run's own: its time, and the time's digest in the seal."""
    data = json.loads(json.dumps(data))
    data["_meta"].pop("created")
    data["_meta"]["seal"].pop("created")
    return data


def _read(project: RagProject, name: str) -> dict[str, Any]:
    return json.loads((project.path / name).read_text(encoding="utf-8"))


def _shards(project: RagProject, count: int = 3, *args: str) -> list[pytest.RunResult]:
    return [project.run(f"--rag-shard={i}/{count}", f"--rag-report=shard{i}.json", *args) for i in range(1, count + 1)]


def _merge(project: RagProject, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
           *args: str) -> tuple[int, str, str]:
    monkeypatch.chdir(project.path)
    capsys.readouterr()
    code = main(["merge", *args])
    out, err = capsys.readouterr()
    return code, out, err


# ----------------------------------------------------------------------------- the deal


def _golden(tmp_path: Path, records: list[dict[str, Any]], name: str = "golden.yaml") -> Any:
    import yaml

    path = tmp_path / name
    path.write_text(yaml.safe_dump(records, sort_keys=False), encoding="utf-8")
    return load_golden(path)


def test_the_deal_is_stable_exact_and_spreads_each_first_tag(tmp_path: Path) -> None:
    records = [{"id": f"q-{i:03d}", "question": f"question {i}", "gold_chunks": [f"d{i}"],
                "tags": [["a", "b", "c"][i % 3] if i % 7 else "rare"]} for i in range(50)]
    golden = _golden(tmp_path, records)
    reordered = _golden(tmp_path, list(reversed(records)), "reversed.yaml")
    for count in (1, 2, 3, 4, 7):
        placed = shard_of(golden, count)
        assert placed == shard_of(reordered, count)  # the file's order plays no part
        shares = [select_shard(golden, i, count) for i in range(1, count + 1)]
        assert sorted(q.qid for s in shares for q in s) == sorted(q.qid for q in golden)  # each once
        for tag in ("a", "b", "c", "rare"):
            n = sum(1 for q in golden if q.tags[0] == tag)
            sizes = [sum(1 for q in s if q.tags[0] == tag) for s in shares]
            assert set(sizes) <= {n // count, -(-n // count)}, (tag, count, sizes)
        assert max(map(len, shares)) - min(map(len, shares)) <= 1
        assert [q.qid for q in shares[0]] == [q.qid for q in golden if placed[q.qid] == 1]  # the set's order


def test_the_deal_does_not_depend_on_the_hash_seed(tmp_path: Path) -> None:
    golden = _golden(tmp_path, [{"id": f"q-{i}", "question": f"q {i}", "gold_chunks": ["d"], "tags": ["t"]}
                                for i in range(20)])
    script = ("import json, sys; from pytest_ragmetrics.golden import load_golden; "
              "from pytest_ragmetrics.gate.shard import shard_of; "
              "print(json.dumps(shard_of(load_golden(sys.argv[1]), 3), sort_keys=True))")
    seen = set()
    for seed in ("1", "2", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
        out = subprocess.run([sys.executable, "-c", script, str(golden.source)], capture_output=True, text=True,
                             env=env, check=True).stdout
        seen.add(out)
    assert seen == {json.dumps(shard_of(golden, 3), sort_keys=True) + "\n"}


# ---------------------------------------------------------------------- shard runs


@pytest.mark.parametrize("spec, why", [
    ("3/2", "I is 1-based: 1..2"), ("0/4", "I is 1-based: 1..4"), ("1/0", "N must be at least 1"),
    ("a/b", "I and N are whole numbers"), ("2", "I and N are whole numbers"), ("-1/3", "I and N are whole numbers"),
])
def test_a_bad_shard_spec_is_a_usage_error(project: RagProject, spec: str, why: str) -> None:
    result = project.run(f"--rag-shard={spec}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"--rag-shard must be I/N, this machine's shard I of N (1 <= I <= N), got {spec!r}: {why}" in \
        result.stderr.str()
    no_traceback(result)


def test_a_shard_without_an_artifact_is_refused(baselined: RagProject) -> None:
    """Without an artifact no merge can judge the shard's part of the set: a red shard would exit 0 for good."""
    baselined.answer(q_004=["rim-wear"])
    result = baselined.run("--rag-shard=1/1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--rag-shard 1/1 needs --rag-report=PATH" in result.stderr.str()


def test_a_shard_whose_own_queries_were_deselected_fails(baselined: RagProject) -> None:
    """A query of the shard that did not run cannot be run by merge: the shard's baseline gate fails."""
    result = baselined.run("--rag-shard=1/1", "--rag-report=s.json", "-k", "not q-004")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert ids_with(result, "failed") == ["golden.yaml::gate::baseline"]
    assert "partial run: 1 query meant to run did not (q-004" in rag_summary(result)


def test_a_shard_refuses_to_refresh_the_baseline(project: RagProject) -> None:
    result = project.run("--rag-shard=1/2", "--rag-update-baseline", "--rag-report=s.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--rag-update-baseline cannot refresh from shard 1/2" in result.stderr.str()
    assert "ragmetrics merge SHARDS --out run.json --update-baseline" in result.stderr.str()
    assert not project.baseline_path.exists()


def test_a_shard_runs_its_share_and_fails_on_its_own_queries_only(baselined: RagProject) -> None:
    baselined.answer(q_004=DEGRADED["q_004"], q_005=DEGRADED["q_005"])  # the aggregate gate fails on the whole set
    results = _shards(baselined, 3, "--rag-html=shard.html", "--rag-markdown=shard.md")
    ran = [sorted(_read(baselined, f"shard{i}.json")["per_query"]) for i in (1, 2, 3)]
    assert sorted(q for share in ran for q in share) == sorted(QIDS)
    assert [len(share) for share in ran] == [2, 2, 2]
    markdown = (baselined.path / "shard.md").read_text(encoding="utf-8")
    red = sum(1 for share in ran if set(share) & {"q-004", "q-005"})
    assert 0 < red < 3  # red shards and green ones, although the whole set fails recall@10
    assert markdown.count("## Retrieval gate: failed") == red
    assert markdown.count("## Retrieval gate: no query regressed in this shard (gates deferred to "
                          "`ragmetrics merge`)") == 3 - red
    for result, share in zip(results, ran):
        header = [line for line in result.outlines if "ragmetrics: shard" in line]
        assert len(header) == 1 and "the gates (the aggregate included) are judged over every shard by " \
                                   "`ragmetrics merge`" in header[0]
        assert not any("::gate::" in n for n in ids_with(result, "passed") + ids_with(result, "failed"))
        bad = sorted(set(share) & {"q-004", "q-005"})
        assert ids_with(result, "failed") == [f"golden.yaml::{q}" for q in bad]
        assert result.ret == (pytest.ExitCode.TESTS_FAILED if bad else pytest.ExitCode.OK)
        comparison = _read(baselined, f"shard{results.index(result) + 1}.json")["comparison"]
        assert comparison["deferred"] == ["baseline", "coverage", "recall@10", "significant-drops"]
        assert all(g["passed"] for g in comparison["gates"]) and comparison["passed"] is not bool(bad)
        no_traceback(result)
        if not bad:
            assert "No query of this shard regressed or errored. Its gates (baseline, coverage, recall@10, significant-drops)" \
                   in rag_summary(result)


# ------------------------------------------------------------------------- merging


@pytest.mark.parametrize("case", ["passing", "failing", "smoke", "no-baseline", "pooled"])
def test_merged_shards_are_the_whole_run(project: RagProject, capsys: pytest.CaptureFixture[str],
                                         monkeypatch: pytest.MonkeyPatch, case: str, no_ci: None) -> None:
    """3 shards merged give the artifact, verdict, exit code and report of one whole run, times aside, and
    name the shards they merged (_meta.shards)."""
    if case == "pooled":  # unlisted documents are unjudged: a drop they may explain is inconclusive
        project.ini(rag_judgments="pooled")
    if case != "no-baseline":
        project.baseline_once()
    if case == "pooled":
        project.answer(q_002=["chain-lube#1-2", "other-doc", "new-doc"], q_004=["derailleur"])
    if case == "failing":
        project.thresholds({"max_regressed_queries": 1})
        project.answer(**DEGRADED)
    args = ("--rag-subset=smoke",) if case == "smoke" else ()
    # the artifact under the merged one's name, which a pooled verdict names
    whole = project.run("--rag-report=run.json", "--rag-markdown=whole.md", "--rag-html=whole.html", *args)
    (project.path / "run.json").rename(project.path / "whole.json")
    _shards(project, 3, *args)
    code, out, err = _merge(project, capsys, monkeypatch, "shard1.json", "shard2.json", "shard3.json",
                            "--out", "run.json", "--markdown", "merged.md", "--html", "merged.html")
    assert err == ""
    failed = case in ("failing", "no-baseline", "pooled")
    assert code == int(failed) == int(whole.ret != 0)
    merged, reference = _read(project, "run.json"), _read(project, "whole.json")
    assert merged["_meta"].pop("shards") == [{"index": i, "count": 3, "attempt": None, "file": f"shard{i}.json"}
                                             for i in (1, 2, 3)]
    assert merged["_meta"].pop("retried") == []
    for data in (merged, reference):
        data["_meta"]["seal"].pop("_meta")  # the merged _meta names its shards too
    assert _normalised(merged) == _normalised(reference)
    # the earliest shard's time; sealed like any artifact: the schema (and its seal) holds
    assert merged["_meta"]["created"] == min(_read(project, f"shard{i}.json")["_meta"]["created"] for i in (1, 2, 3))
    load_artifact(project.path / "run.json")
    # the report is the whole run's: the same verdict text as its terminal summary
    n, each = (3, 1) if case == "smoke" else (6, 2)
    assert out.startswith(f"Merged 3 shards of {n} queries from golden.yaml: 1/3 shard1.json ({each}), ")
    assert rag_summary(whole).strip() in out
    markdown = (project.path / "merged.md").read_text(encoding="utf-8")
    assert markdown == (project.path / "whole.md").read_text(encoding="utf-8")
    assert markdown.startswith("## Retrieval gate: failed" if failed else "## Retrieval gate: passed")
    html = (project.path / "merged.html").read_text(encoding="utf-8")
    assert html.replace(merged["_meta"]["created"], "TIME") == \
        (project.path / "whole.html").read_text(encoding="utf-8").replace(reference["_meta"]["created"], "TIME")


def test_merge_names_a_missing_or_duplicated_shard(baselined: RagProject, capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    _shards(baselined)
    code, out, err = _merge(baselined, capsys, monkeypatch, "shard1.json", "shard3.json", "--out", "run.json")
    assert code == 2 and out == ""
    assert "shard 2/3 is missing (given: 1/3 shard1.json, 3/3 shard3.json); pass every shard's artifact" in err
    code, _, err = _merge(baselined, capsys, monkeypatch, "shard1.json", "shard2.json", "shard2.json",
                          "shard3.json")
    assert code == 2
    assert "shard2.json, shard.index: is 2: shard 2/3 is given twice (also as shard2.json); pass each shard " \
           "once" in err
    assert not (baselined.path / "run.json").exists()


def test_merge_refuses_shards_of_different_runs(baselined: RagProject, capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    baselined.run("--rag-shard=1/2", "--rag-report=shard1.json")
    baselined.run("--rag-shard=1/3", "--rag-report=other.json")
    code, _, err = _merge(baselined, capsys, monkeypatch, "shard1.json", "other.json")
    assert code == 2
    assert "other.json: is not a shard of the same run as shard1.json: shard.count: 2 in shard1.json, 3 in " \
           "other.json" in err
    # a golden set edited between shards: different golden sets, named with the field
    baselined.edit_query("q-006", question="cleaning a very dirty cassette")
    baselined.answer(q_006=["cassette"])
    baselined.run("--rag-shard=2/2", "--rag-report=shard2.json", "--rag-accept-mismatch")
    code, _, err = _merge(baselined, capsys, monkeypatch, "shard1.json", "shard2.json")
    assert code == 2
    assert "shard2.json: is not a shard of the same run as shard1.json (they ran different golden sets): " \
           "_meta.golden.sha256: " in err


def test_merge_refuses_a_golden_set_changed_since_the_shards(baselined: RagProject,
                                                            capsys: pytest.CaptureFixture[str],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    _shards(baselined, 2)
    baselined.edit_query("q-001", gold_chunks=["tire-repair", "tube-patch"])
    code, _, err = _merge(baselined, capsys, monkeypatch, "shard1.json", "shard2.json")
    assert code == 2
    assert "golden.yaml: is not the golden set the shards ran: its sha256 is " in err
    assert "merge in a checkout of the commit the shards ran" in err


def test_merge_refuses_a_whole_run_or_an_edited_shard(baselined: RagProject, capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    baselined.run("--rag-report=whole.json")
    _shards(baselined, 2)
    code, _, err = _merge(baselined, capsys, monkeypatch, "whole.json", "shard1.json")
    assert code == 2 and "whole.json: shard is missing: not a shard's artifact" in err
    data = _read(baselined, "shard1.json")
    qid = next(iter(data["shard"]["records"]))
    data["shard"]["records"][qid]["metrics"]["recall@10"] = 0.0
    (baselined.path / "shard1.json").write_text(json.dumps(data), encoding="utf-8")
    code, _, err = _merge(baselined, capsys, monkeypatch, "shard1.json", "shard2.json")
    assert code == 2 and f"shard1.json: shard.records.{qid} does not match per_query.{qid} (metrics differ): the " \
        "file was edited" in err
    # the shard section alone changed: the seal says so
    data = _read(baselined, "shard2.json")
    data["shard"]["gold"] = {"from_retriever": "edited"}
    (baselined.path / "shard2.json").write_text(json.dumps(data), encoding="utf-8")
    code, _, err = _merge(baselined, capsys, monkeypatch, "shard2.json", "shard1.json")
    assert code == 2 and "shard2.json: _meta.seal does not match the file: shard changed after the run" in err


@pytest.mark.parametrize("forged", ["metrics", "ranking"])
def test_merge_refuses_a_resealed_record_that_its_per_query_entry_contradicts(
        baselined: RagProject, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        forged: str) -> None:
    """A failing query's record rewritten to pass and the file resealed: merge judges the records,
    so each must say what its per_query entry (held to the aggregate) says."""
    from pytest_ragmetrics.gate.artifact import seal_artifact

    baselined.answer(q_001=["noise-doc"], q_002=["noise-doc"], q_003=["noise-doc"], q_004=["noise-doc"],
                     q_005=["noise-doc"], q_006=["noise-doc"])
    _shards(baselined, 2)
    data = _read(baselined, "shard1.json")
    qid = next(iter(data["shard"]["records"]))
    record = data["shard"]["records"][qid]
    if forged == "metrics":
        record["metrics"] = {m: 1.0 for m in record["metrics"]}
    else:
        record["ranking"] = ["forged-doc"]
    data["_meta"].pop("seal")
    (baselined.path / "shard1.json").write_text(json.dumps(seal_artifact(data)), encoding="utf-8")
    code, out, err = _merge(baselined, capsys, monkeypatch, "shard1.json", "shard2.json", "--out", "run.json")
    assert (code, out) == (2, ""), err
    assert f"shard1.json: shard.records.{qid}" in err
    assert not (baselined.path / "run.json").exists()


def test_merge_refreshes_the_baseline_like_a_whole_run(project: RagProject, capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    whole = project.make_baseline("--rag-report=run.json")
    (project.path / "run.json").rename(project.path / "whole.json")
    reference = project.baseline()
    project.baseline_path.unlink()
    _shards(project)  # no baseline yet: the shards run, and merge writes it
    code, out, err = _merge(project, capsys, monkeypatch, "shard1.json", "shard2.json", "shard3.json",
                            "--out", "run.json", "--update-baseline")
    assert (code, err) == (0, "")
    written = project.baseline()
    for data in (written, reference):
        data["_meta"].pop("created")  # the one line a refresh of the same numbers changes
    assert written == reference
    assert rag_summary(whole).strip() in out  # what changed in the baseline, as the plugin says it
    # the artifact is a refresh run's, naming the baseline it wrote: by its content (its bytes hold its time)
    artifacts = [_normalised(_read(project, name)) for name in ("run.json", "whole.json")]
    for data in artifacts:
        assert data["_meta"]["baseline"].pop("updated") is True
        data["_meta"]["baseline"].pop("sha256"), data["_meta"]["baseline"].pop("created")
        data["_meta"]["seal"].pop("_meta")
    assert [s["index"] for s in artifacts[0]["_meta"].pop("shards")] == [1, 2, 3]  # the merged one names them
    assert artifacts[0]["_meta"].pop("retried") == []
    assert artifacts[0] == artifacts[1]


@pytest.mark.parametrize("case, refusal", [
    ("errored", "1 query errored (q-005); fix the retriever first"),
    ("deselected", "1 golden query did not run (e.g. q-005); update the baseline from a full, unfiltered run"),
])
def test_merge_refuses_to_refresh_as_the_plugin_does(baselined: RagProject, capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch, case: str,
                                                     refusal: str) -> None:
    before = baselined.baseline_path.read_bytes()
    if case == "errored":
        baselined.answer(q_005={"raise": "index shard offline"})
    _shards(baselined, 3, *(("--deselect=golden.yaml::q-005",) if case == "deselected" else ()))
    code, out, _ = _merge(baselined, capsys, monkeypatch, "shard1.json", "shard2.json", "shard3.json",
                          "--update-baseline")
    assert code == 1
    assert f"not writing {baselined.baseline_path}: {refusal}" in out
    assert baselined.baseline_path.read_bytes() == before


def test_merge_refuses_a_baseline_changed_since_the_shards(baselined: RagProject,
                                                          capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    _shards(baselined, 2)
    baselined.answer(q_001=["tire-repair"])
    baselined.make_baseline()  # re-measured after the shards ran: not what they were judged against
    code, out, err = _merge(baselined, capsys, monkeypatch, "shard1.json", "shard2.json")
    assert (code, out) == (2, "")
    assert f"{baselined.baseline_path}: is not the baseline the shards were judged against: its sha256 differs " \
           "from shard1.json's _meta.baseline.sha256" in err


@pytest.mark.slow
def test_a_shard_under_xdist_writes_the_serial_shards_artifact(baselined: RagProject) -> None:
    pytest.importorskip("xdist", reason="pytest-xdist is in the dev extra, which CI installs")
    baselined.answer(**DEGRADED)
    serial = baselined.run("--rag-shard=2/3", "--rag-report=serial.json")
    parallel = baselined.run_subprocess("-n", "2", "--rag-shard=2/3", "--rag-report=parallel.json")
    assert serial.ret == parallel.ret
    assert ids_with(serial, "failed") == ids_with(parallel, "failed")
    assert _normalised(_read(baselined, "parallel.json")) == _normalised(_read(baselined, "serial.json"))


@pytest.mark.parametrize("edit, message", [
    (lambda s: s.update(index=4), "shard1.json: shard.index is 4, above shard.count 3 (I is 1-based: 1..N)"),
    (lambda s: s.update(count=0), "shard1.json: shard.count is 0; expected a whole number >= 1"),
    (lambda s: s["records"].update({"q-999": {"qid": "q-999", "status": "scored"}}),
     "shard1.json: shard.records.q-999 is a query this shard was not dealt (not in shard.queries)"),
    (lambda s: s["records"].pop(next(iter(s["records"]))),
     "has no record in shard.records: the file was edited"),
])
def test_the_shard_section_is_checked_with_the_artifact(baselined: RagProject, capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch, edit: Any,
                                                        message: str) -> None:
    _shards(baselined)
    data = _read(baselined, "shard1.json")
    edit(data["shard"])
    (baselined.path / "shard1.json").write_text(json.dumps(data), encoding="utf-8")
    code, out, err = _merge(baselined, capsys, monkeypatch, "shard1.json", "shard2.json", "shard3.json")
    assert (code, out) == (2, "")
    assert message in err


def test_a_shard_dealt_no_query_passes_and_still_writes_its_artifact(baselined: RagProject,
                                                                     capsys: pytest.CaptureFixture[str],
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """More shards than queries (a matrix sized for the full set running the smoke subset): the empty
    shards pass, and the merge still covers the set."""
    results = [baselined.run(f"--rag-shard={i}/4", f"--rag-report=shard{i}.json", "--rag-subset=smoke")
               for i in range(1, 5)]
    assert [r.ret for r in results] == [0, 0, 0, 0]
    assert [len(_read(baselined, f"shard{i}.json")["shard"]["queries"]) for i in range(1, 5)] == [1, 1, 1, 0]
    code, out, err = _merge(baselined, capsys, monkeypatch, *(f"shard{i}.json" for i in range(1, 5)))
    assert (code, err) == (0, "")
    assert "Merged 4 shards of 3 queries" in out


def test_merge_refuses_to_refresh_from_smoke_shards(baselined: RagProject, capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    before = baselined.baseline_path.read_bytes()
    _shards(baselined, 2, "--rag-subset=smoke")
    code, out, err = _merge(baselined, capsys, monkeypatch, "shard1.json", "shard2.json", "--update-baseline")
    assert (code, out) == (2, "")
    assert "--update-baseline needs the full set: the shards ran the smoke subset" in err
    assert baselined.baseline_path.read_bytes() == before


def test_compare_and_history_refuse_a_shard_as_a_whole_run(baselined: RagProject,
                                                          capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A shard left in a nightly folder holds a third of the set: read as a whole run its means
    and gates would judge a partial set, so the readers of whole runs send it to merge."""
    baselined.run("--rag-shard=1/3", "--rag-report=shard1.json")
    baselined.run("--rag-report=whole.json")
    for argv in (["compare", "whole.json", "shard1.json"], ["history", "whole.json", "shard1.json"]):
        monkeypatch.chdir(baselined.path)
        capsys.readouterr()
        code = main(argv)
        err = capsys.readouterr().err
        assert code == 2, argv
        assert "shard1.json: is shard 1/3 of a sharded run, holding only that shard's queries; merge " \
               "the shards first: `ragmetrics merge SHARD.json... --out run.json`" in err, argv


# ------------------------------------------------------------------- one run only

#: the CI variables a run id is taken from: cleared, so that a test sets the one it means
_CI_VARIABLES = ("GITHUB_RUN_ID", "GITHUB_RUN_ATTEMPT", "CI_PIPELINE_ID", "BUILDKITE_BUILD_ID", "CIRCLE_WORKFLOW_ID",
                 "BUILD_TAG", "BUILDKITE_RETRY_COUNT")

#: appended to the project's conftest: the retriever's process dies at q-004 when asked to
_DIES = r'''
_answer_first = _answer


def _answer(query):
    if os.environ.get("RAG_TEST_DIE") and "derailleur" in query:
        os._exit(9)  # the job killed mid-run: no report is written
    return _answer_first(query)
'''


@pytest.fixture
def no_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _CI_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def test_a_shard_killed_mid_run_leaves_no_older_artifact_to_merge(baselined: RagProject, no_ci: None,
                                                                  capsys: pytest.CaptureFixture[str],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Yesterday's shard artifact at the path of a shard killed today must not merge as today's."""
    _shards(baselined, 2)  # yesterday: both pass
    yesterday = _read(baselined, "shard1.json")
    which = 1 if "q-004" in yesterday["shard"]["queries"] else 2
    baselined.answer(q_002=["noise-doc"], q_003=["noise-doc"], q_005=["noise-doc"], q_006=["noise-doc"])
    baselined.conftest_text += _DIES
    (baselined.path / "conftest.py").write_text(baselined.conftest_text, encoding="utf-8")
    monkeypatch.setenv("RAG_TEST_DIE", "1")
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parents[2]))  # this checkout's plugin
    killed = baselined.run_subprocess(f"--rag-shard={which}/2", f"--rag-report=shard{which}.json")
    assert killed.ret == 9
    monkeypatch.delenv("RAG_TEST_DIE")
    other = 3 - which
    baselined.run(f"--rag-shard={other}/2", f"--rag-report=shard{other}.json")
    assert not (baselined.path / f"shard{which}.json").exists()
    assert _read(baselined, f"shard{which}.json.stale")["shard"]["index"] == which  # kept, under another name
    code, out, err = _merge(baselined, capsys, monkeypatch, "shard1.json", "shard2.json", "--out", "run.json")
    assert (code, out) == (2, "")
    assert f"shard{which}.json" in err
    assert not (baselined.path / "run.json").exists()
    # the note says where the older file went
    result = baselined.run(f"--rag-shard={other}/2", f"--rag-report=shard{other}.json")
    assert f"moved the previous artifact {baselined.path / f'shard{other}.json'} to shard{other}.json.stale" in \
        result.stdout.str()


def test_merge_refuses_shards_of_different_run_ids(baselined: RagProject, no_ci: None,
                                                  capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    baselined.run("--rag-shard=1/2", "--rag-report=shard1.json", "--rag-run-id=nightly-41")
    baselined.run("--rag-shard=2/2", "--rag-report=shard2.json", "--rag-run-id=nightly-42")
    assert _read(baselined, "shard1.json")["_meta"]["run_id"] == "nightly-41"
    code, out, err = _merge(baselined, capsys, monkeypatch, "shard1.json", "shard2.json", "--out", "run.json")
    assert (code, out) == (2, "")
    assert "the shards come from different runs (_meta.run_id: shard1.json: 'nightly-41'; shard2.json: " \
           "'nightly-42')" in err
    assert not (baselined.path / "run.json").exists()
    # the CI's own run variables when no id is given: GitHub's run id, whatever its attempt
    monkeypatch.setenv("GITHUB_RUN_ID", "7001")
    monkeypatch.setenv("GITHUB_RUN_ATTEMPT", "1")
    baselined.run("--rag-shard=1/2", "--rag-report=shard1.json")
    monkeypatch.setenv("GITHUB_RUN_ATTEMPT", "2")  # shard 2 re-run: the same run
    baselined.run("--rag-shard=2/2", "--rag-report=shard2.json")
    assert _read(baselined, "shard2.json")["_meta"]["run_id"] == "github:7001"
    code, out, err = _merge(baselined, capsys, monkeypatch, "shard1.json", "shard2.json", "--out", "run.json")
    assert (code, err) == (0, "")
    assert _read(baselined, "run.json")["_meta"]["run_id"] == "github:7001"
    monkeypatch.setenv("GITHUB_RUN_ID", "7002")  # tomorrow's shard 2 beside today's shard 1
    baselined.run("--rag-shard=2/2", "--rag-report=shard2.json")
    code, _, err = _merge(baselined, capsys, monkeypatch, "shard1.json", "shard2.json")
    assert code == 2 and "shard1.json: 'github:7001'; shard2.json: 'github:7002'" in err
    # a shard without an id beside one with an id is not of the same run either
    monkeypatch.delenv("GITHUB_RUN_ID")
    baselined.run("--rag-shard=2/2", "--rag-report=shard2.json")
    code, _, err = _merge(baselined, capsys, monkeypatch, "shard1.json", "shard2.json")
    assert code == 2 and "shard2.json: none" in err
    result = baselined.run("--rag-shard=2/2", "--rag-report=shard2.json", "--rag-run-id= ")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--rag-run-id was given an empty id" in result.stderr.str()


def test_merge_refuses_shards_without_run_id_that_ran_hours_apart(baselined: RagProject, no_ci: None,
                                                                  capsys: pytest.CaptureFixture[str],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_ragmetrics.gate.artifact import seal_artifact

    _shards(baselined, 2)
    data = _read(baselined, "shard1.json")
    assert "run_id" not in data["_meta"]
    data["_meta"]["created"] = "2026-11-30T02:00:00+00:00"  # yesterday's, left at the path of a killed job
    data["_meta"].pop("seal")
    (baselined.path / "shard1.json").write_text(json.dumps(seal_artifact(data)), encoding="utf-8")
    code, out, err = _merge(baselined, capsys, monkeypatch, "shard1.json", "shard2.json", "--out", "run.json")
    assert (code, out) == (2, "")
    assert "hours apart (shard1.json at 2026-11-30T02:00:00+00:00, shard2.json at " in err
    assert "more than --max-spread 6" in err and "--rag-run-id ID" in err
    code, _, err = _merge(baselined, capsys, monkeypatch, "shard1.json", "shard2.json", "--max-spread", "100000")
    assert (code, err) == (0, "")


def test_merge_refuses_shards_of_different_smoke_rules(baselined: RagProject, no_ci: None,
                                                      capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    baselined.run("--rag-shard=1/2", "--rag-report=shard1.json", "--rag-subset=smoke")
    baselined.ini(rag_smoke="sample:4:7")
    baselined.run("--rag-shard=2/2", "--rag-report=shard2.json", "--rag-subset=smoke")
    assert _read(baselined, "shard1.json")["_meta"]["smoke"]["rule"] == "tag:smoke"
    code, out, err = _merge(baselined, capsys, monkeypatch, "shard1.json", "shard2.json")
    assert (code, out) == (2, "")
    assert "shard2.json: is not a shard of the same run as shard1.json: _meta.smoke.queries: " in err
    assert "_meta.smoke.rule: 'tag:smoke' in shard1.json, 'sample:4:7' in shard2.json" in err


@pytest.mark.parametrize("flag", ["--out", "--markdown", "--html"])
def test_merge_refuses_to_write_over_a_shard(baselined: RagProject, no_ci: None, capsys: pytest.CaptureFixture[str],
                                             monkeypatch: pytest.MonkeyPatch, flag: str) -> None:
    _shards(baselined, 2)
    before = (baselined.path / "shard2.json").read_bytes()
    code, out, err = _merge(baselined, capsys, monkeypatch, "shard1.json", "shard2.json", flag, "./shard2.json")
    assert (code, out) == (2, "")
    assert f"{flag} ./shard2.json is a shard (shard2.json): an output is never written over an input" in err
    assert (baselined.path / "shard2.json").read_bytes() == before
    code, _, err = _merge(baselined, capsys, monkeypatch, "shard1.json", "shard2.json", flag, "golden.yaml")
    assert code == 2 and f"{flag} golden.yaml exists and is a golden set" in err


def test_merge_refresh_writes_the_baseline_last(baselined: RagProject, no_ci: None,
                                                capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """--out cannot be written: nothing is, the baseline least of all."""
    before = baselined.baseline_path.read_bytes()
    baselined.answer(q_002=["chain-lube#1-2", "chain-clean"])
    _shards(baselined, 2)
    (baselined.path / "out").mkdir()
    code, out, err = _merge(baselined, capsys, monkeypatch, "shard1.json", "shard2.json", "--update-baseline",
                            "--out", "out")
    assert (code, out) == (2, "")
    assert "out is a directory" in err
    assert baselined.baseline_path.read_bytes() == before
    code, out, err = _merge(baselined, capsys, monkeypatch, "shard1.json", "shard2.json", "--update-baseline",
                            "--out", "baselines/baseline.json")
    assert code == 2 and "--out baselines/baseline.json exists and is a baseline" in err
    assert baselined.baseline_path.read_bytes() == before
    code, out, err = _merge(baselined, capsys, monkeypatch, "shard1.json", "shard2.json", "--update-baseline",
                            "--out", "run.json")
    assert (code, err) == (0, "")
    import hashlib
    assert _read(baselined, "run.json")["_meta"]["baseline"]["sha256"] == \
        hashlib.sha256(baselined.baseline_path.read_bytes()).hexdigest()


def test_merge_refuses_a_baseline_made_after_shards_that_ran_without_one(project: RagProject, no_ci: None,
                                                                         capsys: pytest.CaptureFixture[str],
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    _shards(project, 2)  # no baseline yet
    project.make_baseline()  # then one is committed before the merge
    before = project.baseline_path.read_bytes()
    for args in ((), ("--update-baseline",)):
        code, out, err = _merge(project, capsys, monkeypatch, "shard1.json", "shard2.json", *args)
        assert (code, out) == (2, ""), args
        assert f"{project.baseline_path}: exists, but the shards ran without a baseline (shard1.json: " \
               "_meta.baseline is null): it changed since the shards ran" in err
        assert project.baseline_path.read_bytes() == before


def test_merge_says_the_shards_compared_despite_a_mismatch(baselined: RagProject, no_ci: None,
                                                          capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    baselined.edit_query("q-006", question="cleaning a very dirty cassette")
    baselined.answer(q_006=["cassette", "chain-clean", "degreaser#1-4"])
    whole = baselined.run("--rag-accept-mismatch")
    assert "Compared despite a different measurement (--rag-accept-mismatch):" in whole.stdout.str()
    _shards(baselined, 2, "--rag-accept-mismatch")
    code, out, err = _merge(baselined, capsys, monkeypatch, "shard1.json", "shard2.json")
    assert err == ""
    assert "Compared despite a different measurement (--rag-accept-mismatch):\n  - judgments or text changed " \
           "for 1 query since the baseline: q-006" in out
    assert out.startswith("Merged 2 shards of 6 queries")


def test_merge_lists_missing_shards_briefly(baselined: RagProject, no_ci: None, capsys: pytest.CaptureFixture[str],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    baselined.run("--rag-shard=1/500", "--rag-report=shard1.json")
    code, _, err = _merge(baselined, capsys, monkeypatch, "shard1.json")
    assert code == 2
    assert "shards 2/500, 3/500, " in err and "… and 489 more are missing" in err
    assert len(err) < 600
    baselined.run("--rag-shard=1/1", "--rag-report=one.json")
    code, out, err = _merge(baselined, capsys, monkeypatch, "one.json")
    assert (code, err) == (0, "") and out.startswith("Merged 1 shard of 6 queries")


def test_a_merged_refresh_that_lowers_needs_a_reason_as_the_plugin_does(
        baselined: RagProject, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    before = baselined.baseline_path.read_bytes()
    baselined.answer(q_004=["rim-wear"])  # q-004 loses its gold: a lowering of recall@10
    _shards(baselined, 3)
    shards = ("shard1.json", "shard2.json", "shard3.json")
    code, out, _ = _merge(baselined, capsys, monkeypatch, *shards, "--update-baseline")
    assert code == 1
    assert "this refresh lowers" in out and "q-004" in out and "--reason" in out
    assert baselined.baseline_path.read_bytes() == before  # nothing written
    code, out, _ = _merge(baselined, capsys, monkeypatch, *shards, "--update-baseline", "--reason",
                          "the derailleur guide was retired")
    assert code == 0, out
    entries = baselined.baseline()["_meta"]["lowerings"]
    assert entries[-1]["reason"] == "the derailleur guide was retired"
    assert any(low.get("qid") == "q-004" for low in entries[-1]["lowered"])
