"""Client for a Search-R1 style retrieval server (``POST /retrieve``), with pooling and retries.

Any failure (after retries) raises ``RetrieverError``; a failed search never looks like an empty one.
"""

from __future__ import annotations

import email.utils
import math
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import requests
from requests.adapters import HTTPAdapter
from urllib3.exceptions import MaxRetryError

from mempo_env.retrieval.base import Hit, RetrieverError
from mempo_env.types import Document

if TYPE_CHECKING:
    from typing_extensions import Self


def _retrieve_url(url: str) -> str:
    """Accept a server base URL or the full ``.../retrieve`` endpoint."""
    url = url.rstrip("/")
    return url if url.endswith("/retrieve") else f"{url}/retrieve"


def _parse_document(raw: Any) -> Document:
    """A wire document: ``{"id", "title", "text"}`` (preferred, exact) or Search-R1's ``{"id", "contents"}``."""
    if not isinstance(raw, dict) or "id" not in raw:
        raise ValueError(f"document is not an object with an 'id': {raw!r:.200}")
    doc_id = raw["id"]
    if isinstance(doc_id, bool) or not isinstance(doc_id, (str, int)) or doc_id == "":
        raise ValueError(f"document 'id' must be a non-empty string or an integer, got {doc_id!r:.80}")
    if isinstance(raw.get("title"), str) and isinstance(raw.get("text"), str):
        return Document(id=str(doc_id), title=raw["title"], text=raw["text"])
    if isinstance(raw.get("contents"), str):
        return Document.from_contents(str(doc_id), raw["contents"])
    raise ValueError(f"document {doc_id!r} has neither 'title'/'text' nor 'contents'")


def _parse_hit(raw: Any) -> Hit:
    """``{"document": doc, "score": s}``; a bare document (``return_scores`` off) or missing score gives NaN."""
    if isinstance(raw, dict) and "document" in raw:
        score = raw.get("score")
        return Hit(_parse_document(raw["document"]), math.nan if score is None else float(score))
    return Hit(_parse_document(raw), math.nan)


def _parse_response(body: Any, num_queries: int, topk: int) -> list[list[Hit]]:
    """Validate a ``{"result": [[hit, ...], ...]}`` body: one list per query, trimmed to ``topk``.
    An id may recur (one document found by two queries) only for the same document: the environment
    shows and opens documents by id."""
    result = body.get("result") if isinstance(body, dict) else None
    if not isinstance(result, list) or not all(isinstance(hits, list) for hits in result):
        raise ValueError(f"expected {{'result': [[hit, ...], ...]}}, got {body!r:.200}")
    if len(result) != num_queries:
        raise ValueError(f"got {len(result)} result lists for {num_queries} queries")
    parsed = [[_parse_hit(h) for h in hits[:topk]] for hits in result]
    by_id: dict[str, Document] = {}
    for hit in (h for hits in parsed for h in hits):
        if by_id.setdefault(hit.document.id, hit.document) != hit.document:
            raise ValueError(f"document id {hit.document.id!r} names two different documents")
    return parsed


def _retry_after(response: requests.Response) -> float | None:
    """The seconds a ``Retry-After`` header asks for (a number or an HTTP date); None when absent or unreadable."""
    value = response.headers.get("Retry-After", "").strip()
    if value.isascii() and value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:  # HTTP dates are GMT
        when = when.replace(tzinfo=timezone.utc)
    return max((when - datetime.now(timezone.utc)).total_seconds(), 0.0)


def _is_seconds(value: Any, *, positive: bool = False) -> bool:
    """A real number of seconds, >= 0 (> 0 when ``positive``)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and (value > 0 if positive else value >= 0)


def _reason(e: requests.RequestException) -> str:
    """The underlying cause, without requests' "Max retries exceeded" wrapper (the client retries itself)."""
    cause = e.args[0] if e.args else e
    return repr(cause.reason if isinstance(cause, MaxRetryError) else e)


