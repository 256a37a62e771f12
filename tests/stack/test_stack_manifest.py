"""Manifests of stored indexes: damage is found before chromadb or bm25s reads a byte, named, and repaired.

The damage tests run the real stack (the car corpus, MiniLM through the embedding
cache, chroma, bm25s) in a subprocess: a crash inside chromadb would show as a
signal exit (-11) there instead of killing the test run. Every file the stack
stores is damaged in turn, by 50 random 64-byte writes at random offsets (a fixed
seed) and by truncation to half its size; the run must succeed, name the file in
its one-line note, rank exactly as a fresh build does, and encode nothing.

Loading torch and MiniLM is most of such a run, so every case (the vector index, the
embedding cache, the BM25 store) shares one process: it builds and searches once per
request, each in its own ``RAGMETRICS_HOME``, with chromadb's in-process clients dropped
before each, and sends back what that request printed as a warning. A process that dies
is reported and replaced. The fresh build whose rankings every case must match is one
such request, too. The cases load a model, so they are all marked slow.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from once import once_per_run  # tests/once.py

from pytest_ragmetrics.errors import RagMetricsWarning
from pytest_ragmetrics.stack import bm25 as bm25_module
from pytest_ragmetrics.stack import index as index_module
from pytest_ragmetrics.stack.bm25 import english_tokenizer, stored_bm25
from pytest_ragmetrics.stack.index import MANIFEST, IndexStoreError, VectorIndex, chroma_files
from pytest_ragmetrics.stack.manifest import (
    ManifestError,
    describe_problems,
    file_sha256,
    mismatches,
    read_manifest,
    record,
    write_manifest,
)

#: The stack tests' car corpus and chunking (tests/stack/conftest.py).
CAR_CORPUS = Path(__file__).parent / "data" / "car_corpus.jsonl"
CAR_CHUNK_SIZE, CAR_OVERLAP = 120, 20

# -- the manifest itself -------------------------------------------------------------


def test_a_manifest_round_trips_and_names_what_differs(tmp_path: Path) -> None:
    (tmp_path / "a.bin").write_bytes(os.urandom(3000))
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.bin").write_bytes(b"x" * 10)
    assert file_sha256(tmp_path / "a.bin") == hashlib.sha256((tmp_path / "a.bin").read_bytes()).hexdigest()
    files = record(tmp_path, ["sub/b.bin", "a.bin"])
    write_manifest(tmp_path / "m.json", files, size=7)
    back = read_manifest(tmp_path / "m.json")
    assert back["files"] == files and back["size"] == 7 and back["hash"] == "sha256"
    assert mismatches(tmp_path, files) == []

    with open(tmp_path / "a.bin", "r+b") as fh:
        fh.seek(100)
        fh.write(b"\0" * 64)
    (tmp_path / "sub" / "b.bin").write_bytes(b"x" * 5)
    got = mismatches(tmp_path, {**files, "gone.bin": {"size": 4, "sha256": "0" * 64}})
    assert got[0].startswith("a.bin has sha256 ") and got[0].endswith(", expected "
                                                                     f"{files['a.bin']['sha256'][:12]} (same size, 3,000 bytes)")
    assert got[1] == "gone.bin is missing (4 bytes expected)"
    assert got[2] == "sub/b.bin is 5 bytes, expected 10"
    assert describe_problems(got, shown=2) == f"{got[0]}; {got[1]} … and 1 more"


@pytest.mark.parametrize("text, why", [
    ("", "is unreadable"),
    ("[]", "is not a manifest"),
    ('{"files": {}, "format": 1, "hash": "sha256", "checksum": "00"}', "does not match its own checksum"),
])
def test_a_manifest_that_cannot_be_trusted_says_why(tmp_path: Path, text: str, why: str) -> None:
    (tmp_path / "m.json").write_text(text)
    with pytest.raises(ManifestError, match=f"^m.json {why}"):
        read_manifest(tmp_path / "m.json")


@pytest.mark.parametrize("name", ["/etc/passwd", "../outside", "a/../../b", "a\\b"])
def test_a_manifest_never_names_a_file_outside_its_folder(tmp_path: Path, name: str) -> None:
    write_manifest(tmp_path / "m.json", {name: {"size": 1, "sha256": "0" * 64}})
    with pytest.raises(ManifestError, match="lists files it cannot describe"):
        read_manifest(tmp_path / "m.json")


# -- the vector index folder, in this process (random vectors, no model) ---------------------


def _table(n: int = 400, dim: int = 16) -> tuple[list[str], Any]:
    rows = np.random.default_rng(0).standard_normal((n, dim)).astype(np.float32)
    ids = [f"c{i}" for i in range(n)]
    return ids, lambda texts: rows[[int(t[1:]) for t in texts]]


def test_the_manifest_lists_chromas_files_and_follows_each_open(tmp_path: Path) -> None:
    ids, embed = _table()
    index = VectorIndex("manifest-test", {"model": "random"}, data_dir=tmp_path)
    assert index.sync(ids, ids, "corpus", embed) is True and index.repaired == []
    listed = read_manifest(tmp_path / MANIFEST)["files"]
    # what chromadb 1.x writes: its database and, per vector segment, the HNSW files
    assert sorted(name.rpartition("/")[2] for name in listed) == [
        "chroma.sqlite3", "data_level0.bin", "header.bin", "index_metadata.pickle", "length.bin", "link_lists.bin"]
    assert sorted(listed) == sorted(chroma_files(tmp_path)) and mismatches(tmp_path, listed) == []
    # a changed corpus rebuilds the collection: the dead segment folder chromadb leaves is removed
    assert VectorIndex("manifest-test", {"model": "random"}, data_dir=tmp_path).sync(ids, ids, "other", embed)
    segments = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert len(segments) == 1 and sorted(read_manifest(tmp_path / MANIFEST)["files"]) == sorted(chroma_files(tmp_path))
    assert mismatches(tmp_path, read_manifest(tmp_path / MANIFEST)["files"]) == []


def test_an_older_folder_without_a_manifest_is_rebuilt_once(tmp_path: Path) -> None:
    ids, embed = _table()
    VectorIndex("manifest-test", {"model": "random"}, data_dir=tmp_path).sync(ids, ids, "corpus", embed)
    (tmp_path / MANIFEST).unlink()  # what an earlier version left
    index = VectorIndex("manifest-test", {"model": "random"}, data_dir=tmp_path)
    with pytest.warns(RagMetricsWarning, match=re.escape(f"the vector index in {tmp_path} was rebuilt (from the "
                                                         "embedding cache where it held the vectors): it had no "
                                                         "manifest")):
        assert index.sync(ids, ids, "corpus", embed) is True
    again = VectorIndex("manifest-test", {"model": "random"}, data_dir=tmp_path)
    assert again.sync(ids, ids, "corpus", embed) is False and again.repaired == []


def test_a_damaged_folder_that_cannot_be_deleted_is_refused_with_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids, embed = _table()
    VectorIndex("manifest-test", {"model": "random"}, data_dir=tmp_path).sync(ids, ids, "corpus", embed)
    (data,) = tmp_path.glob("*/data_level0.bin")
    _damage(data, "writes")

    def read_only(folder: Path) -> None:
        raise PermissionError(13, "Permission denied", str(folder / "chroma.sqlite3"))

    monkeypatch.setattr(index_module, "clear_folder", read_only)
    with pytest.raises(IndexStoreError) as caught:
        VectorIndex("manifest-test", {"model": "random"}, data_dir=tmp_path)
    message = str(caught.value)
    assert f"the vector index in {tmp_path} cannot be used ({data.parent.name}/data_level0.bin has sha256" in message
    assert "Permission denied" in message and "delete that folder, or make it writable" in message


def test_a_bm25_store_that_cannot_be_replaced_serves_from_memory_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    texts = [json.loads(line)["text"] for line in CAR_CORPUS.read_text(encoding="utf-8").splitlines()]
    tok = english_tokenizer()
    first = stored_bm25(tmp_path, "k" * 64, texts, tok)
    (data,) = tmp_path.glob("bm25s-*/data.csc.index.npy")
    _damage(data, "truncate")
    real = shutil.rmtree

    def stuck(path: Any, *args: Any, **kwargs: Any) -> None:
        if Path(path) == data.parent:
            raise PermissionError(13, "Permission denied", str(path))
        real(path, *args, **kwargs)

    monkeypatch.setattr(bm25_module.shutil, "rmtree", stuck)
    with pytest.warns(RagMetricsWarning, match="cannot be deleted"):
        index = stored_bm25(tmp_path, "k" * 64, texts, tok)
    assert "data.csc.index.npy is" in index.repaired[0] and index.repaired[0].endswith("delete that folder")
    assert index.search("battery cold", 5) == first.search("battery cold", 5)


# -- the real stack in a subprocess ---------------------------------------------------------
QUERIES = ["my car battery dies on cold mornings", "squealing noise when braking",
           "how often to change the engine oil", "engine temperature gauge in the red"]

#: The stack's build and searches (hybrid, BM25, vector) on the car corpus, once per request line
#: (``{"home": ...}``) on stdin; one JSON line back per request with what it printed to stderr (its
#: warnings, shown as ``PYTHONWARNINGS=default`` shows them).
STACK_SERVER = r'''
import contextlib, io, json, os, sys, traceback, warnings
from pytest_ragmetrics.stack import Retriever

corpus, chunk_size, overlap, queries = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), json.loads(sys.argv[4])
reply = sys.stdout
sys.stdout = sys.stderr  # nothing but replies on the pipe
for line in sys.stdin:
    os.environ["RAGMETRICS_HOME"] = json.loads(line)["home"]
    from chromadb.api.shared_system_client import SharedSystemClient
    SharedSystemClient.clear_system_cache()  # each request opens its folders as a new process would
    err, r = io.StringIO(), None
    try:
        with contextlib.redirect_stderr(err), warnings.catch_warnings():
            warnings.simplefilter("default")
            r = Retriever(corpus, chunk_size=chunk_size, overlap=overlap, mode="hybrid", top_k=5, fetch_k=10)
            stats = r.build()
            ranked = {mode: [[(h.id, round(h.score, 6)) for h in hits] for hits in r.search_batch(queries, mode=mode)]
                      for mode in ("hybrid", "bm25", "vector")}
        out = {"code": 0, "out": {"stats": stats, "encoded": r.embedder.encoded, "ranked": ranked}}
    except BaseException:
        out = {"code": 1, "out": None}
        err.write(traceback.format_exc())
    if r is not None:  # ends as a process does: the embedding cache's WAL is folded into its file
        r.embedder.close()
    reply.write(json.dumps({**out, "stderr": err.getvalue()}) + "\n")
    reply.flush()
'''


def _stack_env(home: Path | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGMETRICS_")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONWARNINGS="default")
    if home is not None:
        env["RAGMETRICS_HOME"] = str(home)
    return env


class StackServer:
    """One process running :data:`STACK_SERVER`, started on the first request and again after it dies."""

    def __init__(self, script: Path) -> None:
        self.script = script
        self.proc: subprocess.Popen[str] | None = None
        self.log = script.with_suffix(".log")

    def run(self, home: Path) -> tuple[int, dict[str, Any] | None, str]:
        """Exit-code-like 0/1 (or the process' own code when it died), the output, and what it printed."""
        if self.proc is None or self.proc.poll() is not None:
            self.log.write_text("")
            self.proc = subprocess.Popen(
                [sys.executable, str(self.script), str(CAR_CORPUS), str(CAR_CHUNK_SIZE), str(CAR_OVERLAP),
                 json.dumps(QUERIES)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=self.log.open("w"), text=True, env=_stack_env())
        assert self.proc.stdin is not None and self.proc.stdout is not None
        seen = self.log.stat().st_size  # what earlier requests printed outside Python's stderr
        try:
            self.proc.stdin.write(json.dumps({"home": str(home)}) + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass
        line = self.proc.stdout.readline()
        if not line:  # it died (a crash in chromadb would be -11 here)
            code = self.proc.wait(timeout=60)
            return code or -1, None, self._printed(seen)
        reply = json.loads(line)
        return reply["code"], reply["out"], reply["stderr"] + self._printed(seen)

    def _printed(self, seen: int) -> str:
        with self.log.open("rb") as fh:
            fh.seek(seen)
            return fh.read().decode("utf-8", "replace")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory, server: StackServer) -> dict[str, Any]:
    """A fresh build in its own home, by the server every damaged run uses: the reference rankings. A request opens its folders as a new process would (chromadb's clients dropped, an empty home),
    so the build needs no process of its own: loading torch and MiniLM for it was most of its cost.

    Built once per run and shared by the xdist workers (the tests copy the home, never change it).
    """

    def build(folder: Path) -> dict[str, Any]:
        home = folder / "home"
        assert not home.exists(), f"{home} is left from an interrupted run: not a fresh build"
        code, out, err = server.run(home)
        assert code == 0 and out is not None, err[-3000:]
        return out

    folder, out = once_per_run(tmp_path_factory, "manifest-fresh", build)
    assert out["stats"]["vector_index_rebuilt"] and out["stats"]["repaired"] == []
    return {"home": folder / "home", "ranked": out["ranked"]}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StackServer]:
    """The stack process every damaged run of this worker shares (started at the first request)."""
    script = tmp_path_factory.mktemp("manifest-server") / "stack_server.py"
    script.write_text(STACK_SERVER, encoding="utf-8")
    shared = StackServer(script)
    yield shared
    shared.stop()


def _damage(path: Path, how: str, seed: int = 0) -> None:
    """50 random 64-byte writes at random offsets, or truncation to half the size."""
    size = path.stat().st_size
    with open(path, "r+b") as fh:
        if how == "truncate":
            fh.truncate(size // 2)
            return
        rng = random.Random(seed)
        for _ in range(50):
            fh.seek(rng.randrange(max(size - 64, 0) + 1))
            fh.write(rng.randbytes(64))


#: Every file the stack stores for the car corpus, by where it sits under RAGMETRICS_HOME.
VECTOR_FILES = ["chroma.sqlite3", "data_level0.bin", "header.bin", "length.bin", "link_lists.bin",
                "index_metadata.pickle", "manifest.json"]
BM25_FILES = ["data.csc.index.npy", "indices.csc.index.npy", "indptr.csc.index.npy", "params.index.json",
              "vocab.index.json", "meta.json"]


def _where(home: Path, name: str) -> Path:
    if name in BM25_FILES:
        (path,) = home.glob(f"bm25/bm25s-*/{name}")
    elif name in ("chroma.sqlite3", "manifest.json"):
        (path,) = home.glob(f"index/*/{name}")
    else:
        (path,) = home.glob(f"index/*/*/{name}")
    return path


@pytest.mark.slow  # the shared process loads torch and MiniLM
@pytest.mark.parametrize("name, how", [pytest.param(name, how, id=f"{name}-{how}")
                                       for name in [*VECTOR_FILES, *BM25_FILES] for how in ("writes", "truncate")])
def test_a_damaged_file_is_named_and_rebuilt_without_encoding(
    fresh: dict[str, Any], server: StackServer, tmp_path: Path, name: str, how: str
) -> None:
    home = tmp_path / "home"
    shutil.copytree(fresh["home"], home)  # as a CI cache restores it: new mtimes, same bytes
    target = _where(home, name)
    _damage(target, how)
    code, out, err = server.run(home)
    assert code == 0, f"exit {code}\n{err[-3000:]}"  # a crash in chromadb would be -11 here
    assert out is not None
    vector = name in VECTOR_FILES
    notes = [line for line in err.splitlines() if "RagMetricsWarning" in line]
    assert len(notes) == 1, err[-3000:]
    (repaired,) = out["stats"]["repaired"]
    assert repaired in notes[0]  # the same line, in build_stats and said once
    if vector:
        assert f"the vector index in {target.parent if name in ('chroma.sqlite3', MANIFEST) else target.parent.parent}" \
               " was damaged and was rebuilt (from the embedding cache where it held the vectors): " in repaired
        assert out["stats"]["vector_index_rebuilt"] is True
    else:
        assert f"the stored BM25 index {target.parent} was damaged and was rebuilt: " in repaired
        assert out["stats"]["vector_index_rebuilt"] is False
    shown = name if name in ("chroma.sqlite3", MANIFEST) or not vector else f"{target.parent.name}/{name}"
    assert f"{shown} " in repaired  # the file, then what differs
    assert out["ranked"] == fresh["ranked"]
    assert out["encoded"] == 0 and out["stats"]["encoded"] == 0  # rebuilt from the cache: nothing re-encoded

    code, again, err = server.run(home)  # repaired for good: the next run trusts it
    assert code == 0 and again is not None, err[-3000:]
    assert again["stats"]["repaired"] == [] and again["stats"]["vector_index_rebuilt"] is False
    assert again["ranked"] == fresh["ranked"]


CAR_GOLDEN = [
    ("q1", "my car battery dies on cold mornings", ["battery-cold"]),
    ("q2", "squealing noise when braking", ["brake-pads"]),
    ("q3", "how often to change the engine oil", ["oil-change", "oil-level"]),
    ("q4", "engine temperature gauge in the red", ["overheating", "coolant"]),
]


@pytest.mark.slow  # a process loading torch and MiniLM, beside the shared one
def test_ragmetrics_ablate_prints_the_repair_once(fresh: dict[str, Any], tmp_path: Path) -> None:
    """The CLI shows the note as one ``warning:`` line, runs on, and ranks as before."""
    home = tmp_path / "home"
    shutil.copytree(fresh["home"], home)
    _damage(_where(home, "data_level0.bin"), "writes", seed=1)
    golden = tmp_path / "golden.jsonl"
    golden.write_text("".join(json.dumps({"qid": q, "query": text, "candidates": [{"doc_id": d, "rel": 1}
                                                                                   for d in gold]}) + "\n"
                              for q, text, gold in CAR_GOLDEN), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGMETRICS_")}
    env.update(RAGMETRICS_HOME=str(home), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest_ragmetrics", "ablate", "--corpus", str(CAR_CORPUS), "--golden", str(golden),
         "--chunk-size", str(CAR_CHUNK_SIZE), "--overlap", str(CAR_OVERLAP), "--modes", "hybrid", "-m", "ndcg@5"],
        capture_output=True, text=True, timeout=600, env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    notes = [line for line in proc.stderr.splitlines() if "was damaged" in line]
    assert len(notes) == 1 and notes[0].startswith("warning: the vector index in "), proc.stderr
    assert "/data_level0.bin has sha256 " in notes[0] and "RagMetricsWarning" not in proc.stderr
    assert "0 embedded (rest from cache)" in proc.stderr


@pytest.mark.slow  # the shared process loads torch and MiniLM
@pytest.mark.parametrize("how, why", [("writes", "unsupported file format"),
                                      ("truncate", "database disk image is malformed")])
def test_a_damaged_embedding_cache_is_set_aside_with_one_warning(fresh: dict[str, Any],
                                                                 server: StackServer, tmp_path: Path,
                                                                 how: str, why: str) -> None:
    """The cache has no manifest (it is keyed by content): a damaged one is named once, with the fix, and the
    process encodes without it, so the rankings are a fresh build's and the file is left as it was."""
    home = tmp_path / "home"
    shutil.copytree(fresh["home"], home)
    cache = home / "cache" / "embeddings.sqlite3"
    _damage(cache, how)
    damaged = cache.read_bytes()
    code, out, err = server.run(home)
    assert code == 0 and out is not None, err[-3000:]
    assert out["ranked"] == fresh["ranked"]
    notes = [line for line in err.splitlines() if "is damaged" in line]
    assert len(notes) == 1, err[-3000:]
    assert (f"the embedding cache {cache} is damaged ({why}). It is only a cache: delete it, with its -wal and -shm "
            "files if present, and the next run encodes again what it needs; until then this process encodes "
            "without it") in notes[0]
    assert cache.read_bytes() == damaged  # reported, never repaired or deleted behind the user's back