"""The retrieval server against hostile or damaged input, over real sockets on 127.0.0.1: requests
that lie about their size or never finish, JSON nested past the decoder's depth, and a passage
whose text no UTF-8 encoder takes (a lone surrogate). Each gets a clear answer or a closed
connection within a bounded time, and the server goes on answering everyone else."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from mempo_env.retrieval.index import BM25Index, build_index
from mempo_env.retrieval.remote import RemoteRetriever
from mempo_env.retrieval.server import RetrievalServer, make_server
from mempo_env.tasks import make_generated_task
from mempo_env.types import Document
from tests.fake_server import serving

CORPUS = make_generated_task("train").corpus
TIMEOUT = 1.0  # the server's silence limit in these tests
WAIT = 30.0  # how long a test waits for an answer that must come (bounded, not a timing assertion)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RetrievalServer, str]]:
    index = BM25Index(build_index(enumerate(CORPUS, 1), tmp_path_factory.mktemp("index") / "generated"))
    server = make_server(index, "127.0.0.1", 0, request_timeout=TIMEOUT)
    with serving(server) as url:
        yield server, url


def exchange(url: str, raw: bytes) -> tuple[int | None, bytes, bool]:
    """Send ``raw`` on a fresh connection and read until the server closes it or has been silent for
    ``WAIT`` seconds: (the status of the first answer, or None; everything read; whether it closed)."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=WAIT) as sock:
        sock.sendall(raw)
        data, closed = b"", False
        try:
            while chunk := sock.recv(65536):
                data += chunk
            closed = True
        except TimeoutError:
            pass
    status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/1.1 ") else None
    return status, data, closed


def post(body: bytes, headers: str) -> bytes:
    return f"POST /retrieve HTTP/1.1\r\nHost: x\r\n{headers}\r\n".encode() + body


GOOD = json.dumps({"queries": ["x"], "topk": 1}).encode()


@pytest.mark.parametrize("headers", [
    "Content-Length: -1\r\n",  # read as "until the end of the stream", which never came
    "Content-Length: abc\r\n",
    "Content-Length: 1_0\r\n",  # int() reads it; HTTP does not
    "",  # none
    f"Content-Length: {len(GOOD)}\r\nContent-Length: 5\r\n",  # two that disagree
    "Transfer-Encoding: chunked\r\n",
], ids=["negative", "not-a-number", "underscore", "missing", "twice", "chunked"])
def test_a_request_without_one_valid_content_length_gets_a_400_and_a_closed_connection(server, headers) -> None:
    _, url = server
    status, data, closed = exchange(url, post(GOOD, headers))  # the connection stays open on our side
    assert status == 400 and b"Content-Length" in data and closed, data


def test_a_body_shorter_than_declared_is_timed_out_and_the_connection_closed(server) -> None:
    _, url = server
    status, data, closed = exchange(url, post(GOOD[:5], f"Content-Length: {len(GOOD)}\r\n"))
    assert status == 408 and b"stopped arriving" in data and closed, data


def test_a_silent_connection_is_closed(server) -> None:
    _, url = server
    status, data, closed = exchange(url, b"")
    assert (status, data, closed) == (None, b"", True)


def test_json_nested_past_the_decoders_depth_gets_a_400(server) -> None:
    _, url = server
    body = b"[" * 100_000 + b"]" * 100_000
    status, data, _ = exchange(url, post(body, f"Content-Length: {len(body)}\r\nConnection: close\r\n"))
    assert status == 400 and b"nests too deeply" in data, data


def test_the_server_still_answers_after_the_hostile_requests(server) -> None:
    srv, url = server
    for headers in ("Content-Length: -1\r\n", f"Content-Length: {len(GOOD) + 10}\r\n"):
        exchange(url, post(GOOD, headers))
    with RemoteRetriever(url, attempts=1, timeout=(5.0, WAIT)) as client:
        assert len(client.search(["x"], 1)) == 1


def test_a_passage_with_a_lone_surrogate_is_served_as_in_process(tmp_path: Path) -> None:
    """A JSON ``"\\udc80"`` escape in a corpus is a lone surrogate in a Python string: indexed and
    searched in-process, it has no UTF-8 form, and the reply used to fail to encode and drop the
    connection, so the client reported the server unreachable. Escaped JSON carries it exactly."""
    bad = json.loads('{"id": "bad", "title": "Surrogate", "text": "zebrafish broken \\udc80 byte"}')
    docs = [*CORPUS[:50], Document(**bad)]
    index = BM25Index(build_index(enumerate(docs, 1), tmp_path / "index"))
    queries = ["zebrafish", "Surrogate byte", CORPUS[0].title]
    local = index.search(queries, 3)
    assert local[0][0].document.text == "zebrafish broken \udc80 byte"
    with serving(make_server(index, "127.0.0.1", 0)) as url, RemoteRetriever(url, attempts=1) as client:
        served = client.search(queries, 3)
    assert [[h.document for h in hits] for hits in served] == [[h.document for h in hits] for hits in local]
    assert [[h.score for h in hits] for hits in served] == [[h.score for h in hits] for hits in local]
