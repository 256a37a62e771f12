"""Export to TREC and score the export with pytrec_eval: the numbers must survive the trip."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import pytrec_eval

from pytest_ragmetrics import MeasurementConfig, evaluate, load_qrels, read_run
from pytest_ragmetrics.cli import main

GOLDEN = """
- id: q1
  question: first
  gold_chunks: {a: 2, b: 1}
- id: q2
  question: second
  gold_chunks: [c]
"""


def _rankings_artifact(rankings: dict[str, list[str]]) -> str:
    """A run artifact that holds rankings only (its queries unscorable: no metric to check)."""
    return json.dumps({"_meta": {"measurement": {"metrics": ["hit_rate@10"]}}, "comparison": {},
                       "per_query": {q: {"status": "unscorable", "ranking": r} for q, r in rankings.items()}})


def test_artifact_and_golden_round_trip_through_trec(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "golden.yaml").write_text(GOLDEN)
    artifact = tmp_path / "run.json"
    artifact.write_text(json.dumps({"_meta": {"measurement": {"metrics": ["ndcg@10"]}}, "comparison": {}, "per_query": {
        "q1": {"status": "scored", "metrics": {"ndcg@10": 0.5}, "ranking": ["b", "x", "a"]},
        "q2": {"status": "scored", "metrics": {"ndcg@10": 0.0}, "ranking": ["y", "z"]}}}))
    run_out, qrels_out = tmp_path / "run.trec", tmp_path / "qrels.txt"
    assert main(["export", "--artifact", str(artifact), "--run-out", str(run_out),
                 "--golden", str(tmp_path / "golden.yaml"), "--qrels-out", str(qrels_out)]) == 0
    assert read_run(run_out) == {"q1": ["b", "x", "a"], "q2": ["y", "z"]}  # order survives trec_eval's sort
    qrels = load_qrels(qrels_out)
    assert qrels == {"q1": {"a": 2, "b": 1}, "q2": {"c": 1}}
    ours = evaluate(read_run(run_out), qrels, MeasurementConfig(("ndcg@10",), gain="linear")).per_query
    scored = {q: {d: -float(r) for r, d in enumerate(docs, 1)} for q, docs in read_run(run_out).items()}
    ref = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut_10"}).evaluate(scored)
    for qid in ours:
        assert ours[qid]["ndcg@10"] == pytest.approx(ref[qid]["ndcg_cut_10"], abs=1e-12)
    # Existing files are not overwritten by accident.
    assert main(["export", "--artifact", str(artifact), "--run-out", str(run_out)]) == 2
    assert "--force" in capsys.readouterr().err


def test_export_needs_a_pair_of_options(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", "--artifact", "x.json"]) == 2
    assert "--run-out" in capsys.readouterr().err


def test_golden_yaml_of_judgments_is_a_pooled_set_that_merges_into_a_golden_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Judged (or adjudicated) JSONL is pooled: --yaml-out writes a golden YAML set that says so (entries alone
    would read as closed, and a baseline measured pooled would be refused), and --merge adds it to a set."""
    from pytest_ragmetrics.cli import main
    from pytest_ragmetrics.golden import load_golden

    judged = tmp_path / "adjudicated.jsonl"
    judged.write_text(
        '{"_meta": {"kind": "ragmetrics-judgments", "annotator": "adjudicated(a,b)", "judgments": "pooled"}}\n'
        '{"qid": "new-001", "query": "手冲咖啡的水温是多少？", "tags": ["standard"], '
        '"candidates": [{"doc_id": "pour-over", "rel": 2}, {"doc_id": "kettle", "rel": 1}, {"doc_id": "tea", "rel": 0}]}\n'
        '{"qid": "new-002", "query": "How do I oil a chain?", "candidates": [{"doc_id": "chain-lube", "rel": 1}]}\n',
        encoding="utf-8")
    out = tmp_path / "new.yaml"
    assert main(["export", "--golden", str(judged), "--yaml-out", str(out)]) == 0
    assert "declaring judgments: pooled" in capsys.readouterr().out
    written = load_golden(out)
    assert written.judgments == "pooled" and written.judgments_from != "default"
    assert [q.qid for q in written] == ["new-001", "new-002"]
    assert written["new-001"].judgments == {"pour-over": 2, "kettle": 1, "tea": 0}
    assert written["new-001"].text == "手冲咖啡的水温是多少？" and written["new-001"].tags == ("standard",)
    assert "手冲咖啡" in out.read_text(encoding="utf-8")  # readable, not escaped
    assert main(["export", "--golden", str(judged), "--yaml-out", str(out)]) == 2  # never overwritten silently
    golden = tmp_path / "golden.yaml"
    golden.write_text("# our golden set\n- id: old-001\n  question: \"What is a derailleur?\"\n"
                      "  gold_chunks: [derailleur]\n", encoding="utf-8")
    assert main(["export", "--golden", str(golden), "--merge", str(out), "--golden-out", str(golden), "--force"]) == 0
    merged = load_golden(golden)
    assert [q.qid for q in merged] == ["old-001", "new-001", "new-002"] and merged.judgments == "pooled"


