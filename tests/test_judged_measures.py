"""judged@k and ndcg_judged@k: how far the judgments reach, and nDCG over judged documents only.

A document is judged when the judgments list it, grade 0 ("judged not relevant") included; a
document they do not list is unjudged. Hand-worked cases first (expected values written out as
arithmetic), then random pooled runs compared with ir_measures (``Judged@k`` and
``nDCG(judged_only=True)@k``, the latter through pytrec_eval, i.e. trec_eval -J) to 1e-9.

ir_measures' ``Judged@k`` divides by min(k, documents returned), not by k: a run of 5 documents
with 3 judged has Judged@10 = 3/5. ``judged@k`` matches it.
"""

from __future__ import annotations

import random
from math import log2
from typing import Mapping

import ir_measures
import pytest
from ir_measures import Judged, nDCG

from pytest_ragmetrics import MeasurementConfig, document_ranking, evaluate, score_query
from pytest_ragmetrics.gate.thresholds import thresholds_from_mapping

TOL = 1e-9
KS = (1, 2, 3, 5, 10, 20)

# Ranking (ids as given): u1 (unjudged), b (judged 0), a (grade 2), u2 (unjudged), c (grade 1).
# z (grade 3) never came back.  Ideal grades [3, 2, 1].
RANKING = ["u1", "b", "a", "u2", "c"]
JUDGMENTS = {"a": 2, "b": 0, "c": 1, "z": 3}


def scored(ranking: list[str], judgments: Mapping[str, int], names: str, gain: str = "linear",
           separator: str | None = None) -> dict[str, float] | None:
    return score_query(ranking, judgments, MeasurementConfig(names.split(), gain=gain, id_separator=separator))[1]


def test_judged_counts_grade_zero_and_divides_by_what_came_back_up_to_k() -> None:
    got = scored(RANKING, JUDGMENTS, "judged@1 judged@2 judged@3 judged@5 judged@10 judged")
    assert got == pytest.approx({
        "judged@1": 0 / 1,  # u1
        "judged@2": 1 / 2,  # u1, b (grade 0 is a judgment)
        "judged@3": 2 / 3,  # u1, b, a
        "judged@5": 3 / 5,  # b, a, c of five
        "judged@10": 3 / 5,  # only 5 came back: divided by 5, as ir_measures' Judged@10
        "judged": 3 / 5,  # no cutoff: the whole ranking
    }, abs=1e-12)


def test_judged_is_zero_for_an_empty_ranking() -> None:
    assert scored([], JUDGMENTS, "judged@10") == {"judged@10": 0.0}


def test_judged_reads_documents_after_the_id_mapping_and_dedup() -> None:
    # b#1, b#2 are one document (judged 0); u#1 is unjudged; a#3 is a (grade 2)
    got = scored(["b#1", "b#2", "u#1", "a#3"], JUDGMENTS, "judged@2 judged@3", separator="#")
    assert got == pytest.approx({"judged@2": 1 / 2, "judged@3": 2 / 3}, abs=1e-12)


def test_ndcg_judged_removes_unjudged_documents_before_the_cut() -> None:
    # condensed ranking: b (0), a (2), c (1); ideal [3, 2, 1]
    got = scored(RANKING, JUDGMENTS, "ndcg_judged@2 ndcg_judged@3 ndcg_judged ndcg@2 ndcg@3")
    idcg2 = 3 + 2 / log2(3)
    idcg3 = 3 + 2 / log2(3) + 1 / 2
    assert got == pytest.approx({
        "ndcg_judged@2": (2 / log2(3)) / idcg2,  # b at 1, a at 2
        "ndcg_judged@3": (2 / log2(3) + 1 / 2) / idcg3,  # c at 3 now, not 5
        "ndcg_judged": (2 / log2(3) + 1 / 2) / idcg3,
        "ndcg@2": 0.0,  # u1, b: nothing graded
        "ndcg@3": (2 / log2(4)) / idcg3,  # a at rank 3 in the full ranking
    }, abs=1e-12)


