"""Conformance with trec_eval, through pytrec_eval (the reference; in the dev extra, so CI has it).

With gain=linear every metric must equal trec_eval's to 1e-9 on the same input:

    recall@k    <-> recall_k            precision@k <-> P_k
    hit_rate@k  <-> success_k           ndcg@k      <-> ndcg_cut_k
    map@k       <-> map_cut_k           mrr@k       <-> recip_rank on the run cut at k
    mrr         <-> recip_rank          ndcg        <-> ndcg          map <-> map

Runs are random, graded and full of score ties. pytrec_eval gets {doc: score} and orders it
itself (score descending, then doc id descending); this package gets ranked lists, either sorted
by that rule here or read back by read_run from a TREC file written with the same scores.
Queries whose judgments hold no positive grade are excluded from the comparison: this package
must list them in ``Evaluation.unscorable`` instead of scoring them 0. Queries whose positive
grades all lie below the relevance level are compared like the rest: trec_eval scores their
nDCG from the grades and reports 0 for the level-based measures, and so must ``evaluate``.
"""

from __future__ import annotations

import io
import json
import random
from math import log2
from pathlib import Path
from typing import Mapping

import pytest
import pytrec_eval

from pytest_ragmetrics import MeasurementConfig, evaluate, read_run, write_run
from pytest_ragmetrics.cli import main
from pytest_ragmetrics.measures import _NEEDS_CUTOFF, MEASURE_NAMES

KS = (1, 3, 5, 7, 10, 20, 50, 100)
TOL = 1e-9

Scores = dict[str, dict[str, dict[str, float]]]


def trec_order(doc_scores: Mapping[str, float]) -> list[str]:
    """trec_eval's ranking: score descending, then document id descending."""
    return [doc for doc, _ in sorted(doc_scores.items(), key=lambda p: (p[1], p[0]), reverse=True)]


def our_names(ks: tuple[int, ...]) -> list[str]:
    names = []
    for k in ks:
        names += [f"recall@{k}", f"precision@{k}", f"hit_rate@{k}", f"ndcg@{k}", f"map@{k}", f"mrr@{k}"]
    return names + ["mrr", "ndcg", "map"]


def reference(
    qrels: Mapping[str, Mapping[str, int]],
    run: Mapping[str, Mapping[str, float]],
    level: int,
    ks: tuple[int, ...] = KS,
) -> dict[str, dict[str, float]]:
    """pytrec_eval's numbers under this package's metric names."""
    cut = ",".join(str(k) for k in ks)
    evaluator = pytrec_eval.RelevanceEvaluator(
        qrels,
        {f"recall.{cut}", f"P.{cut}", f"success.{cut}", f"ndcg_cut.{cut}", f"map_cut.{cut}", "recip_rank", "ndcg", "map"},
        relevance_level=level,
    )
    raw = evaluator.evaluate(run)
    out: dict[str, dict[str, float]] = {}
    for qid, values in raw.items():
        row = {"mrr": values["recip_rank"], "ndcg": values["ndcg"], "map": values["map"]}
        for k in ks:
            row[f"recall@{k}"] = values[f"recall_{k}"]
            row[f"precision@{k}"] = values[f"P_{k}"]
            row[f"hit_rate@{k}"] = values[f"success_{k}"]
            row[f"ndcg@{k}"] = values[f"ndcg_cut_{k}"]
            row[f"map@{k}"] = values[f"map_cut_{k}"]
        out[qid] = row
    # mrr@k: recip_rank on the run cut at k (top k in trec_eval's own order)
    rr = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}, relevance_level=level)
    for k in ks:
        cut_run = {qid: {d: docs[d] for d in trec_order(docs)[:k]} for qid, docs in run.items()}
        for qid, values in rr.evaluate(cut_run).items():
            out[qid][f"mrr@{k}"] = values["recip_rank"]
    return out


def compare(ours: Mapping[str, Mapping[str, float]], theirs: Mapping[str, Mapping[str, float]], qids: list[str]) -> list[str]:
    bad = []
    for qid in qids:
        for name, expected in theirs[qid].items():
            got = ours[qid][name]
            if abs(got - expected) > TOL:
                bad.append(f"{qid} {name}: ours {got!r} pytrec_eval {expected!r}")
    return bad


# --------------------------------------------------------------------- random runs