def test_golden_yaml_of_a_closed_set_stays_entries_that_append(tmp_path: Path) -> None:
    from pytest_ragmetrics.cli import main
    from pytest_ragmetrics.golden import load_golden

    closed = tmp_path / "closed.yaml"
    closed.write_text("- id: new-001\n  question: q\n  gold_chunks: [a]\n", encoding="utf-8")
    out = tmp_path / "new.yaml"
    assert main(["export", "--golden", str(closed), "--yaml-out", str(out)]) == 0
    golden = tmp_path / "golden.yaml"
    golden.write_text("- id: old-001\n  question: x\n  gold_chunks: [b]\n" + out.read_text(encoding="utf-8"),
                      encoding="utf-8")
    assert [q.qid for q in load_golden(golden)] == ["old-001", "new-001"]


def test_exporting_a_partly_judged_annotator_file_says_what_it_leaves_out(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_ragmetrics.cli import main
    from pytest_ragmetrics.tools.candidates import pool_identity

    pool = tmp_path / "candidates.jsonl"
    questions = [("q1", ["a", "b"]), ("q2", ["c"])]
    pool.write_text(json.dumps({"_meta": {"kind": "ragmetrics-candidates", "pool_id": pool_identity(questions),
                                          "seed": 1}}) + "\n" + "".join(
        json.dumps({"qid": q, "query": f"question {q}", "candidates": [{"doc_id": d, "rel": None} for d in docs]}) + "\n"
        for q, docs in questions), encoding="utf-8")
    alice = tmp_path / "candidates.alice.jsonl"
    alice.write_text(json.dumps({"_meta": {"kind": "ragmetrics-judgments", "annotator": "alice",
                                           "candidates": "candidates.jsonl"}}) + "\n" +
                     json.dumps({"qid": "q1", "query": "question q1",
                                 "candidates": [{"doc_id": "a", "rel": 2, "note": "exactly this"}]}) + "\n",
                     encoding="utf-8")
    assert main(["export", "--golden", str(alice), "--yaml-out", str(tmp_path / "a.yaml")]) == 0
    err = capsys.readouterr().err
    assert "1 of 2 questions and 2 candidates of" in err and "are not judged" in err
    assert "1 note is not kept in the export" in err


@pytest.mark.parametrize("where", ["qid", "doc in golden", "doc in run", "tab in qid", "nbsp in doc"])
def test_ids_a_trec_file_cannot_hold_are_refused_at_export_and_nothing_is_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str) -> None:
    qid = {"qid": "q 1", "tab in qid": "q\t1"}.get(where, "q1")
    golden_doc = {"doc in golden": "tire repair", "nbsp in doc": "tire\u00a0repair"}.get(where, "tire-repair")
    run_doc = "chain lube" if where == "doc in run" else "chain-lube"
    golden = tmp_path / "golden.jsonl"
    golden.write_text(json.dumps({"qid": qid, "query": "flat", "candidates": [{"doc_id": golden_doc, "rel": 1},
                                                                              {"doc_id": "chain-lube", "rel": 0}]})
                      + "\n", encoding="utf-8")
    artifact = tmp_path / "run.json"
    artifact.write_text(_rankings_artifact({qid: [golden_doc, run_doc]}))
    run_out, qrels_out = tmp_path / "run.trec", tmp_path / "qrels.txt"
    code = main(["export", "--artifact", str(artifact), "--run-out", str(run_out),
                 "--golden", str(golden), "--qrels-out", str(qrels_out)])
    out, err = capsys.readouterr()
    assert code == 2 and "Traceback" not in err and out == ""
    assert "holds whitespace, which separates the columns of a TREC file" in err and "nothing was written" in err
    assert repr(qid) in err  # the query named
    assert not run_out.exists() and not qrels_out.exists()


