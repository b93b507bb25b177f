"""The light archive of ``benchmarks.run`` folders, for experiments longer than a session: each folder's
``config.json`` and its complete episodes without their transcripts, gzipped (about 0.3 KB an episode),
small enough to commit as they finish. A fresh machine restores them and plays only what is missing, since
a run resumes episode by episode from its folder."""

from __future__ import annotations

import gzip
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agents.episode_log import read_episodes, write_atomic
from benchmarks.report import CONFIG, EPISODES


def played(path: Path) -> list[dict[str, Any]]:
    """The complete episodes of a log, read without writing to it: an archive is taken while other processes
    may still be writing their folders, and ``load_done`` would cut a torn last line off under its writer."""
    return read_episodes(path) if path.exists() else []


def archive_folder(src: str | Path, dest: str | Path,
                   keep: Callable[[dict[str, Any]], dict[str, Any]] = lambda r: r) -> int:
    """Copy a run folder's config and complete episodes (``keep`` of each, less its ``trajectory``) into
    ``dest``. Reads without writing, so it may run while the folder's own run is still appending (a torn
    last line is skipped, not cut). Returns the episodes archived."""
    src, dest = Path(src), Path(dest)
    records = played(src / EPISODES)
    dest.mkdir(parents=True, exist_ok=True)
    write_atomic(dest / CONFIG, (src / CONFIG).read_bytes())  # a kill leaves each file whole, old or new
    lines = "".join(json.dumps({k: v for k, v in keep(r).items() if k != "trajectory"}) + "\n" for r in records)
    write_atomic(dest / (EPISODES + ".gz"), gzip.compress(lines.encode(), mtime=0))
    return len(records)


def restore(dest: str | Path, out_dir: str | Path) -> list[str]:
    """Copy into ``out_dir`` the archived folders under ``dest`` that it lacks (a folder it has is left as
    it is, even with fewer episodes); returns the folders restored. Each is written beside its place and
    renamed into it whole, so a kill mid-restore leaves no half folder to be taken for a played one."""
    dest, out = Path(dest), Path(out_dir)
    restored = []
    for folder in sorted({p.parent.relative_to(dest) for p in dest.glob("**/config.json")}):
        if (out / folder).exists():
            continue
        tmp = out / folder.parent / f".{folder.name}.restoring"
        shutil.rmtree(tmp, ignore_errors=True)  # ours: a restore killed before its rename
        tmp.mkdir(parents=True)
        for path in (dest / folder).iterdir():
            if path.suffix == ".tmp":  # left by an archive killed mid-write; its file is whole beside it
                continue
            data = path.read_bytes()
            name = path.name.removesuffix(".gz")
            (tmp / name).write_bytes(gzip.decompress(data) if path.suffix == ".gz" else data)
        tmp.rename(out / folder)
        restored.append(str(folder))
    return restored
