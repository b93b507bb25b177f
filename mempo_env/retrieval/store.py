"""Passages on disk, out of Python objects: one UTF-8 blob and an offsets array, memory-mapped.

A million ``Document`` objects take about 1.2 GB of Python heap in every process that holds them; the
same passages as bytes take their size on disk once, shared by every process through the page cache,
and a search decodes only its hits. Layout of a store folder:

- ``passages.bin``: each passage's id, title and text, UTF-8, back to back;
- ``offsets.npy``: int64, ``3 n + 1`` entries; passage ``i``'s id is ``bin[o[3i]:o[3i+1]]``, its
  title ``bin[o[3i+1]:o[3i+2]]`` and its text ``bin[o[3i+2]:o[3i+3]]``.

``write_store`` refuses duplicate ids and passages with neither title nor text, naming their rows;
``PassageStore`` checks on opening that the two files fit together (a truncated copy fails there).
"""

from __future__ import annotations

import mmap
import os
from array import array
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import overload

import numpy as np

from mempo_env.types import Document

PASSAGES, OFFSETS = "passages.bin", "offsets.npy"


class StoreError(ValueError):
    """A corpus that cannot be stored as given (duplicate ids, an empty passage), or a damaged store."""


def _id_hash(ids: list[bytes]) -> np.ndarray:
    """64-bit hashes of ids, for a duplicate check that holds 8 bytes a passage, not a set of strings."""
    import hashlib

    return np.array([int.from_bytes(hashlib.blake2b(i, digest_size=8).digest(), "little") for i in ids],
                    dtype=np.uint64)


def write_store(rows: Iterable[tuple[int, Document]], folder: str | Path) -> int:
    """Write ``(row, document)`` pairs into ``folder`` (created) as a store; return how many were written.

    ``row``: where the document came from, for error messages (``enumerate(documents, 1)`` for a list,
    ``loaders.iter_corpus`` for a file). Streams: what it holds is 8 bytes of offsets and 8 of id hash
    and of row a passage, not the passages."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    offsets: list[np.ndarray] = []
    hashes: list[np.ndarray] = []
    row_of = array("q")  # 8 bytes a row, not a Python int
    batch: list[Document] = []
    position = 0
    with open(folder / PASSAGES, "wb") as out:

        def flush() -> None:
            nonlocal position
            fields = [f.encode("utf-8", "surrogatepass") for d in batch for f in (d.id, d.title, d.text)]
            lengths = np.fromiter((len(f) for f in fields), dtype=np.int64, count=len(fields))
            offsets.append(position + np.concatenate([[0], np.cumsum(lengths)[:-1]]))
            position += int(lengths.sum())
            out.write(b"".join(fields))
            hashes.append(_id_hash(fields[0::3]))
            batch.clear()

        for row, doc in rows:
            row_of.append(row)
            if not doc.id:
                raise StoreError(f"row {row_of[-1]}: a passage with an empty id")
            if not (doc.title.strip() or doc.text.strip()):
                raise StoreError(f"row {row_of[-1]}: passage {doc.id!r} has neither title nor text")
            batch.append(doc)
            if len(batch) == 65536:
                flush()
        if batch:
            flush()
    if not row_of:
        raise StoreError("the corpus has no passages")
    np.save(folder / OFFSETS, np.concatenate([*offsets, [position]]).astype(np.int64))
    _check_unique(np.concatenate(hashes), PassageStore(folder), row_of)
    return len(row_of)


def _check_unique(hashes: np.ndarray, store: PassageStore, rows: Sequence[int]) -> None:
    """Refuse a duplicate id; a hash collision of two different ids is told apart by reading both."""
    order = np.argsort(hashes, kind="stable")
    for k in np.flatnonzero(hashes[order][1:] == hashes[order][:-1]):
        first, second = int(order[k]), int(order[k + 1])
        if store[first].id == store[second].id:
            raise StoreError(f"row {rows[second]}: duplicate id {store[second].id!r} (first at row {rows[first]})")


def map_bytes(path: Path) -> bytes | mmap.mmap:
    """A file's bytes, mapped read-only and shared through the page cache (a slice is ``bytes``)."""
    with open(path, "rb") as f:
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if os.fstat(f.fileno()).st_size else b""


class PassageStore(Sequence[Document]):
    """The passages of a store folder, read on demand: ``store[i]`` decodes passage ``i`` only."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        try:
            self._offsets = np.load(self.folder / OFFSETS, mmap_mode="r").view(np.ndarray)  # memmap slices cost µs
            size = (self.folder / PASSAGES).stat().st_size
        except (OSError, ValueError) as e:
            raise StoreError(f"{self.folder} is not a readable passage store ({e})") from None
        if self._offsets.ndim != 1 or len(self._offsets) % 3 != 1 or int(self._offsets[-1]) != size:
            raise StoreError(f"{self.folder}: {OFFSETS} does not fit {PASSAGES} ({size} bytes): a damaged or "
                             "partial copy")
        self._blob = map_bytes(self.folder / PASSAGES)

    def __len__(self) -> int:
        return (len(self._offsets) - 1) // 3

    @overload
    def __getitem__(self, i: int) -> Document: ...
    @overload
    def __getitem__(self, i: slice) -> list[Document]: ...

    def __getitem__(self, i: int | slice) -> Document | list[Document]:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        n = len(self)
        if not 0 <= i < n:  # no wrap-around: a damaged index's posting -1 must not read the last passage
            raise IndexError(f"passage {i} of a store of {n} (positions are 0 to {n - 1})")
        a, b, c, d = (int(x) for x in self._offsets[3 * i : 3 * i + 4])
        field = lambda s, e: self._blob[s:e].decode("utf-8", "surrogatepass")  # noqa: E731
        return Document(field(a, b), field(b, c), field(c, d))

    def __iter__(self) -> Iterator[Document]:
        return (self[i] for i in range(len(self)))
