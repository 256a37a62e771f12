"""pytest_ragmetrics.adapters: LangChain and LlamaIndex retrievers behind ``search(query, k)``.

The adapters are duck-typed, so the first tests use plain stand-in classes; the rest run the
real ``langchain-core`` and ``llama-index-core`` (dev extra) in memory. Their embedding
models are stand-ins (LangChain's ``DeterministicFakeEmbedding``, a letter-count embedding for
LlamaIndex): what is under test is the libraries' own Document/Node/retriever objects and the
adapters' id, order, score and depth handling, not retrieval quality.
"""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from dataclasses import dataclass, field
from typing import Any

import pytest

from pytest_ragmetrics import RetrieverError
from pytest_ragmetrics.evaluation import score_query
from pytest_ragmetrics.measures import MeasurementConfig
from pytest_ragmetrics.results import normalize_results
from pytest_ragmetrics.adapters import AdapterWarning, Hit, from_langchain, from_llamaindex

# ------------------------------------------------------------------ duck-typed stand-ins


@dataclass
class FakeDoc:
    page_content: str
    metadata: dict[str, Any] = field(default_factory=dict)
    id: str | None = None


class FakeLC:
    def __init__(self, docs: list[FakeDoc]) -> None:
        self.docs = docs
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def invoke(self, query: str, **kwargs: Any) -> list[FakeDoc]:
        self.calls.append((query, kwargs))
        return list(self.docs)


