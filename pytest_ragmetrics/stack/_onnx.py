"""The sentence encoder on onnxruntime: float32, or with int8 weights (dynamic quantisation).

Encoding is the physical limit of a cold build (~75 texts/s with torch on two
cores). The same network run by onnxruntime gives the same vectors faster, and
with int8 weights faster still at a small, measured cost in fidelity. The model
is exported from the local sentence-transformers folder once (torch's exporter,
then ``onnxruntime.quantization.quantize_dynamic`` for int8) and kept under
``<RAGMETRICS_HOME>/onnx/<model fingerprint>/``; every file is written to a
temporary name and renamed, so a concurrent builder never reads half a file.

Pooling and normalisation follow the folder's ``modules.json`` and
``1_Pooling/config.json`` (mean or CLS pooling; L2 normalisation is always
applied, as the stack's torch path asks for it too), and inputs are cut at the
``max_seq_length`` of ``sentence_bert_config.json``, as sentence-transformers does.
Torch and transformers are imported only to export; encoding needs onnxruntime
and tokenizers alone.

Each run of the network is single-threaded, and as many runs go at once as the
process has cores (onnxruntime releases the GIL while it runs). On two cores,
one text per run this way encoded SciFact passages about 1.45x faster than
batches of 8 (int8) or 16 (float32) spread over two threads: nothing is padded,
and no run waits for its threads to meet. It also makes an int8 vector a
function of its text alone: activations are quantised with one scale per run,
so in a shared batch a text's vector moved with its companions (cosine 0.995
between the same passage alone and in a batch of 8).
"""

from __future__ import annotations

import contextlib
import errno
import importlib.util
import json
import logging
import os
import shlex
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

__all__ = [
    "ONNX_BACKENDS",
    "OnnxEncoder",
    "exported_model",
    "graph_folder",
    "new_session",
    "open_graph",
    "require_onnxruntime",
    "usable_cores",
]

T = TypeVar("T")
#: Encoder backends served by this module.
ONNX_BACKENDS = ("onnx", "onnx-int8")
#: Bumped whenever the graph files change (part of their names, so they are exported anew); bump RECIPE with it.
GRAPH = "v1"
#: Per backend, bumped whenever its vectors change: the export, the quantisation, or how a session runs
#: the graph (int8 "v2": :func:`new_session`). Part of the encoder identity (cache keys, collections) and
#: of ``describe()``, so vectors of another recipe are never reused and a baseline of them shows a settings change.
RECIPE = {"onnx": "v1", "onnx-int8": "v2"}
_INSTALL_HINT = "install it with: pip install onnxruntime onnx (or pip install 'pytest-ragmetrics[stack]')"
_FILES = {"onnx": f"model-fp32-{GRAPH}.onnx", "onnx-int8": f"model-int8-{GRAPH}.onnx"}
#: How many times this process exported or quantised a model (tests read it).
export_count = 0


def require_onnxruntime() -> None:
    """Fail early, naming the fix, when onnxruntime is not installed."""
    try:
        spec = importlib.util.find_spec("onnxruntime")
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        raise ImportError(f"the ONNX encoder backends need onnxruntime, which is not installed; {_INSTALL_HINT}")


def _import_onnxruntime() -> Any:
    require_onnxruntime()
    try:
        import onnxruntime
    except ImportError as exc:
        raise ImportError(f"onnxruntime failed to import ({exc}); {_INSTALL_HINT}") from None
    return onnxruntime


def new_session(onnx_file: Path) -> Any:
    """The session both ONNX encoders run: one thread (runs go in parallel instead, see the module's
    docstring) and every graph optimisation but ``SkipLayerNormFusion``.

    In the int8 graphs, the fused SkipLayerNormalization took 15% of e5's time (onnxruntime 1.32,
    AVX-512 VNNI, 100-token SciFact chunks); the residual Add and LayerNormalization it replaces
    cost less: e5's int8 graph ran 10.6 -> 9.2 ms per text single-threaded, and both int8 backends
    took 11-13% less CPU time per text on SciFact and CMRC2018 (1.13-1.15x). Fidelity to float32 is
    unchanged (cosine min/mean 0.9958/0.9974 on SciFact, 0.9959/0.9974 fused), but activations are
    quantised at other points, so int8 vectors move a little (cosine 0.998 to the fused session's):
    hence their RECIPE. The float32 graphs hold nothing this fusion matches: the same graph, vectors
    and speed either way.
    """
    ort = _import_onnxruntime()
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(str(onnx_file), options, providers=["CPUExecutionProvider"],
                                disabled_optimizers=["SkipLayerNormFusion"])


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS, Windows
        return max(1, os.cpu_count() or 1)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except ValueError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from None


