"""Agent and backend spec strings, and the model agent: an HF checkpoint plays the benchmark and acts
exactly as its backend generates from the chat-template rendering of the observation."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import pytest

import mempo_env  # noqa: F401
from agents import OracleAgent, RandomAgent, WeakAgent, make_agent
from agents.backends import make_backend
from agents.backends.common import parse_spec, request_seeds
from agents.model import STOP


@pytest.mark.parametrize("spec, expected", [
    ("oracle", ("oracle", [], {})),
    ("random:7", ("random", ["7"], {})),
    ("hf:/m/p#temperature=0.7#max_new_tokens=32#dtype=bfloat16",
     ("hf", ["/m/p"], {"temperature": 0.7, "max_new_tokens": 32, "dtype": "bfloat16"})),
    ("vllm#enforce_eager=true#max_model_len=4096", ("vllm", [], {"enforce_eager": True, "max_model_len": 4096})),
    ("openai:http://127.0.0.1:8000/v1#tiny#api=completions#concurrency=4",
     ("openai", ["http://127.0.0.1:8000/v1", "tiny"], {"api": "completions", "concurrency": 4})),
    ("sglang:http://h:30000#weights_dir=/shared/w", ("sglang", ["http://h:30000"], {"weights_dir": "/shared/w"})),
])
def test_parse_spec(spec: str, expected) -> None:
    assert parse_spec(spec) == expected


def test_scripted_specs() -> None:
    assert isinstance(make_agent("oracle"), OracleAgent) and isinstance(make_agent("weak"), WeakAgent)
    assert isinstance(make_agent("random"), RandomAgent) and make_agent("random:3").seed == 3
    for bad in ("oracle:1", "weak#x=1", "random:x", "hf", "vllm", "nope", "hf:a#b"):
        with pytest.raises(ValueError):
            make_agent(bad)


def test_backend_specs() -> None:
    for bad in ("nope", "hf:x", "vllm:x", "sglang", "vllm-server"):
        with pytest.raises(ValueError, match="unknown backend"):
            make_backend(bad, None, None)


def test_request_seeds() -> None:
    seeds = request_seeds(5, 6)
    assert seeds == request_seeds(5, 6) and len(set(seeds)) == 6 and seeds != request_seeds(6, 6)
    assert all(0 <= s < 2**31 for s in seeds) and request_seeds(None, 2) == [None, None]


@pytest.fixture(scope="module")
def hf_agent(policy_dir: Path):
    pytest.importorskip("torch")
    return make_agent(f"hf:{policy_dir}#max_new_tokens=12")


def test_hf_agent_acts_as_its_backend_generates(hf_agent) -> None:
    from mempo_env.views import render_prompt

    env = gym.make("MemSearchQA-v0", objectives=2)
    observations = [env.reset(seed=s)[0] for s in range(3)]
    actions = hf_agent.act_batch(observations, [{}] * 3)
    tokenizer, backend = hf_agent.backend.tokenizer, hf_agent.backend
    for observation, action in zip(observations, actions):
        prompt = tokenizer(render_prompt(observation, tokenizer), add_special_tokens=False)["input_ids"]
        (expected,), = backend.generate([prompt], max_new_tokens=12, temperature=0, stop=STOP)
        assert action == expected.text == hf_agent.act(observation, {})


def test_hf_agent_in_the_benchmark(hf_agent, policy_dir: Path, tmp_path: Path) -> None:
    from benchmarks.run import evaluate

    rows = evaluate({"tiny": f"hf:{policy_dir}#max_new_tokens=12"}, out_dir=tmp_path, objectives=[1],
                    contexts=["memory"], episodes=2, max_turns=2, turns_per_objective=0, plots=False,
                    verbose=False)
    assert rows[0]["agent"] == "tiny" and rows[0]["episodes"] == 2