def test_import_does_not_pull_in_either_library() -> None:
    code = ("import json, sys\nimport pytest_ragmetrics.adapters\n"
            "print(json.dumps([m for m in sys.modules if m.startswith(('langchain', 'llama_index'))]))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == []


def test_duck_typed_langchain_id_order_and_fallback_keys() -> None:
    docs = [
        FakeDoc("z", {"doc_id": "from-meta"}, id="own-id"),   # doc.id wins
        FakeDoc("y", {"doc_id": "d2", "source": "s2"}),        # then metadata doc_id
        FakeDoc("x", {"source": "docs/s3.md"}),                # then source
        FakeDoc("w", {"id": 7}),                                # metadata id, int -> "7"
    ]
    adapter = from_langchain(FakeLC(docs))
    assert [h.id for h in adapter.search("q", 10)] == ["own-id", "d2", "docs/s3.md", "7"]
    assert [h.id for h in adapter.search("q", 2)] == ["own-id", "d2"]  # cut at k, order kept


def test_duck_typed_langchain_explicit_key_and_callable() -> None:
    docs = [FakeDoc("a", {"key": "A", "source": "p/a.md"}, id="u1"), FakeDoc("b", {"source": "p/b.md"}, id="u2")]
    # a named key is read from metadata before doc.id is considered; the fallbacks still apply
    assert [h.id for h in from_langchain(FakeLC(docs), id_key="key").search("q", 5)] == ["A", "p/b.md"]
    stem = from_langchain(FakeLC(docs), id_key=lambda d: d.metadata["source"].split("/")[-1][:-3])
    assert [h.id for h in stem.search("q", 5)] == ["a", "b"]


def test_missing_langchain_id_names_query_position_and_keys() -> None:
    docs = [FakeDoc("a", {"doc_id": "ok"}), FakeDoc("b", {"page": 3, "author": "x"})]
    adapter = from_langchain(FakeLC(docs), id_key="chunk")
    with pytest.raises(RetrieverError) as info:
        adapter.search("how do I bleed brakes", 5)
    message = str(info.value)
    assert "'how do I bleed brakes'" in message and "result 2" in message
    assert "metadata['chunk'], metadata['doc_id'], metadata['source']" in message
    assert "'page', 'author'" in message and "id_key=" in message


def test_langchain_scores_from_metadata_and_k_validation() -> None:
    docs = [FakeDoc("a", {"relevance_score": 0.25}, id="a"), FakeDoc("b", {"score": 3}, id="b"), FakeDoc("c", id="c")]
    hits = from_langchain(FakeLC(docs)).search("q", 3)
    assert hits == [Hit("a", 0.25), Hit("b", 3.0), Hit("c", None)]  # never re-sorted by score
    with pytest.raises(ValueError, match="positive"):
        from_langchain(FakeLC(docs)).search("q", 0)
    with pytest.raises(TypeError, match="invoke"):
        from_langchain(object())
    with pytest.raises(TypeError, match="retrieve"):
        from_llamaindex(FakeLC(docs))


def test_bad_return_value_is_a_retriever_error() -> None:
    class Broken:
        def invoke(self, query: str) -> None:
            return None

    with pytest.raises(RetrieverError, match="invoke\\(\\) returned NoneType"):
        from_langchain(Broken()).search("q", 3)


def test_pass_k_forwards_k() -> None:
    fake = FakeLC([FakeDoc("a", id="a")])
    from_langchain(fake, pass_k=True).search("q", 7)
    from_langchain(fake).search("q", 7)
    assert fake.calls == [("q", {"k": 7}), ("q", {})]


# ---------------------------------------------------------------------------- LangChain


def lc_docs() -> list[Any]:
    from langchain_core.documents import Document

    texts = {
        "tire-pressure": "Start road tires at about 80 psi and adjust for rider weight.",
        "chain-wear": "Measure chain stretch with a checker tool every 1000 km.",
        "brake-bleed": "Bleed hydraulic brakes when the lever feels spongy.",
        "wheel-true": "True a wheel by adjusting spoke tension a quarter turn at a time.",
        "tubeless": "Tubeless sealant dries out and needs topping up every few months.",
    }
    return [Document(page_content=t, metadata={"doc_id": d, "source": f"corpus/{d}.md"}) for d, t in texts.items()]


def test_real_langchain_custom_base_retriever_keeps_order_and_cuts_at_k() -> None:
    import langchain_core  # noqa: F401  - dev extra
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever

    class FixedRetriever(BaseRetriever):
        """Returns its documents in a fixed, deliberately non-alphabetical order."""

        docs: list[Document]

        def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
            return list(reversed(self.docs))

    rag_retriever = from_langchain(FixedRetriever(docs=lc_docs()))  # the one line in a conftest
    hits = rag_retriever.search("anything", 3)
    assert [h.id for h in hits] == ["tubeless", "wheel-true", "brake-bleed"]
    description = rag_retriever.describe()
    json.dumps(description)  # it goes into baseline.json
    assert description["retriever"].endswith("FixedRetriever") and description["id_key"] == "id"


def test_real_langchain_in_memory_vector_store() -> None:
    import langchain_core  # noqa: F401  - dev extra
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_core.vectorstores import InMemoryVectorStore

    docs = lc_docs()
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=64))
    store.add_documents(docs, ids=[d.metadata["doc_id"] for d in docs])
    adapter = from_langchain(store.as_retriever(search_kwargs={"k": 5}))
    # The fake embedding hashes the text: only an identical text is nearest, so the query that
    # repeats a document's text must rank that document first; the rest follow the store's order.
    hits = adapter.search(docs[2].page_content, 5)
    assert hits[0].id == "brake-bleed" and sorted(h.id for h in hits) == sorted(d.metadata["doc_id"] for d in docs)
    assert adapter.describe()["search_kwargs"] == {"k": 5} and adapter.describe()["configured_depth"] == 5

    returned = normalize_results(adapter.search(docs[2].page_content, 3), 3, "q-brakes")
    assert returned.ids == [h.id for h in hits[:3]] and returned.truncated_from is None
    docs_ranked, metrics = score_query(returned.ids, {"brake-bleed": 2}, MeasurementConfig(measures=("mrr@3", "recall@3")))
    assert docs_ranked[0] == "brake-bleed" and metrics == {"mrr@3": 1.0, "recall@3": 1.0}


