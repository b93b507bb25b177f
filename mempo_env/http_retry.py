"""The one retry loop of the project's HTTP clients: the Search-R1 retriever client
(``retrieval.remote``) and the inference-server client (``agents.backends.http_json``).

Retried: connection errors, timeouts, 429 and 5xx (POST included: a search, a generation, a scoring
call and a weight reload from a folder can all be repeated). Between tries the client pauses
``backoff``, 2 x ``backoff``, 4 x ``backoff``, ... or what the server's ``Retry-After`` asks, never more
than ``max_wait`` seconds: a server asking for longer fails the request at once, so no header can
stall a client. Anything else (a 4xx, an invalid URL) fails at once. Every failure is one error of
the caller's type naming the server, the URL and the last answer; nothing is turned into an empty one.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import requests
from urllib3.exceptions import MaxRetryError


def _is_seconds(value: Any, *, positive: bool = False) -> bool:
    """A real number of seconds, >= 0 (> 0 when ``positive``)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and (value > 0 if positive else value >= 0)


@dataclass(frozen=True)
class RetryPolicy:
    """``attempts`` tries in all; pauses of ``backoff`` doubling, capped at ``max_wait`` (see the module
    docstring); ``timeout`` seconds per try, one number or (connect, read). One request blocks at most
    about ``attempts x (connect + read) + (attempts - 1) x max_wait`` seconds."""

    attempts: int = 4
    backoff: float = 0.5
    max_wait: float = 5.0
    timeout: float | tuple[float, float] = (5.0, 60.0)

    def __post_init__(self) -> None:
        if isinstance(self.attempts, bool) or not isinstance(self.attempts, int) or self.attempts < 1:
            raise ValueError(f"attempts must be an integer >= 1, got {self.attempts!r}")
        parts = list(self.timeout) if isinstance(self.timeout, (list, tuple)) else [self.timeout]
        if not (len(parts) in (1, 2) and all(_is_seconds(t, positive=True) for t in parts)):
            raise ValueError(
                f"timeout must be a positive number of seconds or a (connect, read) pair, got {self.timeout!r}")
        for name in ("backoff", "max_wait"):
            if not _is_seconds(getattr(self, name)):
                raise ValueError(f"{name} must be a number >= 0, got {getattr(self, name)!r}")
        object.__setattr__(self, "timeout", tuple(parts) if len(parts) == 2 else parts[0])

    def pause(self, attempt: int) -> float:
        """The backoff after failed try ``attempt`` (1-based), capped at ``max_wait``."""
        return min(self.backoff * 2 ** (attempt - 1), self.max_wait)


def retry_after(response: requests.Response) -> float | None:
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


def _reason(e: requests.RequestException) -> str:
    """The underlying cause, without requests' "Max retries exceeded" wrapper (the loop retries itself)."""
    cause = e.args[0] if e.args else e
    return repr(cause.reason if isinstance(cause, MaxRetryError) else e)


def _transport_failure(e: requests.RequestException, policy: RetryPolicy) -> str:
    connect, read = policy.timeout if isinstance(policy.timeout, tuple) else (policy.timeout, policy.timeout)
    if isinstance(e, requests.ConnectTimeout):
        return f"no connection within {connect:g} s (connect timeout)"
    if isinstance(e, requests.Timeout):
        return f"no answer within {read:g} s (read timeout)"
    return f"unreachable ({_reason(e)}); is it running and is the URL right?"


def request(session: requests.Session, method: str, url: str | Sequence[str], payload: Any, policy: RetryPolicy, *,
            what: str, error: type[Exception], start: int = 0) -> requests.Response:
    """The first successful answer to ``method url`` (JSON ``payload``, or none) within the policy's tries;
    otherwise ``error`` with a message naming ``what`` (e.g. "vLLM server") and ``url``.

    Several URLs are replicas of one service (one retriever per node): each try goes round them,
    from replica ``start`` on, until one answers, and the pause comes only once all have failed, so a
    dead replica costs a failed connection, not a backoff. A rejection (4xx) fails at once: the same
    request would be rejected anywhere."""
    urls = [url] if isinstance(url, str) else list(url)
    if not urls:
        raise ValueError(f"no URL to reach the {what} at")
    urls = urls[start % len(urls):] + urls[: start % len(urls)]
    failures: dict[str, str] = {}
    for attempt in range(1, policy.attempts + 1):
        wait = None
        for where in urls:
            try:
                response = session.request(method, where, json=payload, timeout=policy.timeout)
            except (requests.ConnectionError, requests.Timeout) as e:
                failures[where] = _transport_failure(e, policy)
                continue
            except requests.RequestException as e:  # e.g. an invalid URL: retrying cannot help
                raise error(f"request to {what} at {where} failed: {_reason(e)}") from e
            if response.ok:
                return response
            failures[where] = f"HTTP {response.status_code} {response.text[:500]}".rstrip()
            if response.status_code < 500 and response.status_code != 429:
                raise error(f"{what} at {where} rejected the request: {failures[where]}")
            asked = retry_after(response)
            wait = asked if wait is None or asked is None else min(wait, asked)
        if attempt == policy.attempts:
            break
        if wait is not None and wait > policy.max_wait:
            raise error(f"{what} at {_where(urls)} answered {_failure(failures)} and asked to wait {wait:.0f} s "
                        f"(Retry-After), more than max_wait={policy.max_wait:g} s")
        time.sleep(policy.pause(attempt) if wait is None else wait)
    raise error(f"{what} at {_where(urls)} failed after {policy.attempts} attempt(s): {_failure(failures)}")


def _where(urls: list[str]) -> str:
    return urls[0] if len(urls) == 1 else "any of " + ", ".join(sorted(urls))


def _failure(failures: dict[str, str]) -> str:
    """The last answer, or each replica's last answer."""
    if len(failures) == 1:
        return next(iter(failures.values()))
    return "; ".join(f"{url}: {failure}" for url, failure in sorted(failures.items()))
