"""Golden sets: every format, every validation error (pytest_ragmetrics.golden)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from pytest_ragmetrics import GoldenSet, InputError, MeasurementConfig, Query, evaluate, load_golden, load_qrels


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def jsonl(*records: object) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)


def load_error(path: Path) -> InputError:
    with pytest.raises(InputError) as info:
        load_golden(path)
    return info.value


# ------------------------------------------------------------------------- YAML

SEED_000 = """\
# seed-000 style: a list of questions, gold chunks as ids (grade 1) or id -> grade
- id: android-basic-001
  question: How do I persist state across rotation?
  gold_chunks: [lifecycle-activity-basic, viewmodel-intro]
  tags: [standard]
- id: android-hard-002
  question: Why is onSaveInstanceState not called?
  gold_chunks:
    lifecycle-activity-basic: 2
    process-death: 3
    faq-misc: 0
  tags: [hard, paraphrase]
- id: "003"
  question: 旋转屏幕后状态丢失怎么办？
  gold_chunks:
    - viewmodel-intro
"""


def test_yaml_list_and_graded_mapping_forms(tmp_path: Path) -> None:
    golden = load_golden(write(tmp_path / "golden.yaml", SEED_000))
    assert isinstance(golden, GoldenSet)
    assert golden.source == str(tmp_path / "golden.yaml")
    assert [q.qid for q in golden] == ["android-basic-001", "android-hard-002", "003"]
    assert len(golden) == 3
    first = golden["android-basic-001"]
    assert first == Query(
        "android-basic-001",
        "How do I persist state across rotation?",
        {"lifecycle-activity-basic": 1, "viewmodel-intro": 1},
        ("standard",),
    )
    hard = golden["android-hard-002"]
    assert dict(hard.judgments) == {"lifecycle-activity-basic": 2, "process-death": 3, "faq-misc": 0}
    assert hard.tags == ("hard", "paraphrase")
    assert golden["003"].text == "旋转屏幕后状态丢失怎么办？"
    assert golden["003"].tags == ()
    assert golden.tags() == ["hard", "paraphrase", "standard"]
    assert "003" in golden and "004" not in golden
    assert golden.qrels["android-hard-002"] == {"lifecycle-activity-basic": 2, "process-death": 3, "faq-misc": 0}


def test_query_helpers(tmp_path: Path) -> None:
    hard = load_golden(write(tmp_path / "g.yml", SEED_000))["android-hard-002"]
    assert hard.n_relevant() == 2 and hard.n_relevant(3) == 1
    assert hard.relevant() == ["process-death", "lifecycle-activity-basic"]  # best grade first
    assert hard.relevant(3) == ["process-death"]


def test_yaml_mapping_with_queries_key_and_single_string_tag(tmp_path: Path) -> None:
    text = """\
    queries:
      - id: q1
        question: one
        gold_chunks: [a]
        tags: smoke
    """
    golden = load_golden(write(tmp_path / "g.yaml", text))
    assert golden["q1"].tags == ("smoke",)


def test_subset_keeps_order_and_source(tmp_path: Path) -> None:
    golden = load_golden(write(tmp_path / "g.yaml", SEED_000))
    sub = golden.subset({"003", "android-basic-001"})
    assert [q.qid for q in sub] == ["android-basic-001", "003"]
    assert sub.source == golden.source


@pytest.mark.parametrize(
    ("text", "where", "fragment"),
    [
        ("", None, "the file is empty"),
        ("# only a comment\n", None, "the file is empty"),
        ("id: q1\nquestion: x\ngold_chunks: [a]\n", None, "expected a YAML list of questions, got a dict"),
        ('"just a string"\n', None, "expected a YAML list of questions, got a str"),
        ("[]\n", None, "the golden set holds no questions"),
        ("- just a string\n", "record 1", "expected a mapping with id, question, gold_chunks"),
        ("- question: x\n  gold_chunks: [a]\n", "record 1 (line 1)", "missing field 'id'"),
        ("- id: q1\n  gold_chunks: [a]\n", "record 1 (line 1)", "missing field 'question'"),
        ("- id: q1\n  question: x\n", "record 1 (line 1)", "missing field 'gold_chunks'"),
        ("- id: q1\n  question: x\n  gold_chunks: []\n", "id 'q1'", "gold_chunks is empty"),
        ("- id: q1\n  question: x\n  gold_chunks: {}\n", "id 'q1'", "gold_chunks is empty"),
        ("- id: q1\n  question: x\n  gold_chunks:\n", "id 'q1'", "gold_chunks is empty"),
        ("- id: q1\n  question: x\n  gold_chunks: a\n", "id 'q1'", "must be a list of ids or a mapping"),
        ("- id: 42\n  question: x\n  gold_chunks: [a]\n", "record 1 (line 1)", "id must be a string, got int 42 (quote it)"),
        ("- id: q1\n  question: x\n  gold_chunks: [7]\n", "id 'q1'", "a gold document id must be a string, got int 7"),
        ("- id: q1\n  question: 12\n  gold_chunks: [a]\n", "id 'q1'", "question must be a string"),
        ("- id: '  '\n  question: x\n  gold_chunks: [a]\n", "record 1", "id is empty"),
        ("- id: q1\n  question: x\n  gold_chunks: [a, b, a]\n", "id 'q1'", "gold document 'a' is listed twice"),
        ("- id: q1\n  question: x\n  gold_chunks: {a: 1.5}\n", "id 'q1'", "grade of 'a' must be an integer >= 0, got 1.5"),
        ("- id: q1\n  question: x\n  gold_chunks: {a: '2'}\n", "id 'q1'", "grade of 'a' must be an integer >= 0, got '2'"),
        ("- id: q1\n  question: x\n  gold_chunks: {a: true}\n", "id 'q1'", "must be an integer >= 0, got True"),
        ("- id: q1\n  question: x\n  gold_chunks: {a: -1}\n", "id 'q1'", "grade of 'a' is -1"),
        ("- id: q1\n  question: x\n  gold_chunks: {a: null}\n", "id 'q1'", "must be an integer >= 0, got None"),
        ("- id: q1\n  question: x\n  gold_chunks: [a]\n  tags: {x: 1}\n", "id 'q1'", "tags must be a list of strings"),
        ("- id: q1\n  question: x\n  gold_chunks: [a]\n  tags: [1]\n", "id 'q1'", "a tag must be a string"),
    ],
)
def test_yaml_errors_name_file_record_and_reason(tmp_path: Path, text: str, where: str | None, fragment: str) -> None:
    path = write(tmp_path / "golden.yaml", text)
    error = load_error(path)
    message = str(error)
    assert message.startswith(str(path)), message
    assert fragment in message, message
    if where is not None:
        assert where in message, message


def test_yaml_duplicate_query_ids_name_both_records(tmp_path: Path) -> None:
    text = """\
    - id: q1
      question: first
      gold_chunks: [a]
    - id: q2
      question: second
      gold_chunks: [b]
    - id: q1
      question: third
      gold_chunks: [c]
    """
    message = str(load_error(write(tmp_path / "golden.yaml", text)))
    assert "duplicate query id 'q1'" in message
    assert "record 3 (line 7" in message and "first at record 1 (line 1" in message


def test_yaml_duplicate_key_is_an_error_not_a_silent_overwrite(tmp_path: Path) -> None:
    text = """\
    - id: q1
      question: x
      gold_chunks:
        a: 1
        a: 3
    """
    error = load_error(write(tmp_path / "golden.yaml", text))
    assert "duplicate key 'a'" in str(error) and "line 5" in str(error)
    text2 = "- id: q1\n  id: q2\n  question: x\n  gold_chunks: [a]\n"
    error = load_error(write(tmp_path / "golden2.yaml", text2))
    assert "duplicate key 'id'" in str(error) and "line 2" in str(error)


def test_yaml_python_tags_are_rejected_not_executed(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    text = f"""\
    - id: q1
      question: !!python/object/apply:os.system ["touch {marker}"]
      gold_chunks: [a]
    """
    error = load_error(write(tmp_path / "golden.yaml", text))
    assert "invalid YAML" in str(error) and "line 2" in str(error)
    assert not marker.exists()


def test_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    error = load_error(write(tmp_path / "golden.yaml", "- id: q1\n  question: [unclosed\n  gold_chunks: [a]\n"))
    assert "invalid YAML" in str(error) and "line " in str(error)


def test_bad_utf8_names_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path / "golden.yaml", b"- id: q1\n  question: caf\xe9\n  gold_chunks: [a]\n")
    error = load_error(path)
    assert str(path) in str(error) and "line 2" in str(error) and "not valid UTF-8" in str(error)


def test_utf8_bom_is_accepted(tmp_path: Path) -> None:
    body = "- id: q1\n  question: café\n  gold_chunks: [a]\n"
    golden = load_golden(write(tmp_path / "golden.yaml", b"\xef\xbb\xbf" + body.encode("utf-8")))
    assert golden["q1"].text == "café"
    record = {"qid": "q1", "query": "x", "candidates": [{"doc_id": "a", "rel": 1}]}
    golden = load_golden(write(tmp_path / "golden.jsonl", b"\xef\xbb\xbf" + jsonl(record).encode("utf-8")))
    assert [q.qid for q in golden] == ["q1"]


# ------------------------------------------------------------------------ JSONL

SEED_001 = [
    {"qid": "Q-0001", "query": "怎么取消自动续费", "mode": "semantic",
     "candidates": [
         {"doc_id": "D-1024", "chunk": 3, "rel": 3, "note": "直接说明关闭扣款步骤"},
         {"doc_id": "D-2077", "chunk": 1, "rel": 1, "note": "提到订阅管理,未讲取消"},
         {"doc_id": "D-3310", "chunk": 5, "rel": 0, "note": "无关:账单发票"}]},
    {"qid": "Q-0002", "query": "发票抬头怎么改", "mode": "keyword", "tags": ["smoke", "keyword"],
     "candidates": [
         {"doc_id": "D-3310", "chunk": 1, "rel": 1},
         {"doc_id": "D-3310", "chunk": 4, "rel": 3},
         {"doc_id": "D-3310", "chunk": 2, "rel": 2},
         {"doc_id": "D-0001", "chunk": 1, "rel": 0}]},
    {"qid": "Q-0003", "query": "没有相关文档的问题",
     "candidates": [{"doc_id": "D-9", "rel": 0}]},
]


def test_jsonl_seed_001_candidates_mode_and_max_grade(tmp_path: Path) -> None:
    golden = load_golden(write(tmp_path / "golden.jsonl", jsonl(*SEED_001)))
    assert [q.qid for q in golden] == ["Q-0001", "Q-0002", "Q-0003"]
    q1 = golden["Q-0001"]
    assert q1.text == "怎么取消自动续费"
    assert dict(q1.judgments) == {"D-1024": 3, "D-2077": 1, "D-3310": 0}
    assert q1.tags == ("semantic",)
    q2 = golden["Q-0002"]
    assert dict(q2.judgments) == {"D-3310": 3, "D-0001": 0}  # max rel over the document's chunks
    assert q2.tags == ("keyword", "smoke")  # mode first, repeats dropped
    assert golden["Q-0003"].tags == ()


def test_ndjson_suffix_and_blank_lines(tmp_path: Path) -> None:
    text = "\n" + jsonl(SEED_001[0]) + "\n   \n" + jsonl(SEED_001[1])
    golden = load_golden(write(tmp_path / "golden.ndjson", text))
    assert len(golden) == 2


def cand(**extra: object) -> dict[str, object]:
    record: dict[str, object] = {"qid": "q1", "query": "x", "candidates": [{"doc_id": "a", "rel": 1}]}
    record.update(extra)
    return record


@pytest.mark.parametrize(
    ("lines", "where", "fragment"),
    [
        ('{"qid": "q1", "query": "x", "candidates": [{"doc_id": "a", "rel": 1}]}\n{"qid": "q2", "query": \n',
         "line 2", "invalid JSON"),
        ("[1, 2]\n", "line 1", "expected a JSON object with qid, query, candidates"),
        (jsonl({"query": "x", "candidates": []}), "line 1", "missing field 'qid'"),
        (jsonl({"qid": "q1", "candidates": []}), "line 1", "missing field 'query'"),
        (jsonl({"qid": "q1", "query": "x"}), "line 1", "missing field 'candidates'"),
        (jsonl(cand(qid=7)), "line 1", "qid must be a string, got int 7"),
        (jsonl(cand(query=None)), "line 1 (qid 'q1')", "query must be a string"),
        (jsonl(cand(candidates=[])), "line 1 (qid 'q1')", "candidates must be a non-empty list"),
        (jsonl(cand(candidates={"doc_id": "a", "rel": 1})), "line 1 (qid 'q1')", "candidates must be a non-empty list"),
        (jsonl(cand(candidates=[{"doc_id": "a"}])), "line 1 (qid 'q1')", "candidate 1 ('a') has no rel"),
        (jsonl(cand(candidates=[{"doc_id": "a", "rel": 1}, {"doc_id": "b", "rel": None}])), "line 1 (qid 'q1')",
         "candidate 2 ('b') has no rel"),
        (jsonl(cand(candidates=[{"rel": 1}])), "line 1 (qid 'q1')", "candidate 1 must be an object with doc_id and rel"),
        (jsonl(cand(candidates=[{"doc_id": 5, "rel": 1}])), "line 1 (qid 'q1')", "candidate 1 doc_id must be a string"),
        (jsonl(cand(candidates=[{"doc_id": "a", "rel": 1.5}])), "line 1 (qid 'q1')", "grade of 'a' must be an integer"),
        (jsonl(cand(candidates=[{"doc_id": "a", "rel": "1"}])), "line 1 (qid 'q1')", "grade of 'a' must be an integer"),
        (jsonl(cand(candidates=[{"doc_id": "a", "rel": False}])), "line 1 (qid 'q1')", "grade of 'a' must be an integer"),
        (jsonl(cand(candidates=[{"doc_id": "a", "rel": -2}])), "line 1 (qid 'q1')", "grade of 'a' is -2"),
        (jsonl(cand(mode=3)), "line 1 (qid 'q1')", "mode must be a string"),
        (jsonl(cand(), cand()), "line 2 (qid 'q1')", "duplicate query id 'q1' (first at line 1 (qid 'q1'))"),
        ("", None, "the golden set holds no questions"),
        ("\n \n", None, "the golden set holds no questions"),
    ],
)
def test_jsonl_errors_name_file_line_and_reason(tmp_path: Path, lines: str, where: str | None, fragment: str) -> None:
    path = write(tmp_path / "golden.jsonl", lines)
    message = str(load_error(path))
    assert message.startswith(str(path)), message
    assert fragment in message, message
    if where is not None:
        assert where in message, message


def test_jsonl_line_numbers_count_blank_lines(tmp_path: Path) -> None:
    text = jsonl(cand()) + "\n\n" + '{"qid": "q2", "query": "y", "candidates": [{"doc_id": "a"}]}\n'
    message = str(load_error(write(tmp_path / "golden.jsonl", text)))
    assert "line 4 (qid 'q2')" in message


# ------------------------------------------------------------- folders and qrels


def test_folder_with_queries_jsonl_and_qrels_tsv(tmp_path: Path) -> None:
    folder = tmp_path / "coll"
    write(folder / "queries.jsonl", jsonl(
        {"qid": "1", "query": "first"},
        {"qid": "2", "query": "second", "tags": ["hard"]},
        {"qid": "3", "query": "no judgments in this split"},
    ))
    write(folder / "qrels.tsv", "qid\tdoc_id\trel\n1\tA\t1\n1\tB\t2\n2\tC\t0\n2\tD\t1\n")
    golden = load_golden(folder)
    assert golden.source == str(folder)
    assert [q.qid for q in golden] == ["1", "2"]  # queries.jsonl order
    assert dict(golden["1"].judgments) == {"A": 1, "B": 2}
    assert dict(golden["2"].judgments) == {"C": 0, "D": 1}
    assert golden["2"].tags == ("hard",)
    assert golden.skipped == ("3",)


def test_beir_spellings(tmp_path: Path) -> None:
    folder = tmp_path / "beir"
    write(folder / "queries.jsonl", jsonl({"_id": "q7", "text": "beir query", "metadata": {}}))
    write(folder / "qrels" / "test.tsv", "query-id\tcorpus-id\tscore\nq7\tdoc1\t1\nq7\tdoc2\t0\n")
    golden = load_golden(folder)
    assert golden["q7"].text == "beir query"
    assert dict(golden["q7"].judgments) == {"doc1": 1, "doc2": 0}


def test_trec_four_column_qrels_in_a_folder(tmp_path: Path) -> None:
    folder = tmp_path / "trec"
    write(folder / "queries.jsonl", jsonl({"qid": "401", "query": "foreign minorities"}))
    write(folder / "qrels.txt", "401 0 FBIS3-10082 1\n401 0 FBIS3-10169 0\n401 0 FT921-7107 2\n")
    golden = load_golden(folder)
    assert dict(golden["401"].judgments) == {"FBIS3-10082": 1, "FBIS3-10169": 0, "FT921-7107": 2}


def test_qrels_file_path_next_to_queries_jsonl(tmp_path: Path) -> None:
    folder = tmp_path / "cran"
    write(folder / "queries.jsonl", jsonl({"qid": "1", "query": "q"}))
    write(folder / "qrels.tsv", "qid\tdoc_id\trel\n1\tA\t-1\n")
    write(folder / "qrels_gain.tsv", "qid\tdoc_id\trel\n1\tA\t0\n1\tB\t3\n")
    golden = load_golden(folder / "qrels_gain.tsv")  # this qrels, not the folder's default
    assert dict(golden["1"].judgments) == {"A": 0, "B": 3}
    with pytest.raises(InputError, match="grade -1"):
        load_golden(folder)


@pytest.mark.parametrize(
    ("qrels", "line", "fragment"),
    [
        ("q1 A 1\nq1 B 1 extra more\n", "line 2", "expected 3 (qid doc grade) or 4 (qid iter doc grade) columns, got 5"),
        ("q1 A\n", "line 1", "got 2"),
        ("q1 0 A 1\nq1 B 1\n", "line 2", "expected 4 columns like the lines before, got 3"),
        ("q1 A high\n", "line 1", "grade 'high' is not an integer"),
        ("q1 A 1.0\n", "line 1", "grade '1.0' is not an integer"),
        ("q1 A -1\n", "line 1", "grade -1 of 'A'"),
        ("q1 A 1\nq1 A 2\n", "line 2", "query 'q1', document 'A' judged twice (first on line 1)"),
        ("qid doc_id rel\nqid doc_id rel\n", "line 2", "grade 'rel' is not an integer"),
    ],
)
def test_qrels_errors_name_file_line_and_reason(tmp_path: Path, qrels: str, line: str, fragment: str) -> None:
    path = write(tmp_path / "qrels.tsv", qrels)
    with pytest.raises(InputError) as info:
        load_qrels(path)
    message = str(info.value)
    assert message.startswith(str(path)) and line in message and fragment in message, message


def test_qrels_empty_or_header_only(tmp_path: Path) -> None:
    for text in ("", "qid\tdoc_id\trel\n"):
        with pytest.raises(InputError, match="no judgments found"):
            load_qrels(write(tmp_path / "qrels.tsv", text))


def test_folder_errors(tmp_path: Path) -> None:
    folder = tmp_path / "coll"
    folder.mkdir()
    with pytest.raises(InputError, match="no queries.jsonl in this folder"):
        load_golden(folder)
    write(folder / "queries.jsonl", jsonl({"qid": "1", "query": "q"}))
    with pytest.raises(InputError, match="no qrels found"):
        load_golden(folder)
    # qrels judging a query that queries.jsonl does not hold
    write(folder / "qrels.tsv", "1 A 1\n2 B 1\n")
    error = load_error(folder)
    assert str(folder / "qrels.tsv") in str(error) and "1 judged queries are not in queries.jsonl, e.g. '2'" in str(error)
    # queries.jsonl problems name that file and line
    write(folder / "qrels.tsv", "1 A 1\n")
    write(folder / "queries.jsonl", jsonl({"qid": "1", "query": "q"}, {"qid": "1", "query": "again"}))
    error = load_error(folder)
    assert str(folder / "queries.jsonl") in str(error) and "line 2" in str(error) and "duplicate query id '1'" in str(error)
    write(folder / "queries.jsonl", jsonl({"qid": "1"}))
    assert "missing field 'query' (or BEIR 'text')" in str(load_error(folder))
    write(folder / "queries.jsonl", jsonl({"query": "x"}))
    assert "missing field 'qid' (or BEIR '_id')" in str(load_error(folder))
    write(folder / "queries.jsonl", jsonl({"qid": 1, "query": "x"}))
    assert "qid must be a string" in str(load_error(folder))


def test_unknown_format_and_missing_path(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="file not found"):
        load_golden(tmp_path / "absent.yaml")
    path = write(tmp_path / "golden.csv", "id,question\n")
    with pytest.raises(InputError, match="unknown golden set format"):
        load_golden(path)


# ------------------------------------------------------ unscorable and fingerprint

UNSCORABLE = """\
- id: fine
  question: a
  gold_chunks: {x: 2, y: 1}
