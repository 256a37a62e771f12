"""Candidate pooling (pytest_ragmetrics.tools.pool, `ragmetrics pool`): candidates for annotators.

Exact checks run over a scripted retriever (fixed rankings per mode, chunk ids
included, so dedup within and across modes is known by hand). The command runs
over real sources: retriever modules written to ``tmp_path`` and imported as the
command imports them, TREC run files, and a run artifact written by a pytester run
of the plugin; once in a subprocess that must not import the reference stack.
The reference stack itself is pooled over the 30-document car corpus (BM25 alone
in the quick tests; every mode in the slow one).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Iterator

import pytest

from pytest_ragmetrics import InputError, RagMetricsError, load_golden
from pytest_ragmetrics.cli import main
from pytest_ragmetrics.tools.candidates import KIND, VERSION, display_order, pool_identity, read_candidates
from pytest_ragmetrics.tools.pool import PoolQuery, fill_texts, pool, pool_sources, pool_summary, read_queries, write_pool
from pytest_ragmetrics.tools.sources import Entry, Ranked, Source

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

REPO = Path(__file__).resolve().parents[1]
CAR_CORPUS = REPO / "tests" / "stack" / "data" / "car_corpus.jsonl"


class Hit:
    def __init__(self, cid: str) -> None:
        self.id = cid
        self.doc_id = cid.partition("#")[0]
        self.text = f"text of {cid}"


RANKINGS = {
    "bm25": {"q1": ["a#1-2", "a#2-2", "b#1-1", "c#1-1", "d#1-1"], "q2": ["x#1-1"]},
    "vector": {"q1": ["c#1-1", "e#2-3", "a#2-2", "f#1-1"], "q2": ["y#1-1", "x#1-1"]},
    "hybrid": {"q1": ["a#2-2", "c#1-1", "e#1-3", "b#1-1"], "q2": ["x#1-1", "y#1-1"]},
}


class Scripted:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def search_batch(self, queries: list[str], **kw: Any) -> list[list[Hit]]:
        self.calls.append(kw)
        return [[Hit(c) for c in RANKINGS[kw["mode"]][q]] for q in queries]


QUERIES = [PoolQuery("q1", "q1", {"b": 2, "z": 1, "f": 0}, {"b": "answers it"}, ("hard",)), PoolQuery("q2", "q2")]


def table_rows(summary: str) -> list[list[str]]:
    """The cells of the summary's per-source table, header and rule left out."""
    lines = [line for line in summary.splitlines() if line.startswith("|")][2:]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]


def test_union_dedup_found_by_and_ranks() -> None:
    r = Scripted()
    (p1, p2) = pool(QUERIES, r, ["bm25", "vector", "hybrid"], depth=3)
    assert [c["mode"] for c in r.calls] == ["bm25", "vector", "hybrid"]
    assert all(c["top_k"] == 3 and c["unique_docs"] is True for c in r.calls)
    by_doc = {c.doc_id: c for c in p1.candidates}
    # bm25 top 3 documents: a (two chunks -> one document), b, c; vector: c, e, a; hybrid: a, c, e
    assert by_doc["a"].found_by == ["bm25", "vector", "hybrid"]
    assert by_doc["a"].ranks == {"bm25": 1, "vector": 3, "hybrid": 1}
    assert by_doc["a"].chunk == "a#1-2"  # the chunk of the best rank (bm25's, first mode on a tie)
    assert by_doc["b"].ranks == {"bm25": 2}  # hybrid's b is 4th: beyond depth
    assert by_doc["c"].ranks == {"bm25": 3, "vector": 1, "hybrid": 2}
    assert by_doc["e"].ranks == {"vector": 2, "hybrid": 3} and by_doc["e"].chunk == "e#2-3"
    assert "d" not in by_doc  # bm25's 4th document
    # pooled: best rank first, then more modes; then judged documents no mode found
    assert [c.doc_id for c in p1.candidates] == ["a", "c", "e", "b", "z", "f"]
    assert [c.doc_id for c in p1.candidates if not c.found_by] == ["z", "f"]
    assert len({c.doc_id for c in p1.candidates}) == len(p1.candidates)
    assert p1.tags == ("hard",)
    assert [(c.doc_id, c.found_by, c.ranks) for c in p2.candidates] == [
        ("x", ["bm25", "vector", "hybrid"], {"bm25": 1, "vector": 2, "hybrid": 1}),
        ("y", ["vector", "hybrid"], {"vector": 1, "hybrid": 2}),
    ]


def test_existing_judgments_are_carried_over_and_the_rest_left_null() -> None:
    (p1, p2) = pool(QUERIES, Scripted(), ["bm25", "vector", "hybrid"], depth=3)
    rel = {c.doc_id: c.rel for c in p1.candidates}
    assert rel == {"a": None, "c": None, "b": 2, "e": None, "z": 1, "f": 0}
    assert {c.doc_id: c.note for c in p1.candidates}["b"] == "answers it"
    assert all(c.rel is None and c.note == "" for c in p2.candidates)
    summary = pool_summary([p1, p2], ["bm25", "vector", "hybrid"], 3)
    assert "2 questions, 3 sources, top 3 documents each: 6 candidates (3.0 a question, 2–4)" in summary
    assert "3 judgments carried over" in summary
    assert "1 relevant judged documents were found by no source at depth 3" in summary and "'z'" in summary
    # per source: the candidates it ranked, those only it found, and of those the judged relevant (b, grade 2)
    assert table_rows(summary) == [["bm25", "stack", "4", "1", "1"], ["vector", "stack", "5", "0", "0"],
                                   ["hybrid", "stack", "5", "0", "0"]]
    assert "no text" in summary  # z and f, judged but found by no mode, have none


