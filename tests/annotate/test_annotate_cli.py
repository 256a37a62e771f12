"""``ragmetrics annotate`` as a command: refusals before serving, what it prints, stopping, SIGKILL."""

from __future__ import annotations

import http.client
import json
import re
import signal
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from annotate_helpers import META, QUESTIONS, Cli, write_pool

from pytest_ragmetrics.annotate.judgments import KIND, read_judgments
from pytest_ragmetrics.cli import main
from pytest_ragmetrics.tools.candidates import read_candidates


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["annotate", *args])
    out, err = capsys.readouterr()
    return code, out, err


def judgments_file(path: Path, annotator: str, pairs: dict[tuple[str, str], int], pool_id: str = "pool-1") -> Path:
    by_q: dict[str, list[dict]] = {}
    for (qid, doc), rel in pairs.items():
        by_q.setdefault(qid, []).append({"doc_id": doc, "rel": rel, "note": f"{annotator} on {doc}"})
    records = [{"_meta": {"kind": KIND, "annotator": annotator, "pool_id": pool_id}}]
    records += [{"qid": qid, "query": "x", "tags": [], "candidates": docs} for qid, docs in by_q.items()]
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_help_is_wired(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["annotate", "--help"])
    out = capsys.readouterr().out
    assert info.value.code == 0 and "ragmetrics annotate" in out and "--adjudicate" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "--annotator NAME is required"),
        (["--annotator", "../x"], "annotator name"),
        (["--annotator", "a", "--out", "{pool}"], "is the candidates file: an output is never written over"),
        (["--annotator", "a", "--guidelines", "{empty}"], "guidelines file is empty"),
        (["--annotator", "a", "--guidelines", "{missing}"], "file not found"),
        (["--annotator", "a", "--port", "70000"], "--port must be 0-65535"),
        (["--adjudicate", "{a}", "{b}"], "--adjudicate needs --out"),
        (["--adjudicate", "{a}", "{b}", "--out", "{adj}", "--annotator", "c"], "--annotator is not used"),
        (["--adjudicate", "{a}", "{a}", "--out", "{adj}"], "two annotators"),
        (["--adjudicate", "{a}", "{b}", "--out", "{a}"], "is annotator A's judgments (--adjudicate A B)"),
        (["--adjudicate", "{a}", "{b}", "--out", "{pool}"], "is the candidates file"),
        (["--annotator", "a", "--out", "{a}/x.jsonl"], "is not a folder"),
        (["--adjudicate", "{a}", "{b}", "--out", "{a}/adj.jsonl"], "is not a folder"),
    ],
)
def test_usage_problems_exit_2_before_serving(tmp_path: Path, pool_path: Path, capsys: pytest.CaptureFixture[str],
                                              args: list[str], message: str) -> None:
    (tmp_path / "empty.md").write_text(" \n", encoding="utf-8")
    names = {"pool": str(pool_path), "empty": str(tmp_path / "empty.md"), "missing": str(tmp_path / "none.md"),
             "a": str(judgments_file(tmp_path / "a.jsonl", "alice", {("q1", "a"): 2})),
             "b": str(judgments_file(tmp_path / "b.jsonl", "bob", {("q1", "a"): 1})),
             "adj": str(tmp_path / "adj.jsonl")}
    code, out, err = run(capsys, str(pool_path), *(a.format(**names) for a in args))
    assert code == 2 and message in err and "http://" not in out
    assert not (tmp_path / "adj.jsonl").exists()


def test_candidates_without_text_stop_before_serving(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pool = write_pool(tmp_path / "bare.jsonl", [{"qid": "q7", "query": "x", "candidates": [{"doc_id": "d7"}]}])
    code, out, err = run(capsys, str(pool), "--annotator", "alice")
    assert code == 2 and str(pool) in err and "qid 'q7', document 'd7'" in err and "--corpus" in err
    assert out == ""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "other.md").write_text("# Other\ntext", encoding="utf-8")
    code, _, err = run(capsys, str(pool), "--annotator", "alice", "--corpus", str(corpus))
    assert code == 2 and "not in the corpus" in err


