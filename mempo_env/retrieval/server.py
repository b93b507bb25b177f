"""A retrieval server speaking Search-R1's ``POST /retrieve`` protocol, backed by BM25.

    python -m mempo_env.retrieval.server --index indexes/wiki18 [--port 8000 --topk 3 --workers N]
    python -m mempo_env.retrieval.server --corpus corpus.jsonl

Request ``{"queries": [...], "topk": k, "return_scores": bool}``; response ``{"result": [[...], ...]}``
with ``{"document": doc, "score": s}`` per hit, or bare ``doc`` when ``return_scores`` is false (as
Search-R1). ``doc`` carries Search-R1's ``id``/``contents`` plus exact ``title``/``text``.

Requests that arrive together are scored together: a ``Batcher`` thread takes every query waiting
when it becomes free (after an optional ``window`` for more to join) and makes one retriever call of
them; each request gets its own slice back. ``--workers N`` (default: the cores) forks N processes
on one listening socket, each with its own batcher and its share of the cores as scoring threads:
HTTP and JSON hold Python's interpreter lock, so processes, not threads, put every core to work
(measured in ``benchmarks.experiments.retrieval_scale.scale``). They share one memory-mapped index through
the page cache.
A request with more than ``max_queries`` queries or ``max_bytes`` of body is refused (413) before
it is scored, an oversized body before it is read; the client splits large batches
(``mempo_env.retrieval.remote.MAX_BATCH``).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from mempo_env.retrieval.base import Hit, Retriever

log = logging.getLogger(__name__)

MAX_QUERIES = 8192
MAX_BYTES = 16 << 20


@dataclass
class _Job:
    queries: list[str]
    topk: int
    done: threading.Event = field(default_factory=threading.Event)
    result: list[list[Hit]] | None = None
    error: BaseException | None = None


class Batcher:
    """Merges the queries of concurrent ``search`` calls into one ``retriever.search`` per ``topk``.

    One thread scores; callers wait for their slice. ``window``: seconds the scorer waits, once a job
    is in, for more to join (0: take what is waiting, so a lone client pays no delay and a busy
    server batches whatever queued during the last batch). ``max_batch``: queries per scoring call
    (a larger request is scored alone). ``batches`` and ``queries`` count the work done."""

    def __init__(self, retriever: Retriever, *, window: float = 0.0, max_batch: int = 4096) -> None:
        self.retriever, self.window, self.max_batch = retriever, window, max_batch
        self.batches = self.queries = 0
        self._jobs: list[_Job] = []
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    def search(self, queries: list[str], topk: int) -> list[list[Hit]]:
        """The retriever's answer to ``queries``, scored with whatever else is waiting."""
        if not queries:
            return []
        job = _Job(list(queries), topk)
        with self._cond:
            if self._thread is None:  # started on first use, so a server can be forked before
                self._thread = threading.Thread(target=self._loop, name="batcher", daemon=True)
                self._thread.start()
            self._jobs.append(job)
            self._cond.notify()
        job.done.wait()
        if job.error is not None:
            raise job.error
        assert job.result is not None
        return job.result

    def _take(self) -> list[_Job]:
        with self._cond:
            while not self._jobs:
                self._cond.wait()
            deadline = time.monotonic() + self.window
            while sum(len(j.queries) for j in self._jobs) < self.max_batch:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            taken, size = [], 0
            while self._jobs and (not taken or size + len(self._jobs[0].queries) <= self.max_batch):
                taken.append(self._jobs.pop(0))
                size += len(taken[-1].queries)
            return taken

    def _loop(self) -> None:
        while True:
            jobs = self._take()
            for topk in sorted({j.topk for j in jobs}):
                group = [j for j in jobs if j.topk == topk]
                queries = [q for j in group for q in j.queries]
                try:
                    results = self.retriever.search(queries, topk)
                    if len(results) != len(queries):
                        raise RuntimeError(f"the retriever answered {len(results)} lists for {len(queries)} queries")
                except BaseException as e:  # handed to every waiting request: none may hang
                    for j in group:
                        j.error = e
                else:
                    at = 0
                    for j in group:
                        j.result, at = results[at : at + len(j.queries)], at + len(j.queries)
                self.batches += 1
                self.queries += len(queries)
                for j in group:
                    j.done.set()


def _parse_request(body: Any, default_topk: int) -> tuple[list[str], int, bool]:
    if not isinstance(body, dict):
        raise TypeError("request body must be a JSON object")
    queries = body.get("queries")
    topk = default_topk if body.get("topk") is None else body["topk"]
    if not isinstance(queries, list) or not all(isinstance(q, str) for q in queries):
        raise TypeError("'queries' must be a list of strings")
    if not isinstance(topk, int) or isinstance(topk, bool) or topk < 1:
        raise ValueError("'topk' must be a positive integer")
    return queries, topk, bool(body.get("return_scores", False))


