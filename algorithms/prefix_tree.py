"""Log-probs of many token sequences that share prefixes, every shared prefix computed once.

The learner's sequences repeat themselves. MemPO's memory reward scores the gold answer after the
whole history before every turn of a rollout: contexts that are prefixes of one another, so scored
one by one the model reads each history once per turn (a 10-objective step of 32 rollouts: 410k
tokens, 56k distinct). The update's memory-view turns start with the same system prompt and question,
and the G rollouts of a question copy much the same notes into their memories (143k tokens, 56k
distinct). Here the sequences are sorted, which puts the ones that share a prefix next to each other,
and packed into prefix trees: each distinct prefix is one token of a packed row, at the position it
has in its sequences, attending only to the tokens before it in those sequences (a 4D attention mask).
One forward per pack gives every sequence's log-probs, equal to computing each sequence alone up to
float rounding (tests/test_prefix_tree.py), with gradients when autograd is on.

Attention over a pack is dense (n² for n tokens, whatever the tree), so ``max_tokens`` trades the
shared tokens against that: measured on a 10-objective step, 4096 for the scoring pass (its histories
are up to 2.8k tokens) and 1024 for the update.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

MASKS = ("sdpa", "eager")  # attention implementations that take a custom 4D mask (bool / additive)


@dataclass
class Pack:
    """One prefix tree, flattened so that every token comes after the tokens it follows."""

    ids: list[int] = field(default_factory=list)  # one token per tree node
    depth: list[int] = field(default_factory=list)  # its position in every sequence through it
    members: list[int] = field(default_factory=list)  # the sequences of the pack (indices into the caller's list)
    paths: list[list[int]] = field(default_factory=list)  # per member, the node of each of its tokens
    shared: list[int] = field(default_factory=list)  # per member, how many of its tokens the pack already had

    def mask(self) -> torch.Tensor:
        """``[n, n]``, True where node i may attend to node j: j is i or one of its ancestors."""
        n = len(self.ids)
        mask = torch.zeros((n, n), dtype=torch.bool)
        for path, shared in zip(self.paths, self.shared):
            if shared < len(path):
                nodes = torch.tensor(path)
                new = torch.arange(shared, len(path))
                mask[nodes[shared:, None], nodes[None, :]] = torch.arange(len(path))[None, :] <= new[:, None]
        return mask


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    for k in range(n):
        if a[k] != b[k]:
            return k
    return n


def packs(sequences: Sequence[Sequence[int]], max_tokens: int, indices: Sequence[int] | None = None) -> list[Pack]:
    """The sequences (those of ``indices``, default all) in prefix trees of at most ``max_tokens`` nodes
    (a longer sequence gets a tree of its own). In sorted order, the longest prefix a sequence shares
    with any earlier one is the one it shares with the sequence just before it, so each sequence adds
    its tokens past that prefix."""
    out: list[Pack] = []
    previous: Sequence[int] = ()
    for i in sorted(range(len(sequences)) if indices is None else indices, key=lambda k: list(sequences[k])):
        seq = sequences[i]
        shared = common_prefix(seq, previous) if out else 0
        if not out or (shared < len(seq) and len(out[-1].ids) + len(seq) - shared > max_tokens):
            out.append(Pack())
            shared = 0
        pack = out[-1]
        new = range(len(pack.ids), len(pack.ids) + len(seq) - shared)
        path = (pack.paths[-1][:shared] if shared else []) + list(new)
        pack.ids += seq[shared:]
        pack.depth += range(shared, len(seq))
        pack.members.append(i)
        pack.paths.append(path)
        pack.shared.append(shared)
        previous = seq
    return out


def supports_tree_masks(model: torch.nn.Module) -> bool:
    """Whether the model's attention takes a custom 4D mask (flash-attention kernels do not)."""
    return getattr(model.config, "_attn_implementation", None) in MASKS


def pack_logprobs(model: torch.nn.Module, pack: Pack, sequences: Sequence[Sequence[int]],
                  positions: Sequence[Sequence[int]], temperature: float = 1.0) -> list[torch.Tensor]:
    """``log π(seq[k] | seq[:k]) `` for each ``k`` of ``positions[i]`` (k >= 1), for each member ``i`` of
    ``pack`` in its order, from one forward of the pack; logits only where a wanted token is predicted."""
    if not supports_tree_masks(model):
        raise ValueError(f"attention {model.config._attn_implementation!r} takes no 4D mask; one of {MASKS}")
    device = next(model.parameters()).device
    rows = sorted({pack.paths[m][k - 1] for m, i in enumerate(pack.members) for k in positions[i]})
    if not rows:
        return [torch.zeros(0, device=device) for _ in pack.members]
    mask = pack.mask().to(device)
    if model.config._attn_implementation == "eager":  # eager attention adds its mask to the scores
        mask = torch.zeros(mask.shape, device=device).masked_fill(~mask, torch.finfo(torch.float32).min)
    logits = model(input_ids=torch.tensor([pack.ids], device=device), attention_mask=mask[None, None],
                   position_ids=torch.tensor([pack.depth], device=device),
                   logits_to_keep=torch.tensor(rows, device=device), use_cache=False).logits[0].float()
    if temperature not in (0.0, 1.0):
        logits = logits / temperature
    logp = torch.log_softmax(logits, dim=-1)
    row_of = {node: r for r, node in enumerate(rows)}
    out = []
    for path, i in zip(pack.paths, pack.members):
        at = torch.tensor([row_of[path[k - 1]] for k in positions[i]], device=device, dtype=torch.long)
        out.append(logp[at, torch.tensor([sequences[i][k] for k in positions[i]], device=device, dtype=torch.long)])
    return out


def sequence_logprobs(model: torch.nn.Module, sequences: Sequence[Sequence[int]],
                      positions: Sequence[Sequence[int]], *, max_tokens: int = 4096,
                      temperature: float = 1.0) -> list[torch.Tensor]:
    """``pack_logprobs`` for every sequence, in the caller's order, one forward per pack."""
    if len(positions) != len(sequences) or any(not all(1 <= k < len(s) for k in p)
                                               for s, p in zip(sequences, positions)):
        raise ValueError("one list of positions per sequence, each from 1 to the sequence's length - 1")
    results: list[torch.Tensor | None] = [None] * len(sequences)
    for pack in packs(sequences, max_tokens):
        for i, logp in zip(pack.members, pack_logprobs(model, pack, sequences, positions, temperature)):
            results[i] = logp
    return results  # type: ignore[return-value]