def test_ndcg_judged_follows_the_gain_setting() -> None:
    got = scored(RANKING, JUDGMENTS, "ndcg_judged@2", gain="exponential")
    # gains 2^g - 1: a -> 3, ideal 7, 3
    assert got == pytest.approx({"ndcg_judged@2": (3 / log2(3)) / (7 + 3 / log2(3))}, abs=1e-12)


def test_ndcg_judged_reads_past_the_deepest_cutoff_of_the_other_measures() -> None:
    # ndcg@2 alone would judge only 2 documents; ndcg_judged@2 needs the first 2 judged ones
    got = scored(["u1", "u2", "u3", "a", "c"], JUDGMENTS, "ndcg@2 ndcg_judged@2")
    assert got == pytest.approx({"ndcg@2": 0.0, "ndcg_judged@2": (2 + 1 / log2(3)) / (3 + 2 / log2(3))},
                                abs=1e-12)


def test_a_query_with_no_relevant_document_stays_unscorable() -> None:
    assert scored(["a", "b"], {"a": 0, "b": 0}, "judged@2 ndcg_judged@2") is None
    assert scored(["a"], {}, "judged@2") is None


def test_judged_measures_take_thresholds_like_any_metric() -> None:
    config = MeasurementConfig(("ndcg_judged@10", "judged@10"))
    thresholds = thresholds_from_mapping(
        {"ndcg_judged@10_tolerance": 0.02, "judged@10_min": 0.5, "ndcg_judged@10_query_tolerance": 0.1},
        config, "thresholds.json")
    assert thresholds.tolerance["ndcg_judged@10"] == 0.02
    assert thresholds.minimum["judged@10"] == 0.5
    assert thresholds.query_tolerance["ndcg_judged@10"] == 0.1


# ------------------------------------------------------------ against ir_measures


def pooled_case(rng: random.Random, n_queries: int = 40) -> tuple[dict[str, dict[str, int]], dict[str, list[str]]]:
    """Judgments with graded, grade-0 and absent (unjudged) documents, and rankings of chunk ids
    (with repeats) drawn from all three, as a shallow pool leaves them."""
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, list[str]] = {}
    for q in range(n_queries):
        qid = f"q{q}"
        docs = [f"d{i}" for i in range(rng.randint(1, 40))]
        judged = rng.sample(docs, rng.randint(1, len(docs)))
        qrels[qid] = {d: rng.choice((0, 0, 1, 2, 3)) for d in judged}
        if rng.random() < 0.1:
            qrels[qid] = {d: 0 for d in judged}  # nothing relevant: unscorable
        pick = rng.sample(docs, rng.randint(0, len(docs)))
        ranked: list[str] = []
        for d in pick:
            ranked += [f"{d}#{j}" for j in range(rng.choice((1, 1, 2)))]
        run[qid] = ranked
    return qrels, run


@pytest.mark.parametrize("seed", range(25))
def test_judged_and_ndcg_judged_equal_ir_measures(seed: int) -> None:
    rng = random.Random(seed)
    qrels, ranked = pooled_case(rng)
    names = [f"judged@{k}" for k in KS] + [f"ndcg_judged@{k}" for k in KS] + ["ndcg_judged"]
    config = MeasurementConfig(names, gain="linear", id_separator="#")
    result = evaluate(ranked, qrels, config, missing="skip")
    # ir_measures reads {doc: score}: the document ranking (after mapping and dedup), scores distinct;
    # an empty ranking is left out (its Judged@k divides by zero)
    run = {qid: {d: float(1000 - i) for i, d in enumerate(document_ranking(ids, "#"))}
           for qid, ids in ranked.items() if ids}
    measures = [Judged @ k for k in KS] + [nDCG(judged_only=True) @ k for k in KS] + [nDCG(judged_only=True)]
    ours_of = {**{Judged @ k: f"judged@{k}" for k in KS},
               **{nDCG(judged_only=True) @ k: f"ndcg_judged@{k}" for k in KS},
               nDCG(judged_only=True): "ndcg_judged"}
    reference: dict[str, dict[str, float]] = {}
    for m in ir_measures.iter_calc(measures, qrels, run):
        reference.setdefault(m.query_id, {})[ours_of[m.measure]] = m.value
    compared = 0
    for qid, judgments in qrels.items():
        if not any(g > 0 for g in judgments.values()):
            assert qid in result.unscorable
            continue
        got = result.per_query[qid]
        want = reference.get(qid, {})
        if qid not in run:  # nothing came back: ir_measures has no Judged for it, ours is 0
            assert all(got[f"judged@{k}"] == 0.0 for k in KS)
        for name, value in want.items():
            assert abs(got[name] - value) <= TOL, (seed, qid, name, got[name], value)
            compared += 1
    assert compared > 0


