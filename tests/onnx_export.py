"""all-MiniLM-L6-v2 exported to ONNX (float32, then int8) once per test run, shared by the xdist workers.

The export loads torch and transformers, traces the model and quantises the graph: about 7 s of
CPU that every xdist worker, and every test module with a ``RAGMETRICS_HOME`` of its own, paid
again for the same two files. The files depend only on the model and the recipe, so one export
serves every test that encodes with them; each gets the folder as ``onnx_dir`` or, through
:func:`seed_home`, hard links to the files in its own home.

The export runs as a user's first int8 build does, in a fresh interpreter that then builds a
BM25 index, and its record (exit code, output) is kept:
``test_int8_quantisation_leaves_the_root_logger_alone`` asserts on that process, which proves
it exported and quantised itself (``export_count == 2``, so never from a folder already filled).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from once import once_per_run  # tests/once.py

#: Export and quantise into the folder ``argv[1]``, then print the root logger's handlers and build
#: a BM25 index (bm25s logs at DEBUG: a handler left on the root logger would print its lines).
EXPORT_SCRIPT = (
    "import logging, sys\n"
    "from pathlib import Path\n"
    "from pytest_ragmetrics.stack import _onnx\n"
    "from pytest_ragmetrics.stack.bm25 import BM25Index\n"
    "from pytest_ragmetrics.stack.embed import Embedder\n"
    "e = Embedder(cache_path=None, backend='onnx-int8')\n"
    "_onnx.exported_model(e.model_path, e.fingerprint, 'onnx-int8', Path(sys.argv[1]))\n"
    "assert _onnx.export_count == 2, _onnx.export_count\n"  # export, then quantise
    "print('handlers', logging.getLogger().handlers)\n"
    "BM25Index(['a first text', 'a second text'], backend='bm25s')\n"
)


@dataclass(frozen=True)
class OnnxExport:
    """The shared export: ``onnx_dir`` (``<fingerprint[:16]>/model-*.onnx`` under it; never change
    it) and what the exporting process returned and printed."""

    onnx_dir: Path
    returncode: int
    stdout: str
    stderr: str


def minilm_onnx(tmp_path_factory: pytest.TempPathFactory) -> OnnxExport:
    """Export MiniLM once per test run (the first worker to ask exports, the other waits and reads)."""

    def export(folder: Path) -> dict[str, Any]:
        onnx_dir = folder / "onnx"
        assert not onnx_dir.exists(), f"{onnx_dir} is left from an interrupted run: not a fresh export"
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAGMETRICS_")}
        env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", RAGMETRICS_HOME=str(folder / "home"))
        proc = subprocess.run([sys.executable, "-c", EXPORT_SCRIPT, str(onnx_dir)], capture_output=True,
                              text=True, timeout=600, env=env)
        return {"returncode": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr}

    folder, record = once_per_run(tmp_path_factory, "minilm-onnx", export)
    return OnnxExport(folder / "onnx", record["returncode"], record["stdout"], record["stderr"])


def seed_home(export: OnnxExport, home: Path) -> None:
    """Give ``home`` the exported files where the stack looks for them (``<home>/onnx``), as hard
    links (copies across file systems). The stack replaces a file by renaming, never writes into
    one, so the shared files cannot change through a link."""
    assert export.returncode == 0, export.stderr[-3000:]
    for src in export.onnx_dir.rglob("*.onnx"):
        dest = home / "onnx" / src.relative_to(export.onnx_dir)
        if dest.exists():
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(src, dest)
        except OSError:
            shutil.copyfile(src, dest)
