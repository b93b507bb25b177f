"""Training samples from rollouts, in either layout, and the generated tokens the loss is taken on.

Every per-token array is aligned with ``input_ids``: position ``k`` describes token ``k``. Prompt and
tool tokens have ``response_mask`` 0, so they carry no advantage and no loss.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from agents.summariser import make_strategy
from algorithms.rollout import Rollout
from mempo_env.context import ContextStrategy

if TYPE_CHECKING:
    import torch

AGGREGATIONS = ("seq-mean-token-mean", "token-mean")


@dataclass
class Sample:
    input_ids: list[int]
    response_mask: list[float]  # 1 on generated tokens
    mem_mask: list[float]  # 1 on the tokens of a <mem> span that has a memory advantage
    old_logp: list[float]  # generation-time log-probs (0 where response_mask is 0)
    a_out: float  # the rollout's outcome advantage
    a_mem: list[float]  # the memory advantage of each token's turn (0 where unscored)
    weight: float  # loss weight of each generated token (see build_samples)


def build_samples(rollouts: list[Rollout], a_out: list[float], a_mem: dict[tuple[int, int], float],
                  context: str | ContextStrategy, agg: str = "seq-mean-token-mean") -> list[Sample]:
    """A context strategy whose prompt is not a prefix of the next (``"memory"``, ``"window:K"``, ...):
    one sample per turn (its own prompt). ``"full"`` (a prefix strategy): one sample per rollout, the
    last turn's prompt + response, which contains every earlier turn's response at the position it
    was generated. ``a_mem`` maps (rollout, turn) to that turn's memory advantage.

    ``agg="seq-mean-token-mean"`` (GRPO): every rollout weighs the same in the loss, spread evenly
    over its generated tokens, in both layouts. Weighing each memory-layout turn as a sequence of its
    own gave an 8-turn search loop 8 times the weight of a 3-turn success; its negative advantage
    then pushed down the protocol tokens every turn shares. ``agg="token-mean"``: every token weighs 1."""
    if agg not in AGGREGATIONS:
        raise ValueError(f"unknown aggregation {agg!r}; one of {AGGREGATIONS}")
    per_turn, samples = not make_strategy(context).prefix, []
    for i, r in enumerate(rollouts):
        n_generated = sum(len(t.response_ids) for t in r.turns)
        weight = 1.0 / max(n_generated, 1) if agg == "seq-mean-token-mean" else 1.0
        per_sample = [[t] for t in range(len(r.turns))] if per_turn else [list(range(len(r.turns)))]
        for turns in per_sample:
            last = r.turns[turns[-1]]
            ids = last.prompt_ids + last.response_ids
            n = len(ids)
            resp, mem, old, amem = [0.0] * n, [0.0] * n, [0.0] * n, [0.0] * n
            for t in turns:
                turn = r.turns[t]
                start = len(turn.prompt_ids)
                assert ids[start : start + len(turn.response_ids)] == turn.response_ids, "turns must nest"
                for k, lp in enumerate(turn.logprobs):
                    resp[start + k], old[start + k] = 1.0, lp
                if (i, t) in a_mem and turn.mem_span is not None:
                    for k in range(*turn.mem_span):
                        mem[start + k], amem[start + k] = 1.0, a_mem[(i, t)]
            samples.append(Sample(ids, resp, mem, old, a_out[i], amem, weight))
    return samples


@dataclass
class Generated:
    """A sample's generated tokens, what the loss needs of each: where it is in ``input_ids``, its
    log-prob under the weights that generated it, its advantage and its loss weight."""

    positions: list[int]
    old_logp: torch.Tensor
    advantages: torch.Tensor
    weights: torch.Tensor


def generated_tokens(sample: Sample) -> Generated:
    """The generated tokens of ``sample`` (``response_mask`` 1); their advantage is ``A_out`` plus, on a
    scored ``<mem>`` block, that turn's ``A_mem`` (``token_advantages``, spec section 8)."""
    import torch  # here, not at the top: the learners' Config checks AGGREGATIONS without torch

    from algorithms.advantages import token_advantages

    at = [k for k, r in enumerate(sample.response_mask) if r]
    mem = torch.tensor([[sample.mem_mask[k] for k in at]])
    a_mem = torch.tensor([[sample.a_mem[k] for k in at]])
    advantages = token_advantages(torch.tensor([sample.a_out]), a_mem, torch.ones_like(mem), mem)[0]
    return Generated(at, torch.tensor([sample.old_logp[k] for k in at]), advantages,
                     torch.full((len(at),), sample.weight))
