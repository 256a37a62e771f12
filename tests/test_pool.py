"""Candidate pooling (pytest_ragmetrics.tools.pool, `ragmetrics pool`): candidates for annotators.

Exact checks run over a scripted retriever (fixed rankings per mode, chunk ids
included, so dedup within and across modes is known by hand); one test and the
CLI tests pool the 30-document car corpus through the real reference stack.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from pytest_ragmetrics import InputError, RagMetricsError, load_golden
from pytest_ragmetrics.tools.pool import PoolQuery, pool, pool_summary, read_queries, write_pool
from pytest_ragmetrics.cli import main

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
    assert "2 questions" in summary and "3 judgments carried over" in summary
    assert "1 relevant judged documents were found by no mode at depth 3" in summary and "'z'" in summary
    assert "bm25 1, vector 0, hybrid 0" in summary  # b is bm25's alone


def test_pool_file_round_trip_is_refused_until_annotated(tmp_path: Path) -> None:
    pooled = pool(QUERIES, Scripted(), ["bm25", "vector"], depth=2)
    out = write_pool(pooled, tmp_path / "pool" / "candidates.jsonl")
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["qid"] for r in records] == ["q1", "q2"]
    first = records[0]["candidates"][0]
    assert list(first) == ["doc_id", "chunk", "text", "rel", "note", "found_by", "ranks"]
    assert first == {"doc_id": "a", "chunk": "a#1-2", "text": "text of a#1-2", "rel": None, "note": "",
                     "found_by": ["bm25"], "ranks": {"bm25": 1}}
    assert [c["doc_id"] for c in records[0]["candidates"]] == ["a", "c", "b", "e", "z", "f"]
    assert records[0]["tags"] == ["hard"] and "tags" not in records[1]
    # an unannotated pool is not a golden set yet
    with pytest.raises(InputError, match=r"line 1 \(qid 'q1'\).*has no rel: annotate it"):
        load_golden(out)
    # re-pooling an unannotated file reads it leniently and keeps what is judged
    again = {q.qid: q for q in read_queries(out)}
    assert again["q1"].judgments == {"b": 2, "z": 1, "f": 0} and again["q1"].notes == {"b": "answers it"}
    # once every rel is filled in, it loads
    for r in records:
        for c in r["candidates"]:
            if c["rel"] is None:
                c["rel"] = 1 if c["doc_id"] in ("a", "y") else 0
    done = tmp_path / "annotated.jsonl"
    done.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    golden = load_golden(done)
    assert golden["q1"].judgments["a"] == 1 and golden["q1"].judgments["b"] == 2
    assert golden["q2"].judgments == {"x": 0, "y": 1} and golden["q1"].tags == ("hard",)


def test_an_existing_file_is_not_overwritten_without_force(tmp_path: Path) -> None:
    out = tmp_path / "candidates.jsonl"
    out.write_text("annotator's work\n", encoding="utf-8")
    pooled = pool(QUERIES, Scripted(), ["bm25"], depth=1)
    with pytest.raises(RagMetricsError, match="already exists; pass --force"):
        write_pool(pooled, out)
    assert out.read_text(encoding="utf-8") == "annotator's work\n"
    write_pool(pooled, out, force=True)
    assert json.loads(out.read_text(encoding="utf-8").splitlines()[0])["qid"] == "q1"
    assert [p.name for p in tmp_path.iterdir()] == ["candidates.jsonl"]  # no temp file left behind


def test_pool_validates_depth_and_modes() -> None:
    with pytest.raises(RagMetricsError, match="depth"):
        pool(QUERIES, Scripted(), ["bm25"], depth=0)
    with pytest.raises(RagMetricsError, match="no modes"):
        pool(QUERIES, Scripted(), [], depth=3)


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


# ------------------------------------------------------------------ the reference stack


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
    assert "2 questions, modes bm25, vector, hybrid, top 4 documents each" in stdout
    assert "fill in each null rel" in stdout
    records = {r["qid"]: r for r in map(json.loads, out.read_text(encoding="utf-8").splitlines())}
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
    first = json.loads(out.read_text(encoding="utf-8").splitlines()[0])
    assert {m for c in first["candidates"] for m in c["found_by"]} == {"bm25"}


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
