"""The OpenEnv server (``mempo_env.openenv_server``) on a free loopback port in a background thread,
for tests that drive it with OpenEnv's own client (tests/test_openenv_server.py; reusable by a soak)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn
from openenv.core.env_server.http_server import HTTPEnvServer

from mempo_env.openenv_server import MemSearchQAClient, create_app


@contextmanager
def running_server(**options: Any) -> Iterator[tuple[str, HTTPEnvServer]]:
    """(base URL, OpenEnv's ``HTTPEnvServer``) of ``create_app(**options)`` while it serves."""
    app = create_app(**options)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))  # a free port, held from here on
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the OpenEnv server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}", app.state.env_server
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


@contextmanager
def openenv_client(**options: Any) -> Iterator[Any]:
    """A connected synchronous ``MemSearchQAClient`` on a server of its own built with ``options``."""
    with running_server(**options) as (url, _), MemSearchQAClient(base_url=url).sync() as client:
        yield client
