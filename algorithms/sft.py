"""Supervised warm-up (the spec's cold start): teach the protocol from oracle trajectories.

    python -m algorithms.sft            # build the default warm-up in runs/cache (a CUDA GPU if there is one)
    python -m algorithms.sft --ship     # the same, then make it the shipped one (algorithms/warmup/)
    python -m algorithms.sft --steps 10 # a warm-up with other settings (--help lists them)
    python -m algorithms.sft --base PATH --lora-rank 16 --real hotpotqa musique ...  # a pretrained chat model
    # (HF folder or GGUF file; docs/learners.md#a-pretrained-model-smollm2-135m-instruct)

The oracle's turns are the targets, each prompt rendered in a context strategy (``--context``: the
memory-forcing view by default; ``full``, ``window:4``, ``summary``, ... as in
``mempo_env.context``): the prompt and tool tokens are context, only the response tokens are
trained. The episodes come from many generated worlds (the task's own world is the first): in one
world a small model memorises every fact and never learns to read the tool responses, which is the
skill held-out questions need.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import os
import random
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import tyro

from agents import OracleAgent
from agents.episode_log import hold_folder
from agents.summariser import make_strategy
from algorithms.compute import Setting, candidates, cpu_name, fastest, num_threads
from algorithms.rollout import encode
from mempo_env.context import ContextStrategy
from mempo_env.env import MemSearchQAEnv
from mempo_env.retrieval import make_retriever
from mempo_env.tasks import held_out, make_generated_task
from mempo_env.types import QATask
from mempo_env.views import render_prompt

if TYPE_CHECKING:
    import torch

# torch and transformers (seconds to import) come with warm_up() and turns_loss(): --help stays fast.


@dataclass
class SFTConfig:
    base: str = ""
    """HF causal LM to warm up, a model folder or a GGUF file (de-quantised to float32); empty: the embedded
    tiny policy (built if missing)"""
    cache_dir: str = "runs/cache"
    """where built policies and warm-ups are kept, keyed by their settings"""
    task_seed: int = 0
    """which generated world"""
    hops: int | tuple[int, ...] = 1
    """hops per generated question, or several (``--hops 1 2 3``: the mix ``benchmarks.run``'s generated
    task evaluates on; the learner trains at 1)"""
    objectives: tuple[int, ...] = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10)
    """questions per oracle episode, cycled through: every horizon the policy will meet (trained on 1
    and 2 alone, a policy answers after two questions whatever their number: 0% EM at 3 and more)"""
    worlds: int = 200
    """generated worlds (seeds task_seed, task_seed + 1, ...) the episodes are spread over"""
    episodes: int = 6000
    """oracle episodes (train splits) to learn from"""
    context: str = "memory"
    """the context strategy the oracle's turns are rendered in (memory, full, window:K,
    summary[:CHARS[:SUMMARISER]], or a registered name; mempo_env.context). The oracle acts on the whole
    history, so every strategy renders the same turns, also one whose prompts hide the oracle's last
    <mem> (a summary)"""
    full_context: float = 0.0
    """share of the episodes whose turns are seen in the full-context view (the rest: ``context``).
    The memory reward subtracts P(gold | full history), and the no-memory baseline trains in that view:
    both need a policy that can also answer from a full history (the P_full variant,
    docs/experiments/pfull-warm-up.md). Turns longer than the model's window are left out
    (``build.json`` counts them)"""
    pointer_memory: float = 0.0
    """share of the episodes demonstrated by an oracle whose memory notes only which document answered
    each hop, not what it said (``OracleAgent(keep_evidence=False)``), and which therefore answers
    "unknown" to every question but the last: an experiment in teaching a policy to keep pointers
    instead of evidence (docs/experiments/earlier-recipes.md). Made for 1-hop questions."""
    steps: int = 3000
    """optimizer steps (measured: 2 minutes on an H200; docs/experiments/warm-up.md has the CPU figures)"""
    checkpoint_every: int = 100
    """steps between saves of the training state (``.warmup-KEY.partial/`` beside the warm-up): a killed
    warm-up started again with the same settings continues from its last save, to the same weights"""
    batch_size: int = 64
    """turns per step"""
    microbatch_size: int = 0
    """turns per forward and backward pass within a step, in order of length; 0: the whole step at once.
    The gradient is the step's whole loss either way (each part is divided by the step's totals), so it
    is not part of the recipe: it saves the padding of a batch whose turns differ in length (the
    full context's run from 300 to 3,000 tokens) and the memory of 64 long turns at once"""
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
    lora_rank: int = 0
    """0: full fine-tuning; r > 0: a LoRA adapter of rank r (peft, alpha 2r) on every linear layer but the
    output head, merged into the weights when saved, so the warm-up is a plain model folder either way
    (the adapter alone is kept in ``adapter/``). For SmolLM2-135M on a Xeon core a rank-16 LoRA step ran at
    0.82x a full one's rate in bf16 and 1.2x in fp32, in about as much memory (docs/experiments/pretrained-model.md)"""
    real: tuple[str, ...] = ()
    """shared real QA sets (``hotpotqa``, ``musique``) that also give oracle episodes: their ``train100``
    questions and their dev questions outside the held-out share that ``algorithms.mempo`` and
    ``benchmarks.run --held-out`` evaluate on (``eval_fraction``), so no held-out question is trained on"""
    real_share: float = 0.5
    """share of the episodes played on the ``real`` sets (spread evenly over them); the rest on generated worlds"""
    eval_fraction: float = 0.2
    """each real set's held-out share of its dev questions (``mempo_env.tasks.held_out``, as the learner's)"""
    seed: int = 0
    """seeds the tiny policy's initialisation and the batch order"""
    hidden: int = 128
    """the tiny policy's width (ignored with ``base``)"""
    layers: int = 4
    """the tiny policy's decoder layers (ignored with ``base``)"""
    heads: int = 4
    """the tiny policy's attention heads (ignored with ``base``)"""
    from_adapter: str = ""
    """a folder holding a LoRA warm-up of this same recipe (``adapter/`` and ``recipe.json``, as a warm-up
    folder holds them, e.g. ``benchmarks/results/smollm2-warmup``): its adapter is merged onto ``base``
    instead of training, seconds instead of hours; another recipe's is refused"""


Turn = tuple[list[int], list[int]]
"""(prompt ids, response ids)"""


def real_training_task(name: str, eval_fraction: float) -> QATask:
    """A shared real set's questions a warm-up may learn from: its ``train100`` split and its dev split less
    the held-out share the learner and ``benchmarks.run --held-out`` evaluate on."""
    from mempo_env.tasks.loaders import load_shared

    train, dev = load_shared(name, split="train100"), held_out(load_shared(name, split="dev"), eval_fraction)[0]
    return QATask(f"{name}[warm-up]", train.questions + dev.questions, dev.corpus)


def oracle_turns(cfg: SFTConfig, tokenizer, strategy: ContextStrategy | None = None) -> list[Turn]:
    """(prompt ids, response ids) of every oracle turn, prompts in ``strategy`` (default: built from
    ``cfg.context``) or, for a ``full_context`` share of the episodes, the whole history. The oracle reads
    its progress from its own last turn, which the whole history always holds (``env.messages``): so
    the turns are the same in every strategy. A ``real_share`` of the episodes is played on ``cfg.real``'s
    training questions, the rest on generated worlds."""
    strategy = strategy or make_strategy(cfg.context)
    agents, turns, pick = (OracleAgent(), OracleAgent(keep_evidence=False)), [], random.Random(cfg.seed)
    real = round(cfg.real_share * cfg.episodes) if cfg.real else 0
    generated = cfg.episodes - real
    sources = [(make_generated_task("train", seed=cfg.task_seed + w, hops=cfg.hops), range(w, generated, cfg.worlds))
               for w in range(min(cfg.worlds, generated))]
    sources += [(real_training_task(name, cfg.eval_fraction), range(generated + i, cfg.episodes, len(cfg.real)))
                for i, name in enumerate(cfg.real)]
    for task, episodes in sources:
        retriever = make_retriever(None, task.corpus)
        envs = [MemSearchQAEnv(task, retriever=retriever, context=view) for view in (strategy, "full")]
        for episode in episodes:
            env = envs[pick.random() < cfg.full_context]
            agent = agents[pick.random() < cfg.pointer_memory]
            k = cfg.objectives[episode % len(cfg.objectives)]
            obs, info = env.reset(seed=cfg.seed * 1_000_003 + episode, options={"objectives": k})
            done = False
            while not done:
                action = agent.act(env.messages, info)
                turns.append((encode(tokenizer, render_prompt(obs, tokenizer)), encode(tokenizer, action)))
                obs, _, terminated, truncated, info = env.step(action)
                done = terminated or truncated
    return turns


def turns_loss(model: torch.nn.Module, batch: list[Turn], setting: Setting, cfg: SFTConfig, pad: int,
               totals: tuple[int, int]) -> torch.Tensor:
    """Next-token loss of the responses, plus ``context_weight`` times that of prompts and tool text,
    each summed over ``batch`` and divided by ``totals`` (the step's response and context tokens)."""
    import torch

    from algorithms.loss import token_logprobs

    # Padded to a multiple of 32: under bf16 autocast every new sequence length left memory behind
    # (5.5 GB after 2,500 steps); a few distinct lengths keep it flat.
    length = -(-max(len(p) + len(r) for p, r in batch) // 32) * 32
    ids = torch.full((len(batch), length), pad)
    attention = torch.zeros_like(ids)
    target = torch.zeros(len(batch), length)
    for i, (p, r) in enumerate(batch):
        ids[i, : len(p) + len(r)] = torch.tensor(p + r)
        attention[i, : len(p) + len(r)] = 1
        target[i, len(p) : len(p) + len(r)] = 1
    ids, attention, target = ids.to(setting.device), attention.to(setting.device), target.to(setting.device)
    response, context = target[:, 1:], attention[:, 1:] * (1 - target[:, 1:])
    with setting.autocast():
        logp = token_logprobs(model, ids, attention, mask=response + context if cfg.context_weight else response)
    loss = -(logp * response).sum() / totals[0]
    return loss - cfg.context_weight * (logp * context).sum() / totals[1] if cfg.context_weight else loss


def accumulate(model: torch.nn.Module, batch: list[Turn], setting: Setting, cfg: SFTConfig, pad: int) -> float:
    """Add the gradient of ``batch``'s loss to ``model``'s, ``cfg.microbatch_size`` turns at a time in
    order of length (similar lengths pad little); return the loss."""
    totals = sum(len(r) for _, r in batch), sum(len(p) - 1 for p, _ in batch)
    size = cfg.microbatch_size or len(batch)
    ordered = sorted(batch, key=lambda t: len(t[0]) + len(t[1])) if size < len(batch) else batch
    loss = 0.0
    for i in range(0, len(ordered), size):
        part = turns_loss(model, ordered[i : i + size], setting, cfg, pad, totals)
        part.backward()
        loss += part.item()
    return loss


PROBE_SIZE = 100_000_000_000
"""parameters x tokens of the step that times each precision and thread count: a whole step of the tiny
policy (1.2M parameters), a slice of one for a pretrained model (SmolLM2-135M: 740 tokens, 8 s a call in
fp32 on one Xeon core; its whole 64-turn step, timed six times over, would take half an hour)"""


def probe_turns(turns: list[Turn], budget: int) -> list[Turn]:
    """The first of ``turns`` that hold at most ``budget`` tokens together (at least one turn)."""
    kept, total = [], 0
    for turn in turns:
        total += len(turn[0]) + len(turn[1])
        if kept and total > budget:
            break
        kept.append(turn)
    return kept


def warm_up(cfg: SFTConfig, out_dir: Path, turns: list[Turn] | None = None) -> Path:
    """Train ``cfg``'s warm-up into ``out_dir``. ``turns``: its oracle turns when rendered already
    (``oracle_turns`` of ``cfg`` with the base's tokenizer), e.g. to compare them with another strategy's."""
    import torch
    from tqdm import tqdm

    from agents.checkpoints import load_policy
    from algorithms.tiny_policy import build_tiny_policy

    strategy = make_strategy(cfg.context)  # a bad name fails before anything is built
    if cfg.microbatch_size < 0:
        raise ValueError(f"microbatch_size must be >= 0 (0: the whole step at once), not {cfg.microbatch_size}")
    if cfg.lora_rank < 0:
        raise ValueError(f"lora_rank must be >= 0 (0: full fine-tuning), not {cfg.lora_rank}")
    if not 0 <= cfg.real_share <= 1 or not 0 < cfg.eval_fraction < 1:
        raise ValueError(f"need 0 <= real_share <= 1 and 0 < eval_fraction < 1, got {cfg.real_share}, "
                         f"{cfg.eval_fraction}")
    if cfg.base:
        base = Path(cfg.base)
    else:
        size = dict(hidden=cfg.hidden, layers=cfg.layers, heads=cfg.heads)
        shape = "x".join(map(str, size.values()))
        tiny_dir = Path(cfg.cache_dir) / "tiny-policy" / f"task{cfg.task_seed}-seed{cfg.seed}-{shape}"
        exists = (tiny_dir / "config.json").exists()
        base = tiny_dir if exists else build_tiny_policy(tiny_dir, task_seed=cfg.task_seed, seed=cfg.seed, **size)
    model, tokenizer = load_policy(str(base), dtype=torch.float32)
    window = model.config.max_position_embeddings
    if cfg.lora_rank:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=cfg.lora_rank, lora_alpha=2 * cfg.lora_rank, lora_dropout=0.0,
                                                 target_modules="all-linear"))
    trainable = [p for p in model.parameters() if p.requires_grad]
    turns = oracle_turns(cfg, tokenizer, strategy) if turns is None else turns
    # full views at long horizons can outgrow the window: left out, and counted in build.json
    dropped = len(turns) - len(turns := [t for t in turns if len(t[0]) + len(t[1]) <= window])
    rng = random.Random(cfg.seed)
    torch.manual_seed(cfg.seed)
    optimizer = torch.optim.AdamW(trainable, lr=cfg.lr, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / cfg.warmup_steps)
                                                 * 0.5 * (1 + math.cos(math.pi * s / cfg.steps)))
    model.train()
    pad = tokenizer.pad_token_id
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    partial = out_dir.with_name(f".{out_dir.name}.partial")
    partial.mkdir(exist_ok=True)
    with hold_folder(partial, "--cache-dir"):  # one build of a warm-up at a time
        state = resume_state(partial, cfg)
        if state is not None:  # a killed build of the same recipe: on from its last save
            setting, seconds = Setting(**state["setting"]), state["seconds"]
            model.to(setting.device)  # before the optimizer's state, which goes where the parameters are
            trainable_by_name = {n: p for n, p in model.named_parameters() if p.requires_grad}
            with torch.no_grad():
                for name, value in state["trainable"].items():
                    trainable_by_name[name].copy_(value)
            optimizer.load_state_dict(state["optimizer"])
            schedule.load_state_dict(state["schedule"])
            rng.setstate(state["rng"])
            torch.set_rng_state(state["torch_rng"])
        elif torch.cuda.is_available():  # a GPU builds the default recipe in 2 minutes instead of hours
            setting, seconds = Setting(bf16=cfg.precision != "fp32", threads=torch.get_num_threads(), device="cuda"), {}
        else:
            probe = random.Random(-1).sample(turns, min(cfg.batch_size, len(turns)))  # leaves the batch order alone
            probe = probe_turns(probe, PROBE_SIZE // sum(p.numel() for p in model.parameters()))
            setting, seconds = fastest(lambda s: (accumulate(model, probe, s, cfg, pad), model.zero_grad()),
                                       candidates(cfg.precision, cfg.threads))
        model.to(setting.device)
        done = state or {"step": 0, "losses": [], "elapsed": 0.0, "trained": 0}
        step, losses, trained, started = done["step"], done["losses"], done["trained"], time.perf_counter()
        with num_threads(setting.threads):
            for step in (bar := tqdm(range(step, cfg.steps), initial=step, total=cfg.steps,
                                     desc=f"warm-up ({setting})")):
                optimizer.zero_grad()
                batch = rng.sample(turns, min(cfg.batch_size, len(turns)))
                losses.append(round(accumulate(model, batch, setting, cfg, pad), 5))
                trained += sum(len(p) + len(r) for p, r in batch)
                torch.nn.utils.clip_grad_norm_(trainable, 1.0)
                optimizer.step()
                schedule.step()
                bar.set_postfix(loss=f"{losses[-1]:.3f}")
                if (step + 1) % cfg.checkpoint_every == 0 and step + 1 < cfg.steps:
                    elapsed = done["elapsed"] + time.perf_counter() - started
                    torch.save({"recipe": recipe_json(cfg), "step": step + 1, "losses": losses, "trained": trained,
                                "elapsed": elapsed, "setting": dataclasses.asdict(setting), "seconds": seconds,
                                "trainable": {n: p.detach().cpu() for n, p in model.named_parameters()
                                              if p.requires_grad},
                                "optimizer": optimizer.state_dict(), "schedule": schedule.state_dict(),
                                "rng": rng.getstate(), "torch_rng": torch.get_rng_state()}, partial / "state.tmp")
                    os.replace(partial / "state.tmp", partial / "state.pt")
    build = {"seconds": round(done["elapsed"] + time.perf_counter() - started), "compute": str(setting),
             "cpu": cpu_name(), "trainable_parameters": sum(p.numel() for p in trainable),
             "measured_s_per_step": {str(s): round(t, 4) for s, t in seconds.items()}, "torch": torch.__version__,
             "turns": len(turns), "turns_over_window": dropped, "trained_tokens": trained,
             "resumed_at_step": state and state["step"]}
    save(model.cpu(), tokenizer, cfg, out_dir, build, losses)
    shutil.rmtree(partial, ignore_errors=True)  # the training state, done with
    return out_dir


def save(model: torch.nn.Module, tokenizer, cfg: SFTConfig, out_dir: Path, build: dict, losses: list[float]) -> None:
    """Write a warm-up folder at once (a temporary folder renamed): the model, with a LoRA adapter merged
    in and also kept alone in ``adapter/`` (small enough to ship), its tokenizer, settings, recipe, build
    record and losses."""
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=out_dir.parent))
    if cfg.lora_rank:
        model.save_pretrained(tmp / "adapter")
        model = model.merge_and_unload()
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    (tmp / "sft_config.json").write_text(json.dumps(dataclasses.asdict(cfg), indent=1))
    (tmp / RECIPE).write_text(json.dumps(recipe(cfg), indent=1))
    (tmp / "build.json").write_text(json.dumps(build, indent=1))
    (tmp / "losses.json").write_text(json.dumps(losses))
    shutil.rmtree(out_dir, ignore_errors=True)
    tmp.rename(out_dir)


