"""Supervised warm-up (the spec's cold start): teach the protocol from oracle trajectories.

    python -m algorithms.sft            # build the default warm-up's two stages in runs/cache
    python -m algorithms.sft --ship     # the same, then make it the shipped one (algorithms/warmup/)
    python -m algorithms.sft --steps 10 # one stage with these settings (--help lists them)

The oracle's turns, seen through the memory-forcing view, are the targets: the prompt and tool
tokens are context, only the response tokens are trained. The episodes come from many generated
worlds (the task's own world is the first): in one world a small model memorises every fact and
never learns to read the tool responses, which is the skill held-out questions need.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import random
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import tyro
from tqdm import tqdm
from transformers import AutoModelForCausalLM, AutoTokenizer

from agents import OracleAgent
from algorithms.compute import Setting, candidates, cpu_name, fastest, num_threads
from algorithms.loss import token_logprobs
from algorithms.rollout import encode
from algorithms.tiny_policy import build_tiny_policy
from mempo_env.env import MemSearchQAEnv
from mempo_env.retrieval import make_retriever
from mempo_env.tasks import make_generated_task
from mempo_env.views import render_prompt


@dataclass
class SFTConfig:
    base: str = ""
    """HF causal LM to warm up; empty: the embedded tiny policy (built if missing)"""
    cache_dir: str = "runs/cache"
    """where built policies and warm-ups are kept, keyed by their settings"""
    task_seed: int = 0
    """which generated world"""
    hops: int = 1
    """hops per generated question"""
    objectives: tuple[int, ...] = (1, 2)
    """questions per oracle episode, cycled through (trained on 1 and 2 alone, the policy answers after
    two questions whatever their number: 0% EM at 3 and more; ``default_warmup``'s second stage adds
    3 and 4)"""
    worlds: int = 100
    """generated worlds (seeds task_seed, task_seed + 1, ...) the episodes are spread over"""
    episodes: int = 4000
    """oracle episodes (train splits) to learn from"""
    full_context: float = 0.0
    """share of the episodes whose turns are seen in the full-context view (the rest: the memory view).
    The memory reward subtracts P(gold | full history), and the no-memory baseline trains in that view:
    both need a policy that can also answer from a full history. Measured once, at 0.5, with a
    variant tokenizer and batches grouped by length (both since reverted): 4,000 steps did not learn
    to read (5.6% EM, world 1, 1 objective; README, Learners)"""
    pointer_memory: float = 0.0
    """share of the episodes demonstrated by an oracle whose memory notes only which document answered
    each hop, not what it said (``OracleAgent(keep_evidence=False)``), and which therefore answers
    "unknown" to every question but the last. The policy learns both ways of writing a note, and RL
    is left the choice between them: what to keep, the skill MemPO's memory advantage rewards
    (README, Learners). Made for 1-hop questions: on longer chains that oracle still searches each
    next hop by a name its memory has lost."""
    steps: int = 4000
    """optimizer steps (measured: 58 minutes on one core of this 2-core machine, the other busy; 2,500
    steps took 27 minutes on both, and read far less: 10% held-out EM at 1 objective, against 89.5%)"""
    batch_size: int = 16
    """turns per step"""
    lr: float = 2e-3
    """peak AdamW learning rate: linear warm-up, then cosine decay to 0"""
    warmup_steps: int = 50
    """steps of linear learning-rate warm-up"""
    context_weight: float = 0.3
    """weight of the next-token loss on prompt and tool tokens, next to the responses' loss: a
    from-scratch policy has no pretraining, and predicting the documents (which repeat their titles)
    is where it learns to copy names; 0 trains the responses only"""
    precision: str = "auto"
    """"auto": time a step under fp32 and bf16 autocast at start-up and keep the faster (bf16 halves a
    step with bf16 instructions and was 13x slower where it is emulated); "fp32" or "bf16" to fix it"""
    threads: int = 0
    """torch threads; 0: time a step with 1 and with every core, keep the faster (on 2 busy cores one
    thread ran 4x faster than two)"""
    seed: int = 0
    """seeds the tiny policy's initialisation and the batch order"""


