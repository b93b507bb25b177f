"""Prefix trees: shared prefixes computed once give the log-probs and gradients of the plain path.

The plain path is each sequence alone, right-padded (``HFBackend.score``, the reference the engine's
KV-cached generation is tested against); the model is the shipped warm-up, trained, so that a wrong
position or mask moves the log-probs by far more than float rounding (measured: at most 1e-4 on a
2.8k-token history; the tolerances here are 10x that or more and hold on any CPU)."""

import random

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from agents.backends.hf import HFBackend
from algorithms.prefix_tree import packs, sequence_logprobs
from algorithms.sft import SHIPPED

TOLERANCE = 1e-3  # absolute, on log-probs of magnitude 0-20


@pytest.fixture(scope="module")
def model():
    return AutoModelForCausalLM.from_pretrained(SHIPPED, dtype=torch.float32, attn_implementation="sdpa").eval()


def sharing(seed: int = 0, n: int = 12) -> list[list[int]]:
    """Sequences that share prefixes the ways the learner's do: a history and its prefixes with their own
    endings, copies, a sequence that is a prefix of another, and strangers."""
    rng = random.Random(seed)
    history = [rng.randrange(3, 1500) for _ in range(300)]
    seqs = [history[:cut] + [rng.randrange(3, 1500) for _ in range(8)] for cut in (40, 120, 200, 300)]
    seqs += [list(seqs[1]), history[:150], history[:150] + [7, 8, 9]]
    seqs += [[rng.randrange(3, 1500) for _ in range(rng.randrange(20, 90))] for _ in range(n - len(seqs))]
    return seqs


def test_a_pack_holds_each_distinct_prefix_once_and_every_sequence_as_a_path():
    seqs = sharing()
    [pack] = packs(seqs, max_tokens=10_000)
    distinct = {tuple(s[:k + 1]) for s in seqs for k in range(len(s))}
    assert len(pack.ids) == len(distinct) < sum(map(len, seqs))
    mask = pack.mask()
    for i, path in zip(pack.members, pack.paths):
        assert [pack.ids[n] for n in path] == seqs[i] and [pack.depth[n] for n in path] == list(range(len(seqs[i])))
        for k, node in enumerate(path):  # a token sees exactly the tokens before it in its sequence, and itself
            assert set(mask[node].nonzero().squeeze(-1).tolist()) == set(path[: k + 1])
    assert sorted(pack.members) == list(range(len(seqs)))


def test_packs_respect_their_size_and_keep_a_long_sequence_whole():
    seqs = sharing()
    small = packs(seqs, max_tokens=100)
    assert sorted(i for p in small for i in p.members) == list(range(len(seqs)))
    # a longer tree holds one sequence (and its copies, which add no token): the 308-token ones
    assert all(len(p.ids) <= 100 or len({tuple(seqs[i]) for i in p.members}) == 1 for p in small)
    assert any(len(p.ids) > 100 for p in small)
    assert sorted(i for p in packs(seqs, 100, indices=[3, 0]) for i in p.members) == [0, 3]  # only those asked for


def test_log_probs_equal_the_plain_path(model):
    seqs = sharing(1)
    positions = [range(len(s) // 2, len(s)) for s in seqs]
    engine = HFBackend(model, AutoTokenizer.from_pretrained(SHIPPED), batch_size=5)
    plain = engine.score([s[: len(s) // 2] for s in seqs], [s[len(s) // 2:] for s in seqs])
    for max_tokens in (64, 4096):  # many small trees, or one
        with torch.no_grad():
            packed = sequence_logprobs(model, seqs, positions, max_tokens=max_tokens)
        for a, b in zip(plain, packed):
            torch.testing.assert_close(b, torch.tensor(a), atol=TOLERANCE, rtol=0)
    with pytest.raises(ValueError, match="positions"):
        sequence_logprobs(model, seqs[:1], [[0]])


def test_gradients_equal_the_plain_path(model):
    seqs = sharing(2, n=8)
    positions = [list(range(5, len(s))) for s in seqs]

    def grads(loss: torch.Tensor) -> list[torch.Tensor]:
        model.zero_grad()
        loss.backward()
        return [p.grad.clone() for p in model.parameters()]

    plain = grads(sum(torch.log_softmax(model(input_ids=torch.tensor([s])).logits[0, :-1], -1)
                      [torch.tensor(p) - 1, torch.tensor([s[k] for k in p])].sum() for s, p in zip(seqs, positions)))
    packed = grads(sum(lp.sum() for lp in sequence_logprobs(model, seqs, positions, max_tokens=256)))
    for a, b in zip(plain, packed):
        assert (a - b).norm() <= 1e-3 * a.norm() + 1e-6


def test_a_model_without_4d_masks_is_refused(model, monkeypatch):
    monkeypatch.setattr(model.config, "_attn_implementation", "flash_attention_2")
    with pytest.raises(ValueError, match="4D mask"):
        sequence_logprobs(model, [[1, 2, 3]], [[1, 2]])


def test_the_memory_reward_scores_the_same_through_prefix_trees(model):
    """P_mem and P_full of real rollouts (their histories are prefixes of one another) equal the engine's
    plain scoring."""
    from algorithms.memory_reward import answer_probabilities, scored_turns
    from algorithms.rollout import collect_rollouts
    from mempo_env.env import MemSearchQAEnv
    from mempo_env.tasks import make_generated_task

    task = make_generated_task("train", seed=0, hops=1)
    engine = HFBackend(model, AutoTokenizer.from_pretrained(SHIPPED))
    envs = [MemSearchQAEnv(task, objectives=3, max_turns=6, tokenizer=engine.tokenizer) for _ in range(2)]
    rollouts = collect_rollouts(engine, envs, [[0, 1, 2]], max_new_tokens=128, seed=0)
    pairs = scored_turns(rollouts)
    assert len(pairs) >= 4
    plain, packed = answer_probabilities(engine, rollouts, pairs), answer_probabilities(engine, rollouts, pairs,
                                                                                         model=model)
    for a, b in zip(plain, packed):
        assert b == pytest.approx(a, rel=1e-3, abs=1e-6)