def model_layout(model_path: str | Path) -> tuple[str, int | None, bool]:
    """(pooling, max_seq_length, do_lower_case) of a sentence-transformers folder: what encoding must copy.

    Only the plain Transformer -> Pooling [-> Normalize] pipeline is supported;
    anything else (a Dense layer, max pooling, ...) is refused by name, since an
    encoder that silently skipped it would produce different vectors.
    """
    folder = Path(model_path)
    if not (folder / "config.json").is_file():
        raise ValueError(f"{folder}: not a local model folder (no config.json); the ONNX backends export from one")
    modules = _read_json(folder / "modules.json") or []
    pooling_dir = "1_Pooling"
    for module in modules:
        kind = str(module.get("type", "")).rsplit(".", 1)[-1]
        if kind == "Pooling":
            pooling_dir = module.get("path") or pooling_dir
        elif kind not in ("Transformer", "Normalize"):
            raise ValueError(
                f"{folder / 'modules.json'}: module {module.get('name')!r} of type {module.get('type')!r} "
                "is not supported by the ONNX backends (Transformer, Pooling and Normalize are); use backend='torch'"
            )
    config = _read_json(folder / pooling_dir / "config.json") or {"pooling_mode_mean_tokens": True}
    modes = [k.removeprefix("pooling_mode_") for k, v in config.items() if k.startswith("pooling_mode_") and v]
    if modes == ["mean_tokens"]:
        pooling = "mean"
    elif modes == ["cls_token"]:
        pooling = "cls"
    else:
        raise ValueError(
            f"{folder / pooling_dir / 'config.json'}: pooling {modes or 'none'} is not supported by the "
            "ONNX backends (mean_tokens or cls_token alone are); use backend='torch'"
        )
    st_config = _read_json(folder / "sentence_bert_config.json") or {}
    max_len = st_config.get("max_seq_length")
    return pooling, int(max_len) if max_len else None, bool(st_config.get("do_lower_case", False))


def _atomic_target(dest: Path) -> Path:
    """A fresh temporary file beside ``dest`` (same filesystem, so the rename is atomic)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    os.close(fd)
    return Path(tmp)


def _export_fp32(model_path: str, dest: Path) -> None:
    """Export the transformer (token ids -> last hidden state) with torch's TorchScript exporter."""
    import torch
    from transformers import AutoModel

    # eager attention traces to plain ops; the wrapper gives the exporter positional inputs
    from ._quiet import quiet_model_load

    with quiet_model_load():
        model = AutoModel.from_pretrained(model_path, attn_implementation="eager")
    model.train(False)  # inference mode (dropout off)

    class _Hidden(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = model

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            out = self.inner(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            )
            return out.last_hidden_state

    names = ["input_ids", "attention_mask", "token_type_ids"]
    # a padded row in the sample, so tracing cannot specialise on an all-ones mask
    mask = torch.ones((2, 8), dtype=torch.long)
    mask[1, 5:] = 0
    sample = (torch.full((2, 8), 1000, dtype=torch.long), mask, torch.zeros((2, 8), dtype=torch.long))
    axes = {n: {0: "batch", 1: "sequence"} for n in [*names, "last_hidden_state"]}
    tmp = _atomic_target(dest)
    try:
        # the tracer warns about shape checks it freezes; the fp32 test compares outputs on
        # padded batches of mixed lengths, which is what those checks would get wrong
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                _Hidden(),
                sample,
                str(tmp),
                input_names=names,
                output_names=["last_hidden_state"],
                dynamic_axes=axes,
                opset_version=17,
                dynamo=False,
            )
        os.chmod(tmp, 0o644)  # mkstemp makes it private; the cache is shared like the embedding cache
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)


def _load_graph(source: Path) -> Any:
    """The float32 graph ``source`` as a ModelProto; a damaged file fails here, with onnx's or protobuf's error."""
    try:
        import onnx
    except ImportError as exc:
        raise ImportError(f"int8 quantisation needs onnxruntime and onnx ({exc}); {_INSTALL_HINT}") from None
    model = onnx.load(str(source))
    if not model.graph.node:  # an empty file parses as an empty model
        raise ValueError("no graph in the file")
    return model


