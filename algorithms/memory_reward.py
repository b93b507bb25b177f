"""MemPO's memory reward (spec section 8): how likely the gold answer is from the memory alone,
compared with the whole history.

For every scored turn, ``P = exp(mean log π(prefix + gold answer tokens | context + answering))``
under the current policy, once with the turn's ``full_context`` (everything before the turn) and
once with its ``mem_context`` (system + question + the turn's ``<mem>`` only). All contexts of a
step go through one batched, gradient-free scoring call; the results are constants in the loss.

The gold answer is scored where a well-formed answering turn would put it (the protocol: ``<mem>``,
``<think>``, then the action): after the turn's own memory for P_mem, after an empty memory for
P_full (the history is all there, no summary of it), then ``<think>think</think>`` and ``<answer>``
and ``prefix``, the text the policy writes before an answer (the embedded policy, like the oracle
it learns from, writes ``<answer> Vesol``; a byte-level BPE has different ids for "Vesol" and
" Vesol"). Measured on the embedded warm-up, 2-objective sampled episodes: with ``<answer>``
straight after ``</mem>`` and no space, P_mem averaged 0.003 and P_full 0.004, and R_mem spread
0.017, so its per-question normalisation put noise on the ``<mem>`` tokens; with the answering
turn, P_mem is 0.37 at the answering turn, P_full 0.008, and R_mem spreads 0.37.

``memory_term`` computes the variant the learner's ``--memory-reward`` names (``algorithms.mempo.MEMORY_REWARDS``; each
one's formula, source and cost in docs/learners.md): ``mempo`` (the above), ``progress`` (the same reward
normalised among turns at equal evidence found), ``infomem`` (the final memory's answer log-likelihood
gain over an empty memory, on successful rollouts only) and ``write`` (each memory's gain over the one
before it). The variants other than the spec's carry the copy guard: a memory that is a near-verbatim
copy of a question or of the tool response it read (``is_copy``) earns no memory advantage.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import torch

from agents.backends.base import PolicyBackend
from agents.scripted import ANSWERING
from algorithms.advantages import (
    information_gains,
    memory_advantages,
    memory_rewards,
    progress_pools,
    successful_only,
)
from algorithms.prefix_tree import sequence_logprobs
from algorithms.rollout import Rollout, encode
from mempo_env.recall import words
from mempo_env.views import Message, mem_context, render_prompt

# Tokens per prefix tree of the scoring pass: at least a rollout's longest history (2.8k tokens at 10
# objectives), so that each history is read once; measured fastest of 2048, 4096 and 8192 there.
SCORING_PACK_TOKENS = 4096
# The copy guard: a memory is a near-verbatim copy of a source when at least COPY_SHARE of its word
# COPY_NGRAM-grams occur in that source and it holds at least COPY_COVER of the source's own n-grams (it
# reproduces most of the source, not one sentence of it: the oracle's memory quotes the sentence of each
# document that states the hop's answer, and is never flagged, tests/test_memory_variants.py).
COPY_NGRAM, COPY_SHARE, COPY_COVER = 4, 0.9, 0.5


def scored_turns(rollouts: list[Rollout], *, first_turn: bool = False) -> list[tuple[int, int]]:
    """(rollout, turn) pairs that get a memory reward: turns with a ``<mem>``, from the second on
    unless ``first_turn`` (the first turn has no earlier context to compare with)."""
    return [(i, t) for i, r in enumerate(rollouts) for t, turn in enumerate(r.turns)
            if turn.mem_context is not None and (first_turn or t > 0)]


def scoring_requests(tokenizer: Any, rollouts: list[Rollout], pairs: list[tuple[int, int]], *,
                     think: str = ANSWERING, prefix: str = " ") -> tuple[list[list[int]], list[list[int]]]:
    """``(contexts, continuations)`` to score for each (rollout, turn) pair: its memory context then
    its full context, each followed by the gold answer, interleaved (``[mem_0, full_0, mem_1, ...]``)."""
    answering = f"\n<think>{think}</think>\n<answer>"
    contexts, continuations = [], []
    for i, t in pairs:
        turn, gold = rollouts[i].turns[t], encode(tokenizer, prefix + rollouts[i].gold)
        contexts.append(encode(tokenizer, render_prompt(turn.mem_context, tokenizer, continue_final=True) + answering))
        contexts.append(encode(tokenizer, render_prompt(turn.full_context, tokenizer) + "<mem></mem>" + answering))
        continuations += [gold, gold]
    return contexts, continuations


def mean_probability(logprobs: list[float]) -> float:
    """``exp(mean log-prob)``: the per-token probability of a continuation, comparable across lengths."""
    return math.exp(sum(logprobs) / len(logprobs))


def answer_probabilities(backend: PolicyBackend, rollouts: list[Rollout], pairs: list[tuple[int, int]], *,
                         think: str = ANSWERING, prefix: str = " ", model: Any = None
                         ) -> tuple[list[float], list[float]]:
    """``(P_mem, P_full)`` for each (rollout, turn) pair, from one batched scoring pass: ``model``'s (the
    policy in this process) through prefix trees, which read each rollout's history once rather than
    once per turn (algorithms/prefix_tree.py), or else the engine's ``score``."""
    contexts, continuations = scoring_requests(backend.tokenizer, rollouts, pairs, think=think, prefix=prefix)
    if not contexts:
        return [], []
    probs = [mean_probability(lp) for lp in continuation_logprobs(backend, contexts, continuations, model)]
    return probs[0::2], probs[1::2]


