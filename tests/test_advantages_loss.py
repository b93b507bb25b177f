"""The spec's worked numbers (sections 7-8) and the PPO-clip + KL loss on hand-computed cases."""

import math

import pytest
import torch

from algorithms.advantages import (
    grpo_advantages,
    memory_advantages,
    memory_rewards,
    shuffled_within_groups,
    token_advantages,
)
from algorithms.loss import ppo_loss


def test_grpo_worked_example():
    scores = torch.tensor([1.0, 0, 1, 1, 0] * 3)  # mean 0.6, std ~0.5
    adv = grpo_advantages(scores, torch.zeros(15, dtype=torch.long))
    assert adv[0].item() == pytest.approx(0.8, abs=0.02) and adv[1].item() == pytest.approx(-1.2, abs=0.02)


def test_grpo_groups_are_per_question():
    scores = torch.tensor([1.0, 0.0, 2.0, 2.0, 0.0, 1.0])
    groups = torch.tensor([0, 0, 1, 1, 2, 2])
    adv = grpo_advantages(scores, groups)
    assert adv[2:4].tolist() == [0.0, 0.0]  # zero variance gives 0
    assert adv[0] > 0 > adv[1] and adv[0] == pytest.approx(-adv[1])
    assert adv[4] < 0 < adv[5]
    assert grpo_advantages(torch.tensor([1.0]), torch.tensor([0])).tolist() == [0.0]


def test_the_control_permutes_advantages_within_their_group_only():
    """--control shuffled: each group keeps its values (so their spread and zero mean), in another order."""
    groups = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1, 2, 2])
    adv = grpo_advantages(torch.tensor([1.0, 0, 0, 0, 3, 1, 2, 0, 1, 1]), groups)
    draws = [shuffled_within_groups(adv, groups, torch.Generator().manual_seed(s)) for s in range(5)]
    for out in draws:
        for g in range(3):
            assert sorted(out[groups == g].tolist()) == sorted(adv[groups == g].tolist())
    assert any(not torch.equal(out, adv) for out in draws)  # the rollout no longer gets what it earned
    again = shuffled_within_groups(adv, groups, torch.Generator().manual_seed(3))
    assert torch.equal(again, draws[3])  # a resumed run draws the same permutation


def test_memory_worked_example():
    r = memory_rewards(torch.tensor([0.12, 0.73]), torch.tensor([0.35, 0.68]))
    assert r.tolist() == pytest.approx([-0.23, 0.05])
    # normalised with the spec's pooled mean -0.01 and std 0.18
    assert ((r - -0.01) / 0.18).tolist() == pytest.approx([-1.22, 0.33], abs=0.01)
    # pooled over the turns of one question's rollouts; other questions do not mix in
    pool = torch.tensor([-0.23, 0.05, 0.20, -0.10, 0.9, 0.1])
    groups = torch.tensor([0, 0, 0, 0, 1, 1])
    a = memory_advantages(pool, groups)
    mine = pool[:4]
    assert a[:4].tolist() == pytest.approx(((mine - mine.mean()) / mine.std()).tolist(), abs=1e-5)
    assert a[4] > 0 > a[5]


def test_final_token_advantages_worked_example():
    """Turn 1 <mem> tokens -0.42, turn 2 <mem> tokens +1.13, other generated tokens +0.8, tools 0."""
    # one full-context sample: [prompt p p][turn1: <mem> m </mem> t a][tool x x][turn2: <mem> m </mem> a]
    response = torch.tensor([[0, 0, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1]], dtype=torch.float)
    mem = torch.tensor([[0, 0, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 0]], dtype=torch.float)
    a_mem = torch.tensor([[0, 0, -1.22, -1.22, -1.22, 0, 0, 0, 0, 0.33, 0.33, 0.33, 0]])
    adv = token_advantages(torch.tensor([0.8]), a_mem, response, mem)[0]
    expected = [0, 0, -0.42, -0.42, -0.42, 0.8, 0.8, 0, 0, 1.13, 1.13, 1.13, 0.8]
    assert adv.tolist() == pytest.approx(expected, abs=1e-6)
    # memory layout: one sample per turn, one memory advantage per sample
    response = torch.tensor([[0, 1, 1, 1.0], [0, 1, 1, 1.0]])
    mem = torch.tensor([[0, 1, 0, 0.0], [0, 1, 0, 0.0]])
    adv = token_advantages(torch.tensor([0.8, 0.8]), torch.tensor([-1.22, 0.33]), response, mem)
    assert adv.flatten().tolist() == pytest.approx([0, -0.42, 0.8, 0.8, 0, 1.13, 0.8, 0.8], abs=1e-6)


