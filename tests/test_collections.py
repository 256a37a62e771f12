"""The four real collections in ../shared/collections load, and `ragmetrics evaluate` agrees with
trec_eval on a real BM25 run over SciFact.

Expected counts are the collections' own facts (their README.md / SOURCE.md), not outputs of this
package. Skipped where ../shared/collections is absent (a user's checkout); present here and in CI.
"""

from __future__ import annotations

import csv
import importlib.util
import json
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest
import pytrec_eval

from pytest_ragmetrics import InputError, load_golden, load_qrels
from pytest_ragmetrics.cli import main

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("target", "n_queries", "n_pairs", "grades"),
    [
        ("scifact", 300, 339, {1: 339}),
        ("nfcorpus", 323, 12334, {1: 11758, 2: 576}),
        ("cranfield/qrels_gain.tsv", 225, 1837, {0: 225, 1: 363, 2: 734, 3: 387, 4: 128}),
        ("cmrc2018", 4219, 4219, {1: 4219}),
    ],
)
def test_collection_loads(collections_dir: Path, target: str, n_queries: int, n_pairs: int, grades: dict[int, int]) -> None:
    golden = load_golden(collections_dir / target)
    assert len(golden) == n_queries
    assert golden.skipped == ()
    assert sum(len(q.judgments) for q in golden) == n_pairs
    assert Counter(g for q in golden for g in q.judgments.values()) == grades
    assert golden.unscorable() == []  # every query has at least one relevant document
    assert all(q.text.strip() for q in golden)


def test_cranfield_graded_facts(collections_dir: Path) -> None:
    golden = load_golden(collections_dir / "cranfield" / "qrels_gain.tsv")
    # SOURCE.md: 1,612 pairs with rel > 0; 6 queries with exactly one relevant document
    assert sum(q.n_relevant() for q in golden) == 1612
    assert sum(1 for q in golden if q.n_relevant() == 1) == 6
    # doc 995 has the original code 3 for query 125: gain 5 - 3 = 2
    assert golden["125"].judgments["995"] == 2


def test_cmrc2018_chinese_text_survives(collections_dir: Path) -> None:
    golden = load_golden(collections_dir / "cmrc2018")
    first = next(iter(golden))
    assert first.qid == "DEV_0_QUERY_0"
    assert first.text == "《战国无双3》是由哪两个公司合作开发的？"
    assert dict(first.judgments) == {"DEV_0": 1}


def test_cranfield_original_codes_fail_with_a_clear_message(collections_dir: Path) -> None:
    path = collections_dir / "cranfield" / "qrels.tsv"
    for load in (load_golden, lambda p: load_golden(p.parent), load_qrels):
        with pytest.raises(InputError) as info:
            load(path)
        message = str(info.value)
        # cranfield/qrels.tsv line 30 is "1\t486\t-1" (the first -1 code)
        assert message.startswith(str(path)) and "line 30" in message and "grade -1 of '486'" in message
        assert "grades must be integers >= 0" in message


# ------------------------------------------------------------------ BM25 over SciFact


def _run_builder() -> ModuleType:
    path = REPO / "benchmarks" / "make_scifact_bm25_run.py"
    spec = importlib.util.spec_from_file_location("make_scifact_bm25_run", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _tsv_qrels(path: Path) -> dict[str, dict[str, int]]:
    """qrels.tsv read with csv, independently of load_qrels, for pytrec_eval."""
    qrels: dict[str, dict[str, int]] = {}
    with path.open(encoding="utf-8", newline="") as f:
        rows = csv.reader(f, delimiter="\t")
        assert next(rows) == ["qid", "doc_id", "rel"]
        for qid, doc, rel in rows:
            qrels.setdefault(qid, {})[doc] = int(rel)
    return qrels


@pytest.mark.slow
def test_bm25_scifact_run_cli_equals_pytrec_eval(collections_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # rank-bm25 comes with the stack extra, which CI installs: no importorskip, a missing one must show.
    builder = _run_builder()
    scifact = collections_dir / "scifact"
    # the run's scores are rank_bm25's BM25Okapi scores, computed over postings: the same bits
    from rank_bm25 import BM25Okapi

    bm25 = BM25Okapi([builder.tokenize(f"{d.get('title', '')} {d['text']}")
                      for d in builder._jsonl(scifact / "corpus.jsonl")], k1=0.9, b=0.4)
    scores_of = builder.okapi_scorer(bm25)
    for query in [q["query"] for q in builder._jsonl(scifact / "queries.jsonl")][:12] + ["cells cells zzzunseen", ""]:
        tokens = builder.tokenize(query)
        assert scores_of(tokens).tobytes() == bm25.get_scores(tokens).tobytes(), query
    run_path = tmp_path / "scifact.run"
    builder.write_trec_run(builder.bm25_run(scifact, depth=100), run_path)

    argv = ["evaluate", "--qrels", str(scifact / "qrels.tsv"), "--run", str(run_path), "--gain", "linear",
            "--format", "json", "--per-query", "-m", "ndcg@10", "-m", "recall@100", "-m", "mrr@10", "-m", "P@10"]
    assert main(argv) == 0
    ours = json.loads(capsys.readouterr().out)

    with run_path.open(encoding="utf-8") as f:
        run = pytrec_eval.parse_run(f)
    qrels = _tsv_qrels(scifact / "qrels.tsv")
    theirs = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.100", "P.10"}).evaluate(run)
    cut = {q: dict(sorted(d.items(), key=lambda p: (p[1], p[0]), reverse=True)[:10]) for q, d in run.items()}
    rr = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(cut)

    assert ours["n"] == len(theirs) == 300
    assert ours["missing"] == [] and ours["unscorable"] == []
    pairs = {"ndcg@10": "ndcg_cut_10", "recall@100": "recall_100", "precision@10": "P_10"}
    for qid, row in theirs.items():
        for name, trec_name in pairs.items():
            assert abs(ours["per_query"][qid][name] - row[trec_name]) <= 1e-9, (qid, name)
        assert abs(ours["per_query"][qid]["mrr@10"] - rr[qid]["recip_rank"]) <= 1e-9, qid
    for name, trec_name in pairs.items():
        mean = sum(row[trec_name] for row in theirs.values()) / len(theirs)
        assert abs(ours["aggregate"][name] - mean) <= 1e-9, name
    # a sane BM25: BEIR publishes nDCG@10 0.665 for SciFact
    assert 0.6 <= ours["aggregate"]["ndcg@10"] <= 0.7
    assert 0.8 <= ours["aggregate"]["recall@100"] <= 0.95
