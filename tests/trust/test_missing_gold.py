"""Gold that cannot be found: a relevant gold id no corpus document carries.

Such an id scores 0 on every run, so it can never regress and hides in the means.
Checked against ``--rag-corpus`` or a retriever's ``doc_ids()``, through real
``pytest --rag-eval`` sessions.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ragproject import rag_summary
from trust_helpers import TrustProject

#: Every document the GOOD rankings and the golden set name, plus the one a typo misses.
DOCS = ["tire-repair", "tube-patch", "chain-lube", "chain-clean", "noise-doc", "brake-pads", "rim-wear",
        "brake-cable", "derailleur", "shifter-cable", "tire-pressure", "cassette", "degreaser", "queen-marking"]

#: A query whose only gold id is a typo of a corpus document.
TYPO = {"id": "q-007", "question": "how do I mark a queen bee", "gold_chunks": ["queen-marker"], "tags": ["standard"]}

DOC_IDS_CONFTEST = r'''


class DocIdsRetriever(Retriever):
    def doc_ids(self):
        return json.loads((HERE / "doc_ids.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="session")
def rag_retriever():
    return DocIdsRetriever()
'''


def write_corpus(project: TrustProject, docs: list[str] = DOCS) -> None:
    folder = project.path / "corpus"
    folder.mkdir(exist_ok=True)
    for doc in docs:
        (folder / f"{doc}.md").write_text(f"# {doc}\nAbout {doc.replace('-', ' ')}.\n", encoding="utf-8")


@pytest.fixture
def typo(project: TrustProject) -> TrustProject:
    """A project whose q-007 names 'queen-marker' (the corpus has 'queen-marking'), q-002 one typo among
    two gold ids, and q-003 a grade-0 id no document carries (harmless: reported nowhere)."""
    write_corpus(project)
    project.add_query(TYPO, ["queen-marking", "tire-repair"])
    project.edit_query("q-002", gold_chunks=["chain-lube", "chain-clen"])
    project.edit_query("q-003", gold_chunks={"brake-pads": 2, "brake-cable": 1, "no-such-doc": 0})
    return project


def test_a_missing_gold_id_is_reported_once_near_the_top_with_the_closest_ids(typo: TrustProject) -> None:
    result = typo.run("--rag-corpus=corpus")
    summary = rag_summary(result)
    head = "\n".join(summary.splitlines()[:4])
    assert "2 relevant gold ids of 12 are not in the corpus (corpus)" in head, summary
    assert "'q-007' gold 'queen-marker' (did you mean 'queen-marking'?)" in head
    assert "'q-002' gold 'chain-clen' (did you mean 'chain-clean'?)" in head
    assert summary.count("did you mean") == 2  # once each
    assert "no relevant document" not in summary  # it has one; the corpus lacks it
    assert "no-such-doc" not in result.stdout.str()  # a grade-0 id changes no score


def test_the_header_says_how_many_gold_ids_were_checked_against_what(typo: TrustProject) -> None:
    result = typo.run("--rag-corpus=corpus")
    result.stdout.fnmatch_lines(["ragmetrics: gold ids: 12 checked against corpus, 2 missing"])
    result = typo.run()
    result.stdout.fnmatch_lines(["ragmetrics: gold ids: none checked yet (no corpus known*"])


def test_the_ini_corpus_is_checked_too(typo: TrustProject) -> None:
    typo.ini(rag_corpus="corpus")
    result = typo.run()
    result.stdout.fnmatch_lines(["ragmetrics: gold ids: 12 checked against corpus, 2 missing"])
    assert "did you mean 'queen-marking'?" in rag_summary(result)


def test_a_query_whose_gold_is_all_missing_is_unscorable_not_a_zero(typo: TrustProject) -> None:
    result = typo.run("--rag-corpus=corpus", "--rag-report=run.json")
    summary = rag_summary(result)
    assert re.search(r"1 query is unscorable, as none of its relevant gold ids is in the corpus: q-007", summary)
    result.stdout.re_match_lines([r"SKIPPED .*none of its relevant gold ids is in the corpus \(corpus\): "
                                  r"queen-marker: not scored"])
    per_query = json.loads((typo.path / "run.json").read_text(encoding="utf-8"))["per_query"]
    assert per_query["q-007"]["status"] == "unscorable"
    assert "queen-marker" in per_query["q-007"]["error"]
    assert per_query["q-002"]["status"] == "scored"  # one gold id found: it still measures something


def test_update_baseline_refuses_missing_gold_unless_allowed(typo: TrustProject) -> None:
    result = typo.run("--rag-update-baseline", "--rag-corpus=corpus")
    assert result.ret == 1
    summary = rag_summary(result)
    assert "not writing" in summary and "2 relevant gold ids are not in the corpus (corpus)" in summary, summary
    assert "did you mean 'queen-marking'?" in summary and "--rag-allow-missing-gold" in summary
    assert not typo.baseline_path.exists()

    result = typo.run("--rag-update-baseline", "--rag-corpus=corpus", "--rag-allow-missing-gold")
    assert result.ret == 0, result.stdout.str()
    meta = typo.baseline()["_meta"]
    assert meta["allowed_missing_gold"] == ["q-002/chain-clen", "q-007/queen-marker"]
    assert "q-007" not in typo.baseline()["per_query"]  # unscorable: no 0 in the baseline forever
    assert "did you mean 'queen-marking'?" in rag_summary(result)
    # the sealed file, with its new _meta key, is a baseline the next run reads
    result = typo.run("--rag-corpus=corpus")
    assert result.ret == 0, result.stdout.str()


def test_a_retriever_with_doc_ids_is_checked_without_a_corpus(typo: TrustProject) -> None:
    typo.conftest_text += DOC_IDS_CONFTEST
    (typo.path / "conftest.py").write_text(typo.conftest_text, encoding="utf-8")
    (typo.path / "doc_ids.json").write_text(json.dumps(DOCS), encoding="utf-8")
    result = typo.run()
    summary = rag_summary(result)
    assert "2 relevant gold ids of 12 are not in the corpus (the retriever's doc_ids() (14 documents))" in summary
    assert "did you mean 'queen-marking'?" in summary
    result.stdout.re_match_lines([r"SKIPPED .*none of its relevant gold ids is in the corpus"])

    result = typo.run("--rag-update-baseline")
    assert result.ret == 1 and not typo.baseline_path.exists()
    assert "not writing" in rag_summary(result)


def test_doc_ids_reach_the_controller_under_xdist(typo: TrustProject) -> None:
    pytest.importorskip("xdist", reason="pytest-xdist is in the dev extra, which CI installs")
    typo.conftest_text += DOC_IDS_CONFTEST
    (typo.path / "conftest.py").write_text(typo.conftest_text, encoding="utf-8")
    (typo.path / "doc_ids.json").write_text(json.dumps(DOCS), encoding="utf-8")
    result = typo.run_subprocess("-n", "2", "--rag-update-baseline")
    assert result.ret == 1, result.stdout.str()
    assert "did you mean 'queen-marking'?" in rag_summary(result)
    assert not typo.baseline_path.exists()


RAISING_DOC_IDS_CONFTEST = r'''


class RaisingDocIdsRetriever(Retriever):
    def doc_ids(self):
        raise RuntimeError("index not loaded")


@pytest.fixture(scope="session")
def rag_retriever():
    return RaisingDocIdsRetriever()
'''


@pytest.mark.parametrize("xdist", [False, True], ids=["serial", "xdist"])
def test_a_doc_ids_check_made_at_the_first_query_is_reported_at_the_end(project: TrustProject, xdist: bool) -> None:
    """The header is printed before the first query, so it says "none checked yet"; the end says what was."""
    if xdist:
        pytest.importorskip("xdist", reason="pytest-xdist is in the dev extra, which CI installs")
    project.conftest_text += DOC_IDS_CONFTEST
    (project.path / "conftest.py").write_text(project.conftest_text, encoding="utf-8")
    (project.path / "doc_ids.json").write_text(json.dumps(DOCS), encoding="utf-8")
    project.make_baseline()
    result = project.run_subprocess("-n", "2") if xdist else project.run()
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["ragmetrics: gold ids: none checked yet*"])
    assert "ragmetrics: gold ids: 11 checked against the retriever's doc_ids() (14 documents), 0 missing" \
        in rag_summary(result)


@pytest.mark.parametrize("xdist", [False, True], ids=["serial", "xdist"])
def test_a_doc_ids_that_raises_is_said_not_skipped(project: TrustProject, xdist: bool) -> None:
    if xdist:
        pytest.importorskip("xdist", reason="pytest-xdist is in the dev extra, which CI installs")
    project.conftest_text += RAISING_DOC_IDS_CONFTEST
    (project.path / "conftest.py").write_text(project.conftest_text, encoding="utf-8")
    project.make_baseline()
    result = project.run_subprocess("-n", "2") if xdist else project.run()
    assert result.ret == 0, result.stdout.str()  # the check is optional: no query fails on it
    summary = rag_summary(result)
    assert summary.count("WARNING: gold ids not checked: the retriever's doc_ids() raised RuntimeError: "
                         "index not loaded") == 1, summary


GONE = ("tire-repair", "chain-lube", "chain-clean", "brake-pads", "brake-cable", "derailleur", "shifter-cable",
        "cassette", "degreaser")  # tire-pressure, q-005's only gold, is not there


def test_compare_takes_a_run_that_found_gold_missing_for_what_it_says(project: TrustProject, tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """A run with a corpus makes a query unscorable that a run without one scored: not an edit (exit 2),
    but a failed baseline gate (exit 1), as in the plugin: the query's regressions would hide."""
    from pytest_ragmetrics.cli import main

    project.make_baseline("--rag-report=without.json")
    write_corpus(project, list(GONE))
    project.run("--rag-corpus=corpus", "--rag-report=with.json")
    capsys.readouterr()
    code = main(["compare", str(project.path / "without.json"), str(project.path / "with.json"),
                 "--fail-on-regression"])
    out = capsys.readouterr().out
    assert code == 1, out
    assert "1 query that A scored cannot be scored now: q-005 (none of its relevant gold ids is in the corpus" in out


