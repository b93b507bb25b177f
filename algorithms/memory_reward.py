"""MemPO's memory reward (spec section 8): how likely the gold answer is from the memory alone,
compared with the whole history.

For every scored turn, ``P = exp(mean log π(prefix + gold answer tokens | context + "<answer>"))``
under the current policy, once with the turn's ``full_context`` (everything before the turn) and
once with its ``mem_context`` (system + question + the turn's ``<mem>`` only). All contexts of a
step go through one batched, gradient-free scoring call; the results are constants in the loss.

``prefix`` is what the policy writes between ``<answer>`` and the answer (the embedded policy, like
the oracle it learns from, writes ``<answer> Vesol``). It matters: a byte-level BPE has different
ids for "Vesol" and " Vesol". Scored without the space, the embedded warm-up's P_mem averaged
0.00001 and correlated -0.21 with the episode's EM, so the memory advantage was noise; with it,
0.19 and +0.91 (32 sampled 1-objective episodes).
"""

from __future__ import annotations

import math

from agents.backends.base import PolicyBackend
from algorithms.rollout import Rollout, encode
from mempo_env.views import render_prompt


def scored_turns(rollouts: list[Rollout], *, first_turn: bool = False) -> list[tuple[int, int]]:
    """(rollout, turn) pairs that get a memory reward: turns with a ``<mem>``, from the second on
    unless ``first_turn`` (the first turn has no earlier context to compare with)."""
    return [(i, t) for i, r in enumerate(rollouts) for t, turn in enumerate(r.turns)
            if turn.mem_context is not None and (first_turn or t > 0)]


def answer_probabilities(backend: PolicyBackend, rollouts: list[Rollout], pairs: list[tuple[int, int]],
                         prefix: str = " ") -> tuple[list[float], list[float]]:
    """``(P_mem, P_full)`` for each (rollout, turn) pair, from one batched scoring call."""
    tok = backend.tokenizer
    contexts, continuations = [], []
    for i, t in pairs:
        turn, gold = rollouts[i].turns[t], encode(tok, prefix + rollouts[i].gold)
        contexts.append(encode(tok, render_prompt(turn.mem_context, tok, continue_final=True) + "<answer>"))
        contexts.append(encode(tok, render_prompt(turn.full_context, tok) + "<answer>"))
        continuations += [gold, gold]
    if not contexts:
        return [], []
    logps = backend.score(contexts, continuations)
    probs = [math.exp(sum(lp) / len(lp)) for lp in logps]
    return probs[0::2], probs[1::2]
