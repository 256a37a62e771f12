"""Files and requests the annotator cannot be locked out by: line separators in notes and
texts, hostile query strings and bodies, malformed candidates files, counts that agree
between ``ragmetrics pool`` and ``ragmetrics annotate``."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from annotate_helpers import REPO, Cli

from pytest_ragmetrics.annotate import Task
from pytest_ragmetrics.cli import main
from test_annotate_server import judge, request

def cli_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}


SEPARATORS = "one\u2028two\u2029three\x85four"


def get_json(url: str, path: str) -> Any:
    host, port = url.split("//")[1].rstrip("/").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    conn.request("GET", path)
    response = conn.getresponse()
    data = json.loads(response.read())
    conn.close()
    return data


# ------------------------------------------------------------------ line separators


def test_a_note_holding_line_separators_survives_a_restart_agreement_and_export(
        make_task: Callable[..., Task], serve: Callable[[Task], Any], pool_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    alice, bob = serve(make_task("alice")), serve(make_task("bob"))
    for server, rel in ((alice, 2), (bob, 1)):
        for doc in ("a", "b"):
            status, _, body = judge(server, {"qid": "q1", "doc_id": doc, "rel": rel, "note": SEPARATORS})
            assert status == 200, body
    saved = pool_path.with_name("pool.alice.jsonl")
    cli = Cli(str(pool_path), "--annotator", "alice")  # a restart resumes the file
    try:
        assert "3 of 3 questions and 5 of 7 candidates left" in "".join(cli.lines)
        notes = {c["doc_id"]: c["note"] for c in get_json(cli.url, "/api/question?i=0")["candidates"]}
        assert notes["a"] == notes["b"] == SEPARATORS
    finally:
        code, out, err = cli.stop(signal.SIGINT)
        cli.kill()
    assert code == 0 and "Traceback" not in err
    raw = saved.read_text(encoding="utf-8")
    assert not {"\u2028", "\u2029", "\x85"} & set(raw)  # escaped: any line reader sees whole records
    assert "\\u2028" in raw

    capsys.readouterr()
    assert main(["agreement", str(saved), str(pool_path.with_name("pool.bob.jsonl"))]) == 0
    assert "n = 2" in capsys.readouterr().out
    out = pool_path.with_name("new.yaml")
    assert main(["export", "--golden", str(saved), "--yaml-out", str(out)]) == 0
    assert "wrote 1 questions" in capsys.readouterr().out and "q1" in out.read_text()


@pytest.mark.parametrize("layout", ["corpus.jsonl", "folder"])
def test_pool_then_annotate_with_a_corpus_text_holding_a_paragraph_separator(tmp_path: Path, layout: str) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    texts = {"brakes": "Squeeze the lever.\u2029Then bleed.", "chain": "Lube it\u2028often\x85and wipe it."}
    if layout == "folder":
        for doc, text in texts.items():
            (corpus / f"{doc}.md").write_text(f"# {doc.title()}\n{text}\n", encoding="utf-8")
    else:
        (corpus / "corpus.jsonl").write_text("".join(json.dumps({"doc_id": d, "title": d.title(), "text": t}) + "\n"
                                                     for d, t in texts.items()), encoding="utf-8")
    (tmp_path / "questions.txt").write_text("q1\tHow do brakes work?\n", encoding="utf-8")
    (tmp_path / "run.trec").write_text("q1 Q0 brakes 1 2.0 r\nq1 Q0 chain 2 1.0 r\n", encoding="utf-8")
    out = tmp_path / "candidates.jsonl"
    assert main(["pool", "--queries", str(tmp_path / "questions.txt"), "--run", str(tmp_path / "run.trec"),
                 "--corpus", str(corpus), "--out", str(out), "--seed", "1", "-q"]) == 0
    assert len(out.read_text(encoding="utf-8").splitlines()) == 2  # _meta and one question, even for splitlines
    cli = Cli(str(out), "--annotator", "alice")
    try:
        assert "1 of 1 questions and 2 of 2 candidates left" in "".join(cli.lines)
        shown = {c["doc_id"]: c["text"] for c in get_json(cli.url, "/api/question?i=0")["candidates"]}
    finally:
        cli.stop(signal.SIGINT)
        cli.kill()
    assert shown == {doc: f"{doc.title()}\n{text}" for doc, text in texts.items()}


def test_files_written_with_raw_line_separators_are_read_whole(pool_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Files an older version or another tool wrote with the separators unescaped: every reader
    splits lines on newlines only."""
    from pytest_ragmetrics.tools.candidates import read_candidates

    pool_id = read_candidates(pool_path).pool_id
    paths = []
    for name, rel in (("alice", 2), ("bob", 0)):
        records = [{"_meta": {"kind": "ragmetrics-judgments", "annotator": name, "pool_id": pool_id,
                              "candidates": pool_path.name}},
                   {"qid": "q1", "query": "How\u2028do I bleed?", "tags": [],
                    "candidates": [{"doc_id": "a", "rel": rel, "note": SEPARATORS}]}]
        path = pool_path.with_name(f"pool.{name}.jsonl")
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
        assert "\u2028" in path.read_text(encoding="utf-8")
        paths.append(path)
    capsys.readouterr()
    assert main(["agreement", *map(str, paths)]) == 0
    assert "n = 1" in capsys.readouterr().out
    out = pool_path.with_name("new.yaml")
    assert main(["export", "--golden", str(paths[0]), "--yaml-out", str(out)]) == 0
    _, err = capsys.readouterr()
    assert "1 note is not kept" in err and "Traceback" not in err
    cli = Cli(str(pool_path), "--annotator", "alice")
    try:
        assert "3 of 3 questions and 6 of 7 candidates left" in "".join(cli.lines)
    finally:
        cli.stop(signal.SIGINT)
        cli.kill()


