"""pytest_ragmetrics.tools.leakage: golden questions found verbatim or near-verbatim in the corpus."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_ragmetrics import RagMetricsError
from pytest_ragmetrics.golden import GoldenSet, Query
from pytest_ragmetrics.cli import main as cli_main
from pytest_ragmetrics.tools.leakage import check_leakage, find_leaks, is_cjk, normalize, tokens
from pytest_ragmetrics.corpus import Document

REPO_ROOT = Path(__file__).resolve().parents[1]

FILLER = ("Bicycle chains wear with every ride, and a worn chain wears the cassette and chainrings "
          "in turn, which is why mechanics measure wear long before anything skips. ")

VERBATIM_Q = "How often should I replace the brake pads on a loaded touring bike?"
NEAR_Q = ("Should hydraulic disc brake fluid be replaced every two years on bikes ridden in wet "
          "and muddy conditions through the winter?")
PARAPHRASE_Q = "My stopping power fades on long descents, what is going wrong with the brakes?"
CJK_Q = "第一位获得诺贝尔和平奖的美国黑人是谁？"


def golden(*queries: tuple[str, str, dict[str, int]]) -> GoldenSet:
    return GoldenSet("test", tuple(Query(qid, text, judgments) for qid, text, judgments in queries))


def units(docs: dict[str, str]) -> list[tuple[str, str | None, str]]:
    return [(doc_id, None, text) for doc_id, text in docs.items()]


# ---------------------------------------------------------------------------- normalising


def test_normalising_case_punctuation_whitespace_and_cjk() -> None:
    assert normalize("  How   OFTEN, should I\treplace… the pads?! ") == "how often should i replace the pads"
    assert normalize("ＡＢＣ　ｄｅｆ") == "abc def"  # full-width forms (NFKC)
    assert tokens("龙烟铁路项目在1806年9月") == ["龙", "烟", "铁", "路", "项", "目", "在", "1806", "年", "9", "月"]
    assert is_cjk(tokens(CJK_Q)) and not is_cjk(tokens(VERBATIM_Q))
    assert is_cjk(tokens("ANCA相关血管炎的中性粒细胞")) and not is_cjk(tokens("ANCA 血管炎 neutrophil traps release"))


# ------------------------------------------------------------------------------- matching


def test_planted_verbatim_near_and_paraphrase() -> None:
    gold = golden(("q-verbatim", VERBATIM_Q, {"pads": 2}),
                  ("q-near", NEAR_Q, {"fluid": 1}),
                  ("q-para", PARAPHRASE_Q, {"pads": 2}))
    # A near-verbatim copy: the document says "used" where the question says "ridden".
    near_doc = ("hydraulic disc brake fluid be replaced every two years on bikes used in wet "
                "and muddy conditions through the winter")
    docs = {
        "pads": FILLER + "HOW often should I replace the brake-pads on a loaded touring bike? " + FILLER,
        "fluid": FILLER + "Should " + near_doc + ". " + FILLER,
        "descents": FILLER + "On long descents, rim and disc brakes heat up; pads glaze and braking fades. " + FILLER,
    }
    leaks, n_units, too_short = find_leaks(gold, units(docs))
    assert n_units == 3 and too_short == []
    by_q = {leak.qid: leak for leak in leaks}
    assert set(by_q) == {"q-verbatim", "q-near"}  # the paraphrase is not flagged
    v = by_q["q-verbatim"]
    assert (v.doc_id, v.kind, v.overlap, v.grade, v.chunk_id) == ("pads", "verbatim", 1.0, 2, None)
    n = by_q["q-near"]
    q_grams = len(tokens(NEAR_Q)) - 4
    # 21 words -> 17 5-grams; the one changed word sits in 5 of them: 12 / 17
    assert q_grams == 17 and n.kind == "near" and n.overlap == pytest.approx(12 / 17)
    # a stricter threshold drops it; a smaller n-gram forgives more (3-grams: 16 / 19)
    assert {leak.qid for leak in find_leaks(gold, units(docs), threshold=0.75)[0]} == {"q-verbatim"}
    with_3 = find_leaks(gold, units(docs), threshold=0.75, word_n=3)[0]
    assert {(x.qid, round(x.overlap, 4)) for x in with_3} == {("q-verbatim", 1.0), ("q-near", round(16 / 19, 4))}


def test_all_ngrams_present_but_not_contiguous_is_near() -> None:
    gold = golden(("q", "alpha beta gamma delta epsilon zeta", {}))
    text = "alpha beta gamma delta epsilon eta theta. beta gamma delta epsilon zeta."
    (leak,), _, _ = find_leaks(gold, units({"d": text}))
    assert leak.overlap == 1.0 and leak.kind == "near"


def test_cjk_verbatim_near_and_paraphrase() -> None:
    passage = ("马丁·路德·金是美国民权运动领袖。拉尔夫·本奇是第一位获得诺贝尔和平奖的美国黑人，"
               "他因调停以色列与阿拉伯国家的冲突而获奖。")
    gold = golden(
        ("zh-verbatim", "第一位获得诺贝尔和平奖的美国黑人", {"bunche": 1}),   # copied, no question words
        ("zh-near", CJK_Q, {"bunche": 1}),                                   # copied + 是谁？
        ("zh-para", "哪位非裔美国人最早拿到和平奖？", {"bunche": 1}),          # paraphrase
    )
    leaks, _, _ = find_leaks(gold, units({"bunche": passage, "other": "自行车链条需要定期清洁和润滑。" * 5}))
    by_q = {leak.qid: leak for leak in leaks}
    assert set(by_q) == {"zh-verbatim", "zh-near"}
    assert by_q["zh-verbatim"].kind == "verbatim" and by_q["zh-verbatim"].overlap == 1.0
    # 18 characters -> 11 character 8-grams; the two that take in 是 or 谁 are not in the passage
    assert by_q["zh-near"].kind == "near" and by_q["zh-near"].overlap == pytest.approx(9 / 11)


def test_short_questions() -> None:
    gold = golden(("three", "adjust the derailleur", {}), ("two", "chain wear", {}), ("cjk-short", "链条", {}))
    leaks, _, too_short = find_leaks(gold, units({"d": "To adjust the derailleur, shift to the smallest cog. "
                                                         "Chain wear matters. 链条"}))
    assert [(leak.qid, leak.kind) for leak in leaks] == [("three", "verbatim")]  # checked as one 3-gram
    assert too_short == ["two", "cjk-short"]


def test_one_row_per_question_and_document_with_best_chunk(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    body = (FILLER * 3) + VERBATIM_Q + " " + (FILLER * 3)
    records = [{"doc_id": "pads", "title": "Brake pads", "text": body},
               {"doc_id": "other", "title": "Other", "text": FILLER * 4}]
    corpus.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    gold = golden(("q1", VERBATIM_Q, {"pads": 1}))
    report = check_leakage(gold, corpus, chunk_size=200, overlap=40)
    assert report.n_units > 4 and report.unit.startswith("chunks of 200")
    (leak,) = report.leaks
    assert leak.doc_id == "pads" and leak.chunk_id is not None and leak.chunk_id.startswith("pads#")
    assert leak.kind == "verbatim"
    whole = check_leakage(gold, [Document(r["doc_id"], r["title"], r["text"]) for r in records])
    assert [(x.doc_id, x.chunk_id, x.kind) for x in whole.leaks] == [("pads", None, "verbatim")]
    assert whole.n_units == 2 and whole.judged_qids() == ["q1"]


def test_leakage_check_imports_no_stack(tmp_path: Path) -> None:
    """The plugin's leakage warning runs in every --rag-eval session with rag_corpus set:
    loading and chunking a corpus must not import the reference stack (or its heavy libraries)."""
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"doc_id": "pads", "title": "Brake pads", "text": FILLER + VERBATIM_Q}) + "\n",
                      encoding="utf-8")
    code = (
        "import json, sys\n"
        "from pytest_ragmetrics.golden import GoldenSet, Query\n"
        "from pytest_ragmetrics.tools.leakage import check_leakage\n"
        f"gold = GoldenSet('t', (Query('q1', {VERBATIM_Q!r}, {{'pads': 1}}),))\n"
        f"for size in (None, 200):\n"
        f"    assert check_leakage(gold, {str(corpus)!r}, chunk_size=size).leaked_qids == ['q1']\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('pytest_ragmetrics.stack'))))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == []


def test_threshold_is_validated() -> None:
    with pytest.raises(RagMetricsError, match="threshold"):
        find_leaks(golden(("q", "a b c d e f", {})), [], threshold=0)
    with pytest.raises(RagMetricsError, match="threshold"):
        find_leaks(golden(("q", "a b c d e f", {})), [], threshold=1.5)


# ---------------------------------------------------------------------------- the verb


@pytest.fixture()
def files(tmp_path: Path) -> tuple[Path, Path]:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "brake-pads.md").write_text("# Brake pads\n\n" + FILLER + VERBATIM_Q + "\n", encoding="utf-8")
    (corpus / "descents.md").write_text("# Descents\n\nBrakes heat up on long descents.\n", encoding="utf-8")
    gold = tmp_path / "golden.yaml"
    gold.write_text(
        f"- id: leaked\n  question: \"{VERBATIM_Q}\"\n  gold_chunks: [brake-pads]\n"
        f"- id: clean\n  question: \"{PARAPHRASE_Q}\"\n  gold_chunks: [descents]\n",
        encoding="utf-8")
    return gold, corpus


def run_main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli_main(["leakage", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_main_table_json_and_fail(capsys: pytest.CaptureFixture[str], files: tuple[Path, Path]) -> None:
    gold, corpus = files
    code, out, err = run_main(capsys, "--golden", str(gold), "--corpus", str(corpus))
    assert code == 0 and err == ""
    assert "2 questions of" in out and "against 2 documents" in out
    assert "1 of 2 questions (50.0%) appear in the corpus: 1 verbatim, 0 near-verbatim only; " \
           "1 of them inside a document judged relevant to them." in out
    assert "| leaked | How often should I replace" in out and "| brake-pads | 1.00    | verbatim | 1 " in out
    code, out, _ = run_main(capsys, "--golden", str(gold), "--corpus", str(corpus), "--format", "json", "--chunk-size", "100")
    data = json.loads(out)
    assert code == 0 and data["n_leaked_questions"] == 1 and data["leaks"][0]["chunk_id"].startswith("brake-pads#")
    code, _, err = run_main(capsys, "--golden", str(gold), "--corpus", str(corpus), "--fail")
    assert code == 1 and "1 question leaks" in err


def test_main_clean_and_errors(capsys: pytest.CaptureFixture[str], files: tuple[Path, Path], tmp_path: Path) -> None:
    gold, corpus = files
    (corpus / "brake-pads.md").write_text("# Brake pads\n\nReplace pads when the groove is gone.\n", encoding="utf-8")
    code, out, _ = run_main(capsys, "--golden", str(gold), "--corpus", str(corpus), "--fail")
    assert code == 0 and "No question appears verbatim or near-verbatim in the corpus (0 of 2)." in out
    code, _, err = run_main(capsys, "--golden", str(gold), "--corpus", str(tmp_path / "nowhere"))
    assert code == 2 and "ragmetrics leakage: error:" in err and "nowhere" in err
    code, _, err = run_main(capsys, "--golden", str(gold), "--corpus", str(corpus), "--threshold", "2")
    assert code == 2 and "threshold" in err
    with pytest.raises(SystemExit):
        cli_main(["leakage", "--golden", str(gold)])


# ---------------------------------------------------------------------------- real data


def test_demo_questions_do_not_copy_the_corpus() -> None:
    """The demo's questions were written in their own words; keep it that way."""
    report = check_leakage(REPO_ROOT / "eval" / "golden.yaml", REPO_ROOT / "eval" / "corpus")
    assert report.n_questions == 77 and report.n_units == 48 and report.too_short == []
    assert report.leaks == []
    # even at a tenth of the default threshold nothing comes close (the most shared: 1 of 5 5-grams)
    assert check_leakage(REPO_ROOT / "eval" / "golden.yaml", REPO_ROOT / "eval" / "corpus", threshold=0.25).leaks == []


def test_scifact_scale_and_known_leaks(collections_dir: Path) -> None:
    """5,183 abstracts x 300 claims in one pass (about a second here). Two claims copy their
    cited abstract: 845 word for word, 805 mostly from the title."""
    scifact = collections_dir / "scifact"
    report = check_leakage(scifact, scifact)
    assert report.n_questions == 300 and report.n_units == 5183
    found = [(x.qid, x.doc_id, x.kind, round(x.overlap, 2), x.grade) for x in report.leaks]
    assert found == [("805", "22180793", "near", 0.75, 1), ("845", "17741440", "verbatim", 1.0, 1)]
