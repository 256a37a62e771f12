"""BM25: tokenisers, both backends behind one interface, Chinese via jieba, mixed corpora."""

from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path

import pytest

from pytest_ragmetrics.errors import RagMetricsWarning
from pytest_ragmetrics.stack import (
    BACKENDS,
    LANGUAGES,
    BM25Index,
    Document,
    chinese_tokenizer,
    chunk_documents,
    detect_language,
    english_tokenizer,
    load_corpus,
    make_tokenizer,
    mixed_tokenizer,
)

DEMO_CORPUS = Path(__file__).resolve().parents[2] / "eval" / "corpus"


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
    assert detect_language(["战国无双是光荣开发的游戏", "本作以三大故事为主轴"]) == "mixed"
    # one Han character anywhere is enough: every text is looked at, not a sample
    assert detect_language([*(["brake pads wear thin"] * 1000), "the 刹车 pads"]) == "mixed"
    assert detect_language([]) == "en"
    assert make_tokenizer("auto", ["北京是中国的首都"]).language == "mixed"  # type: ignore[attr-defined]
    assert make_tokenizer("auto", ["brake pads"]).signature == "en-stopwords"  # type: ignore[attr-defined]
    # explicit choices are kept, whatever the texts
    assert make_tokenizer("zh", ["brake pads"]).signature == "zh-jieba"  # type: ignore[attr-defined]
    assert make_tokenizer("en", ["北京是中国的首都"]).signature == "en-stopwords"  # type: ignore[attr-defined]
    assert make_tokenizer("mixed").signature == "mixed-zh-jieba+en-stopwords"  # type: ignore[attr-defined]
    assert LANGUAGES == ("auto", "en", "zh", "mixed")
    with pytest.raises(ValueError, match=r"unknown language 'fr': expected 'auto', 'en', 'zh' or 'mixed'"):
        make_tokenizer("fr")  # type: ignore[arg-type]


def test_mixed_tokenizer() -> None:
    tok = mixed_tokenizer()
    assert (tok.language, tok.signature) == ("mixed", "mixed-zh-jieba+en-stopwords")  # type: ignore[attr-defined]
    # jieba segments the Han runs (我用 / 手冲 咖啡); the rest is the English analyser's:
    # lowercased, split on \w+, "the" dropped; the comma is no token
    assert tok("我用V60手冲咖啡, the grind size matters") == [
        "我用", "v60", "手冲", "咖啡", "grind", "size", "matters",
    ]
    # NFKC first: full-width letters and punctuation fold; English stopwords between Han runs go too
    assert tok("ＡＰＩ文档。The docs of 北京地铁") == ["api", "文档", "docs", "北京地铁"]
    assert tok("") == [] and tok("，。！") == []
    # jieba over the whole text keeps English stopwords; the mixed tokenizer does not
    assert "the" in chinese_tokenizer()("我用V60手冲咖啡, the grind size matters")


def _english_analyser_as_before(text: str) -> list[str]:
    """The English analyser spelled out (NFKC, lowercase, \\w+, stopwords): the tokens English corpora have always had."""
    from pytest_ragmetrics.stack.bm25 import ENGLISH_STOPWORDS

    return [t for t in re.findall(r"\w+", unicodedata.normalize("NFKC", text).lower()) if t not in ENGLISH_STOPWORDS]


@pytest.mark.parametrize("chunk_size", [300, None])
def test_a_pure_english_corpus_tokenises_as_before(chunk_size: int | None) -> None:
    """The demo corpus keeps the English analyser, its signature (so its stored index) and every token."""
    chunks = chunk_documents(load_corpus(DEMO_CORPUS), chunk_size, 60 if chunk_size else 0, with_title=True)
    texts = [c.text for c in chunks]
    tok = make_tokenizer("auto", texts)
    assert (tok.language, tok.signature) == ("en", "en-stopwords")  # type: ignore[attr-defined]
    expected = [_english_analyser_as_before(t) for t in texts]
    assert [tok(t) for t in texts] == expected
    # a text without Han characters gets the same tokens from the mixed tokenizer as well
    assert [mixed_tokenizer()(t) for t in texts] == expected
    assert sum(map(len, expected)) > 1000


# -- a corpus holding Chinese and English documents -------------------------------------

#: Three Chinese and three English documents on unrelated subjects; the bread one
#: quotes two Chinese words and the tea one an English word. English has more
#: letters, so Han characters are under a fifth of them.
MIXED_DOCS = {
    "zh-tea": "乌龙茶属于半发酵茶，冲泡时水温要在九十五度左右。很多茶友喜欢用 gaiwan 盖碗冲泡，第一泡快速倒掉，用来温杯醒茶。",
    "zh-subway": "北京地铁的早高峰从七点开始，换乘站的人流最大。建议错峰出行，并提前给交通卡充值，节省排队的时间。",
    "zh-panda": "大熊猫主要以竹子为食，每天要花十几个小时进食。野生大熊猫生活在四川和陕西的山区，数量正在慢慢回升。",
    "en-bike": "Bicycle chain care: clean the chain with a degreaser and let it dry. Then put a drop of lubricant "
    "on each roller, turn the pedals backwards for a minute, and wipe off the excess so that it does not "
    "collect grit and sand on the road.",
    "en-bread": "Sourdough bread needs an active starter. Feed it flour and water the day before baking, and let "
    "the dough proof slowly in a cool kitchen; a warm room makes it sour and slack. The 老面 method of "
    "northern China, 发面 with an old piece of dough, works the same way.",
    "en-solar": "Solar panels make less power when they are dirty or shaded by a tree. Rinse them with plain "
    "water in the early morning, before the glass heats up, and check the inverter display in the evening "
    "for the daily yield of the whole system.",
}
MIXED_QUERIES = {
    "why is my solar panel producing less power": "en-solar",
    "how often should I lubricate the bicycle chain": "en-bike",
    "is it fine to do it in the evening": "en-solar",  # mostly function words
    "大熊猫每天吃多少竹子": "zh-panda",
    "乌龙茶冲泡水温": "zh-tea",
    "北京地铁早高峰几点开始": "zh-subway",
}


