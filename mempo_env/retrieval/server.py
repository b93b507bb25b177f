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
(``mempo_env.retrieval.remote.MAX_BATCH``). A request without one valid ``Content-Length``, whose
body ends early, or whose JSON is not a request (nested too deeply included) gets a 400; a
connection that sends nothing for ``timeout`` seconds (``TIMEOUT``, 60) is closed, so no request
holds a handler forever.

``GET /health`` answers ``{"status": "ok", "fingerprint": F}`` and every answer carries the header
``X-Index-Fingerprint: F``: ``F`` names what the index serves (``mempo_env.retrieval.fingerprint``),
so a client of several replicas refuses replicas that serve different indexes. Replies are JSON
with non-ASCII characters escaped: a passage holding a lone surrogate (a JSON ``"\\udc80"`` escape in
the corpus) reaches the client as the same string the in-process index returns. ``--verify`` opens
the index with ``BM25Index(verify=True)``: a damaged one is refused at start, not served.

Forked workers die with the server process, however it dies (``kill -9`` and the OOM killer
included), so no worker goes on answering on the port, from an index that may since have been
rebuilt, for a server that is gone; the port is free for a restart. ``start_server`` runs the
program on a free loopback port and returns once it answers (tests and benchmarks use it).
"""

from __future__ import annotations

import argparse
import errno
import json
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from mempo_env.retrieval.base import Hit, Retriever
from mempo_env.retrieval.fingerprint import HEADER

log = logging.getLogger(__name__)

MAX_QUERIES = 8192
MAX_BYTES = 16 << 20
TIMEOUT = 60.0
"""Seconds a connection may send nothing (while its request line, headers or body are due, or idle
between keep-alive requests) or take no bytes of an answer before it is closed: long enough for a
slow network and for a rollout worker's pause between searches (a client reconnects after one),
short enough that requests which never complete cannot pile up handler threads."""


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


class _Refused(Exception):
    """A request answered with ``status`` and this message, unscored."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, so pooled clients reuse connections
    disable_nagle_algorithm = True  # else headers and body, written apart, wait ~40 ms for a delayed ACK
    server: RetrievalServer

    def setup(self) -> None:
        self.timeout = self.server.request_timeout  # StreamRequestHandler puts it on the socket
        super().setup()

    def do_GET(self) -> None:  # noqa: N802
        if self.path.rstrip("/") != "/health":
            return self._reply(404, {"error": f"unknown path {self.path}; use GET /health or POST /retrieve"})
        self._reply(200, {"status": "ok", "fingerprint": self.server.fingerprint})

    def do_POST(self) -> None:  # noqa: N802
        server = self.server
        try:
            if self.path.rstrip("/") != "/retrieve":
                self.close_connection = True  # its body stays unread
                raise _Refused(404, f"unknown path {self.path}; use POST /retrieve")
            body = json.loads(self._body())
            queries, topk, with_scores = _parse_request(body, server.default_topk)
            if len(queries) > server.max_queries:
                raise _Refused(413, f"{len(queries)} queries exceed this server's limit of {server.max_queries} a "
                                    "request; split the batch")
        except _Refused as e:
            return self._reply(e.status, {"error": str(e)})
        except (ValueError, TypeError) as e:  # also bad JSON
            return self._reply(400, {"error": str(e)})
        except RecursionError:  # json's decoder recurses once per nesting level
            return self._reply(400, {"error": "the request body's JSON nests too deeply"})
        try:
            results = server.batcher.search(queries, topk)
        except Exception as e:  # report any search failure to the client as a 5xx, never as no hits
            log.exception("search failed")
            return self._reply(500, {"error": f"search failed: {e!r}"})
        self._reply(200, {"result": [[_hit_json(h, with_scores) for h in hits] for hits in results]})

    def _body(self) -> bytes:
        """Exactly the ``Content-Length`` bytes of the body. Refused, with the connection closed (what
        follows on it is not a request's start): no single valid length (missing, negative, not a
        number, or two headers), more than ``max_bytes`` (before reading), a body that ends early or
        stalls for ``request_timeout`` seconds."""
        lengths = self.headers.get_all("Content-Length") or []
        if len(lengths) != 1 or not (lengths[0].strip().isascii() and lengths[0].strip().isdigit()):
            self.close_connection = True
            raise _Refused(400, f"a POST needs one Content-Length header giving its body's size in bytes, got "
                                f"{lengths or 'none'}")
        size, limit = int(lengths[0]), self.server.max_bytes
        if size > limit:
            self.close_connection = True
            raise _Refused(413, f"request body of {size} bytes exceeds this server's limit of {limit}; send fewer "
                                "or shorter queries per request")
        try:
            data = self.rfile.read(size)
        except TimeoutError:
            self.close_connection = True
            raise _Refused(408, f"the request body stopped arriving: nothing for {self.timeout:g} s") from None
        if len(data) < size:
            self.close_connection = True
            raise _Refused(400, f"the request body ended after {len(data)} of its {size} bytes")
        return data

    def _reply(self, status: int, payload: dict[str, Any]) -> None:
        # ASCII JSON: a lone surrogate in a passage has no UTF-8 encoding, but it has a JSON escape,
        # which the client decodes to the very string the in-process index returns
        data = json.dumps(payload).encode("ascii")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if self.server.fingerprint is not None:
            self.send_header(HEADER, self.server.fingerprint)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)


