"""MemPO: GRPO with a memory-level advantage, trained with PPO-clip and a KL penalty.

    python -m algorithms.mempo                 # the embedded default: tiny policy, generated task
    python -m algorithms.mempo --help          # every option of Config
    python -m algorithms.mempo --resume RUN    # continue a killed run from its last checkpoint
    python -m algorithms.mempo --control shuffled   # the no-information control: advantages shuffled in groups
    python -m algorithms.grpo                  # the same learner with the memory term off

One step, top to bottom: sample question groups -> G rollouts each through MemSearchQA-v0 ->
outcome advantages (GRPO, per group) -> memory rewards and advantages on the <mem> tokens (MemPO)
-> PPO-clip + KL to the frozen reference -> the rollout engine uses the new weights; every
``eval_every`` steps, the held-out learning curve (greedy and sampled F1).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import tyro

from agents.backends import check_backend_spec
from agents.checkpoints import CheckpointError
from agents.episode_log import RunFolderError, hold_folder, load_done, read_episodes, write_atomic
from agents.scripted import ANSWERING
from agents.summariser import make_strategy
from algorithms.batch import AGGREGATIONS
from algorithms.tracking import Tracker, check_loggers
from mempo_env.context import ContextStrategy
from mempo_env.env import SEARCH_MODES
from mempo_env.tasks import held_out, make_generated_task, resolve_task
from mempo_env.types import QATask

# torch, transformers and scipy (seconds to import) come with train(): --help stays fast.

CONTROLS = ("none", "shuffled")
# The memory reward's variants (algorithms/memory_reward.py, docs/learners.md#memory-reward-variants).
MEMORY_REWARDS = ("mempo", "progress", "infomem", "write")
# What may change when a run is resumed: its budget and how it is measured, not what it learns.
RESUMABLE = ("steps", "eval_episodes", "eval_samples", "eval_every", "curve_questions", "reward_window",
             "checkpoint_every", "log", "threads", "device")


@dataclass
class Config:
    algo: str = "mempo"
    """"mempo" (outcome + memory advantage) or "grpo" (outcome advantage only)"""
    run_dir: str = ""
    """where metrics, checkpoints and the evaluation go (default runs/<algo>, runs/<algo>-shuffled for
    ``--control shuffled``: a run and its control never share a folder)"""
    policy: str = ""
    """HF causal LM to start from; empty: the embedded tiny policy after its warm-up (built if missing)"""
    resume: str = ""
    """a run directory to continue from its last checkpoint (its saved config is used)"""
    seed: int = 0
    """seeds question sampling, generation and torch"""
    dataset: str = "generated"
    """what to train on: "generated", a shared set ("hotpotqa", "musique", ...: mempo_env.tasks.resolve_task)
    or a question file (with --corpus unless its rows carry their paragraphs)"""
    corpus: str = ""
    """corpus file for a --dataset question file, or in place of a shared set's own"""
    split: str = ""
    """the training split; empty: "train" of the generated task, a shared set's default file ("hotpotqa": dev)"""
    eval_split: str = ""
    """the held-out evaluation split ("test" of the generated task; "dev" of a shared set trained on
    "train100"); empty for a real dataset: the eval_fraction share of the training split's questions,
    which the learner then never trains on"""
    eval_fraction: float = 0.2
    """share of the questions held out for the evaluation when a real dataset has no --eval-split"""
    task_seed: int = 0
    """which generated world"""
    hops: int = 1
    """hops per generated question"""
    objectives: int = 6
    """questions per episode, and the held-out evaluation's horizon. At 6 the warm-up answers 95.7% greedy
    but its rollouts at temperature 1 only 83% (F1): the sampled policy, which RL trains, has room to
    learn there, at 7 turns an episode (the paper trains at 2; at 10 the list of answers fails greedy
    too, docs/experiments/rl-defaults.md)"""
    min_objectives: int = 0
    """from 1 to objectives: each question group's horizon is drawn from min_objectives..objectives, so
    RL trains over several horizons; 0: every group at objectives"""
    reward: str = "score"
    """the outcome reward the learner trains on: "score" (the spec's: right sub-answers, 0 for a wrong
    count of answers) or "aligned" (the sub-answers right in order, so a list that drops or repeats one
    keeps the rest; mempo_env.reward.aligned_matches). Evaluation always reports the spec's EM and F1"""
    backend: str = "hf"
    """rollout engine: "hf", "vllm[#OPTION=VALUE...]", "vllm-server:URL" or "sglang:URL" (make_backend)"""
    context: str = "memory"
    """context strategy of the rollouts (docs/environment.md): "memory" (prepare_prompt's view), "full",
    "window:K", "summary[:CHARS[:SUMMARISER]]" or a registered name; one training sample per turn, or one
    per rollout for "full", whose prompts grow as prefixes"""
    steps: int = 10
    """RL steps (at 6 objectives GRPO's held-out sampled F1 rose from 83% to 96% in 10 steps and stayed
    there to 30; the default run, evaluation included, took 5.9 min on 2 cores of an AMD EPYC family
    26, docs/experiments/rl-defaults.md)"""
    questions_per_step: int = 4
    """question groups per step"""
    group_size: int = 8
    """rollouts per question group (G)"""
    max_turns: int = 14
    """turn budget per episode (the paper: 16; the oracle needs objectives + 1 turns)"""
    max_new_tokens: int = 256
    """generation limit per turn (the oracle's longest 10-objective turn: 207 tokens)"""
    temperature: float = 1.0
    """sampling temperature of the rollouts (the loss uses the same one)"""
    top_p: float = 1.0
    """nucleus sampling of the rollouts"""
    lr: float = 5e-5
    """AdamW learning rate. Adam moves every weight by about lr a step whatever the gradient's size, so
    updates without information drift too: at 6 objectives, 3e-4 took both GRPO and its shuffled
    control to reward 0 within 5 steps; 5e-5 learns (docs/experiments/rl-defaults.md)"""
    clip_eps: float = 0.2
    """PPO clip range"""
    kl_coef: float = 0.1
    """weight of the k3 KL to the reference (the spec's paper setting: 0.001; at 10 objectives GRPO with
    0.001 lowered held-out F1 by 12 points, breaking the answering turn's format, and with 0.1 kept
    it, docs/experiments/rl-at-10-objectives.md)"""
    control: str = "none"
    """"shuffled": the no-information control. Each group's outcome advantages are permuted among its
    rollouts (and, for MemPO, each question's memory advantages among its scored turns, the pool they
    were normalised over): the same values, none tied to the rollout or turn that earned it. Learning
    is what a run gains over its control on the same seed and questions"""
    epochs: int = 1
    """passes over each step's samples"""
    minibatch_size: int = 1024
    """samples per optimizer step (the default: one step per RL step; at 64, the 700 turns of a
    10-objective step made 11 optimizer steps, and GRPO lost 29 points instead of 12,
    docs/experiments/rl-at-10-objectives.md)"""
    pack_tokens: int = 1024
    """tokens per forward/backward: a mini-batch's samples packed into prefix trees of at most this
    many tokens, every shared prefix computed once (algorithms/prefix_tree.py; gradients accumulate)"""
    max_grad_norm: float = 1.0
    """gradient clipping"""
    agg: str = "seq-mean-token-mean"
    """loss aggregation: "seq-mean-token-mean" (every rollout weighs the same, whatever its turns) or
    "token-mean" (algorithms/batch.py)"""
    memory_reward: str = "mempo"
    """the memory reward MemPO adds (docs/learners.md#memory-reward-variants): "mempo" (the spec's
    P(gold | memory) - P(gold | history)), "progress" (the same, normalised among turns at equal evidence
    found), "infomem" (the final memory's answer log-likelihood gain over an empty memory, successful
    rollouts only) or "write" (each memory's gain over the one before it)"""
    search: str = "retriever"
    """what a search returns in training and evaluation: "retriever" (BM25's top-k) or "oracle" (the gold
    document of the next hop not yet shown, docs/environment.md#oracle-evidence-search)"""
    mem_first_turn: bool = False
    """give the first turn's <mem> a memory advantage too"""
    mem_include_tags: bool = True
    """count the <mem>/</mem> tag tokens as memory tokens"""
    answer_think: str = ANSWERING
    """the memory reward scores the gold answer as the end of an answering turn, <think> this </think>
    <answer>, after the memory (algorithms/memory_reward.py); the default is the embedded policy's"""
    answer_prefix: str = " "
    """what the policy writes between <answer> and its answer (the embedded policy: "<answer> Paris";
    "" for a model that writes "<answer>Paris")"""
    checkpoint_every: int = 5
    """steps between checkpoints"""
    eval_episodes: int = 40
    """held-out questions of the final start vs trained table, greedy and sampled (0: skip)"""
    eval_samples: int = 4
    """sampled episodes per held-out question, at the rollout temperature (RL optimises the sampled
    policy; algorithms/evaluate.py), in the final table and the learning curve"""
    eval_every: int = 5
    """steps between the learning curve's held-out evaluations (``curve.jsonl``; 0: none)"""
    curve_questions: int = 16
    """held-out questions per learning-curve evaluation, greedy and sampled"""
    reward_window: int = 5
    """steps of the rollout reward's moving average (``reward_avg`` and its interval over the window's
    question groups, in ``metrics.jsonl``)"""
    log: tuple[str, ...] = ()
    """also log every step to "tensorboard" (RUN_DIR/tensorboard) and/or "wandb" (WANDB_MODE=offline works
    offline): optional extras, algorithms/tracking.py"""
    threads: int = 0
    """torch threads; 0: timed at start-up, 1 against every core, once for generation and once for the
    update (algorithms/compute.py). The learner computes in fp32 on every CPU: its PPO ratio compares
    the update's log-probs with the rollout engine's, and bf16 rounding would move that ratio"""
    device: str = "auto"
    """where the policy, its reference and the update compute: "cpu", "cuda" or "cuda:N"; "auto": the
    GPU where torch sees one (as the warm-up's build does), else the CPU. fp32 on a GPU too, for the
    same reason as on a CPU; ``threads`` is timed on the CPU only"""

    def __post_init__(self) -> None:
        at_least = {name: 1 for name in ("steps", "objectives", "questions_per_step", "group_size", "max_turns",
                                         "max_new_tokens", "epochs", "minibatch_size", "pack_tokens",
                                         "checkpoint_every", "eval_samples", "curve_questions", "reward_window")
                    } | {"eval_episodes": 0, "eval_every": 0, "threads": 0}
        for name, low in at_least.items():
            if getattr(self, name) < low:
                raise ValueError(f"{name} must be >= {low}, got {getattr(self, name)}")
        if not 0 < self.top_p <= 1 or self.temperature <= 0 or self.lr <= 0:
            raise ValueError(f"need 0 < top_p <= 1, temperature > 0 and lr > 0, got {self.top_p}, "
                             f"{self.temperature}, {self.lr}")
        check_backend_spec(self.backend)
        if self.policy and not (Path(self.policy) / "config.json").is_file():
            raise ValueError(f"policy {self.policy!r} is not a model folder (no config.json in it); a pretrained "
                             "GGUF model is warmed up first: python -m algorithms.sft --base FILE.gguf")
        if self.algo not in ("mempo", "grpo"):
            raise ValueError(f"algo must be 'mempo' or 'grpo', not {self.algo!r}")
        from algorithms.rollout import REWARDS

        if not 0 <= self.min_objectives <= self.objectives:
            raise ValueError(f"min_objectives must be 0 or from 1 to objectives ({self.objectives}), "
                             f"got {self.min_objectives}")
        if self.reward not in REWARDS:
            raise ValueError(f"reward must be one of {tuple(REWARDS)}, not {self.reward!r}")
        if self.memory_reward not in MEMORY_REWARDS:
            raise ValueError(f"memory_reward must be one of {MEMORY_REWARDS}, not {self.memory_reward!r}")
        if self.algo == "grpo" and self.memory_reward != "mempo":
            raise ValueError(f"memory_reward {self.memory_reward!r} needs algo mempo: grpo has no memory term")
        if self.search not in SEARCH_MODES:
            raise ValueError(f"search must be one of {SEARCH_MODES}, not {self.search!r}")
        if self.control not in CONTROLS:
            raise ValueError(f"control must be one of {CONTROLS}, not {self.control!r}")
        if self.agg not in AGGREGATIONS:
            raise ValueError(f"agg must be one of {AGGREGATIONS}, not {self.agg!r}")
        if not 0 < self.eval_fraction < 1:
            raise ValueError(f"eval_fraction must be in (0, 1), got {self.eval_fraction}")
        check_loggers(self.log)
        if not re.fullmatch(r"auto|cpu|cuda(:\d+)?", self.device):
            raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N', not {self.device!r}")
        self.run_dir = self.run_dir or f"runs/{self.algo}" + (f"-{self.control}" if self.control != "none" else "")