# ------------------------------------------------------------------ hostile requests


def raw_request(server: Any, line: bytes) -> tuple[int, bytes]:
    """A request line sent as bytes, as a browser may send a URL it was handed."""
    import socket

    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(line + b"\r\nHost: 127.0.0.1:" + str(server.port).encode() + b"\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


@pytest.mark.parametrize("i", ["%C2%B2", "%D9%A3", "1" * 5000, "%ED%A0%80", "%F0", "-1", "1e3", "0x1", ""])
def test_a_question_index_that_is_not_a_small_number_is_a_404(
        make_task: Callable[..., Task], serve: Callable[[Task], Any], i: str) -> None:
    server = serve(make_task())
    status, headers, body = request(server, "GET", f"/api/question?i={i}")
    assert status == 404 and headers["content-type"].startswith("application/json")
    assert json.loads(body)["error"].startswith("no question")
    status, _, _ = request(server, "GET", "/api/question?i=0")  # and the server keeps serving
    assert status == 200


def test_raw_non_ascii_in_the_request_line_is_answered(make_task: Callable[..., Task],
                                                        serve: Callable[[Task], Any]) -> None:
    server = serve(make_task())
    for line in ("GET /api/question?i=² HTTP/1.1".encode(), b"GET /api/question?i=\xed\xa0\x80 HTTP/1.1",
                 "GET /api/question?i=\u0663 HTTP/1.1".encode()):
        status, body = raw_request(server, line)
        assert 400 <= status < 500 and b"Traceback" not in body
    assert raw_request(server, b"GET /api/question?i=1 HTTP/1.1")[0] == 200


@pytest.mark.parametrize("body, error", [
    (b"[" * 30_000 + b"]" * 30_000, "nested too deeply"),
    (b'{"qid": "q1", "doc_id": "a", "rel": 2, "note": ' + b'{"x": ' * 900 + b"1" + b"}" * 900 + b"}", "note"),
    (b'{"qid": "q1", "doc_id": "a", "rel": 2, "note": "x\\ud800y"}', "lone surrogate"),
    (b'{"qid": "\\udfff", "doc_id": "a", "rel": 2}', "lone surrogate"),
    (b'{"qid": "q1", "doc_id": "a", "rel": 0, "rel": 2, "note": ""}', "duplicate key 'rel'"),
    (b'{"qid": "q1", "doc_id": "a", "rel": 2, "note": "\xff"}', "not JSON"),
])
def test_a_hostile_body_is_a_400_and_nothing_is_saved(make_task: Callable[..., Task], serve: Callable[[Task], Any],
                                                     pool_path: Path, body: bytes, error: str) -> None:
    server = serve(make_task())
    status, headers, answer = judge(server, body)
    assert status == 400 and headers["content-type"].startswith("application/json"), answer
    assert error in json.loads(answer)["error"]
    assert not pool_path.with_name("pool.alice.jsonl").exists()
    status, _, _ = judge(server, {"qid": "q1", "doc_id": "a", "rel": 2, "note": "fine"})  # still serving
    assert status == 200


# ------------------------------------------------------------------ malformed candidates


@pytest.mark.parametrize("field, value, error", [
    ("ranks", {"bm25": "first"}, "ranks must map source names to ranks (integers >= 1), got {'bm25': 'first'}"),
    ("ranks", {"bm25": 1.5}, "ranks must map"),
    ("ranks", ["bm25"], "ranks must map"),
    ("ranks", {"bm25": None}, "ranks must map"),
    ("found_by", "bm25", "found_by must be a list of source names, got 'bm25'"),
    ("found_by", {"bm25": 1}, "found_by must be a list"),
])
def test_malformed_provenance_in_a_candidates_file_is_exit_2_naming_line_and_document(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str, value: Any, error: str) -> None:
    from annotate_helpers import QUESTIONS, write_pool

    questions = json.loads(json.dumps(QUESTIONS))
    questions[1]["candidates"][0][field] = value
    pool = write_pool(tmp_path / "pool.jsonl", questions)
    done = subprocess.run([sys.executable, "-m", "pytest_ragmetrics", "annotate", str(pool), "--annotator", "alice"],
                          capture_output=True, text=True, timeout=60, env=cli_env(), stdin=subprocess.DEVNULL)
    assert done.returncode == 2, done.stdout  # a malformed file must not be served
    assert f"{pool}, line 3 (qid 'q2'): candidate 'd': {error}" in done.stderr and "Traceback" not in done.stderr
    judged = tmp_path / "pool.alice.jsonl"  # export reads the candidates a judgments file names
    judged.write_text(json.dumps({"_meta": {"kind": "ragmetrics-judgments", "annotator": "alice",
                                            "pool_id": "pool-1", "candidates": "pool.jsonl"}}) + "\n" +
                      json.dumps({"qid": "q1", "query": "x", "candidates": [{"doc_id": "a", "rel": 1}]}) + "\n")
    assert main(["export", "--golden", str(judged), "--yaml-out", str(tmp_path / "out.yaml")]) == 2
    assert error in capsys.readouterr().err and not (tmp_path / "out.yaml").exists()


# ------------------------------------------------------------------ pool and annotate agree


def test_pool_and_annotate_say_the_same_about_carried_grades(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """pool said "3 carried over; 4 await", annotate then said "7 of 7 left" without a word on why."""
    golden = tmp_path / "golden.jsonl"
    golden.write_text(
        json.dumps({"qid": "q1", "query": "brakes?", "candidates": [{"doc_id": "a", "rel": 2, "note": "steps"},
                                                                     {"doc_id": "b", "rel": 0}]}) + "\n" +
        json.dumps({"qid": "q2", "query": "chains?", "candidates": [{"doc_id": "c", "rel": 1}]}) + "\n",
        encoding="utf-8")
    run = tmp_path / "run.trec"
    run.write_text("".join(f"{q} Q0 {d} {r} {10 - r} sys\n" for q, docs in (("q1", "abde"), ("q2", "cfg"))
                           for r, d in enumerate(docs, 1)), encoding="utf-8")
    out = tmp_path / "candidates.jsonl"
    assert main(["pool", "--queries", str(golden), "--run", str(run), "--out", str(out), "--seed", "3", "-q"]) == 0
    said = capsys.readouterr().out
    assert "3 judgments carried over from the input; 4 candidates await a rel" in said
    assert "`ragmetrics annotate` asks all 7 blind, the carried ones too" in said
    lines = out.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines[1:], 1):  # the pool's candidates carry their text (none was given)
        record = json.loads(line)
        for cand in record["candidates"]:
            cand["text"] = f"text of {cand['doc_id']}"
        lines[i] = json.dumps(record)
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")

    cli = Cli(str(out), "--annotator", "alice")
    try:
        printed = "".join(cli.lines)
        assert "2 of 2 questions and 7 of 7 candidates left" in printed
        assert "3 of these candidates carry a grade from the golden set, which `ragmetrics pool` counted as " \
               "judged; they are asked again, blind" in printed
    finally:
        code, printed, err = cli.stop(signal.SIGINT)
        cli.kill()
    assert code == 0
