"""Do MemPO's memory rewards track memory content? Each variant against the turn's memory recall, progress and EM.

    python -m benchmarks.experiments.memory_signal --objectives 6,8,10 --out runs/memory-signal

MemPO rewards a turn's ``<mem>`` with ``R_mem = P_mem - P_full`` (spec section 8), a proxy for what the
memory holds; ``mempo_env.recall`` measures the content itself (of the gold evidence found so far, the
share the ``<mem>`` keeps). This program plays the rollouts the default run plays (the question groups
and sampling seeds of ``python -m algorithms.mempo``'s first ``--steps`` steps, through
``algorithms.rollout.collect_rollouts``) from its start (``algorithms.sft.default_warmup``, or
``--policy``), scores every turn with ``algorithms.memory_reward`` as the learner does, joins each scored
turn with its recall (``info["memory_per_turn"]``) and its episode's EM, and reports correlations with
95% intervals from a bootstrap over question groups (a group's rollouts share their questions: they are
not independent).

Every variant of the learner's ``--memory-reward`` (``algorithms.mempo.MEMORY_REWARDS``) is measured on the
same rollouts through the learner's own ``memory_term``: the quantity measured is the per-turn **memory
advantage** the variant puts on the turn's ``<mem>`` tokens (after its normalisation: ``mempo`` over the
question's turns, ``progress`` over its turns at equal evidence found, ``infomem`` over its successful
rollouts, ``write`` over its turns), since that, not the raw reward, is what trains. A turn counts for a
variant only where the variant pays it (``paid_turns``): every scored turn under ``mempo``; under
``progress`` and ``write`` the turns whose memory is not a copy; under ``infomem`` the turns of a successful
rollout whose final memory is not a copy. Elsewhere the advantage is 0 by rule, not by measure, and the
turn is left out (``None``) of that variant's statistics, so infomem's correlation with EM is undefined
(every turn it pays belongs to an episode with every sub-answer right). Per variant and horizon:

- r with recall **at equal progress** (within a question group, among turns that had found the same
  evidence: the ``same progress`` stratum);
- r with the **evidence found** before the turn and with the episode's **EM**, over all paid turns;
- the **content share** of its variance: over the paid turns with a recall, the share of the advantage's
  variance that recall explains beyond the turn's question and progress, i.e. the R^2 gained by adding
  recall (one slope) to the (question group, evidence found) cell means: (within-cell variance / total
  variance) x r^2(advantage, recall at equal progress). It lies in [0, 1], next to the **progress share**,
  the R^2 of those cell means alone (what the question and the evidence found explain); what neither
  explains is noise to the memory's content;
- each variant's content share less ``mempo``'s, paired on the same resamples (the ``variant_table``).
- what each arm puts on a scored turn's ``<mem>`` tokens, measured the same way: GRPO's outcome advantage
  A_out (the rollout's reward normalised in its question group, on every generated token) and each variant's
  A_out + A_mem, with each content share less GRPO's, paired (the ``on_mem_table``): what a memory advantage
  adds to the content signal the outcome advantage already gives those tokens.

``--search oracle`` plays the rollouts in the oracle-evidence mode (``algorithms.mempo``'s ``--search``), where
the F1 an episode loses is its memory's alone.

Written to ``--out``: ``memory_signal.json`` (every row and statistic),
``memory_signal.png`` and ``table.md``. ``--combine DIR,DIR`` summarises earlier measurements together
(two temperatures, say) without playing anything again.

The diagnostics say why a correlation is what it is: how often P is near 1, how often R_mem ties within
its question's pool (a tie gives the memory advantage nothing to tell apart), how much of the scored
log-probability the ``;`` separators carry and what P and R_mem become without the answer prefix, and the
spread of recall (a constant recall has no correlation: it is reported as undefined, not as 0).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from agents.statistics import table_head
from mempo_env.env import SEARCH_MODES

# torch, transformers and matplotlib come inside the functions that use them: --help stays fast.

NEAR_ONE = 0.9  # a probability "near 1": the answer is about as likely as it can be, little left to reward
TIE = 1e-3  # two R_mem closer than this are a tie for the memory advantage (its pool's spread is ~0.1-0.4)
SIGNALS = ("r_mem", "p_mem", "p_full", "r_mem_no_prefix", "r_mem_content")
TARGETS = ("recall", "em", "found")  # the turn's memory recall, its episode's EM, the evidence found before it
VARIANT = "a_mem_{}"  # the row key of a --memory-reward variant's memory advantage ("a_mem_mempo", ...)
OUTCOME = "a_out"  # the row key of the turn's rollout's outcome advantage (GRPO's, on every generated token)
ON_MEM = "a_on_mem_{}"  # what a variant's <mem> tokens receive in all: A_out + its A_mem (0 where it pays none)


@dataclass(frozen=True)
class Options:
    """What to measure: the default run's rollouts (``algorithms.mempo.Config`` defaults) at each horizon."""

    objectives: tuple[int, ...]
    steps: int = 2
    questions_per_step: int = 4
    group_size: int = 8
    temperature: float = 1.0
    policy: str = ""
    seed: int = 0
    bootstrap: int = 2000
    threads: int = 1
    search: str = "retriever"


