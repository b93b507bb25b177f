"""Local BM25 search over a corpus given as documents, with the built index cached on disk.

The index is ``mempo_env.retrieval.index``'s (bm25s's Lucene scores, memory-mapped, MaxScore-pruned
batched search). Its cache folder is named by a hash of everything it depends on (corpus ids, titles
and texts, BM25 parameters, the index format, the bm25s tokenizer's version), so a changed corpus or
setting never reuses a stale index. Folders are published with a single rename, so an interrupted
build never leaves a half-written index behind; an unreadable one is rebuilt with a warning.

A corpus of millions of passages is better built once into a folder of its own
(``python -m mempo_env.retrieval.index``) and opened by path: hashing it at every start is then skipped.
"""

from __future__ import annotations

import enum
import os
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path

from mempo_env.retrieval.base import Hit
from mempo_env.retrieval.fingerprint import CorpusDigest
from mempo_env.retrieval.index import BM25Index, BM25IndexError, build_index, scoring_settings
from mempo_env.types import Document


class _Default(enum.Enum):
    """Sentinel for "use the default cache dir", resolved at construction so a later env var counts."""

    CACHE_DIR = 0


def default_cache_dir() -> Path:
    """``$MEMPO_CACHE_DIR`` if set, else ``~/.cache/mempo_env``."""
    return Path(os.environ.get("MEMPO_CACHE_DIR") or Path.home() / ".cache" / "mempo_env")


def _cache_key(corpus: Sequence[Document], k1: float, b: float) -> str:
    """Hash of the corpus and every setting that shapes the index (fields length-prefixed, so unambiguous):
    the fingerprint an index built from the same corpus records (``mempo_env.retrieval.fingerprint``)."""
    digest = CorpusDigest(scoring_settings(k1, b))
    for doc in corpus:
        digest.add(doc)
    return digest.hexdigest()


def _open_or_build(corpus: list[Document], k1: float, b: float, path: Path | None) -> tuple[BM25Index, bool]:
    """The cached index at ``path`` if it opens, else a fresh one (published there). Returns (index, loaded).

    Without a cache (``path`` None), or when the cache cannot be written (or another process is
    writing it), the index is built in a temporary folder that is removed once opened: its maps
    keep the files' pages alive until closed."""
    if path is not None and path.is_dir():
        try:
            return BM25Index(path, verify=True), True
        except BM25IndexError as e:
            warnings.warn(f"BM25 index cache {path} is unreadable ({e}); rebuilding it", stacklevel=3)
    if path is not None:
        try:
            return BM25Index(build_index(enumerate(corpus, 1), path, k1=k1, b=b)), False
        except (OSError, BM25IndexError) as e:  # a full disk; another process building it; a foreign folder there
            warnings.warn(f"could not write BM25 index cache {path}: {e}", stacklevel=3)
    with tempfile.TemporaryDirectory(prefix="mempo-bm25-") as tmp:
        return BM25Index(build_index(enumerate(corpus, 1), Path(tmp) / "index", k1=k1, b=b)), False


class BM25Retriever:
    """BM25 (Lucene variant) over ``title + " " + text`` of each document.

    Defaults ``k1=0.9, b=0.4`` are Pyserini's, which Search-R1's BM25 retriever uses. Only documents
    sharing at least one term with the query are returned, as in Lucene: a query with no indexable
    terms (empty, only stopwords or punctuation, or only words absent from the corpus) gets an empty
    hit list. That is a genuine "nothing matched", not a failure. ``topk`` larger than the corpus
    returns every matching document.

    ``cache_dir`` defaults to ``default_cache_dir()`` (index under ``<cache_dir>/bm25/<key>``);
    ``None`` disables the cache. ``loaded_from_cache`` tells whether the index was loaded, not built.
    ``fingerprint``: the cache key, a hash of the corpus, ``k1`` and ``b`` (what a retrieval server
    serving this retriever states; an index folder built from the same corpus states the same).
    """

    def __init__(
        self,
        corpus: Sequence[Document],
        *,
        k1: float = 0.9,
        b: float = 0.4,
        cache_dir: str | Path | None | _Default = _Default.CACHE_DIR,
    ) -> None:
        if not corpus:
            raise ValueError("BM25Retriever needs a non-empty corpus")
        self.corpus: list[Document] = list(corpus)
        if cache_dir is _Default.CACHE_DIR:
            cache_dir = default_cache_dir()
        self.fingerprint = _cache_key(self.corpus, k1, b)
        path = None if cache_dir is None else Path(cache_dir) / "bm25" / self.fingerprint
        self.index, self.loaded_from_cache = _open_or_build(self.corpus, k1, b, path)

    def search(self, queries: list[str], topk: int) -> list[list[Hit]]:
        """One ranked hit list per query (best first, ties in corpus order, at most ``topk``)."""
        return [[Hit(self.corpus[int(d)], float(s)) for d, s in zip(docs, scores)]
                for docs, scores in self.index.rank(list(queries), topk)]

