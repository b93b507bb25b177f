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


def memory_advantages(r_mem: torch.Tensor, groups: torch.Tensor, eps: float = 1e-6,
                      keep: torch.Tensor | None = None) -> torch.Tensor:
    """One memory advantage per scored turn: ``R_mem`` pooled over all scored turns of all rollouts of
    the same question (or whatever pools ``groups`` names), then normalised. ``keep`` (one bool per
    value): only those values enter the pools and get an advantage, the others get 0, so a value that
    must earn nothing (a copied memory, a failed rollout's) moves neither its own advantage nor the
    pool's mean and spread."""
    if keep is None:
        return group_normalize(r_mem, groups, eps)
    out = torch.zeros_like(r_mem, dtype=torch.float32)
    out[keep] = group_normalize(r_mem[keep], groups[keep], eps)
    return out


def progress_pools(groups: torch.Tensor, found: torch.Tensor) -> torch.Tensor:
    """One pool id per (question group, evidence found before the turn) pair: the progress-matched
    variant normalises a turn's reward only against turns of the same question that had found as much,
    so the part of P_mem - P_full that pays for search progress cancels within a pool."""
    return torch.unique(torch.stack([groups, found], dim=1), dim=0, return_inverse=True)[1]


def information_gains(logp_mem: torch.Tensor, logp_base: torch.Tensor) -> torch.Tensor:
    """``mean log P(y* | x, M) - mean log P(y* | x, M_base)``: how much a memory raises the gold answer's
    per-token log-likelihood over a baseline memory under the same context otherwise (InfoMem: the final
    memory over an empty one; the write gain: a turn's memory over the one before it)."""
    return logp_mem - logp_base


def successful_only(gains: torch.Tensor, success: torch.Tensor, groups: torch.Tensor, eps: float = 1e-6,
                    keep: torch.Tensor | None = None) -> torch.Tensor:
    """InfoMem's advantage, one per rollout: the gain z-normalised among the successful rollouts of its
    question group, 0 on every failed one whatever its gain (InfoMem reports that paying failed runs
    collapsed training). ``keep``: a further guard, as in ``memory_advantages``."""
    return memory_advantages(gains, groups, eps, keep=success if keep is None else success & keep)


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
