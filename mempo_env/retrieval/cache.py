"""Record and replay search results, so a benchmark run sees exactly the results of an earlier one.

The log is JSONL, one ``{"query", "topk", "hits": [{"id", "title", "text", "score"}]}`` per line,
appended (one write per batch) as results arrive, so a killed run loses at most the batch in flight.
"""

from __future__ import annotations

import json
import threading
import warnings
from pathlib import Path
from typing import Literal

from mempo_env.retrieval.base import Hit, Retriever, RetrieverError
from mempo_env.types import Document

Key = tuple[str, int]  # (query, topk)


def _encode(query: str, topk: int, hits: list[Hit]) -> str:
    rows = [{"id": h.document.id, "title": h.document.title, "text": h.document.text, "score": h.score} for h in hits]
    return json.dumps({"query": query, "topk": topk, "hits": rows}, ensure_ascii=False) + "\n"


def _decode(line: bytes) -> tuple[Key, list[Hit]]:
    row = json.loads(line)
    hits = [Hit(Document(id=h["id"], title=h["title"], text=h["text"]), float(h["score"])) for h in row["hits"]]
    return (row["query"], int(row["topk"])), hits


def _load(path: Path, repair: bool) -> dict[Key, list[Hit]]:
    """Read the log; the first record of a key wins. A torn last line (no newline: the run was killed
    mid-write) is ignored with a warning and, if ``repair``, cut off so later appends start clean.
    Any other unreadable line is real corruption and raises."""
    results: dict[Key, list[Hit]] = {}
    offset = 0
    with path.open("rb") as f:
        for lineno, line in enumerate(f, 1):
            if not line.endswith(b"\n"):  # only the last line can lack one
                warnings.warn(f"{path}:{lineno}: ignoring torn last record", stacklevel=3)
                break
            try:
                key, hits = _decode(line)
            except (ValueError, KeyError, TypeError) as e:
                raise RetrieverError(f"{path}:{lineno}: corrupt record ({e})") from e
            results.setdefault(key, hits)
            offset += len(line)
    if repair and offset < path.stat().st_size:
        with path.open("r+b") as f:
            f.truncate(offset)
    return results


class RecordReplayRetriever:
    """Serve searches from a results log keyed by (query, topk).

    ``mode="replay"``: answer only from the log (which must exist); a miss raises ``RetrieverError``
    naming the query, never a live search. ``mode="record"``: answer from the log where possible,
    send the misses to ``inner`` in one batch and append their results.
    """

    def __init__(
        self,
        path: str | Path,
        inner: Retriever | None = None,
        mode: Literal["record", "replay"] = "replay",
    ) -> None:
        if mode not in ("record", "replay"):
            raise ValueError(f"mode must be 'record' or 'replay', got {mode!r}")
        if mode == "record" and inner is None:
            raise ValueError("record mode needs an inner retriever")
        self.path = Path(path)
        self.inner = inner
        self.mode = mode
        self._lock = threading.Lock()  # guards the dict and the file, not the inner search
        if mode == "record" and not self.path.exists():
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.touch()
        self._results = _load(self.path, repair=mode == "record")

    def search(self, queries: list[str], topk: int) -> list[list[Hit]]:
        with self._lock:
            misses = list(dict.fromkeys(q for q in queries if (q, topk) not in self._results))
        if misses:
            if self.mode == "replay":
                more = f" (and {len(misses) - 1} more)" if len(misses) > 1 else ""
                raise RetrieverError(
                    f"replay log {self.path} has no result for query {misses[0]!r} at topk={topk}{more}"
                )
            fetched = self.inner.search(misses, topk)
            if len(fetched) != len(misses):
                raise RetrieverError(f"inner retriever returned {len(fetched)} result lists for {len(misses)} queries")
            self._record(misses, topk, fetched)
        with self._lock:
            return [list(self._results[(q, topk)]) for q in queries]

    def _record(self, queries: list[str], topk: int, results: list[list[Hit]]) -> None:
        with self._lock:
            new = [(q, hits) for q, hits in zip(queries, results) if (q, topk) not in self._results]
            with self.path.open("a", encoding="utf-8") as f:
                f.write("".join(_encode(q, topk, hits) for q, hits in new))
            for q, hits in new:
                self._results[(q, topk)] = hits
