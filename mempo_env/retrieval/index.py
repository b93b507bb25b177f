"""BM25 over millions of passages: built in chunks on disk, opened memory-mapped, queries scored in batches.

    python -m mempo_env.retrieval.index --corpus wiki18.jsonl --out indexes/wiki18 [--workers 2]

An index folder holds the passage store (``mempo_env.retrieval.store``) and BM25's precomputed
weights, term-major (one posting list a term, documents ascending), as ``.npy`` files that every
process opens memory-mapped: an async vector env, the OpenEnv server's sessions and the retrieval
server's workers share one copy through the page cache instead of a Python copy each.

Scores are exactly those of ``bm25s`` (the Lucene variant, ``k1=0.9, b=0.4`` by default, over
``title + " " + text`` tokenised by ``bm25s.tokenize`` with English stopwords), computed with the same
float operations in the same order, and ranked by the same rule (best first, ties in corpus order,
only documents sharing a term with the query), so rankings equal the in-memory ``bm25s`` index's.
Queries are scored by MaxScore compiled with numba (``mempo_env.retrieval.maxscore``, the ``scale``
extra), which reads a few thousand of a query's postings where an exhaustive sum reads all of them;
without numba, by that exhaustive sum in numpy (bm25s's own method and speed).

Building holds one chunk of tokenised passages at a time (``CHUNK`` of them) plus the vocabulary;
the postings are scattered into their final memory-mapped files chunk by chunk. ``OUT`` is published
as a symbolic link to a sibling folder, swapped by one rename: see ``build_index`` for what readers
and interrupted builds can count on. Every file's checksum is kept in ``index.json``: opening checks
the sizes, the offsets and the vocabulary's checksum; ``BM25Index(folder, verify=True)`` checks
every byte (see ``BM25Index``).
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import math
import os
import re
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import numpy as np

from mempo_env.retrieval.base import Hit
from mempo_env.retrieval.fingerprint import store_fingerprint
from mempo_env.retrieval.store import OFFSETS, PASSAGES, PassageStore, StoreError, map_bytes, write_store
from mempo_env.types import Document

FORMAT = 3  # 1: the bm25s-saved index of BM25Retriever's cache; 2: without checksums
META = "index.json"
MARK = ".mempo-index"  # written first into every folder the builder makes: its own, to remove or replace
CHUNK = 100_000
STOPWORDS = "en"
METHOD = "lucene"

_ARRAYS = ("indptr.npy", "postings.npy", "weights.npy", "max_weights.npy", "vocab_offsets.npy")
_VOCAB = ("vocab.bin", "vocab_offsets.npy")  # checksummed at every open: a few bytes a term
_FILES = (*_ARRAYS, "vocab.bin", PASSAGES, OFFSETS)  # all but index.json, each checksummed in it
_KEYS = {"format": int, "num_docs": int, "num_terms": int, "nnz": int, "avgdl": float, "k1": float, "b": float,
         "checksums": dict, "fingerprint": str}  # what opening reads from index.json, and its type
_PIECE = 16 * 2**20  # bytes a checksum reads at a time (a multiple of every item size)
_OPEN_TRIES = 8  # opens retried when ``OUT`` was replaced meanwhile (each retry follows a finished build)


def scoring_settings(k1: float, b: float) -> dict:
    """Everything besides the passages that shapes an index's scores: what its fingerprint digests."""
    import bm25s

    return {"format": FORMAT, "bm25s": bm25s.__version__, "k1": k1, "b": b, "method": METHOD,
            "stopwords": STOPWORDS}


class BM25IndexError(ValueError):
    """An index folder that is missing, damaged or written by another format; or a build's ``out``
    that is not an index folder this module wrote (refused, and left as it was)."""


def tokenize(texts: list[str]) -> list[list[str]]:
    """The one tokenizer for passages and queries: ``bm25s.tokenize`` (lowercase words of 2+ characters,
    English stopwords removed), as the in-memory ``bm25s`` index uses."""
    import bm25s

    return bm25s.tokenize(texts, stopwords=STOPWORDS, return_ids=False, show_progress=False)