def config(options: Options, objectives: int) -> Any:
    """The learner's ``Config`` for one horizon: its defaults, with the rollouts' size and sampling."""
    from algorithms.mempo import Config

    return Config(objectives=objectives, questions_per_step=options.questions_per_step, group_size=options.group_size,
                  temperature=options.temperature, policy=options.policy, seed=options.seed, eval_episodes=0,
                  search=options.search)


def collect(cfg: Any, steps: int, backend: Any) -> list[tuple[int, list[Any]]]:
    """``(step, rollouts)`` for steps ``0..steps-1`` of ``cfg``'s run, as ``algorithms.mempo.train`` plays them
    from its start: the same question groups (``question_groups``), environments and sampling seeds."""
    from agents.summariser import make_strategy
    from algorithms.mempo import datasets, question_groups
    from algorithms.rollout import collect_rollouts
    from mempo_env.env import MemSearchQAEnv
    from mempo_env.retrieval import make_retriever

    task, _ = datasets(cfg)
    strategy = make_strategy(cfg.context)
    retriever = make_retriever(None, task.corpus)
    envs = [MemSearchQAEnv(task, retriever=retriever, search=cfg.search, objectives=cfg.objectives, context=strategy,
                           max_turns=cfg.max_turns, tokenizer=backend.tokenizer)
            for _ in range(cfg.questions_per_step * cfg.group_size)]
    played = []
    for step in range(steps):
        groups = question_groups(cfg, step, len(task.questions))
        played.append((step, collect_rollouts(backend, envs, groups, max_new_tokens=cfg.max_new_tokens,
                                              temperature=cfg.temperature, top_p=cfg.top_p,
                                              seed=cfg.seed * 100_003 + step,  # train()'s seed of this step
                                              include_mem_tags=cfg.mem_include_tags)))
    return played


def token_logprobs(model: Any, tokenizer: Any, rollouts: list[Any], pairs: list[tuple[int, int]], cfg: Any
                   ) -> list[list[float]]:
    """Per-token log-probs of the continuations ``answer_probabilities`` scores (its requests, its prefix-tree
    pass), interleaved ``[mem_0, full_0, ...]``: what each gold token contributes to P."""
    import torch

    from algorithms.memory_reward import SCORING_PACK_TOKENS, scoring_requests
    from algorithms.prefix_tree import sequence_logprobs

    contexts, continuations = scoring_requests(tokenizer, rollouts, pairs, think=cfg.answer_think,
                                               prefix=cfg.answer_prefix)
    with torch.no_grad():
        return [lp.tolist() for lp in sequence_logprobs(
            model, [c + x for c, x in zip(contexts, continuations)],
            [range(len(c), len(c) + len(x)) for c, x in zip(contexts, continuations)], max_tokens=SCORING_PACK_TOKENS)]


def content_probability(logprobs: Sequence[float], separators: Sequence[bool]) -> float:
    """``mean_probability`` over the gold tokens that are not ``;`` separators: P without the list's scaffold."""
    from algorithms.memory_reward import mean_probability

    return mean_probability([lp for lp, sep in zip(logprobs, separators) if not sep])


def recall_of(rollout: Any, turn: int) -> tuple[int, int]:
    """``(found, kept)`` of a turn: the gold evidence found before it and how much of it its ``<mem>`` kept
    (``mempo_env.recall``, from the episode's final info)."""
    counts = rollout.info["memory_per_turn"][turn]
    return counts["found"], counts["kept"]