def oracle_turns(cfg: SFTConfig, tokenizer) -> list[tuple[list[int], list[int]]]:
    """(prompt ids, response ids) of every oracle turn, prompts in the memory-forcing view or, for a
    ``full_context`` share of the episodes, the whole history."""
    agents, turns, pick = (OracleAgent(), OracleAgent(keep_evidence=False)), [], random.Random(cfg.seed)
    for w in range(min(cfg.worlds, cfg.episodes)):
        task = make_generated_task("train", seed=cfg.task_seed + w, hops=cfg.hops)
        retriever = make_retriever(None, task.corpus)
        envs = {view: MemSearchQAEnv(task, retriever=retriever, context=view) for view in ("memory", "full")}
        for episode in range(w, cfg.episodes, cfg.worlds):
            env = envs["full" if pick.random() < cfg.full_context else "memory"]
            agent = agents[pick.random() < cfg.pointer_memory]
            k = cfg.objectives[episode % len(cfg.objectives)]
            obs, info = env.reset(seed=cfg.seed * 1_000_003 + episode, options={"objectives": k})
            done = False
            while not done:
                action = agent.act(obs, info)
                turns.append((encode(tokenizer, render_prompt(obs, tokenizer)), encode(tokenizer, action)))
                obs, _, terminated, truncated, info = env.step(action)
                done = terminated or truncated
    return turns


def warm_up(cfg: SFTConfig, out_dir: Path) -> Path:
    if cfg.base:
        base = Path(cfg.base)
    else:
        tiny_dir = Path(cfg.cache_dir) / "tiny-policy" / f"task{cfg.task_seed}-seed{cfg.seed}"
        exists = (tiny_dir / "config.json").exists()
        base = tiny_dir if exists else build_tiny_policy(tiny_dir, task_seed=cfg.task_seed, seed=cfg.seed)
    tokenizer = AutoTokenizer.from_pretrained(base)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    turns = oracle_turns(cfg, tokenizer)
    rng = random.Random(cfg.seed)
    torch.manual_seed(cfg.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / cfg.warmup_steps)
                                                 * 0.5 * (1 + math.cos(math.pi * s / cfg.steps)))
    model.train()

    def loss_of(batch: list[tuple[list[int], list[int]]], setting: Setting) -> torch.Tensor:
        """Next-token loss of the responses, plus ``context_weight`` times that of prompts and tool text."""
        # Padded to a multiple of 32: under bf16 autocast every new sequence length left memory behind
        # (5.5 GB after 2,500 steps); a few distinct lengths keep it flat.
        length = -(-max(len(p) + len(r) for p, r in batch) // 32) * 32
        ids = torch.full((len(batch), length), tokenizer.pad_token_id)
        attention = torch.zeros_like(ids)
        target = torch.zeros(len(batch), length)
        for i, (p, r) in enumerate(batch):
            ids[i, : len(p) + len(r)] = torch.tensor(p + r)
            attention[i, : len(p) + len(r)] = 1
            target[i, len(p) : len(p) + len(r)] = 1
        response, context = target[:, 1:], attention[:, 1:] * (1 - target[:, 1:])
        with setting.autocast():
            logp = token_logprobs(model, ids, attention, mask=response + context if cfg.context_weight else response)
        loss = -(logp * response).sum() / response.sum()
        return loss - cfg.context_weight * (logp * context).sum() / context.sum() if cfg.context_weight else loss

    probe = random.Random(-1).sample(turns, min(cfg.batch_size, len(turns)))  # leaves the batch order alone
    setting, seconds = fastest(lambda s: (loss_of(probe, s).backward(), model.zero_grad()),
                               candidates(cfg.precision, cfg.threads))
    started = time.perf_counter()
    with num_threads(setting.threads):
        for _ in (bar := tqdm(range(cfg.steps), desc=f"warm-up ({setting})")):
            loss = loss_of(rng.sample(turns, min(cfg.batch_size, len(turns))), setting)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            bar.set_postfix(loss=f"{loss.item():.3f}")
    build = {"seconds": round(time.perf_counter() - started), "compute": str(setting), "cpu": cpu_name(),
             "measured_s_per_step": {str(s): round(t, 4) for s, t in seconds.items()}, "torch": torch.__version__}
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=out_dir.parent))
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    (tmp / "sft_config.json").write_text(json.dumps(dataclasses.asdict(cfg), indent=1))
    (tmp / "build.json").write_text(json.dumps(build, indent=1))
    shutil.rmtree(out_dir, ignore_errors=True)
    tmp.rename(out_dir)
    return out_dir