class RetrievalServer(ThreadingHTTPServer):
    """Serves one retriever through a ``Batcher``; each connection runs in its own daemon thread.

    ``fingerprint``: what it serves, stated on every answer (default: the retriever's ``fingerprint``
    attribute, which ``BM25Index`` and ``BM25Retriever`` have; None states nothing).
    ``request_timeout``: seconds a connection may stay silent (``TIMEOUT``)."""

    daemon_threads = True
    request_queue_size = 1024  # the listen backlog: hundreds of rollout workers connect at once

    def __init__(self, address: tuple[str, int], retriever: Retriever, default_topk: int, *, window: float = 0.0,
                 max_batch: int = 4096, max_queries: int = MAX_QUERIES, max_bytes: int = MAX_BYTES,
                 request_timeout: float = TIMEOUT, fingerprint: str | None = None) -> None:
        super().__init__(address, _Handler)
        self.batcher = Batcher(retriever, window=window, max_batch=max_batch)
        self.default_topk, self.max_queries, self.max_bytes = default_topk, max_queries, max_bytes
        self.request_timeout = request_timeout
        self.fingerprint = fingerprint if fingerprint is not None else getattr(retriever, "fingerprint", None)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A connection that failed: one line for a client that went away or stalled while being
        answered, the traceback for anything else (socketserver prints every traceback to stderr)."""
        error = sys.exc_info()[1]
        if isinstance(error, OSError):
            log.info("connection from %s dropped: %r", client_address[0], error)
        else:
            log.exception("handling a request from %s failed", client_address[0])


def make_server(retriever: Retriever, host: str = "127.0.0.1", port: int = 8000, topk: int = 3,
                **limits: Any) -> RetrievalServer:
    """Bind (port 0 picks a free port; see ``server_address``); call ``serve_forever()`` to serve.
    ``limits``: ``window``, ``max_batch``, ``max_queries``, ``max_bytes``, ``request_timeout``, and
    ``fingerprint`` (see ``RetrievalServer``)."""
    return RetrievalServer((host, port), retriever, topk, **limits)


def _interrupt(*_: Any) -> None:
    raise KeyboardInterrupt


_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _die_with(parent: int) -> None:
    """In a worker just forked from ``parent``: be killed when ``parent`` dies, however it dies.

    Linux's ``prctl(PR_SET_PDEATHSIG, SIGKILL)`` has the kernel kill the worker the moment its parent
    ends; a parent that died before that call is caught by checking that the worker's parent is still
    ``parent`` (an orphan has been handed to another process). Where prctl is missing (not Linux), a
    thread checks that every second."""
    try:
        import ctypes

        armed = ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
    except (OSError, AttributeError):  # no libc to load, or a libc without prctl
        armed = False
    if os.getppid() != parent:
        os._exit(1)
    if not armed:
        def watch() -> None:
            while os.getppid() == parent:
                time.sleep(1.0)
            os._exit(1)

        threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def serve(server: RetrievalServer, workers: int = 1) -> None:
    """Serve until interrupted, in this process or in ``workers`` forked ones sharing the socket (and
    the memory-mapped index, through the page cache). A worker that dies stops them all: a server that
    silently lost capacity would look healthy. Workers die with this process, even when it is killed
    with no chance to stop them (``_die_with``)."""
    if workers <= 1:
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
        return
    children, parent = [], os.getpid()
    for _ in range(workers):
        pid = os.fork()
        if pid == 0:  # a worker: serve until the parent terminates it or dies
            _die_with(parent)
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
    parser.add_argument("--timeout", type=float, default=TIMEOUT,
                        help=f"seconds a connection may send nothing before it is closed (default {TIMEOUT:g})")
    parser.add_argument("--verify", action="store_true",
                        help="--index only: check the whole index when opening it, not only its sizes (slower start)")
    args = parser.parse_args(argv)
    if args.verify and not args.index:
        parser.error("--verify checks an index folder: use it with --index")
    cores = os.cpu_count() or 1
    workers = args.workers or cores

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    logging.getLogger("bm25s").setLevel(logging.WARNING)  # it logs its internals at DEBUG
    retriever: Retriever
    if args.index:
        from mempo_env.retrieval.index import BM25Index, BM25IndexError

        try:
            retriever = index = BM25Index(args.index, threads=args.threads or max(1, cores // workers),
                                          verify=args.verify)
        except BM25IndexError as e:
            raise SystemExit(f"error: {e}") from None
        what = f"{len(index):,} passages of the index {args.index}"
        if "fingerprint" not in index.meta:
            log.info("%s was built before fingerprints were recorded: computing its fingerprint from its passages",
                     args.index)
    else:
        from mempo_env.retrieval.bm25 import BM25Retriever
        from mempo_env.tasks.loaders import load_corpus

        bm25 = BM25Retriever(load_corpus(args.corpus))
        retriever = bm25
        what = f"{len(bm25.corpus):,} documents (index {'loaded from cache' if bm25.loaded_from_cache else 'built'})"
    try:
        server = make_server(retriever, args.host, args.port, args.topk, window=args.window,
                             max_queries=args.max_queries, max_bytes=args.max_bytes, request_timeout=args.timeout)
    except OSError as e:
        busy = " (another server holds it: stop it or choose another --port)" if e.errno == errno.EADDRINUSE else ""
        raise SystemExit(f"error: cannot listen on {args.host}:{args.port}: {e.strerror or e}{busy}") from None
    host, port = server.server_address[:2]
    log.info("serving %s, fingerprint %s, on http://%s:%d/retrieve (%d worker(s))", what, server.fingerprint, host,
             port, workers)
    serve(server, workers)


@dataclass
class ServerProcess:
    """A retrieval server program started by ``start_server``. ``url``: its base URL (``url + "/retrieve"``
    is the endpoint); ``fingerprint``: what it states it serves; ``log``: the file its stderr goes to."""

    proc: subprocess.Popen[bytes]
    url: str
    fingerprint: str | None
    log: Path

    def stop(self, timeout: float = 30.0) -> int:
        """Terminate it (its workers go with it), kill it if it has not ended within ``timeout`` seconds;
        its exit code."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                return self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        return self.proc.wait()

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_server(args: Sequence[str], log: str | Path, *, port: int = 0, timeout: float = 300.0,
                 env: Mapping[str, str] | None = None) -> ServerProcess:
    """Run ``python -m mempo_env.retrieval.server ARGS --host 127.0.0.1 --port PORT`` (``ARGS``: the
    index or corpus and any other options) with this interpreter and this copy of the package, its
    stderr appended to ``log``; return once it answers ``GET /health``.

    ``port`` 0 (the default) lets the server bind a free port itself, so no other process can take it
    between the choice and the bind; the URL is read from its log. Raises ``RuntimeError`` with the
    log's tail when the program ends or has not answered within ``timeout`` seconds (it is then
    killed)."""
    import urllib.request

    root = str(Path(__file__).resolve().parents[2])  # the folder holding this mempo_env package
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    cmd = [sys.executable, "-m", "mempo_env.retrieval.server", *args, "--host", "127.0.0.1", "--port", str(port)]
    log = Path(log)
    with open(log, "ab") as sink:
        start = sink.tell()  # what an earlier run wrote there is not this one's
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=sink, stderr=sink, env=env)
    deadline, url = time.monotonic() + timeout, None
    while proc.poll() is None and time.monotonic() < deadline:
        if url is None and (found := re.search(rb"(http://127\.0\.0\.1:\d+)/retrieve", log.read_bytes()[start:])):
            url = found.group(1).decode()
        if url is not None:
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=5) as answer:
                    return ServerProcess(proc, url, json.load(answer).get("fingerprint"), log)
            except (OSError, ValueError):  # not answering yet (URLError is an OSError)
                pass
        time.sleep(0.05)
    ended = proc.poll()
    if ended is None:
        proc.kill()
        proc.wait()
    tail = log.read_text(errors="replace")[-3000:]
    state = f"ended with exit code {ended}" if ended is not None else f"did not answer within {timeout:g} s"
    raise RuntimeError(f"the retrieval server ({' '.join(cmd)}) {state}; its log {log} ends:\n{tail}")


if __name__ == "__main__":
    main()