# ---- checkpoints: model, optimizer, RNG, step; the data position is a function of the step ----
def save_checkpoint(run_dir: Path, model: Any, tokenizer: Any, optimizer: Any, step: int) -> None:
    """Written to a temporary folder and renamed, so a kill never leaves a half-written checkpoint; its
    ``step.json`` is written last, so a checkpoint folder holding one is complete (``load_checkpoint``)."""
    import torch

    tmp = Path(tempfile.mkdtemp(prefix=".ckpt-", dir=run_dir))
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    trainer_state = {"optimizer": optimizer.state_dict(), "torch_rng": torch.get_rng_state(), "step": step}
    torch.save(trainer_state, tmp / "trainer.pt")
    (tmp / "step.json").write_text(json.dumps({"step": step}))
    current, old = run_dir / "checkpoint", run_dir / "checkpoint.old"
    if current.exists():  # else a kill hit the last swap and "checkpoint.old" is the newest: keep it
        shutil.rmtree(old, ignore_errors=True)
        current.rename(old)
    tmp.rename(current)
    shutil.rmtree(old, ignore_errors=True)


def resolve_device(device: str) -> str:
    """``Config.device`` as torch names it: "auto" becomes "cuda" where torch sees a GPU, else "cpu"; a
    GPU asked for where torch sees none is an error that says so, before any work."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda"):
        index = int(device.partition(":")[2] or 0)
        if not torch.cuda.is_available() or index >= torch.cuda.device_count():
            raise ValueError(f"device {device}: torch {torch.__version__} sees {torch.cuda.device_count()} CUDA "
                             f"GPU(s) here; use --device cpu (or auto)")
    return device


def load_checkpoint(run_dir: Path) -> Path | None:
    """The run's last complete checkpoint, ``None`` where it has none. A checkpoint is complete when its
    ``step.json`` is there (``save_checkpoint`` writes it last, then renames the folder into place).
    ``checkpoint`` is the newest; ``checkpoint.old`` counts only where a kill hit the swap, between
    moving the current one aside and renaming the new one in, which leaves no ``checkpoint`` at all."""
    for name in ("checkpoint", "checkpoint.old"):
        if (run_dir / name).exists():
            return run_dir / name if (run_dir / name / "step.json").is_file() else None
    return None


def resume_point(run_dir: Path, cfg: Config) -> Path | None:
    """The checkpoint a run in ``run_dir`` continues from; ``None``: it starts at step 0, as a run killed
    before its first checkpoint does (its logged steps run again, as steps past a checkpoint do). Refused
    with a ``RunFolderError``, before anything is written: a checkpoint folder without its ``step.json``,
    logs past the run's first checkpoint with no checkpoint there (it was lost, and starting again would
    rewrite their history), and a run of other settings (``other_settings``)."""

    ckpt, saved, metrics_path = load_checkpoint(run_dir), saved_settings(run_dir), run_dir / "metrics.jsonl"
    if (ckpt is not None or metrics_path.is_file()) and (changed := other_settings(saved, cfg)):
        raise RunFolderError(f"{run_dir} holds a run with other settings ({changed}): continuing it would train "
                             f"that run, not this one; use another --run-dir, or --resume {run_dir} to continue "
                             "it; nothing was changed")
    fix = "restore it, or start the run over in another --run-dir; nothing was changed"
    if ckpt is None and (incomplete := next((run_dir / n for n in ("checkpoint", "checkpoint.old")
                                             if (run_dir / n).exists()), None)):
        raise RunFolderError(f"{incomplete} lacks step.json: an incomplete or damaged checkpoint (a complete one "
                             f"has it, written last); {fix}")
    if ckpt is None and metrics_path.is_file():
        logged = max((m["step"] for m in read_episodes(metrics_path)
                      if isinstance(m, dict) and isinstance(m.get("step"), int)), default=0)
        # a step's line is written before its checkpoint: a line past the first checkpoint's step (in the
        # settings the logs were written with, or the ones given now, whichever checkpoints sooner) means
        # that checkpoint was written (none saved, or damaged: the settings given now decide alone)
        first = min(v for v in (saved.get("checkpoint_every"), saved.get("steps"), cfg.checkpoint_every, cfg.steps)
                    if isinstance(v, int))
        if logged > first:
            raise RunFolderError(f"{metrics_path} records steps up to {logged}, past the run's first checkpoint "
                                 f"(step {first}), but {run_dir / 'checkpoint'} is missing: no checkpoint to "
                                 f"continue from, and starting again would rewrite those steps; {fix}")
    return ckpt


def saved_settings(run_dir: Path) -> dict[str, Any]:
    """The settings a run saved in ``run_dir/config.json``; ``{}`` where there are none or they are unreadable."""
    try:
        saved = json.loads((run_dir / "config.json").read_text())
    except (OSError, ValueError):
        return {}
    return saved if isinstance(saved, dict) else {}


def other_settings(saved: dict[str, Any], cfg: Config) -> str:
    """The settings, beyond those ``--resume`` may change (``RESUMABLE``), in which a run's ``saved`` ones
    (``saved_settings``) differ from ``cfg``, as ``"name: SAVED there, GIVEN now"``; empty where none differ or
    nothing was saved. A run continues where it stopped only as the same run: a learner started with other
    settings on its folder (its control, say) would otherwise take over its checkpoint and report that run's
    policy as its own. A setting newer than the saved run had its default there."""
    if not saved:
        return ""
    saved = {**json.loads(json.dumps(dataclasses.asdict(Config()))), **saved}
    now = json.loads(json.dumps(dataclasses.asdict(cfg)))  # tuples as the saved JSON has them: lists
    return "; ".join(f"{k}: {saved.get(k)!r} there, {v!r} now" for k, v in now.items()
                     if saved.get(k) != v and k not in (*RESUMABLE, "resume", "run_dir"))


def check_history(run_dir: Path, start: int) -> None:
    """A run resumed at step ``start`` needs ``metrics.jsonl`` to record steps 1 to ``start`` once each (a
    step's line is written before its checkpoint); else its history is damaged, and a run continued from it
    would log a gap or a repeat and average rewards over them, so it is refused before anything is written."""
    path = run_dir / "metrics.jsonl"
    records = read_episodes(path) if path.is_file() else []
    steps = sorted(m["step"] for m in records if isinstance(m, dict) and isinstance(m.get("step"), int))
    if len(steps) < len(records) or [s for s in steps if s <= start] != list(range(1, start + 1)):
        raise RunFolderError(f"{path} does not record steps 1-{start} once each, as the checkpoint at step {start} "
                             "needs: a damaged history; restore it, or start the run over in another --run-dir; "
                             "nothing was changed")


def datasets(cfg: Config) -> tuple[QATask, QATask]:
    """The training task and the held-out evaluation task, which share no question: the generated task's
    train and test splits (``split``/``eval_split`` if given), a real dataset's ``split`` and
    ``eval_split``, or, without ``eval_split``, its ``split`` cut in two by ``held_out``."""
    if cfg.dataset == "generated":
        if cfg.corpus:
            raise ValueError(f"the generated task brings its own corpus; --corpus {cfg.corpus} would be ignored")
        train_, test = (make_generated_task(split, seed=cfg.task_seed, hops=cfg.hops)
                        for split in (cfg.split or "train", cfg.eval_split or "test"))
    elif cfg.eval_split:
        train_, test = (resolve_task(cfg.dataset, corpus=cfg.corpus or None, split=split)
                        for split in (cfg.split or None, cfg.eval_split))
    else:
        train_, test = held_out(resolve_task(cfg.dataset, corpus=cfg.corpus or None, split=cfg.split or None),
                                cfg.eval_fraction)
    if shared := {q.id for q in train_.questions} & {q.id for q in test.questions}:
        raise ValueError(f"--eval-split {cfg.eval_split!r} shares {len(shared)} questions with the training "
                         f"split ({train_.name}): the evaluation needs questions the learner never trained on")
    return train_, test


class PhaseTimer:
    """Seconds per phase of a step: ``lap(name)`` records the time since the previous lap (or the start)."""

    def __init__(self) -> None:
        self.times: dict[str, float] = {}
        self.last = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.times[name], self.last = now - self.last, now


def question_groups(cfg: Config, step: int, n_questions: int) -> list[list[int]]:
    """The step's question groups, a pure function of (seed, step): a resumed run sees the same data."""
    rng = np.random.default_rng([cfg.seed, step])
    # one horizon draws no sizes, so its question draws stay those of runs made before min_objectives existed
    sizes = (rng.integers(cfg.min_objectives, cfg.objectives, endpoint=True, size=cfg.questions_per_step)
             if cfg.min_objectives else [cfg.objectives] * cfg.questions_per_step)
    return [rng.choice(n_questions, int(k), replace=False).tolist() for k in sizes]


def reward_average(lines: list[dict[str, Any]], window: int) -> tuple[float, float]:
    """The rollout reward's moving average over the last ``window`` steps' metrics lines and its 95%
    interval, over their question groups (the independent unit: a group's rollouts share a question)."""
    from agents.statistics import mean_ci

    return mean_ci([g for line in lines[-window:] for g in line.get("group_rewards", [])])


def train(cfg: Config, data: tuple[QATask, QATask] | None = None, strategy: ContextStrategy | None = None
          ) -> dict[str, Any]:
    """Train, checkpoint and evaluate as ``cfg`` says; ``data``: ``datasets(cfg)`` and ``strategy``:
    ``make_strategy(cfg.context)``, if already made. The run folder is held for the whole run: a second
    learner on it fails at once (two would interleave their metrics and race on the checkpoint)."""
    run_dir = Path(cfg.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    with hold_folder(run_dir, "--run-dir"):
        return train_held(cfg, data, strategy)


def train_held(cfg: Config, data: tuple[QATask, QATask] | None, strategy: ContextStrategy | None
               ) -> dict[str, Any]:
    """``train``'s work, in the run folder it holds: from the last complete checkpoint (``resume_point``)."""
    import torch
    from tqdm import tqdm
    from transformers import AutoModelForCausalLM

    from agents.backends import make_backend
    from agents.checkpoints import check_same_network, load_policy
    from agents.statistics import jsonable, markdown_table, mean_ci, summarize, table_head
    from algorithms.advantages import grpo_advantages, shuffled_within_groups
    from algorithms.batch import build_samples, generated_tokens
    from algorithms.compute import Setting, candidates, fastest, num_threads
    from algorithms.evaluate import defined, greedy_and_sampled, per_question
    from algorithms.loss import ppo_loss
    from algorithms.memory_reward import memory_term
    from algorithms.prefix_tree import pack_logprobs, packs, sequence_logprobs
    from algorithms.rollout import collect_rollouts, encode
    from algorithms.sft import default_warmup
    from mempo_env.env import MemSearchQAEnv
    from mempo_env.retrieval import make_retriever
    from mempo_env.views import render_prompt

    device = resolve_device(cfg.device)
    task, test = data or datasets(cfg)
    strategy = strategy or make_strategy(cfg.context)  # one for every env: it keeps no per-episode state
    run_dir = Path(cfg.run_dir)
    ckpt = resume_point(run_dir, cfg)
    torch.manual_seed(cfg.seed)

    # 1. Policy, frozen reference (the starting point), optimizer; or the last checkpoint. SDPA
    #    attention: it takes the prefix trees' 4D masks.
    start_dir = Path(cfg.policy) if cfg.policy else default_warmup(cfg.task_seed, cfg.hops)
    if ckpt is not None:
        check_same_network(ckpt, start_dir)
    load = dict(dtype=torch.float32, attn_implementation="sdpa")
    ref, tokenizer = load_policy(str(start_dir), **load)  # a causal LM with a chat template, or one clear error
    ref = ref.to(device).eval().requires_grad_(False)
    start = 0
    try:
        model = AutoModelForCausalLM.from_pretrained(ckpt or start_dir, **load).to(device).eval()
        optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.0)
        if ckpt is not None:  # its optimizer state goes where the parameters are, whichever device wrote it
            state = torch.load(ckpt / "trainer.pt", weights_only=False, map_location="cpu")
            optimizer.load_state_dict(state["optimizer"])
            torch.set_rng_state(state["torch_rng"])
            start = state["step"]
    except Exception as e:
        if ckpt is None:
            raise
        raise RunFolderError(f"checkpoint {ckpt} is unreadable ({' '.join(str(e).split())}); restore it, or start "
                             "the run over in another --run-dir; nothing was changed") from e
    check_history(run_dir, start)
    # The run's folder is as the checkpoint left it: from here on, it is written.
    write_atomic(run_dir / "config.json", json.dumps(dataclasses.asdict(cfg), indent=1))
    for partial in run_dir.glob(".ckpt-*"):  # checkpoints a kill interrupted while being written
        shutil.rmtree(partial, ignore_errors=True)
    backend = make_backend(cfg.backend, model, tokenizer)

    # 2. The environment: one per rollout, sharing the task and the search index.
    retriever = make_retriever(None, task.corpus)
    envs = [MemSearchQAEnv(task, retriever=retriever, search=cfg.search, objectives=cfg.objectives, context=strategy,
                           max_turns=cfg.max_turns, tokenizer=tokenizer)
            for _ in range(cfg.questions_per_step * cfg.group_size)]

    # Threads by measurement on a CPU: the tiny policy's one-token decoding steps and its update can
    # each prefer one thread or every core, depending on the CPU and on what else runs on it.
    if device == "cpu":
        probe = encode(tokenizer, render_prompt(envs[0].reset(seed=cfg.seed)[0], tokenizer))
        settings = candidates("fp32", cfg.threads)
        generation = fastest(lambda _: backend.generate([probe] * cfg.group_size, max_new_tokens=8, seed=0),
                             settings)[0] if cfg.backend == "hf" else Setting(threads=torch.get_num_threads())
        ids = torch.tensor([(probe * (cfg.pack_tokens // len(probe) + 1))[: cfg.pack_tokens]])
        update = fastest(lambda _: (model(input_ids=ids).logits.logsumexp(-1).mean().backward(), model.zero_grad()),
                         settings)[0]
        print(f"threads: {generation.threads} for generation, {update.threads} for the update (fp32)")
    else:
        generation = update = Setting(threads=cfg.threads or torch.get_num_threads(), device=device)
        print(f"compute: {update} for generation and the update")

    # Log lines past the checkpoint belong to steps that will run again: drop them.
    metrics_path, curve_path = run_dir / "metrics.jsonl", run_dir / "curve.jsonl"
    lines = [m for m in load_done(metrics_path) if m["step"] <= start]
    write_atomic(metrics_path, "".join(json.dumps(m) + "\n" for m in lines))  # a kill here loses no line
    curve = [c for c in load_done(curve_path) if c["step"] <= start]
    write_atomic(curve_path, "".join(json.dumps(c) + "\n" for c in curve))

    evaluation = dict(objectives=cfg.objectives, context=strategy, search=cfg.search, max_turns=cfg.max_turns,
                      max_new_tokens=cfg.max_new_tokens, temperature=cfg.temperature, samples=cfg.eval_samples)

    def curve_point(step: int) -> float:
        """Held-out greedy and sampled F1 of the current policy on the curve's questions: a line of
        ``curve.jsonl``; returns its seconds."""
        began = time.perf_counter()
        with num_threads(generation.threads):
            greedy, sampled = greedy_and_sampled(backend, test, episodes=cfg.curve_questions, **evaluation)
        recall = defined(per_question(sampled, cfg.eval_samples, "episode_memory_recall"))
        greedy, sampled = per_question(greedy, 1), per_question(sampled, cfg.eval_samples)
        point = {"step": step, "greedy_f1": mean_ci(greedy), "sampled_f1": mean_ci(sampled),
                 "sampled_memory_recall": mean_ci(recall) if recall else None,
                 "per_question": {"greedy": greedy, "sampled": sampled}}
        with curve_path.open("a") as f:
            f.write(json.dumps(point) + "\n")
        tracker.log({"eval/curve_greedy_f1": point["greedy_f1"][0], "eval/curve_sampled_f1": point["sampled_f1"][0]},
                    step)
        return time.perf_counter() - began

    tracker = Tracker(run_dir, cfg.log, dataclasses.asdict(cfg))
    if cfg.eval_every and not any(c["step"] == 0 for c in curve):
        curve_point(0)  # the start of the curve
    bar = tqdm(range(start, cfg.steps), initial=start, total=cfg.steps, desc=cfg.algo)
    for step in bar:
        # 3. Rollouts: G episodes per question group, generated in lockstep.
        timer = PhaseTimer()
        groups = question_groups(cfg, step, len(task.questions))
        with num_threads(generation.threads):
            rollouts = collect_rollouts(backend, envs, groups, max_new_tokens=cfg.max_new_tokens,
                                        temperature=cfg.temperature, top_p=cfg.top_p,
                                        seed=cfg.seed * 100_003 + step, include_mem_tags=cfg.mem_include_tags)
        timer.lap("rollout_s")
        with num_threads(update.threads):  # the scoring pass and the update: long sequences
            group_ids = torch.tensor([r.group for r in rollouts])
            control = torch.Generator().manual_seed(cfg.seed * 100_003 + step)  # --control shuffled's draws

            # 4. Outcome advantage (GRPO): the episode's reward, normalised within its question group.
            rewards = [r.reward(cfg.reward) for r in rollouts]
            a_out = grpo_advantages(torch.tensor(rewards), group_ids)
            if cfg.control == "shuffled":
                a_out = shuffled_within_groups(a_out, group_ids, control)

            # 5. Memory advantage (MemPO): by default P(gold | memory) - P(gold | full history), per scored
            #    turn, normalised over all scored turns of the same question (--memory-reward: the
            #    variants); added to that turn's <mem> tokens.
            a_mem: dict[tuple[int, int], float] = {}
            mem_stats: dict[str, float] = {}
            if cfg.algo == "mempo":
                term = memory_term(cfg.memory_reward, backend, rollouts, group_ids, first_turn=cfg.mem_first_turn,
                                   think=cfg.answer_think, prefix=cfg.answer_prefix,
                                   model=model if cfg.backend == "hf" else None)
                if term.pairs:
                    adv = term.advantages
                    if cfg.control == "shuffled":
                        adv = shuffled_within_groups(adv, term.pools, control)
                    a_mem = {pair: a.item() for pair, a in zip(term.pairs, adv)}
                    mem_stats = term.stats
            timer.lap("memory_reward_s")

            # 6. PPO-clip + KL on the exact generated tokens (prompt and tool tokens carry no loss), their
            #    log-probs from prefix trees of the step's samples (one forward and backward per tree).
            samples = build_samples(rollouts, a_out.tolist(), a_mem, strategy, cfg.agg)
            tokens = [generated_tokens(s) for s in samples]
            sequences, positions = [s.input_ids for s in samples], [t.positions for t in tokens]
            with torch.no_grad():
                ref_logp = sequence_logprobs(ref, sequences, positions, max_tokens=cfg.pack_tokens,
                                             temperature=cfg.temperature)
            model.train()
            loss_stats: list[dict[str, float]] = []
            for _ in range(cfg.epochs):
                order = torch.randperm(len(samples)).tolist()
                for m in range(0, len(order), cfg.minibatch_size):
                    minibatch = order[m : m + cfg.minibatch_size]
                    minibatch_weight = sum(tokens[i].weights.sum() for i in minibatch)
                    optimizer.zero_grad()
                    for pack in packs(sequences, cfg.pack_tokens, minibatch):
                        logp = torch.cat(pack_logprobs(model, pack, sequences, positions, cfg.temperature))
                        part = [tokens[i] for i in pack.members]
                        weights = torch.cat([t.weights for t in part]).to(device)
                        loss, stats = ppo_loss(logp, torch.cat([t.old_logp for t in part]).to(device),
                                               torch.cat([ref_logp[i] for i in pack.members]),
                                               torch.cat([t.advantages for t in part]).to(device), weights,
                                               clip_eps=cfg.clip_eps, kl_coef=cfg.kl_coef)
                        # each pack's weighted mean, weighed by its share: the mini-batch's weighted mean
                        (loss * weights.sum() / minibatch_weight).backward()
                        loss_stats.append(stats)
                    stats_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
                    optimizer.step()
            model.eval()
            timer.lap("update_s")  # the reference pass and the PPO epochs
            backend.update_weights(model)  # 7. the rollout engine generates with the new weights
            timer.lap("sync_s")

        infos = [r.info for r in rollouts]
        group_rewards = [float(np.mean([x for x, g in zip(rewards, group_ids.tolist()) if g == k]))
                         for k in range(len(groups))]
        metrics = {
            "step": step + 1,
            "reward": float(np.mean(rewards)),
            "group_rewards": group_rewards,
            "score": float(np.mean([r.score for r in rollouts])),
            "em": float(np.mean([i["em"] for i in infos])),
            "f1": float(np.mean([i["f1"] for i in infos])),
            # of the gold evidence each rollout found, the share its <mem> kept (mempo_env.recall)
            "memory_recall": (float(np.mean(found)) if (found := [i["episode_memory_recall"] for i in infos
                                                                 if i["episode_memory_recall"] is not None]) else None),
            "format_ok": float(np.mean([i["format_ok"] for i in infos])),
            "turns": float(np.mean([i["n_turns"] for i in infos])),
            "total_tokens": float(np.mean([i["total_tokens"] for i in infos])),
            "grad_norm": float(stats_norm),
            **{k: float(np.mean([s[k] for s in loss_stats])) for k in loss_stats[0]},
            **mem_stats,
            **timer.times, "step_s": sum(timer.times.values()),
        }
        metrics["reward_avg"], metrics["reward_avg_ci"] = reward_average([*lines, metrics], cfg.reward_window)
        # 8. The learning curve: held-out greedy and sampled F1 every eval_every steps and at the end.
        if cfg.eval_every and ((step + 1) % cfg.eval_every == 0 or step + 1 == cfg.steps):
            metrics["eval_s"] = curve_point(step + 1)
        lines.append(metrics)
        with metrics_path.open("a") as f:
            f.write(json.dumps(metrics) + "\n")
        tracker.log(metrics, step + 1)  # the loggers keep its numbers
        bar.set_postfix(reward=f"{metrics['reward']:.2f}", avg=f"{metrics['reward_avg']:.2f}",
                        em=f"{metrics['em']:.2f}", tokens=f"{metrics['total_tokens']:.0f}")
        if (step + 1) % cfg.checkpoint_every == 0 or step + 1 == cfg.steps:
            save_checkpoint(run_dir, model, tokenizer, optimizer, step + 1)

    # 9. Held-out evaluation in the run's context strategy: the starting policy vs the trained one, same
    #    questions, greedy and sampled at the rollout temperature.
    result: dict[str, Any] = {"run_dir": str(run_dir), "steps": cfg.steps, "task": task.name, "eval_task": test.name}
    if cfg.eval_episodes:
        infos, sampled = {}, {}
        with num_threads(generation.threads):
            for name, weights in (("start", ref), ("trained", model)):
                infos[name], sampled[name] = greedy_and_sampled(make_backend("hf", weights, tokenizer), test,
                                                                episodes=cfg.eval_episodes, **evaluation)
        rows = summarize([{**i, "agent": name, "context": strategy.name, "objectives": cfg.objectives}
                          for name, episodes in infos.items() for i in episodes])
        result["eval"] = {row["agent"]: row for row in rows}
        f1 = {name: per_question(episodes, cfg.eval_samples) for name, episodes in sampled.items()}
        result["sampled_f1"] = {name: mean_ci(values) for name, values in f1.items()}
        recall = {name: defined(per_question(episodes, cfg.eval_samples, "episode_memory_recall"))
                  for name, episodes in sampled.items()}
        result["sampled_memory_recall"] = {name: mean_ci(values) if values else None for name, values in recall.items()}
        # Both policies answered the same questions, in order: the per-question difference is the sharper test.
        result["gain"] = {m: mean_ci([b[m] - a[m] for a, b in zip(infos["start"], infos["trained"])])
                          for m in ("em", "f1")}
        result["gain"]["sampled_f1"] = mean_ci([b - a for a, b in zip(f1["start"], f1["trained"])])
        record = {"task": test.name, "rows": jsonable(rows), "gain": result["gain"], "samples": cfg.eval_samples,
                  "temperature": cfg.temperature, "sampled_f1": result["sampled_f1"],
                  "sampled_memory_recall": result["sampled_memory_recall"],
                  "episodes": {name: [{m: i[m] for m in ("em", "f1", "total_tokens", "episode_memory_recall")}
                                      for i in episodes]
                               for name, episodes in infos.items()},  # per question: runs compare paired
                  "sampled_per_question": f1}
        (run_dir / "eval.json").write_text(json.dumps(record, indent=1))
        sampled = "\n".join([*table_head(["policy", "sampled F1 %", "sampled memory recall %"]),
                             *(f"| {name} | {percent(f1_ci)} | {percent(result['sampled_memory_recall'][name])} |"
                               for name, f1_ci in result["sampled_f1"].items())])
        gains = ", ".join(f"{label} {100 * g:+.1f} ± {100 * ci:.1f} points" for label, (g, ci) in
                          zip(("greedy EM", "greedy F1", "sampled F1"), result["gain"].values()))
        text = (f"Greedy, one episode per question:\n\n{markdown_table(rows)}\n\n"
                f"Sampled at temperature {cfg.temperature}, {cfg.eval_samples} episodes per question "
                f"(mean ± 95% Student-t half-width over the {cfg.eval_episodes} questions; memory recall: of the "
                f"gold evidence found, the share each turn's <mem> kept, over the questions that found some):\n\n"
                f"{sampled}\n\n"
                f"trained - start, paired on the same questions (95% Student-t interval): {gains}")
        (run_dir / "eval.md").write_text(text + "\n")
        tracker.log({f"eval/{name}_{m}": row[m][0] for name, row in result["eval"].items() for m in ("em", "f1")}
                    | {f"eval/{name}_sampled_f1": v[0] for name, v in result["sampled_f1"].items()}, cfg.steps)
        print(text)
    tracker.close()
    print(f"written to {run_dir}")
    return result


def percent(value: tuple[float, float] | None) -> str:
    """A (mean, 95% half-width) fraction as ``"89.5 ± 5.3"`` percent; ``"n/a"`` for ``None`` (nothing to average)."""
    return "n/a" if value is None else f"{100 * value[0]:.1f} ± {100 * value[1]:.1f}"


def resumed(cfg: Config, algo: str, argv: list[str] | None, prog: str, description: str) -> Config:
    """The saved config of the run ``cfg.resume`` names, with the options given now that may change on
    resume (``RESUMABLE``: the budget and the evaluation); any other changed option is refused."""
    saved_path = Path(cfg.resume) / "config.json"
    if not saved_path.is_file():
        raise ValueError(f"--resume {cfg.resume}: no config.json there (not a run directory)")
    try:
        saved = json.loads(saved_path.read_text())
    except ValueError as e:  # truncated by hand or by a disk: the message names the file
        raise ValueError(f"{saved_path} is not valid JSON ({e}); restore it") from None
    if not isinstance(saved, dict):
        raise ValueError(f"{saved_path} holds no run's settings (a JSON object)")
    if unknown := sorted(set(saved) - {f.name for f in dataclasses.fields(Config)}):
        raise ValueError(f"--resume {cfg.resume}: its config.json has settings this version does not know "
                         f"({', '.join(unknown)})")
    if saved.get("algo", algo) != algo:
        raise ValueError(f"--resume {cfg.resume}: a {saved['algo']} run; resume it with python -m "
                         f"algorithms.{saved['algo']}")
    saved = {k: tuple(v) if isinstance(v, list) else v for k, v in saved.items()}  # JSON has no tuples
    try:
        before = Config(**{**saved, "resume": cfg.resume, "run_dir": cfg.resume})
    except (TypeError, ValueError) as e:  # a value of the wrong type or out of range
        raise ValueError(f"{saved_path}: {e}") from None
    after = tyro.cli(Config, default=before, prog=prog, description=description, args=argv)
    if refused := [f.name for f in dataclasses.fields(Config)
                   if f.name not in RESUMABLE and getattr(after, f.name) != getattr(before, f.name)]:
        raise ValueError(f"--resume keeps the run's settings; only {', '.join(RESUMABLE)} may change, not "
                         f"{', '.join(refused)}")
    return after


def main(algo: str = "mempo", argv: list[str] | None = None, description: str = __doc__) -> None:
    prog = f"python -m algorithms.{algo}"
    try:
        default = Config(algo=algo)
        default.run_dir = ""  # filled from the options given (--control's folder), not from the defaults'
        cfg = tyro.cli(Config, default=default, prog=prog, description=description, args=argv)
        if cfg.resume:
            cfg = resumed(cfg, algo, argv, prog, description)
        resolve_device(cfg.device)
        data, strategy = datasets(cfg), make_strategy(cfg.context)
    except (ValueError, FileNotFoundError) as e:  # a bad value or a missing data file: one line, exit 2
        print(f"{prog}: error: {e}", file=sys.stderr)
        sys.exit(2)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        train(cfg, data, strategy)
    except (RunFolderError, CheckpointError) as e:  # a busy, damaged or lost run folder, a policy that is no
        # causal LM with a chat template, a checkpoint of another network: one line, exit 2
        print(f"{prog}: error: {e}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
