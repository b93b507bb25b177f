"""Rollouts, training samples and the memory reward, on a scripted fake engine with the tiny tokenizer."""

import dataclasses
import math

import pytest

from agents.backends.base import Generation
from agents.scripted import ANSWERING
from algorithms.batch import build_samples, generated_tokens
from algorithms.memory_reward import answer_probabilities, scored_turns
from algorithms.rollout import collect_rollouts, encode, mem_token_span
from mempo_env import Document, QARecord, QATask
from mempo_env.env import MemSearchQAEnv
from mempo_env.views import render_prompt

DOCS = [Document("d1", "Zorb", "Zorb is a film directed by Ann Lee."),
        Document("d2", "Ann Lee", "Ann Lee was born in Tarvik.")]
TASK = QATask("toy", [QARecord("q1", "Who directed Zorb?", ["Ann Lee"]),
                      QARecord("q2", "Where was Ann Lee born?", ["Tarvik"])], DOCS)
TURNS = ["<mem>nothing yet</mem><think>search the film</think><search>Zorb</search>",
         "<mem>Zorb: Ann Lee</mem><think>next</think><search>Ann Lee</search>",
         "<mem>Zorb: Ann Lee; born Tarvik</mem><think>done</think><answer>Ann Lee; Tarvik</answer>"]


class ScriptedBackend:
    """Every live episode 'generates' the scripted turn of the current round; log-probs are -0.01 per
    position. ``score`` records its inputs and returns log-prob -len(context)/1000 per token."""

    def __init__(self, tokenizer, turns=TURNS):
        self.tokenizer, self.turns, self.round, self.scored = tokenizer, turns, 0, []

    def generate(self, prompts, *, max_new_tokens, temperature=1.0, top_p=1.0, n=1, stop=(), seed=None):
        ids = encode(self.tokenizer, self.turns[self.round])
        self.round += 1
        return [[Generation(ids, [-0.01 * (j + 1) for j in range(len(ids))], self.turns[self.round - 1], "stop")]
                for _ in prompts]

    def score(self, contexts, continuations):
        self.scored.append((contexts, continuations))
        return [[-len(c) / 1000] * len(x) for c, x in zip(contexts, continuations)]

    def update_weights(self, model):
        pass


def rollouts(tokenizer, context, n=2):
    backend = ScriptedBackend(tokenizer)
    envs = [MemSearchQAEnv(TASK, objectives=2, context=context, tokenizer=tokenizer, cache_dir=None) for _ in range(n)]
    return backend, collect_rollouts(backend, envs, [[0, 1]])


def test_full_layout_takes_a_turn_ended_by_the_eos_token(tokenizer):
    """A turn that the policy ends with its eos token (<|im_end|>, no action) is invalid; the action is
    its text less that token, as the benchmark's agents act, and the running sequence keeps the
    generated tokens, the eos standing for the template's end of the turn, then the reply."""
    backend = ScriptedBackend(tokenizer, ["<mem>x</mem><think>y</think><|im_end|>", *TURNS])
    env = MemSearchQAEnv(TASK, objectives=2, context="full", tokenizer=tokenizer, cache_dir=None)
    [r] = collect_rollouts(backend, [env], [[0, 1]])
    assert r.score == 0 and len(r.turns) == 4
    first, second = r.turns[:2]
    assert second.prompt_ids[: len(first.prompt_ids) + len(first.response_ids)] == \
        first.prompt_ids + first.response_ids
    assert tokenizer.decode(second.prompt_ids).count("<|im_start|>") == len(second.full_context) + 1
    assert second.full_context[-2]["content"] == "<mem>x</mem><think>y</think>"  # no eos in the action
    assert tokenizer.decode(second.prompt_ids) == render_prompt(second.full_context, tokenizer)


def test_a_dropped_answer_keeps_its_aligned_reward(tokenizer):
    """Two questions, one answer: the spec's score is 0; the aligned reward (--reward aligned) keeps 1."""
    backend = ScriptedBackend(tokenizer, [*TURNS[:2], TURNS[2].replace("Ann Lee; Tarvik", "Ann Lee")])
    env = MemSearchQAEnv(TASK, objectives=2, tokenizer=tokenizer, cache_dir=None)
    [r] = collect_rollouts(backend, [env], [[0, 1]])
    assert (r.score, r.reward("score"), r.reward("aligned")) == (0, 0, 1)