RECIPE = "recipe.json"
"""a warm-up folder's ``recipe(cfg)``, what ``--from-adapter`` checks a shipped adapter against"""


def restore(cfg: SFTConfig, out_dir: Path) -> Path:
    """The warm-up of ``cfg`` from the LoRA adapter a build of the same recipe left in ``cfg.from_adapter``,
    merged onto ``cfg.base``: what lets a pretrained model's warm-up be shipped in 20 MB rather than rebuilt
    in hours on a CPU. Its build record and losses come along."""
    import torch
    from peft import PeftModel

    from agents.checkpoints import load_policy

    source = Path(cfg.from_adapter)
    try:
        built = json.loads((source / RECIPE).read_text())
    except (OSError, ValueError) as e:
        raise FileNotFoundError(f"--from-adapter {source}: no readable {RECIPE} ({e})") from None
    if not (source / "adapter" / "adapter_config.json").exists():
        raise FileNotFoundError(f"--from-adapter {source}: no adapter/adapter_config.json in it")
    wanted = recipe_json(cfg)
    if differ := sorted(k for k in built.keys() | wanted.keys() if built.get(k) != wanted.get(k)):
        said = "; ".join(f"{k} {built.get(k)!r} there, {wanted.get(k)!r} here" for k in differ)
        raise ValueError(f"--from-adapter {source} holds a warm-up of other settings ({said})")
    model, tokenizer = load_policy(cfg.base, dtype=torch.float32)
    model = PeftModel.from_pretrained(model, source / "adapter")
    build = {**json.loads((source / "build.json").read_text()), "restored_from": str(source)}
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    save(model, tokenizer, cfg, out_dir, build, json.loads((source / "losses.json").read_text()))
    return out_dir


