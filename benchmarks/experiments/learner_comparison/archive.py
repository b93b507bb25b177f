"""What a comparison folder holds and keeps: whether a policy is evaluated, and the light archive of its
finished seeds (``archive``) that a fresh machine restores (``benchmarks.folder_archive.restore``) to go on
from."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks.experiments.learner_comparison.memory import with_memory
from benchmarks.experiments.learner_comparison.settings import ARMS, COMPARISON, WARMUP, arms_of
from benchmarks.folder_archive import archive_folder, played
from benchmarks.report import EPISODES as EPISODE_LOG


def evaluated(out: Path, settings: Mapping[str, Any], label: str, context: str) -> bool:
    """Whether every episode the comparison plays with a policy is in its two folders (greedy at every
    horizon, ``samples`` sampled ones at the training horizon): such a policy is not trained or played again,
    even without its checkpoint (a seed restored from an archive)."""
    def has(folder: Path, agents: Sequence[str], horizons: Sequence[int]) -> bool:
        done = {(r["agent"], r["objectives"], r["episode"]) for r in played(folder / EPISODE_LOG)}
        return all((a, k, e) in done for a in agents for k in horizons for e in range(settings["episodes"]))

    return (has(out / "eval" / context / label, [label], settings["objectives"])
            and has(out / "sampled" / context / label, [f"{label}~{j}" for j in range(1, settings["samples"] + 1)],
                    settings["sampled_objectives"]))


RUN_FILES = ("config.json", "metrics.jsonl", "curve.jsonl")  # what an archive keeps of a run folder


def archive(out_dir: str | Path, dest: str | Path) -> list[int]:
    """Copy a comparison's finished seeds (every arm trained and evaluated) and its evaluated warm-up into
    ``dest``, light enough to commit: the training logs and configs, and the episodes without their
    transcripts but with what their memories held (``memory.with_memory``), gzipped (about 0.3 KB an
    episode). ``compare(..., archive_dir=dest)`` on a fresh machine
    restores them and plays only what is missing. Returns the seeds archived."""
    out, dest = Path(out_dir), Path(dest)
    dest.mkdir(parents=True, exist_ok=True)  # called after every task, before any seed may be finished
    settings = json.loads((out / COMPARISON).read_text())["settings"]
    arms = arms_of(settings)
    views = {WARMUP: list(dict.fromkeys(ARMS[a]["context"] for a in arms))}
    seeds = [s for s in settings["seeds"]
             if all(evaluated(out, settings, f"{a}-s{s}", ARMS[a]["context"]) for a in arms)]
    for s in seeds:
        for a in arms:
            views[f"{a}-s{s}"] = [ARMS[a]["context"]]
            for name in RUN_FILES:
                (dest / "runs" / f"{a}-s{s}").mkdir(parents=True, exist_ok=True)
                (dest / "runs" / f"{a}-s{s}" / name).write_bytes((out / "runs" / f"{a}-s{s}" / name).read_bytes())
    for label, contexts in views.items():
        for context in contexts:
            if not evaluated(out, settings, label, context):
                continue
            for folder in (Path(kind) / context / label for kind in ("eval", "sampled")):
                archive_folder(out / folder, dest / folder, with_memory)
    (dest / COMPARISON).write_bytes((out / COMPARISON).read_bytes())
    return seeds

