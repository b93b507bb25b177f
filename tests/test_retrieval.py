"""Retrievers: local BM25 (+ index cache), the Search-R1 HTTP client against real local servers,
the BM25 server, and record/replay."""

from __future__ import annotations

import json
import math
import os
import threading
import warnings
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import gymnasium as gym
import pytest
import requests

import mempo_env  # noqa: F401  (registers MemSearchQA-v0)
from mempo_env.retrieval import bm25 as bm25_module
from mempo_env.retrieval import index as index_module
from mempo_env.retrieval import make_retriever
from mempo_env.retrieval.base import Hit, Retriever, RetrieverError
from mempo_env.retrieval.bm25 import BM25Retriever
from mempo_env.retrieval.cache import RecordReplayRetriever
from mempo_env.retrieval.remote import RemoteRetriever
from mempo_env.retrieval.server import make_server, start_server
from mempo_env.types import Document
from tests.fake_server import serving

CORPUS = [
    Document("d1", "Paris", "Paris is the capital and largest city of France."),
    Document("d2", "Berlin", "Berlin is the capital of Germany and its largest city."),
    Document("d3", "Hamlet", "Hamlet is a tragedy written by William Shakespeare around 1600."),
    Document("d4", "Mount Everest", "Mount Everest is Earth's highest mountain above sea level, in the Himalayas."),
    Document("d5", "Python (programming language)", "Python is a programming language created by Guido van Rossum."),
    Document("d6", "Amazon River", "The Amazon River in South America is the largest river by discharge volume."),
]


def ids(hits: list[Hit]) -> list[str]:
    return [h.document.id for h in hits]


@pytest.fixture(scope="module")
def bm25() -> BM25Retriever:
    return BM25Retriever(CORPUS, cache_dir=None)


