"""The retrieval server at scale: requests merged into scoring batches, limits, replicas, worker processes.

Search-R1-shaped traffic is hundreds of rollouts each sending a few queries at once; the server must
score them together, refuse what it cannot take with a clear answer, and the client must spread
and fail over across replicas without ever turning a failure into an empty hit list.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests

from mempo_env.retrieval import make_retriever, remote
from mempo_env.retrieval.base import Hit, RetrieverError
from mempo_env.retrieval.bm25 import BM25Retriever
from mempo_env.retrieval.index import BM25Index, build_index
from mempo_env.retrieval.remote import RemoteRetriever
from mempo_env.retrieval.server import Batcher, make_server
from mempo_env.tasks import make_generated_task
from tests.fake_server import serve, serving, startup_url

ROOT = Path(__file__).resolve().parents[1]
CORPUS = make_generated_task("train").corpus
QUERIES = [f"{d.title} {d.text.split()[0]}" for d in CORPUS[:64]]


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_index(enumerate(CORPUS, 1), tmp_path_factory.mktemp("index") / "generated")


@pytest.fixture(scope="module")
def local() -> BM25Retriever:
    return BM25Retriever(CORPUS, cache_dir=None)


def ids(results: list[list[Hit]]) -> list[list[str]]:
    return [[h.document.id for h in hits] for hits in results]


class Gated:
    """A retriever whose first call waits for ``gate``: the test decides what queues behind it."""

    def __init__(self, inner) -> None:
        self.inner, self.calls, self.entered, self.gate = inner, [], threading.Event(), threading.Event()

    def search(self, queries: list[str], topk: int) -> list[list[Hit]]:
        self.calls.append((len(queries), topk))
        self.entered.set()
        self.gate.wait(10)
        return self.inner.search(queries, topk)


def wait_until(condition, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.001)


# ---------------------------------------------------------------- micro-batching


def test_requests_waiting_together_are_scored_in_one_call_per_topk(local: BM25Retriever) -> None:
    gated = Gated(local)
    batcher = Batcher(gated)
    asks = [(QUERIES[i : i + 3], 1 + i % 2) for i in range(0, 48, 3)]  # 16 requests, topk 1 and 2
    with ThreadPoolExecutor(len(asks)) as pool:
        first = pool.submit(batcher.search, *asks[0])
        assert gated.entered.wait(10)  # the scorer is busy with the first request...
        rest = [pool.submit(batcher.search, *ask) for ask in asks[1:]]
        wait_until(lambda: len(batcher._jobs) == len(asks) - 1)  # ...while the other 15 queue
        gated.gate.set()
        answers = [first.result(10)] + [f.result(10) for f in rest]
    # the 15 queued requests went out as two calls, one per topk, in place of 15
    assert gated.calls == [(3, 1), (3 * 7, 1), (3 * 8, 2)]
    assert (batcher.batches, batcher.queries) == (3, 48)
    for (queries, topk), got in zip(asks, answers):  # each request gets exactly its own answer
        assert ids(got) == ids(local.search(queries, topk))


def test_a_failed_batch_fails_each_of_its_requests_and_the_next_batch_works(local: BM25Retriever) -> None:
    class Flaky:
        calls = 0

        def search(self, queries: list[str], topk: int) -> list[list[Hit]]:
            Flaky.calls += 1
            if Flaky.calls == 1:
                raise OSError("disk went away")
            return local.search(queries, topk)

    batcher = Batcher(Flaky())
    with pytest.raises(OSError, match="disk went away"):
        batcher.search(QUERIES[:2], 3)
    assert ids(batcher.search(QUERIES[:2], 3)) == ids(local.search(QUERIES[:2], 3))


def test_a_retriever_answering_too_few_lists_is_an_error_not_a_short_answer() -> None:
    class Short:
        def search(self, queries: list[str], topk: int) -> list[list[Hit]]:
            return [[]]

    with pytest.raises(RuntimeError, match="answered 1 lists for 2 queries"):
        Batcher(Short()).search(["a", "b"], 1)


def test_concurrent_clients_over_http_get_the_local_rankings(index_dir: Path, local: BM25Retriever) -> None:
    server = make_server(BM25Index(index_dir), "127.0.0.1", 0)
    asks = [QUERIES[i : i + 4] for i in range(0, 64, 4)]
    with serving(server) as url, RemoteRetriever(url, pool_size=16) as client, ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(lambda qs: client.search(qs, 3), asks))
    for queries, got in zip(asks, answers):
        assert ids(got) == ids(local.search(queries, 3))
        assert [[h.document for h in hits] for hits in got] == [[h.document for h in hits]
                                                                for hits in local.search(queries, 3)]
    assert server.batcher.queries == 64 and server.batcher.batches <= len(asks)


# ---------------------------------------------------------------- limits


def test_too_many_queries_or_bytes_are_refused_with_413(local: BM25Retriever) -> None:
    server = make_server(local, "127.0.0.1", 0, max_queries=4, max_bytes=1000)
    with serving(server) as url:
        many = requests.post(f"{url}/retrieve", json={"queries": ["x"] * 5}, timeout=5)
        big = requests.post(f"{url}/retrieve", json={"queries": ["x" * 2000]}, timeout=5)
        fine = requests.post(f"{url}/retrieve", json={"queries": ["x"] * 4}, timeout=5)
    assert many.status_code == 413 and "5 queries exceed this server's limit of 4" in many.json()["error"]
    assert big.status_code == 413 and "exceeds this server's limit of 1000" in big.json()["error"]
    assert fine.status_code == 200 and len(fine.json()["result"]) == 4
    assert server.batcher.queries == 4  # nothing refused was scored


def test_the_client_splits_a_batch_larger_than_max_batch(monkeypatch, local: BM25Retriever) -> None:
    monkeypatch.setattr(remote, "MAX_BATCH", 3)
    server = make_server(local, "127.0.0.1", 0, max_queries=3)
    with serving(server) as url, RemoteRetriever(url) as client:
        got = client.search(QUERIES[:10], 2)
    assert ids(got) == ids(local.search(QUERIES[:10], 2))
    assert server.batcher.batches == 4  # 3 + 3 + 3 + 1


def test_a_megabyte_query_gets_a_bounded_answer(index_dir: Path) -> None:
    query = " ".join(d.text for d in CORPUS)[: 1 << 20]
    server = make_server(BM25Index(index_dir), "127.0.0.1", 0)
    with serving(server) as url, RemoteRetriever(url) as client:
        (hits,) = client.search([query], 3)
    assert len(hits) == 3 and all(h.score > 0 for h in hits)


# ---------------------------------------------------------------- replicas


def answer(name: str, counts: dict[str, int]):
    def app(method: str, path: str, body: dict):
        counts[name] = counts.get(name, 0) + 1
        hit = {"document": {"id": name, "title": name, "text": "x"}, "score": 1.0}
        return 200, {"result": [[hit] for _ in body["queries"]]}
    return app


def dead_url() -> str:
    with serve(lambda *_: (200, {})) as (url, _):
        pass
    return url  # its port is closed now


def test_the_client_spreads_requests_over_replicas() -> None:
    counts: dict[str, int] = {}
    with serve(answer("a", counts)) as (a, _), serve(answer("b", counts)) as (b, _):
        with RemoteRetriever(f"{a},{b}") as client:
            for _ in range(6):
                client.search(["q"], 1)
    assert counts == {"a": 3, "b": 3}


def test_a_dead_replica_hands_its_requests_to_a_live_one_without_backoff() -> None:
    counts: dict[str, int] = {}
    with serve(answer("live", counts)) as (live, _):
        client = RemoteRetriever([dead_url(), live], backoff=30.0, timeout=(1.0, 5.0))
        started = time.monotonic()
        for _ in range(4):
            assert ids(client.search(["q"], 1)) == [["live"]]
        assert time.monotonic() - started < 10  # a backoff would have paused 30 s
    assert counts == {"live": 4}


def test_every_replica_dead_is_an_error_naming_each() -> None:
    one, two = dead_url(), dead_url()
    with pytest.raises(RetrieverError) as failure:
        RemoteRetriever([one, two], attempts=2, backoff=0.0).search(["q"], 1)
    message = str(failure.value)
    assert "failed after 2 attempt(s)" in message
    assert f"{one}/retrieve: unreachable" in message and f"{two}/retrieve: unreachable" in message


def test_a_rejection_is_not_retried_on_another_replica() -> None:
    counts: dict[str, int] = {}

    def reject(method: str, path: str, body: dict):
        counts["bad"] = counts.get("bad", 0) + 1
        return 413, {"error": "too big"}

    with serve(reject) as (bad, _), serve(answer("good", counts)) as (good, _):
        with pytest.raises(RetrieverError, match="rejected the request: HTTP 413"):
            RemoteRetriever([bad, good]).search(["q"], 1)
    assert counts == {"bad": 1}


def test_make_retriever_takes_an_index_folder_and_a_list_of_urls(index_dir: Path, tmp_path: Path) -> None:
    assert isinstance(make_retriever(str(index_dir), []), BM25Index)
    client = make_retriever("http://a:1, http://b:2/retrieve", [])
    assert isinstance(client, RemoteRetriever) and client.urls == ["http://a:1/retrieve", "http://b:2/retrieve"]
    with pytest.raises(ValueError, match="no such folder"):
        make_retriever(str(tmp_path / "missing"), [])


# ---------------------------------------------------------------- the CLI, with worker processes


def children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds the workers through /proc")
def test_cli_serves_an_index_from_worker_processes_and_stops_when_one_dies(index_dir: Path,
                                                                          local: BM25Retriever) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "mempo_env.retrieval.server", "--index", str(index_dir), "--port", "0",
           "--workers", "2", "--threads", "1"]
    with subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env=env) as proc:
        try:
            url, output = startup_url(proc)
            assert "2 worker(s)" in output[-1]
            with RemoteRetriever(url, attempts=2, backoff=0.0, timeout=(1.0, 5.0)) as client:
                with ThreadPoolExecutor(8) as pool:
                    got = list(pool.map(lambda q: client.search([q], 3)[0], QUERIES[:16]))
                assert ids(got) == ids(local.search(QUERIES[:16], 3))
                wait_until(lambda: len(children(proc.pid)) == 2)
                os.kill(children(proc.pid)[0], signal.SIGKILL)
                assert proc.wait(10) == 1  # a lost worker stops the server, loudly...
                with pytest.raises(RetrieverError, match="unreachable"):
                    client.search(QUERIES[:1], 3)  # ...and the client says so, never "no hits"
            assert "ended (exit code -9); stopping the others" in proc.stderr.read()
            assert not children(proc.pid)
        finally:
            proc.kill()


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds the workers through /proc")
def test_a_terminated_cli_server_takes_its_workers_with_it(index_dir: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "mempo_env.retrieval.server", "--index", str(index_dir), "--port", "0",
           "--workers", "2"]
    with subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env=env) as proc:
        try:
            startup_url(proc)
            wait_until(lambda: len(children(proc.pid)) == 2)
            workers = children(proc.pid)
            proc.terminate()
            proc.wait(10)
            assert not [pid for pid in workers if Path(f"/proc/{pid}").exists()]
        finally:
            proc.kill()


def test_cli_refuses_a_folder_that_is_not_an_index(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "mempo_env.retrieval.server", "--index", str(tmp_path)],
                          capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.returncode != 0 and "is not a MemSearchQA BM25 index" in done.stderr
