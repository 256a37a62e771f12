"""The annotation page's HTTP server: fixed routes over a :class:`~.task.Task`, loopback only.

Routes (anything else is 404; nothing is ever served from a path on disk):

- ``GET /``: the page, with a token made for this server start;
- ``GET /app.js``, ``/app.css``, ``/favicon.svg``: the page's assets, shipped as package data;
- ``GET /api/state``, ``GET /api/question?i=N``: the task as JSON;
- ``POST /api/judge``: one judgment, saved before the answer is sent.

The server listens on 127.0.0.1 only. Every request must name this server as its
``Host`` (a page on another site that rebinds its name to 127.0.0.1 gets 403, not
the token). A POST also needs the page's token in ``X-Ragmetrics-Token``, and is
refused when its ``Origin`` or ``Sec-Fetch-Site`` says it comes from another site.
Every answer carries a Content-Security-Policy that allows only this server's own
script, style and API: the page fetches nothing from the network.
"""

from __future__ import annotations

import hmac
import json
import secrets
import sys
from html import escape
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, urlsplit

from pytest_ragmetrics.annotate.judgments import FileChangedError
from pytest_ragmetrics.annotate.task import Task
from pytest_ragmetrics.errors import RagMetricsError
from pytest_ragmetrics.files import loads_json

__all__ = ["CSP", "TOKEN_HEADER", "AnnotateServer"]

TOKEN_HEADER = "X-Ragmetrics-Token"
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
       "object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Cache-Control": "no-store",
}
_ASSETS = {
    "/app.js": ("annotate.js", "text/javascript; charset=utf-8"),
    "/app.css": ("annotate.css", "text/css; charset=utf-8"),
    "/favicon.svg": ("favicon.svg", "image/svg+xml"),
}
_MAX_BODY = 64 * 1024  # a judgment with its note is well under this


def _asset(name: str) -> bytes:
    return (resources.files("pytest_ragmetrics.annotate") / "static" / name).read_bytes()


