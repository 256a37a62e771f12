"""Pool sources (pytest_ragmetrics.tools.sources): retrievers imported from a project, run files, artifacts.

Every retriever here is a real module written into ``tmp_path`` and imported the
way ``ragmetrics pool`` imports it (the project root first on ``sys.path``); the
modules are removed from ``sys.modules`` after each test.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Iterator

import pytest

from pytest_ragmetrics.errors import InputError, RagMetricsError, RetrieverError
from pytest_ragmetrics.tools.sources import (
    RETRIEVER_PROTOCOL,
    Entry,
    Source,
    load_retriever,
    project_on_path,
    retriever_rankings,
    run_rankings,
)

RETRIEVERS = '''
class Hit:
    def __init__(self, id, text=None):
        self.id, self.text = id, text


class Fixed:
    """Chunks of documents a and b, then c, d, e."""

    def search(self, query, k):
        return ["a#1-2", "a#2-2", "b#1-1", "c", "d", "e"][:k]


class WithText:
    def search(self, query, k):
        return [Hit("b#2-3", "the second chunk of b"), Hit("a", "all of a"), ("c", 0.5)][:k]


class Batch(Fixed):
    calls = []

    def search(self, query, k):
        raise AssertionError("search_batch must be used")

    def search_batch(self, queries, k):
        Batch.calls.append((list(queries), k))
        return [["z", query] for query in queries]


def make():
    return WithText()


fixed = Fixed()
'''


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Path]:
    """A project root; modules imported from it are forgotten afterwards."""
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:
        if str(tmp_path) in str(getattr(sys.modules[name], "__file__", "") or ""):
            del sys.modules[name]


def write(root: Path, name: str, text: str) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def load(spec: str, root: Path) -> object:
    with project_on_path(root):
        return load_retriever(spec, root)


QUESTIONS = [("q1", "first"), ("q2", "second")]


# ---------------------------------------------------------------------------- retrievers


def test_instance_class_and_factory_load(project: Path) -> None:
    write(project, "rets.py", RETRIEVERS)
    assert type(load("rets:fixed", project)).__name__ == "Fixed"  # an object with search: as it is
    assert type(load("rets:Fixed", project)).__name__ == "Fixed"  # a class: instantiated
    assert type(load("rets:make", project)).__name__ == "WithText"  # a zero-argument function: called
    write(project, "pkg/inner.py", RETRIEVERS)
    assert type(load("pkg.inner:fixed", project)).__name__ == "Fixed"  # a namespace package under the root
    assert type(load("pkg/inner.py:make", project)).__name__ == "WithText"  # a path under the root


def test_the_root_is_first_on_sys_path_only_while_pooling(project: Path) -> None:
    before = list(sys.path)
    with project_on_path(project) as root:
        assert sys.path[0] == str(root)
    assert sys.path == before


def test_rankings_cut_at_depth_then_map_chunks_to_documents(project: Path) -> None:
    write(project, "rets.py", RETRIEVERS)
    source = Source("fixed", "retriever", "rets:fixed")
    ranked = retriever_rankings(source, load("rets:fixed", project), QUESTIONS, 4, "#")
    # asked for 4 results, as the gate asks for k: a#1-2 a#2-2 b#1-1 c -> documents a, b, c
    assert ranked.rankings["q1"] == [Entry("a#1-2", "a"), Entry("b#1-1", "b"), Entry("c", "c")]
    unmapped = retriever_rankings(source, load("rets:fixed", project), QUESTIONS, 2, None)
    assert [e.doc for e in unmapped.rankings["q2"]] == ["a#1-2", "a#2-2"]


def test_hit_text_comes_along_and_search_batch_is_used_once(project: Path) -> None:
    write(project, "rets.py", RETRIEVERS)
    ranked = retriever_rankings(Source("t", "retriever", "rets:make"), load("rets:make", project), QUESTIONS, 3, "#")
    assert ranked.rankings["q1"] == [Entry("b#2-3", "b", "the second chunk of b"), Entry("a", "a", "all of a"),
                                     Entry("c", "c", None)]
    batch = load("rets:Batch", project)
    ranked = retriever_rankings(Source("b", "retriever", "rets:Batch"), batch, QUESTIONS, 5, "#")
    assert type(batch).calls == [(["first", "second"], 5)]
    assert [e.doc for e in ranked.rankings["q2"]] == ["z", "second"]


def test_a_missing_module_says_what_was_looked_for_and_where(project: Path) -> None:
    with pytest.raises(RagMetricsError) as info:
        load("nowhere.deep:make", project)
    message = str(info.value)
    assert "no module named 'nowhere'" in message and "nowhere.py and nowhere/" in message
    assert f"project root {project.resolve()} (first on sys.path)" in message and "--rootdir" in message


def test_a_module_whose_own_import_fails_is_named_with_the_line(project: Path) -> None:
    write(project, "needs.py", "import numpy\nimport not_installed_anywhere\n")
    with pytest.raises(RagMetricsError, match=r"importing needs failed: ModuleNotFoundError: No module named "
                                              r"'not_installed_anywhere' \(at .*needs.py:2\) \(a module it imports"):
        load("needs:x", project)
    write(project, "broken.py", "def f(:\n")
    with pytest.raises(RagMetricsError, match=r"importing broken raised SyntaxError: .* \(at .*broken.py:1\)"):
        load("broken:f", project)
    write(project, "exits.py", "import sys\nsys.exit('usage: exits.py INDEX')\n")
    with pytest.raises(RagMetricsError, match=r"importing exits raised SystemExit: usage: exits.py INDEX"):
        load("exits:f", project)


def test_a_missing_attribute_lists_what_the_module_defines(project: Path) -> None:
    write(project, "rets.py", RETRIEVERS)
    with pytest.raises(RagMetricsError) as info:
        load("rets:nope", project)
    message = str(info.value)
    assert "retriever 'rets:nope': rets (" in message and "rets.py) has no attribute 'nope'" in message
    assert "it defines Batch, Fixed, Hit, WithText, fixed, make" in message
    with pytest.raises(RagMetricsError, match="expected MODULE:ATTR"):
        load("rets", project)


@pytest.mark.parametrize(
    ("code", "spec", "message"),
    [
        ("thing = 42\n", "thing", "thing is int 42, which has no search method"),
        ("class Index:\n    def query(self, q):\n        return []\n", "Index",
         "Index() returned Index <"),
        ("def make():\n    return None\n", "make", "make() returned None."),
        ("class R:\n    search = 'bm25'\nr = R()\n", "r", "whose search is a str, not a method"),
        ("class R:\n    def search(self, query):\n        return []\nr = R()\n", "r",
         "cannot be called as search(query, k)"),
    ],
)
def test_an_object_without_the_protocol_gets_the_protocol_message(project: Path, code: str, spec: str,
                                                                  message: str) -> None:
    write(project, "odd.py", code)
    with pytest.raises(RagMetricsError) as info:
        load(f"odd:{spec}", project)
    assert message in str(info.value) and str(info.value).endswith(RETRIEVER_PROTOCOL)


def test_a_factory_that_raises_or_needs_arguments(project: Path) -> None:
    write(project, "facts.py", """
        def make():
            raise RuntimeError("index not built: run build.py first")

        def needs(corpus, top_k=10):
            return None
    """)
    with pytest.raises(RagMetricsError, match=r"retriever 'facts:make': calling it raised RuntimeError: index not "
                                              r"built: run build.py first \(at .*facts.py:3\)"):
        load("facts:make", project)
    with pytest.raises(RagMetricsError, match=r"the function needs arguments \(corpus\)"):
        load("facts:needs", project)


def test_a_pytest_fixture_is_called_through_its_function(project: Path) -> None:
    write(project, "fixtures_mod.py", """
        import pytest

        class R:
            def search(self, query, k):
                return ["x"]

        @pytest.fixture(scope="session")
        def rag_retriever():
            return R()

        @pytest.fixture
        def needs_tmp(tmp_path):
            return R()

        @pytest.fixture
        def yielding():
            yield R()
    """)
    assert type(load("fixtures_mod:rag_retriever", project)).__name__ == "R"
    with pytest.raises(RagMetricsError, match=r"the fixture needs arguments \(tmp_path\) \(fixtures it requests"):
        load("fixtures_mod:needs_tmp", project)
    with pytest.raises(RagMetricsError, match="yields its retriever"):
        load("fixtures_mod:yielding", project)


def test_a_module_shadowed_by_one_imported_before_is_refused(project: Path) -> None:
    write(project, "json.py", "def loads(text):\n    return None\n")
    with pytest.raises(RagMetricsError, match=r"the module 'json' was already imported from .*json.*rename it"):
        load("json:loads", project)


def test_a_retriever_that_fails_while_searching_is_named(project: Path) -> None:
    write(project, "flaky.py", """
        class Boom:
            def search(self, query, k):
                if query == "second":
                    raise TimeoutError("backend down")
                return ["a"]

        class Bad:
            def search(self, query, k):
                return [("a", 1.0), 42]

        class Lazy:
            def search(self, query, k):
                return (f"{query}#{i}" for i in range(k + 5))  # a generator, longer than asked for

        class Short:
            def search_batch(self, queries, k):
                return [["a"]]

            def search(self, query, k):
                return ["a"]
    """)
    with pytest.raises(RagMetricsError, match=r"retriever 'boom' \(flaky:Boom\): search raised on question 'q2': "
                                              r"TimeoutError: backend down"):
        retriever_rankings(Source("boom", "retriever", "flaky:Boom"), load("flaky:Boom", project), QUESTIONS, 3, "#")
    with pytest.raises(RetrieverError, match=r"retriever 'bad' \(flaky:Bad\): query 'q1', result 2: int 42"):
        retriever_rankings(Source("bad", "retriever", "flaky:Bad"), load("flaky:Bad", project), QUESTIONS, 3, "#")
    lazy = retriever_rankings(Source("lazy", "retriever", "flaky:Lazy"), load("flaky:Lazy", project), QUESTIONS, 3,
                              None)
    assert [e.rid for e in lazy.rankings["q1"]] == ["first#0", "first#1", "first#2"]
    with pytest.raises(RetrieverError, match=r"query 'q1': the retriever returned a str"):
        retriever_rankings(Source("s", "retriever", "x"), type("R", (), {"search": lambda self, q, k: "a,b"})(),
                           QUESTIONS, 3, None)
    with pytest.raises(RagMetricsError, match="search_batch returned 1 lists for 2 questions"):
        retriever_rankings(Source("s", "retriever", "flaky:Short"), load("flaky:Short", project), QUESTIONS, 3, "#")


# --------------------------------------------------------------------------------- runs


def test_a_trec_run_in_trec_eval_order_cut_at_depth(tmp_path: Path) -> None:
    run = tmp_path / "bm25.trec"
    # q1: scores tie for b and c (trec_eval: doc id descending, so c first); a chunk id kept as given
    run.write_text("q1 Q0 a 1 3.0 t\nq1 Q0 b 2 2.0 t\nq1 Q0 c 3 2.0 t\nq1 Q0 a#2 4 1.0 t\nq2 Q0 x 1 1 t\n")
    ranked = run_rankings(run, ["q1", "q2", "q3"], 3)
    assert ranked.source == Source("bm25", "run", str(run))
    assert [e.doc for e in ranked.rankings["q1"]] == ["a", "c", "b"]
    assert ranked.missing == ["q3"] and ranked.ignored == []
    mapped = run_rankings(run, ["q1"], 10, "#", name="named")
    assert [e.doc for e in mapped.rankings["q1"]] == ["a", "c", "b"] and mapped.source.name == "named"
    assert [e.rid for e in mapped.rankings["q1"]] == ["a", "c", "b"]  # a#2 is a again: its first rank counts
    assert mapped.ignored == ["q2"]


def test_run_queries_outside_the_questions_are_ignored_and_none_matching_is_an_error(tmp_path: Path) -> None:
    run = tmp_path / "other.trec"
    run.write_text("x1 Q0 a 1 1 t\nx2 Q0 b 1 1 t\n")
    with pytest.raises(InputError, match=r"other.trec: none of the 2 queries of this TREC run is among the "
                                         r"questions pooled \('x1', 'x2'\)"):
        run_rankings(run, ["q1"], 5)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("q1 Q0 a 1 1 t\nq1 Q0 b 1\n", r"line 2: expected 6 columns"),
        ("q1 Q0 a 1 high t\n", r"line 1: score 'high' is not a number"),
        ("", r"the run file is empty"),
        (b"q1 Q0 a 1 1 t\n\xff\xfe\n", r"line 2: not valid UTF-8"),
        ('{"_meta": {"measurement": {"metrics": ["recall@5"]}}, "comparison": {}, "per_query": {"q1": '
         '{"status": "error", "ranking": ["a",\n 3]}}}', r"per_query.q1.ranking is \['a', 3\]; expected a list of strings"),
        ('{"per_query": [1, 2]}', r"not a run artifact: missing '_meta', 'comparison'"),
        ('{"per_query": {"q1": \n{"ranking": ["a"],}}}', r"line 2: not valid JSON"),
    ],
)
def test_a_garbage_run_names_the_file_and_line(tmp_path: Path, content: str | bytes, message: str) -> None:
    run = tmp_path / "garbage.run"
    if isinstance(content, bytes):
        run.write_bytes(content)
    else:
        run.write_text(content)
    with pytest.raises(InputError, match=message) as info:
        run_rankings(run, ["q1"], 5)
    assert str(run) in str(info.value)
    with pytest.raises(InputError, match="file not found"):
        run_rankings(tmp_path / "absent.trec", ["q1"], 5)


def test_an_artifact_gives_the_rankings_the_gate_scored(tmp_path: Path) -> None:
    artifact = tmp_path / "nightly.json"
    artifact.write_text(json.dumps({"_meta": {"measurement": {"metrics": ["recall@5"]}}, "comparison": {}, "per_query": {
        "q1": {"status": "scored", "metrics": {"recall@5": 1.0}, "ranking": ["b", "a", "c"]},
        "q2": {"status": "error", "error": "TimeoutError", "ranking": []},
        "gone": {"status": "scored", "metrics": {"recall@5": 0.0}, "ranking": ["z"]},
    }}))
    ranked = run_rankings(artifact, ["q1", "q2"], 2)
    assert ranked.source == Source("nightly", "run", str(artifact))
    assert ranked.rankings["q1"] == [Entry("b", "b"), Entry("a", "a")]
    assert ranked.missing == ["q2"] and ranked.ignored == ["gone"]
