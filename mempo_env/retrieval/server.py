"""A local retrieval server speaking Search-R1's ``POST /retrieve`` protocol, backed by BM25.

    python -m mempo_env.retrieval.server --corpus corpus.jsonl [--host 127.0.0.1 --port 8000 --topk 3]

Request ``{"queries": [...], "topk": k, "return_scores": bool}``; response ``{"result": [[...], ...]}``
with ``{"document": doc, "score": s}`` per hit, or bare ``doc`` when ``return_scores`` is false (as
Search-R1). ``doc`` carries Search-R1's ``id``/``contents`` plus exact ``title``/``text``.
"""

from __future__ import annotations

import argparse
import json
import logging
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from mempo_env.retrieval.base import Hit, Retriever

log = logging.getLogger(__name__)


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
    server: RetrievalServer

    def do_POST(self) -> None:
        if self.path.rstrip("/") != "/retrieve":
            return self._reply(404, {"error": f"unknown path {self.path}; use POST /retrieve"})
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            queries, topk, with_scores = _parse_request(body, self.server.default_topk)
        except (ValueError, TypeError) as e:  # also bad JSON and a bad Content-Length
            return self._reply(400, {"error": str(e)})
        try:
            results = self.server.retriever.search(queries, topk)
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
    """Serves one retriever; each request runs in its own daemon thread."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], retriever: Retriever, default_topk: int) -> None:
        super().__init__(address, _Handler)
        self.retriever = retriever
        self.default_topk = default_topk


def make_server(retriever: Retriever, host: str = "127.0.0.1", port: int = 8000, topk: int = 3) -> RetrievalServer:
    """Bind (port 0 picks a free port; see ``server_address``); call ``serve_forever()`` to serve."""
    return RetrievalServer((host, port), retriever, topk)


def main(argv: list[str] | None = None) -> None:
    from mempo_env.retrieval.bm25 import BM25Retriever
    from mempo_env.tasks.loaders import load_corpus

    parser = argparse.ArgumentParser(prog="python -m mempo_env.retrieval.server", description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", required=True, help="JSONL or parquet of {id,title,text} or {id,contents}")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--topk", type=int, default=3, help="used when a request omits topk")
    args = parser.parse_args(argv)

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    logging.getLogger("bm25s").setLevel(logging.WARNING)  # it logs its internals at DEBUG
    corpus = load_corpus(args.corpus)
    retriever = BM25Retriever(corpus)
    server = make_server(retriever, args.host, args.port, args.topk)
    host, port = server.server_address[:2]
    log.info(
        "serving %d documents on http://%s:%d/retrieve (index %s)",
        len(corpus),
        host,
        port,
        "loaded from cache" if retriever.loaded_from_cache else "built",
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
