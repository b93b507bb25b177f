"""Local BM25 search over an in-memory corpus (bm25s), with the built index cached on disk.

The cache folder is named by a hash of everything the index depends on (corpus ids, titles and
texts, BM25 parameters, tokenizer settings, bm25s version), so a changed corpus or setting never
reuses a stale index. Folders are published with a single rename, so an interrupted build never
leaves a half-written index behind; an unreadable one is rebuilt with a warning.
"""

from __future__ import annotations

import enum
import hashlib
import json
import os
import shutil
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path

import bm25s
import numpy as np

from mempo_env.retrieval.base import Hit
from mempo_env.types import Document

_FORMAT = 1  # bump when tokenization or the cache layout changes
_STOPWORDS = "en"
_METHOD = "lucene"


class _Default(enum.Enum):
    """Sentinel for "use the default cache dir", resolved at construction so a later env var counts."""

    CACHE_DIR = 0


def default_cache_dir() -> Path:
    """``$MEMPO_CACHE_DIR`` if set, else ``~/.cache/mempo_env``."""
    return Path(os.environ.get("MEMPO_CACHE_DIR") or Path.home() / ".cache" / "mempo_env")


def _tokenize(texts: list[str], return_ids: bool) -> bm25s.tokenization.Tokenized | list[list[str]]:
    """The one tokenizer for documents and queries: lowercase words of 2+ chars, English stopwords removed."""
    return bm25s.tokenize(texts, stopwords=_STOPWORDS, return_ids=return_ids, show_progress=False)


def _build_index(corpus: Sequence[Document], k1: float, b: float) -> bm25s.BM25:
    """The index; a corpus without one searchable word is refused, as every search would come back empty."""
    tokens = _tokenize([f"{d.title} {d.text}" for d in corpus], return_ids=True)
    if not tokens.vocab:
        raise ValueError(
            f"none of the {len(corpus)} documents has a searchable word (their titles and texts hold only "
            "English stopwords, punctuation or single characters, or nothing): every search would return nothing"
        )
    index = bm25s.BM25(k1=k1, b=b, method=_METHOD)
    index.index(tokens, create_empty_token=False, show_progress=False)
    return index


def _cache_key(corpus: Sequence[Document], k1: float, b: float) -> str:
    """Hash of the corpus and every setting that shapes the index (fields length-prefixed, so unambiguous)."""
    settings = {
        "format": _FORMAT,
        "bm25s": bm25s.__version__,
        "k1": k1,
        "b": b,
        "method": _METHOD,
        "stopwords": _STOPWORDS,
    }
    h = hashlib.blake2b(json.dumps(settings, sort_keys=True).encode(), digest_size=16)
    for doc in corpus:
        for field in (doc.id, doc.title, doc.text):
            data = field.encode("utf-8", "surrogatepass")
            h.update(len(data).to_bytes(8, "little"))
            h.update(data)
    return h.hexdigest()


def _load_index(path: Path, num_docs: int) -> bm25s.BM25:
    """Load a cached index and check its arrays fit together, so damage surfaces here, not mid-search."""
    index = bm25s.BM25.load(path, load_vocab=True, show_progress=False)
    s = index.scores
    if not (
        s["num_docs"] == num_docs
        and len(s["indptr"]) == len(index.vocab_dict) + 1
        and s["indptr"][-1] == len(s["data"]) == len(s["indices"])
        and (len(s["indices"]) == 0 or 0 <= s["indices"].min() <= s["indices"].max() < num_docs)
    ):
        raise ValueError("index arrays are inconsistent")
    return index


def _save_atomic(index: bm25s.BM25, path: Path) -> None:
    """Write into a temporary sibling folder, then rename it into place. A failed write only warns:
    the cache is an optimisation, and the in-memory index is already usable."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{path.name}-", dir=path.parent))
        index.save(tmp, show_progress=False)
        shutil.rmtree(path, ignore_errors=True)  # a corrupt copy that failed to load
        tmp.rename(path)
    except OSError as e:
        if not path.is_dir():  # otherwise a concurrent builder published the same index first
            warnings.warn(f"could not write BM25 index cache {path}: {e}", stacklevel=4)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def _load_or_build(corpus: list[Document], k1: float, b: float, path: Path | None) -> tuple[bm25s.BM25, bool]:
    """The cached index at ``path`` if it loads, else a fresh one (saved there). Returns (index, loaded)."""
    if path is not None and path.is_dir():
        try:
            return _load_index(path, len(corpus)), True
        except Exception as e:  # noqa: BLE001 -- any damage (truncated arrays, bad JSON, missing file) means rebuild
            warnings.warn(f"BM25 index cache {path} is unreadable ({e!r}); rebuilding it", stacklevel=3)
    index = _build_index(corpus, k1, b)
    if path is not None:
        _save_atomic(index, path)
    return index, False


class BM25Retriever:
    """BM25 (Lucene variant) over ``title + " " + text`` of each document.

    Defaults ``k1=0.9, b=0.4`` are Pyserini's, which Search-R1's BM25 retriever uses. Only documents
    sharing at least one term with the query are returned, as in Lucene: a query with no indexable
    terms (empty, only stopwords or punctuation, or only words absent from the corpus) gets an empty
    hit list. That is a genuine "nothing matched", not a failure. ``topk`` larger than the corpus
    returns every matching document.

    ``cache_dir`` defaults to ``default_cache_dir()`` (index under ``<cache_dir>/bm25/<key>``);
    ``None`` disables the cache. ``loaded_from_cache`` tells whether the index was loaded, not built.
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
        path = None if cache_dir is None else Path(cache_dir) / "bm25" / _cache_key(self.corpus, k1, b)
        self._index, self.loaded_from_cache = _load_or_build(self.corpus, k1, b, path)

    def search(self, queries: list[str], topk: int) -> list[list[Hit]]:
        """One ranked hit list per query (best first, ties in corpus order, at most ``topk``)."""
        if topk < 1:
            raise ValueError(f"topk must be >= 1, got {topk}")
        vocab = self._index.vocab_dict
        results = []
        for tokens in _tokenize(list(queries), return_ids=False):
            terms = [t for t in tokens if t in vocab]
            results.append(self._rank(terms, topk) if terms else [])
        return results

    def _rank(self, terms: list[str], topk: int) -> list[Hit]:
        """Select among matching documents only: numpy's argpartition (what ``bm25s.retrieve`` uses) is
        ~10x slower on score arrays that are mostly zeros, and its order of tied scores is arbitrary."""
        scores = self._index.get_scores(terms)
        matched = np.flatnonzero(scores > 0)
        if len(matched) > topk:  # keep all documents tied with the k-th best, then order exactly
            kth = np.partition(scores[matched], -topk)[-topk]
            matched = matched[scores[matched] >= kth]
        best = matched[np.lexsort((matched, -scores[matched]))[:topk]]
        return [Hit(self.corpus[i], float(scores[i])) for i in best]
