"""The env's search tool as a verifiers v1 ``Toolset`` (an MCP server), and the retriever the harness's
env searches through it with.

The server is taskset-scoped: verifiers starts it once per evaluation (``python -m memsearchqa.search``,
in its own process), so the question set and the search index load once however many rollouts run.
It serves the env's own retriever (``MemSearchQAEnv(**settings).retriever``: in-process BM25, a
Search-R1 URL or an index folder), and the env in each rollout reaches it through ``McpSearch``, a
``Retriever`` like any other: the env renders, clips and records the hits itself, so a search through
verifiers shows the model exactly what a local episode shows.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import verifiers.v1 as vf
from pydantic import Field
from verifiers.v1.harnesses.utils.mcp import MCPConnection

from mempo_env import MemSearchQAEnv
from mempo_env.retrieval import Hit, Retriever, RetrieverError
from mempo_env.types import Document

SERVER = "memsearchqa"  # the server's name, the key of its URL among a rollout's MCP servers


class SearchConfig(vf.SharedToolsetConfig):
    """Where the search server runs (verifiers' ``runtime``, or ``url`` for one already running) and the
    env keywords its retriever is built from (the taskset fills them in)."""

    settings: dict[str, Any] = Field(default_factory=dict)


class SearchToolset(vf.Toolset[SearchConfig]):
    """One tool, ``search``: the env retriever's ``topk`` best documents for a query."""

    TOOL_PREFIX = SERVER

    async def setup(self) -> None:
        """Builds the retriever once, when the server starts."""
        self.retriever: Retriever = MemSearchQAEnv(**self.config.settings).retriever

    @vf.tool
    async def search(self, query: str, topk: int) -> str:
        """The topk best documents for query, best first, as JSON: a list of {id, title, text, score}."""
        # In a worker thread: one slow search (a remote server) must not hold up the other rollouts'.
        [hits] = await asyncio.to_thread(self.retriever.search, [query], topk)
        return json.dumps([{"id": h.document.id, "title": h.document.title, "text": h.document.text,
                            "score": h.score} for h in hits])


class McpSearch:
    """A ``Retriever`` that calls the search tool at ``url``. The env steps in a worker thread and calls
    ``search`` there; each tool call runs on the harness's event loop ``loop``, over one MCP connection
    per rollout (``aclose`` it on that loop). A failed search raises ``RetrieverError``, as the env's own
    retrievers do, so the env's step leaves the episode unchanged."""

    def __init__(self, url: str, timeout: float, loop: asyncio.AbstractEventLoop) -> None:
        self.connection = MCPConnection({"url": url, "timeout": timeout})
        self.loop = loop

    def search(self, queries: list[str], topk: int) -> list[list[Hit]]:
        return [asyncio.run_coroutine_threadsafe(self._search(q, topk), self.loop).result() for q in queries]

    async def _search(self, query: str, topk: int) -> list[Hit]:
        try:
            arguments = {"query": query, "topk": topk}
            result = await self.connection.run(lambda client: client.call_tool("search", arguments))
        except Exception as e:  # the server itself unreachable, after MCPConnection's retries
            raise RetrieverError(f"the search tool is unreachable: {type(e).__name__}: {e}") from e
        text = "\n".join(block.text for block in result.content if block.type == "text")
        if result.is_error:
            raise RetrieverError(f"the search tool failed: {text}")
        return [Hit(Document(d["id"], d["title"], d["text"]), d["score"]) for d in json.loads(text)]

    async def aclose(self) -> None:
        await self.connection.aclose()


if __name__ == "__main__":
    SearchToolset.run()
