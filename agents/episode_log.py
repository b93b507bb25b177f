"""The episodes log: one JSON record a line, only ever appended to, so that a killed writer loses at most
the record it was writing and a rerun resumes from what is there. The evaluation runner
(``benchmarks.run``) logs its episodes this way and the learners (``algorithms.mempo``) their metrics;
readers (``benchmarks.report``, ``integrations.datasets_export``) skip what a kill tore."""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

LOCK = "run.lock"
"""The file in a run folder that ``hold_folder`` locks; it holds the pid of the process holding it."""


class RunFolderError(ValueError):
    """A run folder that cannot be used as it stands (held by another process, or damaged): the message
    names what is wrong and what to do, and the command lines print it as one line."""


def read_episodes(path: Path) -> list[dict[str, Any]]:
    """The complete records of a JSONL log, skipping torn lines (a run killed mid-write, or the
    interleaved writes of two runs an older runner let share a folder)."""
    records = []
    with path.open() as f:
        for line in f:
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return records


def load_done(path: Path) -> list[dict[str, Any]]:
    """Finished records of a log. A torn last line (killed mid-write) is cut off, so that the next
    append starts a line of its own; complete lines are never rewritten, so a kill here loses none."""
    if not path.exists():
        return []
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        os.truncate(path, data.rfind(b"\n") + 1)
    return read_episodes(path)


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write through a temporary file and a rename: a kill leaves the old file or the new, never part of one."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data.encode() if isinstance(data, str) else data)
    os.replace(tmp, path)


@contextmanager
def hold_folder(out: Path, option: str = "--out") -> Iterator[None]:
    """Hold ``out`` for one run: a second run into it fails at once, naming this process and the command's
    ``option`` that picks another folder. The kernel drops the lock when the process ends, however it
    ends, so a killed run leaves none behind."""
    with (out / LOCK).open("a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            raise RunFolderError(f"{out} is in use by another run (pid {f.read().strip() or '?'}); wait for it "
                                 f"to end or use another {option}") from None
        f.truncate(0)
        f.write(f"{os.getpid()}\n")
        f.flush()
        yield
