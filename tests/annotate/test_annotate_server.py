"""The annotation server over real HTTP on a free port: fixed routes, token, origin, host, CSP."""

from __future__ import annotations

import http.client
import json
import re
import socket
import time
from collections.abc import Callable
from typing import Any

import pytest

from pytest_ragmetrics.annotate import Task
from pytest_ragmetrics.annotate.server import TOKEN_HEADER


def request(server: Any, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None,
            host: str | None = None) -> tuple[int, dict[str, str], bytes]:
    """One request with the path sent exactly as given (no normalisation on the way)."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
    conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
    conn.putheader("Host", f"127.0.0.1:{server.port}" if host is None else host)
    for name, value in (headers or {}).items():
        conn.putheader(name, value)
    if data is not None:
        conn.putheader("Content-Length", str(len(data)))
    conn.endheaders(data)
    response = conn.getresponse()
    result = response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    conn.close()
    return result


def judge(server: Any, payload: Any, **headers: str) -> tuple[int, dict[str, str], bytes]:
    base = {"Content-Type": "application/json", TOKEN_HEADER: server.token,
            "Origin": f"http://127.0.0.1:{server.port}"}
    base.update({k.replace("_", "-"): v for k, v in headers.items()})
    return request(server, "POST", "/api/judge", payload, {k: v for k, v in base.items() if v is not None})


GRADE = {"qid": "q1", "doc_id": "a", "rel": 2, "note": "steps"}


@pytest.fixture
def server(make_task: Callable[..., Task], serve: Callable[[Task], Any]) -> Any:
    return serve(make_task())


def test_the_page_carries_a_token_and_a_policy_that_forbids_the_network(server: Any) -> None:
    status, headers, body = request(server, "GET", "/")
    page = body.decode()
    assert status == 200 and headers["content-type"].startswith("text/html")
    assert f'<meta name="ragmetrics-token" content="{server.token}">' in page
    csp = headers["content-security-policy"]
    assert "default-src 'self'" in csp and "unsafe" not in csp and "connect-src 'self'" in csp
    assert headers["x-content-type-options"] == "nosniff" and headers["cache-control"] == "no-store"
    assert not re.search(r"(src|href)\s*=\s*[\"']?(https?:)?//", page)
    for route, kind in (("/app.js", "text/javascript"), ("/app.css", "text/css"), ("/favicon.svg", "image/svg+xml")):
        status, headers, asset = request(server, "GET", route)
        assert status == 200 and headers["content-type"].startswith(kind)
        assert b"https://" not in asset and b"http://" not in asset.replace(b"http://www.w3.org/2000/svg", b"")
    js = request(server, "GET", "/app.js")[2].decode()
    assert "innerHTML" not in js and "insertAdjacentHTML" not in js and "document.write" not in js
    assert "eval(" not in js and "new Function" not in js


def test_each_server_start_has_its_own_token(make_task: Callable[..., Task], serve: Callable[[Task], Any]) -> None:
    assert serve(make_task()).token != serve(make_task("bob")).token


def test_state_and_question_api(server: Any) -> None:
    status, _, body = request(server, "GET", "/api/state")
    state = json.loads(body)
    assert status == 200 and state["mode"] == "annotate" and state["annotator"] == "alice"
    assert [q["qid"] for q in state["questions"]] == ["q1", "q2", "q3"] and state["start"] == 0
    status, _, body = request(server, "GET", "/api/question?i=1")
    assert status == 200 and json.loads(body)["qid"] == "q2"
    assert request(server, "HEAD", "/api/state")[0] == 200


def test_a_judgment_is_saved_before_the_answer(server: Any) -> None:
    status, _, body = judge(server, GRADE)
    assert status == 200 and json.loads(body)["progress"]["judged"] == 1
    assert '"rel": 2' in server.task.store.path.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    "headers",
    [
        {TOKEN_HEADER: None},
        {TOKEN_HEADER: "wrong"},
        {TOKEN_HEADER: ""},
        {TOKEN_HEADER: "é"},
    ],
    ids=["no-token", "wrong-token", "empty-token", "non-ascii-token"],
)
def test_writes_without_the_pages_token_are_refused(server: Any, headers: dict[str, Any]) -> None:
    status, _, body = judge(server, GRADE, **headers)
    assert status == 403 and "token" in json.loads(body)["error"]
    assert not server.task.store.path.exists()


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "http://evil.example"},
        {"Origin": "null"},
        {"Origin": "http://127.0.0.1:1"},  # another port is another origin
        {"Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "same-site"},
    ],
)
def test_writes_from_another_origin_are_refused_even_with_the_token(server: Any, headers: dict[str, str]) -> None:
    status, _, _ = judge(server, GRADE, **headers)
    assert status == 403
    assert not server.task.store.path.exists()


@pytest.mark.parametrize("host", ["evil.example", "evil.example:80", "127.0.0.1", "127.0.0.1:1", ""])
def test_a_foreign_host_gets_neither_page_nor_token(server: Any, host: str) -> None:
    status, _, body = request(server, "GET", "/", host=host)
    assert status == 403 and server.token.encode() not in body
    assert request(server, "GET", "/api/state", host=host)[0] == 403
    status, _, _ = request(server, "POST", "/api/judge", GRADE, {"Content-Type": "application/json",
                                                                 TOKEN_HEADER: server.token}, host=host)
    assert status == 403


def test_localhost_by_name_is_the_same_server(server: Any) -> None:
    assert request(server, "GET", "/", host=f"localhost:{server.port}")[0] == 200


@pytest.mark.parametrize(
    "path",
    [
        "/index.html", "/api", "/api/", "/api/judge", "/app.js/", "/static/annotate.js", "/annotate.js",
        "/../../../../etc/passwd", "/..%2f..%2f..%2fetc%2fpasswd", "/%2e%2e/%2e%2e/etc/passwd", "//etc/passwd",
        "/app.js/../../pyproject.toml", "/static/../judgments.py", "/.%2e/.%2e/pool.jsonl", "/pool.jsonl",
        "/pool.alice.jsonl", "/api/question?i=99", "/api/question?i=-1", "/api/question?i=../../x",
        "/api/question", "/favicon.ico", "/api/state/../../etc/passwd", "/\\..\\..\\etc\\passwd",
    ],
)
def test_unknown_paths_and_traversal_attempts_are_404(server: Any, path: str) -> None:
    status, _, body = request(server, "GET", path)
    assert status == 404
    assert b"root:" not in body and b"[build-system]" not in body


def test_posts_go_to_one_route_only(server: Any) -> None:
    for path in ("/", "/api/state", "/api/judge/", "/api/judge/../judge"):
        status, _, _ = request(server, "POST", path, GRADE, {"Content-Type": "application/json",
                                                            TOKEN_HEADER: server.token})
        assert status == 404, path
    assert not server.task.store.path.exists()


def test_malformed_writes_are_refused_with_the_reason(server: Any) -> None:
    assert judge(server, GRADE, Content_Type="text/plain")[0] == 415
    assert judge(server, b"{not json")[0] == 400
    assert judge(server, b"\xff\xfe")[0] == 400
    status, _, body = judge(server, {**GRADE, "rel": 9})
    assert status == 400 and "a grade is one of" in json.loads(body)["error"]
    assert judge(server, {**GRADE, "note": "x" * 70_000})[0] == 413
    assert not server.task.store.path.exists()


@pytest.mark.parametrize("kind", ["application/jsonx", "application/json-patch+json", "application/json garbage",
                                  "text/plain; x=application/json"])
def test_a_media_type_that_only_starts_like_json_is_refused(server: Any, kind: str) -> None:
    status, _, body = judge(server, GRADE, Content_Type=kind)
    assert status == 415 and json.loads(body)["error"] == "send application/json"
    assert not server.task.store.path.exists()


@pytest.mark.parametrize("kind", ["application/json", "application/json; charset=utf-8",
                                  "Application/JSON;charset=UTF-8"])
def test_json_with_parameters_is_accepted(server: Any, kind: str) -> None:
    assert judge(server, GRADE, Content_Type=kind)[0] == 200


def test_a_body_shorter_than_its_content_length_is_dropped_after_the_timeout(
        server: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The handler waited for the rest of the body forever, holding a thread per such client."""
    from pytest_ragmetrics.annotate.server import AnnotateServer

    assert 0 < AnnotateServer.request_timeout <= 30
    monkeypatch.setattr(server, "request_timeout", 0.5)
    body = json.dumps(GRADE).encode()
    head = (f"POST /api/judge HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nContent-Type: application/json\r\n"
            f"{TOKEN_HEADER}: {server.token}\r\nContent-Length: {len(body) + 100}\r\n\r\n").encode()
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(head + body)  # 100 bytes short, and nothing more comes
        started = time.monotonic()
        try:
            answer = sock.recv(65536)
        except (TimeoutError, socket.timeout):
            pytest.fail("the server still held the connection after 10 s")
        except ConnectionResetError:
            answer = b""
        assert answer == b"" and time.monotonic() - started < 5  # closed, without an answer
    assert not server.task.store.path.exists()
    assert judge(server, GRADE)[0] == 200  # and the server serves the next request