def test_pool_sources_provenance_by_hand() -> None:
    """Three kinds of source; found_by, ranks, the chunk shown and the order, worked out by hand."""
    keyword = Ranked(Source("keyword", "retriever", "app:keyword"), {
        "q1": [Entry("p#1", "p"), Entry("r#1", "r")],
        "q2": [Entry("t#1", "t"), Entry("u#1", "u")],
    })
    dense = Ranked(Source("dense", "retriever", "app:dense"), {
        "q1": [Entry("c", "c", "text of c"), Entry("d", "d", "text of d")],
        "q2": [Entry("u#2", "u", "second chunk of u"), Entry("l#3", "l", "third chunk of l")],
    })
    run = Ranked(Source("bm25", "run", "bm25.trec"), {
        "q1": [Entry("r", "r"), Entry("f", "f")],
        "q2": [Entry("l", "l"), Entry("k", "k")],
    })
    queries = [PoolQuery("q1", "one", {"p": 2, "d": 0, "f": 1, "gone": 1}), PoolQuery("q2", "two", {"t": 1})]
    q1, q2 = pool_sources(queries, [keyword, dense, run], depth=2)
    assert [(c.doc_id, c.found_by, c.ranks, c.chunk, c.rel) for c in q1.candidates] == [
        ("r", ["keyword", "bm25"], {"keyword": 2, "bm25": 1}, "r", None),  # rank 1, two sources
        ("p", ["keyword"], {"keyword": 1}, "p#1", 2),
        ("c", ["dense"], {"dense": 1}, "c", None),
        ("d", ["dense"], {"dense": 2}, "d", 0),
        ("f", ["bm25"], {"bm25": 2}, "f", 1),
        ("gone", [], {}, None, 1),  # judged, found by no source: kept last
    ]
    # u: keyword #2 without text, dense #1 with; l: bm25 #1 without text, dense #2 with: the text is shown
    assert [(c.doc_id, c.found_by, c.ranks, c.chunk, c.text) for c in q2.candidates] == [
        ("u", ["keyword", "dense"], {"keyword": 2, "dense": 1}, "u#2", "second chunk of u"),
        ("l", ["dense", "bm25"], {"dense": 2, "bm25": 1}, "l#3", "third chunk of l"),
        ("t", ["keyword"], {"keyword": 1}, "t#1", None),
        ("k", ["bm25"], {"bm25": 2}, "k", None),
    ]
    summary = pool_summary([q1, q2], [keyword.source, dense.source, run.source], 2)
    assert table_rows(summary) == [["keyword", "retriever", "4", "2", "2"], ["dense", "retriever", "4", "2", "0"],
                                   ["bm25", "run", "4", "2", "1"]]
    assert "9 candidates (4.5 a question, 4–5) from 12 ranked documents" in summary
    assert "6 candidates have no text; pass --corpus to annotate them." in summary
    # the corpus gives the document's text to all but the stack's chunks; what it lacks keeps its text
    absent = fill_texts([q1, q2], [keyword.source, dense.source, run.source],
                        {d: f"doc {d}" for d in ["p", "r", "c", "d", "f", "gone", "t", "k", "l"]})
    assert absent == [("q2", "u")]
    assert {c.doc_id: c.text for c in q2.candidates} == {"u": "second chunk of u", "l": "doc l", "t": "doc t",
                                                          "k": "doc k"}
    with pytest.raises(RagMetricsError, match="two sources are named 'keyword'"):
        pool_sources(queries, [keyword, keyword], depth=2)


def test_the_stack_keeps_its_chunk_text_when_a_corpus_gives_texts() -> None:
    (p1, _) = pool(QUERIES, Scripted(), ["bm25"], depth=2)
    fill_texts([p1], [Source("bm25", "stack", "mode=bm25")], {"a": "all of a", "b": "all of b", "z": "all of z"})
    assert {c.doc_id: c.text for c in p1.candidates} == {"a": "text of a#1-2", "b": "text of b#1-1",
                                                         "z": "all of z", "f": None}


def test_pool_file_round_trip_is_refused_until_annotated(tmp_path: Path) -> None:
    pooled = pool(QUERIES, Scripted(), ["bm25", "vector"], depth=2)
    sources = [Source("bm25", "stack", "mode=bm25"), Source("vector", "stack", "mode=vector")]
    out = write_pool(pooled, tmp_path / "pool" / "candidates.jsonl", sources=sources, seed=11, depth=2,
                     created="2025-01-01T00:00:00+00:00")
    meta, *records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert list(meta) == ["_meta"]
    assert list(meta["_meta"]) == ["kind", "version", "pool_id", "seed", "depth", "sources", "created"]
    assert (meta["_meta"]["kind"], meta["_meta"]["version"]) == (KIND, VERSION)
    assert (meta["_meta"]["seed"], meta["_meta"]["depth"]) == (11, 2)
    assert meta["_meta"]["sources"] == [{"name": "bm25", "kind": "stack", "spec": "mode=bm25"},
                                        {"name": "vector", "kind": "stack", "spec": "mode=vector"}]
    assert [r["qid"] for r in records] == ["q1", "q2"]
    assert list(records[0]) == ["qid", "query", "tags", "order", "candidates"]
    first = records[0]["candidates"][0]
    assert list(first) == ["doc_id", "chunk", "text", "rel", "note", "found_by", "ranks"]
    assert first == {"doc_id": "a", "chunk": "a#1-2", "text": "text of a#1-2", "rel": None, "note": "",
                     "found_by": ["bm25"], "ranks": {"bm25": 1}}
    docs = ["a", "c", "b", "e", "z", "f"]
    assert [c["doc_id"] for c in records[0]["candidates"]] == docs
    assert records[0]["order"] == display_order("q1", docs, 11)
    assert records[0]["tags"] == ["hard"] and "tags" not in records[1]
    # the contract's reader takes it as written
    candidates = read_candidates(out)
    assert candidates.meta == meta["_meta"] and candidates.question("q1").order == records[0]["order"]
    assert candidates.pool_id == meta["_meta"]["pool_id"] == pool_identity([("q1", docs), ("q2", ["x", "y"])])
    assert candidates.question("q1").candidate("b").note == "answers it"
    # an unannotated pool is not a golden set yet
    with pytest.raises(InputError, match=r"line 2 \(qid 'q1'\).*has no rel: annotate it"):
        load_golden(out)
    # re-pooling an unannotated file (its _meta line skipped) keeps what is judged
    again = {q.qid: q for q in read_queries(out)}
    assert again["q1"].judgments == {"b": 2, "z": 1, "f": 0} and again["q1"].notes == {"b": "answers it"}
    assert again["q1"].tags == ("hard",) and again["q2"].judgments == {}
    # once every rel is filled in, it loads
    for r in records:
        for c in r["candidates"]:
            if c["rel"] is None:
                c["rel"] = 1 if c["doc_id"] in ("a", "y") else 0
    done = tmp_path / "annotated.jsonl"
    done.write_text("".join(json.dumps(r) + "\n" for r in [meta, *records]), encoding="utf-8")
    golden = load_golden(done)
    assert golden["q1"].judgments["a"] == 1 and golden["q1"].judgments["b"] == 2
    assert golden["q2"].judgments == {"x": 0, "y": 1} and golden["q1"].tags == ("hard",)


