"""OpenEnv's own client on a server of ``integrations.openenv_server`` (tests/test_openenv_server.py)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from integrations.openenv_server import MemSearchQAClient, serve_in_thread


@contextmanager
def openenv_client(**options: Any) -> Iterator[Any]:
    """A connected synchronous ``MemSearchQAClient`` on a server of its own built with ``options``."""
    with serve_in_thread(**options) as (url, _), MemSearchQAClient(base_url=url).sync() as client:
        yield client