def _tokenize_chunk(texts: list[str]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """A chunk's distinct tokens, each token's index among them, and each passage's token count."""
    tokens = tokenize(texts)
    local: dict[str, int] = {}
    ids = np.fromiter((local.setdefault(t, len(local)) for doc in tokens for t in doc), dtype=np.int64)
    return list(local), ids, np.fromiter((len(doc) for doc in tokens), dtype=np.int64, count=len(tokens))


def _chunks(store: PassageStore, size: int) -> Iterator[list[str]]:
    for start in range(0, len(store), size):
        yield [f"{d.title} {d.text}" for d in store[start : start + size]]


def _idf(df: np.ndarray, n: int) -> np.ndarray:
    """Lucene's idf, ``log(1 + (N - df + 0.5) / (df + 0.5))``, with ``math.log`` in float64 then cast to
    float32, as bm25s computes it (numpy's own log may differ in the last bit); once per distinct df."""
    values, inverse = np.unique(df, return_inverse=True)
    idf = np.array([math.log(1 + (n - v + 0.5) / (v + 0.5)) for v in values.tolist()], dtype=np.float64)
    return idf.astype(np.float32)[inverse]


def build_index(
    corpus: Iterable[tuple[int, Document]] | PassageStore,
    out: str | Path,
    *,
    k1: float = 0.9,
    b: float = 0.4,
    workers: int = 1,
    chunk: int = CHUNK,
    source: dict[str, Any] | None = None,
    log: Any = None,
) -> Path:
    """Build the index of ``corpus`` and publish it as ``out`` (replacing the index there); return ``out``.

    ``corpus``: ``(row, document)`` pairs streamed into the folder's store (``write_store``), or an
    existing store. ``workers``: processes tokenising chunks in parallel. ``source``:
    what the corpus came from, kept in the metadata. ``log``: a callable given progress lines.

    The index is written into a fresh sibling folder ``.NAME.index-XXXXXXXX`` (``NAME`` being
    ``out``'s name), marked as the builder's by a ``.mempo-index`` file written first, and ``out``
    becomes a symbolic link to it, swapped in by one ``rename`` (a folder cannot be renamed over a
    non-empty one, so replacing a plain folder takes two steps with no index between them; a link
    is replaced in one). What that guarantees:

    - A reader never finds no index: ``out`` names the old index until the rename and the new one
      after; ``BM25Index`` opens the folder the link names and, if a rebuild removed that folder
      while it was opening, opens the new one. The one exception is the first rebuild of a plain
      folder written by an earlier version, which is moved aside an instant before the link
      takes its name.
    - A build killed at any point leaves the old index, whole, or once the link is renamed the new
      one. What it leaves beside ``out`` (its folder, passages included; its link in flight; the
      replaced index) is removed by the next build into ``out``, which removes only folders of that
      name pattern that carry the mark (removed last) or are empty, and the ``.tmp-NAME-XXXXXXXX``
      folders of builds killed before marks existed when they hold only index files.
    - Nothing that is not such an index is removed or replaced: ``out`` must be absent, an empty
      folder, an index this function wrote, or a plain folder holding only an earlier version's index
      files; anything else (a file, a foreign link, a folder with other files) raises
      ``BM25IndexError`` before any work, and is left as it was.
    - One build at a time into ``out``: a second fails at once (a lock on the sibling file
      ``.NAME.index-lock``, there while a build runs)."""
    out = Path(out)
    say = log or (lambda line: None)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise BM25IndexError(f"cannot write an index at {out}: {e}") from None
    started = time.perf_counter()
    _check_out(out)  # before the lock's file is made beside it
    with _hold(out):
        _check_out(out)
        _remove_leftovers(out)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.index-", dir=out.parent))
        try:
            (tmp / MARK).write_text(json.dumps({"builder": __name__, "out": out.name, "pid": os.getpid()}) + "\n")
            if isinstance(corpus, PassageStore):
                for name in (PASSAGES, OFFSETS):
                    try:
                        os.link(corpus.folder / name, tmp / name)  # the same bytes, not a copy
                    except OSError:
                        shutil.copy(corpus.folder / name, tmp / name)
            else:
                say(f"storing passages into {tmp}")
                write_store(corpus, tmp)
            store = PassageStore(tmp)
            say(f"{len(store):,} passages stored ({time.perf_counter() - started:.0f} s); tokenising")
            meta = _build_postings(store, tmp, k1, b, workers, chunk, say)
            meta["checksums"] = {name: _digest(tmp / name) for name in _FILES}
            meta.update(source=source or {}, build_s=round(time.perf_counter() - started, 1),
                        fingerprint=store_fingerprint(tmp, scoring_settings(k1, b)))  # what it serves
            (tmp / f"{META}.tmp").write_text(json.dumps(meta, indent=1))
            os.replace(tmp / f"{META}.tmp", tmp / META)
            _check_out(out)
            _publish(tmp, out)
        except BaseException:
            with suppress(OSError):
                _remove(tmp)
            raise
        _remove_leftovers(out)
    say(f"index written to {out} ({time.perf_counter() - started:.0f} s)")
    return out


def _own_name(out: Path) -> re.Pattern[str]:
    """The names of what a build into ``out`` makes beside it: its folders and its links in flight."""
    return re.compile(rf"\.{re.escape(out.name)}\.index-(link-)?[a-z0-9_]{{8}}")


@contextmanager
def _hold(out: Path) -> Iterator[None]:
    """Hold ``out`` for one build: a second build into it fails at once, naming this process. The lock
    is on a file beside ``out``, removed when the build ends (a killed build's is reused by the next:
    the kernel drops a lock however its holder ends). The lock held is the one on the file that has
    the name now: one locked after another process removed it is given up and the name opened again."""
    import fcntl

    path = out.parent / f".{out.name}.index-lock"
    while True:
        f = path.open("a+")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = f.read().strip() or "?"
            f.close()
            raise BM25IndexError(f"another build into {out} is running (pid {holder}); wait for it to end or "
                                 "choose another --out") from None
        try:
            if os.stat(path).st_ino == os.fstat(f.fileno()).st_ino:
                break
        except FileNotFoundError:
            pass
        f.close()
    with f:
        f.truncate(0)
        f.write(f"{os.getpid()}\n")
        f.flush()
        try:
            yield
        finally:
            path.unlink(missing_ok=True)  # while locked: a build that opened it before gives it up (above)


def _check_out(out: Path) -> None:
    """Refuse an ``out`` that is not absent, an empty folder or an index this module wrote."""
    if out.is_symlink():
        target = os.readlink(out)
        if not _own_name(out).fullmatch(target):
            raise BM25IndexError(f"{out} is a link to {target}, not an index this command wrote: refusing to replace "
                                 "it (remove it, or choose another --out)")
    elif out.is_dir():
        names = sorted(p.name for p in out.iterdir())
        foreign = [name for name in names if name not in {META, MARK, *_FILES}]
        if foreign or (names and not _is_meta(out / META)):
            held = f"{foreign[0]!r}{' and more' if len(foreign) > 1 else ''}" if foreign else f"no index {META}"
            raise BM25IndexError(f"{out} is a folder that is not an index this command wrote (it holds {held}): "
                                 "refusing to replace it (choose another --out, or empty it)")
    elif out.exists():
        raise BM25IndexError(f"{out} is a file, not an index folder: refusing to replace it (choose another --out)")


def _is_meta(path: Path) -> bool:
    try:
        meta = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    return isinstance(meta, dict) and "format" in meta


def _publish(folder: Path, out: Path) -> None:
    """Make ``out`` a link to ``folder`` (a sibling) by one rename; a plain folder there is moved aside."""
    link = out.parent / f".{out.name}.index-link-{folder.name[-8:]}"
    os.symlink(folder.name, link)  # relative: the pair can be moved or mounted elsewhere together
    if out.is_dir() and not out.is_symlink():
        if any(out.iterdir()):  # an earlier version's index (``_check_out``), marked so that it is removed
            (out / MARK).write_text(json.dumps({"builder": __name__, "out": out.name, "replaced": True}) + "\n")
            os.rename(out, tempfile.mkdtemp(prefix=f".{out.name}.index-", dir=out.parent))
        else:
            out.rmdir()
    os.replace(link, out)


def _remove_leftovers(out: Path) -> None:
    """Remove what builds into ``out`` left beside it, except the folder ``out`` links to: folders of
    their name pattern that carry their mark (a replaced index, a killed build) or are empty (a build
    killed before its mark), and links of a killed publish. Also the ``.tmp-NAME-XXXXXXXX`` folders
    that builds killed before marks existed left (each a full copy of the passages), recognised by
    that name and by holding nothing but index files. Nothing else."""
    current = os.readlink(out) if out.is_symlink() else None
    own = _own_name(out)
    unmarked = re.compile(rf"\.tmp-{re.escape(out.name)}-[a-z0-9_]{{8}}")
    for path in out.parent.iterdir():
        if path.name == current:
            continue
        if own.fullmatch(path.name) and path.is_symlink():
            path.unlink()
        elif path.is_symlink() or not path.is_dir():
            continue
        elif own.fullmatch(path.name) and ((path / MARK).is_file() or not any(path.iterdir())):
            _remove(path)
        elif unmarked.fullmatch(path.name) and all(p.name in {META, *_FILES} or re.fullmatch(r"\.part\d+\.npz", p.name)
                                                   for p in path.iterdir()):
            _remove(path)


def _remove(folder: Path) -> None:
    """Remove a folder of index files (they hold no folders), its mark last: a removal cut short by a
    kill leaves the folder marked, so that the next build finishes it."""
    for path in folder.iterdir():
        if path.name != MARK:
            path.unlink()
    (folder / MARK).unlink(missing_ok=True)
    folder.rmdir()


def _digest(path: Path, visit: Any = None) -> str:
    """The SHA-256 of a file, read ``_PIECE`` bytes at a time: checking a wiki-size index holds
    megabytes, not the index. ``visit``: a callable given the data of a ``.npy`` file piece by piece,
    as arrays of its dtype (to check values in the same read)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        if visit is None:
            while piece := f.read(_PIECE):
                h.update(piece)
            return h.hexdigest()
        version = np.lib.format.read_magic(f)
        shape, _, dtype = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                           else np.lib.format.read_array_header_2_0)(f)
        left = math.prod(shape) * dtype.itemsize
        header = f.tell()
        f.seek(0)
        h.update(f.read(header))
        while piece := f.read(_PIECE):
            h.update(piece)
            if left > 0:
                visit(np.frombuffer(piece[: min(left, len(piece))], dtype))
                left -= len(piece)
    return h.hexdigest()


def _build_postings(store: PassageStore, folder: Path, k1: float, b: float, workers: int, chunk: int,
                    say: Any) -> dict[str, Any]:
    """Pass 1: tokenise chunk by chunk, keep each chunk's (term, doc, tf) on disk and the document
    frequencies in memory. Pass 2: weigh every posting and scatter it to its place, term-major."""
    vocab: dict[str, int] = {}
    df = np.zeros(0, dtype=np.int64)
    lengths = np.zeros(len(store), dtype=np.int64)
    parts: list[Path] = []
    pool = None
    if workers > 1:
        from multiprocessing import get_context

        pool = get_context("spawn").Pool(workers)
    try:
        results = pool.imap(_tokenize_chunk, _chunks(store, chunk)) if pool else map(_tokenize_chunk,
                                                                                       _chunks(store, chunk))
        start = 0
        for n, (local, ids, lens) in enumerate(results):
            remap = np.fromiter((vocab.setdefault(t, len(vocab)) for t in local), dtype=np.int64, count=len(local))
            docs = np.repeat(np.arange(start, start + len(lens)), lens)
            # one (doc, term) pair per distinct term of a passage, with its count: doc-major, terms by id
            pairs, tf = np.unique(docs * len(vocab) + remap[ids], return_counts=True)
            doc, term = np.divmod(pairs, len(vocab))
            if len(vocab) > len(df):
                df = np.concatenate([df, np.zeros(len(vocab) - len(df), dtype=np.int64)])
            df += np.bincount(term, minlength=len(df))
            lengths[start : start + len(lens)] = lens
            part = folder / f".part{n}.npz"
            np.savez(part, doc=doc.astype(np.int32), term=term.astype(np.int32), tf=tf.astype(np.float32))
            parts.append(part)
            start += len(lens)
            say(f"  tokenised {start:,} passages, {len(vocab):,} terms")
    finally:
        if pool:
            pool.close()
    n_docs, nnz = len(store), int(df.sum())
    avgdl = float(lengths.sum()) / n_docs  # bm25s: np.mean of the lengths (exact for integer sums < 2**53)
    # Terms in UTF-8 byte order, so a query's term is found by binary search in the mapped vocabulary.
    terms = sorted(vocab, key=lambda t: t.encode("utf-8", "surrogatepass"))
    order = np.fromiter((vocab[t] for t in terms), dtype=np.int64, count=len(terms))
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    del vocab
    encoded = [t.encode("utf-8", "surrogatepass") for t in terms]
    (folder / "vocab.bin").write_bytes(b"".join(encoded))
    np.save(folder / "vocab_offsets.npy", np.concatenate([[0], np.cumsum([len(t) for t in encoded])]).astype(np.int64))
    del terms, encoded
    sorted_df = df[order]
    indptr = np.concatenate([[0], np.cumsum(sorted_df)]).astype(np.int64)
    np.save(folder / "indptr.npy", indptr)
    idf = _idf(df, n_docs)  # by build id
    postings = np.lib.format.open_memmap(folder / "postings.npy", mode="w+", dtype=np.int32, shape=(nnz,))
    weights = np.lib.format.open_memmap(folder / "weights.npy", mode="w+", dtype=np.float32, shape=(nnz,))
    cursor = indptr[:-1].copy()  # next free slot of each term (by sorted id)
    for part in parts:
        with np.load(part) as z:
            doc, term, tf = z["doc"], z["term"], z["tf"]
        # bm25s: float32(idf32 * (tf / (k1 * ((1 - b) + b * dl / avgdl) + tf))), the tfc in float64
        dl = lengths[doc]
        score = (idf[term] * (tf / (k1 * ((1 - b) + b * dl / avgdl) + tf))).astype(np.float32)
        final = rank[term]
        by_term = np.argsort(final, kind="stable")  # within a term, documents stay ascending
        final, doc, score = final[by_term], doc[by_term], score[by_term]
        first = np.searchsorted(final, final, side="left")  # where each entry's term run starts
        at = cursor[final] + (np.arange(len(final)) - first)
        postings[at], weights[at] = doc, score
        cursor += np.bincount(final, minlength=len(cursor))
        part.unlink()
    if not np.array_equal(cursor, indptr[1:]):
        raise RuntimeError("internal error: postings do not fill the index")  # never expected
    postings.flush()
    weights.flush()
    # each term's largest weight: the bound MaxScore prunes with (mempo_env/retrieval/maxscore.py)
    np.save(folder / "max_weights.npy", np.maximum.reduceat(weights, indptr[:-1]) if nnz else np.zeros(0, np.float32))
    del postings, weights
    if nnz == 0:
        raise StoreError(f"none of the {n_docs} documents has a searchable word (their titles and texts hold only "
                         "English stopwords, punctuation or single characters): every search would return nothing")
    import bm25s

    return {"format": FORMAT, "num_docs": n_docs, "num_terms": len(order), "nnz": nnz, "avgdl": avgdl,
            "k1": k1, "b": b, "method": METHOD, "tokenizer": {"bm25s": bm25s.__version__, "stopwords": STOPWORDS},
            "unsearchable_docs": int((lengths == 0).sum())}


def _top(docs: np.ndarray, scores: np.ndarray, topk: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``topk`` best of ``docs`` with a score > 0, best first, ties in corpus order (all documents
    tied with the k-th best kept until the exact order is taken)."""
    keep = scores > 0
    docs, scores = docs[keep], scores[keep]
    if len(docs) > topk:
        kth = np.partition(scores, -topk)[-topk]
        docs, scores = docs[scores >= kth], scores[scores >= kth]
    best = np.lexsort((docs, -scores))[:topk]
    return docs[best], scores[best]


@functools.cache
def has_numba() -> bool:
    """Whether the compiled scorer can run: numba (the ``scale`` extra) imports. One that is installed
    but refuses this numpy raises ImportError too, and the numpy scorer is used instead."""
    try:
        import numba  # noqa: F401
    except ImportError:
        return False
    return True


class BM25Index:
    """A built index folder, memory-mapped: ``search`` is the ``Retriever`` contract, ``rank`` its ids.

    ``threads``: how many threads score a batch of queries (the compiled scorer holds no interpreter
    lock while it scores; numpy releases it in its gathers and scatters). ``compiled``: MaxScore
    compiled with numba (``mempo_env.retrieval.maxscore``; the default where numba is installed) or,
    with ``False``, every posting summed with numpy: the same rankings, slower by a factor that grows
    with the corpus.

    Opening checks what is cheap and would otherwise give silent wrong answers (``_open``): the
    metadata, every file's size, the posting-list offsets, the largest weights and the vocabulary's
    checksum. ``verify=True`` also reads every other file once (``_verify``): each file against the
    checksum recorded at build time, every posting in range, every weight finite. It costs a read of
    the whole index (docs/experiments/retrieval-scale.md measures both), so it is for a server's or a
    job's start, not for every environment. Either way a damaged index raises ``BM25IndexError``
    naming the file, and a search that meets a posting outside the corpus raises it too."""

    def __init__(self, folder: str | Path, *, threads: int = 0, compiled: bool | None = None,
                 verify: bool = False) -> None:
        self.folder = Path(folder)
        for attempt in range(_OPEN_TRIES):
            where = Path(os.path.realpath(self.folder))  # the version ``folder`` links to now, opened whole
            try:
                self._open(where)
                if verify:
                    self._verify(where)
                break
            except BM25IndexError:
                if attempt + 1 == _OPEN_TRIES or os.path.realpath(self.folder) == str(where):
                    raise  # not a rebuild that replaced ``folder`` while it was opening: the index is bad
        self.threads = threads or min(4, os.cpu_count() or 1)
        self.compiled = has_numba() if compiled is None else compiled
        self._local = threading.local()  # one score accumulator per thread
        self._pool: ThreadPoolExecutor | None = None
        # Import the tokenizer and compile (or load from numba's cache) the scorer now, not at the first
        # query: processes forked after an index is opened (gym.make_vec's async workers, which the
        # parent's probe env precedes; the server's workers) share those pages instead of a copy each,
        # 16 instead of 82 MB a worker on 1M passages (benchmarks.experiments.retrieval_scale.concurrency).
        self.rank([""], 1)

    def _open(self, where: Path) -> None:
        """Map the files of ``where`` (one version of ``self.folder``) and make the cheap checks: the
        metadata's keys, every array's size against it, the posting-list offsets and largest weights
        (which the compiled scorer trusts as bounds) and the vocabulary's checksum (a damaged
        vocabulary finds no query word, so every search would return nothing)."""
        try:
            meta = json.loads((where / META).read_text())
        except (OSError, ValueError) as e:
            raise BM25IndexError(f"{self.folder} is not a MemSearchQA BM25 index (no readable {META}: {e})") from None
        if not isinstance(meta, dict):
            raise BM25IndexError(f"{self.folder}: its {META} holds a JSON {type(meta).__name__}, not an index's "
                                 "metadata (a damaged index)")
        if meta.get("format") != FORMAT:
            raise BM25IndexError(f"{self.folder} was written in index format {meta.get('format')!r}; this "
                                 f"version reads format {FORMAT}: rebuild it (python -m mempo_env.retrieval.index)")
        for key, kind in _KEYS.items():
            if not isinstance(meta.get(key), (int, float) if kind is float else kind) or isinstance(meta[key], bool):
                raise BM25IndexError(f"{self.folder}: its {META} lacks {key!r} (or it is not a {kind.__name__}): a "
                                     "damaged index")
        self.meta = meta
        try:
            self.store = PassageStore(where)
            # plain ndarray views of the maps: numpy's memmap subclass costs microseconds a slice
            self._indptr, self._postings, self._weights, self._max_weights, self._vocab_offsets = (
                np.load(where / name, mmap_mode="r").view(np.ndarray) for name in _ARRAYS)
            self._vocab = map_bytes(where / "vocab.bin")
            vocab = {name: _digest(where / name) for name in _VOCAB}
        except (OSError, ValueError, StoreError) as e:
            raise BM25IndexError(f"{self.folder}: a damaged index ({e})") from None
        m = self.meta
        if not (len(self.store) == m["num_docs"] and len(self._indptr) == m["num_terms"] + 1
                and len(self._vocab_offsets) == m["num_terms"] + 1 and int(self._indptr[-1]) == m["nnz"]
                and len(self._postings) == len(self._weights) == m["nnz"]
                and len(self._max_weights) == m["num_terms"] and int(self._vocab_offsets[-1]) == len(self._vocab)):
            raise BM25IndexError(f"{self.folder}: its arrays do not fit its {META} (a damaged or partial copy)")
        if self._indptr[0] != 0 or (np.diff(self._indptr) < 0).any():  # the compiled scorer trusts these bounds
            raise BM25IndexError(f"{self.folder}: its posting-list offsets (indptr.npy) are damaged")
        if not (np.isfinite(self._max_weights).all() and (self._max_weights >= 0).all()):
            raise BM25IndexError(f"{self.folder}: its largest weights (max_weights.npy) are damaged (not finite, or "
                                 "negative)")
        for name, digest in vocab.items():
            if digest != m["checksums"].get(name):
                raise BM25IndexError(f"{self.folder}: its vocabulary ({name}) does not match the checksum recorded "
                                     "when it was built (damaged)")

    def _verify(self, where: Path) -> None:
        """Read every file of ``where`` once, in pieces (memory stays at megabytes): each posting names a
        passage of the corpus, each weight is finite and not negative, the passage store's offsets
        ascend, and every file matches the checksum recorded when the index was built."""
        n, last = self.meta["num_docs"], [0]

        def postings(a: np.ndarray) -> None:
            if len(a) and not (int(a.min()) >= 0 and int(a.max()) < n):
                raise BM25IndexError(f"{self.folder}: postings name documents outside the corpus (damaged)")

        def weights(a: np.ndarray) -> None:
            if not (np.isfinite(a).all() and (a >= 0).all()):
                raise BM25IndexError(f"{self.folder}: weights.npy holds weights that are not finite, or negative "
                                     "(damaged)")

        def offsets(a: np.ndarray) -> None:
            if len(a) and (int(a[0]) < last[0] or (np.diff(a) < 0).any()):
                raise BM25IndexError(f"{self.folder}: the passage store's offsets ({OFFSETS}) do not ascend "
                                     "(damaged)")
            last[0] = int(a[-1]) if len(a) else last[0]

        checks = {"postings.npy": postings, "weights.npy": weights, OFFSETS: offsets}
        for name in _FILES:
            if name in _VOCAB:
                continue  # checked by ``_open``
            try:
                digest = _digest(where / name, checks.get(name))
            except (OSError, ValueError) as e:
                raise BM25IndexError(f"{self.folder}: a damaged index ({e})") from None
            if digest != self.meta["checksums"].get(name):
                raise BM25IndexError(f"{self.folder}: {name} does not match the checksum recorded when the index was "
                                     "built (damaged)")

    def __len__(self) -> int:
        return self.meta["num_docs"]

    @property
    def fingerprint(self) -> str:
        """What it serves (``mempo_env.retrieval.fingerprint``), recorded in its metadata when it was built."""
        return self.meta["fingerprint"]

    def term_id(self, term: str) -> int:
        """The term's id, or -1: a binary search in the memory-mapped, byte-ordered vocabulary."""
        key, lo, hi = term.encode("utf-8", "surrogatepass"), 0, self.meta["num_terms"]
        offsets, vocab = self._vocab_offsets, self._vocab
        while lo < hi:
            mid = (lo + hi) // 2
            word = vocab[int(offsets[mid]) : int(offsets[mid + 1])]
            if word < key:
                lo = mid + 1
            elif word > key:
                hi = mid
            else:
                return mid
        return -1

    def rank(self, queries: Sequence[str], topk: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per query: the top ``topk`` document positions and their float32 scores, best first, ties
        in corpus order; only documents sharing a term with the query (none: empty arrays)."""
        if topk < 1:
            raise ValueError(f"topk must be >= 1, got {topk}")
        term_ids = [[i for t in tokens if (i := self.term_id(t)) >= 0] for tokens in tokenize(list(queries))]
        score = self._rank_compiled if self.compiled else self._rank_exhaustive
        if self.threads == 1 or len(term_ids) < 2 * self.threads:
            return score(term_ids, topk)
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="bm25")
        size = -(-len(term_ids) // self.threads)
        shards = [term_ids[i : i + size] for i in range(0, len(term_ids), size)]
        return [r for part in self._pool.map(lambda shard: score(shard, topk), shards) for r in part]

    def _rank_compiled(self, term_ids: list[list[int]], topk: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """MaxScore, compiled, over a batch (``mempo_env.retrieval.maxscore``): bm25s's scores bit for bit."""
        from mempo_env.retrieval.maxscore import rank_batch

        ptr = np.zeros(len(term_ids) + 1, dtype=np.int64)
        np.cumsum([len(ids) for ids in term_ids], out=ptr[1:])
        flat = np.fromiter((i for ids in term_ids for i in ids), dtype=np.int64, count=int(ptr[-1]))
        docs, scores, found = rank_batch(self._indptr, self._postings, self._weights, self._max_weights, ptr, flat,
                                         topk)
        if docs.size and not 0 <= int(docs.min()) <= int(docs.max()) < len(self):  # one check a batch
            raise self._outside()
        return [(docs[i, :n], scores[i, :n]) for i, n in enumerate(found.tolist())]

    def _rank_exhaustive(self, term_ids: list[list[int]], topk: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """Every posting of every term added into a per-thread accumulator over every document, as
        bm25s's ``get_scores`` adds them (``np.add.at``, terms in query order, a repeated word twice).
        Posting lists are copied out of the map first: numpy's scatters ran 2.5-4x slower on
        memory-mapped pages than on a private copy (1M passages), and a copy is one sequential read.
        The accumulator is read back whole: at 1M passages that was faster than collecting the
        documents each term adds (7.4-7.8 against 8.8-9.4 ms a query), which half the corpus are
        for frequent words. A query without a known word reads nothing."""
        acc = getattr(self._local, "acc", None)
        if acc is None:
            acc = self._local.acc = np.zeros(self.meta["num_docs"], dtype=np.float32)
        out = []
        for ids in term_ids:
            if not ids:
                out.append((np.zeros(0, np.int64), np.zeros(0, np.float32)))
                continue
            for t in ids:
                s, e = int(self._indptr[t]), int(self._indptr[t + 1])
                docs = self._postings[s:e].copy()
                if len(docs) and not 0 <= int(docs.min()) <= int(docs.max()) < len(acc):  # -1 would wrap around
                    raise self._outside()
                np.add.at(acc, docs, self._weights[s:e].copy())
            docs = np.flatnonzero(acc)
            scores = acc[docs]
            acc[docs] = 0  # ready for the next query
            out.append(_top(docs, scores, topk))
        return out

    def _outside(self) -> BM25IndexError:
        """What a search says when a posting it read names no passage: the index is damaged."""
        return BM25IndexError(f"{self.folder}: a posting names a document outside the corpus: the index is damaged "
                              "(BM25Index(..., verify=True) checks every posting when it opens)")

    def search(self, queries: list[str], topk: int) -> list[list[Hit]]:
        """One ranked hit list per query, the passages read from the store."""
        return [[Hit(self.store[int(d)], float(s)) for d, s in zip(docs, scores)]
                for docs, scores in self.rank(queries, topk)]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m mempo_env.retrieval.index", description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", required=True, help="JSONL or parquet of {id,title,text} or {id,contents}")
    parser.add_argument("--out", required=True,
                        help="where to publish the index: absent, an empty folder or an index this command wrote "
                             "(replaced atomically); anything else is refused")
    parser.add_argument("--k1", type=float, default=0.9)
    parser.add_argument("--b", type=float, default=0.4)
    parser.add_argument("--workers", type=int, default=min(4, os.cpu_count() or 1),
                        help="processes tokenising in parallel (default: the cores, at most 4)")
    args = parser.parse_args(argv)
    from mempo_env.tasks.loaders import DataError, iter_corpus

    path = Path(args.corpus)
    try:
        stat = path.stat()
        with path.open("rb"):
            pass  # readable: refused here, before ``--out`` is touched
    except OSError as e:
        raise SystemExit(f"error: --corpus {path}: {e.strerror or e}") from None
    if not path.is_file():
        raise SystemExit(f"error: --corpus {path} is not a file")
    try:
        build_index(iter_corpus(path), args.out, k1=args.k1, b=args.b, workers=args.workers,
                    source={"path": str(path.resolve()), "bytes": stat.st_size, "mtime_ns": stat.st_mtime_ns},
                    log=lambda line: print(line, file=sys.stderr, flush=True))
    except (DataError, StoreError, BM25IndexError) as e:
        raise SystemExit(f"error: {e}") from None
    except OSError as e:
        raise SystemExit(f"error: writing the index {args.out}: {e}") from None


if __name__ == "__main__":
    main()