def test_an_existing_file_is_not_overwritten_without_force(tmp_path: Path) -> None:
    out = tmp_path / "candidates.jsonl"
    out.write_text("annotator's work\n", encoding="utf-8")
    pooled = pool(QUERIES, Scripted(), ["bm25"], depth=1)
    kw: dict[str, Any] = {"sources": [Source("bm25", "stack", "mode=bm25")], "seed": 1, "depth": 1}
    with pytest.raises(RagMetricsError, match="already exists; pass --force"):
        write_pool(pooled, out, **kw)
    assert out.read_text(encoding="utf-8") == "annotator's work\n"
    write_pool(pooled, out, force=True, **kw)
    assert json.loads(out.read_text(encoding="utf-8").splitlines()[1])["qid"] == "q1"
    assert [p.name for p in tmp_path.iterdir()] == ["candidates.jsonl"]  # no temp file left behind
    with pytest.raises(RagMetricsError, match="seed must be an integer >= 0"):
        write_pool(pooled, out, force=True, **{**kw, "seed": -1})


def test_pool_validates_depth_and_modes() -> None:
    with pytest.raises(RagMetricsError, match="depth"):
        pool(QUERIES, Scripted(), ["bm25"], depth=0)
    with pytest.raises(RagMetricsError, match="no modes"):
        pool(QUERIES, Scripted(), [], depth=3)
    with pytest.raises(RagMetricsError, match="no sources"):
        pool_sources(QUERIES, [], depth=3)


# ---------------------------------------------------------------------------- inputs


