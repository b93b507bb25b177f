"""Client for a Search-R1 style retrieval server (``POST /retrieve``), with pooling and retries.

Any failure (after retries) raises ``RetrieverError``; a failed search never looks like an empty one.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import requests
from requests.adapters import HTTPAdapter
from urllib3.exceptions import MaxRetryError
from urllib3.util.retry import Retry

from mempo_env.retrieval.base import Hit, RetrieverError
from mempo_env.types import Document

if TYPE_CHECKING:
    from typing_extensions import Self

_RETRY_STATUSES = range(500, 600)  # any 5xx


def _retrieve_url(url: str) -> str:
    """Accept a server base URL or the full ``.../retrieve`` endpoint."""
    url = url.rstrip("/")
    return url if url.endswith("/retrieve") else f"{url}/retrieve"


def _parse_document(raw: Any) -> Document:
    """A wire document: ``{"id", "title", "text"}`` (preferred, exact) or Search-R1's ``{"id", "contents"}``."""
    if not isinstance(raw, dict) or "id" not in raw:
        raise ValueError(f"document is not an object with an 'id': {raw!r:.200}")
    if isinstance(raw.get("title"), str) and isinstance(raw.get("text"), str):
        return Document(id=str(raw["id"]), title=raw["title"], text=raw["text"])
    if isinstance(raw.get("contents"), str):
        return Document.from_contents(str(raw["id"]), raw["contents"])
    raise ValueError(f"document {raw['id']!r} has neither 'title'/'text' nor 'contents'")


def _parse_hit(raw: Any) -> Hit:
    """``{"document": doc, "score": s}``; a bare document (``return_scores`` off) or missing score gives NaN."""
    if isinstance(raw, dict) and "document" in raw:
        score = raw.get("score")
        return Hit(_parse_document(raw["document"]), math.nan if score is None else float(score))
    return Hit(_parse_document(raw), math.nan)


def _parse_response(body: Any, num_queries: int, topk: int) -> list[list[Hit]]:
    """Validate a ``{"result": [[hit, ...], ...]}`` body: one list per query, trimmed to ``topk``."""
    result = body.get("result") if isinstance(body, dict) else None
    if not isinstance(result, list) or not all(isinstance(hits, list) for hits in result):
        raise ValueError(f"expected {{'result': [[hit, ...], ...]}}, got {body!r:.200}")
    if len(result) != num_queries:
        raise ValueError(f"got {len(result)} result lists for {num_queries} queries")
    return [[_parse_hit(h) for h in hits[:topk]] for hits in result]


class RemoteRetriever:
    """Search through a Search-R1 compatible server.

    Connection errors, read timeouts and 5xx answers are retried (POST included: a search has no
    side effects) with exponential backoff, ``attempts`` tries in all; sleeps between tries are
    0, 2*backoff, 4*backoff, ... (urllib3's schedule). ``timeout`` is (connect, read) seconds.
    ``pool_size`` bounds the kept-alive connections, so parallel environments reuse sockets.
    """

    def __init__(
        self,
        url: str,
        *,
        timeout: tuple[float, float] = (5.0, 60.0),
        attempts: int = 5,
        backoff: float = 0.5,
        pool_size: int = 16,
    ) -> None:
        if attempts < 1:
            raise ValueError(f"attempts must be >= 1, got {attempts}")
        self.url = _retrieve_url(url)
        self.timeout = timeout
        self.attempts = attempts
        retry = Retry(
            total=attempts - 1,
            backoff_factor=backoff,
            status_forcelist=_RETRY_STATUSES,
            allowed_methods=None,  # retry POST too
            raise_on_status=True,  # exhausted 5xx retries raise instead of returning the last 5xx
        )
        self._session = requests.Session()
        adapter = HTTPAdapter(pool_connections=1, pool_maxsize=pool_size, max_retries=retry)
        self._session.mount("http://", adapter)
        self._session.mount("https://", adapter)

    def search(self, queries: list[str], topk: int) -> list[list[Hit]]:
        """All queries in one request; raises ``RetrieverError`` on any transport or format failure."""
        if topk < 1:
            raise ValueError(f"topk must be >= 1, got {topk}")
        queries = list(queries)
        if not queries:
            return []
        payload = {"queries": queries, "topk": topk, "return_scores": True}
        try:
            response = self._session.post(self.url, json=payload, timeout=self.timeout)
            response.raise_for_status()
        except requests.RequestException as e:
            raise RetrieverError(self._describe_failure(e)) from e
        try:
            return _parse_response(response.json(), len(queries), topk)
        except (ValueError, TypeError) as e:  # ValueError includes JSONDecodeError
            raise RetrieverError(f"retrieval server {self.url} sent a malformed response: {e}") from e

    def _describe_failure(self, e: requests.RequestException) -> str:
        cause = e.args[0] if e.args else e
        if isinstance(cause, MaxRetryError):  # retries exhausted: name the underlying reason
            return f"retrieval request to {self.url} failed after {self.attempts} attempt(s): {cause.reason!r}"
        if isinstance(e, requests.HTTPError):  # a non-retryable status such as 4xx
            body = e.response.text[:200] if e.response is not None else ""
            return f"retrieval request to {self.url} was rejected: {e} {body}".rstrip()
        return f"retrieval request to {self.url} failed: {e!r}"

    def close(self) -> None:
        self._session.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
