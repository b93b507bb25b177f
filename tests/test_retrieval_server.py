"""The retrieval server at scale: requests merged into scoring batches, limits, replicas, worker processes.

Search-R1-shaped traffic is hundreds of rollouts each sending a few queries at once; the server must
score them together, refuse what it cannot take with a clear answer, and the client must spread
and fail over across replicas without ever turning a failure into an empty hit list.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import requests

from mempo_env.retrieval import make_retriever, remote
from mempo_env.retrieval.base import Hit, RetrieverError
from mempo_env.retrieval.bm25 import BM25Retriever
from mempo_env.retrieval.fingerprint import HEADER
from mempo_env.retrieval.index import BM25Index, build_index
from mempo_env.retrieval.remote import RemoteRetriever
from mempo_env.retrieval.server import Batcher, make_server, start_server
from mempo_env.tasks import make_generated_task
from tests.fake_server import serve, serving

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
    """A Search-R1 server (FastAPI, no /health) answering every query with document ``name``."""
    def app(method: str, path: str, body: dict):
        if method == "GET":
            return 404, {"detail": "Not Found"}
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
        if method == "GET":  # no /health, as Search-R1's server
            return 404, {"detail": "Not Found"}
        counts["bad"] = counts.get("bad", 0) + 1
        return 413, {"error": "too big"}

    with serve(reject) as (bad, _), serve(answer("good", counts)) as (good, _):
        with pytest.raises(RetrieverError, match="rejected the request: HTTP 413"):
            RemoteRetriever([bad, good]).search(["q"], 1)
    assert counts == {"bad": 1}


def test_replicas_serving_different_corpora_are_refused_naming_both(index_dir: Path, tmp_path: Path) -> None:
    other = BM25Index(build_index(enumerate(CORPUS[:-1], 1), tmp_path / "other"))  # one passage fewer
    right = BM25Index(index_dir)
    assert right.fingerprint != other.fingerprint
    with serving(make_server(right, "127.0.0.1", 0)) as a, serving(make_server(other, "127.0.0.1", 0)) as b:
        with RemoteRetriever(f"{a},{b}", attempts=1) as client:
            for _ in range(2):  # refused before any answer is used, and again while they disagree
                with pytest.raises(RetrieverError) as failure:
                    client.search(QUERIES[:1], 3)
                assert str(failure.value) == (
                    f"retrieval replicas serve different indexes: {b}/retrieve serves index fingerprint "
                    f"{other.fingerprint}, {a}/retrieve serves {right.fingerprint}; point the retriever at "
                    "replicas of one index")


def test_replicas_of_one_corpus_agree_whether_built_by_the_index_command_or_the_cache(
        index_dir: Path, local: BM25Retriever) -> None:
    index = BM25Index(index_dir)
    assert index.fingerprint == local.fingerprint
    with serving(make_server(index, "127.0.0.1", 0)) as a, serving(make_server(local, "127.0.0.1", 0)) as b:
        health = requests.get(f"{a}/health", timeout=5)
        assert health.json() == {"status": "ok", "fingerprint": index.fingerprint}
        with RemoteRetriever(f"{a},{b}", attempts=1) as client:
            for _ in range(4):
                assert ids(client.search(QUERIES[:2], 3)) == ids(local.search(QUERIES[:2], 3))


def test_a_replica_that_comes_back_serving_another_index_is_refused_at_its_first_answer() -> None:
    """Down (here: no /health) when the client first asked; its first answer states another index."""
    counts: dict[str, int] = {}

    def stating(fingerprint: str):
        app = answer(fingerprint, counts)
        return lambda method, path, body: (*app(method, path, body), {HEADER: fingerprint})

    with serve(stating("one")) as (a, _), serve(stating("two")) as (b, _):
        with RemoteRetriever(f"{a},{b}", attempts=1) as client:
            assert ids(client.search(["q"], 1)) == [["one"]]
            with pytest.raises(RetrieverError, match=f"{b}/retrieve serves index fingerprint two, {a}/retrieve "
                                                     "serves one"):
                client.search(["q"], 1)


def test_a_server_whose_index_changes_during_a_run_is_refused() -> None:
    stated = ["one"]

    def app(method: str, path: str, body: dict):
        hit = {"document": {"id": "d", "title": "d", "text": "x"}, "score": 1.0}
        return 200, {"result": [[hit] for _ in body["queries"]]}, {HEADER: stated[0]}

    with serve(app) as (url, _), RemoteRetriever(url, attempts=1) as client:
        client.search(["q"], 1)
        stated[0] = "two"  # rebuilt and restarted on the same port
        with pytest.raises(RetrieverError) as failure:
            client.search(["q"], 1)
    assert str(failure.value) == (f"retrieval server {url}/retrieve now serves index fingerprint two, not one as "
                                  "before: its index changed during this run")


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
def test_cli_serves_an_index_from_worker_processes_and_stops_when_one_dies(index_dir: Path, local: BM25Retriever,
                                                                          tmp_path: Path) -> None:
    with start_server(["--index", str(index_dir), "--workers", "2", "--threads", "1"], tmp_path / "log") as server:
        assert "2 worker(s)" in server.log.read_text()
        with RemoteRetriever(server.url, attempts=2, backoff=0.0, timeout=(1.0, 5.0)) as client:
            with ThreadPoolExecutor(8) as pool:
                got = list(pool.map(lambda q: client.search([q], 3)[0], QUERIES[:16]))
            assert ids(got) == ids(local.search(QUERIES[:16], 3))
            wait_until(lambda: len(children(server.proc.pid)) == 2)
            os.kill(children(server.proc.pid)[0], signal.SIGKILL)
            assert server.proc.wait(10) == 1  # a lost worker stops the server, loudly...
            with pytest.raises(RetrieverError, match="unreachable"):
                client.search(QUERIES[:1], 3)  # ...and the client says so, never "no hits"
        assert "ended (exit code -9); stopping the others" in server.log.read_text()
        assert not children(server.proc.pid)


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds the workers through /proc")
def test_a_terminated_cli_server_takes_its_workers_with_it(index_dir: Path, tmp_path: Path) -> None:
    with start_server(["--index", str(index_dir), "--workers", "2"], tmp_path / "log") as server:
        wait_until(lambda: len(children(server.proc.pid)) == 2)
        workers = children(server.proc.pid)
        assert server.stop() == 0
        assert not [pid for pid in workers if Path(f"/proc/{pid}").exists()]


def alive(pid: int) -> bool:
    """Running: a process that has ended but is not yet reaped (a zombie) serves nothing."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds the workers through /proc")
