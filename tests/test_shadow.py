"""`ragmetrics shadow` (pytest_ragmetrics.tools.shadow): two retrievers or runs compared without labels.

RBO is RBO_ext (Webber, Moffat and Zobel 2010, Eq. 32): checked on hand-worked cases written as
arithmetic, and against an independent reference written here from the paper's definition (the
infinite weighted sum of agreements, with the agreement past the lists' ends extrapolated as the
paper assumes), summed term by term rather than in the closed form. The ``rbo`` package on PyPI
(0.1.3, ``RankingSimilarity(a, b).rbo_ext(p=0.9)``) agrees with the implementation to 1e-15 on
thousands of random pairs of unequal length, but it pins numpy < 2, so it is not a test dependency.

The verb runs over retriever modules written to ``tmp_path`` (imported as the command imports
them, filters replayed) and over run artifacts.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator, Sequence

import pytest

from pytest_ragmetrics.cli import main
from pytest_ragmetrics.tools.candidates import read_candidates
from pytest_ragmetrics.tools.shadow import overlap_at_k, rbo_ext, search_with_filters

# ------------------------------------------------------------------------------------ RBO


def rbo_reference(a: Sequence[str], b: Sequence[str], p: float, depth: int = 4000) -> float:
    """RBO = (1 - p) * sum_{d >= 1} p^(d-1) * A_d, with A_d the agreement at depth d: the overlap of
    the first d items over d, where the shorter list's unseen items agree at its observed rate
    X_s / s (Eq. 32's assumption) and beyond the longer list the agreement stays at its last value."""
    short, long_ = (a, b) if len(a) <= len(b) else (b, a)
    s, n = len(short), len(long_)
    x_s = len(set(short) & set(long_[:s]))

    def agreement(d: int) -> float:
        d = min(d, n)
        seen = len(set(short[:min(d, s)]) & set(long_[:d]))
        return (seen + (x_s * (d - s) / s if d > s else 0.0)) / d

    last = agreement(n)
    head = sum(p ** (d - 1) * agreement(d) for d in range(1, n + 1))
    tail = sum(p ** (d - 1) * last for d in range(n + 1, depth))
    return (1 - p) * (head + tail)


def test_rbo_hand_worked() -> None:
    p = 0.9
    # A = a b c, B = b a d: X_1 = 0, X_2 = 2, X_3 = 2 (Eq. 30, equal lengths)
    expected = (1 - p) / p * (0 / 1 * p + 2 / 2 * p ** 2 + 2 / 3 * p ** 3) + 2 / 3 * p ** 3
    assert rbo_ext(list("abc"), list("bad"), p) == pytest.approx(expected, abs=1e-12)
    assert expected == pytest.approx(0.63, abs=1e-12)
    # a b c against b a c: the same documents, the top two swapped
    assert rbo_ext(list("abc"), list("bac")) == pytest.approx(1 / 9 * (0 + 0.81 + 0.729) + 0.729, abs=1e-12)
    # a against a b: the short list agrees wherever it is seen, and RBO_ext extrapolates that (Eq. 32)
    same_start = ((1 - p) / p * ((1 / 1 * p + 1 / 2 * p ** 2) + 1 * (2 - 1) / (1 * 2) * p ** 2)
                  + (0 / 2 + 1 / 1) * p ** 2)
    assert same_start == pytest.approx(1.0)
    assert rbo_ext(["a"], ["a", "b"]) == pytest.approx(same_start, abs=1e-12)
    assert rbo_ext(list("abcdefghijklmnopqrst"), list("abcdefghijklmnopqrst")) == 1.0
    assert rbo_ext(list("abc"), list("xyz")) == 0.0
    assert rbo_ext([], []) == 1.0 and rbo_ext(["a"], []) == 0.0
    with pytest.raises(ValueError):
        rbo_ext(["a"], ["a"], 1.0)


def test_rbo_equals_the_reference_on_random_rankings() -> None:
    rng = random.Random(20261201)
    for _ in range(1500):
        items = [f"d{i}" for i in range(rng.randint(1, 30))]
        a = rng.sample(items, rng.randint(1, len(items)))
        b = rng.sample(items, rng.randint(1, len(items)))
        p = rng.choice([0.5, 0.8, 0.9, 0.95])
        assert rbo_ext(a, b, p) == pytest.approx(rbo_reference(a, b, p), abs=1e-9), (a, b, p)
        assert rbo_ext(a, b, p) == pytest.approx(rbo_ext(b, a, p), abs=1e-12)  # symmetric


def test_overlap_at_k() -> None:
    assert overlap_at_k(list("abc"), list("cba")) == 1.0
    assert overlap_at_k(list("abcd"), list("abxy")) == 0.5
    assert overlap_at_k(list("ab"), list("abcd")) == 0.5  # over the longer list
    assert overlap_at_k([], []) == 1.0 and overlap_at_k(["a"], []) == 0.0


def test_filters_are_passed_only_when_a_question_has_them() -> None:
    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    class Recording:
        def search(self, *args: Any, **kwargs: Any) -> list[str]:
            calls.append((args, kwargs))
            return []

    search_with_filters(Recording(), "q", 5, None)
    search_with_filters(Recording(), "q", 5, {})
    search_with_filters(Recording(), "q", 5, {"lang": "en"})
    assert calls == [(("q", 5), {}), (("q", 5), {}), (("q", 5), {"filters": {"lang": "en"}})]


# ------------------------------------------------------------------------------ the verb

RETRIEVERS = '''
CALLS = []
A = {"same": "d1 d2 d3", "swap": "d1 d2 d3", "new": "d1 d2 d3", "gone": "d1 d2 d3", "filtered": "d1 d2 d3"}
B = {"same": "d1 d2 d3", "swap": "d2 d1 d3", "new": "d1 d4 d5", "gone": "d6 d7 d8", "filtered": "d1#2-3 d1#1-3 d2"}


class Side:
    def __init__(self, name, table):
        self.name, self.table = name, table

    def search(self, *args, **kwargs):
        CALLS.append((self.name, args, kwargs))
        query, k = args
        docs = self.table[query].split()
        if kwargs.get("filters") == {"lang": "en"}:
            docs = [d for d in docs if d != "d3"]
        return [{"id": d, "text": "text of " + d.partition("#")[0]} for d in docs][:k]


prod = Side("prod", A)
candidate = Side("candidate", B)


class NoFilters:
    def search(self, query, k):
        return ["d1"]


broken = None
'''

QUESTIONS = [{"qid": "q-same", "query": "same"}, {"qid": "q-swap", "query": "swap", "tags": ["hard"]},
             {"qid": "q-new", "query": "new"}, {"qid": "q-gone", "query": "gone"},
             {"qid": "q-filtered", "query": "filtered", "filters": {"lang": "en"}}]


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Path]:
    (tmp_path / "shadow_app.py").write_text(RETRIEVERS, encoding="utf-8")
    (tmp_path / "raises_app.py").write_text("raise RuntimeError('no index here')\n", encoding="utf-8")
    (tmp_path / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS), encoding="utf-8")
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:
        if str(tmp_path) in str(getattr(sys.modules[name], "__file__", "") or ""):
            del sys.modules[name]