def recipe_json(cfg: SFTConfig) -> dict:
    """``recipe(cfg)`` as JSON gives it back (tuples as lists): what saved states and records compare."""
    return json.loads(json.dumps(recipe(cfg)))


def resume_state(partial: Path, cfg: SFTConfig) -> dict | None:
    """The saved training state of a killed build of ``cfg``'s recipe in ``partial``, if there is one; a state
    of another recipe or a damaged one is not continued (the build starts over and replaces it)."""
    import torch

    try:
        state = torch.load(partial / "state.pt", weights_only=False)
    except FileNotFoundError:
        return None
    except Exception as e:  # a damaged save: says so, and starts over
        print(f"{partial / 'state.pt'} is unreadable ({type(e).__name__}); the warm-up starts over", file=sys.stderr)
        return None
    return state if isinstance(state, dict) and state.get("recipe") == recipe_json(cfg) else None


def recipe(cfg: SFTConfig) -> dict:
    """What a warm-up learns from, the key of its cache: not where it is kept, nor the precision,
    threads and micro-batches that only change how fast it is built. The memory view, what every
    warm-up used before ``context`` existed, is left out of it, so those keep their key (the shipped
    one its record)."""
    skip = ("cache_dir", "precision", "threads", "microbatch_size", "checkpoint_every", "from_adapter") + (
        ("context",) if cfg.context == "memory" else ())
    # options added since the shipped warm-up are left out at their defaults, so that it keeps its key
    later = {"lora_rank": 0, "real": (), "real_share": 0.5, "eval_fraction": 0.2}
    kept = {k: v for k, v in dataclasses.asdict(cfg).items() if k not in skip and later.get(k, k) != v}
    return kept | ({"base": base_identity(cfg.base)} if cfg.base else {})


