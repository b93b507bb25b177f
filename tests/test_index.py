"""The on-disk BM25 index: bm25s's rankings exactly, batched and pruned, and bad input refused.

The reference is the implementation it replaced: bm25s's in-memory index (Lucene variant), scored
with ``get_scores`` over every document and ranked best first with ties in corpus order. Scores are
compared bit for bit: both sides make the same IEEE float32/float64 operations (and ``math.log``), so
the comparison holds on every processor.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import bm25s
import numpy as np
import pytest

from mempo_env.retrieval import index as index_module
from mempo_env.retrieval.index import BM25Index, BM25IndexError, build_index
from mempo_env.retrieval.store import PassageStore, StoreError, write_store
from mempo_env.tasks import make_generated_task
from mempo_env.types import Document

ROOT = Path(__file__).resolve().parents[1]


def zipf_corpus(n: int, seed: int = 0) -> list[Document]:
    """Passages of 5-60 words from a 3,000-word Zipf vocabulary: long posting lists and many ties."""
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(3000)]
    p = 1 / np.arange(1, 3001) ** 1.1
    p /= p.sum()
    return [Document(f"z{i}", f"t{i % 97}", " ".join(words[j] for j in rng.choice(3000, rng.integers(5, 60), p=p)))
            for i in range(n)]


def reference(corpus: list[Document], queries: list[str], topk: int) -> list[list[tuple[int, float]]]:
    tokens = bm25s.tokenize([f"{d.title} {d.text}" for d in corpus], stopwords="en", show_progress=False)
    index = bm25s.BM25(k1=0.9, b=0.4, method="lucene")
    index.index(tokens, create_empty_token=False, show_progress=False)
    out = []
    for q in bm25s.tokenize(queries, stopwords="en", return_ids=False, show_progress=False):
        terms = [t for t in q if t in index.vocab_dict]
        if not terms:
            out.append([])
            continue
        scores = index.get_scores(terms)
        matched = np.flatnonzero(scores > 0)
        best = matched[np.lexsort((matched, -scores[matched]))[:topk]]
        out.append([(int(i), float(scores[i])) for i in best])
    return out


def queries_for(corpus: list[Document], n: int, seed: int = 1) -> list[str]:
    rng = np.random.default_rng(seed)
    picked = [" ".join(rng.choice(corpus[int(i)].text.split(), int(rng.integers(1, 6)))) for i in
              rng.integers(0, len(corpus), n)]
    frequent = corpus[0].text.split()[0]
    return picked + ["", "the of and", "unknownword", f"{frequent} {frequent}", f"{frequent} unknownword",
                     corpus[3].title, f"{corpus[5].text} {corpus[6].text}"]


def ranked(index: BM25Index, queries: list[str], topk: int) -> list[list[tuple[int, float]]]:
    return [[(int(d), float(s)) for d, s in zip(docs, scores)] for docs, scores in index.rank(queries, topk)]


@pytest.fixture(scope="module")
def zipf_folder(tmp_path_factory) -> tuple[list[Document], Path]:
    corpus = zipf_corpus(4000)
    return corpus, build_index(enumerate(corpus, 1), tmp_path_factory.mktemp("zipf") / "index", chunk=700)


@pytest.fixture(scope="module", params=[True, False], ids=["compiled", "numpy"])
def zipf(request, zipf_folder) -> tuple[list[Document], BM25Index]:
    """The index with each scorer: MaxScore compiled with numba, and the exhaustive numpy sum."""
    if request.param and not index_module.has_numba():
        pytest.skip("numba (the scale extra) is not installed")
    corpus, folder = zipf_folder
    return corpus, BM25Index(folder, threads=1, compiled=request.param, verify=True)


@pytest.mark.parametrize("topk", [1, 3, 10, 5000])
def test_rankings_equal_bm25s_bit_for_bit(zipf, topk) -> None:
    corpus, index = zipf
    queries = queries_for(corpus, 150)
    assert ranked(index, queries, topk) == reference(corpus, queries, topk)


def test_long_queries_rank_as_bm25s(zipf) -> None:
    """Queries of hundreds of words, repeats included: the pruning margin grows with the query's
    float32 rounding, so no document the exact sum ranks is dropped."""
    corpus, index = zipf
    rng = np.random.default_rng(11)
    queries = [" ".join(rng.choice([w for d in corpus[:50] for w in d.text.split()], n)) for n in (150, 400, 1000)]
    for topk in (1, 10):
        assert ranked(index, queries, topk) == reference(corpus, queries, topk)


def test_generated_task_rankings_equal_bm25s(tmp_path) -> None:
    corpus = make_generated_task("train").corpus
    queries = [q for r in make_generated_task("train").questions[:60] for q in (r.question, r.chain[0].query)]
    index = BM25Index(build_index(enumerate(corpus, 1), tmp_path / "index"))
    assert ranked(index, queries, 3) == reference(corpus, queries, 3)
    hits = index.search(queries[:2], 3)
    assert [h.document for h in hits[0]] == [corpus[d] for d, _ in reference(corpus, queries[:1], 3)[0]]


def test_threaded_searches_rank_as_one_thread(zipf_folder) -> None:
    corpus, folder = zipf_folder
    queries = queries_for(corpus, 200, seed=7)
    one = ranked(BM25Index(folder, threads=1, compiled=False), queries, 3)
    assert ranked(BM25Index(folder, threads=2, compiled=False), queries, 3) == one
    if index_module.has_numba():
        assert ranked(BM25Index(folder, threads=2, compiled=True), queries, 3) == one


def test_chunks_and_workers_build_the_same_files(tmp_path) -> None:
    corpus = zipf_corpus(1500, seed=3)
    a = build_index(enumerate(corpus, 1), tmp_path / "a", chunk=10_000)
    b = build_index(enumerate(corpus, 1), tmp_path / "b", chunk=200, workers=2)
    for name in ("postings.npy", "weights.npy", "indptr.npy", "vocab.bin", "passages.bin", "offsets.npy"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


def test_the_store_round_trips_every_character(tmp_path) -> None:
    docs = [Document("é1", "Ünïcode \ud800 title", "text with\nnewline and 中文"), Document("2", "", "only text"),
            Document("3", "only title", "")]
    assert write_store(enumerate(docs, 1), tmp_path) == 3
    store = PassageStore(tmp_path)
    assert list(store) == docs and store[1:] == docs[1:] and store[-2:] == docs[-2:]
    for outside in (3, -1):  # no wrap-around: a damaged posting of -1 must not read the last passage
        with pytest.raises(IndexError, match="positions are 0 to 2"):
            store[outside]


@pytest.mark.parametrize("docs, error", [
    ([Document("a", "t", "x"), Document("b", "t", "y"), Document("a", "u", "z")],
     r"row 3: duplicate id 'a' \(first at row 1\)"),
    ([Document("a", "t", "x"), Document("b", " ", "")], "row 2: passage 'b' has neither title nor text"),
    ([Document("", "t", "x")], "row 1: a passage with an empty id"),
    ([], "the corpus has no passages"),
])
def test_the_store_refuses_bad_corpora(tmp_path, docs, error) -> None:
    with pytest.raises(StoreError, match=error):
        write_store(enumerate(docs, 1), tmp_path)


def test_damaged_or_foreign_folders_are_refused(tmp_path) -> None:
    folder = build_index(enumerate(zipf_corpus(300), 1), tmp_path / "index")
    BM25Index(folder, verify=True)
    meta = json.loads((folder / "index.json").read_text())
    (folder / "index.json").write_text(json.dumps({**meta, "format": 1}))
    with pytest.raises(BM25IndexError, match="index format 1; this version reads format 3: rebuild it"):
        BM25Index(folder)
    (folder / "index.json").write_text(json.dumps(meta))
    weights = (folder / "weights.npy").read_bytes()
    (folder / "weights.npy").write_bytes(weights[: len(weights) // 2])
    with pytest.raises(BM25IndexError, match="damaged"):
        BM25Index(folder)
    (folder / "weights.npy").write_bytes(weights)
    indptr = np.load(folder / "indptr.npy")
    damaged = indptr.copy()
    damaged[3], damaged[4] = indptr[4] + 5, indptr[3]  # a list that would end before it starts
    np.save(folder / "indptr.npy", damaged)
    with pytest.raises(BM25IndexError, match=r"offsets \(indptr.npy\) are damaged"):
        BM25Index(folder)
    np.save(folder / "indptr.npy", indptr)
    postings = np.load(folder / "postings.npy")
    postings[5] = 10**6  # a document past the corpus
    np.save(folder / "postings.npy", postings)
    with pytest.raises(BM25IndexError, match="outside the corpus"):
        BM25Index(folder, verify=True)
    with pytest.raises(BM25IndexError, match="not a MemSearchQA BM25 index"):
        BM25Index(tmp_path)


@pytest.mark.parametrize("content, error", [
    (b'{"id": "1", "contents": "\\"A\\"\\nx"}\n{"id": "2", "contents": "\\"B', "row 2: invalid JSON"),
    (b'{"id": "1", "title": "A", "text": "x"}\n{"id": "1", "title": "B", "text": "y"}\n',
     r"row 2: duplicate id '1' \(first at row 1\)"),
    (b'{"id": "1", "title": "A", "text": "x \xff"}\n', "row 1: not UTF-8"),
    (b'{"id": "1", "title": "", "text": ""}\n', "row 1: passage '1' has neither title nor text"),
])
def test_the_command_line_names_the_bad_row_and_publishes_nothing(tmp_path, content, error) -> None:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_bytes(content)
    done = subprocess.run([sys.executable, "-m", "mempo_env.retrieval.index", "--corpus", str(corpus), "--out",
                           str(tmp_path / "index"), "--workers", "1"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode != 0 and re.search(error, done.stderr.strip().splitlines()[-1]), done.stderr[-800:]
    assert not (tmp_path / "index").exists() and not list(tmp_path.glob(".index.*"))