class AnnotateServer(ThreadingHTTPServer):
    """A threading HTTP server on 127.0.0.1 serving one task; ``port=0`` picks a free port."""

    daemon_threads = True
    #: Seconds a connection may stall (a body shorter than its Content-Length, an idle
    #: keep-alive) before it is dropped; without a limit such a client held a thread forever.
    request_timeout: float = 10.0

    def __init__(self, task: Task, port: int = 0) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.task = task
        self.token = secrets.token_urlsafe(32)
        self.port = int(self.server_address[1])
        self.hosts = {f"127.0.0.1:{self.port}", f"localhost:{self.port}"}
        self.origins = {f"http://{host}" for host in self.hosts}
        page = _asset("annotate.html").decode("utf-8")
        self.page = page.replace("__TOKEN__", escape(self.token)).encode("utf-8")
        self.assets = {route: (_asset(name), kind) for route, (name, kind) in _ASSETS.items()}

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A browser that closed its tab mid-answer is not an error worth a traceback."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    server: AnnotateServer
    server_version = "ragmetrics-annotate"

    def setup(self) -> None:
        # read by StreamRequestHandler.setup per instance; the stubs declare it a ClassVar
        self.timeout = self.server.request_timeout  # type: ignore[misc]
        super().setup()

    def version_string(self) -> str:
        return self.server_version

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        """Quiet: the terminal shows what the command prints, not one line per click."""

    def end_headers(self) -> None:
        for name, value in _HEADERS.items():
            self.send_header(name, value)
        super().end_headers()

    # ------------------------------------------------------------------ answers

    def _send(self, status: int, body: bytes, kind: str, head: bool = False) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _json(self, status: int, data: Any, head: bool = False) -> None:
        # ASCII escapes: an answer quoting a request's lone surrogate still encodes
        self._send(status, json.dumps(data).encode("ascii"),
                   "application/json; charset=utf-8", head)

    def _refuse(self, status: int, message: str) -> None:
        self._json(status, {"error": message})

    def _host_ok(self) -> bool:
        """A request must name this server: a rebinding attacker's page names its own host."""
        if self.headers.get("Host") not in self.server.hosts:
            self._refuse(HTTPStatus.FORBIDDEN, "this server answers only to its own address")
            return False
        return True

    # ------------------------------------------------------------------ routes

    def do_GET(self) -> None:
        self._get(head=False)

    def do_HEAD(self) -> None:
        self._get(head=True)

    def _get(self, head: bool) -> None:
        if not self._host_ok():
            return
        url = urlsplit(self.path)
        if url.path == "/":
            self._send(HTTPStatus.OK, self.server.page, "text/html; charset=utf-8", head)
        elif url.path in self.server.assets:
            body, kind = self.server.assets[url.path]
            self._send(HTTPStatus.OK, body, kind, head)
        elif url.path == "/api/state":
            self._json(HTTPStatus.OK, self.server.task.state(), head)
        elif url.path == "/api/question":
            raw = parse_qs(url.query).get("i", [""])[0]
            # ASCII digits only, and few: int() refuses "²" and 5,000-digit numbers with a ValueError
            index = int(raw) if raw.isascii() and raw.isdigit() and len(raw) <= 9 else -1
            try:
                self._json(HTTPStatus.OK, self.server.task.question(index), head)
            except KeyError:
                self._refuse(HTTPStatus.NOT_FOUND, f"no question {raw[:20]!r}")
        else:
            self._refuse(HTTPStatus.NOT_FOUND, "not found")

    def do_POST(self) -> None:
        if not self._host_ok():
            return
        if urlsplit(self.path).path != "/api/judge":
            self._refuse(HTTPStatus.NOT_FOUND, "not found")
            return
        origin = self.headers.get("Origin")
        if origin is not None and origin not in self.server.origins:
            self._refuse(HTTPStatus.FORBIDDEN, "cross-origin writes are refused")
            return
        if self.headers.get("Sec-Fetch-Site", "same-origin") not in ("same-origin", "none"):
            self._refuse(HTTPStatus.FORBIDDEN, "cross-site writes are refused")
            return
        token = self.headers.get(TOKEN_HEADER, "")
        if not hmac.compare_digest(token.encode("utf-8", "replace"), self.server.token.encode()):
            self._refuse(HTTPStatus.FORBIDDEN, "missing or wrong token: reload the page")
            return
        # the media type parsed, parameters (charset) aside: a prefix test let "application/jsonx" in
        if self.headers.get_content_type() != "application/json":
            self._refuse(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, "send application/json")
            return
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            self._refuse(HTTPStatus.LENGTH_REQUIRED, "Content-Length required")
            return
        if not 0 <= length <= _MAX_BODY:
            self._refuse(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"a judgment is at most {_MAX_BODY} bytes")
            return
        try:
            payload = loads_json(self.rfile.read(length).decode("utf-8"))
        except (ValueError, RecursionError) as exc:  # not UTF-8, not JSON, a repeated key, nested too deeply
            reason = (f": {exc.msg}" if isinstance(exc, json.JSONDecodeError)
                      else ": nested too deeply" if isinstance(exc, RecursionError) else "")
            self._refuse(HTTPStatus.BAD_REQUEST, f"the body is not JSON{reason}")
            return
        try:  # a lone surrogate ("\ud800") parses, but no file can hold it
            json.dumps(payload, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            self._refuse(HTTPStatus.BAD_REQUEST, "the body holds a lone surrogate (\\ud800-\\udfff), not valid Unicode")
            return
        except RecursionError:
            self._refuse(HTTPStatus.BAD_REQUEST, "the body is not JSON: nested too deeply")
            return
        try:
            result = self.server.task.judge(payload)
        except FileChangedError as exc:
            self._refuse(HTTPStatus.CONFLICT, str(exc))
        except RagMetricsError as exc:
            self._refuse(HTTPStatus.BAD_REQUEST, str(exc))
        except OSError as exc:  # the disk is full, the folder went away: say so, keep serving
            self._refuse(HTTPStatus.INTERNAL_SERVER_ERROR, f"could not save: {exc.strerror or exc}")
        else:
            self._json(HTTPStatus.OK, result)