def test_real_langchain_default_depth_warns_and_pass_k_fixes_it() -> None:
    import langchain_core  # noqa: F401  - dev extra
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_core.vectorstores import InMemoryVectorStore

    docs = lc_docs()
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=64))
    store.add_documents(docs, ids=[d.metadata["doc_id"] for d in docs])
    adapter = from_langchain(store.as_retriever())  # LangChain's default: 4 results
    with pytest.warns(AdapterWarning, match="at most 4 results .*recall@5"):
        assert len(adapter.search("q", 5)) == 4
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        adapter.search("q", 5)  # warned once per adapter, not once per query
        assert len(from_langchain(store.as_retriever(), pass_k=True).search("q", 5)) == 5


def test_real_langchain_uuid_ids_warn_and_id_key_fixes_them() -> None:
    import langchain_core  # noqa: F401  - dev extra
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_core.vectorstores import InMemoryVectorStore

    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=64))
    store.add_documents(lc_docs())  # no ids: the store assigns UUIDs
    retriever = store.as_retriever(search_kwargs={"k": 5})
    with pytest.warns(AdapterWarning, match="UUID ids"):
        from_langchain(retriever).search("q", 5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        hits = from_langchain(retriever, id_key="doc_id").search("q", 5)
    assert sorted(h.id for h in hits) == ["brake-bleed", "chain-wear", "tire-pressure", "tubeless", "wheel-true"]


# --------------------------------------------------------------------------- LlamaIndex


def _llama_nodes() -> list[Any]:
    from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode

    spec = [("brakes#1", "brakes", "bleed hydraulic brakes"), ("brakes#2", "brakes", "replace brake pads"),
            ("chain#1", "chain", "measure chain wear"), ("tires#1", "tires", "set tire pressure")]
    return [
        TextNode(id_=nid, text=text, metadata={"doc": doc.upper()},
                 relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=doc)})
        for nid, doc, text in spec
    ]


def test_real_llamaindex_custom_retriever_keeps_order_and_scores() -> None:
    import llama_index.core  # noqa: F401  - dev extra
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeWithScore, QueryBundle

    class Fixed(BaseRetriever):
        def __init__(self, nodes: list[Any]) -> None:
            self._nodes = nodes
            super().__init__()

        def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
            scores = [0.2, 0.9, 0.5, 0.1]  # not sorted: the adapter must not sort either
            return [NodeWithScore(node=n, score=s) for n, s in zip(self._nodes, scores)]

    adapter = from_llamaindex(Fixed(_llama_nodes()))
    hits = adapter.search("brakes?", 3)
    assert [(h.id, h.score) for h in hits] == [("brakes", 0.2), ("brakes", 0.9), ("chain", 0.5)]
    assert hits[0].explain == "node brakes#1"
    assert [h.id for h in from_llamaindex(Fixed(_llama_nodes()), id_key="doc").search("q", 2)] == ["BRAKES", "BRAKES"]

    # the plugin's normaliser and scorer over the adapter's output: the repeated document is
    # dropped after mapping (keeping the first), so recall cannot exceed 1
    returned = normalize_results(hits, 3, "q1")
    assert returned.ids == ["brakes", "brakes", "chain"] and returned.scores == [0.2, 0.9, 0.5]
    assert returned.explains == ["node brakes#1", "node brakes#2", "node chain#1"]
    docs, metrics = score_query(returned.ids, {"brakes": 1, "chain": 1}, MeasurementConfig(measures=("recall@3",)))
    assert docs == ["brakes", "chain"] and metrics == {"recall@3": 1.0}


def test_real_llamaindex_missing_metadata_key_is_an_error() -> None:
    import llama_index.core  # noqa: F401  - dev extra
    from llama_index.core.schema import NodeWithScore, TextNode

    class Plain:
        def retrieve(self, query: str) -> list[NodeWithScore]:
            return [NodeWithScore(node=TextNode(id_="n1", text="a", metadata={"doc": "A"}), score=1.0),
                    NodeWithScore(node=TextNode(id_="n2", text="b", metadata={"page": 2}), score=0.5)]

    with pytest.raises(RetrieverError) as info:
        from_llamaindex(Plain(), id_key="doc").search("which doc", 5)
    assert "'which doc'" in str(info.value) and "result 2" in str(info.value) and "'page'" in str(info.value)
    # without a key, a node with no source document is judged by its own id
    assert [h.id for h in from_llamaindex(Plain()).search("q", 5)] == ["n1", "n2"]


