"""Filters and scope per query, through real pytest sessions and ``ragmetrics`` CLI calls.

A golden record's ``filters`` go to the retriever by keyword (records without them are searched
as ``search(query, k)``, as ever), a retriever that cannot take them stops the run before the
first query, and a record's ``scope`` is checked against every returned document: one outside
it is a leak that fails its query and the ``leak`` gate whatever the thresholds say.

The retriever here ranks four documents of two tenants; ``settings.json`` picks its kind
(keyword filters, positional only, with or without ``search_batch`` filters), whether it drops
the filters (the bug), and the shape of what it returns (ids, chunk ids, mappings with metadata).
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import yaml
from trust_helpers import FAST, assert_usage_error, no_traceback

from pytest_ragmetrics.cli import main

TENANTS = {"acme-refund": "acme", "acme-shipping": "acme", "globex-refund": "globex", "globex-shipping": "globex"}

CONFTEST = r'''
import json
import pathlib

import pytest

HERE = pathlib.Path(__file__).parent
TENANTS = {"acme-refund": "acme", "acme-shipping": "acme", "globex-refund": "globex", "globex-shipping": "globex"}


def _settings():
    return json.loads((HERE / "settings.json").read_text(encoding="utf-8"))


def _log(*call):
    with open(HERE / "calls.log", "a", encoding="utf-8") as f:
        f.write(json.dumps(call) + "\n")


def _rank(query, filters):
    s = _settings()
    if s.get("fail") == query:
        raise RuntimeError("index offline")
    topic = query.split()[0]  # "refund ..." ranks the refund documents first
    ids = sorted(TENANTS, key=lambda d: (topic not in d, d))
    if filters and not s.get("drop_filters"):
        ids = [d for d in ids if TENANTS[d] == filters["tenant"]]
    ids = [d for d in ids if d not in s.get("lose", [])]  # a recall drop
    shape = s.get("shape", "ids")
    if shape == "chunks":
        return [f"{d}#0-1" for d in ids]
    if shape == "meta":
        if s.get("copy_filters") and filters:  # a layer that drops the filters and claims them for every result
            return [{"id": d, "metadata": dict(filters)} for d in ids]
        if s.get("zone"):  # a second field, first in the result's own order; some documents lack the tenant
            return [{"id": d, "metadata": {"zone": "eu", **({} if d in s.get("untagged", []) else
                                                             {"tenant": TENANTS[d]})}} for d in ids]
        return [{"id": d, "metadata": {"tenant": TENANTS[d]}} for d in ids]
    return ids


class Filtering:
    def search(self, query, k, **options):
        _log("search", query, options)
        return _rank(query, options.get("filters"))[:k]


class Positional:
    def search(self, query, k, /):
        _log("search", query, {})
        return _rank(query, None)[:k]


class Batching(Filtering):
    def search_batch(self, queries, k, filters=None):
        _log("batch", queries, filters)
        return [_rank(q, f)[:k] for q, f in zip(queries, filters or [None] * len(queries))]


class BatchingWithoutFilters(Filtering):
    def search_batch(self, queries, k):
        _log("batch", queries, None)
        return [_rank(q, None)[:k] for q in queries]


class WithMetadata(Filtering):
    def doc_metadata(self):
        return {d: {"tenant": t} for d, t in TENANTS.items()}


KINDS = {"filtering": Filtering, "positional": Positional, "batching": Batching,
         "batching-without-filters": BatchingWithoutFilters, "with-metadata": WithMetadata}


def make():
    return KINDS[_settings()["kind"]]()


@pytest.fixture(scope="session")
def rag_retriever():
    return make()
'''

#: Two questions per tenant, each searched and scoped to its tenant, and one with neither.
GOLDEN: list[dict[str, Any]] = [
    {"id": "acme-refund", "question": "refund at acme", "gold_chunks": ["acme-refund"],
     "filters": {"tenant": "acme"}, "scope": {"tenant": "acme"}},
    {"id": "acme-shipping", "question": "shipping at acme", "gold_chunks": ["acme-shipping"],
     "filters": {"tenant": "acme"}, "scope": {"tenant": "acme"}},
    {"id": "globex-refund", "question": "refund at globex", "gold_chunks": ["globex-refund"],
     "filters": {"tenant": "globex"}, "scope": {"tenant": "globex"}},
    {"id": "plain", "question": "shipping anywhere", "gold_chunks": ["acme-shipping"]},
]


class Project:
    def __init__(self, pytester: pytest.Pytester) -> None:
        self.pytester = pytester
        self.path = pytester.path
        (self.path / "conftest.py").write_text(CONFTEST, encoding="utf-8")
        self.golden(GOLDEN)
        self.settings(kind="filtering", shape="meta")

    def golden(self, records: list[dict[str, Any]], name: str = "golden.yaml") -> None:
        (self.path / name).write_text(yaml.safe_dump(records, sort_keys=False), encoding="utf-8")

    def settings(self, **values: Any) -> None:
        (self.path / "settings.json").write_text(json.dumps(values), encoding="utf-8")

    def corpus(self, docs: dict[str, str | None]) -> None:
        lines = [{"doc_id": d, "text": d, **({"tenant": t} if t else {})} for d, t in docs.items()]
        (self.path / "corpus.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")

    def calls(self) -> list[list[Any]]:
        log = self.path / "calls.log"
        return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()] if log.exists() else []

    def run(self, *args: str) -> pytest.RunResult:
        return self.pytester.runpytest("--rag-eval", "--rag-golden", "golden.yaml", "--rag-baseline", "baseline.json",
                                       "-rA", *FAST, *args)


@pytest.fixture
def project(pytester: pytest.Pytester) -> Project:
    return Project(pytester)


def _stopped(result: pytest.RunResult, *needles: str) -> str:
    """A run stopped at its first query with a usage error (exit code 4): the one message, no traceback."""
    out = result.stdout.str() + result.stderr.str()
    no_traceback(out)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, out[-3000:]
    message = next(line for line in result.stdout.lines if "Exit: ragmetrics: " in line)
    for needle in needles:
        assert needle in message, f"{needle!r} not in {message!r}"
    return message


def _outcomes(result: pytest.RunResult) -> dict[str, str]:
    found = {}
    for line in result.stdout.lines:
        for word in ("PASSED", "FAILED", "ERROR", "SKIPPED"):
            if line.startswith(word + " "):
                found[line.split()[1]] = word.lower()
    return found


# ------------------------------------------------------------------------------- filters


def test_filters_reach_search_by_keyword_and_records_without_them_are_searched_as_before(project: Project) -> None:
    result = project.run("--rag-update-baseline")
    assert result.ret == 0, result.stdout.str()[-3000:]
    searched = {call[1]: call[2] for call in project.calls()}
    assert searched == {"refund at acme": {"filters": {"tenant": "acme"}},
                        "shipping at acme": {"filters": {"tenant": "acme"}},
                        "refund at globex": {"filters": {"tenant": "globex"}},
                        "shipping anywhere": {}}  # no filters: search(query, k), no keyword at all


def test_a_search_that_takes_no_filters_is_a_usage_error_before_the_first_query(project: Project) -> None:
    project.settings(kind="positional", shape="meta")
    result = project.run()
    _stopped(result, "takes no filters keyword", "3 golden records carry filters",
             "acme-refund, acme-shipping, globex-refund", "they would be dropped")
    assert project.calls() == []  # nothing was searched with the filters left out


def test_a_set_without_filters_keeps_a_positional_search_working(project: Project) -> None:
    project.settings(kind="positional", shape="meta")
    project.golden([GOLDEN[3]])
    result = project.run("--rag-update-baseline")
    assert result.ret == 0, result.stdout.str()[-3000:]
    assert project.calls() == [["search", "shipping anywhere", {}]]


def test_search_batch_gets_one_filter_per_query(project: Project) -> None:
    project.settings(kind="batching", shape="meta")
    result = project.run("--rag-update-baseline")
    assert result.ret == 0, result.stdout.str()[-3000:]
    assert project.calls() == [["batch", ["refund at acme", "shipping at acme", "refund at globex",
                                          "shipping anywhere"],
                                [{"tenant": "acme"}, {"tenant": "acme"}, {"tenant": "globex"}, None]]]


def test_a_search_batch_without_filters_leaves_the_filtered_queries_to_search(project: Project) -> None:
    project.settings(kind="batching-without-filters", shape="meta")
    result = project.run("--rag-update-baseline")
    assert result.ret == 0, result.stdout.str()[-3000:]
    calls = project.calls()
    assert ["batch", ["shipping anywhere"], None] in calls  # only the unfiltered query goes in a batch
    searched = {c[1]: c[2] for c in calls if c[0] == "search"}
    assert searched == {"refund at acme": {"filters": {"tenant": "acme"}},
                        "shipping at acme": {"filters": {"tenant": "acme"}},
                        "refund at globex": {"filters": {"tenant": "globex"}}}
    baseline = json.loads((project.path / "baseline.json").read_text(encoding="utf-8"))["per_query"]
    assert all(baseline[q]["recall@10"] == 1.0 for q in ("acme-refund", "acme-shipping", "globex-refund", "plain"))


@pytest.mark.parametrize("key, value, shown", [
    ("filters", "acme", "filters must be a mapping of metadata keys to values, such as {tenant: acme}; got str 'acme'"),
    ("filters", ["acme"], "filters must be a mapping of metadata keys to values, such as {tenant: acme}; got list"),
    ("filters", {"tenant": {"$eq": "acme"}}, "filters: tenant is {'$eq': 'acme'}; expected a string, number"),
    ("scope", "acme", "scope must be a mapping of metadata keys to values, such as {tenant: acme}; got str 'acme'")])
def test_filters_or_scope_that_are_not_a_mapping_of_values_are_refused_naming_file_and_record(
        project: Project, key: str, value: Any, shown: str) -> None:
    project.golden([GOLDEN[3], {**GOLDEN[0], key: value}])
    result = project.run()
    assert_usage_error(result, "golden.yaml", "record 2", "id 'acme-refund'", shown)
    assert project.calls() == []


def test_jsonl_golden_sets_carry_filters_and_refuse_bad_ones(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "golden.jsonl"
    good.write_text(json.dumps({"qid": "q1", "query": "refund", "filters": {"tenant": "acme"},
                                "scope": {"tenant": "acme"}, "candidates": [{"doc_id": "acme-refund", "rel": 1}]})
                    + "\n", encoding="utf-8")
    out = tmp_path / "golden.yaml"
    assert main(["export", "--golden", str(good), "--yaml-out", str(out)]) == 0
    written = yaml.safe_load(out.read_text(encoding="utf-8"))
    assert written["judgments"] == "pooled"  # a JSONL set is pooled: the YAML says so
    first = written["queries"][0]
    assert first["filters"] == {"tenant": "acme"} and first["scope"] == {"tenant": "acme"}
    back = tmp_path / "again.jsonl"
    assert main(["export", "--golden", str(out), "--golden-out", str(back)]) == 0
    line = json.loads(back.read_text(encoding="utf-8").splitlines()[1])
    assert line["filters"] == {"tenant": "acme"} and line["scope"] == {"tenant": "acme"}
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"qid": "q1", "query": "refund", "filters": "acme",
                               "candidates": [{"doc_id": "d", "rel": 1}]}) + "\n", encoding="utf-8")
    capsys.readouterr()
    assert main(["export", "--golden", str(bad), "--yaml-out", str(tmp_path / "x.yaml")]) == 2
    err = capsys.readouterr().err
    assert f"{bad}, line 1 (qid 'q1'): filters must be a mapping" in err
    no_traceback(err)


def test_filters_are_in_the_judgment_digest_only_when_present(project: Project) -> None:
    project.golden([GOLDEN[3], {k: v for k, v in GOLDEN[0].items() if k not in ("filters", "scope")}])
    assert project.run("--rag-update-baseline").ret == 0
    baseline = json.loads((project.path / "baseline.json").read_text(encoding="utf-8"))["per_query"]
    from pytest_ragmetrics.golden import load_golden

    unfiltered = load_golden(project.path / "golden.yaml")["acme-refund"]
    import hashlib

    old_rule = hashlib.sha256(json.dumps([unfiltered.text, sorted(unfiltered.judgments.items())],
                                         ensure_ascii=False).encode()).hexdigest()[:16]
    assert baseline["acme-refund"]["_judgments"] == old_rule  # a record without filters: digest as before
    project.golden([GOLDEN[3], {k: v for k, v in GOLDEN[0].items() if k != "scope"}])  # now with filters
    result = project.run()
    assert_usage_error(result, "measured differently", "judgments or text changed for 1 query", "acme-refund")


# --------------------------------------------------------------------------------- scope


def _make_baseline(project: Project, *args: str) -> None:
    result = project.run("--rag-update-baseline", *args)
    assert result.ret == 0, result.stdout.str()[-3000:]
    (project.path / "calls.log").unlink()


def test_a_leak_fails_its_query_and_the_leak_gate_whatever_the_thresholds_say(project: Project) -> None:
    project.settings(kind="filtering", shape="meta")
    _make_baseline(project)
    (project.path / "thresholds.json").write_text(json.dumps({
        "fail_on_regression": False, "recall@10_tolerance": 0.99, "recall@10_query_tolerance": None,
        "max_regressed_queries": 100, "fail_on_significant_drop": False}), encoding="utf-8")
    project.settings(kind="filtering", shape="meta", drop_filters=True)  # the bug: filters are ignored
    result = project.run("--rag-thresholds", "thresholds.json", "--rag-report", "run.json",
                         "--rag-markdown", "summary.md", "--rag-html", "report.html", "--junitxml", "junit.xml")
    out = result.stdout.str()
    no_traceback(out)
    assert result.ret == pytest.ExitCode.TESTS_FAILED, out[-3000:]
    outcomes = _outcomes(result)
    assert outcomes["golden.yaml::acme-refund"] == "failed"
    assert outcomes["golden.yaml::globex-refund"] == "failed"
    assert outcomes["golden.yaml::plain"] == "passed"  # no scope: nothing to leak from
    assert outcomes["golden.yaml::gate::leak"] == "failed"
    failure = out.split("rag query acme-refund", 1)[1].split("\n_", 1)[0]
    assert ("leak: 2 returned documents are outside the scope {tenant: acme}: globex-refund, globex-shipping "
            "(no threshold allows a leak)") in failure
    assert "acme-refund  'refund at acme'  filters {tenant: acme}" in failure
    assert "leaked:   2. globex-refund  metadata {tenant: globex}" in failure
    assert "RETRIEVAL GATE FAILED\n" in out  # not "(report only)": a leak is never report-only
    assert "gate leak: 6 returned documents are outside their query's scope in 3 queries" in out
    artifact = json.loads((project.path / "run.json").read_text(encoding="utf-8"))
    assert artifact["comparison"]["passed"] is False
    assert [leak["qid"] for leak in artifact["comparison"]["leaks"]] == ["acme-refund", "acme-shipping",
                                                                          "globex-refund"]
    assert artifact["per_query"]["acme-refund"]["leaks"][0] == {
        "rank": 2, "id": "globex-refund", "doc": "globex-refund", "metadata": {"tenant": "globex"}}
    assert artifact["per_query"]["acme-refund"]["filters"] == {"tenant": "acme"}
    markdown = (project.path / "summary.md").read_text(encoding="utf-8")
    assert "## Retrieval gate: failed" in markdown and "### Leaks: 6 returned documents" in markdown
    row = next(line for line in markdown.splitlines() if line.startswith("| acme-refund ") and "globex-refund" in line)
    assert [cell.strip() for cell in row.strip("|").split("|")] == [
        "acme-refund", "refund at acme", "{tenant: acme}", "{tenant: acme}", "2", "globex-refund", "{tenant: globex}"]
    cases = {c.get("name"): {p.get("name"): p.get("value") for p in c.iter("property")}
             for c in ET.parse(project.path / "junit.xml").iter("testcase")}
    assert cases["acme-refund"]["verdict"] == "leak"
    assert cases["acme-refund"]["leak"] == "globex-refund {tenant: globex}, globex-shipping {tenant: globex}"
    assert cases["plain"]["verdict"] == "ok"
    html = (project.path / "report.html").read_text(encoding="utf-8")
    assert "<h2>Leaks</h2>" in html
    assert ("<td><code>acme-refund</code></td><td>refund at acme</td><td>{tenant: acme}</td><td>{tenant: acme}</td>"
            '<td class="num">2</td><td><code>globex-refund</code></td><td>{tenant: globex}</td>') in html
    # a leaking run never becomes the baseline
    before = (project.path / "baseline.json").read_bytes()
    result = project.run("--rag-update-baseline")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "returned documents outside their scope (acme-refund, acme-shipping, globex-refund); fix the leak first" \
        in result.stdout.str()
    assert (project.path / "baseline.json").read_bytes() == before


def test_a_leak_fails_a_query_that_is_not_scored_or_has_no_answer_too(project: Project) -> None:
    scoped = {"filters": {"tenant": "acme"}, "scope": {"tenant": "acme"}}
    project.golden([{"id": "unscorable", "question": "refund at acme", "gold_chunks": {"acme-refund": 0}, **scoped},
                    {"id": "no-answer", "question": "shipping at acme", "answerable": False, **scoped}])
    project.settings(kind="filtering", shape="meta", drop_filters=True)
    result = project.run()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()[-3000:]
    outcomes = _outcomes(result)
    assert outcomes["golden.yaml::unscorable"] == "failed"  # not skipped as unscorable: the leak is the verdict
    assert outcomes["golden.yaml::no-answer"] == "failed"
    assert outcomes["golden.yaml::gate::leak"] == "failed"


def test_scope_metadata_comes_from_the_corpus_and_chunk_ids_map_to_their_document(project: Project) -> None:
    project.corpus(TENANTS)
    project.settings(kind="filtering", shape="chunks")
    _make_baseline(project, "--rag-corpus", "corpus.jsonl")
    project.settings(kind="filtering", shape="chunks", drop_filters=True)
    result = project.run("--rag-corpus", "corpus.jsonl")
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, out[-3000:]
    assert ("leaked:   2. globex-refund  metadata {tenant: globex}  (returned as globex-refund#0-1)"
            in out.split("rag query acme-refund", 1)[1])
    assert _outcomes(result)["golden.yaml::gate::leak"] == "failed"
    # with the filters applied the same set passes, leak gate included
    project.settings(kind="filtering", shape="chunks")
    result = project.run("--rag-corpus", "corpus.jsonl")
    assert result.ret == 0, result.stdout.str()[-3000:]
    assert _outcomes(result)["golden.yaml::gate::leak"] == "passed"


def test_a_document_whose_metadata_cannot_be_found_under_a_scope_is_an_error(project: Project) -> None:
    project.corpus({**TENANTS, "acme-shipping": None, "globex-shipping": "globex"})  # acme-shipping: no tenant
    del_line = [d for d in TENANTS if d != "globex-shipping"]
    (project.path / "corpus.jsonl").write_text("".join(
        json.dumps({"doc_id": d, "text": d, "tenant": TENANTS[d]}) + "\n" for d in del_line), encoding="utf-8")
    project.settings(kind="filtering", shape="chunks", drop_filters=True)
    result = project.run("--rag-corpus", "corpus.jsonl", "--rag-report", "run.json")
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, out[-3000:]
    failure = out.split("rag query acme-refund", 1)[1]
    assert ("query 'acme-refund': scope {tenant: acme} cannot be checked: neither the results nor the corpus "
            "(corpus.jsonl) give metadata for 'globex-shipping#0-1'; a document that cannot be checked is never "
            "passed") in failure
    per_query = json.loads((project.path / "run.json").read_text(encoding="utf-8"))["per_query"]
    assert per_query["acme-refund"]["status"] == "error"


def test_a_scope_without_any_metadata_source_is_a_usage_error_naming_file_and_record(project: Project) -> None:
    project.settings(kind="filtering", shape="ids")  # plain ids, and no --rag-corpus
    result = project.run()
    _stopped(result, "golden.yaml, record 'acme-refund': scope {tenant: acme}, but its documents have no "
                     "metadata source", "no corpus is given", "--rag-corpus")
    (project.path / "docs").mkdir()
    (project.path / "docs" / "acme-refund.md").write_text("refund", encoding="utf-8")
    result = project.run("--rag-corpus", "docs")
    _stopped(result, "record 'acme-refund'", "the corpus docs gives its documents no metadata")


def test_a_leaking_artifact_marked_passed_is_refused(project: Project, capsys: pytest.CaptureFixture[str]) -> None:
    project.settings(kind="filtering", shape="meta")
    _make_baseline(project)
    project.settings(kind="filtering", shape="meta", drop_filters=True)
    project.run("--rag-report", "run.json")
    path = project.path / "run.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    data["comparison"]["passed"] = True
    from pytest_ragmetrics.gate.artifact import seal_artifact

    path.write_text(json.dumps(seal_artifact(data)), encoding="utf-8")  # resealed: only the schema can tell
    capsys.readouterr()
    assert main(["compare", str(path), str(path)]) == 2
    err = capsys.readouterr().err
    assert "comparison.passed is true, but acme-refund, acme-shipping, globex-refund returned documents outside " \
           "their scope" in err


def test_compare_fails_a_run_whose_artifact_leaked(project: Project, capsys: pytest.CaptureFixture[str]) -> None:
    project.settings(kind="filtering", shape="meta")
    _make_baseline(project)
    project.run("--rag-report", "good.json")
    project.settings(kind="filtering", shape="meta", drop_filters=True)
    project.run("--rag-report", "leaky.json")
    capsys.readouterr()
    code = main(["compare", str(project.path / "good.json"), str(project.path / "leaky.json"), "--fail-on-regression"])
    out = capsys.readouterr().out
    assert code == 1, out
    assert "gate leak: 6 returned documents are outside their query's scope in 3 queries" in out
    assert "  1. acme-refund  filters {tenant: acme}\n       scope:    {tenant: acme}\n       leaked:   2. " \
           "globex-refund  metadata {tenant: globex}" in out


def test_shards_that_leaked_fail_their_merge_on_the_leak_gate(project: Project,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    project.settings(kind="filtering", shape="meta")
    _make_baseline(project)
    project.settings(kind="filtering", shape="meta", drop_filters=True)
    shards = []
    for i in (1, 2):
        project.run("--rag-shard", f"{i}/2", "--rag-report", f"shard{i}.json")
        shards.append(str(project.path / f"shard{i}.json"))
    capsys.readouterr()
    code = main(["merge", *shards, "--out", str(project.path / "run.json")])
    out = capsys.readouterr().out
    assert code == 1, out
    assert "gate leak: 6 returned documents are outside their query's scope in 3 queries" in out
    merged = json.loads((project.path / "run.json").read_text(encoding="utf-8"))
    assert merged["comparison"]["passed"] is False and len(merged["comparison"]["leaks"]) == 3


# ---------------------------------------------------------------------------------- pool


def test_harvest_keeps_a_failed_questions_filters(project: Project, capsys: pytest.CaptureFixture[str]) -> None:
    _make_baseline(project)
    project.settings(kind="filtering", shape="meta", fail="refund at acme")
    assert project.run("--rag-report", "night.json").ret == pytest.ExitCode.TESTS_FAILED
    capsys.readouterr()
    code = main(["harvest", str(project.path / "night.json"), "-o", str(project.path / "harvested.jsonl"),
                 "--golden", str(project.path / "golden.yaml"), "--seed", "1"])
    assert code == 0, capsys.readouterr().err
    lines = [json.loads(line) for line in (project.path / "harvested.jsonl").read_text(encoding="utf-8").splitlines()]
    harvested = {line["qid"]: line for line in lines if "qid" in line}
    assert harvested["acme-refund"]["filters"] == {"tenant": "acme"}  # the next pool searches it as the gate did



def test_pool_replays_each_records_filters_and_writes_them(project: Project,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    root = project.path
    (root / "tenant_search.py").write_text(CONFTEST, encoding="utf-8")  # the same retriever, as an app module
    sys.path.insert(0, str(root))
    try:
        code = main(["pool", "--queries", str(root / "golden.yaml"), "--retriever", "tenant_search:make",
                     "--out", str(root / "pool.jsonl"), "--rootdir", str(root), "--depth", "4", "--seed", "1"])
        assert code == 0, capsys.readouterr().err
        searched = {c[1]: c[2] for c in project.calls()}
        assert searched["refund at acme"] == {"filters": {"tenant": "acme"}}
        assert searched["shipping anywhere"] == {}
        lines = [json.loads(line) for line in (root / "pool.jsonl").read_text(encoding="utf-8").splitlines()]
        by_qid = {line["qid"]: line for line in lines if "qid" in line}
        assert by_qid["acme-refund"]["filters"] == {"tenant": "acme"}
        assert {c["doc_id"] for c in by_qid["acme-refund"]["candidates"]} == {"acme-refund", "acme-shipping"}
        assert "filters" not in by_qid["plain"]
        project.settings(kind="positional", shape="meta")
        capsys.readouterr()
        code = main(["pool", "--queries", str(root / "golden.yaml"), "--retriever", "tenant_search:make",
                     "--out", str(root / "pool2.jsonl"), "--rootdir", str(root)])
        assert code == 2
        assert "takes no filters keyword, but 3 golden records carry filters" in capsys.readouterr().err
    finally:
        sys.path.remove(str(root))
        sys.modules.pop("tenant_search", None)


def test_pool_gives_each_search_its_own_copy_of_the_filters(project: Project,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """A retriever that edits the filters it is given must not change what the candidates file
    records for the question (pool shared the record's own list with the retriever)."""
    root = project.path
    (root / "golden.yaml").write_text("- {id: q1, question: refund, gold_chunks: [acme-refund],\n"
                                      "   filters: {tenant: [acme]}}\n", encoding="utf-8")
    (root / "editing_search.py").write_text(
        "class Editing:\n"
        "    def search(self, query, k, filters=None):\n"
        "        if filters:\n"
        "            filters['tenant'].append('globex')\n"
        "        return ['acme-refund', 'globex-refund'][:k]\n", encoding="utf-8")
    sys.path.insert(0, str(root))
    try:
        code = main(["pool", "--queries", str(root / "golden.yaml"), "--retriever", "editing_search:Editing",
                     "--out", str(root / "pool.jsonl"), "--rootdir", str(root), "--seed", "1"])
        assert code == 0, capsys.readouterr().err
        lines = [json.loads(line) for line in (root / "pool.jsonl").read_text(encoding="utf-8").splitlines()]
        assert [line["filters"] for line in lines if line.get("qid") == "q1"] == [{"tenant": ["acme"]}]
    finally:
        sys.path.remove(str(root))
        sys.modules.pop("editing_search", None)


# ------------------------------------------------------------------ scope through the labelling path


def test_a_relevant_gold_document_outside_its_records_scope_stops_the_run_and_export(
        project: Project, capsys: pytest.CaptureFixture[str]) -> None:
    project.corpus(TENANTS)
    wrong = [dict(GOLDEN[0], gold_chunks={"acme-refund": 2, "globex-refund": 2, "globex-shipping": 0}), *GOLDEN[1:]]
    project.golden(wrong)
    result = project.run("--rag-corpus", "corpus.jsonl", "--rag-update-baseline")
    out = result.stdout.str() + result.stderr.str()
    no_traceback(out)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, out[-3000:]
    message = next(line for line in out.splitlines() if "ragmetrics: golden.yaml" in line)
    for needle in ("record 'acme-refund'", "gold document 'globex-refund' (grade 2)",
                   "metadata {tenant: globex} in corpus.jsonl (tenant is globex)",
                   "outside the record's scope {tenant: acme}"):
        assert needle in message, message
    assert "globex-shipping" not in message  # graded 0: a leak is known not relevant, so that label is right
    assert not (project.path / "baseline.json").exists()
    capsys.readouterr()
    out = project.path / "out.yaml"
    code = main(["export", "--golden", str(project.path / "golden.yaml"), "--corpus",
                 str(project.path / "corpus.jsonl"), "--yaml-out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and "record 'acme-refund': gold document 'globex-refund'" in err and not out.exists()
    no_traceback(err)


def _pooled(project: Project, records: list[dict[str, Any]]) -> None:
    (project.path / "golden.yaml").write_text(yaml.safe_dump({"judgments": "pooled", "queries": records},
                                                             sort_keys=False), encoding="utf-8")


def test_a_leaked_document_is_judged_not_relevant_in_a_pooled_set_never_unjudged(
        project: Project, capsys: pytest.CaptureFixture[str]) -> None:
    _pooled(project, [GOLDEN[0]])
    _make_baseline(project)  # acme-refund, acme-shipping
    project.settings(kind="filtering", shape="meta", drop_filters=True, lose=["acme-refund"])  # leak + recall drop
    result = project.run("--rag-report", "run.json")
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, out[-3000:]
    comparison = json.loads((project.path / "run.json").read_text(encoding="utf-8"))["comparison"]
    assert [r["qid"] for r in comparison["regressed"]] == ["acme-refund"]  # not inconclusive: the drop is real
    assert not comparison.get("inconclusive")
    assert not any("globex" in doc for _, doc in comparison.get("to_judge") or [])
    entry = json.loads((project.path / "run.json").read_text(encoding="utf-8"))["per_query"]["acme-refund"]
    # globex-refund and globex-shipping count judged (0); acme-shipping is unjudged
    assert entry["unjudged"]["judged@10"] == pytest.approx(2 / 3)
    capsys.readouterr()
    code = main(["pool", "--run", str(project.path / "run.json"), "--unjudged-only", "--all",
                 "--golden", str(project.path / "golden.yaml"), "-o", str(project.path / "unjudged.jsonl")])
    assert code == 0, capsys.readouterr().err
    lines = [json.loads(line) for line in (project.path / "unjudged.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [c["doc_id"] for line in lines if "qid" in line for c in line["candidates"]] == ["acme-shipping"]
    assert lines[1]["scope"] == {"tenant": "acme"}


def test_harvest_takes_leaking_questions_keeps_their_scope_and_leaves_leaked_documents_out(
        project: Project, capsys: pytest.CaptureFixture[str]) -> None:
    _make_baseline(project)
    project.settings(kind="filtering", shape="meta", drop_filters=True)  # recall unchanged: only leaks
    assert project.run("--rag-report", "night.json").ret == pytest.ExitCode.TESTS_FAILED
    capsys.readouterr()
    out = project.path / "harvested.jsonl"
    code = main(["harvest", str(project.path / "night.json"), "-o", str(out), "--seed", "1"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    harvested = {line["qid"]: line for line in lines if "qid" in line}
    assert sorted(harvested) == ["acme-refund", "acme-shipping", "globex-refund"]
    acme = harvested["acme-refund"]
    assert acme["harvest"]["verdicts"] == ["leak"]
    assert acme["scope"] == {"tenant": "acme"} and acme["filters"] == {"tenant": "acme"}
    assert sorted(c["doc_id"] for c in acme["candidates"]) == ["acme-refund", "acme-shipping"]
    assert "3 leak" in printed
    assert "6 returned documents outside their question's scope left out of the candidates" in printed


def test_a_leak_prints_metadata_keys_sorted(project: Project) -> None:
    project.settings(kind="filtering", shape="meta", zone=True)
    _make_baseline(project)
    project.settings(kind="filtering", shape="meta", zone=True, drop_filters=True, untagged=["globex-shipping"])
    result = project.run()
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, out[-3000:]
    failure = out.split("rag query acme-refund", 1)[1].split("\n_", 1)[0]
    assert "leaked:   2. globex-refund  metadata {tenant: globex, zone: eu}: tenant is globex\n" in failure
    assert "globex-shipping  metadata {zone: eu}: no 'tenant' in its metadata" in failure


# ------------------------------------------------------------------ edges an attacker tried

SCRIPTED = r'''
import json
import pathlib

import pytest

HERE = pathlib.Path(__file__).parent


class Scripted:
    """Returns settings.json's "ret" list whatever the query; "mutate" appends to filters[key]."""

    def search(self, query, k, filters=None):
        s = json.loads((HERE / "settings.json").read_text(encoding="utf-8"))
        if filters and s.get("mutate"):
            filters[s["mutate"]].append("globex")
        return s["ret"][:k]


@pytest.fixture(scope="session")
def rag_retriever():
    return Scripted()
'''


def _scripted(project: Project, golden_yaml: str, corpus: list[dict[str, Any]], **settings: Any) -> None:
    (project.path / "conftest.py").write_text(SCRIPTED, encoding="utf-8")
    (project.path / "golden.yaml").write_text(golden_yaml, encoding="utf-8")
    (project.path / "corpus.jsonl").write_text("".join(json.dumps(c) + "\n" for c in corpus), encoding="utf-8")
    project.settings(**settings)


def test_a_corpus_id_that_holds_the_separator_is_checked_as_itself(project: Project) -> None:
    """With ``--rag-id-separator _`` both ``faq_globex`` and ``faq_acme`` map to the document ``faq``:
    looked up by that, the last line (acme) vouched for the globex document and its leak passed."""
    _scripted(project, "- {id: q1, question: refund, gold_chunks: [acmerefund], scope: {tenant: acme}}\n",
              [{"doc_id": "faq_globex", "text": "x", "tenant": "globex"},
               {"doc_id": "faq_acme", "text": "x", "tenant": "acme"},
               {"doc_id": "acmerefund", "text": "x", "tenant": "acme"}],
              ret=["acmerefund", "faq_globex"])
    result = project.run("--rag-corpus", "corpus.jsonl", "--rag-id-separator", "_")
    out = result.stdout.str()
    assert result.ret == 1, out[-3000:]
    assert _outcomes(result).get("golden.yaml::gate::leak") == "failed", out[-3000:]
    assert "2. faq_globex  metadata {tenant: globex}: tenant is globex" in out


def test_a_retriever_that_edits_its_filters_cannot_widen_the_scope(project: Project) -> None:
    """A YAML anchor makes filters and scope one list; a retriever appending to its filters widened
    the scope to let its own leak through."""
    _scripted(project, "- {id: q1, question: refund, gold_chunks: [acme-refund],\n"
                       "   filters: {tenant: &t [acme]}, scope: {tenant: *t}}\n",
              [{"doc_id": "acme-refund", "text": "x", "tenant": "acme"},
               {"doc_id": "globex-refund", "text": "x", "tenant": "globex"}],
              ret=["acme-refund", "globex-refund"], mutate="tenant")
    result = project.run("--rag-corpus", "corpus.jsonl", "--rag-report", "run.json")
    out = result.stdout.str()
    assert result.ret == 1, out[-3000:]
    assert _outcomes(result).get("golden.yaml::gate::leak") == "failed", out[-3000:]
    entry = json.loads((project.path / "run.json").read_text(encoding="utf-8"))["per_query"]["q1"]
    assert entry["scope"] == {"tenant": ["acme"]} and entry["filters"] == {"tenant": ["acme"]}


def test_leaks_found_beside_an_unchecked_document_still_fail_the_leak_gate(project: Project) -> None:
    _scripted(project, "- {id: q1, question: refund, gold_chunks: [acme-refund], scope: {tenant: acme}}\n",
              [{"doc_id": "acme-refund", "text": "x", "tenant": "acme"},
               {"doc_id": "globex-secret", "text": "x", "tenant": "globex"}],
              ret=["acme-refund", "globex-secret", "mystery"])
    result = project.run("--rag-corpus", "corpus.jsonl")
    out = result.stdout.str()
    outcomes = _outcomes(result)
    assert outcomes.get("golden.yaml::gate::leak") == "failed", out[-3000:]
    assert outcomes.get("golden.yaml::q1") in ("failed", "error"), out[-3000:]
    assert "cannot be checked" in out and "1 other returned document is outside it: globex-secret" in out


def test_a_value_that_reads_like_the_scope_says_how_it_differs(project: Project) -> None:
    _scripted(project, "- {id: q1, question: refund, gold_chunks: [a], scope: {tier: 1}}\n",
              [{"doc_id": "a", "text": "x", "tier": 1}, {"doc_id": "b", "text": "x", "tier": "1"},
               {"doc_id": "c", "text": "x"}],
              ret=["a", "b", "c"])
    out = project.run("--rag-corpus", "corpus.jsonl").stdout.str()
    assert "2. b  metadata {tier: 1}: tier is '1' (str), the scope wants 1 (int)" in out, out[-3000:]
    assert "3. c  metadata {}: no 'tier' in its metadata" in out


def test_an_empty_scope_is_refused_since_it_checks_nothing(project: Project) -> None:
    project.golden([GOLDEN[3], {**GOLDEN[0], "scope": {}}])
    assert_usage_error(project.run(), "golden.yaml", "record 2", "scope is empty, so it would check nothing")


def test_a_corpus_that_cannot_be_read_is_named_with_its_error_under_a_scope(project: Project) -> None:
    _scripted(project, "- {id: q1, question: refund, gold_chunks: [a], scope: {tenant: acme}}\n",
              [{"doc_id": "a", "text": "x", "tenant": "acme"}, {"doc_id": "a", "text": "y", "tenant": "acme"}],
              ret=["a"])
    result = project.run("--rag-corpus", "corpus.jsonl")
    out = result.stdout.str() + result.stderr.str()
    assert "which could not be read" in out and "duplicate" in out.lower(), out[-3000:]
    assert "gives its documents no metadata" not in out


# -------------------------------------------------------------- what scope was checked against


def test_a_layer_that_copies_the_filters_into_its_results_is_named_as_checked_only_by_its_own_claims(
        project: Project) -> None:
    """The results claim the scope they were asked for; without an independent source the leak cannot
    be seen, so the run says what it checked against, and require_independent_scope fails it."""
    _make_baseline(project)
    project.settings(kind="filtering", shape="meta", drop_filters=True, copy_filters=True)
    result = project.run()
    out = result.stdout.str()
    assert "scope: checked against the retriever's doc_metadata() when it has one" in out
    assert "Scope checked against only the metadata the retriever returned with each result: not an independent " \
           "source" in out
    (project.path / "thresholds.json").write_text(json.dumps({"require_independent_scope": True}), encoding="utf-8")
    result = project.run("--rag-thresholds", "thresholds.json")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()[-3000:]
    assert _outcomes(result)["golden.yaml::gate::leak"] == "failed"
    assert "gate leak: scope was checked only against the metadata the retriever returned" in result.stdout.str()


@pytest.mark.parametrize("source", ["doc_metadata", "corpus"])
def test_an_independent_source_catches_the_layer_that_copies_the_filters(project: Project, source: str) -> None:
    kind = "with-metadata" if source == "doc_metadata" else "filtering"
    project.settings(kind=kind, shape="meta")
    _make_baseline(project)
    project.settings(kind=kind, shape="meta", drop_filters=True, copy_filters=True)
    (project.path / "thresholds.json").write_text(json.dumps({"require_independent_scope": True}), encoding="utf-8")
    args = ["--rag-thresholds", "thresholds.json", "--rag-report", "run.json"]
    if source == "corpus":
        project.corpus(TENANTS)
        args.append("--rag-corpus=corpus.jsonl")
    result = project.run(*args)
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, out[-3000:]
    assert _outcomes(result)["golden.yaml::gate::leak"] == "failed"
    assert "gate leak: " in out and "outside their query's scope" in out
    assert "scope was checked only against" not in out
    expected = "the retriever's doc_metadata() (4 documents)" if source == "doc_metadata" else "the corpus corpus.jsonl"
    assert f"Scope checked against {expected}" in out
    artifact = json.loads((project.path / "run.json").read_text(encoding="utf-8"))
    assert artifact["_meta"]["scope_check"]["source"] == source
