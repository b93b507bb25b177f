"""Advantages (spec sections 7 and 8): GRPO's outcome advantage and MemPO's memory advantage.

Both normalise within a question's group, never across the batch: the G rollouts of one question
are compared only with each other, so easy and hard questions weigh the same.
"""

from __future__ import annotations

import torch


def group_normalize(values: torch.Tensor, groups: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """``(v - mean) / (std + eps)`` within each group (unbiased std, as in verl's GRPO).
    A group of one value, or with zero variance, gives 0: there is nothing to compare against."""
    out = torch.zeros_like(values, dtype=torch.float32)
    for g in groups.unique():
        idx = groups == g
        v = values[idx].float()
        if v.numel() > 1 and v.std() > 0:
            out[idx] = (v - v.mean()) / (v.std() + eps)
    return out


def grpo_advantages(scores: torch.Tensor, groups: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """One outcome advantage per rollout: its score normalised within its question's group."""
    return group_normalize(scores, groups, eps)


def memory_rewards(p_mem: torch.Tensor, p_full: torch.Tensor) -> torch.Tensor:
    """``R_mem = P_mem - P_full``: does the memory alone make the gold answer as likely as the whole
    history does? A difference of probabilities (not log-probabilities), bounded in [-1, 1]."""
    return p_mem - p_full


def memory_advantages(r_mem: torch.Tensor, groups: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """One memory advantage per scored turn: ``R_mem`` pooled over all scored turns of all rollouts of
    the same question, then normalised."""
    return group_normalize(r_mem, groups, eps)


def token_advantages(a_out: torch.Tensor, a_mem: torch.Tensor, response_mask: torch.Tensor,
                     mem_mask: torch.Tensor) -> torch.Tensor:
    """Per-token advantages of a batch of samples, shape ``[batch, tokens]``: ``A_out`` on every
    generated token, plus ``A_mem`` on the tokens of that turn's ``<mem>`` block, 0 on prompt and
    tool tokens (which ``response_mask`` excludes). ``a_out`` and ``a_mem`` hold one value per sample
    (``a_mem`` is 0 for turns without a memory advantage); a full-context sample holds several
    turns, so there ``a_mem`` may be given per token instead, with the same shape as the masks."""
    a_mem = a_mem if a_mem.dim() == 2 else a_mem[:, None]
    return (a_out[:, None] + a_mem * mem_mask) * response_mask


def shuffled_within_groups(values: torch.Tensor, groups: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """The no-information control (``--control shuffled``): each group's values permuted among its
    members. The update then sees the same values, with the same spread and zero mean per group, none
    tied to the rollout (or turn) that earned it: what the learner does with updates that carry no
    information about which behaviour was better."""
    out = values.clone()
    for g in groups.unique():
        idx = (groups == g).nonzero().squeeze(-1)
        out[idx] = values[idx[torch.randperm(len(idx), generator=generator)]]
    return out
