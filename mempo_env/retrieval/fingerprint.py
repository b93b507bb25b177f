"""What an index serves, as one short string: replicas of one retrieval service must agree on it.

A fingerprint is derived from content, not from a path or a build time: the passages (ids, titles
and texts) and every setting that shapes the scores (k1, b, the method, the tokenizer and its
version, the index format). Two indexes built from the same corpus with the same settings, by the
index command or by ``BM25Retriever``'s cache, have the same fingerprint; any other pair differs but
for a 128-bit hash collision. The index command records it in ``index.json``; an index built before
it did gets the same one computed from its passages (``BM25Index.fingerprint``). The retrieval server
states its retriever's fingerprint (``GET /health`` and a header on every answer) and
``RemoteRetriever`` refuses replicas that disagree.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from mempo_env.retrieval.store import OFFSETS, PASSAGES, map_bytes
from mempo_env.types import Document

HEADER = "X-Index-Fingerprint"
"""The response header in which the retrieval server states its fingerprint on every answer."""


class CorpusDigest:
    """A blake2b digest (16 bytes, hex) of settings and then documents, fed one at a time while they
    stream past, so a corpus of millions is hashed without being held. Each field is length-prefixed,
    so no two different corpora feed the same bytes. ``BM25Retriever``'s cache key is this digest."""

    def __init__(self, settings: dict) -> None:
        """``settings``: everything besides the passages that shapes the scores (``index.scoring_settings``)."""
        self._hash = hashlib.blake2b(json.dumps(settings, sort_keys=True).encode(), digest_size=16)

    def add(self, doc: Document) -> None:
        for field in (doc.id, doc.title, doc.text):
            data = field.encode("utf-8", "surrogatepass")  # a lone surrogate is a passage's text too
            self._hash.update(len(data).to_bytes(8, "little"))
            self._hash.update(data)

    def add_store(self, folder: Path, fields_at_once: int = 3 << 16) -> None:
        """Every passage of the passage store in ``folder``, in order: the very bytes ``add`` would hash
        (a store holds each field's UTF-8), taken from its files a chunk of fields at a time, not decoded
        passage by passage to ``add`` them, which was 4 times slower (13,000 passages a second, half an
        hour at wiki scale, on this project's 2-core machine): the hash itself is most of what is left."""
        offsets = np.load(folder / OFFSETS, mmap_mode="r")
        blob = map_bytes(folder / PASSAGES)
        for at in range(0, len(offsets) - 1, fields_at_once):
            bounds = np.asarray(offsets[at : at + fields_at_once + 1], dtype=np.int64)
            lengths = np.diff(bounds)
            data = np.frombuffer(blob[bounds[0] : bounds[-1]], np.uint8)
            is_length = np.zeros(len(data) + 8 * len(lengths), bool)  # each field: 8 length bytes, then its own
            starts = bounds[:-1] - bounds[0] + 8 * np.arange(len(lengths))
            is_length[(starts[:, None] + np.arange(8)).ravel()] = True
            fed = np.empty(len(is_length), np.uint8)
            fed[is_length] = lengths.astype("<u8").view(np.uint8)
            fed[~is_length] = data
            self._hash.update(fed)

    def hexdigest(self) -> str:
        return self._hash.hexdigest()


def store_fingerprint(folder: Path, settings: dict) -> str:
    """The fingerprint of an index over the passage store in ``folder`` with these scoring settings."""
    digest = CorpusDigest(settings)
    digest.add_store(folder)
    return digest.hexdigest()