def continuation_logprobs(backend: PolicyBackend, contexts: list[list[int]], continuations: list[list[int]],
                          model: Any = None) -> list[list[float]]:
    """Log-probs of each continuation's tokens after its context, in one gradient-free scoring pass:
    ``model``'s through prefix trees, or else the engine's ``score``."""
    if model is None:
        return backend.score(contexts, continuations)
    with torch.no_grad():
        return [lp.tolist() for lp in sequence_logprobs(
            model, [c + x for c, x in zip(contexts, continuations)],
            [range(len(c), len(c) + len(x)) for c, x in zip(contexts, continuations)],
            max_tokens=SCORING_PACK_TOKENS)]


def memory_logprobs(backend: PolicyBackend, contexts: list[list[Message]], golds: list[str], *,
                    think: str = ANSWERING, prefix: str = " ", model: Any = None) -> list[float]:
    """``mean log P(gold | context)`` for memory contexts (system + question + a ``<mem>`` block, as
    ``mem_context`` builds them), the gold answer scored where an answering turn puts it, as for P_mem."""
    tok, answering = backend.tokenizer, f"\n<think>{think}</think>\n<answer>"
    encoded = [encode(tok, render_prompt(c, tok, continue_final=True) + answering) for c in contexts]
    logprobs = continuation_logprobs(backend, encoded, [encode(tok, prefix + g) for g in golds], model)
    return [sum(lp) / len(lp) for lp in logprobs]


def succeeded(rollout: Rollout) -> bool:
    """Every sub-answer right and the trajectory well formed: InfoMem's "successful trajectory"."""
    correct = rollout.info.get("correct", [])
    return bool(correct) and all(correct)


# ---- the copy guard -------------------------------------------------------------------------------
def ngrams(text: str, n: int) -> set[tuple[str, ...]]:
    """The word n-grams of ``text`` after the recall's normalisation (``mempo_env.recall.words``)."""
    tokens = words(text).split()
    return {tuple(tokens[k : k + n]) for k in range(len(tokens) - n + 1)}


def is_copy(mem: str, sources: Sequence[str], n: int = COPY_NGRAM) -> bool:
    """Whether ``mem`` is a near-verbatim copy of one of ``sources``: at least ``COPY_SHARE`` of its word
    n-grams occur in that source, and they cover at least ``COPY_COVER`` of the source's (n shrinks to
    the shorter text's length, so a three-word question is still caught; an empty memory copies nothing)."""
    length = len(words(mem).split())
    for source in sources:
        size = min(n, length, len(words(source).split()))
        if size == 0:
            continue
        mine, theirs = ngrams(mem, size), ngrams(source, size)
        shared = len(mine & theirs)
        if shared >= COPY_SHARE * len(mine) and shared >= COPY_COVER * len(theirs):
            return True
    return False


_MEM = re.compile(r"<mem>(.*?)</mem>", re.S)


def copied(rollout: Rollout, t: int) -> bool:
    """Whether turn ``t``'s memory copies a question of the episode or the tool response the turn read."""
    turn = rollout.turns[t]
    mem = _MEM.search(turn.mem_context[-1]["content"]).group(1)
    last = turn.full_context[-1]
    reply = [last["content"]] if last["role"] == "user" and last["content"].startswith("<tool_response>") else []
    return is_copy(mem, [o["question"] for o in rollout.info.get("objectives", [])] + reply)


# ---- the variants ---------------------------------------------------------------------------------
class MemoryTerm(NamedTuple):
    """A step's memory term: the scored (rollout, turn) pairs, each pair's memory advantage, the pool
    each was normalised in (where ``--control shuffled`` permutes them) and the step's log statistics."""

    pairs: list[tuple[int, int]]
    advantages: torch.Tensor
    pools: torch.Tensor
    stats: dict[str, float]