- id: only-zero
  question: b
  gold_chunks: {x: 0, z: 0}
- id: only-one
  question: c
  gold_chunks: {y: 1}
"""


def test_unscorable_queries_are_reported_and_never_scored(tmp_path: Path) -> None:
    golden = load_golden(write(tmp_path / "g.yaml", UNSCORABLE))
    assert golden.unscorable() == ["only-zero"]
    assert golden.unscorable(2) == ["only-zero", "only-one"]
    run = {"fine": ["x"], "only-zero": ["x"], "only-one": ["y"]}
    result = evaluate(run, golden.qrels, MeasurementConfig(measures=("recall@5",), relevance_level=2))
    assert result.unscorable == ["only-zero"]  # evaluate follows trec_eval: grades below the level still score
    assert result.below_level == ["only-one"]
    assert result.per_query == {"fine": {"recall@5": 1.0}, "only-one": {"recall@5": 0.0}}


def golden_from(tmp_path: Path, text: str, name: str) -> GoldenSet:
    return load_golden(write(tmp_path / name, text))


def test_fingerprint_tracks_judgments_not_tags_or_order(tmp_path: Path) -> None:
    base = golden_from(tmp_path, SEED_000, "a.yaml").fingerprint()
    assert len(base) == 64
    assert golden_from(tmp_path, SEED_000, "same.yaml").fingerprint() == base
    # a grade changes
    changed = SEED_000.replace("process-death: 3", "process-death: 2")
    assert golden_from(tmp_path, changed, "b.yaml").fingerprint() != base
    # a judgment is added
    added = SEED_000.replace("faq-misc: 0", "faq-misc: 0\n    new-doc: 1")
    assert golden_from(tmp_path, added, "c.yaml").fingerprint() != base
    # a question's text changes
    reworded = SEED_000.replace("How do I persist", "How can I persist")
    assert golden_from(tmp_path, reworded, "d.yaml").fingerprint() != base
    # tags change: no effect on any number, so no new fingerprint
    retagged = SEED_000.replace("tags: [hard, paraphrase]", "tags: [nightly]").replace("tags: [standard]", "")
    assert golden_from(tmp_path, retagged, "e.yaml").fingerprint() == base
    # the same judgments in another order (questions and gold ids)
    reordered = """\
    - id: "003"
      question: 旋转屏幕后状态丢失怎么办？
      gold_chunks: [viewmodel-intro]
    - id: android-hard-002
      question: Why is onSaveInstanceState not called?
      gold_chunks: {faq-misc: 0, process-death: 3, lifecycle-activity-basic: 2}
    - id: android-basic-001
      question: How do I persist state across rotation?
      gold_chunks: [viewmodel-intro, lifecycle-activity-basic]
    """
    assert golden_from(tmp_path, reordered, "f.yaml").fingerprint() == base


def test_fingerprint_is_format_independent(tmp_path: Path) -> None:
    # The same judgments from YAML and from a folder give the same fingerprint.
    yaml_set = golden_from(tmp_path, "- id: '1'\n  question: q\n  gold_chunks: {A: 1, B: 0}\n", "g.yaml")
    folder = tmp_path / "coll"
    write(folder / "queries.jsonl", jsonl({"qid": "1", "query": "q"}))
    write(folder / "qrels.tsv", "1 B 0\n1 A 1\n")
    assert load_golden(folder).fingerprint() == yaml_set.fingerprint()


def test_judgments_digest_changes_with_a_grade(tmp_path: Path) -> None:
    a = golden_from(tmp_path, SEED_000, "a.yaml")["android-hard-002"]
    b = golden_from(tmp_path, SEED_000.replace("faq-misc: 0", "faq-misc: 1"), "b.yaml")["android-hard-002"]
    assert a.judgments_digest() != b.judgments_digest()
    assert len(a.judgments_digest()) == 16
