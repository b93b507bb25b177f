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
"""

from __future__ import annotations

import math
from typing import Any

import torch

from agents.backends.base import PolicyBackend
from agents.scripted import ANSWERING
from algorithms.prefix_tree import sequence_logprobs
from algorithms.rollout import Rollout, encode
from mempo_env.views import render_prompt

# Tokens per prefix tree of the scoring pass: at least a rollout's longest history (2.8k tokens at 10
# objectives), so that each history is read once; measured fastest of 2048, 4096 and 8192 there.
SCORING_PACK_TOKENS = 4096


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
    if model is None:
        logprobs = backend.score(contexts, continuations)
    else:
        with torch.no_grad():
            logprobs = [lp.tolist() for lp in sequence_logprobs(
                model, [c + x for c, x in zip(contexts, continuations)],
                [range(len(c), len(c) + len(x)) for c, x in zip(contexts, continuations)],
                max_tokens=SCORING_PACK_TOKENS)]
    probs = [mean_probability(lp) for lp in logprobs]
    return probs[0::2], probs[1::2]