def test_read_queries_from_every_input_format(tmp_path: Path) -> None:
    yaml_path = tmp_path / "golden.yaml"
    yaml_path.write_text("- id: g1\n  question: brakes squeal\n  gold_chunks: {brake-pads: 2}\n  tags: [std]\n")
    (g1,) = read_queries(yaml_path)
    assert (g1.qid, g1.text, g1.judgments, g1.tags) == ("g1", "brakes squeal", {"brake-pads": 2}, ("std",))

    jsonl = tmp_path / "queries.jsonl"
    jsonl.write_text(
        '{"qid": "j1", "query": "oil", "mode": "semantic"}\n'
        '{"_id": "j2", "text": "tyres", "candidates": [{"doc_id": "t", "rel": null, "note": "?"},'
        ' {"doc_id": "u", "rel": 1}]}\n'
    )
    j1, j2 = read_queries(jsonl)
    assert (j1.qid, j1.text, j1.judgments, j1.tags) == ("j1", "oil", {}, ("semantic",))
    assert j2.judgments == {"u": 1} and j2.notes == {"t": "?"}

    text = tmp_path / "questions.txt"
    text.write_text("# questions for the pool\n\nwhy is my battery flat\nq-wipers\twipers streak\n")
    t1, t2 = read_queries(text)
    assert (t1.qid, t1.text) == ("q3", "why is my battery flat") and (t2.qid, t2.text) == ("q-wipers", "wipers streak")

    folder = tmp_path / "beir"
    folder.mkdir()
    (folder / "queries.jsonl").write_text('{"_id": "1", "text": "a"}\n{"_id": "2", "text": "b"}\n')
    assert [q.qid for q in read_queries(folder)] == ["1", "2"]  # no qrels: every query, unjudged
    (folder / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n2\td9\t1\n")
    (judged,) = read_queries(folder)  # with qrels: the judged queries, judgments carried
    assert judged.qid == "2" and judged.judgments == {"d9": 1}


def test_read_queries_skips_only_a_leading_meta_line(tmp_path: Path) -> None:
    path = tmp_path / "candidates.jsonl"
    path.write_text('{"_meta": {"kind": "ragmetrics-candidates", "seed": 3}}\n'
                    '{"qid": "q1", "query": "x", "order": ["a"], "candidates": [{"doc_id": "a", "rel": 2}]}\n')
    (q1,) = read_queries(path)
    assert q1.judgments == {"a": 2}
    path.write_text('{"qid": "q1", "query": "x"}\n{"_meta": {}}\n')
    with pytest.raises(InputError, match="line 2"):  # further down it is a malformed question
        read_queries(path)


def test_read_queries_errors_name_the_file_and_line(tmp_path: Path) -> None:
    dup = tmp_path / "dup.jsonl"
    dup.write_text('{"qid": "a", "query": "x"}\n{"qid": "a", "query": "y"}\n')
    with pytest.raises(InputError, match=r"dup.jsonl, line 2.*duplicate query id 'a'"):
        read_queries(dup)
    missing = tmp_path / "missing.jsonl"
    missing.write_text('{"qid": "a"}\n')
    with pytest.raises(InputError, match="missing field 'query'"):
        read_queries(missing)
    bad_rel = tmp_path / "rel.jsonl"
    bad_rel.write_text('{"qid": "a", "query": "x", "candidates": [{"doc_id": "d", "rel": "high"}]}\n')
    with pytest.raises(InputError, match="grade of 'd' must be an integer"):
        read_queries(bad_rel)
    with pytest.raises(InputError, match="file not found"):
        read_queries(tmp_path / "nope.txt")
    empty = tmp_path / "empty.txt"
    empty.write_text("# nothing\n")
    with pytest.raises(InputError, match="no questions found"):
        read_queries(empty)


# ------------------------------------------------------------------- the command, real sources


@pytest.fixture(autouse=True)
def _home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path_factory.getbasetemp() / "ragmetrics-home-ablate-pool"  # shared with test_ablate: one embedding cache
    monkeypatch.setenv("RAGMETRICS_HOME", str(home))
    for var in [v for v in os.environ if v.startswith("RAGMETRICS_") and v != "RAGMETRICS_HOME"]:
        monkeypatch.delenv(var)
    return home


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


#: The project's search code: a keyword retriever returning chunk ids (an instance), a dense one
#: returning hits with text, built by a factory (and answering in batches).
APP = '''
class Hit:
    def __init__(self, id, text):
        self.id, self.text = id, text


KEYWORD = {
    "why do my brakes squeal": ["brake-pads#1-2", "brake-pads#2-2", "rim-wear#1-1", "brake-cable#1-1"],
    "how do I fix a flat tire": ["tire-repair#1-3", "tube-patch#1-1", "tire-levers#1-1"],
}
DENSE = {
    "why do my brakes squeal": ["brake-cable#2-2", "disc-rotor#1-1", "brake-pads#1-2"],
    "how do I fix a flat tire": ["tube-patch#1-1", "tire-levers#2-4", "tire-repair#1-3"],
}


class Keyword:
    def search(self, query, k):
        return KEYWORD[query][:k]


class Dense:
    def search(self, query, k):
        raise AssertionError("search_batch is there to be used")

    def search_batch(self, queries, k):
        return [[Hit(c, "dense text of " + c) for c in DENSE[q][:k]] for q in queries]


keyword = Keyword()


def dense():
    return Dense()
'''

GOLDEN = """\
- id: brakes
  question: why do my brakes squeal
  gold_chunks: {brake-pads: 2, disc-rotor: 0, brake-fluid: 1, brake-drum: 1}
- id: flat
  question: how do I fix a flat tire
  gold_chunks: [tire-repair]
"""

#: A BM25 run over the same questions; `other` is not one of them.
BM25_RUN = """\
brakes Q0 rim-wear 1 3.0 bm25
brakes Q0 brake-fluid 2 2.0 bm25
brakes Q0 brake-pads 3 1.0 bm25
flat Q0 tire-levers 1 2.0 bm25
flat Q0 patch-kit 2 1.0 bm25
other Q0 rim-wear 1 1.0 bm25
"""

CORPUS = [
    {"doc_id": d, "title": d.replace("-", " ").title(), "text": f"All about {d}."}
    for d in ["brake-pads", "rim-wear", "brake-cable", "disc-rotor", "brake-fluid", "brake-drum",
              "tire-repair", "tube-patch", "tire-levers"]  # patch-kit is not in it
]


@pytest.fixture
def app(tmp_path: Path) -> Iterator[Path]:
    """A project root holding the search code, a golden set, a run and a corpus; its modules are
    forgotten afterwards, so each test imports its own."""
    (tmp_path / "search_app.py").write_text(APP, encoding="utf-8")
    (tmp_path / "golden.yaml").write_text(GOLDEN, encoding="utf-8")
    (tmp_path / "bm25.trec").write_text(BM25_RUN, encoding="utf-8")
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in CORPUS), encoding="utf-8")
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:
        if str(tmp_path) in str(getattr(sys.modules[name], "__file__", "") or ""):
            del sys.modules[name]


def pool_args(app: Path, *extra: str, out: str = "candidates.jsonl") -> list[str]:
    return ["pool", "--queries", str(app / "golden.yaml"), "--out", str(app / out), "--rootdir", str(app),
            "--depth", "2", *extra]


SOURCES = ("--retriever", "search_app:keyword", "--retriever", "search_app:dense", "--run", "bm25.trec")


def candidates_of(path: Path) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    meta, *records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return meta["_meta"], {r["qid"]: r for r in records}