@functools.cache
def _sha256(path: Path, size: int, mtime_ns: int) -> str:  # size and mtime: a file changed in place is hashed anew
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def base_identity(base: str) -> str:
    """A base model as a recipe names it: its file or folder name and the SHA-256 of its contents, not
    where it is installed, so that the same GGUF file in a venv, under pyenv or on CI keys the same
    warm-up and matches a shipped adapter, while two checkpoints of one shape stay apart. A path that
    does not exist is kept as given (loading it fails with its own error)."""
    path = Path(base)
    files = sorted(f for f in path.iterdir() if f.is_file()) if path.is_dir() else [path] if path.is_file() else []
    if not files:
        return base
    digest = hashlib.sha256()
    for f in files:
        stat = f.stat()
        digest.update(f"{f.name}\0{_sha256(f.resolve(), stat.st_size, stat.st_mtime_ns)}\0".encode())
    return f"{path.name} sha256:{digest.hexdigest()[:16]}"


def warmup_dir(cfg: SFTConfig) -> Path:
    key = hashlib.sha1(json.dumps(recipe(cfg), sort_keys=True).encode()).hexdigest()[:10]
    return Path(cfg.cache_dir) / f"warmup-{key}"


def ensure_warmup(cfg: SFTConfig) -> Path:
    """The warm-up checkpoint for these settings: reused if it was built before, else restored from
    ``from_adapter`` where one is given, else built now."""
    out_dir = warmup_dir(cfg)
    if (out_dir / "config.json").exists():
        return out_dir
    return restore(cfg, out_dir) if cfg.from_adapter else warm_up(cfg, out_dir)