# ---------------------------------------------------------------- BM25


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("What is the capital of France?", "d1"),
        ("Who wrote Hamlet?", "d3"),
        ("highest mountain on Earth", "d4"),
        ("Who created the Python programming language", "d5"),
        ("largest river by discharge", "d6"),
        ("Berlin", "d2"),
    ],
)
def test_bm25_ranks_the_right_document_first(bm25: BM25Retriever, query: str, expected: str) -> None:
    (hits,) = bm25.search([query], topk=3)
    assert hits[0].document.id == expected
    assert all(isinstance(h.score, float) and h.score > 0 for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_bm25_batched_equals_unbatched(bm25: BM25Retriever) -> None:
    queries = ["capital city", "Shakespeare tragedy", "the of", "largest river", "programming"]
    assert bm25.search(queries, topk=3) == [bm25.search([q], topk=3)[0] for q in queries]


def test_bm25_ties_are_ordered_by_corpus_position() -> None:
    twins = [Document(str(i), "Twin", "identical text about owls") for i in (5, 3, 9, 1)]
    (hits,) = BM25Retriever(twins, cache_dir=None).search(["owls"], topk=3)
    assert ids(hits) == ["5", "3", "9"] and len({h.score for h in hits}) == 1


def test_bm25_query_without_indexable_terms_matches_nothing(bm25: BM25Retriever) -> None:
    results = bm25.search(["", "   ", "the of and is", "?!", "zyzzyva", "capital"], topk=3)
    assert results[:5] == [[], [], [], [], []]
    assert set(ids(results[5])) == {"d1", "d2"}
    assert bm25.search([], topk=3) == []


@pytest.mark.parametrize("texts, error", [(["x y", " "], "row 2: passage '1' has neither title nor text"),
                                          (["The", "of the ... is"], "none of the 2 documents has a searchable word")])
def test_bm25_refuses_empty_passages_and_unsearchable_corpora(tmp_path: Path, texts: list[str], error: str) -> None:
    corpus = [Document(str(i), "", t) for i, t in enumerate(texts)]
    with pytest.raises(ValueError, match=error):
        BM25Retriever(corpus, cache_dir=tmp_path)
    assert not list(tmp_path.glob("bm25/*"))  # nothing cached, no temporary folder left


def test_bm25_topk_larger_than_corpus_returns_every_match(bm25: BM25Retriever) -> None:
    (hits,) = bm25.search(["largest capital city river mountain language tragedy"], topk=100)
    assert sorted(ids(hits)) == ["d1", "d2", "d3", "d4", "d5", "d6"]
    with pytest.raises(ValueError):
        bm25.search(["x"], topk=0)


def test_bm25_index_cache_is_written_then_reused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = BM25Retriever(CORPUS, cache_dir=tmp_path)
    assert not first.loaded_from_cache
    entries = list((tmp_path / "bm25").iterdir())  # one published index (a link and its folder), no leftovers
    assert len(entries) == 2 and {p.resolve() for p in entries} == {p.resolve() for p in entries if p.is_symlink()}

    def no_build(*args: object) -> None:
        raise AssertionError("index was rebuilt instead of loaded")

    monkeypatch.setattr(bm25_module, "build_index", no_build)
    second = BM25Retriever(CORPUS, cache_dir=tmp_path)
    assert second.loaded_from_cache
    queries = ["capital of France", "Hamlet author"]
    assert second.search(queries, 3) == first.search(queries, 3)


def test_bm25_default_cache_dir_comes_from_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMPO_CACHE_DIR", str(tmp_path))
    BM25Retriever(CORPUS)
    assert len([p for p in (tmp_path / "bm25").iterdir() if not p.name.startswith(".")]) == 1  # the link


@pytest.mark.parametrize(
    "change",
    [
        lambda d: Document(d.id, d.title, d.text + " Paris hosts the Louvre."),
        lambda d: Document(d.id, "Paris, France", d.text),
        lambda d: Document("d1-renamed", d.title, d.text),
    ],
)
def test_bm25_cache_invalidated_when_corpus_changes(tmp_path: Path, change: Callable[[Document], Document]) -> None:
    BM25Retriever(CORPUS, cache_dir=tmp_path)
    changed = [change(CORPUS[0]), *CORPUS[1:]]
    retriever = BM25Retriever(changed, cache_dir=tmp_path)
    assert not retriever.loaded_from_cache
    assert retriever.search(["capital of France"], 1)[0][0].document == changed[0]
    assert not BM25Retriever(CORPUS, cache_dir=tmp_path, k1=1.2).loaded_from_cache  # params are in the key


@pytest.mark.parametrize(
    "victim", ["postings.npy", "indptr.npy", "vocab.bin", "index.json", "offsets.npy", "passages.bin"]
)
@pytest.mark.parametrize("damage", ["truncate", "delete"])
def test_bm25_corrupt_cache_is_rebuilt(tmp_path: Path, victim: str, damage: str) -> None:
    BM25Retriever(CORPUS, cache_dir=tmp_path)
    (folder,) = (p for p in (tmp_path / "bm25").iterdir() if p.is_symlink())  # the published index
    path = folder / victim
    if damage == "truncate":
        path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])
    else:
        path.unlink()
    with pytest.warns(UserWarning, match="unreadable"):
        rebuilt = BM25Retriever(CORPUS, cache_dir=tmp_path)
    assert not rebuilt.loaded_from_cache
    assert ids(rebuilt.search(["capital of France"], 1)[0]) == ["d1"]
    assert BM25Retriever(CORPUS, cache_dir=tmp_path).loaded_from_cache  # the rebuild replaced it