def test_cli_pools_retrievers_and_a_run(app: Path, capsys: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(app)  # --run paths are relative to where the command runs
    code, out, err = run_cli(capsys, *pool_args(app, *SOURCES, "--seed", "7"))
    assert code == 0, err
    meta, records = candidates_of(app / "candidates.jsonl")
    assert meta["sources"] == [{"name": "keyword", "kind": "retriever", "spec": "search_app:keyword"},
                               {"name": "dense", "kind": "retriever", "spec": "search_app:dense"},
                               {"name": "bm25", "kind": "run", "spec": "bm25.trec"}]
    assert (meta["seed"], meta["depth"]) == (7, 2)
    # by hand, depth 2. keyword asks for 2 results: brake-pads#1-2, brake-pads#2-2 -> one document;
    # dense: brake-cable, disc-rotor; the run: rim-wear, brake-fluid (brake-pads is its 3rd)
    brakes = [(c["doc_id"], c["found_by"], c["ranks"], c["chunk"], c["text"], c["rel"])
              for c in records["brakes"]["candidates"]]
    assert brakes == [
        ("brake-pads", ["keyword"], {"keyword": 1}, "brake-pads#1-2", None, 2),
        ("brake-cable", ["dense"], {"dense": 1}, "brake-cable#2-2", "dense text of brake-cable#2-2", None),
        ("rim-wear", ["bm25"], {"bm25": 1}, "rim-wear", None, None),
        ("disc-rotor", ["dense"], {"dense": 2}, "disc-rotor#1-1", "dense text of disc-rotor#1-1", 0),
        ("brake-fluid", ["bm25"], {"bm25": 2}, "brake-fluid", None, 1),
        ("brake-drum", [], {}, None, None, 1),  # judged relevant, found by none: kept
    ]
    flat = [(c["doc_id"], c["found_by"], c["ranks"], c["chunk"]) for c in records["flat"]["candidates"]]
    assert flat == [
        ("tube-patch", ["keyword", "dense"], {"keyword": 2, "dense": 1}, "tube-patch#1-1"),
        ("tire-levers", ["dense", "bm25"], {"dense": 2, "bm25": 1}, "tire-levers#2-4"),  # the chunk with text
        ("tire-repair", ["keyword"], {"keyword": 1}, "tire-repair#1-3"),
        ("patch-kit", ["bm25"], {"bm25": 2}, "patch-kit"),
    ]
    for qid, record in records.items():
        assert record["order"] == display_order(qid, [c["doc_id"] for c in record["candidates"]], 7)
    assert table_rows(out) == [["keyword", "retriever", "3", "2", "2"], ["dense", "retriever", "4", "2", "0"],
                               ["bm25", "run", "4", "3", "1"]]
    assert "2 questions, 3 sources, top 2 documents each: 9 candidates" in out
    assert "6 candidates have no text; pass --corpus to annotate them." in out
    assert "5 judgments carried over from the input; 5 candidates await a rel" in out
    assert "seed 7" in out
    assert "warning: run 'bm25' (bm25.trec): ignoring 1 query that the questions do not hold: other" in err
    assert "retriever keyword: 2 questions" in err


def test_names_separators_and_texts_from_the_corpus(app: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, *pool_args(
        app, "--retriever", "kw=search_app:keyword", "--run", f"lexical={app / 'bm25.trec'}",
        "--id-separator", "none", "--corpus", str(app / "corpus.jsonl"), "--seed", "1"))
    assert code == 0, err
    meta, records = candidates_of(app / "candidates.jsonl")
    assert [(s["name"], s["kind"]) for s in meta["sources"]] == [("kw", "retriever"), ("lexical", "run")]
    brakes = {c["doc_id"]: c for c in records["brakes"]["candidates"]}
    # no id mapping: the two chunks of brake-pads are two candidates
    assert brakes["brake-pads#1-2"]["ranks"] == {"kw": 1} and brakes["brake-pads#2-2"]["ranks"] == {"kw": 2}
    # texts: the document's, from the corpus; a candidate the corpus lacks has none, and is noted
    assert brakes["rim-wear"]["text"] == "Rim Wear\nAll about rim-wear."
    assert brakes["brake-pads#1-2"]["text"] is None
    assert "candidates are not in the corpus" in err and "brake-pads#1-2" in err
    assert "stack" not in json.dumps(meta)  # --corpus alone with other sources runs no stack mode


def test_an_artifact_of_the_plugin_pools_like_the_retriever_it_measured(
        pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    report = artifact_project(pytester)
    code, out, err = run_cli(capsys, "pool", "--queries", str(pytester.path / "golden.yaml"),
                             "--out", str(pytester.path / "c.jsonl"), "--rootdir", str(pytester.path), "--depth", "10",
                             "--retriever", "search_app:keyword", "--run", f"nightly={report}", "--seed", "3")
    assert code == 0, err
    meta, records = candidates_of(pytester.path / "c.jsonl")
    assert meta["sources"][1] == {"name": "nightly", "kind": "run", "spec": str(report)}
    for record in records.values():
        for c in record["candidates"]:  # the gate scored what the retriever returned: same documents, same ranks
            if c["found_by"]:
                assert c["found_by"] == ["keyword", "nightly"]
                assert c["ranks"]["keyword"] == c["ranks"]["nightly"]
    assert [c["doc_id"] for c in records["brakes"]["candidates"] if c["found_by"]] == [
        "brake-pads", "rim-wear", "brake-cable"]
    assert table_rows(out) == [["keyword", "retriever", "6", "0", "0"], ["nightly", "run", "6", "0", "0"]]


def artifact_project(pytester: pytest.Pytester) -> Path:
    """A project gated by the plugin with the keyword retriever; returns its run artifact."""
    pytester.makepyfile(search_app=APP)
    pytester.makeconftest("""
        import pytest

        from search_app import keyword


        @pytest.fixture(scope="session")
        def rag_retriever():
            return keyword
    """)
    (pytester.path / "golden.yaml").write_text(GOLDEN, encoding="utf-8")
    pytester.makeini("[pytest]\nrag_golden = golden.yaml\n")
    report = pytester.path / "nightly.json"
    result = pytester.runpytest("--rag-eval", "--rag-update-baseline", f"--rag-report={report}",
                                "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:randomly")
    assert result.ret == 0, result.stdout.str()
    assert json.loads(report.read_text(encoding="utf-8"))["per_query"]["brakes"]["ranking"] == [
        "brake-pads", "rim-wear", "brake-cable"]  # k = 10: four chunks, three documents
    return report


#: Run in a fresh interpreter in which the reference stack and its libraries cannot be imported.
NO_STACK = textwrap.dedent("""
    import json, sys
    from importlib.abc import MetaPathFinder

    HEAVY = ("torch", "chromadb", "sentence_transformers", "transformers", "onnxruntime", "bm25s", "rank_bm25", "jieba")


    class NoStack(MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in HEAVY or name.startswith("pytest_ragmetrics.stack"):
                raise ImportError(f"{name} is not installed (core install)")
            return None


    sys.meta_path.insert(0, NoStack())
    from pytest_ragmetrics.cli import main

    code = main(sys.argv[1:])
    heavy = sorted(m for m in sys.modules if m.split(".")[0] in HEAVY or m.startswith("pytest_ragmetrics.stack"))
    print(json.dumps({"code": code, "heavy": heavy}))
""")


def test_retrievers_runs_and_a_corpus_need_only_the_core_install(pytester: pytest.Pytester) -> None:
    report = artifact_project(pytester)
    root = pytester.path
    (root / "bm25.trec").write_text(BM25_RUN, encoding="utf-8")
    (root / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in CORPUS), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [sys.executable, "-c", NO_STACK, "pool", "--queries", "golden.yaml", "--out", "c.jsonl",
         "--retriever", "conftest:rag_retriever",  # the plugin's own fixture, called through its function
         "--retriever", "search_app:dense", "--run", str(report), "--run", "bm25.trec",
         "--corpus", "corpus.jsonl", "--depth", "2"],
        capture_output=True, text=True, timeout=120, cwd=root, env=env,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.splitlines()[-1])
    assert result == {"code": 0, "heavy": []}, proc.stderr
    meta, records = candidates_of(root / "c.jsonl")
    assert [s["name"] for s in meta["sources"]] == ["rag_retriever", "dense", "nightly", "bm25"]
    assert isinstance(meta["seed"], int) and f"seed {meta['seed']}" in proc.stdout  # random, recorded, printed
    assert records["brakes"]["candidates"][0]["text"] == "Brake Pads\nAll about brake-pads."
    assert "patch-kit" in proc.stderr and "not in the corpus" in proc.stderr
    # the check can see the stack: a stack mode, under the same blocker, asks for the extra
    proc = subprocess.run([sys.executable, "-c", NO_STACK, "pool", "--queries", "golden.yaml", "--out", "s.jsonl",
                           "--corpus", "corpus.jsonl", "--modes", "bm25"],
                          capture_output=True, text=True, timeout=120, cwd=root, env=env)
    assert json.loads(proc.stdout.splitlines()[-1])["code"] == 2
    assert "the reference stack needs the 'stack' extra: pip install 'pytest-ragmetrics[stack]'" in proc.stderr


def test_the_same_seed_writes_the_same_file(app: Path, capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(app)
    files = []
    for name, seed in (("a.jsonl", "42"), ("b.jsonl", "42"), ("c.jsonl", "43")):
        code, _, err = run_cli(capsys, *pool_args(app, *SOURCES, "--seed", seed, out=name))
        assert code == 0, err
        files.append((app / name).read_text(encoding="utf-8").splitlines())

    def without_created(lines: list[str]) -> list[str]:
        meta = json.loads(lines[0])
        assert meta["_meta"].pop("created")
        return [json.dumps(meta), *lines[1:]]

    a, b, c = files
    assert without_created(a) == without_created(b)
    assert a[1:] != c[1:]  # another seed, another order
    assert [json.loads(line)["candidates"] for line in a[1:]] == [json.loads(line)["candidates"] for line in c[1:]]
    assert json.loads(a[0])["_meta"]["pool_id"] == json.loads(c[0])["_meta"]["pool_id"]  # the same pool


def test_a_filled_candidates_file_is_a_golden_set_and_re_pools(app: Path, capsys: pytest.CaptureFixture[str],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(app)
    assert run_cli(capsys, *pool_args(app, *SOURCES, "--seed", "5"))[0] == 0
    path = app / "candidates.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines[1:]]
    for record in records:
        for c in record["candidates"]:
            if c["rel"] is None:
                c["rel"], c["note"] = (1, "explains the fix") if c["doc_id"] == "tube-patch" else (0, "")
    path.write_text("\n".join([lines[0], *(json.dumps(r) for r in records)]) + "\n", encoding="utf-8")
    assert read_candidates(path).question("flat").candidate("tube-patch").rel == 1
    golden = load_golden(path)
    assert golden["flat"].judgments == {"tube-patch": 1, "tire-levers": 0, "tire-repair": 1, "patch-kit": 0}
    # a deeper pool from the annotated file: every judgment and note carried over, new documents null
    code, out, err = run_cli(capsys, *pool_args(app, *SOURCES, "--seed", "5", "--queries", str(path), "--depth", "3",
                                                out="deeper.jsonl"))
    assert code == 0, err
    _, deeper = candidates_of(app / "deeper.jsonl")
    flat = {c["doc_id"]: c for c in deeper["flat"]["candidates"]}
    assert flat["tube-patch"]["rel"] == 1 and flat["tube-patch"]["note"] == "explains the fix"
    assert flat["patch-kit"]["rel"] == 0 and flat["tire-repair"]["rel"] == 1
    brakes = {c["doc_id"]: c for c in deeper["brakes"]["candidates"]}
    assert brakes["brake-pads"]["ranks"] == {"keyword": 1, "dense": 3, "bm25": 3}
    assert "judgments carried over" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--retriever", "missing_mod:make"), "retriever 'missing_mod:make': no module named 'missing_mod': looked "
                                              "for missing_mod.py and missing_mod/ under the project root"),
        (("--retriever", "search_app:sparse"), "search_app (") ,
        (("--retriever", "search_app:KEYWORD"), "KEYWORD is dict {"),
        (("--retriever", "search_app:Hit"), "the class needs arguments (id, text)"),
        (("--retriever", "broken_app:make"), "calling it raised OSError: index directory missing"),
        (("--run", "nothing-matches.trec"), "none of the 1 queries of this TREC run is among the questions"),
        (("--run", "garbage.trec"), "garbage.trec, line 2: expected 6 columns"),
        (("--run", "absent.trec"), "absent.trec: file not found"),
        (("--retriever", "search_app:keyword", "--run", "keyword=bm25.trec"), "two sources are named 'keyword'"),
        (("--run", "bm25.trec", "--modes", "bm25"), "--modes searches the reference stack over a corpus"),
        ((), "no source to pool from: give --retriever MODULE:ATTR, --run FILE, or --corpus"),
        (("--retriever", "=search_app:keyword"), "expected NAME=MODULE:ATTR"),
    ],
)
def test_bad_sources_exit_2_naming_what_is_wrong(app: Path, capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch, argv: tuple[str, ...],
                                                 message: str) -> None:
    monkeypatch.chdir(app)
    (app / "broken_app.py").write_text("def make():\n    raise OSError('index directory missing')\n")
    (app / "nothing-matches.trec").write_text("q-elsewhere Q0 d 1 1 t\n")
    (app / "garbage.trec").write_text("brakes Q0 rim-wear 1 3.0 bm25\nnot a run line\n")
    code, out, err = run_cli(capsys, *pool_args(app, *argv))
    assert code == 2 and out == ""
    assert err.startswith("ragmetrics pool: error: ") and message in err, err
    assert not (app / "candidates.jsonl").exists()