def test_real_llamaindex_vector_index_depth_warning() -> None:
    import llama_index.core  # noqa: F401  - dev extra
    from llama_index.core import VectorStoreIndex
    from llama_index.core.embeddings import BaseEmbedding

    class LetterEmbedding(BaseEmbedding):
        """Stand-in for an embedding model: letter counts, deterministic and offline."""

        def _vector(self, text: str) -> list[float]:
            return [float(text.lower().count(c)) + 0.01 for c in "abcdefghijklmnopqrstuvwxyz"]

        def _get_text_embedding(self, text: str) -> list[float]:
            return self._vector(text)

        def _get_query_embedding(self, query: str) -> list[float]:
            return self._vector(query)

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return self._vector(query)

    index = VectorStoreIndex(_llama_nodes(), embed_model=LetterEmbedding())
    with pytest.warns(AdapterWarning, match="at most 2 results .*similarity_top_k"):
        assert len(from_llamaindex(index.as_retriever()).search("measure chain wear", 4)) == 2
    adapter = from_llamaindex(index.as_retriever(similarity_top_k=4))
    hits = adapter.search("measure chain wear", 4)
    assert hits[0].id == "chain" and len(hits) == 4
    assert all(a.score >= b.score for a, b in zip(hits, hits[1:]))  # the index's own order, kept
    assert adapter.describe()["configured_depth"] == 4


# ------------------------------------------------------------------- parent chunks


def test_real_langchain_parent_key_reads_the_parent_from_metadata() -> None:
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever

    class Children(BaseRetriever):
        docs: list[Document]

        def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[Document]:
            return self.docs

    # MultiVectorRetriever-style children: metadata["doc_id"] names the stored parent
    children = [Document(page_content="c", id="stem/c2", metadata={"doc_id": "stem"}),
                Document(page_content="c", id="pads/c1", metadata={"doc_id": "rotor"}),
                Document(page_content="c", id="misc/c3", metadata={})]
    adapter = from_langchain(Children(docs=children), parent_key="doc_id")
    hits = adapter.search("q", 3)
    assert [(h.id, h.parent_id) for h in hits] == [("stem/c2", "stem"), ("pads/c1", "rotor"), ("misc/c3", None)]
    assert adapter.describe()["parent_key"] == "doc_id"
    assert normalize_results(hits, 3, "q").parents == ["stem", "rotor", None]
    # without parent_key nothing changes
    assert [h.parent_id for h in from_langchain(Children(docs=children)).search("q", 3)] == [None, None, None]


def test_real_llamaindex_parent_key_callable_reads_hierarchical_parents() -> None:
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeRelationship, NodeWithScore, QueryBundle, RelatedNodeInfo, TextNode

    child = TextNode(id_="brakes#1-c2", text="bleed", relationships={
        NodeRelationship.SOURCE: RelatedNodeInfo(node_id="brakes"),
        NodeRelationship.PARENT: RelatedNodeInfo(node_id="brakes#1")})
    orphan = TextNode(id_="chain#1", text="wear", relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id="chain")})

    class Fixed(BaseRetriever):
        def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
            return [NodeWithScore(node=child, score=0.9), NodeWithScore(node=orphan, score=0.5)]

    adapter = from_llamaindex(Fixed(), id_key=lambda n: n.node_id,
                              parent_key=lambda n: n.parent_node.node_id if n.parent_node else None)
    assert [(h.id, h.parent_id) for h in adapter.search("q", 2)] == [("brakes#1-c2", "brakes#1"), ("chain#1", None)]


def test_parent_key_must_be_a_key_or_callable() -> None:
    with pytest.raises(TypeError, match="parent_key must be None, a metadata key or a callable"):
        from_langchain(FakeLC([]), parent_key=3)  # type: ignore[arg-type]
