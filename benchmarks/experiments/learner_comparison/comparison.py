"""Learner comparison from one warm-up: MemPO vs GRPO vs a no-information control vs GRPO on the full context.

    python -m benchmarks.experiments.learner_comparison            # 4 arms x 5 seeds, then the evaluation (hours)
    python -m benchmarks.experiments.learner_comparison --quick    # 1 seed, 4 steps, 10 episodes a cell: a first look
    python -m benchmarks.experiments.learner_comparison --arms mempo,grpo,control   # without the full-context baseline
    python -m benchmarks.experiments.learner_comparison --arms mempo-progress,mempo,grpo,control --search oracle
    python -m benchmarks.experiments.learner_comparison --results-md benchmarks/RESULTS.md   # and its section, record
    python -m benchmarks.experiments.learner_comparison --record-md RECORD --record-heading "## H"   # the record only

Arms, all ``algorithms.mempo.Config`` with its defaults (so the same budget) and only ``algo``,
``context``, ``control`` and ``seed`` set here: ``mempo`` (memory view), ``grpo`` (memory view: the
memory advantage is the only difference), ``control`` (``grpo`` with its advantages shuffled within
groups, ``--control shuffled``: what the same updates do without information) and ``grpo-full`` (full
context: the no-memory baseline); and, asked for with ``--arms``, ``mempo-progress``, ``mempo-infomem`` and
``mempo-write``: ``mempo`` with that ``--memory-reward`` (docs/learners.md#memory-reward-variants), each
measured against the control and against MemPO and GRPO. ``--search oracle`` trains and evaluates every arm
in the oracle-evidence mode (docs/environment.md#oracle-evidence-search). Every arm starts from the same
warm-up checkpoint, the one ``train`` itself would build, and seed s of every arm trains on the same
questions with the same sampling seeds, so arms compare paired by seed. Each arm x seed trains in
``OUT/runs/ARM-sSEED`` with the learner's own resume and learning curve (``metrics.jsonl``,
``curve.jsonl``); a finished run is left as it is.

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
the same questions), MemPO − GRPO and each variant − MemPO and − GRPO with their spread over seeds, the
length and duplication of every arm's held-out memories (``memory``), and answers the paper's three questions
(spec section 10): (a) MemPO vs GRPO F1 at long horizons, (b) total tokens of the memory view vs the
full context, (c) how F1 falls as objectives grow.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shlex
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from agents.episode_log import RunFolderError
from algorithms.mempo import Config, load_checkpoint, train
from algorithms.sft import default_warmup
from benchmarks.experiments.learner_comparison.archive import archive, evaluated
from benchmarks.experiments.learner_comparison.report import commit, machine, report, write_results_section
from benchmarks.experiments.learner_comparison.settings import (
    ARMS,
    COMPARISON,
    DEFAULT_ARMS,
    EPISODES,
    EVAL_MAX_NEW_TOKENS,
    HEADING,
    LONG_FROM,
    OBJECTIVES,
    PER_ARM,
    QUICK,
    RECORD,
    RECORD_HEADING,
    SAMPLES,
    SAMPLING_SEED,
    SEEDS,
    TRAIN_PROMPT,
    WARMUP,
    arm_configs,
    check_run,
    eval_task,
)
from benchmarks.folder_archive import restore
from benchmarks.report import BenchmarkError
from benchmarks.run import _int_list, evaluate
from mempo_env.env import SEARCH_MODES


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


def trained_checkpoint(cfg: Config) -> Path:
    """Train (or resume) one arm x seed; a run whose checkpoint is at ``cfg.steps`` is not started."""
    ckpt = load_checkpoint(Path(cfg.run_dir))
    if ckpt is None or json.loads((ckpt / "step.json").read_text())["step"] < cfg.steps:
        train(cfg)
        ckpt = load_checkpoint(Path(cfg.run_dir))
    return ckpt


def compare(out_dir: str | Path = "runs/learners", *, seeds: Sequence[int] = SEEDS, episodes: int = EPISODES,
            samples: int = SAMPLES, objectives: Sequence[int] = OBJECTIVES, split: str = "test",
            warmup: str | Path | None = None, long_from: int = LONG_FROM, learner: Mapping[str, Any] | None = None,
            arms: Sequence[str] = DEFAULT_ARMS, jobs: int = 1, archive_dir: str | Path | None = None,
            max_new_tokens: int = EVAL_MAX_NEW_TOKENS, command: str | None = None,
            verbose: bool = True) -> dict[str, Any]:
    """Train every arm x seed, evaluate them and the warm-up, write the report; return ``report``'s result.

    ``learner``: ``Config`` fields other than the per-arm ones (e.g. ``{"steps": 2}``), the same for
    every arm. ``warmup``: the start checkpoint (default: ``default_warmup`` for the learner's world).
    ``samples``: sampled episodes per question at the training horizon (``Config.objectives``).
    ``max_new_tokens``: the evaluation's budget a turn (a pretrained model's turns are shorter than the
    tiny policy's memories at 10 objectives, and each token costs it more).
    ``arms``: the arms to train, of ``ARMS`` (default ``DEFAULT_ARMS``; the warm-up is evaluated in their
    views only). ``learner``'s ``search`` (``"oracle"``) reaches the evaluation too.
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
    if min(episodes, samples, jobs, max_new_tokens) < 1:
        raise BenchmarkError(f"episodes, samples, jobs and max_new_tokens must be at least 1, got {episodes}, "
                             f"{samples}, {jobs}, {max_new_tokens}")
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
    max_context = AutoConfig.from_pretrained(warmup).max_position_embeddings - max_new_tokens
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
                         "max_new_tokens": max_new_tokens, "max_context_tokens": max_context,
                         "learner": dataclasses.asdict(base)},
            "command": command or "benchmarks.experiments.learner_comparison.compare (library call)",
            "wall_s": previous.get("wall_s", 0.0), "machine": machine(), "commit": commit()}
    out.mkdir(parents=True, exist_ok=True)
    (out / COMPARISON).write_text(json.dumps(info, indent=1))

    greedy = f"hf:{{}}#max_new_tokens={max_new_tokens}"
    sampled = f"{greedy}#temperature={base.temperature}#seed={{}}"
    common = dict(dataset=task, episodes=episodes, prompt=TRAIN_PROMPT, max_turns=base.max_turns, tokenizer=str(warmup),
                  max_context_tokens=max_context, plots=False, verbose=verbose and jobs == 1, search_mode=base.search)

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


