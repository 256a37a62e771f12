"""Filters in the reference stack, and the leak check catching a filter bug in a real build.

Ten short documents of three tenants (metadata from corpus.jsonl fields). The globex documents
say "refund" three times, the acme ones once: unfiltered, "refund" ranks globex first; filtered
to acme, BM25 must score only acme's chunks before it ranks (a filter applied after ranking the
top k would leave nothing), and the vector route asks chromadb with ``where``.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import yaml  # noqa: F401  imported here, not first inside a pytester run: its C loader outlives a sys.modules reset
from plugins_off import PLUGINS_OFF  # tests/plugins_off.py

from pytest_ragmetrics.stack import Document, Embedder, Retriever

REPO = Path(__file__).resolve().parents[2]

DOCS = [
    ("acme-refund-card", "acme", "Refund to the card within fourteen days of the purchase."),
    ("acme-refund-parts", "acme", "Unused parts earn a refund when the box is unopened."),
    ("acme-refund-bikes", "acme", "Ridden bikes get an exchange, and a refund only when faulty."),
    ("globex-refund-credit", "globex", "Refund refund refund: store credit only for every refund."),
    ("globex-refund-window", "globex", "Refund refund refund within seven days, refund with receipt."),
    ("globex-refund-special", "globex", "Refund refund refund is never given for special orders."),
    ("initech-chain", "initech", "Lubricate the chain after riding in the rain."),
    ("initech-brakes", "initech", "Squealing brakes need clean rotors and new pads."),
    ("initech-tyres", "initech", "Tyre pressure depends on rider weight and tyre width."),
    ("initech-gears", "initech", "Index the rear derailleur with the barrel adjuster."),
]


def _documents() -> list[Document]:
    return [Document(d, "", text, {"tenant": tenant}) for d, tenant, text in DOCS]


def _tenant(doc_id: str) -> str:
    return next(t for d, t, _ in DOCS if d == doc_id.partition("#")[0])


def test_bm25_filters_before_ranking_so_k_results_still_come_back(tmp_path: Path, embedder: Embedder) -> None:
    r = Retriever(_documents(), mode="bm25", data_dir=tmp_path, embedder=embedder, top_k=3)
    unfiltered = r.search("refund", 3)
    assert {_tenant(h.id) for h in unfiltered} == {"globex"}  # a filter after ranking would keep nothing
    hits = r.search("refund", 3, filters={"tenant": "acme"})
    assert sorted(h.doc_id for h in hits) == ["acme-refund-bikes", "acme-refund-card", "acme-refund-parts"]
    assert all(h.metadata == {"tenant": "acme"} for h in hits)  # each hit says what it is
    both = r.search_batch(["refund", "refund"], 3, filters=[{"tenant": ["acme", "initech"]}, None])
    assert {_tenant(h.id) for h in both[0]} == {"acme"} and {_tenant(h.id) for h in both[1]} == {"globex"}


def test_a_filter_key_no_document_carries_is_refused(tmp_path: Path, embedder: Embedder) -> None:
    r = Retriever(_documents(), mode="bm25", data_dir=tmp_path, embedder=embedder)
    with pytest.raises(ValueError, match="filter key 'tenat' is in no document's metadata .*: its documents carry "
                                         "tenant"):
        r.search("refund", 3, filters={"tenat": "acme"})


def test_a_filter_list_of_mixed_kinds_is_refused_on_every_route(tmp_path: Path, embedder: Embedder) -> None:
    """chromadb's ``$in`` takes one kind of value: BM25 took ``[1, "1"]`` and the vector route raised
    chromadb's own error, so the same filter must be refused before either route runs."""
    r = Retriever(_documents(), mode="bm25", data_dir=tmp_path, embedder=embedder)
    with pytest.raises(ValueError, match=r"filter 'tenant': \[1, '1'\] mixes kinds of value"):
        r.search("refund", 3, filters={"tenant": [1, "1"]})


@pytest.mark.slow
def test_the_vector_route_filters_with_chromadb_where(tmp_path: Path, embedder: Embedder) -> None:
    r = Retriever(_documents(), mode="vector", data_dir=tmp_path, embedder=embedder, top_k=3, unique_docs=True)
    r.build()
    for tenant in ("acme", "globex", "initech"):
        hits = r.search("how do I get my money back", 3, filters={"tenant": tenant})
        assert len(hits) == 3 and {_tenant(h.id) for h in hits} == {tenant}
    hybrid = r.search("refund", 4, mode="hybrid", filters={"tenant": "initech"})
    assert len(hybrid) == 4 and {_tenant(h.id) for h in hybrid} == {"initech"}


