"""Learner comparison from one warm-up: MemPO vs GRPO vs a no-information control vs GRPO on the full context.

    python -m benchmarks.learners                  # 4 arms x 5 seeds, then the evaluation (hours; resumable)
    python -m benchmarks.learners --quick          # 1 seed, 4 steps, 10 episodes per cell: a first look
    python -m benchmarks.learners --arms mempo,grpo,control   # without the full-context baseline
    python -m benchmarks.learners --results-md benchmarks/RESULTS.md   # also fill its section and the record
    python -m benchmarks.learners --record-md RECORD --record-heading "## H"   # the record only, under ## H

Arms, all ``algorithms.mempo.Config`` with its defaults (so the same budget) and only ``algo``,
``context``, ``control`` and ``seed`` set here: ``mempo`` (memory view), ``grpo`` (memory view: the
memory advantage is the only difference), ``control`` (``grpo`` with its advantages shuffled within
groups, ``--control shuffled``: what the same updates do without information) and ``grpo-full`` (full
context: the no-memory baseline). Every arm starts from the same warm-up checkpoint, the one ``train``
itself would build, and seed s of every arm trains on the same questions with the same sampling seeds,
so arms compare paired by seed. Each arm x seed trains in ``OUT/runs/ARM-sSEED`` with the learner's own
resume and learning curve (``metrics.jsonl``, ``curve.jsonl``); a finished run is left as it is.

``benchmarks.run.evaluate`` then plays the warm-up (every arm's start, in both views) and every trained
policy on the same held-out questions (the test split of the learner's world and hops, the learner's
prompt, turn budget max(max_turns, 4 x objectives)): greedy at every horizon (``OUT/eval/VIEW/POLICY``)
and sampled at the rollout temperature at the training horizon, ``--samples`` episodes per question
(``OUT/sampled/VIEW/POLICY``), resumed episode by episode; ``--jobs`` runs and folders at once.
``--split validation`` plays the test questions of the next world instead, for tuning the learners
without looking at the evaluation questions.

The report (``report.md``, ``results.json``, ``curves.png``, ``f1_vs_objectives.png``,
``cost_vs_objectives.png``) says whether each learner learned (training reward against the control on
the same seeds, held-out sampled and greedy F1 and memory recall against the start and the control on
the same questions), MemPO − GRPO with its spread over seeds, and answers the paper's three questions
(spec section 10): (a) MemPO vs GRPO F1 at long horizons, (b) total tokens of the memory view vs the
full context, (c) how F1 falls as objectives grow.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import inspect
import json
import math
import os
import platform
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from agents.episode_log import load_done, read_episodes
from agents.statistics import METRICS, jsonable, mean_ci, summarize, units_to_resolve
from algorithms.compute import cpu_name
from algorithms.mempo import RESUMABLE, Config, load_checkpoint, train
from algorithms.sft import default_warmup
from benchmarks.report import CONFIG, BenchmarkError, Comparison, load_run, write_comparison
from benchmarks.report import EPISODES as EPISODE_LOG
from benchmarks.run import _int_list, evaluate
from mempo_env.env import MemSearchQAEnv
from mempo_env.tasks import make_generated_task
from mempo_env.types import QATask

ARMS = {"mempo": {"algo": "mempo", "context": "memory", "control": "none"},
        "grpo": {"algo": "grpo", "context": "memory", "control": "none"},
        "control": {"algo": "grpo", "context": "memory", "control": "shuffled"},
        "grpo-full": {"algo": "grpo", "context": "full", "control": "none"}}
LEARNERS = ("mempo", "grpo")  # measured against the control, which trains in their view on their questions
WARMUP, WARMUP_FULL = "warm-up", "warm-up (full)"
START = {arm: WARMUP_FULL if ARMS[arm]["context"] == "full" else WARMUP for arm in ARMS}  # each arm's start
POLICIES = (WARMUP, *ARMS)
RECALL = "episode_memory_recall"  # of the evidence an episode found, the share its last <mem> keeps
SEEDS, EPISODES, SAMPLES, OBJECTIVES, LONG_FROM = (0, 1, 2, 3, 4), 100, 4, (2, 4, 6, 8, 10), 6
QUICK = {"seeds": (0,), "steps": 4, "episodes": 10, "samples": 2, "objectives": (2, 6)}
# The comparison's own settings: Config fields it sets per arm, so an override of them is refused.
PER_ARM = ("algo", "context", "control", "seed", "policy", "run_dir", "resume", "eval_episodes")
# Evaluate with the prompt the learner trains with (its env's default).
TRAIN_PROMPT = inspect.signature(MemSearchQAEnv).parameters["prompt"].default
# Generation budget per evaluation turn: a memory that carries every answer grows with the horizon
# (the oracle's longest turn at 10 objectives is 207 of the tiny policy's tokens), whatever horizon
# the learner trained at.
EVAL_MAX_NEW_TOKENS = 256
SAMPLING_SEED = 1_000_003  # sample j of a policy draws from seed j x this (its agent advances it every turn)
COMPARISON = "comparison.json"
HEADING = "## 4. The learners against their control"  # of RESULTS.md, which shows the HEADLINE sections
HEADLINE = ("Learning: each arm against the control", "MemPO − GRPO")
RECORD, RECORD_HEADING = "docs/experiments/learner-comparison.md", "## The tables"  # the whole report
MARK = "<!-- benchmarks.learners: generated"  # the block write_results_section replaces
BEGIN = MARK + " from {out} by benchmarks.learners.write_results_section; write the reading outside it -->"
END = "<!-- benchmarks.learners: end -->"
TESTED_BY = "<!-- tested by tests/test_learner_docs.py::test_the_documented_learner_commands_parse -->"


def arm_configs(out: Path, seeds: Sequence[int], warmup: Path, base: Config,
                arms: Sequence[str] = tuple(ARMS)) -> dict[str, Config]:
    """Policy label -> its learner config; seed-major, so a partial comparison has every arm of seed 0."""
    return {f"{arm}-s{seed}": dataclasses.replace(base, **ARMS[arm], seed=seed, policy=str(warmup),
                                                  run_dir=str(out / "runs" / f"{arm}-s{seed}"), eval_episodes=0)
            for seed in seeds for arm in ARMS if arm in arms}


def check_run(cfg: Config) -> None:
    """Refuse a run folder trained with other settings (e.g. changed Config defaults or warm-up); what a
    resume may change (``RESUMABLE``: more steps, the evaluation, threads) it takes."""
    path = Path(cfg.run_dir) / "config.json"
    if path.exists():
        saved, now = json.loads(path.read_text()), json.loads(json.dumps(dataclasses.asdict(cfg)))
        # a field newer than the folder had its default there
        saved = {**json.loads(json.dumps(dataclasses.asdict(Config()))), **saved}
        changed = "; ".join(f"{k}: {saved.get(k)!r} there, {v!r} now" for k, v in now.items()
                            if saved.get(k) != v and k not in (*RESUMABLE, "run_dir"))  # a moved run is the same
        if changed:
            raise BenchmarkError(f"{cfg.run_dir} holds a run with other settings ({changed}); use another --out")


def trained_checkpoint(cfg: Config) -> Path:
    """Train (or resume) one arm x seed; a run whose checkpoint is at ``cfg.steps`` is not started."""
    ckpt = load_checkpoint(Path(cfg.run_dir))
    if ckpt is None or json.loads((ckpt / "step.json").read_text())["step"] < cfg.steps:
        train(cfg)
        ckpt = load_checkpoint(Path(cfg.run_dir))
    return ckpt


def played(path: Path) -> list[dict[str, Any]]:
    """The complete episodes of a log, read without writing to it: ``archive`` runs while other processes
    are still writing their folders, and ``load_done`` would cut a torn last line off under its writer."""
    return read_episodes(path) if path.exists() else []


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
    transcripts, gzipped (about 0.3 KB an episode). ``compare(..., archive_dir=dest)`` on a fresh machine
    restores them and plays only what is missing. Returns the seeds archived."""
    out, dest = Path(out_dir), Path(dest)
    dest.mkdir(parents=True, exist_ok=True)  # called after every task, before any seed may be finished
    settings = json.loads((out / COMPARISON).read_text())["settings"]
    arms = settings.get("arms", list(ARMS))
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
                (dest / folder).mkdir(parents=True, exist_ok=True)
                (dest / folder / CONFIG).write_bytes((out / folder / CONFIG).read_bytes())
                lines = "".join(json.dumps({k: v for k, v in r.items() if k != "trajectory"}) + "\n"
                                for r in played(out / folder / EPISODE_LOG))
                (dest / folder / (EPISODE_LOG + ".gz")).write_bytes(gzip.compress(lines.encode(), mtime=0))
    (dest / COMPARISON).write_bytes((out / COMPARISON).read_bytes())
    return seeds