def learner_options(text: str) -> dict[str, Any]:
    """The options in ``text`` that differ from ``algorithms.mempo``'s defaults, parsed by the learner's own
    command line, so that ``--learner`` takes exactly what ``python -m algorithms.mempo`` takes."""
    import tyro

    parsed, default = tyro.cli(Config, args=shlex.split(text), prog="--learner"), Config()
    return {f.name: getattr(parsed, f.name) for f in dataclasses.fields(Config)
            if getattr(parsed, f.name) != getattr(default, f.name)}


def _csv(numbers: Sequence[int]) -> str:
    return ",".join(map(str, numbers))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(prog="python -m benchmarks.experiments.learner_comparison", description=__doc__,
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
    p.add_argument("--arms", default=",".join(DEFAULT_ARMS),
                   help=f"the arms to train, comma-separated, of {','.join(ARMS)} (default {','.join(DEFAULT_ARMS)})")
    p.add_argument("--search", default=None, choices=SEARCH_MODES,
                   help="what a search returns in training and evaluation (default: algorithms.mempo.Config's, "
                        "the retriever; oracle: the next hop's gold evidence, docs/environment.md)")
    p.add_argument("--archive", default=None, metavar="DIR",
                   help="resume from the finished seeds kept in DIR, and keep each finished seed there (training "
                        "logs, episodes without transcripts: small enough to commit)")
    p.add_argument("--warmup", default=None, help="start checkpoint of every arm (default: the learner's warm-up)")
    p.add_argument("--learner", default="", metavar='"OPTIONS"',
                   help='options of python -m algorithms.mempo for every arm, quoted, e.g. "--lr 1e-5 --group-size 4" '
                        "(the ones the comparison sets per arm are refused)")
    p.add_argument("--max-new-tokens", type=int, default=EVAL_MAX_NEW_TOKENS,
                   help=f"the evaluation's token budget a turn (default {EVAL_MAX_NEW_TOKENS})")
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
            max_new_tokens=args.max_new_tokens,
            learner={**learner_options(args.learner), **({} if steps is None else {"steps": steps}),
                     **({} if args.train_objectives is None else {"objectives": args.train_objectives}),
                     **({} if args.search is None else {"search": args.search})},
            command=shlex.join(["python", "-m", "benchmarks.experiments.learner_comparison",
                                *(sys.argv[1:] if argv is None else argv)]))
        if args.results_md or args.record_md:
            record = args.record_md or RECORD
            written = write_results_section(out, args.results_md or "benchmarks/RESULTS.md", record,
                                            heading=HEADING if args.results_md else None,
                                            record_heading=args.record_heading)
            print(f"written to {written}" + (f" and {record}" if args.results_md else ""))
    except (BenchmarkError, RunFolderError) as e:  # RunFolderError: an arm's run folder is busy or damaged
        p.error(str(e))
    print(f"written to {out}")
    return result