CONFTEST = '''
import json
import os
import pathlib

import pytest

HERE = pathlib.Path(__file__).parent


class DropsFilters:
    """The bug: a layer in front of the index that takes filters and never passes them on."""

    def __init__(self, inner):
        self.inner = inner

    def search(self, query, k, filters=None):
        return self.inner.search(query, k)

    def describe(self):
        return self.inner.describe()


@pytest.fixture(scope="session")
def rag_retriever():
    from pytest_ragmetrics.stack import Retriever

    mode = os.environ["TEST_STACK_MODE"]
    retriever = Retriever(HERE / "corpus.jsonl", mode=mode, data_dir=HERE / "index", top_k=3, fetch_k=10,
                          unique_docs=True)
    if mode != "bm25":  # BM25 builds on first search; the vector index only for a mode that searches it
        retriever.build()
    return DropsFilters(retriever) if os.environ.get("TEST_DROP_FILTERS") else retriever
'''

GOLDEN = """
- {id: acme-refund, question: "refund", gold_chunks: [acme-refund-card], filters: {tenant: acme}, scope: {tenant: acme}}
- {id: initech-chain, question: "chain lube in the rain", gold_chunks: [initech-chain], filters: {tenant: initech},
   scope: {tenant: initech}}
"""


@pytest.mark.parametrize("mode", ["bm25", pytest.param("hybrid", marks=pytest.mark.slow)])
def test_a_filter_bug_in_a_real_stack_build_is_caught_as_a_leak(pytester: pytest.Pytester,
                                                                monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    pytester.makeconftest(CONFTEST)
    (pytester.path / "corpus.jsonl").write_text(
        "".join(json.dumps({"doc_id": d, "text": text, "tenant": t}) + "\n" for d, t, text in DOCS), encoding="utf-8")
    (pytester.path / "golden.yaml").write_text(GOLDEN, encoding="utf-8")
    monkeypatch.setenv("TEST_STACK_MODE", mode)
    # chromadb's native bindings cannot be imported twice in one process, as an in-process run's module reset
    # would: the vector build runs in a subprocess (BM25 alone imports no native module)
    run = pytester.runpytest if mode == "bm25" else pytester.runpytest_subprocess
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    args = ("--rag-eval", "--rag-golden", "golden.yaml", "--rag-baseline", "baseline.json", "-rA",
            "-p", "no:cacheprovider", *PLUGINS_OFF)
    result = run(*args, "--rag-update-baseline")
    assert result.ret == 0, result.stdout.str()[-3000:]
    result = run(*args)
    assert result.ret == 0, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines(["PASSED golden.yaml::gate::leak"])

    monkeypatch.setenv("TEST_DROP_FILTERS", "1")
    result = run(*args, "--rag-report", "run.json")
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, out[-3000:]
    result.stdout.fnmatch_lines(["FAILED golden.yaml::acme-refund - leak: *", "FAILED golden.yaml::gate::leak - *"])
    assert re.search(r"leak: \d+ returned documents are outside the scope \{tenant: acme\}: ", out), out[-3000:]
    assert "Retriever settings differ" not in out
    leaks = json.loads((pytester.path / "run.json").read_text(encoding="utf-8"))["per_query"]["acme-refund"]["leaks"]
    assert leaks and all(leak["metadata"]["tenant"] != "acme" for leak in leaks)
    assert leaks[0]["doc"].startswith("globex-refund")  # the stack's hits carry their documents' metadata


@pytest.mark.parametrize("key", ["$or", ""])
def test_a_corpus_field_a_filter_language_would_misread_is_named_with_its_line(tmp_path: Path, key: str) -> None:
    """chromadb refused such a field deep in the build with no line; the loader names it."""
    from pytest_ragmetrics.corpus import CorpusError, load_corpus

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"doc_id": "a", "text": "x", "tenant": "acme"}) + "\n"
                      + json.dumps({"doc_id": "b", "text": "y", key: "acme"}) + "\n", encoding="utf-8")
    with pytest.raises(CorpusError, match=rf"corpus.jsonl, line 2.*metadata key '\{key}': a key must be non-empty"
                                          if key else r"corpus.jsonl, line 2.*metadata key '': a key must be"):
        load_corpus(corpus)