def test_a_killed_cli_server_takes_its_workers_with_it_and_the_port_can_be_reused(index_dir: Path,
                                                                                  tmp_path: Path) -> None:
    """kill -9 (or the OOM killer) gives the server no chance to stop its workers: they must die by
    themselves, or they go on answering on the port from an index that may have been rebuilt."""
    log = tmp_path / "server.log"
    with start_server(["--index", str(index_dir), "--workers", "2", "--threads", "1"], log) as server:
        wait_until(lambda: len(children(server.proc.pid)) == 2)
        workers = children(server.proc.pid)
        os.kill(server.proc.pid, signal.SIGKILL)
        assert server.proc.wait(30) == -signal.SIGKILL
        try:
            wait_until(lambda: not any(alive(pid) for pid in workers), timeout=30)
        finally:  # a failure must not leave them serving
            for pid in filter(alive, workers):
                os.kill(pid, signal.SIGKILL)
    port = int(server.url.rsplit(":", 1)[1])
    with start_server(["--index", str(index_dir), "--workers", "2", "--threads", "1"], log, port=port) as again:
        assert again.url == server.url and again.fingerprint == BM25Index(index_dir).fingerprint
        with RemoteRetriever(again.url, attempts=1) as client:
            assert len(client.search(QUERIES[:1], 3)[0]) == 3
    assert not any(alive(pid) for pid in children(again.proc.pid))


ORPHAN = """
import ctypes, os, time
def no_libc(*args, **kwargs):
    raise OSError("no libc")
ctypes.CDLL = no_libc  # as on a system without prctl
from mempo_env.retrieval.server import _die_with
parent = os.getpid()
pid = os.fork()
if pid == 0:
    _die_with(parent)
    time.sleep(300)
    os._exit(0)
print(pid, flush=True)
time.sleep(300)
"""


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds the worker through /proc")
def test_without_prctl_a_worker_notices_that_its_parent_was_killed() -> None:
    """The fallback where the kernel cannot be asked: the worker watches who its parent is."""
    with subprocess.Popen([sys.executable, "-c", ORPHAN], stdout=subprocess.PIPE, text=True, cwd=ROOT) as proc:
        worker = int(proc.stdout.readline())
        try:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(30)
            wait_until(lambda: not alive(worker), timeout=30)
        finally:
            if alive(worker):
                os.kill(worker, signal.SIGKILL)


def test_cli_on_a_busy_port_says_so_in_one_line(index_dir: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = subprocess.run([sys.executable, "-m", "mempo_env.retrieval.server", "--index", str(index_dir),
                               "--port", str(port)], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1] == (f"error: cannot listen on 127.0.0.1:{port}: Address already in use "
                                            "(another server holds it: stop it or choose another --port)")


def test_start_server_names_a_program_that_ends_and_shows_its_log(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="ended with exit code 1") as failure:
        start_server(["--index", str(tmp_path)], tmp_path / "server.log", timeout=120)
    assert "is not a MemSearchQA BM25 index" in str(failure.value)


def test_cli_verify_opens_the_index_with_verification(index_dir: Path, tmp_path: Path) -> None:
    """Postings that name a document past the corpus keep every size right, so only a full read finds
    them: ``--verify`` has the server do that read before it serves."""
    damaged = tmp_path / "damaged"
    shutil.copytree(index_dir, damaged)
    postings = np.load(damaged / "postings.npy")
    postings[0] = len(CORPUS)
    np.save(damaged / "postings.npy", postings)
    BM25Index(damaged)  # the checks of every open pass
    cmd = [sys.executable, "-m", "mempo_env.retrieval.server", "--port", "0", "--verify"]
    refused = subprocess.run([*cmd, "--index", str(damaged)], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert refused.stderr.splitlines()[-1].startswith(f"error: {damaged}") and "damaged" in refused.stderr
    misused = subprocess.run([*cmd, "--corpus", "c.jsonl"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert misused.returncode == 2 and "--verify checks an index folder: use it with --index" in misused.stderr


def test_cli_refuses_a_folder_that_is_not_an_index(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "mempo_env.retrieval.server", "--index", str(tmp_path)],
                          capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.returncode != 0 and "is not a MemSearchQA BM25 index" in done.stderr
