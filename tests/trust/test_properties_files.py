"""Properties over the gate's own files: no mutation of a failing run's files turns it green.

Each test takes a real failing run (a real ``pytest --rag-eval`` session whose retriever
lost the gold documents of four queries), then mutates one of the files it reads:
the baseline, the thresholds or a run artifact. A mutation deletes a key, changes a
number, changes a key's case, inserts NaN, a separator character (``#``, a newline,
U+2028, U+0085, a tab) or a lone surrogate, anywhere in the file. Whatever it does, the
untouched run's red stays red: the result is a refusal (usage error, exit 2) or a failed
verdict, never a pass, and never a traceback.

Thresholds are the one file whose numbers a team may change on purpose: raising a
tolerance or switching ``fail_on_regression`` off is a decision, not damage, so there
numbers and booleans are left alone and every other mutation applies.

Examples are derandomized (see ``test_properties.py``), so CI runs the same ones.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_ragmetrics.cli import main as ragmetrics
from trust_helpers import TrustProject

EXAMPLES = int(os.environ.get("RAGMETRICS_HYPOTHESIS_EXAMPLES", "60"))
PROPERTY = settings(max_examples=EXAMPLES, deadline=None, database=None,
                    derandomize=not os.environ.get("RAGMETRICS_HYPOTHESIS_RANDOM"),
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                           HealthCheck.filter_too_much])

SEPARATORS = ["#", "\n", "\u2028", "\u0085", "\t", " ", "\x00"]
SURROGATE = "\ud800"
#: a failing run: four of six queries lost their gold documents
LOST = {"q_002": ["noise-doc"], "q_004": ["rim-wear"], "q_005": [], "q_006": ["chain-lube"]}
THRESHOLDS = {"_comment": "as a team writes it", "recall@10_tolerance": 0.0, "recall@10_query_tolerance": 0.0,
              "mrr@10_min": 0.01, "worst_n": 5, "max_regressed_queries": 10, "fail_on_regression": True}


# ----------------------------------------------------------------------------- mutations


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every place in a JSON tree: each key of each object, each item of each list."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield (*prefix, key)
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield (*prefix, index)
            yield from _paths(item, (*prefix, index))


def _parent(data: Any, path: tuple[Any, ...]) -> Any:
    for step in path[:-1]:
        data = data[step]
    return data


KINDS = ["delete", "number", "case", "nan", "separator", "surrogate"]


@st.composite
def mutations(draw: st.DrawFn, data: Any, numbers: bool = True) -> tuple[str, str]:
    """One mutation of ``data``: its description and the file's new text."""
    data = json.loads(json.dumps(data))
    paths = list(_paths(data))
    kind = draw(st.sampled_from(KINDS if numbers else [k for k in KINDS if k != "number"]))
    if kind == "number":
        paths = [p for p in paths if isinstance(_parent(data, p)[p[-1]], (int, float))]
    elif kind == "case":
        paths = [p for p in paths if isinstance(p[-1], str) and p[-1].upper() != p[-1]]
    elif kind in ("separator", "surrogate"):
        paths = [p for p in paths if isinstance(p[-1], str) or isinstance(_parent(data, p)[p[-1]], str)]
    if not numbers:
        paths = [p for p in paths if not (isinstance(_parent(data, p)[p[-1]], (int, float)) and kind != "delete")]
    if not paths:
        return "nothing to mutate", json.dumps(data)
    path = draw(st.sampled_from(paths))
    parent, last = _parent(data, path), path[-1]
    if kind == "delete":
        del parent[last]
    elif kind == "number":
        parent[last] = draw(st.sampled_from([0.0, 1.0, 0.5, 0.9999, -1.0, 2.0, 1e308, 0.1 + 0.2]))
    elif kind == "case":
        parent[last.upper()] = parent.pop(last)
    elif kind == "nan":
        parent[last] = math.nan
    else:
        extra = draw(st.sampled_from(SEPARATORS)) if kind == "separator" else SURROGATE
        if isinstance(last, str) and isinstance(parent, dict) and draw(st.booleans()):
            parent[last + extra] = parent.pop(last)
        elif isinstance(parent[last], str):
            parent[last] = parent[last] + extra
        else:
            parent[f"{last}{extra}"] = parent.pop(last)
    # ensure_ascii writes a lone surrogate as the \ud800 escape a hand or a tool would
    return f"{kind} at {'.'.join(map(str, path))}", json.dumps(data, indent=2, ensure_ascii=True)


# ------------------------------------------------------------------------ the failing run


@pytest.fixture
def failing(project: TrustProject) -> TrustProject:
    project.thresholds(THRESHOLDS)
    project.make_baseline("--rag-report=good.json")
    project.answer(**LOST)
    result = project.run("--rag-report=bad.json")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()[-2000:]
    return project


def _assert_red(result: pytest.RunResult, what: str) -> None:
    text = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in text and "INTERNALERROR" not in text, (what, text[-3000:])
    assert result.ret in (pytest.ExitCode.TESTS_FAILED, pytest.ExitCode.USAGE_ERROR), (what, result.ret,
                                                                                        text[-3000:])