SHIPPED = Path(__file__).with_name("warmup")
"""The default warm-up of world 0 (1-hop questions), shipped with the project so that nobody waits for
its build (2 minutes on a GPU, hours on 2 CPU cores). ``python -m algorithms.sft --ship`` rebuilds
it; ``warmup.json`` beside it records the recipe and the build."""


def default_recipe(task_seed: int = 0, hops: int = 1, cache_dir: str = "runs/cache") -> SFTConfig:
    """The embedded policy's warm-up: ``SFTConfig``'s defaults, the honest oracle at 1-10 objectives."""
    return SFTConfig(cache_dir=cache_dir, task_seed=task_seed, hops=hops)


def default_warmup(task_seed: int = 0, hops: int = 1, cache_dir: str = "runs/cache", *, build: bool = False) -> Path:
    """The default warm-up for this world: the shipped one where its recorded recipe is what
    ``default_recipe`` asks for (world 0, 1 hop), else (or with ``build``) built in ``cache_dir``."""
    cfg = default_recipe(task_seed, hops, cache_dir)
    record = SHIPPED / "warmup.json"
    wanted = recipe_json(cfg)
    if not build and record.exists() and json.loads(record.read_text())["recipe"] == wanted:
        return SHIPPED
    return ensure_warmup(cfg)