def doc_name(rng: random.Random, i: int) -> str:
    # Mixed prefixes and non-ASCII ids make the "doc id descending" tie rule matter.
    return rng.choice(("d", "D", "doc-", "d0", "é", "文")) + str(i)


def random_collection(rng: random.Random, n_queries: int) -> tuple[dict[str, dict[str, int]], Scores, dict[str, int]]:
    """Random graded qrels and a scored run, with the awkward cases on purpose.

    Returns qrels, run ({qid: {doc: score}}, every judged query present, possibly empty)
    and counts of the cases produced, so the test can check that it covered them.
    """
    qrels: dict[str, dict[str, int]] = {}
    run: Scores = {}  # type: ignore[assignment]
    cases = {"empty": 0, "all_zero": 0, "short": 0, "ties": 0, "deep": 0}
    for q in range(n_queries):
        qid = f"q{q}"
        pool = list(dict.fromkeys(doc_name(rng, i) for i in range(rng.randint(1, 160))))
        # judgments: some of the pool plus documents no system found
        judged_docs = rng.sample(pool, rng.randint(1, min(len(pool), 25))) + [f"unfound{i}" for i in range(rng.randint(0, 3))]
        kind = rng.random()
        if kind < 0.06:
            grades = {d: 0 for d in judged_docs}
            cases["all_zero"] += 1
        else:
            grades = {d: rng.choice((0, 0, 1, 1, 1, 2, 2, 3, 4)) for d in judged_docs}
        qrels[qid] = grades
        # the ranking
        shape = rng.random()
        if shape < 0.06:
            n_ret = 0
        elif shape < 0.35:
            n_ret = rng.randint(1, 9)
        else:
            n_ret = rng.randint(10, len(pool)) if len(pool) >= 10 else len(pool)
        retrieved = rng.sample(pool, min(n_ret, len(pool)))
        style = rng.random()
        if style < 0.25:
            scores = [float(rng.randint(0, 3)) for _ in retrieved]  # heavy ties
        elif style < 0.35:
            scores = [1.0] * len(retrieved)  # all tied: order by doc id alone
        elif style < 0.6:
            scores = [round(rng.uniform(-2, 2), 1) for _ in retrieved]  # some ties, negatives
        else:
            scores = [rng.random() for _ in retrieved]
        run[qid] = dict(zip(retrieved, scores))
        cases["empty"] += not retrieved
        cases["short"] += 0 < len(retrieved) < 10
        cases["ties"] += len(set(scores)) < len(scores)
        cases["deep"] += len(retrieved) > 100
    # a run entry for a query nobody judged: both sides must ignore it
    run["unjudged"] = {"d1": 1.0, "d2": 0.5}
    return qrels, run, cases


@pytest.mark.parametrize("level", [1, 2, 3])
@pytest.mark.parametrize("seed", [20240601, 7])
def test_random_graded_runs_match_trec_eval(level: int, seed: int, tmp_path: Path) -> None:
    rng = random.Random(seed * 10 + level)
    qrels, run, cases = random_collection(rng, 700)
    # the generator really produced the awkward cases
    assert min(cases.values()) >= 10, cases

    config = MeasurementConfig(measures=tuple(our_names(KS)), relevance_level=level, gain="linear", id_separator=None)
    theirs = reference(qrels, run, level)

    # (1) ranked lists sorted here by trec_eval's rule
    ranked = {qid: trec_order(docs) for qid, docs in run.items()}
    result = evaluate(ranked, qrels, config)

    expected_unscorable = [qid for qid, grades in qrels.items() if not any(g > 0 for g in grades.values())]
    assert result.unscorable == expected_unscorable
    assert len(expected_unscorable) >= cases["all_zero"]
    below = [qid for qid, grades in qrels.items() if 0 < max(grades.values()) < level]
    assert result.below_level == below
    assert level == 1 or len(below) >= 5  # the levels above 1 really produced such queries
    scorable = [qid for qid in qrels if qid not in set(expected_unscorable)]
    assert sorted(result.per_query) == sorted(scorable)
    assert len(scorable) > 300
    assert set(theirs) >= set(scorable)  # pytrec_eval scores every judged query of the run

    bad = compare(result.per_query, theirs, scorable)
    assert not bad, f"{len(bad)} mismatches, e.g.\n" + "\n".join(bad[:20])

    # aggregate: the mean over scorable queries only
    for name in config.metric_names:
        mean = sum(theirs[qid][name] for qid in scorable) / len(scorable)
        assert abs(result.aggregate[name] - mean) <= TOL, name

    # (2) the same run through a TREC file in shuffled line order, read back by read_run
    lines = io.StringIO()
    shuffled = {qid: rng.sample(list(docs), len(docs)) for qid, docs in run.items()}
    write_run(lines, shuffled, {qid: [run[qid][d] for d in docs] for qid, docs in shuffled.items()})
    path = tmp_path / "random.run"
    path.write_text(lines.getvalue(), encoding="utf-8")
    from_file = read_run(path)
    assert from_file == {qid: order for qid, order in ranked.items() if order}
    # empty rankings are absent from the file: scored 0 by default, like pytrec_eval's {} entries
    again = evaluate(from_file, qrels, config)
    assert again.per_query == result.per_query
    assert again.unscorable == result.unscorable


