"""The same build and search through a Chroma server (``chroma run``) instead of a local dir."""

from __future__ import annotations

import pytest

from pytest_ragmetrics.stack import Document, Embedder, Retriever, connect


@pytest.mark.slow
def test_build_and_search_through_a_chroma_server(
    chroma_server: str, car_docs: list[Document], embedder: Embedder, car_retriever: Retriever
) -> None:
    def remote_retriever() -> Retriever:
        return Retriever(
            car_docs,
            chroma_url=chroma_server,
            embedder=embedder,
            chunk_size=car_retriever.chunk_size,
            overlap=car_retriever.overlap,
        )

    remote = remote_retriever()
    client = connect(chroma_url=chroma_server)
    if remote.collection_name in [c.name for c in client.list_collections()]:
        client.delete_collection(remote.collection_name)  # left by an earlier run on a CI server
    stats = remote.build()
    assert stats["vector_index_rebuilt"] and remote.data_dir is None
    assert stats["encoded"] == 0  # the session's cache already holds these chunks
    assert client.get_collection(remote.collection_name).count() == len(car_retriever.chunks)

    queries = ["car pulls to the left", "grinding noise when I stop", "smell from the air vents"]
    for mode in ("vector", "hybrid"):
        here = car_retriever.search_batch(queries, 5, fetch_k=10, mode=mode)
        there = remote.search_batch(queries, 5, fetch_k=10, mode=mode)
        for a, b in zip(here, there):
            assert [h.id for h in a] == [h.id for h in b]
            assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-5)

    assert not remote_retriever().build()["vector_index_rebuilt"]
