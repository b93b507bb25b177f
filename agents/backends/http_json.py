"""A small JSON-over-HTTP client for inference servers: pooled connections, retries with backoff,
a bound on parallel requests, and errors that name the server.

Shared by the OpenAI-compatible agent and the vLLM and SGLang server backends. Retried: connection
errors, read timeouts, 429 and 5xx (POST included: generation, scoring and a weight reload from
a folder can all be repeated safely). Anything else fails at once with the server's own message.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import requests
from requests.adapters import HTTPAdapter
from urllib3.exceptions import MaxRetryError, ReadTimeoutError, ResponseError
from urllib3.util.retry import Retry

T = TypeVar("T")
R = TypeVar("R")

_RETRY_STATUSES = (429, 500, 502, 503, 504)


class ServerError(RuntimeError):
    """An inference server was unreachable, timed out, or refused a request (after any retries)."""


class JSONClient:
    """POST/GET JSON to ``base_url``; ``map`` runs a function over items, ``concurrency`` at a time.

    ``timeout`` is (connect, read) seconds; ``attempts`` tries in all, sleeping 0, 2*backoff,
    4*backoff, ... between them (urllib3's schedule, honouring a server's ``Retry-After``).
    ``what`` names the server in errors ("vLLM server", "SGLang server", ...).
    """

    def __init__(self, base_url: str, *, what: str = "server", timeout: tuple[float, float] = (5.0, 300.0),
                 attempts: int = 4, backoff: float = 0.5, concurrency: int = 8,
                 headers: dict[str, str] | None = None) -> None:
        if attempts < 1 or concurrency < 1:
            raise ValueError(f"attempts and concurrency must be >= 1, got {attempts} and {concurrency}")
        self.base_url = base_url.rstrip("/")
        self.what = what
        self.timeout = timeout
        self.attempts = attempts
        self.concurrency = concurrency
        retry = Retry(total=attempts - 1, backoff_factor=backoff, status_forcelist=_RETRY_STATUSES,
                      allowed_methods=None, raise_on_status=True)
        adapter = HTTPAdapter(pool_connections=1, pool_maxsize=concurrency, max_retries=retry)
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
        url = self.url(path)
        try:
            response = self._session.request(method, url, json=payload, timeout=self.timeout)
            response.raise_for_status()
        except requests.RequestException as e:
            raise ServerError(self._describe(url, e)) from e
        if not response.content:
            return None
        try:
            return response.json()
        except ValueError:  # plain-text answers (e.g. SGLang's /flush_cache)
            return response.text

    def _describe(self, url: str, e: requests.RequestException) -> str:
        cause = e.args[0] if e.args else e
        if isinstance(cause, MaxRetryError):
            reason = cause.reason
            if isinstance(reason, ResponseError):  # 429/5xx every time
                return f"{self.what} at {url} kept failing after {self.attempts} attempt(s): {reason}"
            if isinstance(reason, ReadTimeoutError):
                return (f"{self.what} at {url} did not answer within {self.timeout[1]} s, "
                        f"{self.attempts} attempt(s)")
            return (f"{self.what} at {url} is unreachable after {self.attempts} attempt(s) ({reason!r}); "
                    "is it running and is the URL right?")
        if isinstance(e, requests.HTTPError) and e.response is not None:
            return f"{self.what} at {url} rejected the request: HTTP {e.response.status_code} {e.response.text[:500]}"
        if isinstance(e, requests.Timeout):
            return f"{self.what} at {url} did not answer within {self.timeout[1]} s: {e}"
        if isinstance(e, requests.ConnectionError):
            return f"{self.what} at {url} is unreachable ({e}); is it running and is the URL right?"
        return f"request to {self.what} at {url} failed: {e!r}"

    def close(self) -> None:
        self._session.close()