def scored_rows(played: list[tuple[int, list[Any]]], model: Any, backend: Any, cfg: Any) -> list[dict[str, Any]]:
    """One row per scored turn (``scored_turns``, as the learner picks them) of every step: its P_mem, P_full and
    R_mem, the same without the answer prefix and over the answer's content tokens only, each variant's memory
    advantage (``variant_advantages``), its rollout's outcome advantage (the learner's ``grpo_advantages``), its
    recall and its episode's EM."""
    import torch

    from algorithms.advantages import grpo_advantages, memory_rewards
    from algorithms.memory_reward import answer_probabilities, mean_probability, scored_turns
    from algorithms.rollout import encode

    tokenizer, rows = backend.tokenizer, []
    for step, rollouts in played:
        pairs = scored_turns(rollouts, first_turn=cfg.mem_first_turn)
        if not pairs:
            continue
        p_mem, p_full = answer_probabilities(backend, rollouts, pairs, think=cfg.answer_think,
                                             prefix=cfg.answer_prefix, model=model)
        bare_mem, bare_full = answer_probabilities(backend, rollouts, pairs, think=cfg.answer_think, prefix="",
                                                   model=model)
        r_mem = memory_rewards(torch.tensor(p_mem), torch.tensor(p_full))
        advantages = variant_advantages(backend, rollouts, pairs, cfg, model)
        per_token = token_logprobs(model, tokenizer, rollouts, pairs, cfg)
        a_out = grpo_advantages(torch.tensor([r.reward(cfg.reward) for r in rollouts]),
                                torch.tensor([r.group for r in rollouts])).tolist()
        for n, (i, t) in enumerate(pairs):
            rollout = rollouts[i]
            gold = encode(tokenizer, cfg.answer_prefix + rollout.gold)
            separators = [tokenizer.decode([g]).strip() == ";" for g in gold]
            mem_lp, full_lp = per_token[2 * n], per_token[2 * n + 1]
            found, kept = recall_of(rollout, t)
            p_content = (content_probability(mem_lp, separators), content_probability(full_lp, separators))
            rows.append({
                "objectives": cfg.objectives, "step": step, "group": f"{cfg.objectives}/{step}/{rollout.group}",
                "rollout": i, "turn": t, "turns": len(rollout.turns),
                "answering": rollout.info.get("n_turns") == t + 1 and rollout.info.get("answer") is not None,
                "p_mem": p_mem[n], "p_full": p_full[n], "r_mem": r_mem[n].item(),
                **{key: values[n] for key, values in advantages.items()}, OUTCOME: a_out[i],
                "r_mem_no_prefix": bare_mem[n] - bare_full[n], "r_mem_content": p_content[0] - p_content[1],
                # the scoring pass recomputed token by token: how far its P is from answer_probabilities'
                "p_check": max(abs(mean_probability(mem_lp) - p_mem[n]), abs(mean_probability(full_lp) - p_full[n])),
                "separator_share_mem": share(mem_lp, separators), "separator_share_full": share(full_lp, separators),
                "found": found, "kept": kept, "recall": kept / found if found else None,
                "em": float(rollout.info["em"]), "episode_recall": rollout.info.get("episode_memory_recall"),
                "mem": rollout.turns[t].mem_context[-1]["content"],  # the scored memory, as P_mem reads it
            })
    return rows


def variant_advantages(backend: Any, rollouts: list[Any], pairs: list[tuple[int, int]], cfg: Any, model: Any
                       ) -> dict[str, list[float | None]]:
    """Each ``--memory-reward`` variant's memory advantage per scored pair (``VARIANT`` keys), from the learner's
    ``memory_term`` with the learner's arguments; ``None`` where the variant does not pay the turn."""
    import torch

    from algorithms.memory_reward import memory_term
    from algorithms.mempo import MEMORY_REWARDS

    groups = torch.tensor([r.group for r in rollouts])  # the learner's group_ids
    out = {}
    for variant in MEMORY_REWARDS:
        term = memory_term(variant, backend, rollouts, groups, first_turn=cfg.mem_first_turn, think=cfg.answer_think,
                           prefix=cfg.answer_prefix, model=model)
        assert term.pairs == pairs, f"{variant} scored other turns than scored_turns"
        out[VARIANT.format(variant)] = [a.item() if paid else None
                                        for a, paid in zip(term.advantages, paid_turns(variant, rollouts, pairs))]
    return out


def paid_turns(variant: str, rollouts: list[Any], pairs: list[tuple[int, int]]) -> list[bool]:
    """Which scored pairs ``variant`` pays, by the learner's rules (``memory_reward.copied``, ``succeeded``):
    every one under ``mempo``; the ones whose memory is not a copy under ``progress`` and ``write``; under
    ``infomem`` the turns of a successful rollout whose final memory is not a copy. The others get an advantage
    of 0 whatever they hold: a rule, not a measurement of them."""
    from algorithms.memory_reward import copied, succeeded

    if variant == "mempo":
        return [True] * len(pairs)
    if variant == "infomem":
        final = {i: max(t for t, turn in enumerate(rollouts[i].turns) if turn.mem_context is not None)
                 for i in {i for i, _ in pairs}}
        paid = {i: succeeded(rollouts[i]) and not copied(rollouts[i], t) for i, t in final.items()}
        return [paid[i] for i, _ in pairs]
    return [not copied(rollouts[i], t) for i, t in pairs]


def share(logprobs: Sequence[float], separators: Sequence[bool]) -> float | None:
    """The separators' share of the continuation's log-probability (``None`` where the sum is 0: nothing lost)."""
    total = math.fsum(logprobs)
    return math.fsum(lp for lp, sep in zip(logprobs, separators) if sep) / total if total < 0 else None


# ---- statistics: plain numpy, no torch ------------------------------------------------------------------
# Where a correlation is taken: over all scored turns; within a question group (the memory advantage's
# pool, which compares its turns only with each other); within a group among turns that had found the same
# evidence (the same progress), so that a reward rising with progress alone does not pass for one that
# tracks what the memory kept.
STRATA = {"pooled": (), "within groups": ("group",), "same progress": ("group", "found")}


def pearson(x: np.ndarray, y: np.ndarray) -> float | None:
    """Pearson's r; ``None`` where either side is constant (or fewer than 3 points): undefined, not 0."""
    if len(x) < 3:
        return None
    x, y = x - x.mean(), y - y.mean()
    sx, sy = float((x * x).sum()), float((y * y).sum())
    if sx <= 1e-18 or sy <= 1e-18:  # constant up to the rounding of a mean taken out
        return None
    return float((x * y).sum() / math.sqrt(sx * sy))