def restore(dest: str | Path, out_dir: str | Path) -> list[str]:
    """Copy into a comparison folder what an ``archive`` holds and the folder lacks (a run or an
    evaluation folder it has is left as it is); returns the folders restored."""
    dest, out = Path(dest), Path(out_dir)
    restored = []
    for folder in sorted({p.parent.relative_to(dest) for p in dest.glob("*/**/config.json")}):
        if (out / folder).exists():
            continue
        (out / folder).mkdir(parents=True)
        for path in (dest / folder).iterdir():
            data = path.read_bytes()
            name = path.name.removesuffix(".gz")
            (out / folder / name).write_bytes(gzip.decompress(data) if path.suffix == ".gz" else data)
        restored.append(str(folder))
    return restored


def eval_task(split: str, cfg: Config) -> QATask:
    """Held-out questions of the world and hops the learners train on; ``validation``: the next world's."""
    if split not in ("test", "validation"):
        raise BenchmarkError(f"split must be 'test' or 'validation', not {split!r}")
    return make_generated_task("test", seed=cfg.task_seed + (split == "validation"), hops=cfg.hops)


def _pool(jobs: int) -> Any:
    """``jobs`` processes, each with its share of this process's torch threads: two evaluations of two
    threads each on 2 cores played 2.6x slower than with one thread each (OpenMP threads spinning for a core)."""
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    import torch

    share = max(1, torch.get_num_threads() // jobs)
    return ProcessPoolExecutor(jobs, mp_context=get_context("spawn"), initializer=torch.set_num_threads,
                               initargs=(share,))


def in_parallel(jobs: int, calls: list[tuple[Any, ...]]) -> list[Any]:
    """``[f(*args) for f, *args in calls]``, ``jobs`` processes at a time (each call is independent:
    its own folder, its own resume), or in this process for one job."""
    if jobs == 1:
        return [f(*args) for f, *args in calls]
    with _pool(jobs) as pool:
        return [future.result() for future in [pool.submit(*call) for call in calls]]


@dataclasses.dataclass(frozen=True)
class Task:
    """One training run or evaluation folder of a comparison. ``call`` builds its ``(f, *args)`` when it
    starts (an evaluation needs the checkpoint its training leaves), once the tasks named in ``needs`` are done."""
    name: str
    call: Callable[[], tuple[Any, ...]]
    needs: tuple[str, ...] = ()


def run_tasks(jobs: int, tasks: Sequence[Task], done: Callable[[str], Any] | None = None) -> None:
    """Run every task, ``jobs`` processes at a time (in this process for one job); whenever a process is
    free it takes the first task in list order whose ``needs`` are done, and ``done(name)`` follows each
    task's end. Listed seed by seed, a seed's evaluations go before the next seed's training, so each
    seed is finished (and archived by ``done``) as early as the cores allow, with no process idle while
    a group's slowest run ends. A task that fails stops the comparison once the running ones have ended."""
    waiting, running, finished = list(tasks), {}, set()
    names = {t.name for t in tasks}
    if unknown := sorted({n for t in tasks for n in t.needs} - names):
        raise BenchmarkError(f"tasks need {unknown}, which are not tasks")

    def start() -> tuple[Any, ...] | None:
        task = next((t for t in waiting if finished.issuperset(t.needs)), None)
        if task is None:
            return None
        waiting.remove(task)
        return task.name, *task.call()

    def end(name: str) -> None:
        finished.add(name)
        if done:
            done(name)

    if jobs == 1:
        while next_call := start():
            name, f, *args = next_call
            f(*args)
            end(name)
    else:
        from concurrent.futures import FIRST_COMPLETED, wait

        with _pool(jobs) as pool:
            while True:
                while len(running) < jobs and (next_call := start()):
                    name, f, *args = next_call
                    running[pool.submit(f, *args)] = name
                if not running:
                    break
                ended, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in ended:
                    future.result()
                    end(running.pop(future))
    if waiting:
        raise BenchmarkError(f"tasks {[t.name for t in waiting]} need each other")


def compare(out_dir: str | Path = "runs/learners", *, seeds: Sequence[int] = SEEDS, episodes: int = EPISODES,
            samples: int = SAMPLES, objectives: Sequence[int] = OBJECTIVES, split: str = "test",
            warmup: str | Path | None = None, long_from: int = LONG_FROM, learner: Mapping[str, Any] | None = None,
            arms: Sequence[str] = tuple(ARMS), jobs: int = 1, archive_dir: str | Path | None = None,
            command: str | None = None, verbose: bool = True) -> dict[str, Any]:
    """Train every arm x seed, evaluate them and the warm-up, write the report; return ``report``'s result.

    ``learner``: ``Config`` fields other than the per-arm ones (e.g. ``{"steps": 2}``), the same for
    every arm. ``warmup``: the start checkpoint (default: ``default_warmup`` for the learner's world).
    ``samples``: sampled episodes per question at the training horizon (``Config.objectives``).
    ``arms``: the arms to train (default all of ``ARMS``; the warm-up is evaluated in their views only).
    ``jobs``: runs (and evaluation folders) at once, each in a process of its own: a run with one torch
    thread unless ``learner`` sets ``threads``, an evaluation with its share of this process's threads.
    Seed by seed: whenever a process is free it takes the first seed's next run or, once a run is done,
    its evaluation folders, before the next seed's runs (``run_tasks``), so that an interrupted
    comparison holds finished seeds (a report over them: ``report`` of a copy whose ``comparison.json``
    lists those seeds) rather than trained runs nobody has evaluated, and no process waits for a group's
    slowest run.
    ``archive_dir``: restore the finished seeds kept there (``restore``) before anything runs, and keep each
    seed there once evaluated (``archive``, as the seed's last task ends), so that a comparison longer than
    a machine's life goes on from a committed folder.
    """
    start = time.perf_counter()
    out = Path(out_dir)
    learner = dict(learner or {})
    if bad := sorted(set(learner) & set(PER_ARM)):
        raise BenchmarkError(f"learner settings {bad} are set per arm by the comparison")
    try:
        base = Config(**learner)
    except (TypeError, ValueError) as e:
        raise BenchmarkError(f"learner settings: {e}") from None
    if base.dataset != "generated":  # it evaluates on eval_task's generated questions
        raise BenchmarkError(f"the comparison trains on the generated task, not dataset {base.dataset!r}")
    seeds, objectives = list(seeds), list(objectives)
    if unknown := sorted(set(arms) - set(ARMS)):
        raise BenchmarkError(f"unknown arms {unknown}; the arms are {', '.join(ARMS)}")
    arms = [arm for arm in ARMS if arm in arms]  # in ARMS' order, each once
    if not arms:
        raise BenchmarkError("no arm to train")
    if not seeds or len(set(seeds)) < len(seeds) or any(s < 0 for s in seeds):
        raise BenchmarkError(f"seeds must be distinct non-negative integers, got {seeds}")
    if episodes < 1 or samples < 1 or jobs < 1:
        raise BenchmarkError(f"episodes, samples and jobs must be at least 1, got {episodes}, {samples}, {jobs}")
    if jobs > 1 and "threads" not in learner:
        base = dataclasses.replace(base, threads=1)
    if not objectives or len(set(objectives)) < len(objectives) or min(objectives) < 1:
        raise BenchmarkError(f"objectives must be distinct positive integers, got {objectives}")
    task = eval_task(split, base)
    if max(*objectives, base.objectives) > len(task.questions):  # checked now, not after hours of training
        raise BenchmarkError(f"{max(objectives)} objectives but {task.name} has {len(task.questions)} questions")

    from transformers import AutoConfig

    warmup = Path(warmup) if warmup else default_warmup(base.task_seed, base.hops)
    # A prompt past the policy's window ends its episode unanswered, as an engine would refuse it.
    max_context = AutoConfig.from_pretrained(warmup).max_position_embeddings - EVAL_MAX_NEW_TOKENS
    configs = arm_configs(out, seeds, warmup, base, arms)
    if archive_dir and Path(archive_dir).is_dir():
        restored = restore(archive_dir, out)
        if verbose and restored:
            print(f"restored {len(restored)} folders from {archive_dir}")
    for cfg in configs.values():  # before any training: a mismatch found late would waste hours
        check_run(cfg)
    previous = json.loads((out / COMPARISON).read_text()) if (out / COMPARISON).exists() else {}
    info = {"settings": {"seeds": seeds, "episodes": episodes, "samples": samples, "objectives": objectives,
                         "sampled_objectives": [base.objectives], "arms": arms, "split": split, "task": task.name,
                         "long_from": long_from, "warmup": str(warmup), "prompt": TRAIN_PROMPT,
                         "max_new_tokens": EVAL_MAX_NEW_TOKENS, "max_context_tokens": max_context,
                         "learner": dataclasses.asdict(base)},
            "command": command or "benchmarks.learners.compare (library call)",
            "wall_s": previous.get("wall_s", 0.0), "machine": machine(), "commit": commit()}
    out.mkdir(parents=True, exist_ok=True)
    (out / COMPARISON).write_text(json.dumps(info, indent=1))

    greedy = f"hf:{{}}#max_new_tokens={EVAL_MAX_NEW_TOKENS}"
    sampled = f"{greedy}#temperature={base.temperature}#seed={{}}"
    common = dict(dataset=task, episodes=episodes, prompt=TRAIN_PROMPT, max_turns=base.max_turns, tokenizer=str(warmup),
                  max_context_tokens=max_context, plots=False, verbose=verbose and jobs == 1)

    def evaluation(kind: str, label: str, context: str, path: Path | None = None) -> tuple[Any, ...]:
        """One resumable folder: ``eval`` greedy at every horizon, ``sampled`` at the training horizon; a
        trained arm plays the checkpoint its run left (``path`` None)."""
        path = path or load_checkpoint(Path(configs[label].run_dir))
        if kind == "eval":
            return (partial(evaluate, out_dir=out / kind / context / label, contexts=[context],
                            objectives=objectives, **common), {label: greedy.format(path)})
        return (partial(evaluate, out_dir=out / kind / context / label, contexts=[context],
                        objectives=[base.objectives], **common),
                {f"{label}~{j}": sampled.format(path, j * SAMPLING_SEED) for j in range(1, samples + 1)})

    starts = [Task(f"{kind}/{context}/{WARMUP}", partial(evaluation, kind, WARMUP, context, warmup))
              for context in dict.fromkeys(ARMS[a]["context"] for a in arms)
              if not evaluated(out, info["settings"], WARMUP, context) for kind in ("eval", "sampled")]
    tasks: list[Task] = []
    left: list[set[str]] = []  # each seed's unfinished tasks: archived when none is left
    for seed in seeds:  # a seed's runs, then (the warm-up after the first seed's) its evaluations
        labels = [label for label, cfg in configs.items() if cfg.seed == seed
                  and not evaluated(out, info["settings"], label, cfg.context)]
        mine = [Task(label, lambda cfg=configs[label]: (trained_checkpoint, cfg)) for label in labels]
        mine += starts if seed == seeds[0] else []
        mine += [Task(f"{kind}/{configs[label].context}/{label}",
                      partial(evaluation, kind, label, configs[label].context), needs=(label,))
                 for label in labels for kind in ("eval", "sampled")]
        tasks += mine
        left.append({t.name for t in mine})

    def seed_done(name: str) -> None:
        for names in left:
            if name in names:
                names.discard(name)
                if not names and archive_dir:
                    archive(out, archive_dir)

    run_tasks(jobs, tasks, done=seed_done)

    info["wall_s"] += time.perf_counter() - start
    (out / COMPARISON).write_text(json.dumps(info, indent=1))
    result = report(out)
    if verbose:
        print(result["markdown"])
    return result


# ---- the report: learning against the control and the start, MemPO − GRPO, the three questions ----
def load_records(out: Path, settings: dict[str, Any]) -> list[dict[str, Any]]:
    """The comparison's episodes (its seeds, horizons and episode count), ``agent`` set to the arm (the
    warm-up in the full context: ``WARMUP_FULL``), ``kind`` greedy or sampled."""
    records = []
    for kind, folder, horizons in (("greedy", "eval", settings["objectives"]),
                                   ("sampled", "sampled", settings["sampled_objectives"])):
        for context in ("memory", "full"):
            if not (out / folder / context).is_dir():  # a view none of the comparison's arms trains in
                continue
            for r in (r for run in sorted((out / folder / context).iterdir()) for r in load_run(run)[1]):
                m = re.fullmatch(r"(.+?)(?:-s(\d+))?(?:~(\d+))?", r["agent"])
                arm, seed = m[1], None if m[2] is None else int(m[2])
                if arm == WARMUP and context == "full":
                    arm = WARMUP_FULL
                if ((seed in settings["seeds"] or seed is None) and r["objectives"] in horizons
                        and r["episode"] < settings["episodes"]
                        and (m[3] is None or int(m[3]) <= settings.get("samples", 0))):
                    records.append({**r, "policy": r["agent"], "agent": arm, "train_seed": seed, "kind": kind})
    return records


def load_runs(out: Path, settings: dict[str, Any]) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Each arm x seed's training log: ``metrics`` (a line per step) and ``curve`` (held-out F1 every
    ``eval_every`` steps), keyed ``ARM-sSEED``."""
    return {f"{arm}-s{seed}": {name: load_done(out / "runs" / f"{arm}-s{seed}" / f"{name}.jsonl")
                               for name in ("metrics", "curve")}
            for arm in ARMS for seed in settings["seeds"]}


# Paired F1 differences in table (a): MemPO against GRPO, and each memory-view arm against its start.
DIFFERENCES = (("mempo", "grpo"), ("mempo", WARMUP), ("grpo", WARMUP), ("control", WARMUP))
Cell = tuple[float, float] | None  # (mean, 95% half-width); None where a policy has no episodes


def seed_averaged(records: list[dict[str, Any]], metrics: Sequence[str] = METRICS) -> list[dict[str, Any]]:
    """One record per arm, horizon and question, each of ``metrics`` averaged over the arm's training seeds:
    every seed plays the same questions, so 3 seeds x 100 episodes are 100 questions, not 300 draws."""
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in records:
        groups.setdefault((r["agent"], r["objectives"], r["episode"]), []).append(r)
    averaged = []
    for rs in groups.values():
        row = {k: rs[0][k] for k in ("agent", "context", "objectives", "episode") if k in rs[0]}
        # a recall is None in an episode that found no evidence: averaged over the seeds that found some
        values = {m: [float(r[m]) for r in rs if r[m] is not None] for m in metrics if all(m in r for r in rs)}
        row.update({m: math.fsum(v) / len(v) if v else None for m, v in values.items()})
        averaged.append(row)
    return averaged


def per_episode(records: list[dict[str, Any]], arm: str, k: int, metric: str = "f1") -> dict[int, float | None]:
    """An arm's ``metric`` per evaluation question at ``k`` objectives, averaged over its training seeds."""
    mine = [r for r in records if r["agent"] == arm and r["objectives"] == k]
    return {r["episode"]: r.get(metric) for r in seed_averaged(mine, (metric,))}  # None: not measured


