"""BM25: tokenisers, both backends behind one interface, Chinese via jieba."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_ragmetrics.stack import (
    BACKENDS,
    BM25Index,
    Document,
    chinese_tokenizer,
    detect_language,
    english_tokenizer,
    make_tokenizer,
)


@pytest.fixture(scope="module")
def texts(car_docs: list[Document]) -> list[str]:
    return [f"{d.title}\n{d.text}" for d in car_docs]


@pytest.fixture(scope="module")
def ids(car_docs: list[Document]) -> list[str]:
    return [d.doc_id for d in car_docs]


def test_english_tokenizer() -> None:
    tok = english_tokenizer()
    assert tok("The Brake-Pads, when WORN: squeal!") == ["brake", "pads", "worn", "squeal"]
    assert tok("ﬁlter №5") == ["filter", "no5"]  # NFKC folds ligatures
    assert english_tokenizer(stopwords=False)("The pads") == ["the", "pads"]


def test_chinese_tokenizer_drops_spaces_and_punctuation() -> None:
    tokens = chinese_tokenizer()("《战国无双3》是由 光荣 开发的？")
    assert "战国" in tokens and "光荣" in tokens and "开发" in tokens
    assert all(t.strip() and t not in "《》？，。" for t in tokens)


def test_detect_language() -> None:
    assert detect_language(["brake pads wear thin", "oil change"]) == "en"
    assert detect_language(["战国无双是光荣开发的游戏", "本作以三大故事为主轴"]) == "zh"
    assert make_tokenizer("auto", ["北京是中国的首都"]).language  # type: ignore[attr-defined] == "zh"
    with pytest.raises(ValueError, match="unknown language"):
        make_tokenizer("fr")  # type: ignore[arg-type]


@pytest.mark.parametrize("backend", BACKENDS)
def test_search_contract(backend: str, texts: list[str], ids: list[str]) -> None:
    index = BM25Index(texts, english_tokenizer(), backend=backend)
    assert len(index) == len(texts)
    hits = index.search("squealing grinding brake pads", 5)
    assert ids[hits[0][0]] == "brake-pads"
    assert all(score > 0 for _, score in hits)
    assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)
    assert index.search("zeppelin xylophone", 5) == []  # no shared term: not found
    assert index.search("", 5) == []
    assert index.search("brake", 0) == []
    assert index.search_batch(["brake fluid", "tyre tread"], 3) == [
        index.search("brake fluid", 3),
        index.search("tyre tread", 3),
    ]


def test_backends_agree_on_an_english_corpus(texts: list[str]) -> None:
    queries = [
        "battery cold morning",
        "replace brake fluid",
        "tyre pressure fuel",
        "engine overheating radiator",
        "timing belt interval",
        "wiper blades streaks",
        "air filter fuel consumption",
        "steering wheel drifts",
    ]
    a = BM25Index(texts, english_tokenizer(), backend="bm25s")
    b = BM25Index(texts, english_tokenizer(), backend="rank_bm25")
    for q in queries:
        top_a, top_b = a.search(q, 3), b.search(q, 3)
        assert top_a[0][0] == top_b[0][0], q
        assert {i for i, _ in top_a} & {i for i, _ in top_b}, q


def test_rank_bm25_gives_zero_idf_to_a_term_in_half_the_documents() -> None:
    # Documented difference: rank_bm25's IDF log((N-n+.5)/(n+.5)) is 0 at n = N/2,
    # so a query made only of such a term finds nothing; bm25s still ranks it.
    texts = ["red car", "red van", "blue bike", "green boat"]
    tok = english_tokenizer()
    assert BM25Index(texts, tok, backend="rank_bm25").search("red", 4) == []
    assert {i for i, _ in BM25Index(texts, tok, backend="bm25s").search("red", 4)} == {0, 1}


def test_unknown_backend() -> None:
    with pytest.raises(ValueError, match="unknown BM25 backend"):
        BM25Index(["a text"], backend="lucene")


def test_corpus_without_tokens() -> None:
    index = BM25Index(["...", "!!"], english_tokenizer())
    assert index.search("anything", 3) == []


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_cmrc2018_slice_with_jieba(collections_dir: Path, backend: str) -> None:
    folder = collections_dir / "cmrc2018"
    docs = []
    with (folder / "corpus.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            docs.append(json.loads(line))
            if len(docs) == 200:
                break
    pos = {d["doc_id"]: i for i, d in enumerate(docs)}
    gold = {}
    for line in (folder / "qrels.tsv").read_text(encoding="utf-8").splitlines()[1:]:
        qid, doc_id, rel = line.split("\t")
        if doc_id in pos and int(rel) > 0:
            gold[qid] = pos[doc_id]
    queries = {}
    for line in (folder / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        if rec["qid"] in gold:
            queries[rec["qid"]] = rec["query"]
    assert len(queries) > 500
    texts = [f"{d['title']}\n{d['text']}" for d in docs]
    tok = make_tokenizer("auto", texts)
    assert tok.language == "zh"  # type: ignore[attr-defined]
    index = BM25Index(texts, tok, backend=backend)
    qids = sorted(queries)
    results = index.search_batch([queries[q] for q in qids], 5)
    hit_rate = sum(gold[q] in {i for i, _ in r} for q, r in zip(qids, results)) / len(qids)
    top1 = sum(bool(r) and r[0][0] == gold[q] for q, r in zip(qids, results)) / len(qids)
    assert hit_rate >= 0.95, hit_rate
    assert top1 >= 0.85, top1


# -- the stored bm25s index ------------------------------------------------------------


QUERIES = ["brake pads squeal", "battery dead in the cold", "change the oil filter", "tyre pressure"]


def _calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count BM25Index builds (loading a stored index does not build)."""
    built: list[int] = []
    real = BM25Index.__init__

    def counting(self: BM25Index, *args: object, **kwargs: object) -> None:
        built.append(1)
        real(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(BM25Index, "__init__", counting)
    return built


def test_stored_index_is_mapped_and_ranks_alike(
    texts: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_ragmetrics.stack.bm25 import stored_bm25

    built = _calls(monkeypatch)
    tok = english_tokenizer()
    first = stored_bm25(tmp_path, "a" * 64, texts, tok)
    assert len(built) == 1
    (folder,) = [p for p in tmp_path.iterdir()]
    assert folder.name.startswith("bm25s-v1-" + "a" * 32 + "-en-stopwords-") and (folder / "meta.json").is_file()
    again = stored_bm25(tmp_path, "a" * 64, texts, tok)
    assert len(built) == 1  # loaded, not built
    assert type(again._impl.scores["data"]).__name__ == "memmap"
    memory = BM25Index(texts, tok)
    for q in QUERIES:
        assert again.search(q, 10) == first.search(q, 10) == memory.search(q, 10)
        assert again.scores(q).tolist() == memory.scores(q).tolist()
    # other texts, tokenizer or parameters are other indexes
    stored_bm25(tmp_path, "b" * 64, texts[:-1], tok)
    stored_bm25(tmp_path, "a" * 64, texts, english_tokenizer(stopwords=False))
    stored_bm25(tmp_path, "a" * 64, texts, tok, k1=1.2)
    assert len(built) == 5 and len(list(tmp_path.iterdir())) == 4  # 5: the in-memory reference too
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary folder left


def test_unnamed_tokenizer_and_damaged_store(
    texts: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_ragmetrics.stack.bm25 import stored_bm25

    def custom(text: str) -> list[str]:
        return text.lower().split()

    stored_bm25(tmp_path / "custom", "a" * 64, texts, custom)
    assert not (tmp_path / "custom").exists()  # what a custom callable does cannot be named
    tok = english_tokenizer()
    stored_bm25(tmp_path, "a" * 64, texts, tok)
    (folder,) = list(tmp_path.iterdir())
    (folder / "meta.json").write_text('{"size": 3}')  # says it holds other texts
    built = _calls(monkeypatch)
    index = stored_bm25(tmp_path, "a" * 64, texts, tok)
    assert len(built) == 1 and len(index) == len(texts)
    assert json.loads((folder / "meta.json").read_text()) == {"size": len(texts)}  # stored anew


def test_retriever_stores_bm25_once_per_chunking(
    car_docs: list[Document], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_ragmetrics.stack import Retriever

    monkeypatch.setenv("RAGMETRICS_HOME", str(tmp_path / "home"))
    first = Retriever(car_docs, mode="bm25", chunk_size=120, overlap=20)
    expected = [[h.id for h in hits] for hits in first.search_batch(QUERIES)]
    built = _calls(monkeypatch)
    second = Retriever(car_docs, mode="bm25", chunk_size=120, overlap=20)
    assert [[h.id for h in hits] for hits in second.search_batch(QUERIES)] == expected
    assert built == []
    Retriever(car_docs, mode="bm25", chunk_size=200, overlap=20).search("brake", 3)
    Retriever(car_docs, mode="bm25", chunk_size=120, overlap=20, bm25_backend="rank_bm25").search("brake", 3)
    assert len(built) == 2
    assert len(list((tmp_path / "home" / "bm25").iterdir())) == 2  # rank_bm25 is not stored