def _quantize_int8(model: Any, dest: Path) -> None:
    """Dynamic int8 quantisation of the MatMul weights of the float32 graph ``model``, per output channel.

    Per-tensor scales (onnxruntime's default) cost too much here: cosine to the
    float32 vectors fell to 0.917 on SciFact passages; per channel it stays
    above 0.98. Activations are quantised per batch at run time.

    ``model`` is a ModelProto, not the graph's path: given a path, quantize_dynamic writes
    ``<graph>-inferred.onnx`` beside it and reads it back, a name every process quantising the
    same graph shares, which a killed run leaves behind; a ModelProto's goes to a folder of its own
    under the system's temporary folder. The int8 file is the same byte for byte.
    """
    try:
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError as exc:
        raise ImportError(f"int8 quantisation needs onnxruntime and onnx ({exc}); {_INSTALL_HINT}") from None
    tmp = _atomic_target(dest)
    # quantize_dynamic logs a "consider pre-processing" warning through logging.warning(), which
    # gives a root logger without handlers a stderr handler for good: every library's debug
    # lines (bm25s logs its own at DEBUG) would print from then on. A handler of ours for the
    # call keeps the root logger as the user left it.
    quant_log = logging.getLogger()
    level = quant_log.level
    placeholder = logging.NullHandler()
    quant_log.addHandler(placeholder)
    try:
        quant_log.setLevel(logging.ERROR)
        quantize_dynamic(
            model,
            str(tmp),
            weight_type=QuantType.QInt8,
            per_channel=True,
            op_types_to_quantize=["MatMul"],
        )
        os.chmod(tmp, 0o644)
        os.replace(tmp, dest)
    finally:
        quant_log.setLevel(level)
        quant_log.removeHandler(placeholder)
        tmp.unlink(missing_ok=True)


def graph_folder(onnx_dir: Path | None) -> Path:
    """``onnx_dir``, else ``<RAGMETRICS_HOME>/onnx``, the home made with its ``.gitignore`` (which keeps
    the 90 MB exports out of commits) where it can be. A home that cannot be (a read-only one holding
    graphs already exported, or a file) is left to :func:`cached_graph`: reading needs no writing,
    and an export names the path in the way."""
    from .paths import _ensure_home, ragmetrics_home

    if onnx_dir is not None:
        return onnx_dir
    home = ragmetrics_home()
    with contextlib.suppress(OSError):
        _ensure_home(home)
    return home / "onnx"


def exported_model(model_path: str | Path, fingerprint: str, backend: str, folder: Path) -> Path:
    """The ``.onnx`` file of ``backend`` for this model, exporting (and quantising) it if absent.

    ``folder`` is ``<home>/onnx``; files live in a subfolder named after the
    model's content fingerprint, so a changed model is exported anew.
    """
    global export_count
    if backend not in ONNX_BACKENDS:
        raise ValueError(f"unknown ONNX backend {backend!r}: expected one of {ONNX_BACKENDS}")
    dest, written = cached_graph(folder / fingerprint[:16], _FILES[backend], _FILES["onnx"],
                                 lambda fp32: _export_fp32(str(model_path), fp32))
    export_count += written
    return dest


def cached_graph(home: Path, name: str, fp32_name: str, export_fp32: Callable[[Path], None]) -> tuple[Path, int]:
    """The graph ``home/name``, made if absent: the float32 graph ``fp32_name`` exported by
    ``export_fp32``, then (when ``name`` is another file) quantised to int8 from it. Returns the
    path and how many files were written, so a test can tell an export from a cache hit."""
    require_onnxruntime()
    dest = home / name
    if dest.is_file():
        return dest, 0
    _check_writable(home)
    _remove_stale_temporaries(home)
    fp32, written = home / fp32_name, 0
    _check_not_taken(fp32, dest)
    with _room_for(home):
        if not fp32.is_file():
            export_fp32(fp32)
            written += 1
        if dest != fp32:
            try:
                model = _load_graph(fp32)
            except ImportError:
                raise
            except Exception as exc:  # a damaged float32 file: onnx's and protobuf's own error classes
                _set_aside(fp32, exc)
                export_fp32(fp32)
                written += 1
                model = _load_graph(fp32)
            _quantize_int8(model, dest)
            written += 1
    return dest, written