def test_bm25_cache_being_built_by_another_process_is_not_waited_for(tmp_path: Path) -> None:
    """Two processes (an async vector env's workers) starting on one cache: the one that finds the
    other building it builds its own index in a temporary folder instead of failing."""
    import fcntl

    key = bm25_module._cache_key(CORPUS, 0.9, 0.4)
    (tmp_path / "bm25").mkdir()
    with (tmp_path / "bm25" / f".{key}.index-lock").open("a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.warns(UserWarning, match="another build into .* is running"):
            retriever = BM25Retriever(CORPUS, cache_dir=tmp_path)
    assert ids(retriever.search(["Hamlet"], 1)[0]) == ["d3"]


def test_bm25_interrupted_cache_write_publishes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = index_module._build_postings

    def die_in_the_cache(store, folder, *args):  # the disk holding the cache fills up mid-build
        if tmp_path in Path(folder).parents:
            (Path(folder) / "postings.npy").write_bytes(b"partial")
            raise OSError("disk full")
        return real(store, folder, *args)

    monkeypatch.setattr(index_module, "_build_postings", die_in_the_cache)
    with pytest.warns(UserWarning, match="could not write"):
        retriever = BM25Retriever(CORPUS, cache_dir=tmp_path)
    assert ids(retriever.search(["Hamlet"], 1)[0]) == ["d3"]  # still usable, built in a temporary folder
    assert list((tmp_path / "bm25").iterdir()) == []


# ---------------------------------------------------------------- HTTP helpers

# (request number from 1, request body) -> (status, body) or (status, body, headers)
Respond = Callable[[int, dict], tuple[int, bytes]]


class FakeServer(ThreadingHTTPServer):
    """A scriptable server that counts the requests it receives."""

    daemon_threads = True

    def __init__(self, respond: Respond) -> None:
        self.respond, self.requests = respond, 0
        self._count_lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(handler) -> None:
                with self._count_lock:
                    self.requests += 1
                    n = self.requests
                body = json.loads(handler.rfile.read(int(handler.headers["Content-Length"])))
                status, data = self.respond(n, body)
                handler.send_response(status)
                handler.send_header("Content-Length", str(len(data)))
                handler.end_headers()
                handler.wfile.write(data)

            def log_message(handler, *args: object) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)


def fast_client(url: str) -> RemoteRetriever:
    return RemoteRetriever(url, timeout=(1.0, 2.0), attempts=5, backoff=0.001)


def search_r1_answer(n: int, body: dict) -> tuple[int, bytes]:
    """Search-R1's shape: ``contents`` documents, one list per query, ``topk`` hits each."""
    result = [
        [
            {"document": {"id": f"{q}-{i}", "contents": f'"Title {i}"\nText about {q}'}, "score": 10.0 - i}
            for i in range(body["topk"])
        ]
        for q in body["queries"]
    ]
    return 200, json.dumps({"result": result}).encode()


# ---------------------------------------------------------------- remote client


@pytest.mark.parametrize("suffix", ["", "/", "/retrieve"])
def test_remote_matches_local_bm25_through_the_server(bm25: BM25Retriever, suffix: str) -> None:
    queries = ["capital of France", "Who wrote Hamlet?", "the of", "largest river"]
    with serving(make_server(bm25, "127.0.0.1", 0)) as url, fast_client(url + suffix) as remote:
        assert remote.search(queries, topk=2) == bm25.search(queries, topk=2)


def test_remote_parses_search_r1_documents() -> None:
    with serving(FakeServer(search_r1_answer)) as url, fast_client(url) as remote:
        a, b = remote.search(["alpha", "beta"], topk=2)
    assert a[0] == Hit(Document("alpha-0", "Title 0", "Text about alpha"), 10.0)
    assert ids(b) == ["beta-0", "beta-1"]


def test_remote_accepts_hits_without_scores() -> None:
    def bare_documents(n: int, body: dict) -> tuple[int, bytes]:
        return 200, json.dumps({"result": [[{"id": 7, "title": "T", "text": "x"}] for _ in body["queries"]]}).encode()

    with serving(FakeServer(bare_documents)) as url, fast_client(url) as remote:
        ((hit,),) = remote.search(["q"], topk=3)
    assert hit.document == Document("7", "T", "x") and math.isnan(hit.score)


