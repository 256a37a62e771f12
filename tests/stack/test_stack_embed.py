"""The embedding cache: content-addressed, per model, never re-encoding what it has."""

from __future__ import annotations

import shutil
import sqlite3
import warnings
from pathlib import Path

import numpy as np
import pytest

from pytest_ragmetrics.errors import RagMetricsWarning
from pytest_ragmetrics.stack import DEFAULT_MODEL_NAME, Embedder, model_fingerprint


@pytest.mark.slow  # loads torch (a model)
def test_fingerprint_follows_content_not_location(tiny_cross_encoder: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(tiny_cross_encoder, copy)
    assert model_fingerprint(copy) == model_fingerprint(tiny_cross_encoder)
    cfg = copy / "config.json"
    cfg.write_text(cfg.read_text().replace("32", "33", 1))
    assert model_fingerprint(copy) != model_fingerprint(tiny_cross_encoder)
    assert model_fingerprint("org/some-model") != model_fingerprint("org/other-model")


@pytest.mark.slow
def test_embeddings_are_unit_vectors_and_cached(embedder: Embedder, tmp_path: Path) -> None:
    # separate Embedder objects over one cache file, as separate processes would be
    emb = Embedder(cache_path=tmp_path / "c.sqlite3")
    assert emb.name == DEFAULT_MODEL_NAME and emb.identity == embedder.identity
    texts = ["brake pads squeal", "change the oil", "brake pads squeal", "tyre pressure"]
    first = emb.embed(texts)
    assert first.shape == (4, 384) and first.dtype == np.float32
    assert np.allclose(np.linalg.norm(first, axis=1), 1.0, atol=1e-5)
    assert np.array_equal(first[0], first[2])
    assert emb.encoded == 3  # the repeated text is encoded once

    again = emb.embed(texts[::-1])
    assert emb.encoded == 3
    assert np.array_equal(again, first[::-1])

    emb.embed(["change the oil", "a new text"])
    assert emb.encoded == 4  # only the new text

    # a second object over the same file (a new process, say) finds everything
    fresh = Embedder(cache_path=tmp_path / "c.sqlite3")
    assert np.array_equal(fresh.embed(texts), first)
    assert fresh.encoded == 0

    # same weights under another model name: a different identity, so everything re-encodes
    renamed = Embedder(
        model=embedder.model_path, model_name="minilm-finetuned", cache_path=tmp_path / "c.sqlite3"
    )
    renamed.embed(texts)
    assert renamed.encoded == 3
    assert fresh.embed(texts).shape == (4, 384) and fresh.encoded == 0  # old entries intact

    with sqlite3.connect(tmp_path / "c.sqlite3") as db:
        rows, size = db.execute("SELECT count(*), min(length(vec)) FROM embeddings").fetchone()
    assert rows == 7 and size == 384 * 4  # raw float32, no pickle


@pytest.mark.slow
def test_matches_sentence_transformers_directly(embedder: Embedder) -> None:
    texts = ["the engine overheats in traffic", "wash the car after winter"]
    direct = embedder.model.encode(texts, normalize_embeddings=True)
    assert np.allclose(embedder.embed(texts), direct, atol=1e-6)


@pytest.mark.slow
def test_without_cache_nothing_is_stored() -> None:
    emb = Embedder(cache_path=None)
    emb.embed(["one text"])
    emb.embed(["one text"])
    assert emb.encoded == 2
    assert emb.embed([]).shape[0] == 0


@pytest.mark.parametrize("damage, why", [("header", "file is not a database"),
                                         ("truncate", "database disk image is malformed")])
@pytest.mark.slow  # loads torch (a model)
def test_a_damaged_cache_names_the_file_and_the_fix(tmp_path: Path, damage: str, why: str) -> None:
    path = tmp_path / "cache.sqlite3"
    emb = Embedder(cache_path=path)
    keys = [emb.key(f"text {i}") for i in range(2000)]
    emb._store([(k, np.full(384, i, dtype=np.float32)) for i, k in enumerate(keys)])
    emb.close()
    with sqlite3.connect(path) as db:  # fold the write-ahead log into the file, as a finished run leaves it
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    with open(path, "r+b") as fh:
        if damage == "header":
            fh.write(b"\xff" * 100)
        else:
            fh.truncate(path.stat().st_size // 2)
    damaged = path.read_bytes()
    fresh = Embedder(cache_path=path)
    with pytest.warns(RagMetricsWarning) as caught:
        vectors = fresh.embed(["text 1", "text 1999"])
    assert [str(w.message) for w in caught] == [
        f"ragmetrics: the embedding cache {path} is damaged ({why}). It is only a cache: delete it, with its -wal "
        "and -shm files if present, and the next run encodes again what it needs; until then this process "
        "encodes without it"]
    assert fresh.cache_set_aside is not None
    assert vectors.shape == (2, 384) and fresh.encoded == 2  # encoded, not read from the damaged file
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once: later calls go on without the cache, quietly
        fresh.embed_queries(["a question"])
    assert path.read_bytes() == damaged  # nothing written into it, nothing deleted


def test_a_cache_that_cannot_be_written_is_still_an_error(tmp_path: Path) -> None:
    """Only damage sets the cache aside: a lock or a read-only folder is a problem to fix, named as such."""
    from pytest_ragmetrics.stack.index import IndexStoreError

    path = tmp_path / "cache.sqlite3"
    emb = Embedder(cache_path=path)
    emb._store([(emb.key("text"), np.zeros(384, dtype=np.float32))])
    locker = sqlite3.connect(path, timeout=0)
    locker.execute("BEGIN EXCLUSIVE")
    try:
        other = Embedder(cache_path=path)
        other._conn().execute("PRAGMA busy_timeout = 0")
        with pytest.raises(IndexStoreError, match=f"cannot use the embedding cache {path}: database is locked"):
            other._store([(other.key("other"), np.zeros(384, dtype=np.float32))])
        assert other.cache_set_aside is None
    finally:
        locker.rollback()
        locker.close()


@pytest.mark.slow  # loads torch (a model)
def test_a_damaged_vector_is_encoded_again_and_replaced(tmp_path: Path) -> None:
    """sqlite checks its pages, not the bytes of a value: bytes overwritten inside a stored
    vector leave a readable file, and before the checksum the wrong vector was scored."""
    path = tmp_path / "cache.sqlite3"
    texts = ["the engine overheats in traffic", "wash the car after winter", "rotate the tyres"]
    first = Embedder(cache_path=path)
    vectors = first.embed(texts)
    first.close()
    with sqlite3.connect(path) as db:  # fold the write-ahead log into the file, as a finished run leaves it
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(path.read_bytes())
    at = data.find(vectors[1].tobytes())
    assert at >= 0
    data[at + 400 : at + 424] = bytes(b ^ 0x5A for b in data[at + 400 : at + 424])  # 24 bytes mid-vector
    path.write_bytes(bytes(data))
    with sqlite3.connect(path) as db:  # the file itself is still sound: only the value changed
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)

    second = Embedder(cache_path=path)
    with pytest.warns(RagMetricsWarning) as caught:
        again = second.embed(texts)
    assert [str(w.message) for w in caught] == [
        f"ragmetrics: the embedding cache {path} held 1 damaged vector(s) (their bytes no longer matched the "
        "checksum stored with them); they were encoded again and replaced"]
    assert second.encoded == 1 and second.cache_set_aside is None
    assert np.allclose(again, vectors, atol=1e-5)
    second.close()
    third = Embedder(cache_path=path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # replaced: nothing to say any more
        assert np.array_equal(third.embed(texts), again)
    assert third.encoded == 0


def test_an_older_cache_gets_a_checksum_column_and_its_rows_are_checked_for_unit_length(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite3"
    emb = Embedder(cache_path=None)
    unit = np.zeros(384, dtype=np.float32)
    unit[0] = 1.0
    damaged = unit.copy()
    damaged[5] = 3.0e9  # what an overwritten exponent byte looks like
    with sqlite3.connect(path) as db:  # the table as versions before the checksum wrote it
        db.execute("CREATE TABLE embeddings (key BLOB PRIMARY KEY, vec BLOB NOT NULL)")
        db.executemany("INSERT INTO embeddings VALUES (?, ?)",
                       [(emb.key("sound"), unit.tobytes()), (emb.key("damaged"), damaged.tobytes())])
    older = Embedder(cache_path=path)
    found = older._lookup([older.key("sound"), older.key("damaged")])
    assert list(found) == [older.key("sound")] and np.array_equal(found[older.key("sound")], unit)
    assert older._damaged_rows == 1
    older.close()
    with sqlite3.connect(path) as db:
        assert "crc" in [row[1] for row in db.execute("PRAGMA table_info(embeddings)")]