def demeaned(values: np.ndarray, cells: np.ndarray) -> np.ndarray:
    """``values`` less the mean of their cell (``cells``: an integer code per value)."""
    _, inverse = np.unique(cells, return_inverse=True)
    means = np.bincount(inverse, weights=values) / np.bincount(inverse)
    return values - means[inverse]


class Columns:
    """The rows as float columns (``None`` as nan) and integer cell codes per stratum, so that a bootstrap
    draw is an index array and a correlation a few numpy operations."""

    def __init__(self, rows: Sequence[dict[str, Any]], keys: Sequence[str]):
        self.values = {k: np.array([np.nan if r[k] is None else float(r[k]) for r in rows]) for k in keys}
        self.cells = {name: np.unique(["|".join(str(r[k]) for k in by) for r in rows], return_inverse=True)[1]
                      for name, by in STRATA.items() if by}
        groups = [r["group"] for r in rows]
        self.groups = [np.flatnonzero(np.array(groups) == g) for g in sorted(set(groups))]

    def correlation(self, x: str, y: str, stratum: str = "pooled", rows: np.ndarray | None = None) -> float | None:
        """r of columns ``x`` and ``y`` over ``rows`` (all by default) where both are defined, after taking
        out each cell's mean in ``stratum``."""
        rows = np.arange(len(self.values[x])) if rows is None else rows
        xs, ys = self.values[x][rows], self.values[y][rows]
        ok = ~(np.isnan(xs) | np.isnan(ys))
        xs, ys = xs[ok], ys[ok]
        if stratum != "pooled":
            cells = self.cells[stratum][rows][ok]
            xs, ys = demeaned(xs, cells), demeaned(ys, cells)
        return pearson(xs, ys)

    def shares(self, x: str, rows: np.ndarray | None = None) -> tuple[float | None, float | None]:
        """``(content, progress)`` shares of ``x``'s variance over ``rows`` where ``x`` and recall are defined
        (the module docstring): progress, the R^2 of the (question group, evidence found) cell means; content,
        the R^2 that recall adds to them, (1 - progress) x r^2(x, recall at the same progress). ``None`` where
        ``x`` is constant; content ``None`` also where recall is constant within every cell."""
        rows = np.arange(len(self.values[x])) if rows is None else rows
        xs, ys = self.values[x][rows], self.values["recall"][rows]
        ok = ~(np.isnan(xs) | np.isnan(ys))
        xs = xs[ok]
        total = float(((xs - xs.mean()) ** 2).sum()) if len(xs) >= 3 else 0.0
        if total <= 1e-18:
            return None, None
        within = min(float((demeaned(xs, self.cells["same progress"][rows][ok]) ** 2).sum()) / total, 1.0)
        r = self.correlation(x, "recall", "same progress", rows)
        return (None if r is None else within * r * r), 1 - within


def bootstrap(columns: Columns, pairs: Sequence[tuple[str, str, str]], n: int, seed: int = 0,
              shared: Sequence[str] = ()) -> dict[str, dict[str, Any]]:
    """Each ``(x, y, stratum)`` correlation (key ``x~y@stratum``) and each of ``shared``'s content and progress
    shares (``x~content share``, ``x~progress share``: ``Columns.shares``), and each later one's content share
    less the first one's (``x~content share - first``: a paired difference, on the same resamples), with its
    95% percentile interval over ``n`` resamples of whole question groups with replacement (the same resamples
    for all); ``undefined``: the share of resamples where it is undefined (a side constant), which the interval
    leaves out."""
    def statistics(rows: np.ndarray | None) -> dict[str, float | None]:
        out = {f"{x}~{y}@{stratum}": columns.correlation(x, y, stratum, rows) for x, y, stratum in pairs}
        for x in shared:
            out[f"{x}~content share"], out[f"{x}~progress share"] = columns.shares(x, rows)
        for x in shared[1:]:
            mine, first = out[f"{x}~content share"], out[f"{shared[0]}~content share"]
            out[f"{x}~content share - {shared[0]}"] = None if mine is None or first is None else mine - first
        return out

    rng = np.random.default_rng(seed)
    values = statistics(None)
    draws: dict[str, list[float]] = {key: [] for key in values}
    for _ in range(n):
        size = len(columns.groups)
        picked = np.concatenate([columns.groups[k] for k in rng.integers(size, size=size)])
        for key, value in statistics(picked).items():
            if value is not None:
                draws[key].append(value)
    out = {}
    for key, drawn in draws.items():
        low, high = np.percentile(drawn, [2.5, 97.5]).tolist() if drawn else (None, None)
        out[key] = {"value": values[key], "low": low, "high": high, "undefined": 1 - len(drawn) / n if n else None}
    return out


