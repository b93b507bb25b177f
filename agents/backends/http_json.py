"""A small JSON-over-HTTP client for inference servers: pooled connections, the project's capped retry
loop (``mempo_env.http_retry``, shared with the retriever client), a bound on parallel requests, and
errors that name the server.

Shared by the OpenAI-compatible agent and the vLLM and SGLang server backends.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import requests
from requests.adapters import HTTPAdapter

from mempo_env.http_retry import RetryPolicy, request

T = TypeVar("T")
R = TypeVar("R")


class ServerError(RuntimeError):
    """An inference server was unreachable, timed out, or refused a request (after any retries)."""


class JSONClient:
    """POST/GET JSON to ``base_url``; ``map`` runs a function over items, ``concurrency`` at a time.

    ``timeout`` ((connect, read) seconds), ``attempts``, ``backoff`` and ``max_wait`` are the retry loop's
    knobs (``mempo_env.http_retry.RetryPolicy``). ``what`` names the server in errors ("vLLM server", ...).
    """

    def __init__(self, base_url: str, *, what: str = "server", timeout: tuple[float, float] = (5.0, 300.0),
                 attempts: int = 4, backoff: float = 0.5, max_wait: float = 5.0, concurrency: int = 8,
                 headers: dict[str, str] | None = None) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        self.retry = RetryPolicy(attempts, backoff, max_wait, timeout)
        self.base_url = base_url.rstrip("/")
        self.what = what
        self.concurrency = concurrency
        adapter = HTTPAdapter(pool_connections=1, pool_maxsize=concurrency)
        self._session = requests.Session()
        self._session.mount("http://", adapter)
        self._session.mount("https://", adapter)
        self._session.headers.update(headers or {})

    def url(self, path: str) -> str:
        return f"{self.base_url}/{path.lstrip('/')}"

    def post(self, path: str, payload: Any) -> Any:
        return self._request("POST", path, payload)

    def get(self, path: str) -> Any:
        return self._request("GET", path, None)

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
        """``[fn(x) for x in items]`` with up to ``concurrency`` calls in flight; the first error propagates."""
        items = list(items)
        if len(items) <= 1 or self.concurrency == 1:
            return [fn(x) for x in items]
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(items))) as pool:
            return list(pool.map(fn, items))

    def _request(self, method: str, path: str, payload: Any) -> Any:
        response = request(self._session, method, self.url(path), payload, self.retry, what=self.what,
                           error=ServerError)
        if not response.content:
            return None
        try:
            return response.json()
        except ValueError:  # plain-text answers (e.g. SGLang's /flush_cache)
            return response.text

    def close(self) -> None:
        self._session.close()
