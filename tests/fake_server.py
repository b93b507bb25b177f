"""A JSON HTTP server on 127.0.0.1 for client tests: each request goes to ``app(method, path, body)``,
which returns ``(status, body)`` (a dict or list is sent as JSON, a string as text)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

App = Callable[[str, str, Any], tuple[int, Any]]


class _Handler(BaseHTTPRequestHandler):
    app: App

    def _handle(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        self.server.headers_seen.append(dict(self.headers))  # type: ignore[attr-defined]
        status, body = self.app(method, self.path, json.loads(raw) if raw else None)
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain" if isinstance(body, str) else "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802
        self._handle("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._handle("POST")

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def serve(app: App) -> Iterator[tuple[str, list[dict[str, str]]]]:
    """(base URL, the headers of every request received) while the server runs."""
    handler = type("Handler", (_Handler,), {"app": staticmethod(app)})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    server.headers_seen = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", server.headers_seen  # type: ignore[attr-defined]
    finally:
        server.shutdown()
        server.server_close()