def _check_not_taken(*graphs: Path) -> None:
    """Raise :class:`IndexStoreError` when a graph's name is taken by something that is no file (a
    folder, a symbolic link leading nowhere): said before an export of minutes that could not be
    renamed into place."""
    from .index_folder import IndexStoreError

    for graph in graphs:
        if os.path.lexists(graph) and not graph.is_file():
            what = "a folder" if graph.is_dir() else "not a file"
            raise IndexStoreError(
                f"the exported graph's name {graph} is taken by {what}, so the graph cannot be exported there. "
                f"Remove it (rm -r {shlex.quote(str(graph))}) and the next run exports the graph, or point "
                "RAGMETRICS_HOME (or onnx_dir) at another folder"
            )


@contextlib.contextmanager
def _room_for(home: Path) -> Iterator[None]:
    """Say a full disk (or quota) during an export as such, naming the folder: the temporary file
    is already gone, and onnx's bare ``OSError: [Errno 28]`` names nothing."""
    from .index_folder import IndexStoreError

    try:
        yield
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        raise IndexStoreError(
            f"no room to export the ONNX graph into {home} ({exc.strerror}): a float32 graph takes about "
            "90 MB for MiniLM, and int8 quantisation also writes a copy under the system's temporary folder "
            f"({tempfile.gettempdir()}). Free space there, or point RAGMETRICS_HOME (or onnx_dir) at a disk "
            "with room"
        ) from None


#: A temporary graph untouched this long is left by an export that was killed (no export takes an hour).
STALE_TEMPORARY_SECONDS = 3600


def _check_writable(home: Path) -> None:
    """Raise :class:`IndexStoreError` when the graph folder ``home`` (made if missing) cannot take a new
    file: said before an export of minutes, naming the folder, instead of as a bare OSError after it.
    Probed by writing, as root ignores the mode bits but not an immutable flag or a read-only mount.
    A graph already there is read without writing, so only an export asks."""
    from .index_folder import IndexStoreError

    try:
        home.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=home):
            pass
    except OSError as exc:
        # where it stopped: the nearest path that is there, a file or a symbolic link that leads nowhere too
        blocked = next((folder for folder in (home, *home.parents) if os.path.lexists(folder)), home)
        if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise IndexStoreError(
                f"the ONNX graph folder {home} is not writable ({exc.strerror}: {blocked}), so the graph this "
                f"backend needs cannot be exported there. Make {blocked} writable by this user (chmod -R u+w "
                f"{shlex.quote(str(blocked))}), or point RAGMETRICS_HOME (or onnx_dir) at a writable folder "
                "(a folder made immutable needs chattr -R -i, a read-only mount a writable one); graphs "
                "already exported are read from a read-only folder as they are"
            ) from None
        if blocked.is_dir():  # a full disk, a name too long, ...
            raise IndexStoreError(
                f"the ONNX graph folder {home} cannot be made or written there ({exc.strerror}: {blocked}); "
                "fix that, or point RAGMETRICS_HOME (or onnx_dir) at another folder"
            ) from None
        what = "a file"
        if blocked.is_symlink():
            what = f"a symbolic link to {os.readlink(blocked)}, which leads to no folder"
        raise IndexStoreError(
            f"the ONNX graph folder {home} cannot be made: {blocked} is {what} ({exc.strerror}). Remove or "
            f"rename {shlex.quote(str(blocked))}, or point RAGMETRICS_HOME (or onnx_dir) at a folder"
        ) from None


def _remove_stale_temporaries(home: Path) -> None:
    """Delete the temporary graphs of exports killed mid-write (``kill -9`` runs no clean-up): each is
    as large as the graph (about 90 MB for MiniLM). One written to within the hour may be a running
    export's, and is left alone."""
    cutoff = time.time() - STALE_TEMPORARY_SECONDS
    for leftover in home.glob(".*.onnx.*.tmp"):
        with contextlib.suppress(OSError):  # another process may remove or rename it meanwhile
            if leftover.stat().st_mtime < cutoff:
                leftover.unlink()


