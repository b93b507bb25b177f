"""The one retry loop (mempo_env/http_retry.py) through both HTTP clients that use it, the retriever
client and the inference-server client, against real local servers: the same knobs (attempts,
backoff, max_wait, timeout), a Retry-After capped at max_wait, connection refused, timeouts, a
4xx not retried, and one clear error after the last attempt, the client still usable after it."""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Callable
from typing import Any

import pytest
from fake_server import serve

from agents.backends.http_json import JSONClient, ServerError
from mempo_env.retrieval.base import RetrieverError
from mempo_env.retrieval.remote import RemoteRetriever

OK = {"result": [[{"id": "1", "title": "T", "text": "x"}]]}  # a valid answer for both clients


def search(url: str, **knobs: Any) -> Any:
    with RemoteRetriever(url, **knobs) as client:
        return client.search(["q"], topk=1)


def complete(url: str, **knobs: Any) -> Any:
    client = JSONClient(url, what="vLLM server", **knobs)
    try:
        return client.post("/v1/completions", {"prompt": "q"})
    finally:
        client.close()


# (one request through the client, the error it raises, what its errors call the server, the path)
CLIENTS = {
    "retriever": (search, RetrieverError, "retrieval server", "/retrieve"),
    "inference": (complete, ServerError, "vLLM server", "/v1/completions"),
}


@pytest.fixture(params=list(CLIENTS))
def client(request: pytest.FixtureRequest) -> tuple[Callable[..., Any], type[Exception], str, str]:
    return CLIENTS[request.param]


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Every ``time.sleep`` in the process (the loop's, or a library's that honours Retry-After on its
    own), recorded instead of slept."""
    recorded: list[float] = []
    monkeypatch.setattr(time, "sleep", recorded.append)
    return recorded


class Server:
    """Answers with ``answers[n]`` for request ``n`` (the last one from then on); counts requests."""

    def __init__(self, *answers: tuple, delay: float = 0.0) -> None:
        self.answers, self.delay, self.paths = list(answers), delay, []

    def __call__(self, method: str, path: str, body: Any) -> tuple:
        self.paths.append(path)
        if self.delay:  # not under the ``sleeps`` fixture
            time.sleep(self.delay)
        return self.answers[min(len(self.paths), len(self.answers)) - 1]


def free_port_url() -> str:
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


@pytest.mark.parametrize("status", [429, 500, 503])
def test_retries_429_and_5xx_with_doubling_backoff_then_succeeds(client, sleeps, status: int) -> None:
    call, _, _, _ = client
    server = Server((status, "busy"), (status, "busy"), (200, OK))
    with serve(server) as (url, _):
        assert call(url, attempts=3, backoff=0.25) is not None
    assert len(server.paths) == 3 and sleeps == [0.25, 0.5]


@pytest.mark.parametrize("status", [429, 503])
@pytest.mark.parametrize("retry_after", ["3600", "Wed, 21 Oct 2099 07:28:00 GMT"])
def test_a_huge_retry_after_fails_at_once_without_waiting(client, sleeps, status: int, retry_after: str) -> None:
    call, error, what, path = client
    server = Server((status, "overloaded", {"Retry-After": retry_after}))
    with serve(server) as (url, _), pytest.raises(error) as failure:
        call(url, attempts=4, max_wait=5)
    assert re.fullmatch(rf"{what} at {url}{path} answered HTTP {status} overloaded and asked to wait \d+ s "
                        r"\(Retry-After\), more than max_wait=5 s", str(failure.value))
    assert len(server.paths) == 1 and sleeps == []


def test_a_short_retry_after_is_waited_and_the_backoff_capped_at_max_wait(client, sleeps) -> None:
    call, _, _, _ = client
    server = Server((503, "busy", {"Retry-After": "2"}), (500, "boom"), (500, "boom"), (200, OK))
    with serve(server) as (url, _):
        call(url, attempts=4, backoff=10.0, max_wait=3.0)
    assert len(server.paths) == 4 and sleeps == [2.0, 3.0, 3.0]  # backoff 20 s and 40 s capped at max_wait


def test_the_last_answer_is_the_error_and_the_client_works_when_the_server_is_back(client, sleeps) -> None:
    call, error, what, path = client
    server = Server(*[(500, "boom")] * 3, (200, OK))
    with serve(server) as (url, _):
        with pytest.raises(error, match=re.escape(f"{what} at {url}{path} failed after 3 attempt(s): HTTP 500 boom")):
            call(url, attempts=3, backoff=0.0)
        assert call(url, attempts=3, backoff=0.0) is not None  # nothing is left broken
    assert len(server.paths) == 4


def test_a_4xx_is_not_retried_and_names_the_servers_message(client, sleeps) -> None:
    call, error, what, path = client
    server = Server((422, '{"detail": "bad request"}'))
    with serve(server) as (url, _), pytest.raises(error, match=re.escape(
            f"{what} at {url}{path} rejected the request: HTTP 422 " + '{"detail": "bad request"}')):
        call(url, attempts=5)
    assert len(server.paths) == 1 and sleeps == []


def test_connection_refused_is_retried_then_named(client, sleeps) -> None:
    call, error, what, path = client
    url = free_port_url()
    with pytest.raises(error, match=re.escape(f"{what} at {url}{path} failed after 3 attempt(s): unreachable (")
                       + r".*is it running and is the URL right\?"):
        call(url, attempts=3, backoff=0.1)
    assert sleeps == [0.1, 0.2]


def test_a_read_timeout_is_retried_then_named(client) -> None:
    call, error, what, path = client
    server = Server((200, OK), delay=0.5)
    with serve(server) as (url, _), pytest.raises(error, match=re.escape(
            f"{what} at {url}{path} failed after 2 attempt(s): no answer within 0.05 s (read timeout)")):
        call(url, attempts=2, backoff=0.0, timeout=(1.0, 0.05))
    assert len(server.paths) == 2


@pytest.mark.parametrize(("knobs", "message"), [
    ({"attempts": 0}, "attempts must be an integer >= 1, got 0"),
    ({"attempts": 2.5}, "attempts must be an integer >= 1, got 2.5"),
    ({"timeout": "10"}, "timeout must be a positive number of seconds or a (connect, read) pair, got '10'"),
    ({"timeout": (5, 0)}, "timeout must be a positive number of seconds or a (connect, read) pair, got (5, 0)"),
    ({"max_wait": -1}, "max_wait must be a number >= 0, got -1"),
    ({"backoff": "x"}, "backoff must be a number >= 0, got 'x'"),
])
def test_the_knobs_are_validated_alike(client, knobs: dict, message: str) -> None:
    call, _, _, _ = client
    with pytest.raises(ValueError, match=re.escape(message)):
        call("http://127.0.0.1:1", **knobs)
