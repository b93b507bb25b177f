"""HTTP servers for client tests. ``serve``: a JSON server on 127.0.0.1 where each request goes to
``app(method, path, body)``, which returns ``(status, body)`` or ``(status, body, headers)`` (a dict or
list is sent as JSON, a string as text). ``serving``: any ``socketserver`` server run in a thread."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from socketserver import BaseServer
from typing import Any

App = Callable[[str, str, Any], "tuple[int, Any] | tuple[int, Any, dict[str, str]]"]


class _Handler(BaseHTTPRequestHandler):
    app: App

    def _handle(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        self.server.headers_seen.append(dict(self.headers))  # type: ignore[attr-defined]
        status, body, *headers = self.app(method, self.path, json.loads(raw) if raw else None)
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain" if isinstance(body, str) else "application/json")
        for name, value in (headers[0] if headers else {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802
        self._handle("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._handle("POST")

    def log_message(self, *args: Any) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # socketserver's 5 refuses connections when a client opens dozens at once

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that timed out closed the socket before the (late) answer was written


@contextmanager
def serve(app: App) -> Iterator[tuple[str, list[dict[str, str]]]]:
    """(base URL, the headers of every request received) while the server runs."""
    handler = type("Handler", (_Handler,), {"app": staticmethod(app)})
    server = _Server(("127.0.0.1", 0), handler)
    server.headers_seen = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", server.headers_seen  # type: ignore[attr-defined]
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def serving(server: BaseServer) -> Iterator[str]:
    """Run ``server`` in a thread; yield its base URL; shut it down after."""
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"  # type: ignore[attr-defined]
    finally:
        server.shutdown()
        server.server_close()