def test_groups_of_different_horizons_play_together(tokenizer):
    """--min-objectives: one step's question groups may differ in length; each episode asks its group's."""
    envs = [MemSearchQAEnv(TASK, objectives=2, tokenizer=tokenizer, cache_dir=None) for _ in range(4)]
    rs = collect_rollouts(ScriptedBackend(tokenizer), envs, [[0, 1], [1]])
    assert [len(r.info["objectives"]) for r in rs] == [2, 2, 1, 1]
    assert [r.gold for r in rs] == ["Ann Lee; Tarvik"] * 2 + ["Tarvik"] * 2


def test_mem_span_aligns_with_the_decoded_text(tokenizer):
    ids = encode(tokenizer, TURNS[1])
    lo, hi = mem_token_span(tokenizer, ids)
    assert tokenizer.decode(ids[lo:hi]) == "<mem>Zorb: Ann Lee</mem>"
    lo, hi = mem_token_span(tokenizer, ids, include_tags=False)
    assert tokenizer.decode(ids[lo:hi]) == "Zorb: Ann Lee"
    assert mem_token_span(tokenizer, encode(tokenizer, "<think>x</think>")) is None


@pytest.mark.parametrize("context", ["memory", "full"])
def test_rollouts_record_exact_tokens_and_score(tokenizer, context):
    _, rs = rollouts(tokenizer, context)
    assert [r.group for r in rs] == [0, 0] and rs[0].gold == "Ann Lee; Tarvik"
    r = rs[0]
    assert r.score == 2 and r.info["format_ok"] and len(r.turns) == 3
    for turn, text in zip(r.turns, TURNS):
        assert turn.response_ids == encode(tokenizer, text)
        assert len(turn.logprobs) == len(turn.response_ids)
    first = render_prompt(r.turns[0].full_context, tokenizer)
    assert tokenizer.decode(r.turns[0].prompt_ids) == first
    if context == "memory":  # each prompt is the freshly rendered memory view
        assert "<search>Zorb</search>" not in tokenizer.decode(r.turns[2].prompt_ids)
    else:  # each prompt extends the last one by the response and the environment's reply
        for a, b in zip(r.turns, r.turns[1:]):
            assert b.prompt_ids[: len(a.prompt_ids) + len(a.response_ids)] == a.prompt_ids + a.response_ids
        assert tokenizer.decode(r.turns[2].prompt_ids) == render_prompt(r.turns[2].full_context, tokenizer)


def test_any_other_strategy_prompts_each_turn_afresh_and_trains_one_sample_per_turn(tokenizer):
    """window:1 (the last turn verbatim): each turn's prompt is that strategy's view of the episode, as
    a separate env playing the same turns shows it, and every turn is a training sample of its own."""
    _, rs = rollouts(tokenizer, "window:1")
    env = MemSearchQAEnv(TASK, objectives=2, context="window:1", tokenizer=tokenizer, cache_dir=None)
    obs, _ = env.reset(options={"index": [0, 1], "objectives": 2})
    views = [obs] + [env.step(text)[0] for text in TURNS[:-1]]
    assert [tokenizer.decode(t.prompt_ids) for t in rs[0].turns] == [render_prompt(v, tokenizer) for v in views]
    assert "<search>Zorb</search>" in tokenizer.decode(rs[0].turns[1].prompt_ids)  # the last turn, kept
    assert "<search>Zorb</search>" not in tokenizer.decode(rs[0].turns[2].prompt_ids)  # an older one, gone
    samples = build_samples(rs, [1.0, -1.0], {}, "window:1")
    assert [s.input_ids for s in samples[:3]] == [t.prompt_ids + t.response_ids for t in rs[0].turns]


