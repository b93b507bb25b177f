"""Training samples from rollouts, in either layout, and their padding into tensors.

Every per-token array is aligned with ``input_ids``: position ``k`` describes token ``k``. Prompt and
tool tokens have ``response_mask`` 0, so they carry no advantage and no loss.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from algorithms.rollout import Rollout

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
                  context: str, agg: str = "seq-mean-token-mean") -> list[Sample]:
    """``context="memory"``: one sample per turn (its own prompt). ``context="full"``: one sample per
    rollout, the last turn's prompt + response, which contains every earlier turn's response at
    the position it was generated. ``a_mem`` maps (rollout, turn) to that turn's memory advantage.

    ``agg="seq-mean-token-mean"`` (GRPO): every rollout weighs the same in the loss, spread evenly
    over its generated tokens, in both layouts. Weighing each memory-layout turn as a sequence of its
    own gave an 8-turn search loop 8 times the weight of a 3-turn success; its negative advantage
    then pushed down the protocol tokens every turn shares. ``agg="token-mean"``: every token weighs 1."""
    if agg not in AGGREGATIONS:
        raise ValueError(f"unknown aggregation {agg!r}; one of {AGGREGATIONS}")
    samples = []
    for i, r in enumerate(rollouts):
        n_generated = sum(len(t.response_ids) for t in r.turns)
        weight = 1.0 / max(n_generated, 1) if agg == "seq-mean-token-mean" else 1.0
        per_sample = [[t] for t in range(len(r.turns))] if context == "memory" else [list(range(len(r.turns)))]
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


def collate(samples: list[Sample], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-padded tensors; per-token arrays are shifted by one to line up with next-token
    log-probs (``logp[:, k]`` predicts ``input_ids[:, k + 1]``)."""
    length = max(len(s.input_ids) for s in samples)

    def pad(rows: list[list], value: float, dtype: torch.dtype) -> torch.Tensor:
        return torch.tensor([row + [value] * (length - len(row)) for row in rows], dtype=dtype)

    response_mask = pad([s.response_mask for s in samples], 0.0, torch.float)[:, 1:]
    return {
        "input_ids": pad([s.input_ids for s in samples], pad_id, torch.long),
        "attention_mask": pad([[1] * len(s.input_ids) for s in samples], 0, torch.long),
        "response_mask": response_mask,
        "mem_mask": pad([s.mem_mask for s in samples], 0.0, torch.float)[:, 1:],
        "old_logp": pad([s.old_logp for s in samples], 0.0, torch.float)[:, 1:],
        "a_mem": pad([s.a_mem for s in samples], 0.0, torch.float)[:, 1:],
        "a_out": torch.tensor([s.a_out for s in samples], dtype=torch.float),
        "loss_weight": response_mask * torch.tensor([[s.weight] for s in samples]),
    }
