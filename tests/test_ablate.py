"""Ablations and sweeps (pytest_ragmetrics.tools.ablate and report.ablation, `ragmetrics ablate`,
eval/eval_retrieval.py).

Two kinds of tests: exact ones over a scripted retriever (fixed rankings per mode,
so the expected table and breakdown are known by hand), and ones over the real
reference stack on the 30-document car corpus (tests/stack/data), with the tiny
random cross-encoder of tests/tiny_models.py for the rerank row.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_ragmetrics import MeasurementConfig, load_golden, score_query
from pytest_ragmetrics.cli import main
from pytest_ragmetrics.cli.ablate import FLAGS, parse_sweep
from pytest_ragmetrics.errors import RagMetricsError
from pytest_ragmetrics.golden import GoldenSet, Query
from pytest_ragmetrics.report.tables import sample_size_note
from pytest_ragmetrics.stack.factory import Chunking, stack_factory
from pytest_ragmetrics.tools.ablate import (
    NO_RERANKER,
    PARAMETER_NAMES,
    AblationError,
    Setting,
    ablate,
    bind_metrics,
    sweep_settings,
)
from pytest_ragmetrics.report.ablation import (
    ablation_breakdown,
    ablation_notes,
    ablation_table,
    render_json,
    render_markdown,
)
from tiny_models import build_tiny_cross_encoder
from warm_cache import built_again, home_with_cache_of  # tests/warm_cache.py

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

REPO = Path(__file__).resolve().parents[1]
CAR_CORPUS = REPO / "tests" / "stack" / "data" / "car_corpus.jsonl"

# --------------------------------------------------------------------- scripted retriever

# Rankings per base mode; hybrid+rerank reverses hybrid (what a reranker might do).
RANKINGS = {
    "bm25": {
        "same": ["a#1-2", "x#1-1", "y#1-1"],
        "moved": ["x#1-1", "y#1-1", "z#1-1"],
        "partly": ["c#1-1", "x#1-1", "y#1-1"],
        "none": ["x#1-1"],
    },
    "vector": {
        "same": ["a#2-2", "a#1-2", "y#1-1"],  # two chunks of a: one document after dedup
        "moved": ["b#1-1", "x#1-1", "y#1-1"],
        "partly": ["c#1-1", "d#1-1", "x#1-1"],
        "none": ["x#1-1"],
    },
    "hybrid": {
        "same": ["a#1-2", "y#1-1", "x#1-1"],
        "moved": ["x#1-1", "b#1-1", "y#1-1"],
        "partly": ["c#1-1", "x#1-1", "d#1-1"],
        "none": ["x#1-1"],
    },
}


def scripted_golden() -> GoldenSet:
    return GoldenSet("scripted", (
        Query("same", "same", {"a": 1}, ("standard",)),
        Query("moved", "moved", {"b": 1}, ("paraphrase",)),
        Query("partly", "partly", {"c": 1, "d": 1}, ("standard",)),
        Query("none", "none", {"x": 0}, ("standard",)),  # judged, nothing relevant: never scored
    ))


class Scripted:
    """search_batch over fixed rankings; records every call."""

    def __init__(self, reranker: Any = None) -> None:
        self.reranker = reranker
        self.calls: list[tuple[str, int, int, dict[str, Any]]] = []

    def search_batch(self, queries: list[str], top_k: int = 10, fetch_k: int = 30, mode: str = "hybrid",
                     threshold: float | None = None, **kw: Any) -> list[list[str]]:
        self.calls.append((mode, top_k, fetch_k, kw))
        base, _, rerank = mode.partition("+")
        out = []
        for q in queries:
            ranking = RANKINGS[base][q]
            out.append(list(reversed(ranking)) if rerank else ranking)
        return out


MODES3 = [Setting(mode=m, top_k=3) for m in ("bm25", "vector", "hybrid")]
CONFIG = MeasurementConfig(measures=("recall@3", "mrr@3"))


def test_modes_table_has_one_row_per_mode_and_the_sample_size_note() -> None:
    r = Scripted()
    result = ablate(scripted_golden(), r, MODES3, CONFIG)
    assert [c[0] for c in r.calls] == ["bm25", "vector", "hybrid"]  # one search_batch per setting
    lines = ablation_table(result).splitlines()
    assert lines[0].split("|")[1:-1] == [" mode   ", " recall@3 ", " mrr@3  "]
    assert len(lines) == 2 + 3
    assert lines[2].startswith("| bm25 ") and lines[4].startswith("| hybrid ")
    # three scored questions ("none" has nothing relevant): 1/n = 0.3333 under the table
    assert result.n == 3
    notes = ablation_notes(result)
    assert notes[0] == sample_size_note(3) and "1/n = 0.3333" in notes[0]
    assert any("no relevant document" in n and "'none'" in n for n in notes)
    # means by hand: recall same 1, moved 0|1|1, partly 1/2|1|1/2
    agg = {row.label: row.aggregate for row in result.rows}
    assert agg["bm25"]["recall@3"] == pytest.approx((1 + 0 + 0.5) / 3)
    assert agg["vector"]["recall@3"] == pytest.approx((1 + 1 + 1) / 3)
    assert agg["hybrid"]["mrr@3"] == pytest.approx((1 + 0.5 + 1) / 3)
    assert "none" not in result.rows[0].per_query and result.rows[0].unscorable == ["none"]


def test_retriever_warnings_are_noted_once_under_the_table() -> None:
    warning = "3 of 3 documents (100%) are Chinese (Han script), which the encoder m (en) does not cover"

    class Warned(Scripted):
        def describe(self) -> dict[str, Any]:
            return {"model": "m", "warnings": [warning], "encoder_choice": "e5 chosen because of Han"}

    result = ablate(scripted_golden(), Warned(), MODES3, CONFIG)
    notes = ablation_notes(result)
    assert notes.count(f"Retriever: {warning}") == 1  # three rows, one note
    assert notes.count("Retriever: e5 chosen because of Han") == 1
    assert ablation_notes(ablate(scripted_golden(), Scripted(), MODES3, CONFIG))[1:] == [
        n for n in notes[1:] if not n.startswith("Retriever:")]


def test_breakdown_lists_exactly_the_questions_that_differ() -> None:
    result = ablate(scripted_golden(), Scripted(), MODES3, CONFIG)
    moved = dict(result.differing("recall@3"))
    assert set(moved) == {"moved", "partly"}
    assert moved["moved"] == {"bm25": 0.0, "vector": 1.0, "hybrid": 1.0}
    assert list(moved) == ["moved", "partly"]  # widest spread first
    assert dict(result.differing("mrr@3")).keys() == {"moved"}  # partly: c first everywhere
    text = ablation_breakdown(result, "recall@3")
    assert "| moved " in text and "| partly " in text
    assert "| same " not in text and "| none " not in text
    assert text.startswith("2 of 3 questions score differently across rows on recall@3")
    assert "paraphrase 1/1" in text and "standard 1/2" in text
    with pytest.raises(AblationError, match="not a column"):
        result.differing("ndcg@3")


def test_rerank_row_is_skipped_without_a_cross_encoder_and_says_why() -> None:
    settings = [*MODES3, Setting(mode="hybrid+rerank", top_k=3)]
    r = Scripted(reranker=None)
    result = ablate(scripted_golden(), r, settings, CONFIG)
    assert [c[0] for c in r.calls] == ["bm25", "vector", "hybrid"]  # never asked to rerank
    skipped = result.row("hybrid+rerank")
    assert skipped.skipped == NO_RERANKER.format_map(PARAMETER_NAMES) and skipped.per_query == {}
    assert len(ablation_table(result).splitlines()) == 2 + 3
    # the library names its parameter; a command passes its flags instead
    assert any(n.startswith("hybrid+rerank: skipped, no cross-encoder given (rerank_model)")
               for n in ablation_notes(result))
    flagged = ablate(scripted_golden(), Scripted(reranker=None), settings, CONFIG, spelling=FLAGS)
    assert any(n.startswith("hybrid+rerank: skipped, no cross-encoder given (--rerank-model PATH)")
               for n in ablation_notes(flagged))
    assert "hybrid+rerank" not in dict(result.differing("recall@3")).get("moved", {})
    # with a reranker the row is measured
    result = ablate(scripted_golden(), Scripted(reranker=object()), settings, CONFIG)
    assert result.row("hybrid+rerank").skipped is None
    assert result.row("hybrid+rerank").per_query["same"]["mrr@3"] == pytest.approx(1 / 3)  # a, reversed, is 3rd


def test_sweeps_give_one_row_per_value_and_pass_the_value_on() -> None:
    base = Setting(mode="hybrid", top_k=3, fetch_k=30)
    r = Scripted()
    result = ablate(scripted_golden(), r, sweep_settings(base, "fetch_k", [10, 30, 60]), CONFIG,
                    parameter="fetch_k")
    assert [row.label for row in result.rows] == ["10", "30", "60"]
    assert [c[2] for c in r.calls] == [10, 30, 60] and {c[0] for c in r.calls} == {"hybrid"}
    assert ablation_table(result).splitlines()[0].startswith("| fetch_k ")
    assert len(ablation_table(result).splitlines()) == 2 + 3

    # top_k with @k columns: each row is cut at its own k
    result = ablate(scripted_golden(), Scripted(), sweep_settings(base, "top_k", [1, 2, 3]), CONFIG,
                    metrics=["recall@k", "mrr@k"], parameter="top_k")
    assert result.columns == ("recall@k", "mrr@k")
    assert [row.names for row in result.rows] == [("recall@1", "mrr@1"), ("recall@2", "mrr@2"), ("recall@3", "mrr@3")]
    recall = [row.aggregate["recall@k"] for row in result.rows]
    assert recall == pytest.approx([(1 + 0 + 0.5) / 3, (1 + 1 + 0.5) / 3, (1 + 1 + 1) / 3])
    assert any("not comparable across different k" in n for n in ablation_notes(result))

    # rrf_k is handed to search_batch; chunk sweeps set the chunking
    r = Scripted()
    ablate(scripted_golden(), r, sweep_settings(base, "rrf_k", [0, 60]), CONFIG, parameter="rrf_k")
    assert [c[3]["rrf_k"] for c in r.calls] == [0, 60]
    # fusion and route weights too, and only when a row sets them (a team's own retriever need not know them)
    r = Scripted()
    ablate(scripted_golden(), r, sweep_settings(base, "fusion", ["rrf", "convex-minmax"]), CONFIG, parameter="fusion")
    assert [c[3]["fusion"] for c in r.calls] == ["rrf", "convex-minmax"] and "route_weights" not in r.calls[0][3]
    r = Scripted()
    weighted = sweep_settings(base, "route_weights", ["1:1", "1:0.5"])
    ablate(scripted_golden(), r, weighted, CONFIG, parameter="route_weights")
    assert [c[3]["route_weights"] for c in r.calls] == ["1:1", "1:0.5"] and [s.name for s in weighted] == ["1:1", "1:0.5"]
    assert "fusion" not in base.search_kwargs()
    chunked = sweep_settings(base, "chunk_size", [200, 40, None], overlap=60)
    assert [s.chunking for s in chunked] == [Chunking(200, 60), Chunking(40, 8), Chunking(None, 0)]
    assert [s.name for s in chunked] == ["200/60", "40/8", "whole"]


def test_a_single_retriever_refuses_another_chunking() -> None:
    class Chunked(Scripted):
        chunk_size, overlap = 300, 60

    ok = ablate(scripted_golden(), Chunked(), [Setting(mode="bm25", chunking=Chunking(300, 60))], CONFIG)
    assert ok.rows[0].n == 3
    with pytest.raises(AblationError, match="needs an index of its own"):
        ablate(scripted_golden(), Chunked(), [Setting(mode="bm25", chunking=Chunking(200, 40))], CONFIG)


def test_cutoff_deeper_than_top_k_and_short_rankings_are_noted() -> None:
    result = ablate(scripted_golden(), Scripted(), [Setting(mode="bm25", top_k=2), Setting(mode="vector", top_k=3)],
                    MeasurementConfig(measures=("recall@3",)))
    notes = ablation_notes(result)
    assert any(n.startswith("bm25: top_k=2 is below the @3 cutoff") for n in notes)
    # vector's "same" ranking holds two chunks of one document: 2 documents, not 3
    short = next(n for n in notes if n.startswith("vector:"))
    assert "1 of 3 queries came back with fewer than 3 distinct documents (fewest 2)" in short
    assert "unique_docs=True fills the ranking" in short and "--" not in short
    flagged = ablate(scripted_golden(), Scripted(), [Setting(mode="vector", top_k=3)],
                     MeasurementConfig(measures=("recall@3",)), spelling=FLAGS)
    assert any("--unique-docs fills the ranking" in n for n in ablation_notes(flagged))


def test_settings_and_sweeps_are_validated() -> None:
    with pytest.raises(AblationError, match="share the row label"):
        ablate(scripted_golden(), Scripted(), [Setting("bm25"), Setting("bm25")], CONFIG)
    with pytest.raises(AblationError, match="no settings"):
        ablate(scripted_golden(), Scripted(), [], CONFIG)
    assert parse_sweep("top_k=5,10,20") == ("top_k", [5, 10, 20])
    assert parse_sweep("chunk-size=200, whole,200") == ("chunk_size", [200, None])
    assert parse_sweep("rrf_k=0,60") == ("rrf_k", [0, 60])
    assert parse_sweep("fusion=rrf,convex-zscore") == ("fusion", ["rrf", "convex-zscore"])
    assert parse_sweep("route_weights=1:1,1:0.5,1:0") == ("route_weights", ["1:1", "1:0.5", "1:0"])
    for bad, message in [("top_k", "PARAM=V1,V2"), ("depth=3", "cannot sweep 'depth'"),
                         ("top_k=5,x", "not an integer"), ("fetch_k=0", "must be >= 1"),
                         ("fusion=sum", "unknown fusion 'sum'"), ("route_weights=0:0", "above 0"),
                         ("route_weights=bm25=1", "B:V"), ("route_weights=heavy", "route weights must look like")]:
        with pytest.raises(RagMetricsError, match=message):
            parse_sweep(bad)
    assert bind_metrics(["P@5", "recall@k", "ndcg@10", "recall@K"], 7) == (
        ["precision@5", "recall@k", "ndcg@10"], ["precision@5", "recall@7", "ndcg@10"])


def test_json_and_markdown_rendering() -> None:
    settings = [*MODES3, Setting(mode="hybrid+rerank", top_k=3)]
    result = ablate(scripted_golden(), Scripted(), settings, CONFIG, title="Modes")
    payload = json.loads(json.dumps(render_json([result], {"corpus": "c"})))
    table = payload["tables"][0]
    assert payload["corpus"] == "c" and payload["config"]["metrics"] == ["recall@3", "mrr@3"]
    assert table["n"] == 3 and table["one_over_n"] == pytest.approx(1 / 3)
    assert [r["label"] for r in table["rows"]] == ["bm25", "vector", "hybrid", "hybrid+rerank"]
    assert table["rows"][3]["skipped"] == NO_RERANKER.format_map(PARAMETER_NAMES)
    assert table["rows"][0]["per_query"]["moved"] == {"recall@3": 0.0, "mrr@3": 0.0}
    assert [d["qid"] for d in table["differing"]["queries"]] == ["moved", "partly"]
    text = render_markdown([result], breakdown=False)
    assert text.startswith("## Modes\n\n| mode ")
    assert "2 of 3 questions score differently across rows on recall@3 (breakdown=True lists them)." in text
    flagged = ablate(scripted_golden(), Scripted(), settings, CONFIG, title="Modes", spelling=FLAGS)
    assert "(--per-query lists them)." in render_markdown([flagged], breakdown=False)
    assert "### Questions that moved (mrr@3)" in render_markdown([result], column="mrr@3")


# ------------------------------------------------------------------- the reference stack

CAR_GOLDEN = """\
- id: plain-brakes
  question: grinding noise when I stop
  gold_chunks: [brake-pads]
  tags: [standard]
