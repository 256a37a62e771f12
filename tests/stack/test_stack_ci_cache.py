"""The CI recipe's embedding cache: restoring ``.ragmetrics/cache`` alone into a fresh checkout
gives a warm build (nothing encoded again) with the rankings of the run that saved it.

Each project is a folder of its own with the default home (``.ragmetrics/`` beside its
``pyproject.toml``), as a CI checkout is; only the folder docs/ci.md caches is copied across.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pytest_ragmetrics.stack import Retriever

#: What docs/ci.md's recipe caches, relative to the project root.
CACHED = Path(".ragmetrics") / "cache"
QUERIES = ["battery dies in the cold", "squealing brakes", "when to replace the battery", "brake fluid"]
DOCS_CI = Path(__file__).resolve().parents[2] / "docs" / "ci.md"
CAR_CORPUS = Path(__file__).parent / "data" / "car_corpus.jsonl"


def _project(root: Path, lines: list[str]) -> Path:
    """A checkout: a ``pyproject.toml`` (the project root) and a corpus folder."""
    (root / "corpus").mkdir(parents=True)
    (root / "pyproject.toml").write_text("[project]\nname = 'app'\n")
    (root / "corpus" / "corpus.jsonl").write_text("".join(line + "\n" for line in lines))
    return root


def _build(root: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Retriever, dict]:
    monkeypatch.chdir(root)
    retriever = Retriever(root / "corpus", mode="hybrid", chunk_size=120, overlap=20)
    stats = retriever.build()
    assert retriever.embedder.cache_path == root / CACHED / "embeddings.sqlite3"  # the default home
    return retriever, stats


def _rankings(retriever: Retriever) -> list[list[tuple[str, float]]]:
    return [[(h.id, h.score) for h in retriever.search(q, 5)] for q in QUERIES]


@pytest.mark.slow  # loads torch (a model)
def test_restored_cache_gives_a_warm_build_with_the_same_rankings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RAGMETRICS_HOME")
    lines = CAR_CORPUS.read_text().splitlines()
    a = _project(tmp_path / "run1" / "app", lines[:5])
    first, stats = _build(a, monkeypatch)
    assert stats["encoded"] == len(first.chunks) > 0
    expected = _rankings(first)
    # copied with run 1's connection open, as a killed run leaves it: the vectors are in the -wal file
    assert (a / CACHED / "embeddings.sqlite3-wal").stat().st_size > 0

    # a fresh checkout elsewhere, with only the cached folder restored
    b = _project(tmp_path / "run2" / "app", lines[:5])
    shutil.copytree(a / CACHED, b / CACHED)
    warm, stats = _build(b, monkeypatch)
    assert stats["encoded"] == 0 and stats["vector_index_rebuilt"]
    assert _rankings(warm) == expected
    assert warm.embedder.encoded == 0  # the queries too came from the cache

    # a partial hit: an older corpus's cache serves the unchanged chunks
    c = _project(tmp_path / "run3" / "app", lines[:6])
    shutil.copytree(a / CACHED, c / CACHED)
    grown, stats = _build(c, monkeypatch)
    new_doc = json.loads(lines[5])["doc_id"]
    new_chunks = [ch for ch in grown.chunks if ch.doc_id == new_doc]
    assert new_chunks and stats["encoded"] == len(new_chunks)
    for retriever in (first, warm, grown):
        retriever.embedder.close()


def test_the_recipe_caches_the_folder_tested_here() -> None:
    assert f"path: {CACHED.as_posix()}" in DOCS_CI.read_text()