def _hit_json(hit: Hit, with_score: bool) -> dict[str, Any]:
    d = hit.document
    doc = {"id": d.id, "contents": d.contents, "title": d.title, "text": d.text}
    return {"document": doc, "score": hit.score} if with_score else doc


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, so pooled clients reuse connections
    disable_nagle_algorithm = True  # else headers and body, written apart, wait ~40 ms for a delayed ACK
    server: RetrievalServer

    def do_POST(self) -> None:
        if self.path.rstrip("/") != "/retrieve":
            return self._reply(404, {"error": f"unknown path {self.path}; use POST /retrieve"})
        server = self.server
        try:
            size = int(self.headers.get("Content-Length", 0))
            if size > server.max_bytes:
                self.close_connection = True  # the body stays unread
                return self._reply(413, {"error": f"request body of {size} bytes exceeds this server's limit of "
                                                  f"{server.max_bytes}; send fewer or shorter queries per request"})
            body = json.loads(self.rfile.read(size))
            queries, topk, with_scores = _parse_request(body, server.default_topk)
        except (ValueError, TypeError) as e:  # also bad JSON and a bad Content-Length
            return self._reply(400, {"error": str(e)})
        if len(queries) > server.max_queries:
            return self._reply(413, {"error": f"{len(queries)} queries exceed this server's limit of "
                                              f"{server.max_queries} a request; split the batch"})
        try:
            results = server.batcher.search(queries, topk)
        except Exception as e:  # report any search failure to the client as a 5xx, never as no hits
            log.exception("search failed")
            return self._reply(500, {"error": f"search failed: {e!r}"})
        self._reply(200, {"result": [[_hit_json(h, with_scores) for h in hits] for hits in results]})

    def _reply(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload, ensure_ascii=False).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)


class RetrievalServer(ThreadingHTTPServer):
    """Serves one retriever through a ``Batcher``; each connection runs in its own daemon thread."""

    daemon_threads = True
    request_queue_size = 1024  # the listen backlog: hundreds of rollout workers connect at once

    def __init__(self, address: tuple[str, int], retriever: Retriever, default_topk: int, *, window: float = 0.0,
                 max_batch: int = 4096, max_queries: int = MAX_QUERIES, max_bytes: int = MAX_BYTES) -> None:
        super().__init__(address, _Handler)
        self.batcher = Batcher(retriever, window=window, max_batch=max_batch)
        self.default_topk, self.max_queries, self.max_bytes = default_topk, max_queries, max_bytes


def make_server(retriever: Retriever, host: str = "127.0.0.1", port: int = 8000, topk: int = 3,
                **limits: Any) -> RetrievalServer:
    """Bind (port 0 picks a free port; see ``server_address``); call ``serve_forever()`` to serve.
    ``limits``: ``window``, ``max_batch``, ``max_queries``, ``max_bytes`` (see ``RetrievalServer``)."""
    return RetrievalServer((host, port), retriever, topk, **limits)


def _interrupt(*_: Any) -> None:
    raise KeyboardInterrupt


def serve(server: RetrievalServer, workers: int = 1) -> None:
    """Serve until interrupted, in this process or in ``workers`` forked ones sharing the socket (and
    the memory-mapped index, through the page cache). A worker that dies stops them all: a server that
    silently lost capacity would look healthy."""
    if workers <= 1:
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
        return
    children = []
    for _ in range(workers):
        pid = os.fork()
        if pid == 0:  # a worker: serve until the parent terminates it
            signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            try:
                server.serve_forever()
            finally:
                os._exit(1)
        children.append(pid)
    signal.signal(signal.SIGTERM, _interrupt)  # a terminated server must not leave its workers serving
    try:
        pid, status = os.wait()
        log.error("worker %d ended (exit code %d); stopping the others", pid, os.waitstatus_to_exitcode(status))
        raise SystemExit(1)
    except KeyboardInterrupt:
        pass
    finally:
        for pid in children:
            try:
                os.kill(pid, signal.SIGTERM)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        server.server_close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m mempo_env.retrieval.server", description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--corpus", help="JSONL or parquet of {id,title,text} or {id,contents} (indexed, and cached)")
    source.add_argument("--index", help="a folder written by python -m mempo_env.retrieval.index (memory-mapped)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--topk", type=int, default=3, help="used when a request omits topk")
    parser.add_argument("--workers", type=int, default=0,
                        help="server processes on the one socket (default: the cores)")
    parser.add_argument("--threads", type=int, default=0,
                        help="scoring threads per worker, --index only (default: the cores over the workers)")
    parser.add_argument("--window", type=float, default=0.0,
                        help="seconds a batch waits for more requests to join (default 0: none)")
    parser.add_argument("--max-queries", type=int, default=MAX_QUERIES, help="queries a request may hold")
    parser.add_argument("--max-bytes", type=int, default=MAX_BYTES, help="bytes a request body may hold")
    args = parser.parse_args(argv)
    cores = os.cpu_count() or 1
    workers = args.workers or cores

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    logging.getLogger("bm25s").setLevel(logging.WARNING)  # it logs its internals at DEBUG
    retriever: Retriever
    if args.index:
        from mempo_env.retrieval.index import BM25Index, BM25IndexError

        try:
            retriever = index = BM25Index(args.index, threads=args.threads or max(1, cores // workers))
        except BM25IndexError as e:
            raise SystemExit(f"error: {e}") from None
        what = f"{len(index):,} passages of the index {args.index}"
    else:
        from mempo_env.retrieval.bm25 import BM25Retriever
        from mempo_env.tasks.loaders import load_corpus

        bm25 = BM25Retriever(load_corpus(args.corpus))
        retriever = bm25
        what = f"{len(bm25.corpus):,} documents (index {'loaded from cache' if bm25.loaded_from_cache else 'built'})"
    server = make_server(retriever, args.host, args.port, args.topk, window=args.window,
                         max_queries=args.max_queries, max_bytes=args.max_bytes)
    host, port = server.server_address[:2]
    log.info("serving %s on http://%s:%d/retrieve (%d worker(s))", what, host, port, workers)
    serve(server, workers)


if __name__ == "__main__":
    main()
