"""The chroma collection: ids and vectors only, persisted whole, the same graph for every reader."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pytest_ragmetrics.stack.index import DEFAULT_HNSW, LAYOUT, HnswSettings, VectorIndex

# Real chromadb, random vectors (no model): 3,593 vectors leave a tail of 593 past
# chromadb's default sync_threshold of 1,000, the case that used to differ per process.
N_VECTORS, DIM, N_QUERIES = 3593, 64, 1000

QUERY_SCRIPT = r"""
import json, sys
import numpy as np
from pytest_ragmetrics.stack.index import VectorIndex
data_dir, name, settings = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
index = VectorIndex(name, settings, data_dir=data_dir)
ids = [f"c{i}" for i in range(int(sys.argv[4]))]
# sync reuses the collection: embed must not be called
index.sync(ids, ids, "corpus", lambda texts: (_ for _ in ()).throw(AssertionError("rebuilt")))
queries = np.random.default_rng(1).standard_normal((int(sys.argv[5]), int(sys.argv[6]))).astype(np.float32)
print(json.dumps([[cid for cid, _ in hits] for hits in index.query(queries, 50)]))
"""


def _vectors(n: int = N_VECTORS) -> dict[str, np.ndarray]:
    rows = np.random.default_rng(0).standard_normal((n, DIM)).astype(np.float32)
    return {f"c{i}": rows[i] for i in range(n)}


def _embed(table: dict[str, np.ndarray]):  # ids double as texts here
    return lambda texts: np.stack([table[t] for t in texts])


def test_collection_is_persisted_whole(tmp_path: Path) -> None:
    table = _vectors()
    ids = list(table)
    index = VectorIndex("ragmetrics-test", {"model": "random"}, data_dir=tmp_path)
    assert index.sync(ids, ids, "corpus", _embed(table)) is True
    collection = index._collection
    config = collection.configuration_json["hnsw"]
    assert config["sync_threshold"] == N_VECTORS and config["ef_construction"] == DEFAULT_HNSW.ef_construction
    assert collection.metadata["layout"] == LAYOUT and collection.metadata["chunks"] == N_VECTORS
    # ids and vectors only: no texts or metadata for chromadb to index
    got = collection.get(ids=["c7"], include=["documents", "metadatas", "embeddings"])
    assert got["documents"] == [None] and got["metadatas"] == [None]
    assert np.allclose(got["embeddings"][0], table["c7"])
    assert HnswSettings().configuration(5)["hnsw"]["batch_size"] == 5  # chroma wants batch <= sync
    assert "sync_threshold" not in HnswSettings().configuration()["hnsw"]


@pytest.mark.slow
def test_every_process_reads_the_same_rankings(tmp_path: Path) -> None:
    table = _vectors()
    ids = list(table)
    settings = {"model": "random"}
    VectorIndex("ragmetrics-test", settings, data_dir=tmp_path).sync(ids, ids, "corpus", _embed(table))
    script = tmp_path / "query.py"
    script.write_text(QUERY_SCRIPT, encoding="utf-8")
    args = [str(tmp_path), "ragmetrics-test", json.dumps(settings), str(N_VECTORS), str(N_QUERIES), str(DIM)]
    runs = []
    for _ in range(6):
        out = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr[-2000:]
        runs.append(json.loads(out.stdout))
    assert all(len(r) == N_QUERIES and all(len(hits) == 50 for hits in r) for r in runs)
    differing = [sum(a != b for a, b in zip(runs[0], r)) for r in runs[1:]]
    assert differing == [0] * 5


def test_a_collection_of_an_older_layout_is_rebuilt(tmp_path: Path) -> None:
    table = _vectors(300)
    ids = list(table)
    index = VectorIndex("ragmetrics-test", {"model": "random"}, data_dir=tmp_path)
    # what earlier versions wrote: the same settings, no layout mark, default sync_threshold
    old = index._client.create_collection(
        "ragmetrics-test",
        configuration=DEFAULT_HNSW.configuration(),
        metadata={**index.settings, "corpus_sha": "corpus", "chunks": len(ids)},
        embedding_function=None,
    )
    old.upsert(ids=ids, embeddings=_embed(table)(ids))
    assert index.sync(ids, ids, "corpus", _embed(table)) is True  # rebuilt, not trusted
    assert index._collection.metadata["layout"] == LAYOUT
    assert VectorIndex("ragmetrics-test", {"model": "random"}, data_dir=tmp_path).sync(
        ids, ids, "corpus", _embed(table)
    ) is False