@pytest.mark.parametrize(
    "body",
    [
        b"<html>not json</html>",
        b'{"error": "no result key"}',
        b'{"result": [[]]}',  # one list for two queries
        b'{"result": [[{"document": {"id": "1"}}], []]}',  # document without text
        b'{"result": [[{"document": {"id": "1", "contents": "x"}, "score": [1]}], []]}',
    ],
)
def test_remote_malformed_response_raises(body: bytes) -> None:
    server = FakeServer(lambda n, _: (200, body))
    with serving(server) as url, fast_client(url) as remote, pytest.raises(RetrieverError, match="malformed"):
        remote.search(["a", "b"], topk=1)
    assert server.requests == 1


def answer(*hits: dict) -> Respond:
    """Every query gets the same hit list."""
    return lambda n, body: (200, json.dumps({"result": [list(hits) for _ in body["queries"]]}).encode())


@pytest.mark.parametrize(
    ("doc_id", "message"),
    [
        (None, "'id' must be a non-empty string or an integer, got None"),
        ({"a": 1}, "'id' must be a non-empty string or an integer, got {'a': 1}"),
        (True, "'id' must be a non-empty string or an integer, got True"),
        ("", "'id' must be a non-empty string or an integer, got ''"),
    ],
)
def test_remote_rejects_a_malformed_document_id(doc_id: object, message: str) -> None:
    server = FakeServer(answer({"document": {"id": doc_id, "title": "T", "text": "x"}, "score": 1.0}))
    with serving(server) as url, fast_client(url) as remote, pytest.raises(RetrieverError) as err:
        remote.search(["q"], topk=3)
    assert f"retrieval server {url}/retrieve sent a malformed response: document {message}" in str(err.value)


def test_remote_rejects_one_id_for_two_documents() -> None:
    same = {"id": "7", "title": "T", "text": "x"}
    with serving(FakeServer(answer(same, same))) as url, fast_client(url) as remote:
        assert ids(remote.search(["q"], topk=3)[0]) == ["7", "7"]  # the same document twice is consistent
    with serving(FakeServer(answer(same, {**same, "text": "y"}))) as url, fast_client(url) as remote:
        with pytest.raises(RetrieverError, match="malformed response: document id '7' names two different documents"):
            remote.search(["q"], topk=3)


def test_retriever_options_reach_the_client_through_gym_make_and_a_failed_step_loses_nothing() -> None:
    server = FakeServer(lambda n, body: (500, b"boom") if n <= 2 else search_r1_answer(n, body))
    turn = "<mem>m</mem><think>t</think><search>q</search>"
    with serving(server) as url:
        options = {"timeout": [1, 2], "attempts": 2, "backoff": 0.001, "max_wait": 1}
        env = gym.make("MemSearchQA-v0", retriever=url, retriever_options=options)
        client = env.unwrapped.retriever
        assert (client.retry.timeout, client.retry.attempts, client.retry.max_wait) == ((1, 2), 2, 1)
        env.reset(seed=0)
        with pytest.raises(RetrieverError, match=r"failed after 2 attempt\(s\): HTTP 500 boom"):
            env.step(turn)
        assert server.requests == 2
        *_, info = env.step(turn)  # the server is back: the same turn goes through, as the first one
    assert info["turn"] == 1 and info["doc_ids"] == ["q-0", "q-1", "q-2"]
    bm25 = make_retriever(None, CORPUS, cache_dir=None, options={"k1": 1.2})
    assert isinstance(bm25, BM25Retriever)
    with pytest.raises(TypeError, match="unexpected keyword argument 'timout'"):
        make_retriever("http://127.0.0.1:1", CORPUS, options={"timout": 3})
    with pytest.raises(ValueError, match="retriever options apply to a retriever built from None or a URL"):
        make_retriever(bm25, CORPUS, options={"attempts": 2})


# ---------------------------------------------------------------- server


