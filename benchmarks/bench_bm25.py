"""BM25 index build time and query latency: bm25s (through ``BM25Retriever``) vs rank-bm25.

    pytest benchmarks/bench_bm25.py          # pytest-benchmark tables (ms/query in extra_info)
    python -m benchmarks.systems --only bm25 # the ratio table (per query, per build) of benchmarks.systems
    python benchmarks/bench_bm25.py          # one table with ms/query and the speed ratio

Synthetic corpora: documents of ~50 words drawn from a Zipf-distributed vocabulary (fixed seed);
queries are 4 words picked from random documents, so each one matches something. rank-bm25 has
no batch API, so its queries run in a loop; at 100k docs it gets fewer of them (~150 ms each).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Iterator
from functools import cache, partial
from typing import Any

import numpy as np
import pytest
from bm25s.stopwords import STOPWORDS_EN
from rank_bm25 import BM25Okapi

from mempo_env.retrieval.bm25 import BM25Retriever
from mempo_env.types import Document

SIZES = (10_000, 100_000)
TOPK = 3
NUM_QUERIES = 100
RANK_BM25_QUERIES = {10_000: 100, 100_000: 10}
VOCAB_SIZE = 50_000


@cache
def corpus(size: int, seed: int = 0) -> list[Document]:
    return list(iter_corpus(size, seed))


def iter_corpus(size: int, seed: int = 0, chunk: int = 100_000) -> Iterator[Document]:
    """The documents of ``corpus(size, seed)`` one at a time, drawn ``chunk`` documents at a time, so
    that millions of them never sit in memory together. Tokens are drawn as ``rng.choice(vocab, p=p)``
    draws them (inverse CDF of uniform draws, which the generator yields in the same sequence whatever
    the chunk), so the corpora of every size measured before stay the same."""
    rng = np.random.default_rng(seed)
    letters = rng.choice(list("abcdefghijklmnopqrstuvwxyz"), size=(2 * VOCAB_SIZE, 10))
    words = {"".join(row[:n]) for row, n in zip(letters, rng.integers(3, 11, 2 * VOCAB_SIZE))}
    vocab = rng.permutation(sorted(words - set(STOPWORDS_EN)))[:VOCAB_SIZE]
    weights = 1.0 / (np.arange(len(vocab)) + 2.7)  # Zipf-Mandelbrot
    cdf = (weights / weights.sum()).cumsum()
    cdf /= cdf[-1]
    lengths = rng.integers(30, 71, size=size)
    for start in range(0, size, chunk):
        part = lengths[start : start + chunk]
        tokens = vocab[cdf.searchsorted(rng.random(int(part.sum()) + 2 * len(part)), side="right")]
        pos = 0
        for i, n in enumerate(part, start):
            yield Document(str(i), " ".join(tokens[pos : pos + 2]), " ".join(tokens[pos + 2 : pos + 2 + n]))
            pos += 2 + n


@cache
def queries(size: int, seed: int = 1) -> list[str]:
    rng = np.random.default_rng(seed)
    docs = corpus(size)
    return [" ".join(rng.choice(docs[i].text.split(), 4)) for i in rng.integers(0, size, NUM_QUERIES)]


def build_bm25s(docs: list[Document]) -> BM25Retriever:
    return BM25Retriever(docs, cache_dir=None)


def build_rank_bm25(docs: list[Document]) -> BM25Okapi:
    return BM25Okapi([f"{d.title} {d.text}".lower().split() for d in docs])


def search_bm25s(index: BM25Retriever, qs: list[str]) -> list[Any]:
    return index.search(qs, TOPK)


def search_rank_bm25(index: BM25Okapi, qs: list[str]) -> list[Any]:
    results = []
    for q in qs:
        scores = index.get_scores(q.lower().split())
        top = np.argpartition(-scores, TOPK)[:TOPK]
        results.append(top[np.argsort(-scores[top])])
    return results


NAMES = {"bm25s": "bm25s (BM25Retriever)", "rank_bm25": "rank-bm25"}
LIBS: dict[str, tuple[Callable[[list[Document]], Any], Callable[[Any, list[str]], list[Any]]]] = {
    "bm25s": (build_bm25s, search_bm25s),
    "rank_bm25": (build_rank_bm25, search_rank_bm25),
}


def num_queries(lib: str, size: int) -> int:
    return RANK_BM25_QUERIES[size] if lib == "rank_bm25" else NUM_QUERIES


@cache
def index(lib: str, size: int) -> Any:
    return LIBS[lib][0](corpus(size))


# ---------------------------------------------------------------- pytest-benchmark

def name_for_systems(benchmark: Any, lib: str, what: str, size: int, **extra: Any) -> None:
    """The row ``benchmarks.systems`` shows: bm25s against rank-bm25 on the same job."""
    label = f"{NAMES[lib]} {what}, {size // 1000}k docs"
    benchmark.extra_info.update(label=label, **extra)
    if lib != "rank_bm25":
        benchmark.extra_info["vs"] = label.replace(NAMES[lib], NAMES["rank_bm25"])


CASES = [pytest.param(lib, size, id=f"{lib}-{size // 1000}k") for size in SIZES for lib in LIBS]


@pytest.mark.parametrize(("lib", "size"), CASES)
def test_query_latency(benchmark: Any, lib: str, size: int) -> None:
    qs = queries(size)[: num_queries(lib, size)]
    benchmark.group = f"query {size // 1000}k docs, top-{TOPK}, {len(qs)} queries"  # only like with like
    name_for_systems(benchmark, lib, f"top-{TOPK} query", size, items=len(qs))
    idx = index(lib, size)
    results = benchmark.pedantic(LIBS[lib][1], args=(idx, qs), rounds=5 if lib == "bm25s" else 2, warmup_rounds=1)
    assert len(results) == len(qs)
    benchmark.extra_info["ms_per_query"] = 1000 * benchmark.stats.stats.min / len(qs)


@pytest.mark.parametrize(("lib", "size"), CASES)
def test_index_build(benchmark: Any, lib: str, size: int) -> None:
    benchmark.group = f"build {size // 1000}k docs"
    name_for_systems(benchmark, lib, "index build", size)
    docs = corpus(size)
    benchmark.pedantic(LIBS[lib][0], args=(docs,), rounds=1)


@pytest.mark.parametrize("size", SIZES, ids=[f"{s // 1000}k" for s in SIZES])
def test_index_cache_load(benchmark: Any, size: int, tmp_path: Any) -> None:
    benchmark.group = "bm25s cache load (includes hashing the corpus)"
    benchmark.extra_info.update(label=f"bm25s index cache load, {size // 1000}k docs",
                                vs=f"{NAMES['bm25s']} index build, {size // 1000}k docs")
    docs = corpus(size)
    BM25Retriever(docs, cache_dir=tmp_path)
    loaded = benchmark.pedantic(BM25Retriever, args=(docs,), kwargs={"cache_dir": tmp_path}, rounds=3)
    assert loaded.loaded_from_cache


# ---------------------------------------------------------------- one-shot table


def _best_of(fn: Callable[[], Any], rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    print(f"{'docs':>8} {'library':<10} {'build s':>8} {'ms/query':>9} {'queries':>8} {'cache load s':>13}")
    for size in SIZES:
        docs = corpus(size)
        ms = {}
        for lib, (build, search) in LIBS.items():
            start = time.perf_counter()
            idx = build(docs)
            build_s = time.perf_counter() - start
            n = num_queries(lib, size)
            qs = queries(size)[:n]
            search(idx, qs)  # warm-up
            ms[lib] = 1000 * _best_of(partial(search, idx, qs), rounds=3 if lib == "bm25s" else 1) / n
            load = ""
            if lib == "bm25s":
                with tempfile.TemporaryDirectory() as tmp:
                    BM25Retriever(docs, cache_dir=tmp)
                    load = f"{_best_of(partial(BM25Retriever, docs, cache_dir=tmp), rounds=3):.2f}"
            print(f"{size:>8} {lib:<10} {build_s:>8.2f} {ms[lib]:>9.2f} {n:>8} {load:>13}")
        print(f"{'':>8} rank_bm25 / bm25s latency ratio: {ms['rank_bm25'] / ms['bm25s']:.0f}x")


if __name__ == "__main__":
    main()