class RemoteRetriever:
    """Search through a Search-R1 compatible server.

    Connection errors, timeouts, 5xx and 429 answers are retried (POST included: a search has no
    side effects), ``attempts`` tries in all. Between tries the client pauses ``backoff``, 2 x
    ``backoff``, 4 x ``backoff``, ... or what the server's ``Retry-After`` asks, never more than
    ``max_wait`` seconds: a server asking for longer fails the search at once. ``timeout`` is seconds
    per try, one number or (connect, read). So one search blocks at most about
    ``attempts x (connect + read) + (attempts - 1) x max_wait`` seconds; 5 x 65 + 4 x 5 with the defaults.
    ``pool_size`` bounds the kept-alive connections, so parallel environments reuse sockets.
    """

    def __init__(
        self,
        url: str,
        *,
        timeout: float | Sequence[float] = (5.0, 60.0),
        attempts: int = 5,
        backoff: float = 0.5,
        max_wait: float = 5.0,
        pool_size: int = 16,
    ) -> None:
        if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
            raise ValueError(f"attempts must be an integer >= 1, got {attempts!r}")
        parts = list(timeout) if isinstance(timeout, (list, tuple)) else [timeout]
        if not (len(parts) in (1, 2) and all(_is_seconds(t, positive=True) for t in parts)):
            raise ValueError(f"timeout must be a positive number of seconds or a (connect, read) pair, got {timeout!r}")
        for name, value in (("backoff", backoff), ("max_wait", max_wait)):
            if not _is_seconds(value):
                raise ValueError(f"{name} must be a number >= 0, got {value!r}")
        self.url = _retrieve_url(url)
        self.timeout = tuple(parts) if len(parts) == 2 else parts[0]
        self.attempts, self.backoff, self.max_wait = attempts, backoff, max_wait
        self._session = requests.Session()
        adapter = HTTPAdapter(pool_connections=1, pool_maxsize=pool_size)
        self._session.mount("http://", adapter)
        self._session.mount("https://", adapter)

    def search(self, queries: list[str], topk: int) -> list[list[Hit]]:
        """All queries in one request; raises ``RetrieverError`` on any transport or format failure."""
        if topk < 1:
            raise ValueError(f"topk must be >= 1, got {topk}")
        queries = list(queries)
        if not queries:
            return []
        response = self._post({"queries": queries, "topk": topk, "return_scores": True})
        try:
            return _parse_response(response.json(), len(queries), topk)
        except (ValueError, TypeError) as e:  # ValueError includes JSONDecodeError
            raise RetrieverError(f"retrieval server {self.url} sent a malformed response: {e}") from e

    def _post(self, payload: dict[str, Any]) -> requests.Response:
        """The first successful answer within ``attempts`` tries (see the class docstring)."""
        for attempt in range(1, self.attempts + 1):
            wait = None
            try:
                response = self._session.post(self.url, json=payload, timeout=self.timeout)
            except (requests.ConnectionError, requests.Timeout) as e:
                failure = _reason(e)
            except requests.RequestException as e:  # e.g. an invalid URL: retrying cannot help
                raise RetrieverError(f"retrieval request to {self.url} failed: {_reason(e)}") from e
            else:
                if response.ok:
                    return response
                failure = f"HTTP {response.status_code} {response.text[:200]}".rstrip()
                if response.status_code < 500 and response.status_code != 429:
                    raise RetrieverError(f"retrieval request to {self.url} was rejected: {failure}")
                wait = _retry_after(response)
            if attempt == self.attempts:
                break
            if wait is not None and wait > self.max_wait:
                raise RetrieverError(
                    f"retrieval server {self.url} answered {failure} and asked to wait {wait:.0f} s (Retry-After), "
                    f"more than max_wait={self.max_wait:g} s"
                )
            time.sleep(min(self.backoff * 2 ** (attempt - 1), self.max_wait) if wait is None else wait)
        raise RetrieverError(f"retrieval request to {self.url} failed after {self.attempts} attempt(s): {failure}")

    def close(self) -> None:
        self._session.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
