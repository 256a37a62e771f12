"""Malformed inputs through the user-facing surfaces, one test per input.

Every golden set (YAML, JSONL, folder with queries.jsonl + qrels), baseline.json and
thresholds.json below goes through a real ``pytest --rag-eval`` session (pytester):
the run must stop with pytest's usage-error exit code and a one-paragraph message
naming the file, the record or line and the problem, without "Traceback" or
"INTERNALERROR" anywhere, before the retriever is ever called, and leave every file
exactly as it was (bytes and mtime). TREC run and qrels files go through the
``ragmetrics evaluate`` CLI: exit code 2, the same kind of message, no traceback.

The library-level loader tests are in tests/test_golden.py and tests/test_trec.py;
these check what a user sees.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest

from ragproject import RagProject, rag_summary
from trust_helpers import FAST, assert_usage_error, clean_env, no_traceback, snapshot

from pytest_ragmetrics.gate.baseline import Baseline
from pytest_ragmetrics.cli import main

# ------------------------------------------------------------------------ YAML

GOOD_RECORD = "- id: q1\n  question: how do I fix a flat tire\n  gold_chunks: [tire-repair]\n"


def _laughs(levels: int = 9, width: int = 9) -> str:
    """A YAML flow sequence whose last element expands to width**levels strings through aliases."""
    parts = ["&a0 [" + ", ".join(["lol"] * width) + "]"]
    parts += [f"&a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]" for i in range(1, levels)]
    return "[" + ", ".join(parts) + "]"


YAML_CASES: dict[str, tuple[bytes, list[str]]] = {
    "empty-file": (b"", ["the file is empty"]),
    "only-comments": (b"# questions go here\n\n", ["the file is empty"]),
    "a-scalar": (b"just a sentence\n", ["expected a YAML list of questions, got a str"]),
    "a-mapping": (b"id: q1\nquestion: x\ngold_chunks: [a]\n", ["expected a YAML list of questions, got a dict"]),
    "record-not-a-mapping": ((GOOD_RECORD + "- just some text\n").encode(),
                             ["record 2", "expected a mapping with id, question, gold_chunks"]),
    "missing-id": ((GOOD_RECORD + "- question: what\n  gold_chunks: [a]\n").encode(),
                   ["record 2 (line 4)", "missing field 'id'"]),
    "missing-question": ((GOOD_RECORD + "- id: q2\n  gold_chunks: [a]\n").encode(),
                         ["record 2 (line 4)", "missing field 'question'"]),
    "missing-gold": ((GOOD_RECORD + "- id: q2\n  question: what\n").encode(),
                     ["record 2 (line 4)", "missing field 'gold_chunks'"]),
    "empty-gold-list": ((GOOD_RECORD + "- id: q2\n  question: what\n  gold_chunks: []\n").encode(),
                        ["record 2 (line 4, id 'q2')", "gold_chunks is empty"]),
    "null-gold": ((GOOD_RECORD + "- id: q2\n  question: what\n  gold_chunks:\n").encode(),
                  ["record 2 (line 4, id 'q2')", "gold_chunks is empty"]),
    "misspelt-key": ((GOOD_RECORD + "- id: q2\n  question: what\n  gold_chunks: [a]\n  tag: [smoke]\n").encode(),
                     ["record 2 (line 4, id 'q2')", "unknown key 'tag'", "did you mean 'tags'?"]),
    "question-cut-by-a-comma": ((GOOD_RECORD + "- {id: q2, question: It tastes sour, what now?, gold_chunks: [a]}\n")
                                .encode(), ["record 2 (line 4, id 'q2')", "unknown key 'what now?'",
                                            "quote the question"]),
    "gold-a-scalar": (b"- id: q1\n  question: what\n  gold_chunks: tire-repair\n",
                      ["record 1 (line 1, id 'q1')", "gold_chunks must be a list of ids or a mapping id -> grade, got str"]),
    "float-grade": (b"- id: q1\n  question: what\n  gold_chunks: {tire-repair: 1.5}\n",
                    ["record 1 (line 1, id 'q1')", "grade of 'tire-repair' must be an integer >= 0, got 1.5"]),
    "negative-grade": (b"- id: q1\n  question: what\n  gold_chunks: {tire-repair: -1}\n",
                       ["record 1", "grade of 'tire-repair' is -1; grades must be integers >= 0"]),
    "boolean-grade": (b"- id: q1\n  question: what\n  gold_chunks: {tire-repair: yes}\n",
                      ["record 1", "grade of 'tire-repair' must be an integer >= 0, got True"]),
    "string-grade": (b"- id: q1\n  question: what\n  gold_chunks: {tire-repair: '2'}\n",
                     ["record 1", "grade of 'tire-repair' must be an integer >= 0, got '2'"]),
    "grade-that-overflows-the-gain": (b"- id: q1\n  question: what\n  gold_chunks: {tire-repair: 5000}\n",
                                      ["record 1", "grade of 'tire-repair' is 5000; grades above 1000 are not supported"]),
    "integer-id": (b"- id: 42\n  question: what\n  gold_chunks: [a]\n",
                   ["record 1 (line 1)", "id must be a string, got int 42 (quote it)"]),
    "date-id": (b"- id: 2024-05-01\n  question: what\n  gold_chunks: [a]\n",
                ["record 1 (line 1)", "id must be a string, got date"]),
    "integer-gold-document": (b"- id: q1\n  question: what\n  gold_chunks: [123]\n",
                              ["record 1 (line 1, id 'q1')", "a gold document id must be a string, got int 123"]),
    "empty-question": (b"- id: q1\n  question: ''\n  gold_chunks: [a]\n", ["record 1 (line 1, id 'q1')", "question is empty"]),
    "tags-a-mapping": (b"- id: q1\n  question: what\n  gold_chunks: [a]\n  tags: {hard: 1}\n",
                       ["record 1", "tags must be a list of strings, got dict"]),
    "duplicate-ids": ((GOOD_RECORD + GOOD_RECORD.replace("flat tire", "puncture")).encode(),
                      ["record 2 (line 4, id 'q1')", "duplicate query id 'q1' (first at record 1"]),
    "gold-listed-twice": (b"- id: q1\n  question: what\n  gold_chunks: [a, b, a]\n",
                          ["record 1", "gold document 'a' is listed twice"]),
    "duplicate-key": (b"- id: q1\n  question: what\n  question: again\n  gold_chunks: [a]\n",
                      ["line 3", "duplicate key 'question'"]),
    "unclosed-bracket": (b"- id: q1\n  question: what\n  gold_chunks: [a, b\n- id: q2\n",
                         ["line", "invalid YAML"]),
    "tab-indentation": (b"- id: q1\n\tquestion: what\n", ["line 2", "invalid YAML"]),
    "latin-1-encoding": ("- id: q1\n  question: caf\u00e9 au lait\n  gold_chunks: [a]\n".encode("latin-1"),
                         ["line 2", "not valid UTF-8 (byte offset 24); save the file as UTF-8"]),
    "utf-16-with-bom": (GOOD_RECORD.encode("utf-16"), ["line 1", "not valid UTF-8 (byte offset 0)"]),
    "nul-character": (b"- id: q1\n  question: \"a\x00b\"\n  gold_chunks: [a]\n",
                      ["line 2", "character #x0000 is not allowed"]),
    "python-object-apply-os-system": (b"- id: !!python/object/apply:os.system ['touch PWNED']\n"
                                      b"  question: what\n  gold_chunks: [a]\n",
                                      ["line 1", "python/object/apply:os.system", "refused, never run"]),
    "python-name": (b"- id: q1\n  question: !!python/name:os.system ''\n  gold_chunks: [a]\n",
                    ["line 2", "python/name:os.system", "refused, never run"]),
    "python-object-new-popen": (b"- id: q1\n  question: what\n"
                                b"  gold_chunks: !!python/object/new:subprocess.Popen [[touch, PWNED]]\n",
                                ["line 3", "python/object/new:subprocess.Popen", "refused, never run"]),
    "merge-key": (b"- &base {id: q1, question: what, gold_chunks: [a]}\n- <<: *base\n  id: q2\n",
                  ["line 2", "merge keys (<<) are not supported"]),
    "deep-nesting": (b"[" * 50_000 + b"]" * 50_000, ["invalid YAML", "nest"]),
    "5000-digit-integer": (b"- id: q1\n  question: what\n  gold_chunks: {a: " + b"9" * 5000 + b"}\n",
                           ["invalid YAML", "4300 digits"]),
    "8-MB-of-binary-garbage": (random.Random(6).randbytes(8 << 20), ["line", "not valid UTF-8"]),
    "gold-id-holding-the-id-separator": (
        (GOOD_RECORD + "- id: q2\n  question: shipping\n  gold_chunks: [faq#shipping]\n").encode(),
        ["record 2 (line 4, id 'q2')", "gold document 'faq#shipping' contains the id separator '#'",
         "rag_id_separator = none", "a separator no document id contains"]),
    "graded-gold-id-holding-the-id-separator": (
        b"- id: q1\n  question: shipping\n  gold_chunks: {faq: 1, 'faq#shipping': 2}\n",
        ["record 1 (line 1, id 'q1')", "'faq#shipping' contains the id separator '#'"]),
}


@pytest.mark.parametrize("content, needles", YAML_CASES.values(), ids=YAML_CASES.keys())
def test_malformed_yaml_golden_set(project: RagProject, content: bytes, needles: list[str]) -> None:
    (project.path / "golden.yaml").write_bytes(content)
    before = snapshot(project.path)
    result = project.run()
    assert_usage_error(result, "golden.yaml", *needles)
    assert snapshot(project.path) == before  # nothing written, no PWNED, no calls.log
    assert project.calls() == []


@pytest.mark.parametrize("separator, answer, gold", [
    ("none", ["faq#shipping", "faq#returns"], "faq#shipping"),  # passage-level labels, judged as given
    ("::", ["faq#shipping::2", "faq#returns::1"], "faq#shipping"),  # another separator, documents named with '#'
], ids=["no-separator", "another-separator"])
def test_a_gold_id_with_the_default_separator_scores_under_either_fix(
        project: RagProject, separator: str, answer: list[str], gold: str) -> None:
    """The two fixes the refusal names both work: the query is scored, and scored 1."""
    project.golden([{"id": "q1", "question": "when does my parcel ship", "gold_chunks": [gold]}])
    project.answer(q1=answer)
    project.ini(rag_id_separator=separator)
    result = project.run("--rag-update-baseline")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert project.baseline()["per_query"]["q1"]["recall@10"] == 1.0


# Alias bombs ("billion laughs"): parsing shares the repeated objects, so the danger
# is any code that walks or prints the expansion (an error message's repr). Each runs
# in a subprocess with a memory cap and a timeout, so a regression fails instead of
# hanging the suite or eating the machine.
ALIAS_BOMBS: dict[str, tuple[str, list[str]]] = {
    "bomb-as-id": (f"- id: {_laughs()}\n  question: what\n  gold_chunks: [a]\n",
                   ["record 1 (line 1)", "id must be a string, got list"]),
    "bomb-as-record": (f"- {_laughs()}\n", ["record 1", "expected a mapping with id, question, gold_chunks; got"]),
    "bomb-as-gold-list": (f"- id: q1\n  question: what\n  gold_chunks: {_laughs()}\n",
                          ["record 1 (line 1, id 'q1')", "a gold document id must be a string, got list"]),
    "bomb-as-grade": (f"- id: q1\n  question: what\n  gold_chunks: {{a: {_laughs()}}}\n",
                      ["record 1 (line 1, id 'q1')", "grade of 'a' must be an integer >= 0, got"]),
    "bomb-as-tags": (f"- id: q1\n  question: what\n  gold_chunks: [a]\n  tags: {_laughs()}\n",
                     ["record 1 (line 1, id 'q1')", "a tag must be a string, got list"]),
}


def _capped() -> None:  # pragma: no cover - runs in the child
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


@pytest.mark.parametrize("content, needles", ALIAS_BOMBS.values(), ids=ALIAS_BOMBS.keys())
def test_yaml_alias_bomb_errors_quickly_and_bounded(project: RagProject, content: str, needles: list[str]) -> None:
    (project.path / "golden.yaml").write_text(content, encoding="utf-8")
    before = snapshot(project.path)
    proc = subprocess.run([sys.executable, "-m", "pytest", "--rag-eval", *FAST], cwd=project.path,
                          env=clean_env(), capture_output=True, text=True, timeout=120, preexec_fn=_capped)
    no_traceback(proc.stdout + proc.stderr)
    assert proc.returncode == pytest.ExitCode.USAGE_ERROR, proc.stderr[-2000:]
    message = proc.stderr.strip()
    assert message.startswith("ERROR: ragmetrics: ") and "golden.yaml" in message
    assert len(message) < 1000  # the expansion is not printed
    for needle in needles:
        assert needle in message, message
    assert snapshot(project.path) == before


# ----------------------------------------------------------------------- JSONL


def _line(**record: object) -> str:
    return json.dumps(record) + "\n"


GOOD_LINE = _line(qid="q1", query="flat tire", candidates=[{"doc_id": "tire-repair", "rel": 1}])


def _candidate(**fields: object) -> str:
    return _line(qid="q2", query="what", candidates=[{"doc_id": "d", "rel": 1, **fields}])


JSONL_CASES: dict[str, tuple[str | bytes, list[str]]] = {
    "empty-file": ("", ["the golden set holds no questions"]),
    "blank-lines-only": ("\n\n   \n", ["the golden set holds no questions"]),
    "line-not-an-object": (GOOD_LINE + "[1, 2]\n", ["line 2", "expected a JSON object with qid, query, candidates"]),
    "missing-qid": (GOOD_LINE + _line(query="what", candidates=[]), ["line 2", "missing field 'qid'"]),
    "missing-candidates": (GOOD_LINE + _line(qid="q2", query="what"), ["line 2", "missing field 'candidates'"]),
    "empty-candidates": (GOOD_LINE + _line(qid="q2", query="what", candidates=[]),
                         ["line 2 (qid 'q2')", "candidates must be a non-empty list"]),
    "candidate-not-an-object": (GOOD_LINE + _line(qid="q2", query="what", candidates=["d"]),
                                ["line 2 (qid 'q2')", "candidate 1 must be an object with doc_id and rel"]),
    "rel-null": (GOOD_LINE + _candidate(rel=None), ["line 2 (qid 'q2')", "candidate 1 ('d') has no rel"]),
    "rel-float": (GOOD_LINE + _candidate(rel=0.5), ["line 2 (qid 'q2')", "grade of 'd' must be an integer >= 0, got 0.5"]),
    "rel-negative": (GOOD_LINE + _candidate(rel=-2), ["line 2 (qid 'q2')", "grade of 'd' is -2"]),
    "rel-string": (GOOD_LINE + _candidate(rel="1"), ["line 2 (qid 'q2')", "got '1'"]),
    "rel-boolean": (GOOD_LINE + _candidate(rel=True), ["line 2 (qid 'q2')", "got True"]),
    "rel-nan": (GOOD_LINE + '{"qid": "q2", "query": "what", "candidates": [{"doc_id": "d", "rel": NaN}]}\n',
                ["line 2 (qid 'q2')", "got nan"]),
    "rel-overflowing-gain": (GOOD_LINE + _candidate(rel=2000), ["line 2 (qid 'q2')", "grades above 1000"]),
    "integer-doc-id": (GOOD_LINE + _line(qid="q2", query="what", candidates=[{"doc_id": 7, "rel": 1}]),
                       ["line 2 (qid 'q2')", "candidate 1 doc_id must be a string, got int 7"]),
    "integer-qid": (GOOD_LINE + _line(qid=2, query="what", candidates=[{"doc_id": "d", "rel": 1}]),
                    ["line 2", "qid must be a string, got int 2"]),
    "mode-not-a-string": (GOOD_LINE + _line(qid="q2", query="what", mode=3, candidates=[{"doc_id": "d", "rel": 1}]),
                          ["line 2 (qid 'q2')", "mode must be a string"]),
    "invalid-json": (GOOD_LINE + '{"qid": "q2", "query": "what",}\n', ["line 2", "invalid JSON"]),
    "repeated-key": (GOOD_LINE + '{"qid": "q2", "query": "w", "candidates": [{"doc_id": "d", "rel": 0, "rel": 2}]}\n',
                     ["line 2", "invalid JSON: duplicate key 'rel'", "(column 70)"]),
    "gold-id-holding-the-id-separator": (GOOD_LINE + _line(qid="q2", query="w", candidates=[{"doc_id": "faq#2", "rel": 1}]),
                                         ["line 2 (qid 'q2')", "'faq#2' contains the id separator '#'"]),
    "duplicate-qid": (GOOD_LINE + GOOD_LINE, ["line 2 (qid 'q1')", "duplicate query id 'q1' (first at line 1"]),
    "lone-surrogate-in-the-query": (GOOD_LINE + _line(qid="q2", query="what\ud800", candidates=[{"doc_id": "d", "rel": 1}]),
                                    ["line 2", "field query holds a lone surrogate", "not valid Unicode"]),
    "lone-surrogate-in-a-doc-id": (GOOD_LINE + _line(qid="q2", query="w", candidates=[{"doc_id": "d\udfff", "rel": 1}]),
                                   ["line 2", "field candidates[0].doc_id holds a lone surrogate"]),
    "lone-surrogate-in-a-key": (GOOD_LINE + '{"qid": "q2", "query": "w", "\\ud800": 1, "candidates": []}\n',
                                ["line 2", "the key '\\ud800' holds a lone surrogate"]),
    "bom-in-the-middle": (GOOD_LINE + "\ufeff" + _candidate(), ["line 2", "invalid JSON"]),
    "5000-digit-integer": (GOOD_LINE + '{"qid": "q2", "query": "w", "candidates": [{"doc_id": "d", "rel": '
                           + "9" * 5000 + "}]}\n", ["line 2", "invalid JSON", "4300 digits"]),
    "deep-nesting": (GOOD_LINE + "[" * 100_000 + "]" * 100_000 + "\n", ["line 2", "invalid JSON: nested too deeply"]),
    # the large ones are made when their test runs, not when every worker collects the module
    "huge-file-bad-last-line": (lambda: "".join(_line(qid=f"q{i}", query=f"question {i}",
                                                      candidates=[{"doc_id": f"d{i}", "rel": 1}])
                                                for i in range(100_000))
                                + _line(qid="last", query="what", candidates=[]),
                                ["line 100001 (qid 'last')", "candidates must be a non-empty list"]),
    "huge-single-line": (lambda: GOOD_LINE + '{"qid": "q2", "query": "' + "x" * (5 << 20) + "\n",
                         ["line 2", "invalid JSON"]),
    "latin-1-encoding": ((GOOD_LINE + _line(qid="q2", query="caf\u00e9", candidates=[{"doc_id": "d", "rel": 1}])
                          .replace("\\u00e9", "\u00e9")).encode("latin-1"), ["line 2", "not valid UTF-8"]),
    # saved with classic Mac line endings: read as one line, it failed with "Extra data (column N)"
    "cr-line-endings": ((GOOD_LINE + GOOD_LINE.replace('"q1"', '"q2"')).replace("\n", "\r"),
                        ["golden.jsonl: uses CR line endings", "save it with LF line endings"]),
}


@pytest.mark.parametrize("content, needles", JSONL_CASES.values(), ids=JSONL_CASES.keys())
def test_malformed_jsonl_golden_set(project: RagProject, content: str | bytes | Callable[[], str],
                                   needles: list[str]) -> None:
    path = project.path / "golden.jsonl"
    if callable(content):
        content = content()
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    project.ini(rag_golden="golden.jsonl")
    before = snapshot(project.path)
    result = project.run()
    assert_usage_error(result, "golden.jsonl", *needles)
    assert snapshot(project.path) == before
    assert project.calls() == []


def test_a_lone_surrogate_in_a_golden_jsonl_is_refused_before_a_report_is_written(project: RagProject) -> None:
    """It parses, but no report could hold it: the artifact writer could not encode it."""
    (project.path / "golden.jsonl").write_text(
        GOOD_LINE + _line(qid="q2", query="what", tags=["t\ud83d"], candidates=[{"doc_id": "d", "rel": 1}]),
        encoding="utf-8")
    project.ini(rag_golden="golden.jsonl")
    result = project.run("--rag-report=out.json")
    assert_usage_error(result, "golden.jsonl, line 2", "field tags[0] holds a lone surrogate", "not valid Unicode")
    assert not (project.path / "out.json").exists()


# ----------------------------------------------------------- folder: queries.jsonl + qrels

QUERIES = _line(qid="q1", query="flat tire") + _line(qid="q2", query="chain lube")
QRELS = "q1\ttire-repair\t1\nq2\tchain-lube\t2\n"

FOLDER_CASES: dict[str, tuple[dict[str, str], str, list[str]]] = {
    "no-queries-file": ({"qrels.tsv": QRELS}, "coll", ["no queries.jsonl in this folder"]),
    "no-qrels-file": ({"queries.jsonl": QUERIES}, "coll", ["no qrels found"]),
    "qrels-two-columns": ({"queries.jsonl": QUERIES, "qrels.tsv": "q1\ttire-repair\n"}, "qrels.tsv",
                          ["line 1", "expected 3 (qid doc grade) or 4 (qid iter doc grade) columns, got 2"]),
    "qrels-mixed-columns": ({"queries.jsonl": QUERIES, "qrels.tsv": "q1 0 tire-repair 1\nq2 chain-lube 1\n"},
                            "qrels.tsv", ["line 2", "expected 4 columns like the lines before, got 3"]),
    "qrels-non-integer-grade": ({"queries.jsonl": QUERIES, "qrels.tsv": "q1\ttire-repair\thigh\n"}, "qrels.tsv",
                                ["line 1", "grade 'high' is not an integer"]),
    "qrels-negative-grade": ({"queries.jsonl": QUERIES, "qrels.tsv": "q1\ttire-repair\t-1\n"}, "qrels.tsv",
                             ["line 1", "grades must be integers >= 0"]),
    "qrels-overflowing-grade": ({"queries.jsonl": QUERIES, "qrels.tsv": "q1\ttire-repair\t99999\n"}, "qrels.tsv",
                                ["line 1", "grades above 1000 are not supported"]),
    "qrels-judged-twice": ({"queries.jsonl": QUERIES, "qrels.tsv": QRELS + "q1\ttire-repair\t2\n"}, "qrels.tsv",
                           ["line 3", "query 'q1', document 'tire-repair' judged twice (first on line 1)"]),
    "qrels-empty": ({"queries.jsonl": QUERIES, "qrels.tsv": "\n"}, "qrels.tsv", ["no judgments found"]),
    "qrels-unknown-query": ({"queries.jsonl": QUERIES, "qrels.tsv": QRELS + "q9\tx\t1\n"}, "qrels.tsv",
                            ["1 judged queries are not in queries.jsonl, e.g. 'q9'"]),
    "queries-missing-text": ({"queries.jsonl": QUERIES + _line(qid="q3"), "qrels.tsv": QRELS}, "queries.jsonl",
                             ["line 3", "missing field 'query' (or BEIR 'text')"]),
    "queries-duplicate-id": ({"queries.jsonl": QUERIES + _line(qid="q1", query="again"), "qrels.tsv": QRELS},
                             "queries.jsonl", ["line 3", "duplicate query id 'q1' (first on line 1)"]),
    "queries-not-json": ({"queries.jsonl": QUERIES + "qid: q3\n", "qrels.tsv": QRELS}, "queries.jsonl",
                         ["line 3", "invalid JSON"]),
    "queries-repeated-key": ({"queries.jsonl": QUERIES + '{"qid": "q3", "query": "a", "query": "b"}\n',
                              "qrels.tsv": QRELS}, "queries.jsonl", ["line 3", "invalid JSON: duplicate key 'query'"]),
    "qrels-passage-ids-under-the-default-separator": (
        {"queries.jsonl": QUERIES, "qrels.tsv": "q1\ttire-repair#2\t1\nq2\tchain-lube\t2\n"}, "coll",
        ["query 'q1': gold document 'tire-repair#2' contains the id separator '#'", "rag_id_separator = none"]),
}


@pytest.mark.parametrize("files, named, needles", FOLDER_CASES.values(), ids=FOLDER_CASES.keys())
def test_malformed_collection_folder(project: RagProject, files: dict[str, str], named: str,
                                     needles: list[str]) -> None:
    folder = project.path / "coll"
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    project.ini(rag_golden="coll")
    before = snapshot(project.path)
    result = project.run()
    assert_usage_error(result, named, *needles)
    assert snapshot(project.path) == before
    assert project.calls() == []


# -------------------------------------------------------------------- baseline.json


def _edit(change: Callable[[dict], object], sealed: bool = False) -> Callable[[str], str]:
    """``sealed``: the edited file is sealed again, as if it had been measured that way (the
    case is what it holds, not that it was edited: an unsealed edit is refused before any of these)."""
    def apply(text: str) -> str:
        data = json.loads(text)
        change(data)
        if sealed:
            data = Baseline(data["_meta"], data["aggregate"], data["per_query"]).to_dict()
        return json.dumps(data, indent=2)
    return apply


def _rename_queries(data: dict) -> None:
    data["per_query"] = {f"other-{qid}": entry for qid, entry in data["per_query"].items()}


BASELINE_CASES: dict[str, tuple[Callable[[str], str | bytes], list[str]]] = {
    "truncated": (lambda text: text[: len(text) // 2], ["not valid JSON", "line", "restore it from version control"]),
    "empty-file": (lambda text: "", ["line 1: not valid JSON"]),
    "a-list": (lambda text: "[]", ["expected a JSON object with _meta, aggregate and per_query"]),
    "missing-per-query": (_edit(lambda d: d.pop("per_query")), ["missing key 'per_query'"]),
    "aggregate-not-an-object": (_edit(lambda d: d.update(aggregate=[0.5])), ["'aggregate' must be an object"]),
    "per-query-entry-a-list": (_edit(lambda d: d["per_query"].update({"q-002": [1.0]})),
                               ["per_query.q-002 must be an object of metric values"]),
    "nan-value": (lambda text: text.replace('"recall@10": 1.0', '"recall@10": NaN', 1),
                  ["NaN is not a valid metric value"]),
    "infinite-value": (lambda text: text.replace('"mrr@10": 1.0', '"mrr@10": Infinity', 1),
                       ["Infinity is not a valid metric value"]),
    "value-above-one": (_edit(lambda d: d["per_query"]["q-003"].update({"recall@10": 1.5})),
                        ["per_query.q-003.recall@10 = 1.5 is outside [0, 1]"]),
    "negative-value": (_edit(lambda d: d["aggregate"].update({"ndcg@10": -0.25})),
                       ["aggregate.ndcg@10 = -0.25 is outside [0, 1]"]),
    "string-value": (_edit(lambda d: d["aggregate"].update({"hit_rate@10": "1.0"})),
                     ["aggregate.hit_rate@10 must be a finite number, got '1.0'"]),
    "boolean-value": (_edit(lambda d: d["per_query"]["q-001"].update({"mrr@10": True})),
                      ["per_query.q-001.mrr@10 must be a finite number, got True"]),
    "another-golden-set": (_edit(_rename_queries, sealed=True),
                           ["none of the baseline's 6 queries is in", "it describes another golden set",
                            "--rag-update-baseline"]),
    "other-judgments": (_edit(lambda d: d["per_query"]["q-004"].update({"_judgments": "0" * 16}), sealed=True),
                        ["judgments or text changed for 1 query since the baseline: q-004"]),
    "other-measurement": (_edit(lambda d: d["_meta"]["measurement"].update({"relevance_level": 2}), sealed=True),
                          ["was measured differently", "relevance_level: baseline 2, now 1"]),
    "no-measurement-recorded": (_edit(lambda d: d.update({"_meta": {}})),
                                ["the baseline records no measurement config"]),
    "latin-1-bytes": (lambda text: text.replace('"_meta"', '"_m\u00e9ta"').encode("latin-1"),
                      ["cannot read the baseline"]),
    "deep-nesting": (lambda text: "[" * 100_000 + "]" * 100_000, ["JSON nested too deeply"]),
    "5000-digit-integer": (lambda text: text.replace('"recall@10": 1.0', '"recall@10": ' + "9" * 5000, 1),
                           ["4300 digits"]),
    "repeated-key": (lambda text: text.replace('"ndcg@10": ', '"ndcg@10": 0.1,\n      "ndcg@10": ', 1),
                     ["not valid JSON (duplicate key 'ndcg@10'"]),
}


@pytest.mark.parametrize("corrupt, needles", BASELINE_CASES.values(), ids=BASELINE_CASES.keys())
def test_malformed_baseline(baselined: RagProject, corrupt: Callable[[str], str | bytes], needles: list[str]) -> None:
    path = baselined.baseline_path
    bad = corrupt(path.read_text(encoding="utf-8"))
    path.write_bytes(bad if isinstance(bad, bytes) else bad.encode("utf-8"))
    before = snapshot(baselined.path)
    result = baselined.run()
    assert_usage_error(result, "baselines/baseline.json", *needles)
    assert snapshot(baselined.path) == before
    assert baselined.calls() == []


def test_baseline_that_is_a_directory(baselined: RagProject) -> None:
    baselined.baseline_path.unlink()
    baselined.baseline_path.mkdir()
    before = snapshot(baselined.path)
    result = baselined.run()
    assert_usage_error(result, "baselines/baseline.json", "cannot read the baseline", "directory")
    assert snapshot(baselined.path) == before


# ------------------------------------------------------------------ thresholds.json

THRESHOLD_CASES: dict[str, tuple[str, list[str]]] = {
    "unknown-key": ('{"recall@10_tolerence": 0.1}', ["unknown key 'recall@10_tolerence'"]),
    "unmeasured-metric": ('{"ndcg@5_min": 0.3}', ["key 'ndcg@5_min' names metric 'ndcg@5', which is not measured"]),
    "negative-tolerance": ('{"recall@10_tolerance": -0.05}', ["'recall@10_tolerance' is -0.05", "must be >= 0"]),
    "string-tolerance": ('{"recall@10_tolerance": "0.1"}', ["'recall@10_tolerance' must be a number (or null: not gated), got '0.1'"]),
    "boolean-worst-n": ('{"worst_n": true}', ["'worst_n' must be a non-negative integer, got True"]),
    "string-fail-on-regression": ('{"fail_on_regression": "no"}', ["'fail_on_regression' must be true or false"]),
    "negative-floor": ('{"mrr@10_min": -0.5}', ["'mrr@10_min' is -0.5; a floor must lie in (0, 1]"]),
    # metrics lie in [0, 1]: a floor above 1 never passes, a tolerance above 1 never fails
    "floor-above-one": ('{"mrr@10_min": 2}', ["'mrr@10_min' is 2, above 1", "would never pass",
                                              "write null to not gate mrr@10"]),
    "tolerance-above-one": ('{"recall@10_tolerance": 1.5}', ["'recall@10_tolerance' is 1.5, above 1",
                                                             "would never fail", "write null to not gate"]),
    "query-tolerance-above-one": ('{"ndcg@10_query_tolerance": 3}', ["'ndcg@10_query_tolerance' is 3, above 1",
                                                                     "would never fail", "write null"]),
    "nan-tolerance": ('{"recall@10_tolerance": NaN}', ["'recall@10_tolerance' is NaN",
                                                       "NaN is not a valid metric value", "null to not gate"]),
    "infinite-floor": ('{"worst_n": 3, "mrr@10_min": Infinity}', ["'mrr@10_min' is Infinity",
                                                                  "Infinity is not a valid metric value"]),
    "a-list": ("[0.1]", ["expected a JSON object of flat keys"]),
    "trailing-comma": ('{"worst_n": 5,}', ["line 1: not valid JSON"]),
    "repeated-key": ('{"worst_n": 5,\n "recall@10_tolerance": 0,\n "recall@10_tolerance": 0.5}',
                     ["line 3: not valid JSON (duplicate key 'recall@10_tolerance'"]),
    "deep-nesting": ("[" * 100_000 + "]" * 100_000, ["JSON nested too deeply"]),
}


@pytest.mark.parametrize("text, needles", THRESHOLD_CASES.values(), ids=THRESHOLD_CASES.keys())
def test_malformed_thresholds(baselined: RagProject, text: str, needles: list[str]) -> None:
    baselined.thresholds(text)
    before = snapshot(baselined.path)
    result = baselined.run()
    assert_usage_error(result, "baselines/thresholds.json", *needles)
    assert snapshot(baselined.path) == before
    assert baselined.calls() == []


# ------------------------------------------------------------ TREC files through the CLI

RUN = "q1 Q0 tire-repair 1 2.5 sys\nq1 Q0 noise 2 1.0 sys\nq2 Q0 chain-lube 1 0.9 sys\n"

CLI_CASES: dict[str, tuple[str, bytes, str, list[str]]] = {
    # (which file is broken, its bytes, the file named in the message, what the message says)
    "run-score-with-underscore": ("run", (RUN + "q2 Q0 d 2 1_0 sys\n").encode(), "run.txt",
                                  ["line 4", "score '1_0' is not a number (plain ASCII decimal"]),
    "run-fullwidth-score": ("run", (RUN + "q2 Q0 d 2 \uff11\uff10 sys\n").encode(), "run.txt",
                            ["line 4", "score '\uff11\uff10' is not a number"]),
    "run-arabic-indic-score": ("run", (RUN + "q2 Q0 d 2 \u0663 sys\n").encode(), "run.txt", ["line 4", "is not a number"]),
    "run-bom-mid-file": ("run", (RUN + "\ufeffq2 Q0 d 2 0.5 sys\n").encode(), "run.txt",
                         ["line 4", "byte order mark (U+FEFF) after the start of the file"]),
    "qrels-bom-mid-file": ("qrels", "q1 tire-repair 1\n\ufeffq2 chain-lube 1\n".encode(), "qrels.tsv",
                           ["line 2", "byte order mark (U+FEFF)"]),
    "qrels-fullwidth-grade": ("qrels", "q1 tire-repair \uff11\n".encode(), "qrels.tsv",
                              ["line 1", "grade '\uff11' is not an integer"]),
    "qrels-grade-with-underscore": ("qrels", b"q1 tire-repair 0_1\n", "qrels.tsv",
                                    ["line 1", "grade '0_1' is not an integer"]),
    "run-five-columns": ("run", b"q1 Q0 tire-repair 1 2.5\n", "run.txt",
                         ["line 1", "expected 6 columns (qid Q0 doc rank score tag), got 5"]),
    "run-seven-columns": ("run", (RUN + "q2 Q0 d 2 0.5 sys extra\n").encode(), "run.txt",
                          ["line 4", "expected 6 columns", "got 7"]),
    "run-duplicate-document": ("run", (RUN + "q1 Q0 tire-repair 3 0.1 sys\n").encode(), "run.txt",
                               ["line 4", "document 'tire-repair' appears twice for query 'q1' (first on line 1)"]),
    "run-non-numeric-score": ("run", b"q1 Q0 tire-repair 1 high sys\n", "run.txt",
                              ["line 1", "score 'high' is not a number"]),
    "run-nan-score": ("run", b"q1 Q0 tire-repair 1 nan sys\n", "run.txt", ["line 1", "score is NaN"]),
    "run-empty": ("run", b"\n\n", "run.txt", ["the run file is empty"]),
    "run-binary": ("run", random.Random(1).randbytes(4096), "run.txt", ["not valid UTF-8"]),
    "run-huge-score-token": ("run", b"q1 Q0 d 1 " + b"x" * (1 << 20) + b" sys\n", "run.txt",
                             ["line 1", "is not a number"]),
    "qrels-two-columns": ("qrels", b"q1 tire-repair\n", "qrels.tsv", ["line 1", "columns, got 2"]),
    "qrels-five-columns": ("qrels", b"q1 0 tire-repair 1 extra\n", "qrels.tsv", ["line 1", "columns, got 5"]),
    "qrels-mixed-columns": ("qrels", b"q1 0 tire-repair 1\nq2 chain-lube 1\n", "qrels.tsv",
                            ["line 2", "expected 4 columns like the lines before, got 3"]),
    "qrels-float-grade": ("qrels", b"q1 tire-repair 0.5\n", "qrels.tsv", ["line 1", "grade '0.5' is not an integer"]),
    "qrels-negative-grade": ("qrels", b"q1 tire-repair -3\n", "qrels.tsv", ["line 1", "grades must be integers >= 0"]),
    "qrels-overflowing-grade": ("qrels", b"q1 tire-repair 4096\n", "qrels.tsv", ["line 1", "grades above 1000"]),
    "qrels-judged-twice": ("qrels", b"q1 tire-repair 1\nq1 tire-repair 2\n", "qrels.tsv",
                           ["line 2", "judged twice (first on line 1)"]),
    "qrels-empty": ("qrels", b"", "qrels.tsv", ["no judgments found"]),
    "qrels-utf-16": ("qrels", "q1 tire-repair 1\n".encode("utf-16"), "qrels.tsv", ["line 1", "not valid UTF-8"]),
    # fullwidth digits: float() and int() read them, trec_eval and every other tool do not
    "run-fullwidth-rank": ("run", "q1 Q0 tire-repair \uff11 2.5 sys\n".encode(), "run.txt",
                           ["line 1", "rank '\uff11' is not a whole number in ASCII digits (0-9)"]),
    "qrels-fullwidth-iter": ("qrels", "q1 \uff10 tire-repair 1\n".encode(), "qrels.tsv",
                             ["line 1", "iteration column '\uff10' is not ASCII"]),
    # str.split() separates on NBSP and other Unicode whitespace; TREC columns are spaces and tabs
    "run-nbsp-separator": ("run", "q1 Q0 tire-repair\u00a01 2.5 sys\n".encode(), "run.txt",
                           ["line 1", "holds U+00A0 (NO-BREAK SPACE) at column 18", "spaces or tabs"]),
    "qrels-nbsp-separator": ("qrels", "q1 tire-repair 1\nq2\u3000chain-lube 1\n".encode(), "qrels.tsv",
                             ["line 2", "holds U+3000 (IDEOGRAPHIC SPACE) at column 3", "spaces or tabs"]),
    "run-cr-line-endings": ("run", RUN.replace("\n", "\r").encode(), "run.txt",
                            ["run.txt: uses CR line endings", "save it with LF line endings"]),
    "qrels-cr-line-endings": ("qrels", b"q1 0 tire-repair 1\nq2 0 chain-lube 1\rq2 0 noise 0\r", "qrels.tsv",
                              ["qrels.tsv, line 2: uses CR line endings", "save it with LF line endings"]),
}


@pytest.mark.parametrize("which, content, named, needles", CLI_CASES.values(), ids=CLI_CASES.keys())
def test_malformed_trec_file_through_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str], which: str,
                                             content: bytes, named: str, needles: list[str]) -> None:
    qrels, run = tmp_path / "qrels.tsv", tmp_path / "run.txt"
    qrels.write_text("q1 tire-repair 1\nq2 chain-lube 1\n", encoding="utf-8")
    run.write_text(RUN, encoding="utf-8")
    (qrels if which == "qrels" else run).write_bytes(content)
    before = snapshot(tmp_path)
    code = main(["evaluate", "--qrels", str(qrels), "--run", str(run)])
    out, err = capsys.readouterr()
    assert code == 2, out + err
    no_traceback(out + err)
    assert out == ""
    message = err.strip()
    assert message.startswith("ragmetrics evaluate: error: ") and "\n" not in message
    assert len(message) < 1000
    assert named in message
    for needle in needles:
        assert needle in message, message
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("case", ["run-duplicate-document", "qrels-mixed-columns"])
def test_cli_subprocess_exits_2_without_a_traceback(tmp_path: Path, case: str) -> None:
    which, content, named, needles = CLI_CASES[case]
    qrels, run = tmp_path / "qrels.tsv", tmp_path / "run.txt"
    qrels.write_text("q1 tire-repair 1\nq2 chain-lube 1\n", encoding="utf-8")
    run.write_text(RUN, encoding="utf-8")
    (qrels if which == "qrels" else run).write_bytes(content)
    proc = subprocess.run([sys.executable, "-m", "pytest_ragmetrics", "evaluate", "--qrels", str(qrels),
                           "--run", str(run)], capture_output=True, text=True, env=clean_env(), timeout=60)
    assert proc.returncode == 2
    no_traceback(proc.stdout + proc.stderr)
    assert named in proc.stderr and needles[-1] in proc.stderr


@pytest.mark.parametrize("first", ["query tire-repair 1", "topic 0 tire-repair 1", "qid noise 0"])
def test_a_first_qrels_line_that_is_data_is_not_dropped_as_a_header(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], first: str) -> None:
    """Only a whole header line is skipped; a query named ``query``, ``topic`` or ``qid`` was lost."""
    qid = first.split()[0]
    columns = len(first.split())
    qrels, run = tmp_path / "qrels.tsv", tmp_path / "run.txt"
    qrels.write_text(f"{first}\n" + ("q1 0 tire-repair 1\n" if columns == 4 else "q1 tire-repair 1\n"),
                     encoding="utf-8")
    run.write_text(f"{qid} Q0 tire-repair 1 2.0 sys\nq1 Q0 tire-repair 1 1.0 sys\n", encoding="utf-8")
    code = main(["evaluate", "--qrels", str(qrels), "--run", str(run), "--format", "json", "--per-query"])
    out, err = capsys.readouterr()
    assert code == 0, err
    result = json.loads(out)
    assert set(result["per_query"]) | set(result["unscorable"]) == {qid, "q1"}


@pytest.mark.parametrize("header", ["qid doc_id rel", "query-id\tcorpus-id\tscore", "QID ITER DOCNO REL",
                                    "query_id iteration doc_id relevance"])
def test_a_recognised_qrels_header_is_still_skipped(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                    header: str) -> None:
    four = len(header.split()) == 4
    qrels, run = tmp_path / "qrels.tsv", tmp_path / "run.txt"
    qrels.write_text(f"{header}\n" + ("q1 0 tire-repair 1\n" if four else "q1 tire-repair 1\n"), encoding="utf-8")
    run.write_text("q1 Q0 tire-repair 1 1.0 sys\n", encoding="utf-8")
    code = main(["evaluate", "--qrels", str(qrels), "--run", str(run), "--format", "json", "--per-query"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert list(json.loads(out)["per_query"]) == ["q1"]


def test_missing_run_file_through_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "qrels.tsv").write_text("q1 d 1\n", encoding="utf-8")
    code = main(["evaluate", "--qrels", str(tmp_path / "qrels.tsv"), "--run", str(tmp_path / "nowhere.txt")])
    err = capsys.readouterr().err
    assert code == 2 and "nowhere.txt: file not found" in err
    no_traceback(err)


def test_run_file_that_is_a_directory_through_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "qrels.tsv").write_text("q1 d 1\n", encoding="utf-8")
    (tmp_path / "run").mkdir()
    code = main(["evaluate", "--qrels", str(tmp_path / "qrels.tsv"), "--run", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2 and "is a directory, expected a file" in err
    no_traceback(err)


def test_unknown_metric_through_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "qrels.tsv").write_text("q1 d 1\n", encoding="utf-8")
    (tmp_path / "run.txt").write_text("q1 Q0 d 1 1.0 s\n", encoding="utf-8")
    code = main(["evaluate", "--qrels", str(tmp_path / "qrels.tsv"), "--run", str(tmp_path / "run.txt"),
                 "-m", "recal@10"])
    err = capsys.readouterr().err
    assert code == 2 and "unknown metric 'recal'" in err
    no_traceback(err)


# ------------------------------------------------------------------ options, too


@pytest.mark.parametrize(
    "args, needles",
    [
        (["--rag-timeout", "soon"], ["rag_timeout must be a number of seconds > 0", "'soon'"]),
        (["--rag-timeout", "-1"], ["rag_timeout must be a number of seconds > 0"]),
        (["--rag-timeout=0"], ["rag_timeout must be a number of seconds > 0 (or 'none'), got '0'; for no limit "
                               "leave it unset or write 'none'"]),
        (["--rag-k", "0"], ["rag_k must be a positive integer, got 0"]),
        (["--rag-metrics", "recall@ten"], ["recall"]),
        (["--rag-repeat=0"], ["--rag-repeat must be an integer >= 1, got 0"]),
        (["--rag-batch-size=0"], ["--rag-batch-size must be an integer >= 1, got 0"]),
        (["--rag-worst=-1"], ["--rag-worst must be an integer >= 0, got -1"]),
    ],
    ids=["timeout-word", "timeout-negative", "timeout-zero", "k-zero", "metric-cutoff-word", "repeat-zero",
         "batch-size-zero", "worst-negative"],
)
def test_malformed_options(baselined: RagProject, args: list[str], needles: list[str]) -> None:
    before = snapshot(baselined.path)
    result = baselined.run(*args)
    assert_usage_error(result, *needles)
    assert snapshot(baselined.path) == before
    assert baselined.calls() == []


@pytest.mark.parametrize("value", ["ten seconds", "0"])
def test_bad_ini_timeout(baselined: RagProject, value: str) -> None:
    """0 is refused too: a reader cannot tell whether it means no time at all or no limit."""
    baselined.ini(rag_timeout=value)
    result = baselined.run()
    assert_usage_error(result, f"rag_timeout must be a number of seconds > 0 (or 'none'), got {value!r}")
    assert baselined.calls() == []


def test_a_utf8_bom_is_accepted(project: RagProject) -> None:
    """Not malformed: a BOM written by an editor on Windows is fine (UTF-16 is refused above)."""
    path = project.path / "golden.yaml"
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    project.make_baseline()
    assert project.run().ret == pytest.ExitCode.OK


@pytest.mark.parametrize("previous", [True, False], ids=["over-a-baseline", "first-baseline"])
def test_a_golden_set_with_nothing_relevant_cannot_become_a_baseline(project: RagProject, previous: bool) -> None:
    """Every judgment 0: nothing can be scored, so there is nothing to gate on; the update is
    refused in words (it used to crash describing the change: INTERNALERROR)."""
    if previous:
        project.make_baseline()
    project.golden([{**r, "gold_chunks": {"tire-repair": 0}} for r in project.records])
    before = snapshot(project.path / "baselines") if previous else None
    result = project.run("--rag-update-baseline")
    no_traceback(result.stdout.str() + result.stderr.str())
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "no query could be scored (none has a document judged relevant at level 1)" in rag_summary(result)
    if previous:
        assert snapshot(project.path / "baselines") == before
    else:
        assert not project.baseline_path.exists()