def test_samples_mask_prompt_and_tool_tokens(tokenizer):
    _, rs = rollouts(tokenizer, "full")
    a_mem = {(0, 1): 0.5, (0, 2): -1.0}
    [s0, s1] = build_samples(rs, [1.0, -1.0], a_mem, "full")
    turns = rs[0].turns
    assert sum(s0.response_mask) == sum(len(t.response_ids) for t in turns)
    generated = [tok for tok, m in zip(s0.input_ids, s0.response_mask) if m]
    assert generated == [i for t in turns for i in t.response_ids]  # tool and prompt tokens excluded
    mem_text = tokenizer.decode([tok for tok, m in zip(s0.input_ids, s0.mem_mask) if m])
    assert mem_text == "<mem>Zorb: Ann Lee</mem><mem>Zorb: Ann Lee; born Tarvik</mem>"  # turn 1 not scored
    assert sorted(set(s0.a_mem)) == [-1.0, 0.0, 0.5] and sum(s1.a_mem) == 0.0
    samples = build_samples(rs, [1.0, -1.0], a_mem, "memory")
    assert len(samples) == 6 and all(sum(s.response_mask) == len(t.response_ids) for s, t in zip(samples, turns))
    tokens = [generated_tokens(s) for s in samples]  # what the loss is taken on
    assert tokens[0].positions == list(range(len(turns[0].prompt_ids), len(samples[0].input_ids)))
    assert tokens[0].old_logp[0].item() == pytest.approx(-0.01)
    # A_out, plus A_mem on the <mem> tokens of rollout 0's scored turns 1 (+0.5) and 2 (-1.0)
    assert [t.advantages.unique().tolist() for t in tokens] == [[1.0], [1.0, 1.5], [0.0, 1.0]] + [[-1.0]] * 3
    [full] = [generated_tokens(s) for s in build_samples(rs[:1], [1.0], a_mem, "full")]
    assert sorted(set(full.advantages.tolist())) == [0.0, 1.0, 1.5]  # the same in the full layout
    assert all(samples[0].response_mask[k] for k in tokens[0].positions)


@pytest.mark.parametrize("agg", ["seq-mean-token-mean", "token-mean"])
def test_loss_weights_count_rollouts_not_turns(tokenizer, agg):
    """seq-mean-token-mean: a 3-turn rollout and a 1-turn one weigh the same in the loss, in both
    layouts, and each token gets the same weight in both; token-mean: every generated token weighs 1."""
    per_rollout = {}
    for context in ("memory", "full"):
        _, rs = rollouts(tokenizer, context)
        rs = [rs[0], dataclasses.replace(rs[1], turns=rs[1].turns[:1])]
        lengths = [sum(len(t.response_ids) for t in r.turns) for r in rs]
        samples = build_samples(rs, [1.0, -1.0], {}, context, agg)
        owner = [0] * (3 if context == "memory" else 1) + [1]
        weights = [generated_tokens(s).weights.sum().item() for s in samples]
        per_rollout[context] = [sum(w for w, o in zip(weights, owner) if o == i) for i in (0, 1)]
    expected = [1.0, 1.0] if agg == "seq-mean-token-mean" else lengths
    assert per_rollout["memory"] == pytest.approx(expected) and per_rollout["full"] == pytest.approx(expected)
    with pytest.raises(ValueError, match="aggregation"):
        build_samples(rs, [1.0, -1.0], {}, "memory", "sum")


def test_memory_reward_scores_the_contexts_it_claims(tokenizer):
    backend, rs = rollouts(tokenizer, "memory")
    pairs = scored_turns(rs)
    assert pairs == [(0, 1), (0, 2), (1, 1), (1, 2)]
    assert scored_turns(rs, first_turn=True)[:3] == [(0, 0), (0, 1), (0, 2)]
    p_mem, p_full = answer_probabilities(backend, rs, pairs)
    [(contexts, continuations)] = backend.scored
    turn = rs[0].turns[1]
    answering = f"\n<think>{ANSWERING}</think>\n<answer>"  # the protocol's answering turn, as the oracle writes it
    mem_text = render_prompt(turn.mem_context, tokenizer, continue_final=True) + answering
    full_text = render_prompt(turn.full_context, tokenizer) + "<mem></mem>" + answering
    assert tokenizer.decode(contexts[0]) == mem_text and mem_text.endswith("<mem>Zorb: Ann Lee</mem>" + answering)
    assert "<tool_response>" not in mem_text
    assert tokenizer.decode(contexts[1]) == full_text and "Doc 1(Title: Zorb)" in full_text
    assert tokenizer.decode(continuations[0]) == " Ann Lee; Tarvik" == tokenizer.decode(continuations[1])
    assert continuations[0] == tokenizer.encode(" Ann Lee; Tarvik", add_special_tokens=False)  # as the policy writes it
    assert p_mem[0] == pytest.approx(math.exp(-len(contexts[0]) / 1000))
    assert p_full[0] == pytest.approx(math.exp(-len(contexts[1]) / 1000))
    assert p_mem[0] > p_full[0]  # shorter context, higher fake probability
    answer_probabilities(backend, rs, pairs, think="", prefix="")
    assert tokenizer.decode(backend.scored[-1][1][0]) == "Ann Lee; Tarvik"
    assert tokenizer.decode(backend.scored[-1][0][0]).endswith("</mem>\n<think></think>\n<answer>")