def ship(built: Path, cfg: SFTConfig) -> Path:
    """Make a built warm-up the shipped one, with its recipe and build record."""
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=SHIPPED.parent))
    for f in built.iterdir():
        if f.name not in ("sft_config.json", "build.json"):
            shutil.copy(f, tmp / f.name)
    record = {"command": "python -m algorithms.sft --ship", "recipe": recipe(cfg),
              "build": json.loads((built / "build.json").read_text())}
    (tmp / "warmup.json").write_text(json.dumps(record, indent=1) + "\n")
    shutil.rmtree(SHIPPED, ignore_errors=True)
    tmp.rename(SHIPPED)
    return SHIPPED


if __name__ == "__main__":
    # No options: build the default warm-up in runs/cache (--ship: and make it the shipped one).
    # Other options: a warm-up with those settings.
    if sys.argv[1:] in ([], ["--ship"]):
        built = default_warmup(build=True)
        print(ship(built, default_recipe()) if sys.argv[1:] else built)
    else:
        cfg = tyro.cli(SFTConfig, description=__doc__)
        try:
            print(ensure_warmup(cfg))
        except (ValueError, FileNotFoundError) as e:  # a bad option, base model or data folder: one line
            print(f"python -m algorithms.sft: error: {e}", file=sys.stderr)
            sys.exit(2)