def recipe(cfg: SFTConfig) -> dict:
    """What a warm-up learns from, the key of its cache: not where it is kept, nor the precision and
    threads that only change how fast it is built."""
    return {k: v for k, v in dataclasses.asdict(cfg).items() if k not in ("cache_dir", "precision", "threads")}


def warmup_dir(cfg: SFTConfig) -> Path:
    key = hashlib.sha1(json.dumps(recipe(cfg), sort_keys=True).encode()).hexdigest()[:10]
    return Path(cfg.cache_dir) / f"warmup-{key}"


def ensure_warmup(cfg: SFTConfig) -> Path:
    """The warm-up checkpoint for these settings: reused if it was built before, else built now."""
    out_dir = warmup_dir(cfg)
    return out_dir if (out_dir / "config.json").exists() else warm_up(cfg, out_dir)


SHIPPED = Path(__file__).with_name("warmup")
"""The default warm-up of world 0 (1-hop questions), shipped with the project so that nobody waits for
its build (tens of minutes on 2 cores, hours where bf16 is emulated). ``python -m algorithms.sft
--ship`` rebuilds it; ``warmup.json`` beside it records the recipe of both stages and the build."""


def default_stages(task_seed: int = 0, hops: int = 1, cache_dir: str = "runs/cache") -> tuple[SFTConfig, SFTConfig]:
    """The embedded policy's warm-up, in two stages (README, Learners):

    1. reading: ``SFTConfig``'s defaults, the oracle at 1 and 2 objectives;
    2. a short continuation of stage 1's checkpoint at 1-4 objectives in which half the episodes come
       from the oracle whose memory keeps only pointers. Greedy, the policy then keeps the evidence in
       about a quarter of its 1- and 2-objective episodes, and reads well only then: what to keep is
       left to RL.
    """
    reader = SFTConfig(cache_dir=cache_dir, task_seed=task_seed, hops=hops)
    return reader, SFTConfig(base=str(warmup_dir(reader)), cache_dir=cache_dir, task_seed=task_seed, hops=hops,
                             objectives=(1, 2, 3, 4), pointer_memory=0.5, episodes=2000, steps=600, lr=5e-4)


def shipped_recipe(stages: tuple[SFTConfig, SFTConfig]) -> list[dict]:
    """The stages' recipes as ``warmup.json`` records them (JSON: tuples are lists): stage 2's base is
    stage 1, not a path."""
    return json.loads(json.dumps([recipe(stages[0]), {**recipe(stages[1]), "base": "stage 1"}]))


def default_warmup(task_seed: int = 0, hops: int = 1, cache_dir: str = "runs/cache", *, build: bool = False) -> Path:
    """The default warm-up for this world: the shipped one where its recorded recipe is what
    ``default_stages`` asks for (world 0, 1 hop), else (or with ``build``) built in ``cache_dir``."""
    stages = default_stages(task_seed, hops, cache_dir)
    record = SHIPPED / "warmup.json"
    if not build and record.exists() and json.loads(record.read_text())["stages"] == shipped_recipe(stages):
        return SHIPPED
    ensure_warmup(stages[0])
    return ensure_warmup(stages[1])


def ship(stage2: Path, stages: tuple[SFTConfig, SFTConfig]) -> Path:
    """Make a built default warm-up the shipped one, with the recipe and build records of both stages."""
    builds = [json.loads((warmup_dir(cfg) / "build.json").read_text()) for cfg in stages]
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=SHIPPED.parent))
    for f in stage2.iterdir():
        if f.name not in ("sft_config.json", "build.json"):
            shutil.copy(f, tmp / f.name)
    record = {"command": "python -m algorithms.sft --ship", "stages": shipped_recipe(stages), "builds": builds}
    (tmp / "warmup.json").write_text(json.dumps(record, indent=1) + "\n")
    shutil.rmtree(SHIPPED, ignore_errors=True)
    tmp.rename(SHIPPED)
    return SHIPPED


if __name__ == "__main__":
    # No options: build the default two-stage warm-up in runs/cache (--ship: and make it the shipped one).
    # Other options: one stage with those settings.
    if sys.argv[1:] in ([], ["--ship"]):
        built = default_warmup(build=True)
        print(ship(built, default_stages()) if sys.argv[1:] else built)
    else:
        print(ensure_warmup(tyro.cli(SFTConfig, description=__doc__)))
