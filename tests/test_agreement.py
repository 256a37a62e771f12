"""pytest_ragmetrics.tools.agreement: Cohen's kappa between two annotators, and the `agreement` verb.

Kappa is checked against scikit-learn's ``cohen_kappa_score`` (dev extra) on random labels for
each weighting, and against a hand-worked 2x2 table.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_ragmetrics import InputError
from pytest_ragmetrics.cli import main as cli_main
from pytest_ragmetrics.tools.agreement import agreement, cohen_kappa, kappa_band


def write_jsonl(path: Path, judgments: dict[str, dict[str, int]], texts: dict[str, str] | None = None,
                annotator: str | None = "", notes: dict[tuple[str, str], str] | None = None) -> Path:
    """Seed-001 JSONL: one line per question with graded candidates, after a ``_meta`` line naming the
    annotator (by default the file's stem; None: no ``_meta`` line)."""
    lines = []
    if annotator is not None:
        lines.append(json.dumps({"_meta": {"kind": "ragmetrics-judgments", "annotator": annotator or path.stem,
                                           "pool_id": "p", "updated": "2025-01-01T00:00:00+00:00"}}))
    for qid, docs in judgments.items():
        text = (texts or {}).get(qid, f"question {qid}")
        candidates = [{"doc_id": d, "chunk": 1, "rel": g, "note": (notes or {}).get((qid, d), "")}
                      for d, g in docs.items()]
        lines.append(json.dumps({"qid": qid, "query": text, "mode": "semantic", "candidates": candidates},
                                ensure_ascii=False))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def noted(path: Path) -> Path:
    """A second annotator's file with the same grades as ``path``, told apart by a note."""
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    lines[0]["_meta"]["annotator"] = "second"
    lines[1]["candidates"][0]["note"] = "checked the second paragraph"
    other = path.with_name(f"{path.stem}.second.jsonl")
    other.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    return other


def run_main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli_main(["agreement", *argv])
    out, err = capsys.readouterr()
    return code, out, err


# --------------------------------------------------------------------------- the formula


@pytest.mark.parametrize("weights", ["none", "linear", "quadratic"])
def test_kappa_matches_sklearn_on_random_labels(weights: str) -> None:
    import sklearn.metrics as sklearn_metrics  # dev extra: CI has it; missing must fail
    rng = random.Random(7)
    for trial in range(60):
        n = rng.randint(2, 80)
        top = rng.choice([1, 2, 3, 4])
        a = [rng.randint(0, top) for _ in range(n)]
        # B agrees with A some of the time, so kappas spread over the whole range
        p = rng.random()
        b = [x if rng.random() < p else rng.randint(0, top) for x in a]
        ours = cohen_kappa(a, b, weights)
        # sklearn weights by each label's position among the labels that occur, as ours does
        theirs = sklearn_metrics.cohen_kappa_score(a, b, weights=None if weights == "none" else weights)
        if ours is None:
            assert theirs != theirs or len(set(a + b)) == 1, (trial, a, b)  # NaN: undefined
        else:
            assert ours == pytest.approx(theirs, abs=1e-12), (trial, weights, a, b)


def test_weights_use_the_grades_order_not_their_numbers() -> None:
    """Grades are ordered categories: 0, 1, 3 weigh as 0, 1, 2, and a far-off number weighs one step."""
    a, b = [0, 0, 1, 3, 3, 1, 0], [0, 1, 1, 3, 0, 3, 0]
    for weights in ("linear", "quadratic"):
        assert cohen_kappa(a, b, weights) == pytest.approx(
            cohen_kappa([{3: 2}.get(x, x) for x in a], [{3: 2}.get(y, y) for y in b], weights))
        assert cohen_kappa(a, b, weights) == pytest.approx(
            cohen_kappa([{3: 1000}.get(x, x) for x in a], [{3: 1000}.get(y, y) for y in b], weights))


def test_hand_worked_two_by_two() -> None:
    # both relevant 20, A only 5, B only 10, neither 15 (n = 50)
    # p_o = 35/50 = 0.7; p_e = 0.5 * 0.6 + 0.5 * 0.4 = 0.5; kappa = (0.7 - 0.5) / (1 - 0.5) = 0.4
    a = [1] * 20 + [1] * 5 + [0] * 10 + [0] * 15
    b = [1] * 20 + [0] * 5 + [1] * 10 + [0] * 15
    assert cohen_kappa(a, b) == pytest.approx(0.4)
    # with two grades every weighting is the same thing
    assert cohen_kappa(a, b, "linear") == pytest.approx(0.4) and cohen_kappa(a, b, "quadratic") == pytest.approx(0.4)


def test_perfect_agreement_undefined_and_bands() -> None:
    assert cohen_kappa([0, 1, 2, 2], [0, 1, 2, 2], "quadratic") == 1.0
    assert cohen_kappa([1, 1, 1], [1, 1, 1]) is None  # chance agreement is already perfect
    assert cohen_kappa([1, 1], [0, 0]) == 0.0
    assert [kappa_band(x) for x in (-0.1, 0.0, 0.2, 0.35, 0.6, 0.75, 0.81, 1.0, None)] == [
        "poor (below chance)", "slight", "slight", "fair", "moderate", "substantial",
        "almost perfect", "almost perfect", "undefined"]
    with pytest.raises(ValueError):
        cohen_kappa([1], [1, 2])


# ------------------------------------------------------------------------ over two files


@pytest.fixture()
def two_files(tmp_path: Path) -> tuple[Path, Path]:
    a = write_jsonl(tmp_path / "a.jsonl", {
        "q1": {"d1": 2, "d2": 1, "d3": 0, "d9": 1},          # d9 only in A
        "q2": {"d1": 0, "d4": 2},
        "q3": {"d5": 1, "d6": 0},
        "q4": {"d7": 2},                                       # question only in A
    }, {"q1": "How do I cancel auto-renewal?", "q2": "Where is my invoice?", "q3": "Refund time?",
        "q4": "unused"})
    b = write_jsonl(tmp_path / "b.jsonl", {
        "q1": {"d1": 2, "d2": 0, "d3": 0},
        "q2": {"d1": 2, "d4": 0, "d8": 1},                     # d8 only in B
        "q3": {"d5": 1, "d6": 1},
    }, {"q1": "How do I cancel auto-renewal?", "q2": "Where is my invoice?", "q3": "Refund time?"})
    return a, b


def test_overlap_counts_kappa_and_disagreement_order(two_files: tuple[Path, Path]) -> None:
    result = agreement(*two_files)
    assert result.n == 7 and result.n_questions == 3
    assert (result.only_a, result.only_b, result.questions_only_a, result.questions_only_b) == (2, 1, 1, 0)
    assert result.weights == "linear"  # three grade values: weighted by default
    a = [2, 1, 0, 0, 2, 1, 0]  # q1 d1 d2 d3, q2 d1 d4, q3 d5 d6 (documents sorted within a question)
    b = [2, 0, 0, 2, 0, 1, 1]
    assert result.kappa == pytest.approx(cohen_kappa(a, b, "linear"))
    assert result.kappas["none"] == pytest.approx(cohen_kappa(a, b, "none"))
    assert result.raw_agreement == pytest.approx(3 / 7)
    assert result.labels == [0, 1, 2] and result.confusion == [[1, 1, 1], [1, 1, 0], [1, 0, 1]]
    # largest grade difference first, then question id, then document id
    order = [(d.qid, d.doc_id, d.grade_a, d.grade_b) for d in result.disagreements]
    assert order == [("q2", "d1", 0, 2), ("q2", "d4", 2, 0), ("q1", "d2", 1, 0), ("q3", "d6", 0, 1)]
    assert result.disagreements[0].question == "Where is my invoice?"


def test_binary_labels_default_to_unweighted(tmp_path: Path) -> None:
    a = write_jsonl(tmp_path / "a.jsonl", {"q1": {"x": 1, "y": 0}, "q2": {"x": 1, "z": 1}})
    b = write_jsonl(tmp_path / "b.jsonl", {"q1": {"x": 1, "y": 1}, "q2": {"x": 0, "z": 1}})
    result = agreement(a, b)
    assert result.weights == "none" and result.kappa == pytest.approx(cohen_kappa([1, 0, 1, 1], [1, 1, 0, 1]))


def test_any_golden_format_and_text_mismatch_note(tmp_path: Path) -> None:
    yaml_file = tmp_path / "a.yaml"
    yaml_file.write_text("- id: q1\n  question: Fix a flat?\n  gold_chunks: {tube: 2, tire: 0}\n", encoding="utf-8")
    b = write_jsonl(tmp_path / "b.jsonl", {"q1": {"tube": 2, "tire": 1}}, {"q1": "Fix a puncture?"})
    result = agreement(yaml_file, b, annotators=("carol", "b"))
    assert result.n == 2 and result.text_differs == ["q1"]
    assert any("different text" in note for note in result.notes)


def test_no_overlap_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = write_jsonl(tmp_path / "a.jsonl", {"Q-0001": {"d1": 1}})
    b = write_jsonl(tmp_path / "b.jsonl", {"q1": {"d1": 1}})
    with pytest.raises(InputError, match="no \\(question, document\\) pair is judged in both.*share no question id"):
        agreement(a, b)
    c = write_jsonl(tmp_path / "c.jsonl", {"Q-0001": {"d2": 1}})
    with pytest.raises(InputError, match="share 1 question ids but no judged document"):
        agreement(a, c)
    code, out, err = run_main(capsys, str(a), str(b))
    assert code == 2 and out == "" and "ragmetrics agreement: error:" in err and "'Q-0001' in A" in err


def test_interval_is_seeded_and_brackets_kappa(two_files: tuple[Path, Path]) -> None:
    first, second = agreement(*two_files), agreement(*two_files)
    assert first.interval is not None and first.interval == second.interval
    assert first.interval[0] <= first.kappa <= first.interval[1]  # type: ignore[operator]


def test_interval_on_many_questions_is_tight(tmp_path: Path) -> None:
    rng = random.Random(3)
    ja: dict[str, dict[str, int]] = {}
    jb: dict[str, dict[str, int]] = {}
    for q in range(200):
        for d in range(5):
            g = rng.randint(0, 2)
            ja.setdefault(f"q{q}", {})[f"d{d}"] = g
            jb.setdefault(f"q{q}", {})[f"d{d}"] = g if rng.random() < 0.8 else rng.randint(0, 2)
    result = agreement(write_jsonl(tmp_path / "a.jsonl", ja), write_jsonl(tmp_path / "b.jsonl", jb))
    assert result.n == 1000 and result.interval is not None
    lo, hi = result.interval
    assert lo < result.kappa < hi and hi - lo < 0.12  # type: ignore[operator]


# ---------------------------------------------------------------------------- the verb


def test_main_table(capsys: pytest.CaptureFixture[str], two_files: tuple[Path, Path]) -> None:
    code, out, err = run_main(capsys, str(two_files[0]), str(two_files[1]), "--top", "2")
    assert code == 0 and err == ""
    assert "n = 7 (question, document) pairs judged by both, over 3 questions" in out
    assert "2 pairs judged only in A, 1 only in B" in out
    assert "Cohen's kappa, linear-weighted" in out and "95% CI" in out
    assert "Landis & Koch" in out and "a convention, not a test" in out
    assert "1/n = 0.1429" in out
    assert "Pairs that disagree most (2 of 4" in out
    assert "| q2  | d1       | 0 | 2 | Where is my invoice? |" in out
    assert "q3" not in out.split("Pairs that disagree most")[1]


def test_one_agreed_pair_of_a_huge_grade_does_not_lift_kappa(capsys: pytest.CaptureFixture[str],
                                                             tmp_path: Path) -> None:
    """Weights by the grade numbers let one pair graded 1000 by both annotators make every 0-vs-2
    look like a near-agreement: kappa 0.32 read 0.98 and passed --fail-below 0.9."""
    grades_a = [0, 1, 2, 0, 1, 2, 0, 1, 2, 1, 0, 2]
    grades_b = [0, 2, 1, 1, 1, 2, 0, 0, 2, 2, 1, 1]
    judged_a = {f"q{i}": {"d1": x} for i, x in enumerate(grades_a)}
    judged_b = {f"q{i}": {"d1": y} for i, y in enumerate(grades_b)}
    a, b = write_jsonl(tmp_path / "a.jsonl", judged_a), write_jsonl(tmp_path / "b.jsonl", judged_b)
    code, out, _ = run_main(capsys, str(a), str(b), "--format", "json")
    honest = json.loads(out)["kappa"]
    assert code == 0 and honest == pytest.approx(0.3226, abs=1e-4)
    judged_a["q99"] = judged_b["q99"] = {"d1": 1000}
    a, b = write_jsonl(tmp_path / "a.jsonl", judged_a), write_jsonl(tmp_path / "b.jsonl", judged_b)
    code, out, err = run_main(capsys, str(a), str(b), "--fail-below", "0.9", "--format", "json")
    assert code == 1, out
    assert "below --fail-below 0.9" in err
    assert json.loads(out)["kappa"] < 0.5  # one more agreed pair, in a fourth category


def test_main_json_weights_and_fail_below(capsys: pytest.CaptureFixture[str], two_files: tuple[Path, Path]) -> None:
    code, out, _ = run_main(capsys, str(two_files[0]), str(two_files[1]), "--weights", "quadratic", "--format", "json")
    data: dict[str, Any] = json.loads(out)
    assert code == 0 and data["weights"] == "quadratic" and data["kappa"] == data["kappas"]["quadratic"]
    assert data["n"] == 7 and data["n_disagreements"] == 4 and len(data["disagreements"]) == 4
    assert data["disagreements"][0] == {"qid": "q2", "doc_id": "d1", "question": "Where is my invoice?",
                                        "grade_a": 0, "grade_b": 2, "difference": 2}
    code, _, err = run_main(capsys, str(two_files[0]), str(two_files[1]), "--fail-below", "0.9")
    assert code == 1 and "below --fail-below 0.9" in err
    code, _, err = run_main(capsys, str(two_files[0]), str(two_files[0]), "--fail-below", "0.9")
    assert code == 2 and "are the same file" in err  # not kappa 1 "almost perfect"


def test_main_perfect_agreement_lists_no_pair(capsys: pytest.CaptureFixture[str], two_files: tuple[Path, Path]) -> None:
    code, out, _ = run_main(capsys, str(two_files[1]), str(noted(two_files[1])))
    assert code == 0 and "| 1.0000" in out and "almost perfect" in out
    assert "No disagreement" in out


def test_main_usage_errors(capsys: pytest.CaptureFixture[str], two_files: tuple[Path, Path], tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as info:
        cli_main(["agreement", str(two_files[0])])
    assert info.value.code == 2
    code, _, err = run_main(capsys, str(two_files[0]), str(tmp_path / "missing.jsonl"))
    assert code == 2 and "missing.jsonl" in err and "file not found" in err
    code, _, err = run_main(capsys, str(two_files[0]), str(two_files[1]), "--top", "-1")
    assert code == 2 and "--top" in err


def test_main_undefined_kappa_is_explained_and_fails_a_floor(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # only relevant documents listed, in both files: no variation, so no kappa
    a = write_jsonl(tmp_path / "a.jsonl", {"q1": {"x": 1}, "q2": {"y": 1}})
    code, out, err = run_main(capsys, str(a), str(noted(a)), "--fail-below", "0.6")
    assert code == 1 and "| undefined" in out and "keep the judged non-relevant candidates" in out
    assert "kappa undefined is below --fail-below 0.6" in err


def test_one_annotator_is_refused_not_reported_as_perfect_agreement(
        two_files: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A file against itself, a byte copy, a reformatted copy or two files of one annotator gave
    kappa 1.0 "almost perfect" and passed --fail-below: none is two annotators' judgments."""
    a = two_files[0]
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(a.read_bytes())
    reformatted = tmp_path / "reformatted.jsonl"
    reformatted.write_text("\n".join(json.dumps(json.loads(line), indent=None, separators=(", ", ": "), sort_keys=True)
                                     for line in a.read_text().splitlines()) + "\n\n")
    for other, words in ((a, "are the same file"), (copy, "both by annotator 'a'"),
                         (reformatted, "both by annotator 'a'")):
        code, out, err = run_main(capsys, str(a), str(other), "--fail-below", "0.9")
        assert code == 2 and words in err and "two annotators' independent judgments" in err, (other, err)
        assert "almost perfect" not in out
    meta = {"_meta": {"kind": "ragmetrics-judgments", "annotator": "alice", "pool_id": "p", "updated": "t"}}
    first, second = tmp_path / "alice-1.jsonl", tmp_path / "alice-2.jsonl"
    for path, grade in ((first, 1), (second, 0)):
        record = {"qid": "q1", "query": "x", "candidates": [{"doc_id": "d1", "rel": grade, "note": ""},
                                                           {"doc_id": "d2", "rel": 1, "note": ""}]}
        path.write_text(json.dumps(meta) + "\n" + json.dumps(record) + "\n")
    code, _, err = run_main(capsys, str(first), str(second))
    assert code == 2 and "both by annotator 'alice'" in err


# ----------------------------------------------------- who made each file, and copies


ALICE = {"q1": {"d1": 2, "d2": 1, "d3": 0}, "q2": {"d1": 0, "d4": 2}, "q3": {"d5": 1, "d6": 0}}
ALICE_NOTES = {("q1", "d1"): "steps 1-3 answer it", ("q2", "d4"): "the invoice page"}


@pytest.fixture()
def alice(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "alice.jsonl", ALICE, annotator="alice", notes=ALICE_NOTES)


def export(*argv: str) -> None:
    assert cli_main(["export", *argv]) == 0


@pytest.mark.parametrize("conversion", ["yaml", "qrels folder", "no _meta line"])
def test_a_file_that_names_no_annotator_needs_annotators(alice: Path, tmp_path: Path, conversion: str,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """A format conversion of one annotator's file (golden YAML, a qrels folder, the file without its
    _meta line) names nobody: it gave kappa 1.0 and passed --fail-below."""
    if conversion == "yaml":
        other = tmp_path / "alice_exp.yaml"
        export("--golden", str(alice), "--yaml-out", str(other))
    elif conversion == "qrels folder":
        other = tmp_path / "folder"
        other.mkdir()
        export("--golden", str(alice), "--qrels-out", str(other / "qrels.tsv"))
        (other / "queries.jsonl").write_text("".join(json.dumps({"qid": q, "query": f"question {q}"}) + "\n"
                                                     for q in ALICE), encoding="utf-8")
    else:
        other = tmp_path / "stripped.jsonl"
        other.write_text("".join(alice.read_text(encoding="utf-8").splitlines(keepends=True)[1:]), encoding="utf-8")
    capsys.readouterr()
    code, out, err = run_main(capsys, str(alice), str(other), "--fail-below", "0.9")
    assert code == 2 and out == "", err
    assert f"{other} names no annotator (_meta.annotator)" in err
    assert "pass --annotators NAME_A,NAME_B" in err
    if conversion == "no _meta line":  # named, it is still alice's grades and notes: a copy
        code, _, err = run_main(capsys, str(alice), str(other), "--annotators", "alice,bob")
        assert code == 2 and "one file copied, not two annotators" in err
    else:  # named, identical grades with no notes to compare: reported, with a warning
        code, out, err = run_main(capsys, str(alice), str(other), "--annotators", "alice,bob", "--fail-below", "0.9")
        assert code == 0, err
        assert "identical on every pair: check these are independent judgments" in out


def test_annotators_must_match_the_names_files_record(alice: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    bob = write_jsonl(tmp_path / "bob.jsonl", {"q1": {"d1": 1, "d2": 1}}, annotator="bob")
    code, _, err = run_main(capsys, str(alice), str(bob), "--annotators", "carol,bob")
    assert code == 2 and f"{alice}, _meta.annotator: is 'alice', but --annotators names 'carol'" in err
    for bad in ("alice", "alice,", "alice,bob,carol"):
        code, _, err = run_main(capsys, str(alice), str(bob), "--annotators", bad)
        assert code == 2 and "--annotators takes two names" in err, bad
    code, _, err = run_main(capsys, str(alice), str(bob), "--annotators", "alice,bob")
    assert code == 0, err


def test_a_renamed_copy_with_the_same_notes_is_refused(alice: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """A copy with only _meta.annotator or _meta.updated changed holds the same grades and notes."""
    renamed = tmp_path / "bob.jsonl"
    renamed.write_text(alice.read_text(encoding="utf-8").replace('"alice"', '"bob"').replace("2025-01-01", "2025-03-04"),
                       encoding="utf-8")
    code, out, err = run_main(capsys, str(alice), str(renamed), "--fail-below", "0.9")
    assert code == 2 and "almost perfect" not in out
    assert "hold the same grade and the same note for every question and document both judged" in err
    updated = tmp_path / "updated.jsonl"
    updated.write_text(alice.read_text(encoding="utf-8").replace("2025-01-01", "2025-03-04"), encoding="utf-8")
    code, _, err = run_main(capsys, str(alice), str(updated), "--fail-below", "0.9")
    assert code == 2 and "both by annotator 'alice'" in err


def test_identical_grades_with_other_notes_are_reported_with_a_warning(alice: Path, tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """Two people can agree on every grade: reported (and --fail-below applies), with a warning to check."""
    bob = write_jsonl(tmp_path / "bob.jsonl", ALICE, annotator="bob",
                      notes={**ALICE_NOTES, ("q1", "d1"): "step 2 is the answer"})
    code, out, err = run_main(capsys, str(alice), str(bob), "--fail-below", "0.9")
    assert code == 0, err
    assert "| 1.0000" in out and "identical on every pair: check these are independent judgments" in out
    code, out, _ = run_main(capsys, str(alice), str(bob), "--format", "json")
    assert any(n.startswith("identical on every pair") for n in json.loads(out)["notes"])
    code, _, err = run_main(capsys, str(alice), str(bob), "--fail-below", "1.01")
    assert code == 1 and "below --fail-below" in err
    carol = write_jsonl(tmp_path / "carol.jsonl", {**ALICE, "q3": {"d5": 0, "d6": 0}}, annotator="carol",
                        notes=ALICE_NOTES)
    code, out, _ = run_main(capsys, str(alice), str(carol))
    assert code == 0 and "identical on every pair" not in out