def cell(records: list[dict[str, Any]], arm: str, k: int, metric: str = "f1") -> Cell:
    """``metric``'s mean and interval over the questions (a question where it is undefined, a recall where
    no seed found evidence, is left out)."""
    values = [v for v in per_episode(records, arm, k, metric).values() if v is not None]
    return mean_ci(values) if values else None


def paired(records: list[dict[str, Any]], a: str, b: str, k: int, metric: str = "f1") -> Cell:
    """``metric`` of ``a`` minus ``b`` per question (each averaged over its seeds), on the questions where
    both have it."""
    first, second = per_episode(records, a, k, metric), per_episode(records, b, k, metric)
    diffs = [first[e] - second[e] for e in sorted(first.keys() & second.keys())
             if first[e] is not None and second[e] is not None]
    return mean_ci(diffs) if diffs else None


def average(cells: list[Cell]) -> Cell:
    """The mean of several horizons' means, their half-widths combined as independent: pooling the
    episodes instead would count the spread between horizons as noise."""
    if not cells or None in cells:
        return None
    return math.fsum(m for m, _ in cells) / len(cells), math.hypot(*(c for _, c in cells)) / len(cells)


def fewer(mem: Cell, full: Cell) -> Cell:
    """``1 - mem / full`` with a delta-method 95% half-width (independent means)."""
    if mem is None or full is None or not full[0] or not mem[0]:
        return None
    ratio = mem[0] / full[0]
    return 1 - ratio, ratio * math.hypot(mem[1] / mem[0], full[1] / full[0])