def test_a_file_of_another_pool_is_refused_naming_both(tmp_path: Path, pool_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    theirs = judgments_file(tmp_path / "pool.alice.jsonl", "alice", {("q1", "a"): 2}, pool_id="another")
    code, out, err = run(capsys, str(pool_path), "--annotator", "alice")
    assert code == 2 and str(theirs) in err and str(pool_path) in err and "never mixed" in err
    assert "http://" not in out


def test_adjudication_without_disagreement_writes_the_file_and_does_not_serve(
        tmp_path: Path, pool_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = judgments_file(tmp_path / "a.jsonl", "alice", {("q1", "a"): 2, ("q1", "b"): 0, ("q2", "d"): 1})
    b = judgments_file(tmp_path / "b.jsonl", "bob", {("q1", "a"): 2, ("q1", "b"): 0})
    adj = tmp_path / "adj.jsonl"
    code, out, _ = run(capsys, str(pool_path), "--adjudicate", str(a), str(b), "--out", str(adj))
    assert code == 0 and "2 agree (carried over), 0 disagree; 1 judged by one of them only" in out
    assert "Nothing to adjudicate" in out and "http://" not in out
    result = read_judgments(adj, read_candidates(pool_path))
    assert result.annotator == "adjudicated(alice,bob)"
    assert {k: j.rel for k, j in result.pairs().items()} == {("q1", "a"): 2, ("q1", "b"): 0, ("q2", "d"): 1}
    assert result.extra_meta["adjudicated_from"] == [{"annotator": "alice", "file": str(a)},
                                                     {"annotator": "bob", "file": str(b)}]


def test_it_prints_the_url_and_what_is_left_and_stops_cleanly(pool_path: Path) -> None:
    cli = Cli(str(pool_path), "--annotator", "alice")
    try:
        assert "3 of 3 questions and 7 of 7 candidates left" in "".join(cli.lines)
        assert str(pool_path.with_name("pool.alice.jsonl")) in "".join(cli.lines)
        code, out, err = cli.stop(signal.SIGINT)
    finally:
        cli.kill()
    assert code == 0 and "Stopped; 3 of 3 questions and 7 of 7 candidates left" in out
    assert "nothing was written" in out and "Traceback" not in err
    cli = Cli(str(pool_path), "--annotator", "alice")
    try:
        code, out, err = cli.stop(signal.SIGTERM)
    finally:
        cli.kill()
    assert code == 0 and "Stopped" in out and "Traceback" not in err


def token_of(url: str) -> str:
    conn = http.client.HTTPConnection(urlsplit(url).hostname, urlsplit(url).port, timeout=10)
    conn.request("GET", "/")
    page = conn.getresponse().read().decode()
    conn.close()
    found = re.search(r'name="ragmetrics-token" content="([^"]+)"', page)
    assert found
    return found.group(1)


def test_sigkill_loses_at_most_the_judgment_being_made(pool_path: Path) -> None:
    pairs = [(q["qid"], c["doc_id"]) for q in QUESTIONS for c in q["candidates"]]
    sequence = [(pairs[i % len(pairs)], (i // len(pairs)) % 3) for i in range(10_000)]
    cli = Cli(str(pool_path), "--annotator", "alice")
    url = urlsplit(cli.url)
    token = token_of(cli.url)
    acknowledged: list[int] = []

    def hammer() -> None:
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
        for i, ((qid, doc), rel) in enumerate(sequence):
            try:
                conn.request("POST", "/api/judge", json.dumps({"qid": qid, "doc_id": doc, "rel": rel, "note": str(i)}),
                             {"Content-Type": "application/json", "X-Ragmetrics-Token": token})
                response = conn.getresponse()
                response.read()
            except (OSError, http.client.HTTPException):
                return
            assert response.status == 200
            acknowledged.append(i)
            conn.close()
            conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)

    worker = threading.Thread(target=hammer)
    worker.start()
    deadline = time.monotonic() + 60
    while len(acknowledged) < 25 and time.monotonic() < deadline:
        time.sleep(0.01)
    cli.kill()  # SIGKILL, mid-stream
    worker.join(30)
    assert len(acknowledged) >= 25
    saved = read_judgments(pool_path.with_name("pool.alice.jsonl"), read_candidates(pool_path))  # valid JSONL

    def state_after(n: int) -> dict[tuple[str, str], tuple[int, str]]:
        state: dict[tuple[str, str], tuple[int, str]] = {}
        for i, (pair, rel) in enumerate(sequence[:n]):
            state[pair] = (rel, str(i))
        return state

    got = {pair: (j.rel, j.note) for pair, j in saved.pairs().items()}
    done = len(acknowledged)
    assert got in (state_after(done), state_after(done + 1))  # every answered judgment, plus the one in flight


def _post(url: str, token: str, body: dict) -> int:
    conn = http.client.HTTPConnection(urlsplit(url).hostname, urlsplit(url).port, timeout=10)
    conn.request("POST", "/api/judge", json.dumps(body),
                 {"Content-Type": "application/json", "X-Ragmetrics-Token": token})
    status = conn.getresponse().status
    conn.close()
    return status


def test_filters_scope_and_source_go_from_candidates_through_the_judgments_into_every_exported_golden_set(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import yaml

    from pytest_ragmetrics.golden import load_golden

    questions = [
        {"qid": "log-1", "query": "refund at acme", "source": "log", "filters": {"tenant": "acme"},
         "scope": {"tenant": "acme"}, "candidates": [{"doc_id": "acme-refund", "text": "refunds take 5 days"}]},
        {"qid": "log-2", "query": "shipping at globex", "source": "log", "filters": {"tenant": "globex"},
         "candidates": [{"doc_id": "globex-shipping", "text": "we ship worldwide"}]}]
    pool = write_pool(tmp_path / "candidates.jsonl", questions, meta=None)
    cli = Cli(str(pool), "--annotator", "alice")
    try:
        token = token_of(cli.url)
        assert _post(cli.url, token, {"qid": "log-1", "doc_id": "acme-refund", "rel": 2}) == 200
        assert _post(cli.url, token, {"qid": "log-2", "doc_id": "globex-shipping", "rel": 1}) == 200
    finally:
        cli.stop()
        cli.kill()
    judged = tmp_path / "candidates.alice.jsonl"
    golden = load_golden(judged)
    assert golden["log-1"].filters == {"tenant": "acme"} and golden["log-1"].scope == {"tenant": "acme"}
    assert golden["log-1"].source == "log" and golden["log-2"].filters == {"tenant": "globex"}
    capsys.readouterr()
    for out in ("new.yaml", "new.jsonl"):
        assert main(["export", "--golden", str(judged), "--golden-out", str(tmp_path / out)]) == 0
    assert main(["export", "--golden", str(judged), "--yaml-out", str(tmp_path / "entries.yaml")]) == 0
    for out in ("new.yaml", "new.jsonl", "entries.yaml"):
        back = load_golden(tmp_path / out)
        assert back["log-1"].filters == {"tenant": "acme"} and back["log-1"].scope == {"tenant": "acme"}, out
        assert back["log-1"].source == "log" and back["log-2"].scope is None, out
    # a sampled question's filters become its scope when asked
    assert main(["export", "--golden", str(judged), "--scope-from-filters",
                 "--yaml-out", str(tmp_path / "scoped.yaml")]) == 0
    scoped = yaml.safe_load((tmp_path / "scoped.yaml").read_text(encoding="utf-8"))["queries"]
    assert [q["scope"] for q in scoped] == [{"tenant": "acme"}, {"tenant": "globex"}]


def test_a_question_without_candidates_is_named_by_annotate_and_export(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    questions = [*QUESTIONS[:1], {"qid": "log-empty", "query": "Do you sell gift cards?", "candidates": []}]
    pool = write_pool(tmp_path / "pool.jsonl", questions)
    cli = Cli(str(pool), "--annotator", "alice")
    try:
        started = "".join(cli.lines)
        token = token_of(cli.url)
        for doc in ("a", "b", "c"):
            assert _post(cli.url, token, {"qid": "q1", "doc_id": doc, "rel": 1}) == 200
    finally:
        cli.stop()
        cli.kill()
    assert "1 question has no candidates" in started and "log-empty ('Do you sell gift cards?')" in started
    assert "answerable: false" in started
    capsys.readouterr()
    assert main(["export", "--golden", str(tmp_path / "pool.alice.jsonl"), "--yaml-out",
                 str(tmp_path / "new.yaml")]) == 0
    err = capsys.readouterr().err
    assert "1 question of" in err and "had no candidates to judge and is not exported: log-empty" in err
    assert "`answerable: false`" in err


def test_annotate_names_the_tool_that_wrote_the_candidates(tmp_path: Path) -> None:
    harvested = [dict(QUESTIONS[0], source="harvested",
                      candidates=[dict(QUESTIONS[0]["candidates"][0], rel=2), *QUESTIONS[0]["candidates"][1:]])]
    pool = write_pool(tmp_path / "harvested.jsonl", harvested,
                      meta={"_meta": {**META["_meta"], "made_by": "ragmetrics harvest"}})
    cli = Cli(str(pool), "--annotator", "alice")
    try:
        started = "".join(cli.lines)
    finally:
        cli.stop()
        cli.kill()
    assert "1 of these candidates carries a grade from the golden set, which `ragmetrics harvest` counted" in started
    assert "ragmetrics pool" not in started