@pytest.mark.parametrize("seed", [3, 4])
def test_exponential_gain_matches_trec_eval_on_transformed_grades(seed: int) -> None:
    """trec_eval's linear gain of the grade 2^g - 1 is this package's exponential gain of g."""
    rng = random.Random(seed)
    qrels, run, _ = random_collection(rng, 500)
    transformed = {qid: {d: 2**g - 1 for d, g in grades.items()} for qid, grades in qrels.items()}
    ks = (1, 5, 10, 20)
    names = [f"ndcg@{k}" for k in ks] + ["ndcg"]
    config = MeasurementConfig(measures=tuple(names), gain="exponential", id_separator=None)
    result = evaluate({qid: trec_order(docs) for qid, docs in run.items()}, qrels, config)
    theirs = reference(transformed, run, 1, ks)
    scorable = list(result.per_query)
    assert len(scorable) > 300
    bad = compare(result.per_query, {q: {n: theirs[q][n] for n in names} for q in scorable}, scorable)
    assert not bad, f"{len(bad)} mismatches, e.g.\n" + "\n".join(bad[:20])


def test_a_query_with_only_zero_grades_is_unscorable_not_zero() -> None:
    qrels = {"q1": {"a": 1}, "q2": {"a": 0, "b": 0}}
    run = {"q1": {"a": 1.0}, "q2": {"a": 1.0}}
    theirs = reference(qrels, run, 1, (10,))
    assert theirs["q2"]["recall@10"] == 0.0  # pytrec_eval scores it 0 and would drag the mean down
    config = MeasurementConfig(measures=("recall@10", "ndcg@10"), gain="linear", id_separator=None)
    result = evaluate({q: trec_order(d) for q, d in run.items()}, qrels, config)
    assert result.unscorable == ["q2"]
    assert result.aggregate == {"recall@10": 1.0, "ndcg@10": 1.0}


# ----------------------------------------------------------------- literal TREC text

QRELS = """\
q1 0 d1 2
q1 0 d2 1
q1 0 d3 0
q1 0 d9 3
q2 0 a 1
q2 0 b 1
q2 0 c 0
q3 0 z 0
q4 0 m 1
q6 0 x 1
q6 0 y 2
"""

# q1: d3 and d1 tie at 5.0 -> d3 first (doc id descending). q2: the rank column lies, a has the
# top score. q3: only grade 0 (unscorable). q4: judged, absent from the run. q5: not judged.
# q6: everything tied at 0.0, and scientific notation / negative scores in q1.
RUN = """\
q1 Q0 d1 1 5.0 sys
q1 Q0 d3 2 5.0 sys
q1 Q0 d7 3 4.5 sys
q1 Q0 d2 4 1e0 sys
q1 Q0 d8 5 -2.5 sys
q2 Q0 c 1 0.9 sys
q2 Q0 b 2 0.9 sys
q2 Q0 a 3 0.95 sys
q3 Q0 z 1 1 sys
q5 Q0 a 1 1 sys
q6 Q0 w 1 0 sys
q6 Q0 x 2 0 sys
q6 Q0 y 3 0 sys
q6 Q0 v 4 0 sys
"""

#: Measures whose reference is ir_measures, checked in tests/test_judged_measures.py instead.
IR_MEASURES_ONLY = {"judged", "ndcg_judged"}