def change(a: Cell, b: Cell) -> Cell:
    """``b - a`` for two cells of different episodes (independent)."""
    return None if a is None or b is None else (b[0] - a[0], math.hypot(a[1], b[1]))


def one_seed(records: list[dict[str, Any]], seed: int) -> list[dict[str, Any]]:
    """The episodes of training seed ``seed``'s policies and of the warm-up (seed None: every seed's start)."""
    return [r for r in records if r["train_seed"] in (seed, None)]


def over_seeds(values: Mapping[int, float | None]) -> Cell:
    """Mean and 95% Student-t half-width over training seeds (the runs are the independent unit)."""
    got = [v for v in values.values() if v is not None]
    return mean_ci(got) if got else None


def question_tables(records: list[dict[str, Any]], objectives: Sequence[int], long_from: int) -> dict[str, list]:
    """Rows of tables (a), (b), (c): ``{"objectives": label, column: Cell}``; a row over several
    horizons averages their cells."""
    ks = sorted(objectives)
    f1 = {(arm, k): cell(records, arm, k) for arm in (*POLICIES, WARMUP_FULL) for k in ks}
    tt = {(arm, k): cell(records, arm, k, "total_tokens") for arm in ARMS for k in ks}
    # Differences are paired per question on each training seed's policies, and their interval is over
    # the seeds, as in ``learning_tables``.
    seeds = sorted({r["train_seed"] for r in records} - {None})
    by_seed = {(a, b, k, s): paired(one_seed(records, s), a, b, k) for a, b in DIFFERENCES for k in ks for s in seeds}

    def seed_means(a: str, b: str, kk: list[int]) -> dict[int, float | None]:
        """Each training seed's ``a - b``, the mean over the horizons ``kk``."""
        cells = {s: average([by_seed[a, b, k, s] for k in kk]) for s in seeds}
        return {s: None if c is None else c[0] for s, c in cells.items()}

    def a_row(name: str, kk: list[int]) -> dict[str, Any]:
        row = {"objectives": name, **{arm: average([f1[arm, k] for k in kk]) for arm in POLICIES}}
        for a, b in DIFFERENCES:
            row[f"{a} - {b} by seed"] = seed_means(a, b, kk)
            row[f"{a} - {b}"] = over_seeds(row[f"{a} - {b} by seed"])
        return row

    def b_row(name: str, kk: list[int]) -> dict[str, Any]:
        row = {"objectives": name, **{arm: average([tt[arm, k] for k in kk]) for arm in ARMS}}
        return {**row, "mempo fewer": fewer(row["mempo"], row["grpo-full"]),
                "grpo fewer": fewer(row["grpo"], row["grpo-full"])}

    long = [k for k in ks if k >= long_from]
    several = len(ks) > 1
    a = [a_row(str(k), [k]) for k in long] + ([a_row(f"{long[0]}-{long[-1]}", long)] if len(long) > 1 else [])
    b = [b_row(str(k), [k]) for k in ks] + ([b_row("all", ks)] if several else [])
    c = [{"objectives": str(k), **{arm: f1[arm, k] for arm in (*POLICIES, WARMUP_FULL)}} for k in ks]
    if several:
        c.append({"objectives": f"change {ks[0]}→{ks[-1]}", "difference": True,
                  **{arm: change(f1[arm, ks[0]], f1[arm, ks[-1]]) for arm in (*POLICIES, WARMUP_FULL)}})
    return {"a": a, "b": b, "c": c}


