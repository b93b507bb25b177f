"""Client for a Search-R1 style retrieval server (``POST /retrieve``), with pooling and retries.

Any failure (after retries) raises ``RetrieverError``; a failed search never looks like an empty one.
Replicas must serve one index: the client compares the fingerprints they state
(``mempo_env.retrieval.fingerprint``) and refuses answers from one that disagrees.
"""

from __future__ import annotations

import itertools
import math
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import requests
from requests.adapters import HTTPAdapter

from mempo_env.http_retry import RetryPolicy, request
from mempo_env.retrieval.base import Hit, RetrieverError
from mempo_env.retrieval.fingerprint import HEADER
from mempo_env.types import Document

if TYPE_CHECKING:
    from typing_extensions import Self

MAX_BATCH = 2048
"""Queries per request: a larger batch is sent as several, so no request outgrows a server's limits
(``mempo_env.retrieval.server`` refuses more than 8192 queries or 16 MiB by default)."""


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


def _retrieve_urls(url: str | Sequence[str]) -> list[str]:
    """One URL, a comma-separated list of them, or a sequence: the replicas of one retrieval service."""
    parts = url.split(",") if isinstance(url, str) else list(url)
    urls = [_retrieve_url(u.strip()) for u in parts if u.strip()]
    if not urls:
        raise ValueError(f"no retrieval server URL in {url!r}")
    return urls


class RemoteRetriever:
    """Search through a Search-R1 compatible server, or through several replicas of one.

    ``url``: one server, or several (a list or a comma-separated string; one retriever per node, as
    Search-R1's multi-node guide runs them): successive requests start at successive replicas, and a
    replica that fails hands the request to the next (``mempo_env.http_retry.request``). A batch of
    more than ``MAX_BATCH`` queries goes out as several requests.

    ``timeout``, ``attempts``, ``backoff`` and ``max_wait`` are the retry loop's knobs
    (``mempo_env.http_retry``: connection errors, timeouts, 5xx and 429 retried, a ``Retry-After`` longer
    than ``max_wait`` fails at once); one search blocks at most about 5 x 65 + 4 x 5 s with the defaults.
    ``pool_size`` bounds the kept-alive connections, so parallel environments reuse sockets.

    Replicas that serve different indexes would hand episodes documents from the wrong corpus without
    a word, so before its first search a client of several asks each what it serves (``GET /health``),
    and every answer states it again (the ``X-Index-Fingerprint`` header): a replica whose fingerprint
    differs from the first one recorded is refused with a ``RetrieverError`` naming both URLs and
    both fingerprints, whenever it is first heard from (one that was down at first and comes back
    included). So is a server whose index changes while the client uses it: one run searches one
    corpus. A server that states no fingerprint (Search-R1's own) cannot be checked and is used as is.
    """

    def __init__(
        self,
        url: str | Sequence[str],
        *,
        timeout: float | Sequence[float] = (5.0, 60.0),
        attempts: int = 5,
        backoff: float = 0.5,
        max_wait: float = 5.0,
        pool_size: int = 16,
    ) -> None:
        self.urls = _retrieve_urls(url)
        self._next = itertools.count()  # the replica the next request starts at (next() is atomic)
        self.retry = RetryPolicy(attempts, backoff, max_wait, timeout)
        self._session = requests.Session()
        adapter = HTTPAdapter(pool_connections=1, pool_maxsize=pool_size)
        self._session.mount("http://", adapter)
        self._session.mount("https://", adapter)
        self._lock = threading.Lock()
        self._reference: tuple[str, str] | None = None  # (replica URL, fingerprint) the others must match
        self._asked = len(self.urls) == 1  # whether every replica has been asked (one cannot disagree)

    def search(self, queries: list[str], topk: int) -> list[list[Hit]]:
        """All queries in one request; raises ``RetrieverError`` on any transport or format failure,
        and on replicas that serve different indexes."""
        if topk < 1:
            raise ValueError(f"topk must be >= 1, got {topk}")
        if not self._asked:
            self._ask_replicas()
        queries = list(queries)
        parts = (queries[at : at + MAX_BATCH] for at in range(0, len(queries), MAX_BATCH))
        return [hits for part in parts for hits in self._post(part, topk)]

    def _post(self, queries: list[str], topk: int) -> list[list[Hit]]:
        if not queries:
            return []
        response = request(self._session, "POST", self.urls, {"queries": queries, "topk": topk, "return_scores": True},
                           self.retry, what="retrieval server", error=RetrieverError, start=next(self._next))
        self._admit(response.url, response.headers.get(HEADER))
        try:
            return _parse_response(response.json(), len(queries), topk)
        except (ValueError, TypeError) as e:  # ValueError includes JSONDecodeError
            raise RetrieverError(f"retrieval server {response.url} sent a malformed response: {e}") from e

    def _ask_replicas(self) -> None:
        """Each replica's fingerprint, from ``GET /health`` (one try each: a replica that is down now
        is checked by its first answer instead; one without ``/health`` states nothing)."""
        with self._lock:
            if self._asked:
                return
            for url in self.urls:
                try:
                    answer = self._session.get(url.removesuffix("/retrieve") + "/health", timeout=self.retry.timeout)
                    stated = answer.json().get("fingerprint") if answer.ok else None
                except (requests.RequestException, ValueError, AttributeError):
                    continue  # down, or not this project's server (AttributeError: JSON that is not an object)
                self._check(url, stated)
            self._asked = True

    def _admit(self, url: str, stated: str | None) -> None:
        with self._lock:
            self._check(url, stated)

    def _check(self, url: str, stated: Any) -> None:
        """Record the first fingerprint heard; refuse a replica that states another one."""
        if not isinstance(stated, str) or not stated:
            return
        if self._reference is None:
            self._reference = (url, stated)
        elif stated != self._reference[1]:
            first, expected = self._reference
            if url == first:  # one server whose index was replaced while this client used it
                raise RetrieverError(f"retrieval server {url} now serves index fingerprint {stated}, not {expected} "
                                     "as before: its index changed during this run")
            raise RetrieverError(f"retrieval replicas serve different indexes: {url} serves index fingerprint "
                                 f"{stated}, {first} serves {expected}; point the retriever at replicas of one index")

    def close(self) -> None:
        self._session.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