@pytest.mark.parametrize("seed", range(10))
def test_the_judged_at_k_a_pooled_run_reports_equals_ir_measures(seed: int) -> None:
    """The per-query judged@k of a pooled set's report (over the top k the run returned, after the id
    rule and dedup) is ir_measures' Judged@k of that ranking."""
    from pytest_ragmetrics.unjudged import judged_share

    rng = random.Random(1000 + seed)
    qrels, ranked = pooled_case(rng)
    for k in KS:
        run = {qid: {d: float(1000 - i) for i, d in enumerate(document_ranking(ids, "#")[:k])}
               for qid, ids in ranked.items() if ids}
        want = {m.query_id: m.value for m in ir_measures.iter_calc([Judged @ k], qrels, run)}
        for qid, value in want.items():
            top = document_ranking(ranked[qid], "#")[:k]
            assert abs(judged_share(top, qrels[qid]) - value) <= TOL, (seed, qid, k)


# ------------------------------------------------------------------ upper bounds of a pooled query


@pytest.mark.parametrize("baseline_top", [None, RANKING, ["u1", "a", "u3", "c"], ["u2", "u1", "b"]],
                         ids=["no-baseline-top", "same-top", "some-new", "none-new"])
def test_the_bounds_of_a_pooled_query_score_each_distinct_rejudging_once(
        baseline_top: list[str] | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each bound is the ranking re-scored with some unjudged documents judged at the top grade, as
    written out here; the four often coincide (an unchanged retriever returns the baseline's top),
    and a coinciding one is scored once."""
    from pytest_ragmetrics import unjudged

    config = MeasurementConfig(["recall@5", "ndcg@5", "mrr@5"])
    now = score_query(RANKING, JUDGMENTS, config)[1]
    assert now is not None

    def rejudged(ranking: list[str], docs: list[str]) -> dict[str, float] | None:
        return score_query(ranking, {**JUDGMENTS, **{d: 3 for d in docs}}, config)[1] if docs else None

    docs = ["u1", "u2"]
    new = None if baseline_top is None else [d for d in docs if d not in baseline_top]
    upper, upper_new = rejudged(RANKING, docs), rejudged(RANKING, docs if new is None else new)
    expected = {
        "upper": upper and {m: max(v, now[m]) for m, v in upper.items()},
        "upper_new": upper_new and {m: max(v, now[m]) for m, v in upper_new.items()},
        "baseline_upper_new": rejudged(baseline_top, new) if baseline_top is not None and new else None,
        "baseline_upper": rejudged(baseline_top, docs) if baseline_top is not None else None,
    }
    rejudgings = [(RANKING, docs), (RANKING, docs if new is None else new)]
    if baseline_top is not None:
        rejudgings += [(baseline_top, new or []), (baseline_top, docs)]
    distinct = {(tuple(ranking), frozenset(raised)) for ranking, raised in rejudgings if raised}

    calls: list[list[str]] = []

    def counted(ranking: list[str], *args: object, **kwargs: object) -> object:
        calls.append(list(ranking))
        return score_query(ranking, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(unjudged, "score_query", counted)
    bounds = unjudged.measure_unjudged(RANKING, JUDGMENTS, now, config, 3, baseline_top)
    assert bounds.docs == docs and bounds.new == new
    assert {name: getattr(bounds, name) for name in expected} == expected
    assert len(calls) == len(distinct)  # same-top: upper and baseline_upper are one scoring
    assert bounds.upper is not bounds.upper_new  # each field its own dict, whatever was shared
