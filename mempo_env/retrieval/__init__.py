"""The search tool: in-process BM25, a Search-R1 server client, and record/replay of results."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mempo_env.retrieval.base import Hit, Retriever, RetrieverError, render_hits
from mempo_env.types import Document


def make_retriever(
    spec: str | Retriever | None,
    corpus: list[Document],
    *,
    cache_dir: str | Path | None = "default",
    options: Mapping[str, Any] | None = None,
) -> Retriever:
    """``None``: BM25 over ``corpus`` (index cached in ``cache_dir``; ``"default"`` for the standard
    cache location, ``None`` for no cache); an ``http(s)://`` URL: a Search-R1 server; or a ready
    retriever, returned as is. ``options``: keyword arguments for the retriever built here
    (``BM25Retriever``: ``k1``, ``b``; ``RemoteRetriever``: ``timeout``, ``attempts``, ``backoff``,
    ``max_wait``, ``pool_size``)."""
    options = options or {}
    if spec is None:
        from mempo_env.retrieval.bm25 import BM25Retriever

        if cache_dir == "default":
            return BM25Retriever(corpus, **options)
        return BM25Retriever(corpus, cache_dir=cache_dir, **options)
    if isinstance(spec, str):
        if not spec.startswith(("http://", "https://")):
            raise ValueError(f"retriever must be None, an http(s) URL or a Retriever, not {spec!r}")
        from mempo_env.retrieval.remote import RemoteRetriever

        return RemoteRetriever(spec, **options)
    if not isinstance(spec, Retriever):
        raise TypeError(f"retriever {spec!r} has no search(queries, topk) method")
    if options:
        raise ValueError(f"retriever options apply to a retriever built from None or a URL, not to {spec!r}")
    return spec


__all__ = ["Hit", "Retriever", "RetrieverError", "make_retriever", "render_hits"]