def test_a_file_changed_under_the_server_is_a_conflict_not_an_overwrite(server: Any) -> None:
    assert judge(server, GRADE)[0] == 200
    path = server.task.store.path
    edited = path.read_text(encoding="utf-8").replace('"note": "steps"', '"note": "edited by hand"')
    path.write_text(edited, encoding="utf-8")
    status, _, body = judge(server, {**GRADE, "doc_id": "b", "rel": 0})
    assert status == 409 and "changed by another program" in json.loads(body)["error"]
    assert path.read_text(encoding="utf-8") == edited


def test_the_page_assets_ship_as_package_data() -> None:
    import fnmatch
    import tomllib
    from pathlib import Path

    import pytest_ragmetrics.annotate as annotate

    root = Path(__file__).resolve().parents[2]
    globs = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"][
        "pytest_ragmetrics"]
    static = Path(annotate.__file__).parent / "static"
    files = sorted(p.relative_to(static.parent.parent).as_posix() for p in static.iterdir())
    assert files and all(any(fnmatch.fnmatch(f, g) for g in globs) for f in files), (files, globs)


def test_every_grade_is_dated_and_export_keeps_the_dates(server: Any, tmp_path: Any) -> None:
    """A grade saved through the page carries judged_at (today, UTC); `ragmetrics export --yaml-out`
    keeps it, so the golden set it joins can age its labels."""
    import datetime as dt

    import yaml

    from pytest_ragmetrics.cli import main
    from pytest_ragmetrics.golden import load_golden

    today = dt.datetime.now(dt.timezone.utc).date()
    assert judge(server, GRADE)[0] == 200
    assert judge(server, {"qid": "q1", "doc_id": "b", "rel": 0})[0] == 200
    path = server.task.store.path
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert [c["judged_at"] for c in lines[1]["candidates"]] == [today.isoformat()] * 2
    golden = load_golden(path)  # the annotator's file is a golden set, its dates read per judgment
    assert golden["q1"].judgment_dates() == {"a": today, "b": today}
    out = tmp_path / "exported.yaml"
    assert main(["export", "--golden", str(path), "--yaml-out", str(out)]) == 0
    exported = yaml.safe_load(out.read_text(encoding="utf-8"))["queries"]  # judgments are pooled
    assert exported[0]["judged_at"] == today  # one date for the whole record: kept on the record
    assert load_golden(out)["q1"].judgment_dates() == {"a": today, "b": today}