def test_missing_attribute_and_protocol_messages_in_full(app: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, *pool_args(app, "--retriever", "search_app:sparse"))
    assert code == 2
    assert f"search_app ({app / 'search_app.py'}) has no attribute 'sparse'; it defines DENSE, Dense, Hit, " \
           "KEYWORD, Keyword, dense, keyword" in err
    code, _, err = run_cli(capsys, *pool_args(app, "--retriever", "search_app:KEYWORD"))
    assert code == 2 and "which has no search method. A retriever source must name an object with " \
                         "search(query: str, k: int)" in err


def test_an_existing_out_is_refused_before_anything_is_imported(app: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (app / "loud.py").write_text(f"open({str(app / 'imported')!r}, 'w').close()\nclass R:\n"
                                 "    def search(self, q, k):\n        return []\n")
    (app / "candidates.jsonl").write_text("annotator's work\n")
    code, _, err = run_cli(capsys, *pool_args(app, "--retriever", "loud:R"))
    assert code == 2 and "already exists; pass --force" in err
    assert not (app / "imported").exists() and (app / "candidates.jsonl").read_text() == "annotator's work\n"
    code, _, err = run_cli(capsys, *pool_args(app, "--retriever", "loud:R", "--force"))
    assert code == 0, err
    assert (app / "imported").exists()


def test_a_bad_seed_or_depth_is_a_usage_error(app: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(pool_args(app, "--retriever", "search_app:keyword", "--seed", "-3"))
    assert info.value.code == 2 and "expected an integer >= 0" in capsys.readouterr().err
    code, _, err = run_cli(capsys, *pool_args(app, "--retriever", "search_app:keyword", "--depth", "0"))
    assert code == 2 and "--depth must be >= 1" in err


# ------------------------------------------------------------------ the reference stack


def test_stack_modes_pool_with_a_retriever(app: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """BM25 of the reference stack (no model needed) beside a retriever: chunk texts from the stack."""
    questions = app / "questions.txt"
    questions.write_text("align\tcar pulls to the left\nsmell\tsmell from the air vents\n", encoding="utf-8")
    (app / "car_app.py").write_text("class R:\n    def search(self, query, k):\n"
                                    "        return ['alignment#1-1', 'cabin-filter#1-1', 'brake-pads'][:k]\nr = R()\n")
    code, out, err = run_cli(capsys, "pool", "--queries", str(questions), "--out", str(app / "c.jsonl"),
                             "--rootdir", str(app), "--retriever", "mine=car_app:r", "--corpus", str(CAR_CORPUS),
                             "--modes", "bm25", "--chunk-size", "120", "--overlap", "20",
                             "--data-dir", str(tmp_path / "idx"), "--depth", "3", "--seed", "9")
    assert code == 0, err
    meta, records = candidates_of(app / "c.jsonl")
    assert meta["sources"] == [{"name": "mine", "kind": "retriever", "spec": "car_app:r"},
                               {"name": "bm25", "kind": "stack",
                                "spec": f"mode=bm25 corpus={CAR_CORPUS} chunk_size=120 overlap=20"}]
    for record in records.values():
        for c in record["candidates"]:
            assert c["text"], c  # every document is in the corpus
            if "bm25" in c["found_by"]:  # the stack's chunk is shown, with its text
                assert c["chunk"].startswith(c["doc_id"] + "#") and not c["text"].startswith("Wheel alignment\n")
    align = {c["doc_id"]: c for c in records["align"]["candidates"]}
    assert align["alignment"]["found_by"][0] == "mine" and align["alignment"]["ranks"]["mine"] == 1
    assert align["brake-pads"]["found_by"] == ["mine"] and align["brake-pads"]["text"].startswith("Brake pads\n")
    assert [r[0] for r in table_rows(out)] == ["mine", "bm25"] and "have no text" not in out


@pytest.mark.slow  # loads MiniLM
def test_cli_pool_over_the_car_corpus(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    golden = tmp_path / "golden.yaml"
    golden.write_text(
        "- id: align\n  question: car pulls to the left\n  gold_chunks: {alignment: 2, tyre-pressure: 0}\n"
        "- id: smell\n  question: smell from the air vents\n  gold_chunks: [cabin-filter]\n",
        encoding="utf-8",
    )
    out = tmp_path / "candidates.jsonl"
    args = ["pool", "--corpus", str(CAR_CORPUS), "--queries", str(golden), "--depth", "4",
            "--chunk-size", "120", "--overlap", "20", "--data-dir", str(tmp_path / "idx"), "--out", str(out)]
    code, stdout, err = run_cli(capsys, *args)
    assert code == 0, err
    assert "2 questions, 3 sources, top 4 documents each" in stdout
    assert [r[:2] for r in table_rows(stdout)] == [["bm25", "stack"], ["vector", "stack"], ["hybrid", "stack"]]
    assert "fill in each null rel" in stdout
    meta, records = candidates_of(out)
    assert [s["name"] for s in meta["sources"]] == ["bm25", "vector", "hybrid"]
    align = {c["doc_id"]: c for c in records["align"]["candidates"]}
    assert align["alignment"]["rel"] == 2 and "vector" in align["alignment"]["found_by"]
    assert align["tyre-pressure"]["rel"] == 0
    assert all(c["rel"] is None for d, c in align.items() if d not in ("alignment", "tyre-pressure"))
    for record in records.values():
        docs = [c["doc_id"] for c in record["candidates"]]
        assert len(docs) == len(set(docs))
        for c in record["candidates"]:
            assert sorted(c["ranks"]) == sorted(c["found_by"]) and all(1 <= r <= 4 for r in c["ranks"].values())
            if c["found_by"]:
                assert c["chunk"].startswith(c["doc_id"] + "#") and c["text"]
        for mode in ("bm25", "vector", "hybrid"):  # each mode contributes its top 4 distinct documents
            ranks = sorted(c["ranks"][mode] for c in record["candidates"] if mode in c["ranks"])
            # (bm25 returns only documents sharing a term with the question)
            assert ranks == [1, 2, 3, 4] or (mode == "bm25" and ranks == list(range(1, len(ranks) + 1)))

    # a second run refuses to overwrite the file, before any retrieval
    before = out.read_bytes()
    code, _, err = run_cli(capsys, *args)
    assert code == 2 and "already exists; pass --force" in err and out.read_bytes() == before
    code, _, err = run_cli(capsys, *args, "--force", "--modes", "bm25")
    assert code == 0, err
    first = json.loads(out.read_text(encoding="utf-8").splitlines()[1])
    assert {m for c in first["candidates"] for m in c["found_by"]} == {"bm25"}


@pytest.mark.slow  # loads MiniLM, indexes the demo corpus in 120-character chunks
def test_the_documented_example_pools_two_demo_settings_and_bm25(capsys: pytest.CaptureFixture[str],
                                                                 tmp_path: Path, warm_demo_home: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/cli.md#pool: two settings of the demo's retriever (eval/retrievers.py) and the stack's BM25.
    The first is the demo gate's: the demo's built index serves it."""
    monkeypatch.setenv("RAGMETRICS_HOME", str(warm_demo_home))
    before = set(sys.modules)
    try:
        code, out, err = run_cli(capsys, "pool", "--queries", str(REPO / "eval" / "golden.yaml"),
                                 "--out", str(tmp_path / "c.jsonl"), "--depth", "5", "--rootdir", str(REPO),
                                 "--corpus", str(REPO / "eval" / "corpus"), "--modes", "bm25",
                                 "--retriever", "eval.retrievers:hybrid", "--retriever", "eval.retrievers:small_chunks")
    finally:
        for name in set(sys.modules) - before:
            if name == "eval" or name.startswith("eval."):
                del sys.modules[name]
    assert code == 0, err
    assert "77 questions, 3 sources, top 5 documents each" in out  # questions with no answer are pooled too
    assert [row[:3] for row in table_rows(out)] == [["hybrid", "retriever", "385"], ["small_chunks", "retriever", "385"],
                                                    ["bm25", "stack", "384"]]  # BM25 finds 4 for one off-topic question
    meta, records = candidates_of(tmp_path / "c.jsonl")
    assert [s["spec"] for s in meta["sources"][:2]] == ["eval.retrievers:hybrid", "eval.retrievers:small_chunks"]
    assert all(c["text"] for r in records.values() for c in r["candidates"])  # every document is in the corpus
    hybrid = {r["qid"]: [c["doc_id"] for c in r["candidates"] if "hybrid" in c["ranks"]] for r in records.values()}
    assert all(len(docs) == 5 for docs in hybrid.values())  # unique_docs: five distinct documents each


def test_cli_pool_bad_inputs_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    questions = tmp_path / "q.txt"
    questions.write_text("battery flat\n", encoding="utf-8")
    missing = tmp_path / "missing-corpus"
    code, out, err = run_cli(capsys, "pool", "--corpus", str(missing), "--queries", str(questions),
                             "--out", str(tmp_path / "o.jsonl"))
    assert code == 2 and out == ""
    assert err.startswith("ragmetrics pool: error: ") and str(missing) in err and "no such corpus" in err
    assert not (tmp_path / "o.jsonl").exists()
    code, _, err = run_cli(capsys, "pool", "--corpus", str(CAR_CORPUS), "--queries", str(tmp_path / "nope.yaml"),
                           "--out", str(tmp_path / "o.jsonl"))
    assert code == 2 and "nope.yaml: file not found" in err
    code, _, err = run_cli(capsys, "pool", "--corpus", str(CAR_CORPUS), "--queries", str(questions),
                           "--modes", "bm25,hybrid+rerank", "--out", str(tmp_path / "o.jsonl"))
    assert code == 2 and "needs --rerank-model" in err
    code, _, err = run_cli(capsys, "pool", "--corpus", str(CAR_CORPUS), "--queries", str(questions),
                           "--depth", "0", "--out", str(tmp_path / "o.jsonl"))
    assert code == 2 and "--depth must be >= 1" in err


def test_each_source_shows_its_search_and_quiet_hides_it(app: Path, capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(app)
    monkeypatch.setenv("RAGMETRICS_PROGRESS_INTERVAL", "0.001")
    monkeypatch.setenv("RAGMETRICS_PROGRESS_MIN_SECONDS", "0")  # every step shown, as if long
    code, _, err = run_cli(capsys, *pool_args(app, *SOURCES, "--seed", "7"))
    assert code == 0, err
    assert "searching keyword: 1/2 questions (50%)" in err and "searching keyword: 2 questions in " in err
    assert "searching dense: 2/2 questions (100%)" in err  # search_batch, a slice at a time
    code, _, err = run_cli(capsys, *pool_args(app, *SOURCES, "--seed", "7", "--force", "-q"))
    assert code == 0
    assert "searching" not in err and "retriever keyword: 2 questions" not in err
    assert "warning: run 'bm25' (bm25.trec): ignoring 1 query" in err  # warnings still print
