"""The comparison's arms and settings: what each arm sets in ``algorithms.mempo.Config``, the
evaluation's budget and questions, and where the report is written."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from algorithms.mempo import MEMORY_REWARDS, Config, other_settings, saved_settings
from benchmarks.report import BenchmarkError
from mempo_env.env import MemSearchQAEnv
from mempo_env.tasks import make_generated_task
from mempo_env.types import QATask

# MemPO with another memory reward (``--memory-reward``, docs/learners.md#memory-reward-variants): mempo-progress, ...
VARIANTS = {f"mempo-{v}": v for v in MEMORY_REWARDS if v != "mempo"}
ARMS = {"mempo": {"algo": "mempo", "context": "memory", "control": "none", "memory_reward": "mempo"},
        "grpo": {"algo": "grpo", "context": "memory", "control": "none", "memory_reward": "mempo"},
        "control": {"algo": "grpo", "context": "memory", "control": "shuffled", "memory_reward": "mempo"},
        "grpo-full": {"algo": "grpo", "context": "full", "control": "none", "memory_reward": "mempo"},
        **{arm: {"algo": "mempo", "context": "memory", "control": "none", "memory_reward": v}
           for arm, v in VARIANTS.items()}}
# The default arms, and those of a comparison made before arms could be chosen (its settings list none).
DEFAULT_ARMS = ("mempo", "grpo", "control", "grpo-full")
LEARNERS = ("mempo", "grpo", *VARIANTS)  # measured against the control, which trains in their view on their questions
WARMUP, WARMUP_FULL = "warm-up", "warm-up (full)"
START = {arm: WARMUP_FULL if ARMS[arm]["context"] == "full" else WARMUP for arm in ARMS}  # each arm's start
POLICIES = (WARMUP, *ARMS)
RECALL = "episode_memory_recall"  # of the evidence an episode found, the share its last <mem> keeps
SEEDS, EPISODES, SAMPLES, OBJECTIVES, LONG_FROM = (0, 1, 2, 3, 4), 100, 4, (2, 4, 6, 8, 10), 6
QUICK = {"seeds": (0,), "steps": 4, "episodes": 10, "samples": 2, "objectives": (2, 6)}
# The comparison's own settings: Config fields it sets per arm, so an override of them is refused.
PER_ARM = ("algo", "context", "control", "memory_reward", "seed", "policy", "run_dir", "resume", "eval_episodes")
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
MARK = "<!-- benchmarks.experiments.learner_comparison: generated"  # the block write_results_section replaces
BEGIN = MARK + " from {out}; write the reading outside it -->"
END = "<!-- benchmarks.experiments.learner_comparison: end -->"
TESTED_BY = "<!-- tested by tests/test_learner_docs.py::test_the_documented_learner_commands_parse -->"


def arm_configs(out: Path, seeds: Sequence[int], warmup: Path, base: Config,
                arms: Sequence[str] = DEFAULT_ARMS) -> dict[str, Config]:
    """Policy label -> its learner config; seed-major, so a partial comparison has every arm of seed 0."""
    return {f"{arm}-s{seed}": dataclasses.replace(base, **ARMS[arm], seed=seed, policy=str(warmup),
                                                  run_dir=str(out / "runs" / f"{arm}-s{seed}"), eval_episodes=0)
            for seed in seeds for arm in ARMS if arm in arms}


def check_run(cfg: Config) -> None:
    """Refuse a run folder trained with other settings (e.g. changed Config defaults or warm-up); what a
    resume may change (``RESUMABLE``: more steps, the evaluation, threads) it takes."""
    if changed := other_settings(saved_settings(Path(cfg.run_dir)), cfg):
        raise BenchmarkError(f"{cfg.run_dir} holds a run with other settings ({changed}); use another --out")


def eval_task(split: str, cfg: Config) -> QATask:
    """Held-out questions of the world and hops the learners train on; ``validation``: the next world's."""
    if split not in ("test", "validation"):
        raise BenchmarkError(f"split must be 'test' or 'validation', not {split!r}")
    return make_generated_task("test", seed=cfg.task_seed + (split == "validation"), hops=cfg.hops)


def arms_of(settings: dict[str, Any]) -> list[str]:
    """A comparison's arms, from its recorded settings (one made before arms could be chosen had the defaults)."""
    return list(settings.get("arms", DEFAULT_ARMS))