def near_ties(rows: Sequence[dict[str, Any]], key: str = "r_mem") -> float | None:
    """The share of scored turns whose ``key`` is within ``TIE`` of another turn's in the same question pool."""
    tied = total = 0
    for values in pools(rows, key).values():
        gaps = np.diff(np.sort(np.asarray(values, dtype=float))) < TIE
        near = np.zeros(len(values), dtype=bool)
        near[:-1] |= gaps
        near[1:] |= gaps
        tied, total = tied + int(near.sum()), total + len(values)
    return tied / total if total else None


def duplicates(rows: Sequence[dict[str, Any]]) -> float | None:
    """The share of scored turns whose ``<mem>`` text is word for word another turn's of the same question
    pool (rollouts that sampled the same memory): exact ties of R_mem, whatever the memory holds."""
    dup = total = 0
    for mems in pools(rows, "mem").values():
        counts = {m: mems.count(m) for m in mems}
        dup, total = dup + sum(counts[m] > 1 for m in mems), total + len(mems)
    return dup / total if total else None


def pools(rows: Sequence[dict[str, Any]], key: str) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for r in rows:
        out.setdefault(r["group"], []).append(r[key])
    return out


def mean_of(values: Sequence[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return float(np.mean(kept)) if kept else None


def summarize(rows: list[dict[str, Any]], n: int, seed: int = 0) -> dict[str, Any]:
    """One horizon's statistics: each signal's correlation with recall (pooled, within groups, at the same
    progress), with EM and with the evidence found (pooled), with bootstrap intervals; and the diagnostics
    (P near 1, ties and duplicate memories, the spread of recall, the separators' share)."""
    recall = [r["recall"] for r in rows if r["recall"] is not None]
    stats: dict[str, Any] = {
        "scored_turns": len(rows), "episodes": len({(r["group"], r["rollout"]) for r in rows}),
        "groups": len({r["group"] for r in rows}), "turns_with_recall": len(recall),
        "recall_mean": mean_of(recall), "recall_sd": float(np.std(recall)) if recall else None,
        "recall_is_1": float(np.mean([v == 1 for v in recall])) if recall else None,
        "em_mean": mean_of([r["em"] for r in rows]),
        "p_mem_mean": mean_of([r["p_mem"] for r in rows]), "p_full_mean": mean_of([r["p_full"] for r in rows]),
        "r_mem_mean": mean_of([r["r_mem"] for r in rows]), "r_mem_sd": float(np.std([r["r_mem"] for r in rows])),
        "p_mem_near_1": float(np.mean([r["p_mem"] > NEAR_ONE for r in rows])),
        "p_full_near_1": float(np.mean([r["p_full"] > NEAR_ONE for r in rows])),
        "p_mem_near_1_answering": mean_of([float(r["p_mem"] > NEAR_ONE) for r in rows if r["answering"]]),
        "r_mem_near_ties": near_ties(rows), "duplicate_memories": duplicates(rows),
        "separator_share_mem": mean_of([r["separator_share_mem"] for r in rows]),
        "separator_share_full": mean_of([r["separator_share_full"] for r in rows]),
        "p_check_max": max(r["p_check"] for r in rows),
        "answering_turns": int(sum(r["answering"] for r in rows)),
        # where recall varies at all: a correlation with it rests on these turns and groups only
        "turns_recall_below_1": sum(v < 1 for v in recall),
        "groups_recall_below_1": len({r["group"] for r in rows if r["recall"] is not None and r["recall"] < 1}),
        "r_mem_no_prefix_mean": mean_of([r["r_mem_no_prefix"] for r in rows]),
        "r_mem_no_prefix_sd": float(np.std([r["r_mem_no_prefix"] for r in rows])),
        # R_mem against progress: the gold answer lists every objective, so P rises as answers are found
        "r_mem_by_found": {str(f): mean_of([r["r_mem"] for r in rows if r["found"] == f])
                           for f in sorted({r["found"] for r in rows})},
    }
    advantages = [VARIANT.format(v) for v in variants(rows)]
    stats["variants"] = {v: {"paid": float(np.mean([r[key] is not None for r in rows])),
                             "nonzero": float(np.mean([r[key] is not None and r[key] != 0 for r in rows]))}
                         for v, key in zip(variants(rows), advantages)}
    signals = [*SIGNALS, *advantages]
    pairs = [(x, "recall", s) for x in signals for s in STRATA] + [(x, y, "pooled") for x in signals
                                                                    for y in ("em", "found")]
    stats["correlations"] = bootstrap(Columns(rows, [*signals, *TARGETS]), pairs, n, seed, shared=advantages)
    if rows and OUTCOME in rows[0]:  # (records from before it have no outcome advantage)
        stats["correlations"].update(on_mem(rows, n, seed))
    return stats


def on_mem(rows: list[dict[str, Any]], n: int, seed: int = 0) -> dict[str, dict[str, Any]]:
    """What the ``<mem>`` tokens of a scored turn receive in each arm, measured as the variants are: GRPO's
    outcome advantage alone (``OUTCOME``), and each variant's A_out + A_mem (``ON_MEM``; A_mem 0 where the
    variant does not pay the turn, as in the learner). Each content share less GRPO's, paired on the same
    resamples (``bootstrap`` draws the same question groups for the same seed), is what a memory advantage adds
    to the memory-content signal the outcome advantage already puts on those tokens."""
    names = variants(rows)
    totals = [OUTCOME, *(ON_MEM.format(v) for v in names)]
    rows = [{**r, **{ON_MEM.format(v): r[OUTCOME] + (r[VARIANT.format(v)] or 0.0) for v in names}} for r in rows]
    pairs = [(x, "recall", "same progress") for x in totals] + [(x, y, "pooled") for x in totals
                                                                  for y in ("em", "found")]
    return bootstrap(Columns(rows, [*totals, *TARGETS]), pairs, n, seed, shared=totals)


def variants(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The ``--memory-reward`` variants whose advantages the rows hold (all of them, for rows ``scored_rows``
    made; none in a record from before the variants)."""
    from algorithms.mempo import MEMORY_REWARDS

    return [v for v in MEMORY_REWARDS if rows and VARIANT.format(v) in rows[0]]


# ---- output -----------------------------------------------------------------------------------------
def cell(ci: dict[str, Any]) -> str:
    """``r [low, high]``, or ``undefined`` (a side is constant), with the share of undefined resamples."""
    if ci["value"] is None:
        return "undefined"
    text = f"{ci['value']:+.2f}" + (f" [{ci['low']:+.2f}, {ci['high']:+.2f}]" if ci["low"] is not None else "")
    return text + (f" ({100 * ci['undefined']:.0f}% undef.)" if ci["undefined"] and ci["undefined"] >= 0.005 else "")


def percent_cell(ci: dict[str, Any], sign: str = "") -> str:
    """A share (or a difference of shares, ``sign="+"``) as ``cell`` writes it, in percent."""
    if ci["value"] is None:
        return "undefined"
    scaled = {**ci, **{k: None if ci[k] is None else 100 * ci[k] for k in ("value", "low", "high")}}
    text = f"{scaled['value']:{sign}.1f}"
    text += f" [{scaled['low']:{sign}.1f}, {scaled['high']:{sign}.1f}]" if scaled["low"] is not None else ""
    return text + (f" ({100 * ci['undefined']:.0f}% undef.)" if ci["undefined"] and ci["undefined"] >= 0.005 else "")


def percent(share: float | None) -> str:
    return "n/a" if share is None else f"{100 * share:.1f}"


def table(summaries: dict[str, dict[str, Any]]) -> str:
    """The Markdown table: one row per run (a horizon, or a horizon at another temperature)."""
    lines = table_head(["run", "turns (groups)", "recall mean ± sd", "recall = 1 %", "P_mem > 0.9 %", "duplicate mem %",
                        "r(R_mem, recall)", "at same progress", "r(P_mem, recall)", "r(R_mem, EM)", "r(R_mem, found)"])
    for name, s in summaries.items():
        c = s["correlations"]
        spread = "n/a" if s["recall_mean"] is None else f"{s['recall_mean']:.3f} ± {s['recall_sd']:.3f}"
        lines.append(
            f"| {name} | {s['scored_turns']} ({s['groups']}) | {spread} | "
            f"{percent(s['recall_is_1'])} | {percent(s['p_mem_near_1'])} | {percent(s['duplicate_memories'])} | "
            f"{cell(c['r_mem~recall@pooled'])} | {cell(c['r_mem~recall@same progress'])} | "
            f"{cell(c['p_mem~recall@pooled'])} | {cell(c['r_mem~em@pooled'])} | {cell(c['r_mem~found@pooled'])} |")
    return "\n".join(lines)


def variant_table(summaries: dict[str, dict[str, Any]]) -> str:
    """The variants compared, one row per run and variant: the share of scored turns it pays (and pays a
    non-zero advantage), its memory advantage's r with recall at equal progress, with the evidence found and
    with EM, the content and progress shares of its variance (the module docstring) and its content share less
    the first variant's (the spec's), each with its interval."""
    lines = table_head(["run", "variant", "turns paid % (non-zero)", "r(A, recall) at equal progress", "r(A, found)",
                        "r(A, EM)", "content share %", "progress share %", "content share − first's, points"])
    for name, s in summaries.items():
        c = s["correlations"]
        names = list(s.get("variants", {}))
        for v, paid in s.get("variants", {}).items():
            x = VARIANT.format(v)
            cells = [cell(c[f"{x}~recall@same progress"]), cell(c[f"{x}~found@pooled"]), cell(c[f"{x}~em@pooled"]),
                     percent_cell(c[f"{x}~content share"]), percent_cell(c[f"{x}~progress share"]),
                     percent_cell(c[f"{x}~content share - {VARIANT.format(names[0])}"], "+") if v != names[0] else "–"]
            lines.append(f"| {name} | {v} | {percent(paid['paid'])} ({percent(paid['nonzero'])}) | "
                         + " | ".join(cells) + " |")
    return "\n".join(lines)


def on_mem_table(summaries: dict[str, dict[str, Any]]) -> str:
    """What each arm puts on a scored turn's ``<mem>`` tokens (``on_mem``), one row per run and arm: GRPO's
    A_out, then each variant's A_out + A_mem, with the variant table's columns and the content share less
    GRPO's. Empty for a record from before the outcome advantage was kept."""
    lines = table_head(["run", "on the `<mem>` tokens", "r(A, recall) at equal progress", "r(A, found)", "r(A, EM)",
                        "content share %", "progress share %", "content share − GRPO's, points"])
    for name, s in summaries.items():
        c = s["correlations"]
        if f"{OUTCOME}~content share" not in c:
            continue
        for label, x in [("grpo: A_out", OUTCOME), *((f"{v}: A_out + A_mem", ON_MEM.format(v)) for v in s["variants"])]:
            cells = [cell(c[f"{x}~recall@same progress"]), cell(c[f"{x}~found@pooled"]), cell(c[f"{x}~em@pooled"]),
                     percent_cell(c[f"{x}~content share"]), percent_cell(c[f"{x}~progress share"]),
                     percent_cell(c[f"{x}~content share - {OUTCOME}"], "+") if x != OUTCOME else "–"]
            lines.append(f"| {name} | {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines) if len(lines) > 2 else ""


def diagnostics(summaries: dict[str, dict[str, Any]]) -> str:
    """Why a correlation is what it is, one row per run: the sizes, EM, the spread of recall, how often P is
    near 1 (at any scored turn and at the answering turns), ties and duplicate memories within a question's
    pool, and the share of the scored log-probability on the ``;`` separators."""
    lines = table_head(["run", "turns", "episodes", "EM %", "P_mem mean", "P_full mean", "R_mem sd",
                        "P_mem > 0.9 % (answering)", "P_full > 0.9 %", "R_mem near ties %",
                        "separators' share of log P_mem, P_full %"])
    for name, s in summaries.items():
        lines.append(
            f"| {name} | {s['scored_turns']} | {s['episodes']} | {percent(s['em_mean'])} | {s['p_mem_mean']:.3f} | "
            f"{s['p_full_mean']:.3f} | {s['r_mem_sd']:.3f} | {percent(s['p_mem_near_1'])} "
            f"({percent(s['p_mem_near_1_answering'])}) | {percent(s['p_full_near_1'])} | "
            f"{percent(s['r_mem_near_ties'])} | {percent(s['separator_share_mem'])}, "
            f"{percent(s['separator_share_full'])} |")
    return "\n".join(lines)


def details(summaries: dict[str, dict[str, Any]]) -> str:
    """Every signal's correlations (the variants' advantages included), one row per run and signal: with recall
    (over all turns, within question groups, at the same progress), with the episode's EM and with the evidence
    found (over all turns)."""
    lines = table_head(["run", "signal", "recall", "recall within groups", "recall at same progress", "EM", "found"])
    for name, s in summaries.items():
        c = s["correlations"]
        for x in [*SIGNALS, *(VARIANT.format(v) for v in s.get("variants", {}))]:
            cells = [c[f"{x}~recall@{stratum}"] for stratum in STRATA] + [c[f"{x}~{y}@pooled"] for y in ("em", "found")]
            lines.append(f"| {name} | {x} | " + " | ".join(cell(ci) for ci in cells) + " |")
    return "\n".join(lines)


def plot(rows_by_run: dict[str, list[dict[str, Any]]], path: Path) -> Path:
    """R_mem against recall (top) and against the evidence found so far (bottom), one column per run: a dot
    per scored turn, jittered sideways so that equal recalls stay visible."""
    import matplotlib

    matplotlib.use("Agg")  # files only, as benchmarks/plots.py
    import matplotlib.pyplot as plt

    n = len(rows_by_run)
    fig, axes = plt.subplots(2, n, figsize=(4.5 * n, 7.5), squeeze=False)
    rng = np.random.default_rng(0)
    for col, (name, rows) in enumerate(rows_by_run.items()):
        for ax, key, label in ((axes[0, col], "recall", "memory recall of the turn (kept / found)"),
                               (axes[1, col], "found", "gold evidence found before the turn")):
            points = [r for r in rows if r[key] is not None]
            x = np.array([r[key] for r in points], dtype=float)
            x += rng.uniform(-0.015, 0.015, len(x)) * (1 if key == "recall" else 20)
            colors = ["C2" if r["em"] == 1 else "C3" if r["em"] == 0 else "C1" for r in points]
            ax.scatter(x, [r["r_mem"] for r in points], s=8, c=colors, alpha=0.5, linewidths=0)
            ax.set_xlabel(label)
            ax.set_ylabel("R_mem = P_mem - P_full")
            ax.set_title(f"{name}: {len(points)} turns", fontsize=10)
            ax.grid(alpha=0.3)
    fig.suptitle("MemPO's memory reward per scored turn (colour: the episode's EM; green 1, red 0, orange between)",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def measure(options: Options, out: Path) -> dict[str, Any]:
    """Play, score and summarise every horizon of ``options``; write ``memory_signal.json``, ``table.md`` and
    ``memory_signal.png`` to ``out``; return the record."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from agents.backends import make_backend
    from algorithms.sft import default_warmup

    torch.set_num_threads(options.threads)
    start_dir = Path(options.policy) if options.policy else default_warmup()
    tokenizer = AutoTokenizer.from_pretrained(start_dir)
    model = AutoModelForCausalLM.from_pretrained(start_dir, dtype=torch.float32, attn_implementation="sdpa").eval()
    backend = make_backend("hf", model, tokenizer)
    rows_by_run, summaries, seconds = {}, {}, {}
    for k in options.objectives:
        cfg = config(options, k)
        torch.manual_seed(cfg.seed)
        began = time.perf_counter()
        played = collect(cfg, options.steps, backend)
        generated = time.perf_counter()
        rows = scored_rows(played, model, backend, cfg)
        name = f"{k} objectives, T={options.temperature:g}"
        rows_by_run[name], summaries[name] = rows, summarize(rows, options.bootstrap, options.seed)
        seconds[name] = {"rollout_s": generated - began, "scoring_s": time.perf_counter() - generated}
        print(f"{name}: {len(rows)} scored turns, {seconds[name]['rollout_s']:.0f} s rollouts, "
              f"{seconds[name]['scoring_s']:.0f} s scoring", flush=True)
        record = {"options": {**options.__dict__, "objectives": list(options.objectives)}, "policy": str(start_dir),
                  "cpu_seconds": time.process_time(), "seconds": seconds, "summaries": summaries,
                  "rows": rows_by_run, "cpus": os.cpu_count(), "threads": options.threads}
        write(record, out)  # after every horizon: a killed run keeps the horizons it finished
    return record


def write(record: dict[str, Any], out: Path) -> None:
    """``memory_signal.json`` (the record), ``table.md`` (the table, the variants', what each arm puts on the
    ``<mem>`` tokens, the diagnostics, every correlation) and ``memory_signal.png`` in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "memory_signal.json").write_text(json.dumps(record, indent=1))
    summaries = record["summaries"]
    tables = (table(summaries), variant_table(summaries), on_mem_table(summaries), diagnostics(summaries),
              details(summaries))
    (out / "table.md").write_text("\n\n".join(t for t in tables if t) + "\n")
    plot(record["rows"], out / "memory_signal.png")


def combine(sources: Sequence[Path], out: Path, n: int, seed: int = 0) -> dict[str, Any]:
    """The runs of several measurements (``memory_signal.json`` in each of ``sources``, e.g. two temperatures)
    in one record, table and plot, summarised anew from their rows (nothing is played or scored again)."""
    records = [json.loads((source / "memory_signal.json").read_text()) for source in sources]
    rows = {name: r for record in records for name, r in record["rows"].items()}
    combined = {"sources": {str(source): {k: v for k, v in record.items() if k not in ("rows", "summaries")}
                            for source, record in zip(sources, records)},
                "cpu_seconds": sum(record["cpu_seconds"] for record in records),
                "summaries": {name: summarize(r, n, seed) for name, r in rows.items()}, "rows": rows}
    write(combined, out)
    return combined


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.experiments.memory_signal",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--objectives", default="6,8,10", help="horizons, comma-separated")
    parser.add_argument("--out", default="runs/memory-signal", help="folder for memory_signal.json, table.md, the plot")
    parser.add_argument("--steps", type=int, default=2, help="the default run's first steps to play (4 question "
                        "groups x 8 rollouts each)")
    parser.add_argument("--questions-per-step", type=int, default=4, help="question groups per step")
    parser.add_argument("--group-size", type=int, default=8, help="rollouts per question group")
    parser.add_argument("--temperature", type=float, default=1.0, help="sampling temperature of the rollouts")
    parser.add_argument("--policy", default="", help="model folder to start from; empty: the default warm-up")
    parser.add_argument("--seed", type=int, default=0, help="the run's seed (questions, sampling, bootstrap)")
    parser.add_argument("--bootstrap", type=int, default=2000, help="resamples of question groups per interval")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--search", default="retriever", choices=SEARCH_MODES,
                        help="what a search returns (oracle: the next hop's gold evidence, as the learner's --search)")
    parser.add_argument("--combine", default="", help="measurement folders, comma-separated: summarise their rows "
                        "together into --out instead of measuring")
    args = parser.parse_args(argv)
    if args.combine:
        record = combine([Path(d) for d in args.combine.split(",")], Path(args.out), args.bootstrap, args.seed)
    else:
        options = Options(tuple(int(k) for k in args.objectives.split(",")), args.steps, args.questions_per_step,
                          args.group_size, args.temperature, args.policy, args.seed, args.bootstrap, args.threads,
                          args.search)
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        record = measure(options, Path(args.out))
    summaries = record["summaries"]
    print(table(summaries), variant_table(summaries), on_mem_table(summaries), sep="\n\n")
    print(f"written to {args.out} ({record['cpu_seconds']:.0f} s of CPU)")


if __name__ == "__main__":
    main()