- id: plain-cabin
  question: smell from the air vents
  gold_chunks: [cabin-filter]
  tags: [standard]
- id: plain-rust
  question: salt on the road damages the car
  gold_chunks: [rust]
  tags: [standard]
- id: para-align
  question: car pulls to the left
  gold_chunks: [alignment]
  tags: [paraphrase]
- id: para-battery
  question: the engine turns over sluggishly on frosty mornings
  gold_chunks: {battery-cold: 2, jump-start: 1}
  tags: [paraphrase]
"""


@pytest.fixture(autouse=True)
def _home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Indexes and the embedding cache go to one temporary home for this module."""
    home = tmp_path_factory.getbasetemp() / "ragmetrics-home-ablate-pool"
    monkeypatch.setenv("RAGMETRICS_HOME", str(home))
    for var in [v for v in os.environ if v.startswith("RAGMETRICS_") and v != "RAGMETRICS_HOME"]:
        monkeypatch.delenv(var)
    return home


@pytest.fixture(scope="module")
def car_golden(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("golden") / "car.yaml"
    path.write_text(CAR_GOLDEN, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def tiny_reranker(tmp_path_factory: pytest.TempPathFactory) -> Path:
    texts = [json.loads(line)["title"] + " " + json.loads(line)["text"]
             for line in CAR_CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]
    return build_tiny_cross_encoder(tmp_path_factory.mktemp("tiny-ce"), [*texts, CAR_GOLDEN])


@pytest.fixture(scope="module")
def car_factory(tmp_path_factory: pytest.TempPathFactory, tiny_reranker: Path) -> Any:
    home = tmp_path_factory.getbasetemp() / "ragmetrics-home-ablate-pool"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RAGMETRICS_HOME", str(home))
        return stack_factory(CAR_CORPUS, default_chunking=Chunking(120, 20), rerank_model=tiny_reranker)


@pytest.mark.slow  # loads MiniLM (and torch for the tiny cross-encoder)
def test_stack_modes_match_one_query_at_a_time(car_golden: Path, car_factory: Any) -> None:
    golden = load_golden(car_golden)
    config = MeasurementConfig(measures=("recall@3", "mrr@3"))
    settings = [Setting(mode=m, top_k=3, fetch_k=10) for m in ("bm25", "vector", "hybrid", "hybrid+rerank")]
    result = ablate(golden, car_factory, settings, config)
    assert [r.label for r in result.measured] == ["bm25", "vector", "hybrid", "hybrid+rerank"]
    assert result.n == 5 and len(ablation_table(result).splitlines()) == 2 + 4
    retriever = car_factory(None)
    expected: dict[str, dict[str, float]] = {}
    for s in settings:
        row = result.row(s.name)
        assert row.chunks == len(retriever.chunks) and row.retriever["chunk_size"] == 120
        for q in golden:
            hits = retriever.search(q.text, 3, fetch_k=10, mode=s.mode)
            _, metrics = score_query([h.id for h in hits], q.judgments, config)
            assert row.per_query[q.qid] == pytest.approx(metrics), (s.mode, q.qid)
            expected.setdefault(q.qid, {})[s.mode] = metrics["mrr@3"]
    def spread(values: dict[str, float]) -> float:
        return max(values.values()) - min(values.values())

    assert {q for q, _ in result.differing("mrr@3")} == {q for q, v in expected.items() if spread(v) > 1e-9}
    # without the (random) reranker: the paraphrase moves, the plain question does not
    plain = ablate(golden, car_factory, settings[:3], config)
    differ = {q for q, v in expected.items() if spread({m: v[m] for m in ("bm25", "vector", "hybrid")}) > 1e-9}
    assert {q for q, _ in plain.differing("mrr@3")} == differ
    assert "para-align" in differ  # bm25 does not rank "drifts to one side" first
    assert "plain-brakes" not in differ  # every mode puts brake-pads first


@pytest.mark.slow  # loads MiniLM (and torch for the tiny cross-encoder)
def test_stack_chunk_size_sweep_uses_one_index_dir_per_setting(
    car_golden: Path, car_factory: Any, _home: Path, tmp_path: Path
) -> None:
    golden = load_golden(car_golden)
    base = Setting(mode="hybrid", top_k=3, fetch_k=10)
    settings = sweep_settings(base, "chunk_size", [80, 120, None], overlap=20)
    result = ablate(golden, car_factory, settings, parameter="chunk_size",
                    config=MeasurementConfig(measures=("recall@3",)))
    dirs = [Path(r.index_dir) for r in result.rows]
    assert len(set(dirs)) == 3 and all(d.parent == _home / "index" for d in dirs)
    assert dirs[1] == car_factory(None).data_dir  # the default chunking's index, shared with other tables
    chunks = [r.chunks for r in result.rows]
    assert chunks[0] > chunks[1] > chunks[2] == 30  # whole documents: one chunk each
    table = ablation_table(result).splitlines()
    assert table[0].startswith("| chunk_size | chunks |") and table[4].startswith("| whole ")

    # with an explicit data dir: a subdirectory per chunking
    factory = stack_factory(CAR_CORPUS, data_dir=tmp_path / "idx", default_chunking=Chunking(120, 20))
    result = ablate(golden, factory, settings, config=MeasurementConfig(measures=("recall@3",)))
    assert [Path(r.index_dir).relative_to(tmp_path / "idx").as_posix() for r in result.rows] == [
        "chunks-80-20", "chunks-120-20", "whole"]


# ------------------------------------------------------------------------------- the CLI


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.slow  # loads MiniLM (and torch for the tiny cross-encoder)
def test_cli_ablate_markdown_with_breakdown_and_sweep(
    capsys: pytest.CaptureFixture[str], car_golden: Path, tmp_path: Path
) -> None:
    code, out, err = run_cli(
        capsys, "ablate", "--corpus", str(CAR_CORPUS), "--golden", str(car_golden),
        "--chunk-size", "120", "--overlap", "20", "--data-dir", str(tmp_path / "idx"),
        "-m", "recall@3", "-m", "mrr@3", "--fetch-k", "10", "--per-query", "--by", "mrr@3",
        "--sweep", "top_k=2,3", "--sweep", "chunk_size=80,120",
    )
    assert code == 0, err
    assert "## Modes (top_k=3, fetch_k=10, rrf_k=60, chunks 120/20)" in out
    assert "| mode   | recall@3 | mrr@3  |" in out
    assert out.count(sample_size_note(5)) == 3
    assert "hybrid+rerank: skipped, no cross-encoder given (--rerank-model PATH)" in out
    assert "### Questions that moved (mrr@3)" in out and "| para-align " in out
    assert "## Sweep top_k (mode hybrid;" in out and "| top_k | recall@3 | mrr@3 " in out
    assert "top_k=2 is below the @3 cutoff" in out
    assert "## Sweep chunk_size (mode hybrid;" in out and "| 80/20 " in out
    assert "index 120/20: 30 documents" in err and "index 80/20: 30 documents" in err
    assert {p.name for p in (tmp_path / "idx").iterdir()} == {"chunks-120-20", "chunks-80-20"}


@pytest.mark.slow  # loads MiniLM
def test_cli_ablate_sweeps_fusion_and_route_weights(
    capsys: pytest.CaptureFixture[str], car_golden: Path, tmp_path: Path
) -> None:
    code, out, err = run_cli(
        capsys, "ablate", "--corpus", str(CAR_CORPUS), "--golden", str(car_golden), "--format", "json",
        "--chunk-size", "120", "--overlap", "20", "--data-dir", str(tmp_path / "idx"), "-m", "recall@3",
        "-m", "mrr@3", "--modes", "bm25,hybrid", "--fetch-k", "10", "--unique-docs",
        "--sweep", "fusion=rrf,convex-minmax,convex-zscore", "--sweep", "route_weights=1:1,1:0",
    )
    assert code == 0, err
    modes, fusion, weights = json.loads(out)["tables"]
    assert [r["label"] for r in fusion["rows"]] == ["rrf", "convex-minmax", "convex-zscore"]
    assert [r["retriever"].get("fusion", "rrf") for r in fusion["rows"]] == ["rrf", "rrf", "rrf"]  # the index's own
    assert [r["label"] for r in weights["rows"]] == ["1:1", "1:0"]
    # with the vector route weighted to 0, hybrid ranks as BM25 does: the same scores on every question
    bm25 = next(r for r in modes["rows"] if r["label"] == "bm25")
    assert weights["rows"][1]["per_query"] == bm25["per_query"]
    assert weights["rows"][0]["per_query"] == next(r for r in modes["rows"] if r["label"] == "hybrid")["per_query"]


@pytest.mark.slow  # loads MiniLM (and torch for the tiny cross-encoder)
def test_cli_ablate_json_with_the_tiny_reranker(
    capsys: pytest.CaptureFixture[str], car_golden: Path, tiny_reranker: Path, tmp_path: Path
) -> None:
    code, out, err = run_cli(
        capsys, "ablate", "--corpus", str(CAR_CORPUS), "--golden", str(car_golden),
        "--chunk-size", "120", "--overlap", "20", "-m", "recall@3", "-m", "ndcg@3",
        "--rerank-model", str(tiny_reranker), "--format", "json",
    )
    assert code == 0, err
    payload = json.loads(out)
    (table,) = payload["tables"]
    assert [r["label"] for r in table["rows"]] == ["bm25", "vector", "hybrid", "hybrid+rerank"]
    rerank = table["rows"][3]
    assert "skipped" not in rerank and rerank["retriever"]["reranker"] == tiny_reranker.name
    assert set(rerank["per_query"]) == {"plain-brakes", "plain-cabin", "plain-rust", "para-align", "para-battery"}
    assert table["n"] == 5 and payload["builds"][0]["chunks"] > 30


def test_cli_ablate_bad_inputs_exit_2_with_a_clear_message(
    capsys: pytest.CaptureFixture[str], car_golden: Path, tmp_path: Path
) -> None:
    missing = tmp_path / "no-such-corpus"
    code, out, err = run_cli(capsys, "ablate", "--corpus", str(missing), "--golden", str(car_golden))
    assert code == 2 and out == ""
    assert err.startswith("ragmetrics ablate: error: ") and str(missing) in err and "no such corpus" in err
    for args, message in [
        (["--sweep", "depth=3"], "cannot sweep 'depth'"),
        (["--modes", "bm25,semantic"], "unknown mode 'semantic'"),
        (["--by", "ndcg@3", "-m", "recall@3"], "--by ndcg@3: not among the metrics"),
        (["--top-k", "0"], "--top-k must be >= 1"),
    ]:
        code, _, err = run_cli(capsys, "ablate", "--corpus", str(CAR_CORPUS), "--golden", str(car_golden), *args)
        assert code == 2 and message in err, (args, err)
    bad_golden = tmp_path / "bad.yaml"
    bad_golden.write_text("- id: q1\n  question: brakes\n  gold_chunks: []\n", encoding="utf-8")
    code, _, err = run_cli(capsys, "ablate", "--corpus", str(CAR_CORPUS), "--golden", str(bad_golden))
    assert code == 2 and "gold_chunks is empty" in err


@pytest.mark.slow
def test_eval_retrieval_script_prints_the_demo_table(warm_demo_home: Path) -> None:
    """The script measures the demo's setting: the demo's built index and embedding cache serve it."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "RAGMETRICS_HOME": str(warm_demo_home)}
    proc = subprocess.run([sys.executable, str(REPO / "eval" / "eval_retrieval.py")], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert out.startswith("72 questions, corpus 48 documents")
    assert "| mode   | recall@10 | hit_rate@10 | mrr@10 | ndcg@10 |" in out
    for mode in ("bm25", "vector", "hybrid"):
        assert f"\n| {mode} " in out
    assert sample_size_note(72) in out
    assert "hybrid+rerank: skipped, no cross-encoder given" in out
    assert "### Questions that moved (mrr@10)" in out


def test_cli_ablate_bm25_only_never_builds_a_vector_index(
    capsys: pytest.CaptureFixture[str], car_golden: Path, tmp_path: Path
) -> None:
    code, out, err = run_cli(
        capsys, "ablate", "--corpus", str(CAR_CORPUS), "--golden", str(car_golden), "--modes", "bm25",
        "--chunk-size", "whole", "--data-dir", str(tmp_path / "idx"), "-m", "mrr@3",
    )
    assert code == 0, err
    assert "index whole: 30 documents, 30 chunks, bm25" in err and "(no vector index needed)" in err
    assert not (tmp_path / "idx").exists()
    assert "| bm25 " in out and "Modes (top_k=3, fetch_k=30, rrf_k=60, whole documents)" in out
    assert "questions score differently" not in out  # one row: nothing to compare


# ------------------------------------------------------------------------------- progress

#: Every step shown, a line at each advance: a small corpus's steps "last long enough".
SHOW_EVERY_STEP = {"RAGMETRICS_PROGRESS_INTERVAL": "0.001", "RAGMETRICS_PROGRESS_MIN_SECONDS": "0"}
#: What progress lines start with (the tasks of a build and of a table's rows).
TASKS = ("tokenising for BM25:", "building the vector index:", "searching mode ")


def test_cli_ablate_shows_progress_lines_on_a_log_and_quiet_hides_them(
    capsys: pytest.CaptureFixture[str], car_golden: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in SHOW_EVERY_STEP.items():
        monkeypatch.setenv(name, value)
    argv = ["ablate", "--corpus", str(CAR_CORPUS), "--golden", str(car_golden), "--modes", "bm25",
            "--chunk-size", "whole", "-m", "mrr@3"]
    monkeypatch.setenv("RAGMETRICS_HOME", str(tmp_path / "loud"))  # cold: the BM25 index is tokenised
    code, out, err = run_cli(capsys, *argv)  # stderr is no terminal here: plain lines
    assert code == 0, err
    lines = err.splitlines()
    assert lines[0].startswith("tokenising for BM25: 30/30 chunks (100%)")
    assert lines[1].startswith("tokenising for BM25: 30 chunks in ")
    assert "searching mode bm25: 5/5 questions (100%)" in err and "searching mode bm25: 5 questions in " in err
    assert "| bm25 " in out

    monkeypatch.setenv("RAGMETRICS_HOME", str(tmp_path / "quiet"))
    code, quiet_out, err = run_cli(capsys, *argv, "--quiet")
    assert code == 0 and err == ""  # no progress, no timings (and no warning to give)
    assert quiet_out == out

    monkeypatch.setenv("RAGMETRICS_PROGRESS", "off")
    monkeypatch.setenv("RAGMETRICS_HOME", str(tmp_path / "off"))
    code, _, err = run_cli(capsys, *argv)
    assert code == 0 and not any(line.startswith(TASKS) for line in err.splitlines())
    assert "index whole: 30 documents" in err  # the timings stay: only -q drops them

    monkeypatch.setenv("RAGMETRICS_PROGRESS", "sometimes")
    code, _, err = run_cli(capsys, *argv)
    assert code == 2 and "RAGMETRICS_PROGRESS='sometimes': expected bar, lines, off or auto" in err


@pytest.mark.slow  # loads MiniLM in a fresh process
def test_cli_ablate_in_a_process_whose_stderr_is_a_log(car_golden: Path, tmp_path: Path) -> None:
    """What a CI log of a cold build shows: the build's steps and each row's search, as plain lines."""
    argv = [sys.executable, "-m", "pytest_ragmetrics", "ablate", "--corpus", str(CAR_CORPUS), "--golden",
            str(car_golden), "--modes", "bm25,hybrid", "--chunk-size", "120", "--overlap", "20", "-m", "mrr@3"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGMETRICS_")}
    env.update(SHOW_EVERY_STEP, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    loud = subprocess.run(argv, env={**env, "RAGMETRICS_HOME": str(tmp_path / "loud")}, capture_output=True,
                          text=True, timeout=600)
    assert loud.returncode == 0, loud.stderr[-3000:]
    ours = [line for line in loud.stderr.splitlines() if line.startswith(TASKS)]
    chunks = next(line for line in ours if line.startswith("tokenising for BM25: ")).split("/")[1].split()[0]
    assert f"tokenising for BM25: {chunks} chunks in " in loud.stderr
    assert any(line.startswith(f"building the vector index: {chunks}/{chunks} chunks (100%)") for line in ours)
    assert ours.index(next(line for line in ours if line.startswith(f"building the vector index: {chunks} chunks in "))) \
        < ours.index(next(line for line in ours if line.startswith("searching mode bm25: 5 questions in ")))
    assert "searching mode hybrid: 5 questions in " in loud.stderr
    assert "\r" not in loud.stderr.split("Loading weights")[0]  # no bar: stderr is no terminal

    # -q: the same builds from the embedding cache alone (every index made again, no model loaded)
    quiet_home = home_with_cache_of(tmp_path / "loud", tmp_path / "quiet")
    quiet = subprocess.run([*argv, "-q"], env={**env, "RAGMETRICS_HOME": str(quiet_home)},
                           capture_output=True, text=True, timeout=600)
    assert quiet.returncode == 0, quiet.stderr[-3000:]
    assert built_again(quiet_home)
    assert not [line for line in quiet.stderr.splitlines() if line.startswith(TASKS) or line.startswith("index ")]
    assert quiet.stdout == loud.stdout


def test_cli_ablate_leaves_questions_with_no_answer_out_and_says_so(
    capsys: pytest.CaptureFixture[str], car_golden: Path, tmp_path: Path
) -> None:
    golden = tmp_path / "golden.yaml"
    golden.write_text(car_golden.read_text(encoding="utf-8") + "\n- id: none-1\n  question: best pizza in town\n"
                      "  answerable: false\n", encoding="utf-8")
    code, out, err = run_cli(
        capsys, "ablate", "--corpus", str(CAR_CORPUS), "--golden", str(golden), "--modes", "bm25",
        "--chunk-size", "whole", "--data-dir", str(tmp_path / "idx"), "-m", "mrr@3", "--format", "json",
    )
    assert code == 0, err
    table = json.loads(out)["tables"][0]
    assert table["no_answer"] == ["none-1"]
    assert all("none-1" not in row["per_query"] and "none-1" not in row["unscorable"] for row in table["rows"])
    code, out, err = run_cli(
        capsys, "ablate", "--corpus", str(CAR_CORPUS), "--golden", str(golden), "--modes", "bm25",
        "--chunk-size", "whole", "--data-dir", str(tmp_path / "idx"), "-m", "mrr@3",
    )
    assert code == 0, err
    assert "(1 more marked answerable: false, left out)" in out
    assert "1 questions marked answerable: false are left out" in out and "'none-1'" in out
    assert "no relevant document" not in out  # not mistaken for an unscorable question