def test_ppo_loss_hand_computed():
    # token 1: ratio 1.5 > 1.2 with A = +1 -> clipped (1.2); token 2: ratio 0.5 with A = +1 -> unclipped (0.5)
    # token 3: ratio 0.5 < 0.8 with A = -1 -> clipped branch gives -0.8, min(-0.5, -0.8) = -0.8
    # token 4 is masked out
    old = torch.zeros(1, 4)
    logp = torch.tensor([[math.log(1.5), math.log(0.5), math.log(0.5), 5.0]], requires_grad=True)
    ref = torch.tensor([[0.0, 0.0, math.log(0.5), 0.0]])
    adv = torch.tensor([[1.0, 1.0, -1.0, 9.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0]])
    pg = [-1.2, -0.5, 0.8]
    k3 = [1 / 1.5 + math.log(1.5) - 1, 2 - math.log(2) - 1, 0.0]
    loss, stats = ppo_loss(logp, old, ref, adv, mask, clip_eps=0.2, kl_coef=0.1)
    assert loss.item() == pytest.approx(sum(p + 0.1 * k for p, k in zip(pg, k3)) / 3, abs=1e-6)
    assert stats["pg_loss"] == pytest.approx(sum(pg) / 3, abs=1e-6)
    assert stats["kl"] == pytest.approx(sum(k3) / 3, abs=1e-6)
    assert stats["clip_frac"] == pytest.approx(2 / 3)
    loss.backward()
    assert logp.grad[0, 0] == pytest.approx(0.1 * (1 - 1 / 1.5) / 3, abs=1e-6)  # clipped: only the KL pulls
    assert logp.grad[0, 1] == pytest.approx((-0.5 + 0.1 * (1 - 2)) / 3, abs=1e-6)
    assert logp.grad[0, 3] == 0.0


def test_kl_is_bounded_when_the_policy_moves_far_below_the_reference():
    # ref - logp = 12: raw k3 = e^12 - 13 (about 1.6e5); clamped to 10, like verl's low_var_kl
    logp = torch.tensor([[-12.0, -1.0]], requires_grad=True)
    ref, old, adv, mask = torch.zeros(1, 2), logp.detach().clone(), torch.zeros(1, 2), torch.ones(1, 2)
    loss, stats = ppo_loss(logp, old, ref, adv, mask, kl_coef=1.0)
    assert stats["kl"] == pytest.approx((10.0 + math.exp(1) - 2) / 2, abs=1e-5)
    loss.backward()
    assert logp.grad[0, 0] == 0.0 and torch.isfinite(logp.grad).all()  # the clamped token no longer pulls


def test_loss_is_the_weighted_mean_over_tokens():
    values = torch.tensor([[1.0, 1.0, 1.0, 1.0], [4.0, 0.0, 0.0, 0.0]])  # per-token loss: -A with ratio 1
    weights = torch.tensor([[0.25, 0.25, 0.25, 0.25], [1.0, 0.0, 0.0, 0.0]])  # one sequence mean each
    logp = torch.zeros(2, 4)
    loss, _ = ppo_loss(logp, logp, logp, -values, weights, kl_coef=0.0)
    assert loss.item() == pytest.approx((1 + 4) / 2)
    loss, _ = ppo_loss(logp, logp, logp, -values, (weights > 0).float(), kl_coef=0.0)  # token-mean
    assert loss.item() == pytest.approx(8 / 5)
    loss, stats = ppo_loss(logp, logp, logp, -values, torch.zeros(2, 4), kl_coef=0.0)  # nothing to train
    assert loss.item() == 0.0 and stats["clip_frac"] == 0.0


def test_token_logprobs_with_mask_equals_full_forward_where_it_counts():
    from algorithms.loss import token_logprobs
    from algorithms.tiny_policy import build_model

    model = build_model(300, hidden=32, layers=2, heads=2, eos_token_id=1, pad_token_id=0)
    ids = torch.randint(2, 300, (3, 12), generator=torch.Generator().manual_seed(0))
    attention = torch.ones_like(ids)
    mask = torch.zeros(3, 11)
    mask[0, 5:8] = 1
    mask[2, 9:] = 1
    full = token_logprobs(model, ids, attention)
    part = token_logprobs(model, ids, attention, mask=mask)
    torch.testing.assert_close(part * mask, full * mask)
    assert (part[:, mask.sum(0) == 0] == 0).all() and part.requires_grad