def test_server_speaks_search_r1_format(bm25: BM25Retriever) -> None:
    with serving(make_server(bm25, "127.0.0.1", 0, topk=2)) as url:
        scored = requests.post(
            f"{url}/retrieve", json={"queries": ["capital"], "return_scores": True}, timeout=5
        ).json()
        bare = requests.post(f"{url}/retrieve", json={"queries": ["Hamlet"], "topk": 1}, timeout=5).json()
        bad = requests.post(f"{url}/retrieve", json={"queries": "not a list"}, timeout=5)
        missing = requests.post(f"{url}/search", json={"queries": []}, timeout=5)
    assert len(scored["result"][0]) == 2 and scored["result"][0][0]["score"] > 0
    (doc,) = bare["result"][0]
    assert doc["contents"] == CORPUS[2].contents and Document.from_contents(doc["id"], doc["contents"]) == CORPUS[2]
    assert bad.status_code == 400 and "queries" in bad.json()["error"]
    assert missing.status_code == 404


def test_server_cli_serves_a_corpus_file(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": d.id, "contents": d.contents}) + "\n" for d in CORPUS))
    env = {**os.environ, "MEMPO_CACHE_DIR": str(tmp_path)}
    with start_server(["--corpus", str(corpus), "--topk", "1"], tmp_path / "log", env=env) as server:
        with fast_client(server.url) as remote:
            assert ids(remote.search(["Who wrote Hamlet?"], topk=5)[0])[0] == "d3"
    assert list((tmp_path / "bm25").iterdir())  # the index was cached under $MEMPO_CACHE_DIR


# ---------------------------------------------------------------- record / replay


class CountingRetriever:
    def __init__(self, inner: Retriever) -> None:
        self.inner, self.queries = inner, []

    def search(self, queries: list[str], topk: int) -> list[list[Hit]]:
        self.queries += queries
        return self.inner.search(queries, topk)


def test_record_then_replay_reproduces_results(bm25: BM25Retriever, tmp_path: Path) -> None:
    log = tmp_path / "runs" / "search.jsonl"
    inner = CountingRetriever(bm25)
    recorder = RecordReplayRetriever(log, inner, mode="record")
    first = recorder.search(["capital of France", "Hamlet", "capital of France"], topk=2)
    again = recorder.search(["Hamlet", "largest river"], topk=2)
    assert inner.queries == ["capital of France", "Hamlet", "largest river"]  # misses only, deduplicated
    assert len(log.read_text().splitlines()) == 3

    replay = RecordReplayRetriever(log)
    assert replay.search(["capital of France", "Hamlet", "capital of France"], topk=2) == first
    assert replay.search(["Hamlet", "largest river"], topk=2) == again
    with pytest.raises(RetrieverError, match="'Hamlet' at topk=3"):
        replay.search(["Hamlet"], topk=3)  # topk is part of the key
    with pytest.raises(RetrieverError, match="'never asked'"):
        replay.search(["capital of France", "never asked"], topk=2)


def test_record_survives_a_torn_last_line(bm25: BM25Retriever, tmp_path: Path) -> None:
    log = tmp_path / "search.jsonl"
    RecordReplayRetriever(log, bm25, mode="record").search(["Hamlet"], topk=1)
    with log.open("a") as f:
        f.write('{"query": "capital", "topk": 1, "hi')  # killed mid-write
    with pytest.warns(UserWarning, match="torn"):
        assert ids(RecordReplayRetriever(log).search(["Hamlet"], topk=1)[0]) == ["d3"]
    with pytest.warns(UserWarning, match="torn"):
        recorder = RecordReplayRetriever(log, bm25, mode="record")  # cuts the torn tail off
    recorder.search(["capital"], topk=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        replay = RecordReplayRetriever(log)
    assert replay.search(["capital"], topk=1) == bm25.search(["capital"], topk=1)


def test_replay_rejects_corruption_and_missing_log(tmp_path: Path) -> None:
    log = tmp_path / "search.jsonl"
    log.write_text('not json\n{"query": "q", "topk": 1, "hits": []}\n')
    with pytest.raises(RetrieverError, match=":1: corrupt"):
        RecordReplayRetriever(log)
    with pytest.raises(FileNotFoundError):
        RecordReplayRetriever(tmp_path / "absent.jsonl")
    with pytest.raises(ValueError, match="inner"):
        RecordReplayRetriever(log, mode="record")