def _set_aside(path: Path, exc: BaseException) -> None:
    """Remove an exported graph that cannot be read, saying so once: the caller exports it again."""
    from .index_folder import IndexStoreError
    from .manifest import report_repair

    try:
        path.unlink(missing_ok=True)
    except OSError as error:  # a read-only folder: the damaged graph stays, and every run would stop on it
        raise IndexStoreError(
            f"the exported graph {path} could not be read ({type(exc).__name__}: {str(exc).strip()[:200]}), "
            f"and it cannot be removed to export it again ({error.strerror}: {path.parent} is not writable "
            f"by this user). Delete it (rm {shlex.quote(str(path))}) once its folder is writable (chmod -R u+w, "
            "or chattr -R -i for an immutable one), and the next run exports it again; or point "
            "RAGMETRICS_HOME (or onnx_dir) at a writable folder"
        ) from None
    report_repair(f"the exported graph {path} could not be read ({type(exc).__name__}: "
                  f"{str(exc).strip()[:200]}); it was exported again", stacklevel=4)


def open_graph(make: Callable[[], Path], open_: Callable[[Path], T]) -> T:
    """``open_(make())``; a graph file onnxruntime cannot load (truncated, emptied, garbled by a
    half-restored cache) is removed and made again once, with one warning, instead of failing
    every run until someone finds and deletes it."""
    path = make()
    try:
        return open_(path)
    except Exception as exc:
        if type(exc).__module__.split(".")[0] != "onnxruntime":
            raise
        _set_aside(path, exc)
        return open_(make())


class OnnxEncoder:
    """Tokenise, run the exported transformer, pool and L2-normalise: sentence-transformers' encode.

    Texts are sorted by length before batching (as sentence-transformers does)
    so a batch pads to similar lengths; the output keeps the input order. Batches
    run ``workers`` at a time (default: one per usable core), each on one thread.
    """

    def __init__(self, model_path: str | Path, onnx_file: Path, workers: int | None = None) -> None:
        _import_onnxruntime()
        from tokenizers import Tokenizer

        self.pooling, max_len, self.lower = model_layout(model_path)
        tok_file = Path(model_path) / "tokenizer.json"
        if not tok_file.is_file():
            raise ValueError(f"{model_path}: no tokenizer.json (a fast tokenizer is needed for the ONNX backends)")
        self.tokenizer = Tokenizer.from_file(str(tok_file))
        self.max_length = max_len or 512
        self.tokenizer.enable_truncation(max_length=self.max_length)
        pad = self.tokenizer.padding or {}
        self.tokenizer.enable_padding(pad_id=pad.get("pad_id", 0), pad_token=pad.get("pad_token", "[PAD]"))
        self.workers = workers if workers is not None else usable_cores()
        if self.workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}")
        self.graph = Path(onnx_file)  # named when its vectors are not finite (see Embedder)
        self.session = new_session(onnx_file)
        self.input_names = {i.name for i in self.session.get_inputs()}

    def _batch(self, texts: list[str]) -> np.ndarray:
        texts = [t.strip() for t in texts]  # as sentence-transformers' Transformer module does
        if self.lower:
            texts = [t.lower() for t in texts]
        encodings = self.tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self.input_names:
            feed["token_type_ids"] = np.array([e.type_ids for e in encodings], dtype=np.int64)
        (hidden,) = self.session.run(["last_hidden_state"], feed)
        if self.pooling == "cls":
            pooled = hidden[:, 0, :]
        else:
            weights = mask[:, :, None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)

    def encode(self, texts: Sequence[str], batch_size: int = 1) -> np.ndarray:
        """Unit-length float32 vectors, one row per text, in input order."""
        texts = list(texts)
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        groups = [order[start : start + batch_size] for start in range(0, len(order), batch_size)]
        batches = [[texts[i] for i in group] for group in groups]
        if self.workers == 1 or len(batches) == 1:
            results = [self._batch(batch) for batch in batches]
        else:
            pool = ThreadPoolExecutor(min(self.workers, len(batches)), thread_name_prefix="ragmetrics-onnx")
            try:
                results = list(pool.map(self._batch, batches))
            finally:  # on Ctrl-C, runs not yet started are dropped rather than awaited
                pool.shutdown(wait=True, cancel_futures=True)
        out = np.empty((len(texts), results[0].shape[1]), dtype=np.float32)
        for group, vectors in zip(groups, results):
            out[group] = vectors
        return out
