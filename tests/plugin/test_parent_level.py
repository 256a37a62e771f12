"""A retriever whose results carry parent ids gets chunk- and parent-level hit rate side by
side, in the terminal, the Markdown summary, the HTML report and the JSON artifact; serial
and xdist runs agree. Real pytest sessions (pytester)."""

from __future__ import annotations

import json

import pytest

import xdist  # noqa: F401  - dev extra: CI has it; missing must fail

# Passage-level labels (rag_id_separator = none): children that hold part of an answer are
# judged 1, and so are the parent sections that hold all of it.
GOLDEN = """
- id: q1
  question: how tight should the stem bolts be
  gold_chunks: {"stem/c2": 1, "stem": 1}
- id: q2
  question: when to replace brake pads
  gold_chunks: {"pads/c1": 1, "pads": 1}
- id: q3
  question: what oil for the fork
  gold_chunks: {"fork/c4": 1, "fork-service": 1}
- id: q4
  question: how to true a wheel
  gold_chunks: {"wheel/c7": 1, "wheel": 1}
"""

CONFTEST = '''
import dataclasses
import pytest

@dataclasses.dataclass
class Child:
    id: str
    parent_id: str | None
    score: float = 0.0

# q1: the child hits and so does its parent.
# q2: the child hits, but the parent lookup hands the generator the wrong section.
# q3: the answering child is missed at rank 1; a later child's parent is the answering section.
# q4: nothing relevant at all.
ANSWERS = {
    "how tight should the stem bolts be": [Child("stem/c2", "stem"), Child("bar/c1", "bar")],
    "when to replace brake pads": [Child("pads/c1", "rotor"), Child("misc/c3", None)],
    "what oil for the fork": [Child("shock/c1", "shock"), Child("fork/c9", "fork-service")],
    "how to true a wheel": [Child("tire/c1", "tire"), Child("hub/c2", "hub")],
}

class Retriever:
    def search(self, query, k):
        return ANSWERS[query][:k]

@pytest.fixture(scope="session")
def rag_retriever():
    return Retriever()
'''

INI = """
[pytest]
rag_golden = golden.yaml
rag_id_separator = none
rag_metrics = recall@3 hit_rate@1 hit_rate@3
"""


@pytest.fixture
def parent_project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makefile(".yaml", golden=GOLDEN)
    pytester.makeconftest(CONFTEST)
    pytester.makeini(INI)
    return pytester


def _parent_level(path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))["comparison"]["parent_level"]


EXPECTED = {
    "n": 4,
    "metrics": {
        # chunk level: q1, q2 hit at rank 1; parent level: only q1 at rank 1, q3 joins at rank 2
        "hit_rate@1": {"chunk": 0.5, "parent": 0.25, "chunk_hit_parent_missed": ["q2"],
                       "parent_hit_chunk_missed": []},
        "hit_rate@3": {"chunk": 0.5, "parent": 0.5, "chunk_hit_parent_missed": ["q2"],
                       "parent_hit_chunk_missed": ["q3"]},
    },
}


def test_parent_level_is_reported_side_by_side(parent_project: pytest.Pytester) -> None:
    result = parent_project.runpytest("--rag-eval", "--rag-report", "run.json", "--rag-markdown", "summary.md",
                                      "--rag-html", "report.html")
    out = result.stdout.str()
    assert "Parent-chunk hit rate (4 scored queries returned parent ids" in out
    row = next(line for line in out.splitlines() if line.startswith("| hit_rate@1 ") and "0.2500" in line)
    assert [c.strip() for c in row.strip("|").split("|")] == ["hit_rate@1", "0.5000", "0.2500", "-0.2500", "1", "q2"]

    assert _parent_level(parent_project.path / "run.json") == EXPECTED
    per_query = json.loads((parent_project.path / "run.json").read_text())["per_query"]
    assert per_query["q3"]["parent_level"] == {"chunk": {"hit_rate@1": 0.0, "hit_rate@3": 0.0},
                                               "parent": {"hit_rate@1": 0.0, "hit_rate@3": 1.0}}
    assert "Parent-chunk hit rate" in (parent_project.path / "summary.md").read_text()
    html = (parent_project.path / "report.html").read_text()
    assert "<h2>Parent-chunk hit rate</h2>" in html and "<td>q2</td>" in html


def test_xdist_run_reports_the_same_parent_level(parent_project: pytest.Pytester) -> None:
    parent_project.runpytest("--rag-eval", "--rag-report", "serial.json")
    parallel = parent_project.runpytest_subprocess("--rag-eval", "-n", "2", "--rag-report", "parallel.json")
    assert "created: 2/2 workers" in parallel.stdout.str()
    assert _parent_level(parent_project.path / "parallel.json") == _parent_level(parent_project.path / "serial.json") \
        == EXPECTED


def test_no_parent_ids_no_parent_table(parent_project: pytest.Pytester) -> None:
    parent_project.makeconftest(CONFTEST.replace("return ANSWERS[query][:k]",
                                                 "return [c.id for c in ANSWERS[query][:k]]"))
    result = parent_project.runpytest("--rag-eval", "--rag-report", "run.json")
    assert "Parent-chunk hit rate" not in result.stdout.str()
    assert _parent_level(parent_project.path / "run.json") is None