def test_an_export_is_read_back_by_evaluate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "golden.yaml").write_text(GOLDEN)
    artifact = tmp_path / "run.json"
    artifact.write_text(_rankings_artifact({"q1": ["b", "x", "a"], "q2": ["c"]}))
    run_out, qrels_out = tmp_path / "run.trec", tmp_path / "qrels.txt"
    assert main(["export", "--artifact", str(artifact), "--run-out", str(run_out),
                 "--golden", str(tmp_path / "golden.yaml"), "--qrels-out", str(qrels_out)]) == 0
    capsys.readouterr()
    assert main(["evaluate", "--qrels", str(qrels_out), "--run", str(run_out), "-m", "hit_rate@1"]) == 0
    assert re.search(r"\| hit_rate@1 +\| 1\.0000 \|", capsys.readouterr().out)


def test_export_yaml_keeps_judgment_dates_per_judgment(tmp_path) -> None:
    """Judgments dated apart stay dated apart: per judgment in the YAML a golden set reads back."""
    import datetime as dt
    import json as _json

    import yaml

    from pytest_ragmetrics.cli import main
    from pytest_ragmetrics.golden import load_golden

    old, new = dt.date.today() - dt.timedelta(days=400), dt.date.today() - dt.timedelta(days=2)
    source = tmp_path / "g.jsonl"
    source.write_text(_json.dumps({"qid": "q", "query": "text", "judged_at": new.isoformat(), "candidates": [
        {"doc_id": "a", "rel": 2, "judged_at": old.isoformat()}, {"doc_id": "b", "rel": 0}]}) + "\n",
        encoding="utf-8")
    out = tmp_path / "g.yaml"
    assert main(["export", "--golden", str(source), "--yaml-out", str(out)]) == 0
    entry = yaml.safe_load(out.read_text(encoding="utf-8"))["queries"][0]  # a JSONL set is pooled
    assert entry["gold_chunks"] == {"a": {"grade": 2, "judged_at": old}, "b": 0}
    assert entry["judged_at"] == new
    assert load_golden(out)["q"].judgment_dates() == {"a": old, "b": new}


@pytest.mark.parametrize("suffix", [".yaml", ".jsonl"])
def test_export_merge_keeps_dates_and_questions_with_no_answer(tmp_path, suffix: str) -> None:
    """A merged golden set reads back with every date and every answerable: false flag it had,
    and with the annotator's dates on the grades they added."""
    import datetime as dt
    import json as _json

    from pytest_ragmetrics.cli import main
    from pytest_ragmetrics.golden import load_golden

    old, new = dt.date.today() - dt.timedelta(days=300), dt.date.today() - dt.timedelta(days=1)
    golden = tmp_path / "golden.jsonl"
    golden.write_text("".join(_json.dumps(r) + "\n" for r in [
        {"qid": "q1", "query": "how to patch a tube", "judged_at": old.isoformat(),
         "candidates": [{"doc_id": "patch", "rel": 2}]},
        {"qid": "q2", "query": "best sourdough starter", "answerable": False,
         "candidates": [{"doc_id": "patch", "rel": 0, "judged_at": old.isoformat()}]},
        {"qid": "q3", "query": "passport renewal", "answerable": False},
    ]), encoding="utf-8")
    grades = tmp_path / "grades.jsonl"
    grades.write_text("".join(_json.dumps(r) + "\n" for r in [
        {"qid": "q1", "query": "how to patch a tube", "candidates": [{"doc_id": "levers", "rel": 1, "judged_at": new.isoformat()}]},
        {"qid": "q2", "query": "best sourdough starter", "answerable": False,
         "candidates": [{"doc_id": "bread", "rel": 0, "judged_at": new.isoformat()}]},
    ]), encoding="utf-8")
    out = tmp_path / f"merged{suffix}"
    assert main(["export", "--golden", str(golden), "--merge", str(grades), "--golden-out", str(out)]) == 0
    merged = load_golden(out)
    assert merged["q1"].judgment_dates() == {"patch": old, "levers": new}
    assert not merged["q2"].answerable and merged["q2"].judgments == {"patch": 0, "bread": 0}
    assert merged["q2"].judgment_dates() == {"patch": old, "bread": new}
    assert not merged["q3"].answerable and dict(merged["q3"].judgments) == {}