def test_every_trec_eval_metric_is_compared_with_and_without_a_cutoff() -> None:
    """A metric added to the registry but not to ``our_names()``/``reference()`` or
    ``LITERAL_METRICS`` would never be checked against trec_eval: say where it is missing."""
    trec = set(MEASURE_NAMES) - IR_MEASURES_ONLY
    named = {name.split("@")[0] for name in our_names((5,)) if "@" in name}
    assert trec <= named, f"add {sorted(trec - named)} to our_names() and reference() here, at a cutoff"
    literal = {name.split("@")[0] for name in LITERAL_METRICS}
    assert trec <= literal, f"add {sorted(trec - literal)} to LITERAL_METRICS here"
    # precision needs a cutoff; recall and hit_rate without one read the whole run, which no
    # trec_eval measure does (it has recall_k and success_k only)
    uncut = {name for name in our_names((5,)) if "@" not in name} | _NEEDS_CUTOFF | {"recall", "hit_rate"}
    assert trec <= uncut, f"add {sorted(trec - uncut)} without a cutoff to our_names() and reference() here"


LITERAL_METRICS = ["recall@1", "recall@3", "precision@2", "precision@10", "hit_rate@1", "hit_rate@2", "mrr@1",
                   "mrr@2", "mrr", "ndcg@2", "ndcg@3", "ndcg", "map@2", "map"]


@pytest.mark.parametrize("level", [1, 2])
def test_literal_trec_files_cli_equals_pytrec_eval(level: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    qrels_path = tmp_path / "qrels.txt"
    run_path = tmp_path / "run.txt"
    qrels_path.write_text(QRELS, encoding="utf-8")
    run_path.write_text(RUN, encoding="utf-8")

    argv = ["evaluate", "--qrels", str(qrels_path), "--run", str(run_path), "--gain", "linear",
            "--format", "json", "--per-query", "--skip-missing", "--relevance-level", str(level)]
    for name in LITERAL_METRICS:
        argv += ["-m", name]
    assert main(argv) == 0
    payload = json.loads(capsys.readouterr().out)

    with open(qrels_path, encoding="utf-8") as f:
        qrels = pytrec_eval.parse_qrel(f)
    with open(run_path, encoding="utf-8") as f:
        run = pytrec_eval.parse_run(f)
    ks = (1, 2, 3, 10)
    theirs = reference(qrels, run, level, ks)

    assert payload["unscorable"] == ["q3"]  # only grade 0
    # at level 2, q2 holds only grade-1 documents: scored as trec_eval scores it
    assert payload["below_level"] == ([] if level == 1 else ["q2"])
    assert payload["missing"] == ["q4"]
    scored = ["q1", "q2", "q6"]
    assert sorted(payload["per_query"]) == scored
    assert payload["n"] == len(scored)
    for qid in scored:
        for name in LITERAL_METRICS:
            assert abs(payload["per_query"][qid][name] - theirs[qid][name]) <= TOL, (qid, name)
    for name in LITERAL_METRICS:
        mean = sum(theirs[q][name] for q in scored) / len(scored)
        assert abs(payload["aggregate"][name] - mean) <= TOL, name

    # and a few by hand, so a shared misreading of the files cannot pass unnoticed:
    # q1 in trec order is d3 (0), d1 (2), d7 (-), d2 (1), d8 (-)
    if level == 1:
        assert payload["per_query"]["q1"]["mrr"] == 1 / 2
        assert payload["per_query"]["q1"]["recall@3"] == pytest.approx(1 / 3, abs=1e-12)  # d1 of {d1, d2, d9}
        assert payload["per_query"]["q2"]["mrr@1"] == 1.0  # a (0.95) is first whatever the rank column says
        # q6 all tied at 0: trec order by id descending is y, x, w, v -> y (2) first
        assert payload["per_query"]["q6"]["hit_rate@1"] == 1.0
        assert payload["per_query"]["q6"]["precision@2"] == 1.0
    else:  # q2 in trec order is a (1), c (0), b (1): its nDCG counts grade 1 although level 2 finds nothing
        assert payload["per_query"]["q2"]["ndcg@3"] == pytest.approx((1 + 1 / 2) / (1 + 1 / log2(3)), abs=1e-12)
        assert payload["per_query"]["q2"]["recall@3"] == 0.0 and payload["per_query"]["q2"]["mrr"] == 0.0