def _first(index: BM25Index, query: str) -> str | None:
    hits = index.search(query, len(MIXED_DOCS))
    return list(MIXED_DOCS)[hits[0][0]] if hits else None


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_mixed_corpus_ranks_both_languages(backend: str) -> None:
    texts = list(MIXED_DOCS.values())
    index = BM25Index(texts, backend=backend)  # the tokenizer "auto" picks
    assert index.language == "mixed"
    assert {q: _first(index, q) for q in MIXED_QUERIES} == MIXED_QUERIES


def test_one_tokenizer_for_a_mixed_corpus_fails_one_language() -> None:
    """Why mixed exists: the English analyser finds no Chinese document (a Chinese
    question is one long token), and jieba keeps English function words, which
    outweigh the one content word of a chatty English question."""
    texts = list(MIXED_DOCS.values())
    english = BM25Index(texts, english_tokenizer())
    assert [_first(english, q) for q, doc in MIXED_QUERIES.items() if doc.startswith("zh-")] == [None] * 3
    jieba = BM25Index(texts, chinese_tokenizer())
    assert _first(jieba, "is it fine to do it in the evening") != "en-solar"


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
    assert tok.language == "mixed"  # type: ignore[attr-defined]
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


def _stored(folder: Path) -> list[Path]:
    """The stored indexes in a BM25 store (its lock file aside)."""
    return sorted(p for p in folder.iterdir() if not p.name.startswith("."))


def test_stored_index_is_mapped_and_ranks_alike(
    texts: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_ragmetrics.stack.bm25 import stored_bm25

    built = _calls(monkeypatch)
    tok = english_tokenizer()
    first = stored_bm25(tmp_path, "a" * 64, texts, tok)
    assert len(built) == 1
    (folder,) = _stored(tmp_path)
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
    assert len(built) == 5 and len(_stored(tmp_path)) == 4  # 5: the in-memory reference too
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == [".lock"]  # no temporary folder left


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
    (folder,) = _stored(tmp_path)
    (folder / "meta.json").write_text('{"size": 3}')  # what an older version wrote, and other texts at that
    built = _calls(monkeypatch)
    with pytest.warns(RagMetricsWarning, match="had no manifest"):
        index = stored_bm25(tmp_path, "a" * 64, texts, tok)
    assert index.repaired and str(folder) in index.repaired[0]
    assert len(built) == 1 and len(index) == len(texts)
    assert json.loads((folder / "meta.json").read_text())["size"] == len(texts)  # stored anew


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
    assert len(_stored(tmp_path / "home" / "bm25")) == 2  # rank_bm25 is not stored


def test_stored_index_under_the_mixed_signature(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_ragmetrics.stack.bm25 import stored_bm25

    texts = list(MIXED_DOCS.values())
    built = _calls(monkeypatch)
    first = stored_bm25(tmp_path, "m" * 64, texts, make_tokenizer("auto", texts))
    (folder,) = _stored(tmp_path)
    assert folder.name == "bm25s-v1-" + "m" * 32 + "-mixed-zh-jieba+en-stopwords-k1=1.5-b=0.75"
    again = stored_bm25(tmp_path, "m" * 64, texts, mixed_tokenizer())  # another process's tokenizer
    assert len(built) == 1  # loaded, not built
    assert type(again._impl.scores["data"]).__name__ == "memmap"
    assert again.language == "mixed"
    memory = BM25Index(texts, mixed_tokenizer())
    for q in MIXED_QUERIES:
        assert again.search(q, 6) == first.search(q, 6) == memory.search(q, 6)
        assert again.scores(q).tolist() == memory.scores(q).tolist()
    assert {q: _first(again, q) for q in MIXED_QUERIES} == MIXED_QUERIES
    stored_bm25(tmp_path, "m" * 64, texts, chinese_tokenizer())  # jieba alone is another index
    assert len(built) == 3 and len(_stored(tmp_path)) == 2


def test_retriever_on_a_mixed_corpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_ragmetrics.stack import Retriever

    monkeypatch.setenv("RAGMETRICS_HOME", str(tmp_path / "home"))
    docs = [Document(doc_id, "", text) for doc_id, text in MIXED_DOCS.items()]
    r = Retriever(docs, mode="bm25", chunk_size=None)
    assert r.language == "mixed" and r.describe()["bm25"]["language"] == "mixed"
    assert {q: r.search(q, 1)[0].doc_id for q in MIXED_QUERIES} == MIXED_QUERIES
    (stored,) = _stored(tmp_path / "home" / "bm25")
    assert "-mixed-zh-jieba+en-stopwords-" in stored.name
    assert Retriever(docs, mode="bm25", chunk_size=None, language="zh").describe()["bm25"]["language"] == "zh"
    assert Retriever(docs, mode="bm25", chunk_size=None, language="en").describe()["bm25"]["language"] == "en"