def memory_term(variant: str, backend: PolicyBackend, rollouts: list[Rollout], groups: torch.Tensor, *,
                first_turn: bool = False, think: str = ANSWERING, prefix: str = " ", model: Any = None
                ) -> MemoryTerm:
    """The memory advantages of ``variant`` (``algorithms.mempo.MEMORY_REWARDS``) for a step's rollouts
    (``groups``: each rollout's question group), on the turns ``scored_turns`` names."""
    pairs = scored_turns(rollouts, first_turn=first_turn)
    pools = groups[[i for i, _ in pairs]]
    if variant in ("mempo", "progress"):
        p_mem, p_full = answer_probabilities(backend, rollouts, pairs, think=think, prefix=prefix, model=model)
        if not pairs:
            return MemoryTerm([], torch.zeros(0), pools, {})
        r_mem = memory_rewards(torch.tensor(p_mem), torch.tensor(p_full))
        stats = {"p_mem": float(np.mean(p_mem)), "p_full": float(np.mean(p_full)), "r_mem": r_mem.mean().item()}
        if variant == "mempo":
            return MemoryTerm(pairs, memory_advantages(r_mem, pools), pools, stats)
        keep = torch.tensor([not copied(rollouts[i], t) for i, t in pairs])
        pools = progress_pools(pools, torch.tensor([rollouts[i].turns[t].found for i, t in pairs]))
        return MemoryTerm(pairs, memory_advantages(r_mem, pools, keep=keep), pools,
                          stats | {"mem_copies": 1 - keep.float().mean().item()})
    if variant == "infomem":
        return _infomem(backend, rollouts, groups, pairs, pools, think=think, prefix=prefix, model=model)
    if variant == "write":
        return _write_gain(backend, rollouts, pairs, pools, think=think, prefix=prefix, model=model)
    raise ValueError(f"unknown memory reward {variant!r}")


def _empty_memories(rollouts: list[Rollout], wanted: set[int]) -> dict[int, list[Message]]:
    """One empty-memory context (system + question + ``<mem></mem>``) per question group in ``wanted``:
    every rollout of a group reads the same questions."""
    empty: dict[int, list[Message]] = {}
    for r in rollouts:
        if r.group in wanted and r.group not in empty and r.turns:
            empty[r.group] = mem_context(r.turns[0].full_context, "")
    return empty


def _infomem(backend: PolicyBackend, rollouts: list[Rollout], groups: torch.Tensor, pairs: list[tuple[int, int]],
             pools: torch.Tensor, **scoring: Any) -> MemoryTerm:
    """InfoMem: the final memory's gain over an empty memory, scored on successful rollouts only (a failed
    one costs no forward pass), z-normalised among the group's successes, on every scored ``<mem>``."""
    finals = {i: max(t for t, turn in enumerate(r.turns) if turn.mem_context is not None)
              for i, r in enumerate(rollouts) if succeeded(r) and any(t.mem_context is not None for t in r.turns)}
    empty = _empty_memories(rollouts, {rollouts[i].group for i in finals})
    gold = {r.group: r.gold for r in rollouts}
    lps = memory_logprobs(backend, [rollouts[i].turns[t].mem_context for i, t in finals.items()] + list(empty.values()),
                          [rollouts[i].gold for i in finals] + [gold[g] for g in empty], **scoring)
    base = dict(zip(empty, lps[len(finals):]))
    gains = torch.zeros(len(rollouts))
    for (i, _), lp in zip(finals.items(), lps):
        gains[i] = lp - base[rollouts[i].group]
    success = torch.tensor([i in finals for i in range(len(rollouts))])
    keep = torch.tensor([i in finals and not copied(rollouts[i], finals[i]) for i in range(len(rollouts))])
    per_rollout = successful_only(gains, success, groups, keep=keep)
    stats = {"mem_successes": success.float().mean().item(),
             "mem_copies": (success & ~keep).float().sum().item() / max(len(finals), 1)}
    if finals:
        stats["r_mem"] = gains[success].mean().item()
    return MemoryTerm(pairs, per_rollout[[i for i, _ in pairs]], pools, stats)


def _write_gain(backend: PolicyBackend, rollouts: list[Rollout], pairs: list[tuple[int, int]], pools: torch.Tensor,
                **scoring: Any) -> MemoryTerm:
    """The write gain (after HiMPO): each scored turn's memory against the memory before it (an empty one
    before the first), both under the same context otherwise (system + question)."""
    if not pairs:
        return MemoryTerm([], torch.zeros(0), pools, {})
    written = [(i, t) for i, r in enumerate(rollouts) for t, turn in enumerate(r.turns) if turn.mem_context is not None]
    empty = _empty_memories(rollouts, {rollouts[i].group for i, _ in pairs})
    gold = {r.group: r.gold for r in rollouts}
    lps = memory_logprobs(backend, [rollouts[i].turns[t].mem_context for i, t in written] + list(empty.values()),
                          [rollouts[i].gold for i, _ in written] + [gold[g] for g in empty], **scoring)
    logp, base = dict(zip(written, lps)), dict(zip(empty, lps[len(written):]))

    def before(i: int, t: int) -> float:
        return next((logp[i, s] for s in range(t - 1, -1, -1) if (i, s) in logp), base[rollouts[i].group])

    gains = information_gains(torch.tensor([logp[p] for p in pairs]), torch.tensor([before(*p) for p in pairs]))
    keep = torch.tensor([not copied(rollouts[i], t) for i, t in pairs])
    return MemoryTerm(pairs, memory_advantages(gains, pools, keep=keep), pools,
                      {"r_mem": gains.mean().item(), "mem_copies": 1 - keep.float().mean().item()})