def test_export_merge_says_when_a_question_with_no_answer_gets_one(tmp_path, capsys) -> None:
    import json as _json

    from pytest_ragmetrics.cli import main
    from pytest_ragmetrics.golden import load_golden

    golden = tmp_path / "golden.jsonl"
    golden.write_text(_json.dumps({"qid": "q2", "query": "tyre pressure for a car", "answerable": False}) + "\n",
                      encoding="utf-8")
    grades = tmp_path / "grades.jsonl"
    grades.write_text(_json.dumps({"qid": "q2", "query": "tyre pressure for a car",
                                   "candidates": [{"doc_id": "tire-pressure", "rel": 1}]}) + "\n", encoding="utf-8")
    out = tmp_path / "merged.yaml"
    assert main(["export", "--golden", str(golden), "--merge", str(grades), "--golden-out", str(out)]) == 0
    assert "q2: was marked answerable: false, but tire-pressure graded relevant" in capsys.readouterr().err
    assert load_golden(out)["q2"].answerable


def test_export_merge_refuses_grades_judged_under_another_text(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """Grades made for one question do not silently become judgments of another that took its id."""
    from pytest_ragmetrics.golden import load_golden

    golden = tmp_path / "golden.yaml"
    golden.write_text(GOLDEN, encoding="utf-8")
    grades = tmp_path / "grades.jsonl"
    grades.write_text(json.dumps({"qid": "q1", "query": "how do I cancel my plan",
                                  "candidates": [{"doc_id": "z", "rel": 2}]}) + "\n"
                      + json.dumps({"qid": "q\u202e2", "query": "new one",
                                    "candidates": [{"doc_id": "y", "rel": 1}]}) + "\n", encoding="utf-8")
    out = tmp_path / "merged.yaml"
    code = main(["export", "--golden", str(golden), "--merge", str(grades), "--golden-out", str(out)])
    err = capsys.readouterr().err
    assert code == 2
    assert f"{grades}: judges 1 question under another text than {golden}: 'q1': 'first' in {golden}, " \
           "'how do I cancel my plan' judged; the grades may be for another question: pass " \
           "--accept-changed-text" in err
    assert not out.exists()
    code = main(["export", "--golden", str(golden), "--merge", str(grades), "--golden-out", str(out),
                 "--accept-changed-text"])
    err = capsys.readouterr().err
    assert code == 0
    assert "note: q1: merged grades judged under another text ('how do I cancel my plan'; kept 'first')" in err
    merged = load_golden(out)
    assert merged["q1"].text == "first" and merged["q1"].judgments["z"] == 2
    # whitespace is no other text; an id is printed escaped
    golden.write_text(GOLDEN.replace("question: first", "question: '  first '"), encoding="utf-8")
    grades.write_text(json.dumps({"qid": "q1", "query": "first", "candidates": [{"doc_id": "a", "rel": 0}]}) + "\n",
                      encoding="utf-8")
    golden.write_text(golden.read_text(encoding="utf-8").replace("id: q1", "id: \"q\\u202e1\""), encoding="utf-8")
    grades.write_text(json.dumps({"qid": "q\u202e1", "query": "first",
                                  "candidates": [{"doc_id": "a", "rel": 0}]}) + "\n", encoding="utf-8")
    code = main(["export", "--golden", str(golden), "--merge", str(grades), "--golden-out", str(out), "--force"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "note: regraded q\\u202e1: a 2 -> 0" in err and "\u202e" not in err


# ------------------------------------------------- a merge keeps the golden YAML's comments and layout

COMMENTED_GOLDEN = """\
# The bike shop's golden set.
# Reviewed every quarter; ask Ana before changing a grade.

- id: q-001   # the first question we ever asked
  question: how do I fix a flat tire
  gold_chunks: [tire-repair]
  tags: [standard, smoke]

# Brakes: two documents, graded.
- id: q-002
  question: "why do my brakes squeal"
  gold_chunks:
    brake-pads: 2   # the main answer
    brake-cable: 1  # a partial one
  tags: [paraphrase]

- id: q-003
  question: what tire pressure for gravel   # asked by the gravel team
  gold_chunks: [tire-pressure]
  judged_at: 2026-01-05
"""

ANNOTATED = """\
- id: q-002
  question: why do my brakes squeal
  gold_chunks: {brake-pads: 1, rim-wear: 2}
- id: q-004
  question: cleaning a dirty cassette
  gold_chunks: {cassette: 2, degreaser: 1}
  tags: [paraphrase]
"""


def _merge_into(golden: Path, capsys: pytest.CaptureFixture[str]) -> str:
    grades = golden.parent / "alice.yaml"
    grades.write_text(ANNOTATED, encoding="utf-8")
    assert main(["export", "--golden", str(golden), "--merge", str(grades), "--golden-out", str(golden),
                 "--force"]) == 0, capsys.readouterr().err
    return golden.read_text(encoding="utf-8")


def _comments(text: str) -> list[str]:
    return [line[line.index("#"):].rstrip() for line in text.splitlines() if "#" in line]


def test_a_merge_into_a_golden_yaml_keeps_its_comments_and_layout(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    golden = tmp_path / "golden.yaml"
    golden.write_text(COMMENTED_GOLDEN, encoding="utf-8")
    merged = _merge_into(golden, capsys)
    assert _comments(merged) == _comments(COMMENTED_GOLDEN)  # top, per-record and end-of-line, in order
    lines = merged.splitlines()
    # the top comments stay on top; the records are where they were, under the declaration
    assert lines[:5] == ["# The bike shop's golden set.", "# Reviewed every quarter; ask Ana before changing a "
                         "grade.", "", "judgments: pooled", "queries:"]
    untouched = COMMENTED_GOLDEN.split("# Brakes")[0].split("\n\n", 1)[1]  # q-001, as written
    assert untouched in merged
    assert COMMENTED_GOLDEN.split("\n\n")[-1] in merged  # q-003, its date and its comment, as written
    assert "    brake-pads: 1   # the main answer\n    brake-cable: 1  # a partial one\n    rim-wear: 2\n" in merged
    assert merged.index("id: q-003") < merged.index("id: q-004")  # a new question is appended


def test_a_merged_golden_yaml_loads_as_the_golden_set_plus_the_changes(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """The same merge of the set without its comments (written afresh) is the golden set expected."""
    from pytest_ragmetrics.golden import load_golden

    golden = tmp_path / "golden.yaml"
    golden.write_text(COMMENTED_GOLDEN, encoding="utf-8")
    plain = tmp_path / "plain.yaml"
    plain.write_text("\n".join(line.split("#")[0].rstrip() for line in COMMENTED_GOLDEN.splitlines()) + "\n",
                     encoding="utf-8")
    _merge_into(golden, capsys)
    grades = tmp_path / "alice.yaml"
    assert main(["export", "--golden", str(plain), "--merge", str(grades), "--golden-out",
                 str(tmp_path / "expected.jsonl")]) == 0
    kept, expected = load_golden(golden), load_golden(tmp_path / "expected.jsonl")
    assert kept.judgments == expected.judgments == "pooled"
    assert [(q.qid, q.text, dict(q.judgments), q.tags, q.judgment_dates()) for q in kept] == \
           [(q.qid, q.text, dict(q.judgments), q.tags, q.judgment_dates()) for q in expected]
    assert dict(kept["q-002"].judgments) == {"brake-pads": 1, "brake-cable": 1, "rim-wear": 2}
    assert dict(kept["q-004"].judgments) == {"cassette": 2, "degreaser": 1}


def test_a_merge_into_a_golden_mapping_sets_its_judgments_and_keeps_the_rest(tmp_path: Path,
                                                                             capsys: pytest.CaptureFixture[str]) -> None:
    golden = tmp_path / "golden.yaml"
    text = ("# header\njudgments: closed   # every relevant document is listed\nqueries:\n"
            + "".join(f"  {line}\n" if line else "\n" for line in COMMENTED_GOLDEN.split("\n\n", 1)[1].splitlines()))
    golden.write_text(text, encoding="utf-8")
    merged = _merge_into(golden, capsys)
    assert merged.startswith("# header\njudgments: pooled   # every relevant document is listed\nqueries:\n"
                             "  - id: q-001   # the first question we ever asked\n")
    assert _comments(merged) == _comments(text)
    assert "      rim-wear: 2\n" in merged and "  - id: q-004\n" in merged


def test_a_golden_yaml_whose_layout_cannot_be_kept_is_written_afresh_and_says_so(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    golden = tmp_path / "golden.yaml"
    golden.write_text("# one line of questions\n[{id: q-002, question: why do my brakes squeal, gold_chunks: "
                      "[brake-pads]}]\n", encoding="utf-8")
    merged = _merge_into(golden, capsys)
    assert f"note: {golden}: its comments and layout could not be kept" in capsys.readouterr().err
    from pytest_ragmetrics.golden import load_golden

    assert dict(load_golden(golden)["q-002"].judgments) == {"brake-pads": 1, "rim-wear": 2}
    assert "judgments: pooled" in merged
