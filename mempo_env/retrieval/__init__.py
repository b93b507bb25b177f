"""The search tool: in-process BM25, a Search-R1 server client, and record/replay of results."""

from __future__ import annotations

from pathlib import Path

from mempo_env.retrieval.base import Hit, Retriever, RetrieverError, render_hits
from mempo_env.types import Document


def make_retriever(
    spec: str | Retriever | None, corpus: list[Document], *, cache_dir: str | Path | None = "default"
) -> Retriever:
    """``None``: BM25 over ``corpus`` (index cached in ``cache_dir``; ``"default"`` for the standard
    cache location, ``None`` for no cache); an ``http(s)://`` URL: a Search-R1 server; or a ready
    retriever, returned as is."""
    if spec is None:
        from mempo_env.retrieval.bm25 import BM25Retriever

        return BM25Retriever(corpus) if cache_dir == "default" else BM25Retriever(corpus, cache_dir=cache_dir)
    if isinstance(spec, str):
        if not spec.startswith(("http://", "https://")):
            raise ValueError(f"retriever must be None, an http(s) URL or a Retriever, not {spec!r}")
        from mempo_env.retrieval.remote import RemoteRetriever

        return RemoteRetriever(spec)
    if not isinstance(spec, Retriever):
        raise TypeError(f"retriever {spec!r} has no search(queries, topk) method")
    return spec


__all__ = ["Hit", "Retriever", "RetrieverError", "make_retriever", "render_hits"]