def shadow(project: Path, *extra: str) -> list[str]:
    return ["shadow", "--a", "shadow_app:prod", "--b", "shadow_app:candidate", "--queries",
            str(project / "questions.jsonl"), "--rootdir", str(project), "-k", "3", "-q", *extra]


def test_shadow_of_two_retrievers_reports_the_most_changed_first(project: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    out = project / "shadow.json"
    assert main(shadow(project, "--json", str(out))) == 0
    printed = capsys.readouterr().out
    assert "B = candidate against A = prod, top 3, 5 questions" in printed
    data = json.loads(out.read_text(encoding="utf-8"))
    rows = {r["qid"]: r for r in data["per_query"]}
    assert [r["qid"] for r in data["per_query"]] == ["q-gone", "q-new", "q-swap", "q-filtered", "q-same"]
    assert rows["q-gone"]["rbo"] == 0 and rows["q-gone"]["new_in_b"] == ["d6", "d7", "d8"]
    assert rows["q-new"]["overlap"] == pytest.approx(1 / 3) and rows["q-new"]["new_share"] == pytest.approx(2 / 3)
    assert rows["q-new"]["rbo"] == pytest.approx(1 / 9 * (0.9 + 0.5 * 0.81 + 0.729 / 3) + 0.729 / 3)
    assert rows["q-swap"]["rbo"] == pytest.approx(0.9) and rows["q-swap"]["overlap"] == 1.0
    # chunk ids are judged as their documents, repeats dropped, as the gate does; filters replayed on both sides
    assert rows["q-filtered"]["a"] == ["d1", "d2"] and rows["q-filtered"]["b"] == ["d1", "d2"]
    assert rows["q-same"]["rbo"] == 1.0
    s = data["summary"]
    assert s["n"] == 5 and s["identical"] == 2 and s["new_in_b"] == 5 and s["b_documents"] == 14
    assert data["_meta"]["rbo"] == {"p": 0.9, "variant": "RBO_ext (Webber et al. 2010, Eq. 32)"}
    assert printed.index("q-gone") < printed.index("q-new") < printed.index("q-swap")
    assert "5 of 14" in printed
    calls = sys.modules["shadow_app"].CALLS
    assert ("prod", ("filtered", 3), {"filters": {"lang": "en"}}) in calls
    assert ("candidate", ("swap", 3), {}) in calls  # no filters: called as search(query, k)


def test_candidates_hold_the_most_changed_questions_from_both_sides(project: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    out = project / "label-next.jsonl"
    assert main(shadow(project, "--candidates", str(out), "--label", "3", "--seed", "4")) == 0
    assert f"Wrote {out}: the 3 most-changed questions" in capsys.readouterr().out
    pool = read_candidates(out)  # what `ragmetrics annotate` opens
    assert [q.qid for q in pool.questions] == ["q-gone", "q-new", "q-swap"]
    assert [s["name"] for s in pool.meta["sources"]] == ["prod", "candidate"]
    gone = pool.question("q-gone")
    assert sorted(c.doc_id for c in gone.candidates) == ["d1", "d2", "d3", "d6", "d7", "d8"]
    assert gone.candidate("d6").found_by == ["candidate"] and gone.candidate("d1").found_by == ["prod"]
    assert gone.candidate("d6").text == "text of d6" and all(c.rel is None for c in gone.candidates)
    assert pool.question("q-swap").tags == ("hard",)
    assert main(shadow(project, "--candidates", str(out))) == 2  # never overwritten without --force
    assert "already exists; pass --force" in capsys.readouterr().err


def test_the_html_page_is_self_contained_and_escaped(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    questions = [*QUESTIONS[:4], {"qid": "q-<b>", "query": "same"}]
    (project / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in questions), encoding="utf-8")
    page = project / "shadow.html"
    assert main(shadow(project, "--html", str(page))) == 0
    html = page.read_text(encoding="utf-8")
    assert html.startswith("<!doctype html>") and "<script" not in html
    assert "http://" not in html and "https://" not in html and "<link" not in html
    assert "q-&lt;b&gt;" in html and "q-<b>" not in html
    assert html.index("q-gone") < html.index("q-new") < html.index("q-swap")
    assert "<li class=new>d6</li>" in html


def test_identical_retrievers_write_no_candidates(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = project / "c.jsonl"
    args = ["shadow", "--a", "shadow_app:prod", "--b", "shadow_app:prod", "--queries",
            str(project / "questions.jsonl"), "--rootdir", str(project), "-q", "--candidates", str(out)]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "B = B against A = A" in printed  # one name for both: told apart as A and B
    assert "Every question is ranked identically" in printed and not out.exists()


@pytest.mark.parametrize("spec, message", [
    ("nowhere_app:prod", "retriever 'nowhere_app:prod': no module named 'nowhere_app'"),
    ("shadow_app:missing", "retriever 'shadow_app:missing': shadow_app ("),
    ("raises_app:x", "retriever 'raises_app:x': importing raises_app raised RuntimeError: no index here"),
    ("shadow_app:broken", "retriever 'shadow_app:broken': broken is None"),
])
def test_a_retriever_that_does_not_import_exits_2(project: Path, capsys: pytest.CaptureFixture[str],
                                                 spec: str, message: str) -> None:
    args = ["shadow", "--a", "shadow_app:prod", "--b", spec, "--queries", str(project / "questions.jsonl"),
            "--rootdir", str(project), "-q"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("ragmetrics shadow: error: ") and message in err and "Traceback" not in err
    assert sys.modules["shadow_app"].CALLS == []  # both loaded before any search


def test_a_retriever_without_filters_is_refused_when_questions_have_some(project: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    args = ["shadow", "--a", "shadow_app:prod", "--b", "shadow_app:NoFilters", "--queries",
            str(project / "questions.jsonl"), "--rootdir", str(project), "-q"]
    assert main(args) == 2
    assert "search() takes no filters= argument, but 1 question has filters to replay (q-filtered)" in \
        capsys.readouterr().err
    (project / "plain.jsonl").write_text('{"query": "same"}\n{"query": "swap"}\n', encoding="utf-8")
    args[args.index("--queries") + 1] = str(project / "plain.jsonl")
    assert main(args) == 0  # questions without filters: any retriever


@pytest.mark.parametrize("args, message", [
    (["--a", "x:y"], "give both --a and --b (missing --b)"),
    (["--a", "x:y", "--b", "x:z"], "give --queries FILE"),
    (["--a", "x:y", "--b", "x:z", "--run-a", "r.json", "--run-b", "s.json"], "not both"),
    ([], "give two retrievers"),
])
def test_usage_errors_exit_2(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["shadow", *args]) == 2
    assert message in capsys.readouterr().err


def test_a_question_line_without_query_is_named(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = project / "bad.jsonl"
    bad.write_text('{"query": "same"}\n{"qid": "x", "text": "oops"}\n', encoding="utf-8")
    args = ["shadow", "--a", "shadow_app:prod", "--b", "shadow_app:candidate", "--queries", str(bad),
            "--rootdir", str(project), "-q"]
    assert main(args) == 2
    assert f"{bad}, line 2: missing field 'query'" in capsys.readouterr().err


# -------------------------------------------------------------------------------- runs


def artifact(path: Path, tops: dict[str, list[str] | None], k: int = 3) -> Path:
    per_query: dict[str, Any] = {}
    for qid, top in tops.items():
        if top is None:
            per_query[qid] = {"status": "error", "error": "timed out", "ranking": [], "tags": []}
        else:
            per_query[qid] = {"status": "scored", "metrics": {"recall@3": 1.0}, "ranking": top, "tags": [],
                              "_top": top}
    path.write_text(json.dumps({"_meta": {"k": k, "measurement": {"metrics": ["recall@3"]}}, "comparison": {},
                                "per_query": per_query}), encoding="utf-8")
    return path


def test_two_run_artifacts_compare_their_recorded_top_k(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = artifact(tmp_path / "nightly.json", {"q1": ["d1", "d2", "d3"], "q2": ["d1", "d2", "d3"], "q3": ["d9"]})
    b = artifact(tmp_path / "branch.json", {"q1": ["d1", "d2", "d3"], "q2": ["d3", "d2", "d1"], "q3": None})
    out = tmp_path / "s.json"
    assert main(["shadow", "--run-a", str(a), "--run-b", str(b), "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "B = branch against A = nightly, top 3, 2 questions" in printed
    assert "note: branch ranks nothing for 1 question, not compared: q3" in printed
    data = json.loads(out.read_text(encoding="utf-8"))
    assert [r["qid"] for r in data["per_query"]] == ["q2", "q1"]
    assert data["per_query"][0]["rbo"] == pytest.approx(rbo_ext(["d1", "d2", "d3"], ["d3", "d2", "d1"]))
    assert data["_meta"]["k"] == 3 and data["_meta"]["b"]["kind"] == "run"
    # with --queries: their texts, and only those questions
    (tmp_path / "q.jsonl").write_text('{"qid": "q2", "query": "the second question"}\n', encoding="utf-8")
    assert main(["shadow", "--run-a", str(a), "--run-b", str(b), "--queries", str(tmp_path / "q.jsonl")]) == 0
    assert "the second question" in capsys.readouterr().out


def test_a_run_without_rankings_is_refused_naming_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = artifact(tmp_path / "a.json", {"q1": ["d1"]})
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"_meta": {"measurement": {"metrics": ["recall@3"]}}, "comparison": {}, "per_query": {
        "q1": {"status": "scored", "metrics": {"recall@3": 1.0}, "tags": []}}}), encoding="utf-8")
    assert main(["shadow", "--run-a", str(a), "--run-b", str(old)]) == 2
    assert f"{old}: none of its 1 query records a ranking (_top)" in capsys.readouterr().err
    (tmp_path / "broken.json").write_text("{", encoding="utf-8")
    assert main(["shadow", "--run-a", str(a), "--run-b", str(tmp_path / "broken.json")]) == 2
    assert "broken.json" in capsys.readouterr().err


# ------------------------------------------------------------------- outputs and inputs

EXTRA = '''
import copy
import os
import signal

SEEN = []
DOCS = ["d1", "d2", "d3", "d4", "d5"]


class Mutating:
    """Edits the filters it is given, as a careless retriever might."""

    def __init__(self, name):
        self.name = name

    def search(self, query, k, filters=None):
        SEEN.append((self.name, query, copy.deepcopy(filters)))
        if filters:
            filters["tags"].append("MUT")
            filters["lang"] = "zz"
        return DOCS[:k]


class Full:
    def search(self, query, k, filters=None):
        SEEN.append(("full", query))
        return DOCS[:k]


class Few:
    """A's first two documents only, on the question 'few'; A's ranking with the top two swapped on 'swap'."""

    def search(self, query, k, filters=None):
        if query == "few":
            return DOCS[:2]
        if query == "swap":
            return [DOCS[1], DOCS[0], *DOCS[2:k]]
        return DOCS[:k]


class Interrupted:
    def search(self, query, k, filters=None):
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while searching
        return DOCS[:k]


mutating_a = Mutating("a")
mutating_b = Mutating("b")
'''


@pytest.fixture
def extra(tmp_path: Path) -> Iterator[Path]:
    (tmp_path / "extra_app.py").write_text(EXTRA, encoding="utf-8")
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:
        if str(tmp_path) in str(getattr(sys.modules[name], "__file__", "") or ""):
            del sys.modules[name]


def write_questions(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def extra_shadow(root: Path, a: str, b: str, queries: Path, *more: str) -> list[str]:
    return ["shadow", "--a", f"extra_app:{a}", "--b", f"extra_app:{b}", "--queries", str(queries),
            "--rootdir", str(root), "-q", *more]


def run_cli(root: Path, *args: str, stdout: Any = subprocess.PIPE) -> subprocess.CompletedProcess[str]:
    """``python -m pytest_ragmetrics ARGS`` with this checkout's package."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    return subprocess.run([sys.executable, "-m", "pytest_ragmetrics", *args], cwd=root, env=env, stdout=stdout,
                          stderr=subprocess.PIPE, text=True, timeout=120)


def test_a_closed_pipe_still_gets_every_file_written(extra: Path) -> None:
    """``shadow ... | head -1`` printed first, so the closed pipe stopped it before --json, --html and
    --candidates were written, and it still exited 0."""
    queries = write_questions(extra / "q.jsonl", [{"qid": f"q{i}", "query": f"swap {i}" if i % 2 else "swap"}
                                                  for i in range(300)])
    outs = [extra / "s.json", extra / "s.html", extra / "label.jsonl"]
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first line: every write to stdout fails
    try:
        proc = run_cli(extra, *extra_shadow(extra, "Full", "Few", queries, "-k", "3", "--top", "300",
                                            "--json", str(outs[0]), "--html", str(outs[1]),
                                            "--candidates", str(outs[2]), "--seed", "1"), stdout=write)
    finally:
        os.close(write)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert all(p.exists() for p in outs)
    assert json.loads(outs[0].read_text(encoding="utf-8"))["summary"]["n"] == 300


def test_output_paths_are_checked_before_any_search(extra: Path, capsys: pytest.CaptureFixture[str]) -> None:
    queries = write_questions(extra / "q.jsonl", [{"qid": "q1", "query": "few"}])
    folder = extra / "adir"
    folder.mkdir()
    (extra / "file").write_text("", encoding="utf-8")
    for option, path, words in [
        ("--html", folder, f"{folder} is a directory; give a file name such as shadow.html"),
        ("--json", extra / "file" / "s.json", "is a file, not a folder"),
        ("--json", queries, f"--json {queries} is the questions (--queries): an output is never written over an "
                            "input (--force does not change that)"),
        ("--html", queries, f"--html {queries} is the questions (--queries)"),
        ("--candidates", queries, f"--candidates {queries} is the questions (--queries)"),
    ]:
        assert main(extra_shadow(extra, "Full", "Few", queries, option, str(path), "--force")) == 2, option
        err = capsys.readouterr().err
        assert words in err and ".tmp" not in err, err
        assert "extra_app" not in sys.modules  # refused before the retrievers were even imported
    assert queries.read_text(encoding="utf-8") == '{"qid": "q1", "query": "few"}\n'
    assert main(extra_shadow(extra, "Full", "Few", queries, "--json", str(extra / "x"), "--html",
                             str(extra / "x"))) == 2
    assert "--html and --json are the same file" in capsys.readouterr().err
    # reports are replaced as every verb's are (compare --html too); only the candidates ask for --force
    (extra / "old.json").write_text("{}", encoding="utf-8")
    assert main(extra_shadow(extra, "Full", "Few", queries, "--json", str(extra / "old.json"))) == 0
    assert json.loads((extra / "old.json").read_text(encoding="utf-8"))["summary"]["n"] == 1


def test_a_run_artifact_is_never_overwritten_by_the_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = artifact(tmp_path / "a.json", {"q1": ["d1", "d2", "d3"]})
    b = artifact(tmp_path / "b.json", {"q1": ["d3", "d2", "d1"]})
    before = b.read_bytes()
    for option in ("--json", "--html"):
        assert main(["shadow", "--run-a", str(a), "--run-b", str(b), option, str(b), "--force"]) == 2
        assert f"{option} {b} is run B (--run-b)" in capsys.readouterr().err
    assert b.read_bytes() == before


def test_every_call_gets_its_own_copy_of_the_filters(extra: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A retriever that edited the filters it got changed what B was asked and what the report showed."""
    queries = write_questions(extra / "q.jsonl", [{"qid": "q1", "query": "refund", "filters": {"tags": ["a"]}}])
    out = extra / "s.json"
    assert main(extra_shadow(extra, "mutating_a", "mutating_b", queries, "-k", "3", "--json", str(out))) == 0
    assert sys.modules["extra_app"].SEEN == [("a", "refund", {"tags": ["a"]}), ("b", "refund", {"tags": ["a"]})]
    assert json.loads(out.read_text(encoding="utf-8"))["per_query"][0]["filters"] == {"tags": ["a"]}


def test_a_side_returning_fewer_than_k_is_marked_and_ordered_as_changed(extra: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """B returning A's first two of five scored RBO_ext 1 (the short list extrapolated) and sorted as if
    unchanged; it is marked short and ordered by its overlap@k, 2/5."""
    queries = write_questions(extra / "q.jsonl", [{"qid": "q-swap", "query": "swap"}, {"qid": "q-few", "query": "few"},
                                                  {"qid": "q-same", "query": "same"}])
    out = extra / "s.json"
    assert main(extra_shadow(extra, "Full", "Few", queries, "-k", "5", "--json", str(out))) == 0
    printed = capsys.readouterr().out
    data = json.loads(out.read_text(encoding="utf-8"))
    rows = {r["qid"]: r for r in data["per_query"]}
    assert rows["q-few"]["rbo"] == 1.0 and rows["q-few"]["overlap"] == pytest.approx(0.4)
    assert rows["q-few"]["short"] == ["B"] and rows["q-swap"]["short"] == [] and rows["q-same"]["short"] == []
    assert [r["qid"] for r in data["per_query"]] == ["q-few", "q-swap", "q-same"]
    assert data["summary"]["short"] == 1
    assert "| questions where a side returned fewer than 5 | 1 of 3" in printed
    few = next(line for line in printed.splitlines() if line.startswith("| q-few "))
    assert [cell.strip() for cell in few.strip("|").split("|")] == ["q-few", "few", "0.4000", "1.0000", "0 of 2", "B"]
    assert printed.index("q-few") < printed.index("q-swap")


def test_runs_recorded_at_different_k_are_noted_and_a_deeper_k_refused(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    a = artifact(tmp_path / "a.json", {"q1": ["d1", "d2", "d3"], "q2": ["d1#x", "d1#y", "d2"]}, k=3)
    b = artifact(tmp_path / "b.json", {"q1": [f"d{i}" for i in range(1, 11)], "q2": ["d1", "d2"]}, k=10)
    out = tmp_path / "s.json"
    assert main(["shadow", "--run-a", str(a), "--run-b", str(b), "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "top 3" in printed
    assert "note: the runs were recorded at different k (a: 3, b: 10): compared on the top 3" in printed
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["_meta"]["notes"] == ["the runs were recorded at different k (a: 3, b: 10): compared on the top 3"]
    rows = {r["qid"]: r for r in data["per_query"]}
    assert rows["q2"]["a"] == ["d1", "d2"] and rows["q2"]["rbo"] == 1.0  # chunk ids mapped by '#', as with retrievers
    assert main(["shadow", "--run-a", str(a), "--run-b", str(b), "--id-separator", "none", "--json", str(out)]) == 0
    assert {r["qid"]: r for r in json.loads(out.read_text(encoding="utf-8"))["per_query"]}["q2"]["a"] == \
        ["d1#x", "d1#y", "d2"]
    capsys.readouterr()
    assert main(["shadow", "--run-a", str(a), "--run-b", str(b), "-k", "10"]) == 2
    assert f"-k 10 is deeper than {a} recorded (k = 3)" in capsys.readouterr().err


def test_a_ranking_longer_than_the_runs_k_is_refused_naming_file_and_query(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    a = artifact(tmp_path / "a.json", {"q1": ["d1", "d2", "d3"]})
    long_top = artifact(tmp_path / "long.json", {"q1": [f"d{i}" for i in range(20)]}, k=3)
    assert main(["shadow", "--run-a", str(a), "--run-b", str(long_top)]) == 2
    assert f"{long_top}: per_query.q1._top holds 20 documents, more than _meta.k = 3" in capsys.readouterr().err
    old = json.loads(long_top.read_text(encoding="utf-8"))  # written before _top: its ranking is read
    del old["per_query"]["q1"]["_top"]
    long_top.write_text(json.dumps(old), encoding="utf-8")
    assert main(["shadow", "--run-a", str(a), "--run-b", str(long_top)]) == 2
    assert f"{long_top}, per_query.q1: ranks 20 documents, more than the k = 3" in capsys.readouterr().err


def test_ctrl_c_exits_130_with_one_line(extra: Path) -> None:
    queries = write_questions(extra / "q.jsonl", [{"qid": "q1", "query": "few"}])
    proc = run_cli(extra, *extra_shadow(extra, "Full", "Interrupted", queries))
    assert proc.returncode == 130
    assert proc.stderr.strip() == "ragmetrics shadow: interrupted"


def test_a_raw_log_is_searched_as_logged_and_shown_redacted(extra: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = write_questions(extra / "log.jsonl", [{"query": "my email john.doe@example.com and phone 13812345678, "
                                                          "why locked?"}, {"query": "few"}])
    outs = {"json": extra / "s.json", "html": extra / "s.html", "candidates": extra / "c.jsonl"}
    assert main(extra_shadow(extra, "Full", "Few", log, "-k", "5", "--json", str(outs["json"]), "--html",
                             str(outs["html"]), "--candidates", str(outs["candidates"]), "--seed", "1")) == 0
    captured = capsys.readouterr()
    assert f"note: {log} is read as a raw query log (no qid, no _meta line)" in captured.err
    assert "ragmetrics sample" in captured.err
    assert ("full", "my email john.doe@example.com and phone 13812345678, why locked?") in \
        sys.modules["extra_app"].SEEN  # the retrievers get the question as asked
    for text in [captured.out, *(p.read_text(encoding="utf-8") for p in outs.values())]:
        assert "john.doe" not in text and "13812345678" not in text
    assert "my email [email] and phone [phone], why locked?" in outs["json"].read_text(encoding="utf-8")
    # a draft from `ragmetrics sample` (a _meta line) or a golden file (qids) is taken as it is: no note
    draft = write_questions(extra / "golden.jsonl", [{"qid": "g1", "query": "few"}])
    assert main(extra_shadow(extra, "Full", "Few", draft)) == 0
    assert "raw query log" not in capsys.readouterr().err


@pytest.mark.parametrize("query, problem", [("\u200b", "query holds only invisible characters"),
                                            ("a\u0000b", "query contains a NUL character")])
def test_a_nul_or_invisible_question_is_refused_naming_its_line(extra: Path, capsys: pytest.CaptureFixture[str],
                                                                query: str, problem: str) -> None:
    queries = write_questions(extra / "q.jsonl", [{"query": "few"}, {"query": query}])
    assert main(extra_shadow(extra, "Full", "Few", queries)) == 2
    assert f"{queries}, line 2: {problem}" in capsys.readouterr().err


def test_one_question_reads_as_one_question(extra: Path, capsys: pytest.CaptureFixture[str]) -> None:
    queries = write_questions(extra / "q.jsonl", [{"qid": "q1", "query": "few"}])
    page = extra / "s.html"
    assert main(extra_shadow(extra, "Full", "Few", queries, "-k", "5", "--html", str(page))) == 0
    html = page.read_text(encoding="utf-8")
    assert "top 5; 1 question from" in html and "1 questions" not in html


def test_a_write_that_fails_names_the_report_not_a_temp_file(extra: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A folder made where the page goes while the retrievers search (the path was fine when checked):
    the error named the hidden temp file of the atomic write, ``.s.html.r01_k17u.tmp``."""
    page = extra / "s.html"
    (extra / "extra_app.py").write_text(EXTRA + f'''

class MakesFolder:
    def search(self, query, k, filters=None):
        os.makedirs({str(page)!r}, exist_ok=True)
        return DOCS[:k]
''', encoding="utf-8")
    queries = write_questions(extra / "q.jsonl", [{"qid": "q1", "query": "few"}])
    assert main(extra_shadow(extra, "Full", "MakesFolder", queries, "--html", str(page))) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"ragmetrics shadow: error: Is a directory: {page}"