def late_mean(lines: list[dict[str, Any]], steps: int, key: str = "reward") -> float | None:
    """A run's ``key`` (its training reward, or its rollouts' ``memory_recall``) over the second half of
    its steps (step 1 of every arm of a seed is the same rollouts from the same weights; the arms part
    as their updates do); None for an unfinished run or a log without it."""
    late = [m[key] for m in lines if m["step"] > steps // 2 and m.get(key) is not None]
    return math.fsum(late) / len(late) if late and max(m["step"] for m in lines) >= steps else None


def learning_tables(records: list[dict[str, Any]], runs: Mapping[str, Mapping[str, list]],
                    settings: dict[str, Any]) -> dict[str, list]:
    """``learning``: per arm, the training reward against the control (paired by seed), held-out sampled
    F1 at the training horizon and greedy F1 at the long horizons, and the memory recall of both
    (``episode_memory_recall``: the share of the evidence found that the last ``<mem>`` keeps), each
    against the start and the control; ``mempo_grpo``: MemPO − GRPO on the same measures, with each
    training seed's value. Rows hold ``Cell``s and ``{seed: value}`` spreads.

    Every difference is taken per training seed (held out: paired per question on that seed's policies)
    and its interval is over the seeds, the independent unit: an interval over questions of the
    seed-averaged differences treats the trained policies as fixed and hides the spread between runs
    (three seeds of −10.4, +3.8 and −10.0 sampled F1 points gave −5.6 ± 4.7 per question)."""
    steps, seeds = settings["learner"]["steps"], settings["seeds"]
    k = settings["sampled_objectives"][0]
    long = [h for h in settings["objectives"] if h >= settings["long_from"]]
    greedy = [r for r in records if r["kind"] == "greedy"]
    sampled = [r for r in records if r["kind"] == "sampled"]
    late = {key: {arm: {s: late_mean(runs[f"{arm}-s{s}"]["metrics"], steps, key) for s in seeds} for arm in ARMS}
            for key in ("reward", "memory_recall")}
    reward = late["reward"]

    def seed_diff(a: str, b: str, key: str = "reward") -> dict[int, float | None]:
        x = late[key]
        return {s: None if x[a][s] is None or x[b][s] is None else x[a][s] - x[b][s] for s in seeds}

    def sampled_diff(rs: list[dict[str, Any]], a: str, b: str, metric: str = "f1") -> Cell:
        return paired(rs, a, b, k, metric)

    def greedy_diff(rs: list[dict[str, Any]], a: str, b: str, metric: str = "f1") -> Cell:
        return average([paired(rs, a, b, h, metric) for h in long]) if long else None

    def per_seed(diff: Callable[..., Cell], rs: list[dict[str, Any]], a: str, b: str,
                 metric: str = "f1") -> dict[int, float | None]:
        return {s: None if (c := diff(one_seed(rs, s), a, b, metric)) is None else c[0] for s in seeds}

    def greedy_cell(arm: str, metric: str = "f1") -> Cell:
        return average([cell(greedy, arm, h, metric) for h in long]) if long else None

    def held_out(arm: str, against: Mapping[str, str | None]) -> dict[str, Cell]:
        """``sampled``/``greedy`` F1 and their ``recall``, and each minus ``against``'s policies per
        question (``{"start": ..., "control": ...}``; a None policy: not compared)."""
        row: dict[str, Cell] = {}
        for suffix, metric in (("", "f1"), (" recall", RECALL)):
            row[f"sampled{suffix}"], row[f"greedy{suffix}"] = cell(sampled, arm, k, metric), greedy_cell(arm, metric)
            for name, other in against.items():
                if other:
                    row[f"sampled{suffix} - {name}"] = over_seeds(per_seed(sampled_diff, sampled, arm, other, metric))
                    row[f"greedy{suffix} - {name}"] = over_seeds(per_seed(greedy_diff, greedy, arm, other, metric))
                else:
                    row[f"sampled{suffix} - {name}"] = row[f"greedy{suffix} - {name}"] = None
        return row

    rows = []
    for arm in settings.get("arms", ARMS):  # a comparison made before arms could be chosen had them all
        learner = arm in LEARNERS
        rows.append({
            "arm": arm, "reward": over_seeds(reward[arm]),
            "reward - control": over_seeds(seed_diff(arm, "control")) if learner else None,
            "reward - control by seed": seed_diff(arm, "control") if learner else {},
            "training recall": over_seeds(late["memory_recall"][arm]),
            "training recall - control": over_seeds(seed_diff(arm, "control", "memory_recall")) if learner else None,
            **held_out(arm, {"start": START[arm], "control": "control" if learner else None})})
    rows += [{"arm": start, **held_out(start, {})} for start in (WARMUP, WARMUP_FULL)
             if any(r["agent"] == start for r in records)]
    measures = [("training reward (2nd half of the steps)", seed_diff("mempo", "grpo"), 1),
                (f"held-out sampled F1 % at {k} objectives", per_seed(sampled_diff, sampled, "mempo", "grpo"), 100),
                ("training memory recall % (2nd half of the steps)", seed_diff("mempo", "grpo", "memory_recall"), 100),
                (f"held-out sampled memory recall % at {k} objectives",
                 per_seed(sampled_diff, sampled, "mempo", "grpo", RECALL), 100)]
    if long:
        span = f"{long[0]}-{long[-1]}"
        measures += [(f"held-out greedy F1 % at {span} objectives",
                      per_seed(greedy_diff, greedy, "mempo", "grpo"), 100),
                     (f"held-out greedy memory recall % at {span} objectives",
                      per_seed(greedy_diff, greedy, "mempo", "grpo", RECALL), 100)]
    mempo_grpo = [{"measure": name, "mempo - grpo": over_seeds(by_seed), "by seed": by_seed, "scale": scale,
                   "seeds to resolve": units_to_resolve([v for v in by_seed.values() if v is not None])}
                  for name, by_seed, scale in measures]
    return {"learning": rows, "mempo_grpo": mempo_grpo}


def half_width(half: float, scale: float, digits: int) -> str:
    """An interval's half-width, or "–" where one value (one seed, one question) leaves it undefined."""
    return "–" if math.isnan(half) else f"{half * scale:.{digits}f}"


def signed(value: Cell, scale: float, digits: int) -> str:
    return "–" if value is None else f"{value[0] * scale:+.{digits}f} ± {half_width(value[1], scale, digits)}"


def verdict(value: Cell) -> str:
    if value is None:
        return "not measured"
    if math.isnan(value[1]):
        return "no interval from one value"
    return ("inside its interval" if not abs(value[0]) > value[1]
            else f"{'positive' if value[0] > 0 else 'negative'} beyond its interval")


def held_out_cells(row: dict[str, Any], suffix: str) -> list[str]:
    """A learning row's sampled and greedy cells (F1, or ``suffix`` " recall"), each then − start, − control, in %."""
    return [part for kind in ("sampled", "greedy") for part in (
        "–" if row.get(kind + suffix) is None else text(row[kind + suffix], 100, 1, bounded=True),
        signed(row.get(f"{kind}{suffix} - start"), 100, 1), signed(row.get(f"{kind}{suffix} - control"), 100, 1))]


def learning_markdown(tables: dict[str, list], settings: dict[str, Any]) -> list[str]:
    """The learning and MemPO − GRPO tables, then a verdict line per target."""
    k = settings["sampled_objectives"][0]
    long = [h for h in settings["objectives"] if h >= settings["long_from"]]
    span = f"{long[0]}-{long[-1]}" if long else "–"
    lines = ["", "### Learning: each arm against the control (same seeds and questions) and its start", "",
             f"| arm | training reward, 2nd half | − control (paired by seed) | by seed | sampled F1 % at {k} "
             f"| − start | − control | greedy F1 % at {span} | − start | − control |", "|---" * 11 + "|"]
    for row in tables["learning"]:
        by_seed = ", ".join(f"{v:+.2f}" for v in row.get("reward - control by seed", {}).values() if v is not None)
        reward = row.get("reward")
        lines.append(" | ".join([
            f"| {row['arm']}", "–" if reward is None else f"{reward[0]:.2f} ± {half_width(reward[1], 1, 2)}",
            signed(row.get("reward - control"), 1, 2), by_seed or "–", *held_out_cells(row, "")]) + " |")
    lines += ["", "### Memory recall: each arm against the control and its start", "",
              "Of the gold evidence an episode found, the share its last `<mem>` keeps "
              "(`episode_memory_recall`; an episode that found none is left out), %.", "",
              f"| arm | training rollouts, 2nd half | − control (paired by seed) | sampled at {k} | − start "
              f"| − control | greedy at {span} | − start | − control |", "|---" * 9 + "|"]
    for row in tables["learning"]:
        lines.append(" | ".join([
            f"| {row['arm']}",
            "–" if row.get("training recall") is None else text(row["training recall"], 100, 1, bounded=False),
            signed(row.get("training recall - control"), 100, 1), *held_out_cells(row, " recall")]) + " |")
    lines += ["", "### MemPO − GRPO", "",
              "Last column: how many training seeds like these a mean of this size needs before its 95% interval "
              "over seeds excludes 0 (`agents.statistics.units_to_resolve`; –: a zero mean, one seed, or over "
              "10,000).",
              "", "| measure | mempo − grpo | by training seed | seeds to clear 0 |", "|---|---|---|---|"]
    for row in tables["mempo_grpo"]:
        digits = 2 if row["scale"] == 1 else 1
        spread = ", ".join(f"{v * row['scale']:+.{digits}f} (seed {s})" for s, v in row["by seed"].items()
                           if v is not None)
        needed = row.get("seeds to resolve")
        lines.append(f"| {row['measure']} | {signed(row['mempo - grpo'], row['scale'], digits)} | {spread or '–'} "
                     f"| {'–' if needed is None else needed} |")
    lines.append("")
    rows = {row["arm"]: row for row in tables["learning"]}
    for arm in (arm for arm in LEARNERS if arm in rows):
        row = rows[arm]
        lines += [f"- {arm}: training reward − control {signed(row['reward - control'], 1, 2)} "
                  f"({verdict(row['reward - control'])}); held-out sampled F1 at {k} objectives − start "
                  f"{signed(row['sampled - start'], 100, 1)} points ({verdict(row['sampled - start'])}); greedy F1 "
                  f"at {span} objectives − start {signed(row['greedy - start'], 100, 1)} points "
                  f"({verdict(row['greedy - start'])}); sampled memory recall at {k} objectives − start "
                  f"{signed(row['sampled recall - start'], 100, 1)} points ({verdict(row['sampled recall - start'])})."]
    for row in tables["mempo_grpo"]:
        lines.append(f"- mempo − grpo, {row['measure']}: {signed(row['mempo - grpo'], row['scale'], 2)} "
                     f"({verdict(row['mempo - grpo'])}).")
    return lines


# (title, columns: (key, header, scale, digits))
TABLES = {
    "a": ("(a) MemPO vs GRPO at long horizons: F1 %", [
        ("mempo", "mempo", 100, 1), ("grpo", "grpo", 100, 1), ("mempo - grpo", "mempo − grpo (paired)", 100, 1),
        ("control", "control", 100, 1), ("grpo-full", "grpo-full (full context)", 100, 1), (WARMUP, WARMUP, 100, 1),
        (f"mempo - {WARMUP}", "mempo − warm-up (paired)", 100, 1),
        (f"grpo - {WARMUP}", "grpo − warm-up (paired)", 100, 1),
        (f"control - {WARMUP}", "control − warm-up (paired)", 100, 1)]),
    "b": ("(b) Total tokens (TT) per episode: memory view vs full context", [
        ("mempo", "mempo (memory)", 1, 0), ("grpo", "grpo (memory)", 1, 0), ("grpo-full", "grpo-full (full)", 1, 0),
        ("mempo fewer", "mempo: % fewer than grpo-full", 100, 1),
        ("grpo fewer", "grpo: % fewer than grpo-full", 100, 1)]),
    "c": ("(c) F1 % as objectives grow (last row: the change from fewest to most)", [
        (WARMUP, "warm-up (memory)", 100, 1), ("mempo", "mempo (memory)", 100, 1), ("grpo", "grpo (memory)", 100, 1),
        ("control", "control (memory)", 100, 1), (WARMUP_FULL, "warm-up (full)", 100, 1),
        ("grpo-full", "grpo-full (full)", 100, 1)]),
}


def text(value: tuple[float, float], scale: float, digits: int, bounded: bool) -> str:
    """A cell: a policy's mean with its interval cut to the metric's range (F1 in [0, 1], tokens >= 0),
    or a difference or change as mean ± half-width (it may be negative)."""
    mean, half = value
    if not bounded:
        return f"{mean * scale:.{digits}f} ± {half_width(half, scale, digits)}"
    if math.isnan(half):
        return f"{mean * scale:.{digits}f} [–]"
    low, high = max(mean - half, 0.0), mean + half if scale == 1 else min(mean + half, 1.0)
    return f"{mean * scale:.{digits}f} [{low * scale:.{digits}f}, {high * scale:.{digits}f}]"


def markdown(tables: dict[str, list], settings: dict[str, Any]) -> str:
    lines = [describe(settings), "",
             f"F1 and token cells: each of the {settings['episodes']} evaluation questions per horizon scored "
             f"by an arm's {len(settings['seeds'])} training seeds averaged (and, sampled, its episodes), then "
             f"mean [95% Student-t interval over the questions, cut to the metric's range]; differences: "
             f"each training seed's policies paired per question, then mean ± 95% Student-t half-width over "
             f"the training seeds; rows over several horizons: the mean of their means; % fewer and changes: "
             f"± half-widths combined from the cells (independent). Training reward: each run's mean rollout "
             f"reward over the second half of its steps, mean ± 95% Student-t half-width over the training "
             f"seeds; against the control, the per-seed differences (the control of seed s trains on seed s's "
             f"questions)."]
    if "learning" in tables:
        lines += learning_markdown(tables, settings)
    for name, (title, columns) in TABLES.items():
        lines += ["", f"### {title}", ""]
        if not tables[name]:
            lines.append(f"No evaluated horizon reaches {settings['long_from']} objectives.")
            continue
        columns = [c for c in columns if any(row[c[0]] is not None for row in tables[name])]  # the arms compared
        lines += ["| objectives | " + " | ".join(h for _, h, _, _ in columns) + " |", "|---" * (len(columns) + 1) + "|"]
        for row in tables[name]:
            cells = ["–" if row[key] is None else
                     text(row[key], s, d, bounded=key in (*POLICIES, WARMUP_FULL) and not row.get("difference"))
                     for key, _, s, d in columns]
            lines.append(f"| {row['objectives']} | " + " | ".join(cells) + " |")
    last = tables["a"][-1] if tables["a"] else {}
    verdicts = []
    for a, b in DIFFERENCES:
        if (d := last.get(f"{a} - {b}")) is not None:
            seeds = ", ".join(f"{100 * v:+.1f} (seed {s})" for s, v in last[f"{a} - {b} by seed"].items()
                              if v is not None)
            verdicts.append(f"- At {last['objectives']} objectives {a} − {b} is {signed(d, 100, 1)} F1 points: "
                            f"{verdict(d)}; by training seed {seeds}.")
    if verdicts:
        lines += ["", *verdicts]
    return "\n".join(lines)


def describe(settings: dict[str, Any]) -> str:
    """The budget and the evaluation in words, from the recorded settings."""
    c = settings["learner"]
    limit = settings.get("max_context_tokens")  # absent from comparisons made before the limit existed
    window = (f"an episode whose next prompt exceeds {limit} tokens ends unanswered (the policy's window less "
              f"that budget)" if limit else "no context limit")
    arms = settings.get("arms", list(ARMS))
    views = "; ".join(f"the warm-up, {', '.join(a for a in arms if ARMS[a]['context'] == context)} in {name}"
                      for context, name in (("memory", "the memory view"), ("full", "the full context"))
                      if any(ARMS[a]["context"] == context for a in arms))
    horizon = (f"{c['objectives']}-objective" if not c.get("min_objectives")
               else f"{c['min_objectives']}-{c['objectives']}-objective")
    return (f"Learners (`algorithms.mempo.Config`, the same for every arm): steps × question groups × rollouts "
            f"= {c['steps']} × {c['questions_per_step']} × {c['group_size']}, lr {c['lr']}, KL {c['kl_coef']}, "
            f"rollout temperature {c['temperature']}, {horizon} training episodes of {c['hops']}-hop questions "
            f"(world {c['task_seed']}), {c['max_turns']} turns, from the warm-up `{settings['warmup']}`; the "
            f"control is grpo with its advantages shuffled within groups. Evaluation (`benchmarks.run.evaluate`) "
            f"on `{settings['task']}`, training seeds {', '.join(map(str, settings['seeds']))}: "
            f"{settings['episodes']} questions per policy and horizon, greedy, and sampled at temperature "
            f"{c['temperature']} at {', '.join(map(str, settings['sampled_objectives']))} objectives, "
            f"{settings['samples']} episodes per question; prompt `{settings['prompt']}`, turn budget "
            f"max({c['max_turns']}, 4 × objectives); {views}; up to "
            f"{settings.get('max_new_tokens', c['max_new_tokens'])} new tokens per turn; {window}; TT in the "
            f"policy's tokens.")


def curve_series(runs: Mapping[str, Mapping[str, list]], arm: str, seeds: Sequence[int], log: str,
                 key: str) -> tuple[list[int], list[Cell]]:
    """Steps and, at each, ``key``'s mean and 95% interval over the seeds that logged it (``reward_avg`` of
    ``metrics``; ``sampled_f1`` or ``greedy_f1`` of ``curve``, whose values are (mean, half-width))."""
    by_step: dict[int, list[float]] = {}
    for s in seeds:
        for line in runs[f"{arm}-s{s}"][log]:
            if key in line:
                value = line[key]
                by_step.setdefault(line["step"], []).append(value[0] if isinstance(value, list) else value)
    steps = sorted(by_step)
    return steps, [mean_ci(by_step[t]) for t in steps]


def plot_curves(runs: Mapping[str, Mapping[str, list]], settings: dict[str, Any], path: Path) -> Path:
    """``curves.png``: per learner, the rollout reward's moving average and the held-out sampled and
    greedy F1 against steps, trained vs the control, bands: 95% intervals over the training seeds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    c, seeds = settings["learner"], settings["seeds"]
    rows = [("metrics", "reward_avg", f"rollout reward, moving average of {c.get('reward_window', 1)} steps"),
            ("curve", "sampled_f1", f"held-out sampled F1 (T={c['temperature']}), {c['objectives']} objectives"),
            ("curve", "greedy_f1", f"held-out greedy F1, {c['objectives']} objectives")]
    columns = [arm for arm in ("mempo", "grpo", "grpo-full") if arm in settings.get("arms", ARMS)]
    fig, axes = plt.subplots(len(rows), len(columns), figsize=(5 * len(columns), 3.2 * len(rows)), squeeze=False)
    for col, arm in enumerate(columns):
        for row, (log, key, label) in enumerate(rows):
            ax = axes[row][col]
            for name, color in ((arm, "C0"), ("control", "C7")) if arm in LEARNERS else ((arm, "C0"),):
                steps, cells = curve_series(runs, name, seeds, log, key)
                if not steps:
                    continue
                mean = [m for m, _ in cells]
                ax.plot(steps, mean, "-o", markersize=3, color=color, label=name)
                if not any(math.isnan(h) for _, h in cells):
                    ax.fill_between(steps, [m - h for m, h in cells], [m + h for m, h in cells], color=color,
                                    alpha=0.2, linewidth=0)
            ax.set_title(f"{arm}: {label}", fontsize=9)
            ax.set_xlabel("RL step")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
    fig.suptitle(f"Learning curves, {len(seeds)} training seeds per arm (line: their mean; band: 95% Student-t "
                 f"interval over the seeds)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def report(out_dir: str | Path) -> dict[str, Any]:
    """Rebuild ``results.json``, ``report.md`` and the plots of a comparison folder from its logs."""
    out = Path(out_dir)
    if not (out / COMPARISON).is_file():
        raise BenchmarkError(f"{out} is not a learner comparison: no {COMPARISON} in it")
    settings = json.loads((out / COMPARISON).read_text())["settings"]
    records, runs = load_records(out, settings), load_runs(out, settings)
    greedy = [r for r in records if r["kind"] == "greedy"]
    tables = {**learning_tables(records, runs, settings),
              **question_tables(greedy, settings["objectives"], settings["long_from"])}
    rows = summarize(seed_averaged(greedy))  # the plots' bands over questions, as in the tables
    text_ = markdown(tables, settings)
    result = {"settings": settings, "tables": tables, "arms": jsonable(rows),
              "policies": jsonable(summarize(greedy, ("policy", "context", "objectives"))), "markdown": text_}
    (out / "results.json").write_text(json.dumps(result, indent=1))
    (out / "report.md").write_text(text_ + "\n")
    from benchmarks.plots import plot_runs  # matplotlib: imported only to plot

    plot_runs({f"{settings['task']}, greedy, trained arms averaged over {len(settings['seeds'])} seeds": rows}, out)
    plot_curves(runs, settings, out / "curves.png")
    return result


def write_results_section(out_dir: str | Path, results_md: str | Path = "benchmarks/RESULTS.md",
                          record_md: str | Path = RECORD, *, heading: str | None = HEADING,
                          record_heading: str = RECORD_HEADING) -> Path:
    """Put a finished comparison under RESULTS.md's learners ``heading`` (command, machine, the learning and
    MemPO − GRPO tables, the plots) and its whole report under the experiment's record's
    (``benchmarks.report.write_comparison``). ``heading`` None: the record only, for a comparison
    RESULTS.md sums up in its own words; its plots go to ``results/OUT/`` (OUT: the comparison's
    folder name), not over the plots RESULTS.md shows."""
    out = Path(out_dir)
    info = json.loads((out / COMPARISON).read_text())
    name = "learners_{}.png" if heading is not None else f"{out.resolve().name}/{{}}.png"
    comparison = Comparison(
        MARK, BEGIN.format(out=out), END, TESTED_BY, info["command"],
        f"Machine: {info['machine']}; commit {info['commit']}; wall time {info['wall_s'] / 60:.0f} min "
        "(the invocations that ran to the end).", (out / "report.md").read_text(), HEADLINE,
        [(out / "curves.png", name.format("curves"), "learning curves, trained vs control"),
         (out / "f1_vs_objectives.png", name.format("f1"), "F1 vs objectives, learners"),
         (out / "cost_vs_objectives.png", name.format("cost"), "cost vs objectives, learners")])
    return write_comparison(comparison, results_md, heading, record_md, record_heading)


def machine() -> str:
    import torch

    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU"
    return (f"{os.cpu_count()} CPU cores ({cpu_name()}), {memory:.0f} GiB, {gpu}; "
            f"Python {platform.python_version()}, torch {torch.__version__}")


def commit() -> str:
    try:
        return subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True,
                              cwd=Path(__file__).parent).stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def _csv(numbers: Sequence[int]) -> str:
    return ",".join(map(str, numbers))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(prog="python -m benchmarks.learners", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help=f"a first look: seeds {_csv(QUICK['seeds'])}, {QUICK['steps']} steps, {QUICK['episodes']} "
                        f"episodes, {QUICK['samples']} samples, objectives {_csv(QUICK['objectives'])} (explicit "
                        f"flags still win)")
    p.add_argument("--out", default=None, help="output folder (default runs/learners; runs/learners-quick)")
    p.add_argument("--seeds", default=None, help=f"training seeds, comma-separated (default {_csv(SEEDS)})")
    p.add_argument("--steps", type=int, default=None, help="RL steps per run (default: algorithms.mempo.Config's)")
    p.add_argument("--train-objectives", type=int, default=None,
                   help="the training horizon of every arm, and the sampled evaluation's (default: "
                        "algorithms.mempo.Config's); at 10 the warm-up's rollouts lose most F1 to dropped notes "
                        "(docs/experiments/memory-bottleneck.md)")
    p.add_argument("--episodes", type=int, default=None,
                   help=f"evaluation questions per policy and horizon (default {EPISODES})")
    p.add_argument("--samples", type=int, default=None,
                   help=f"sampled episodes per question at the training horizon (default {SAMPLES})")
    p.add_argument("--objectives", default=None,
                   help=f"evaluation horizons (default {_csv(OBJECTIVES)})")
    p.add_argument("--split", default="test", choices=("test", "validation"),
                   help="test: the evaluation questions; validation: the next world's test questions, for tuning")
    p.add_argument("--arms", default=",".join(ARMS),
                   help=f"the arms to train, comma-separated (default {','.join(ARMS)})")
    p.add_argument("--archive", default=None, metavar="DIR",
                   help="resume from the finished seeds kept in DIR, and keep each finished seed there (training "
                        "logs, episodes without transcripts: small enough to commit)")
    p.add_argument("--warmup", default=None, help="start checkpoint of every arm (default: the learner's warm-up)")
    p.add_argument("--jobs", type=int, default=1,
                   help="runs and evaluation folders at once, one process and one torch thread each (default 1)")
    p.add_argument("--long-from", type=int, default=LONG_FROM, help="question (a): horizons from this many objectives")
    p.add_argument("--results-md", default=None, metavar="PATH",
                   help=f'then write the "{HEADING[3:]}" section of this file (benchmarks/RESULTS.md)')
    p.add_argument("--record-md", default=None, metavar="PATH",
                   help=f"the experiment's record that gets the whole report (with --results-md: default {RECORD}); "
                        "without --results-md, that record only, its plots under benchmarks/results/OUT-NAME/")
    p.add_argument("--record-heading", default=RECORD_HEADING, metavar="HEADING",
                   help=f"with --record-md: the heading of the record to write under (default {RECORD_HEADING!r})")
    args = p.parse_args(argv)
    default = QUICK if args.quick else {"seeds": SEEDS, "steps": None, "episodes": EPISODES, "samples": SAMPLES,
                                        "objectives": OBJECTIVES}
    out = args.out or ("runs/learners-quick" if args.quick else "runs/learners")
    steps = default["steps"] if args.steps is None else args.steps
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        result = compare(
            out, seeds=_int_list(args.seeds, "--seeds") if args.seeds else default["seeds"],
            episodes=default["episodes"] if args.episodes is None else args.episodes,
            samples=default["samples"] if args.samples is None else args.samples,
            objectives=_int_list(args.objectives, "--objectives") if args.objectives else default["objectives"],
            split=args.split, warmup=args.warmup, long_from=args.long_from, jobs=args.jobs,
            arms=[arm.strip() for arm in args.arms.split(",") if arm.strip()], archive_dir=args.archive,
            learner={**({} if steps is None else {"steps": steps}),
                     **({} if args.train_objectives is None else {"objectives": args.train_objectives})},
            command=shlex.join(["python", "-m", "benchmarks.learners", *(sys.argv[1:] if argv is None else argv)]))
        if args.results_md or args.record_md:
            record = args.record_md or RECORD
            written = write_results_section(out, args.results_md or "benchmarks/RESULTS.md", record,
                                            heading=HEADING if args.results_md else None,
                                            record_heading=args.record_heading)
            print(f"written to {written}" + (f" and {record}" if args.results_md else ""))
    except BenchmarkError as e:
        p.error(str(e))
    print(f"written to {out}")
    return result


if __name__ == "__main__":
    main()
