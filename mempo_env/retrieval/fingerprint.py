"""What an index serves, as one short string: replicas of one retrieval service must agree on it.

A fingerprint is derived from content, not from a path or a build time: the passages (ids, titles
and texts) and every setting that shapes the scores (k1, b, the method, the tokenizer and its
version, the index format). Two indexes built from the same corpus with the same settings, by the
index command or by ``BM25Retriever``'s cache, have the same fingerprint; any other pair differs but
for a 128-bit hash collision. The retrieval server states its retriever's fingerprint
(``GET /health`` and a header on every answer) and ``RemoteRetriever`` refuses replicas that disagree.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TypeVar

from mempo_env.types import Document

HEADER = "X-Index-Fingerprint"
"""The response header in which the retrieval server states its fingerprint on every answer."""

T = TypeVar("T")


class CorpusDigest:
    """A blake2b digest (16 bytes, hex) of settings and then documents, fed one at a time while they
    stream past, so a corpus of millions is hashed without being held. Each field is length-prefixed,
    so no two different corpora feed the same bytes. ``BM25Retriever``'s cache key is this digest."""

    def __init__(self, k1: float, b: float) -> None:
        import bm25s

        from mempo_env.retrieval.index import FORMAT, METHOD, STOPWORDS

        settings = {"format": FORMAT, "bm25s": bm25s.__version__, "k1": k1, "b": b, "method": METHOD,
                    "stopwords": STOPWORDS}
        self._hash = hashlib.blake2b(json.dumps(settings, sort_keys=True).encode(), digest_size=16)

    def add(self, doc: Document) -> None:
        for field in (doc.id, doc.title, doc.text):
            data = field.encode("utf-8", "surrogatepass")  # a lone surrogate is a passage's text too
            self._hash.update(len(data).to_bytes(8, "little"))
            self._hash.update(data)

    def passing(self, rows: Iterable[tuple[T, Document]]) -> Iterator[tuple[T, Document]]:
        """``rows`` (``(row, document)`` pairs) unchanged, each document added as it goes by."""
        for row, doc in rows:
            self.add(doc)
            yield row, doc

    def hexdigest(self) -> str:
        return self._hash.hexdigest()


def legacy_fingerprint(folder: Path, meta_file: str, arrays: Iterable[str]) -> str:
    """The fingerprint of an index built before fingerprints were recorded: a digest of its metadata
    file's bytes (which hold its sizes, settings, source file's size and mtime and build time) and
    of its files' sizes. It tells two such folders apart unless they are byte-for-byte copies of one
    build, but unlike a recorded one it is not shared by two builds of one corpus: rebuild to get that.
    Prefixed ``legacy-`` so it never equals a recorded one."""
    h = hashlib.blake2b((folder / meta_file).read_bytes(), digest_size=16)
    for name in sorted(arrays):
        h.update(f"{name}:{(folder / name).stat().st_size};".encode())
    return "legacy-" + h.hexdigest()