@pytest.mark.parametrize("via", ["corpus", "doc_ids"])
def test_a_gold_document_gone_from_the_corpus_does_not_hide_a_regression(project: TrustProject, via: str) -> None:
    """The baseline scored q-005; then its only gold document leaves the corpus and the retriever stops
    finding it. Leaving q-005 out as unscorable would pass a real regression: the baseline gate fails."""
    project.make_baseline()
    project.answer(q_005=["cassette", "degreaser"])
    if via == "corpus":
        write_corpus(project, list(GONE))
        result = project.run("--rag-corpus=corpus")
    else:
        project.conftest_text += DOC_IDS_CONFTEST
        (project.path / "conftest.py").write_text(project.conftest_text, encoding="utf-8")
        (project.path / "doc_ids.json").write_text(json.dumps(list(GONE)), encoding="utf-8")
        result = project.run()
    assert result.ret == 1, result.stdout.str()
    summary = rag_summary(result)
    assert "gate baseline: 1 query that the baseline scored cannot be scored now: q-005 (none of its relevant gold " \
           "ids is in the corpus" in summary
    assert "--rag-allow-missing-gold" in summary
    # gone on purpose: the refresh records it, and the next run passes
    args = ("--rag-corpus=corpus",) if via == "corpus" else ()
    assert project.run("--rag-update-baseline", "--rag-allow-missing-gold", *args).ret == 1  # q-005 would go
    assert project.run("--rag-update-baseline", "--rag-allow-missing-gold", "--rag-reason", "q-005's document was "
                       "withdrawn", *args).ret == 0
    assert project.run(*args).ret == 0


def test_a_typo_brought_in_by_an_edit_is_named_when_the_baseline_is_refused(project: TrustProject) -> None:
    """Editing a gold id refuses the baseline (judgments changed); the refusal names the typo too,
    so re-measuring does not bake it in."""
    project.make_baseline()
    write_corpus(project)
    project.edit_query("q-002", gold_chunks=["chain-lube", "chain-clen"])
    result = project.run("--rag-corpus=corpus")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    out = result.stdout.str() + result.stderr.str()
    assert "judgments or text changed for 1 query since the baseline: q-002" in out
    assert "of those, gold ids not in the corpus (corpus): 'q-002' gold 'chain-clen' (did you mean 'chain-clean'?)" in out