@pytest.mark.slow  # a pytest session per example: 10-25 s
def test_no_mutation_of_the_baseline_turns_a_failing_run_green(failing: TrustProject) -> None:
    original = failing.baseline()

    @PROPERTY
    @given(mutation=mutations(original))
    def check(mutation: tuple[str, str]) -> None:
        what, text = mutation
        failing.baseline_path.write_text(text, encoding="utf-8")
        _assert_red(failing.run(), what)

    check()


@pytest.mark.slow  # a pytest session per example: 10-25 s
def test_no_mutation_of_the_thresholds_turns_a_failing_run_green(failing: TrustProject) -> None:
    path = failing.path / "baselines" / "thresholds.json"

    @PROPERTY
    @given(mutation=mutations(THRESHOLDS, numbers=False))
    def check(mutation: tuple[str, str]) -> None:
        what, text = mutation
        path.write_text(text, encoding="utf-8")
        _assert_red(failing.run(), what)

    check()


@pytest.mark.parametrize("side", ["reference", "candidate"])
def test_no_mutation_of_an_artifact_turns_a_failing_compare_green(failing: TrustProject, side: str,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    good, bad = failing.path / "good.json", failing.path / "bad.json"
    assert ragmetrics(["compare", str(good), str(bad), "--fail-on-regression"]) == 1
    target = good if side == "reference" else bad
    original = json.loads(target.read_text(encoding="utf-8"))
    mutated = failing.path / f"mutated-{side}.json"
    pair = (mutated, bad) if side == "reference" else (good, mutated)

    @PROPERTY
    @given(mutation=mutations(original))
    def check(mutation: tuple[str, str]) -> None:
        what, text = mutation
        mutated.write_text(text, encoding="utf-8")
        code = ragmetrics(["compare", str(pair[0]), str(pair[1]), "--fail-on-regression"])
        capsys.readouterr()
        assert code in (1, 2), (what, code)

    check()


@pytest.mark.slow  # a pytest session per example: 10-25 s
def test_no_mutation_of_a_jsonl_golden_set_turns_a_failing_run_green(project: TrustProject) -> None:
    """Labels are inputs too: a changed record's judgments digest no longer matches the baseline's,
    a dropped record is a query gone from the golden set, a renamed one keeps its old entry."""
    records = [{"qid": r["id"], "query": r["question"], "tags": r["tags"],
                "candidates": [{"doc_id": d, "rel": g} for d, g in
                               (r["gold_chunks"].items() if isinstance(r["gold_chunks"], dict)
                                else ((d, 1) for d in r["gold_chunks"]))]} for r in project.records]
    golden = project.path / "golden.jsonl"
    golden.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    project.ini(rag_golden="golden.jsonl")
    project.make_baseline()
    project.answer(**LOST)
    untouched = project.run()
    assert untouched.ret == pytest.ExitCode.TESTS_FAILED

    @PROPERTY
    @given(mutation=mutations(records))
    def check(mutation: tuple[str, str]) -> None:
        what, text = mutation
        mutated = json.loads(text)
        lines = [json.dumps(r, ensure_ascii=True) for r in mutated] if isinstance(mutated, list) else [text]
        golden.write_text("\n".join(lines) + "\n", encoding="utf-8")
        _assert_red(project.run(), what)

    check()


def test_no_mutation_of_a_judgments_file_breaks_agreement(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two annotators' files: damage to one of them never makes a failing --fail-below pass, nor a
    traceback. (A changed grade is an annotator's own decision, so numbers are left alone.)"""
    def judgments(name: str, grades: list[int]) -> list[dict[str, Any]]:
        return [{"_meta": {"kind": "ragmetrics-judgments", "annotator": name}}] + [
            {"qid": f"q{i}", "query": f"question {i}",
             "candidates": [{"doc_id": f"d{i}-{j}", "rel": g, "note": ""} for j, g in enumerate(grades[i::3])]}
            for i in range(3)]
    alice = judgments("alice", [0, 1, 2, 1, 0, 2, 2, 1, 0])
    bob = judgments("bob", [0, 2, 2, 1, 1, 2, 0, 1, 0])
    a, b = tmp_path / "alice.jsonl", tmp_path / "bob.jsonl"
    a.write_text("".join(json.dumps(r) + "\n" for r in alice), encoding="utf-8")

    @PROPERTY
    @given(mutation=mutations(bob, numbers=False))
    def check(mutation: tuple[str, str]) -> None:
        what, text = mutation
        mutated = json.loads(text)
        lines = [json.dumps(r, ensure_ascii=True) for r in mutated] if isinstance(mutated, list) else [text]
        b.write_text("\n".join(lines) + "\n", encoding="utf-8")
        code = ragmetrics(["agreement", str(a), str(b), "--fail-below", "0.9"])
        err = capsys.readouterr().err
        assert code in (1, 2), (what, code, err)  # the untouched pair fails --fail-below 0.9
        assert "Traceback" not in err

    b.write_text("".join(json.dumps(r) + "\n" for r in bob), encoding="utf-8")
    assert ragmetrics(["agreement", str(a), str(b), "--fail-below", "0.9"]) == 1
    capsys.readouterr()
    check()
