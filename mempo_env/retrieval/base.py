"""The search-tool contract every retriever implements, and the Search-R1 rendering of its hits."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from mempo_env.types import Document


class RetrieverError(RuntimeError):
    """Retrieval failed (server down, bad response, replay miss). Never turned into an empty result."""


@dataclass(frozen=True)
class Hit:
    document: Document
    score: float


@runtime_checkable
class Retriever(Protocol):
    """Batched top-k search. Returns one ranked hit list per query, best first."""

    def search(self, queries: list[str], topk: int) -> list[list[Hit]]: ...


def render_hits(hits: list[Hit]) -> str:
    """Search-R1 rendering: one ``Doc {i}(Title: {title}) {text}`` line per hit, numbered from 1."""
    return "\n".join(f"Doc {i}(Title: {h.document.title}) {h.document.text}" for i, h in enumerate(hits, 1))
