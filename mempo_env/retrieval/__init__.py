"""The search tool: in-process BM25, a Search-R1 server client, and record/replay of results."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mempo_env.retrieval.base import Hit, Retriever, RetrieverError, render_hits
from mempo_env.types import Document


def make_retriever(
    spec: str | Path | Retriever | None,
    corpus: list[Document],
    *,
    cache_dir: str | Path | None = "default",
    options: Mapping[str, Any] | None = None,
) -> Retriever:
    """``None``: BM25 over ``corpus`` (index cached in ``cache_dir``; ``"default"`` for the standard
    cache location, ``None`` for no cache); an ``http(s)://`` URL, or several separated by commas
    (replicas): a Search-R1 server; the path of a folder built by ``python -m mempo_env.retrieval.index``:
    that index, memory-mapped (a wiki-size corpus, shared by every process through the page cache);
    or a ready retriever, returned as is. ``options``: keyword arguments for the retriever built here
    (``BM25Retriever``: ``k1``, ``b``; ``RemoteRetriever``: ``timeout``, ``attempts``, ``backoff``,
    ``max_wait``, ``pool_size``; ``BM25Index``: ``threads``)."""
    options = options or {}
    if spec is None:
        from mempo_env.retrieval.bm25 import BM25Retriever

        if cache_dir == "default":
            return BM25Retriever(corpus, **options)
        return BM25Retriever(corpus, cache_dir=cache_dir, **options)
    if isinstance(spec, (str, Path)) and not str(spec).startswith(("http://", "https://")):
        if not Path(spec).is_dir():
            raise ValueError(f"retriever must be None, an http(s) URL, an index folder or a Retriever; {str(spec)!r} "
                             "is none of them (no such folder)")
        from mempo_env.retrieval.index import BM25Index

        return BM25Index(spec, **options)
    if isinstance(spec, str):
        from mempo_env.retrieval.remote import RemoteRetriever

        return RemoteRetriever(spec, **options)
    if not isinstance(spec, Retriever):
        raise TypeError(f"retriever {spec!r} has no search(queries, topk) method")
    if options:
        raise ValueError(f"retriever options apply to a retriever built from None or a URL, not to {spec!r}")
    return spec


__all__ = ["Hit", "Retriever", "RetrieverError", "make_retriever", "render_hits"]
