"""The verifiers environment (``memsearchqa``) under verifiers 0.3.1's own loader and evaluation loop,
against an OpenAI-compatible stand-in server with a scripted policy behind it: the scores, metrics and
trajectories equal those of the project's runner (``benchmarks.run.play``) on the same episodes, and
the prompts the server receives are the env's observations in its view.

Runs in the verifiers environment (``bash scripts/install_verifiers.sh``); skipped where verifiers is absent.
"""

from __future__ import annotations

from typing import Any

import pytest

vf = pytest.importorskip("verifiers")

from doc_blocks import code_blocks
from verifiers_helpers import evaluate, policy_server

from agents import Agent, make_agent
from benchmarks.run import play
from mempo_env import MemSearchQAEnv

# What benchmarks.run plays by default at 2 objectives: the test split, the eval prompt, 16 turns.
SETTINGS = {"split": "test", "prompt": "eval", "objectives": 2, "max_turns": 16}
METRICS = ("em", "f1", "format_ok", "n_searches", "total_chars", "peak_chars")


@pytest.mark.parametrize("context", ["memory", "full"])
@pytest.mark.parametrize("spec", ["oracle", "weak", "random:3"])
def test_scores_equal_the_runners(spec: str, context: str) -> None:
    kwargs, seeds = {**SETTINGS, "context": context}, range(5, 11)
    env = vf.load_environment("memsearchqa", episodes=len(seeds), seed=seeds[0], **kwargs)
    assert isinstance(env, vf.MultiTurnEnv)
    with policy_server(make_agent(spec), kwargs, seeds) as (client, _):
        outputs = evaluate(env, client)
    runner = dict(play(make_agent(spec), [MemSearchQAEnv(**kwargs)], list(seeds)))
    assert [o["example_id"] for o in outputs] == list(range(len(seeds)))
    for i, output in enumerate(outputs):
        record = runner[i]
        assert output["error"] is None and output["stop_condition"] == "has_final_env_response"
        assert output["reward"] == record["score"]
        assert output["metrics"]["num_turns"] == record["n_turns"]
        assert {name: output["metrics"][name] for name in METRICS} == {name: float(record[name]) for name in METRICS}
        history = [{"role": m["role"], "content": m["content"]} for m in output["prompt"] + output["completion"]]
        assert history == record["trajectory"]
    if spec == "oracle":
        assert all(o["reward"] == SETTINGS["objectives"] for o in outputs)


@pytest.mark.parametrize("context", ["memory", "full"])
def test_prompts_are_the_envs_view(context: str) -> None:
    """Each prompt the model server receives is the env's observation, in order; the memory view's
    prompts drop what the last prompt held (verifiers' non-linear case)."""
    kwargs, seeds = {**SETTINGS, "context": context}, range(3)
    agent = make_agent("oracle")
    env = vf.load_environment("memsearchqa", episodes=len(seeds), **kwargs)
    with policy_server(agent, kwargs, seeds) as (client, policy):
        evaluate(env, client)
    local = MemSearchQAEnv(**kwargs)
    extends = []
    for seed in seeds:
        obs, info = local.reset(seed=seed)
        prompts = policy.prompts[obs[1]["content"]]
        for prompt in prompts:
            assert prompt == obs
            previous = obs
            obs, _, _, _, info = local.step(agent.act(obs, info))
            extends.append(obs[: len(previous)] == previous)
        assert len(prompts) == info["n_turns"]
    assert all(extends) == (context == "full")


def test_verifiers_turn_budget() -> None:
    """verifiers' own turn budget (``max_turns``, below the env's) stops a rollout after generating its
    last turn: that turn is played, as verifiers scores a final completion, and an episode still open
    then ends unanswered (score 0) with the env's end-of-episode metrics."""
    [(_, record)] = play(make_agent("oracle"), [MemSearchQAEnv(**SETTINGS)], [0])
    for budget, score in ((record["n_turns"] - 1, 0.0), (record["n_turns"], record["score"])):
        env = vf.load_environment("memsearchqa", episodes=1, **SETTINGS)
        env.max_turns = budget
        with policy_server(make_agent("oracle"), SETTINGS, range(1)) as (client, _):
            [output] = evaluate(env, client)
        assert output["stop_condition"] == "max_turns_reached" and output["reward"] == score
        assert output["metrics"]["num_turns"] == budget and output["metrics"]["format_ok"] == float(score > 0)
        assert len(output["completion"]) == 2 * budget - (score > 0)  # each turn and its reply; none to the answer


def test_a_failing_search_server_is_a_rollout_error() -> None:
    """A retriever failure marks that rollout errored (retryable ``vf.InfraError``); the evaluation ends."""
    kwargs = {**SETTINGS, "retriever": "http://127.0.0.1:9/retrieve", "retriever_options": {"attempts": 1}}
    env = vf.load_environment("memsearchqa", episodes=2, **kwargs)
    with policy_server(make_agent("oracle"), SETTINGS, range(2)) as (client, _):
        outputs = evaluate(env, client)
    for output in outputs:
        assert output["stop_condition"] == "has_error" and output["reward"] == 0.0
        assert "127.0.0.1:9" in str(output["error"])


@pytest.mark.parametrize("context", ["memory", "full"])
def test_non_ascii_and_large_turns(context: str) -> None:
    """Turns of non-ASCII text and a 300,000-character memory go through verifiers and the stand-in server."""

    class Loud(Agent):
        def act(self, observation: list[dict[str, str]], info: dict[str, Any]) -> str:
            last = [m["content"] for m in observation if m["role"] == "assistant"][-1:]
            turn = 0 if not last else 1 if "記記" in last[0] else 2  # the memory view shows one turn
            mem = "日本 é \u2028 🙂 " + "記" * 300_000 if turn == 0 else "短い"
            action = "answer" if turn == 2 else "search"
            return f"<mem>{mem}</mem><think>考え</think><{action}>Momo 日本</{action}>"

    kwargs = {**SETTINGS, "context": context}
    env = vf.load_environment("memsearchqa", episodes=1, **kwargs)
    with policy_server(Loud(), kwargs, range(1)) as (client, policy):
        [output] = evaluate(env, client)
    [runner] = [record for _, record in play(Loud(), [MemSearchQAEnv(**kwargs)], [0])]
    assert output["error"] is None and output["reward"] == runner["score"]
    assert output["metrics"]["total_chars"] == runner["total_chars"] > 600_000
    [prompts] = policy.prompts.values()
    assert len(prompts) == 3 and any("記" * 300_000 in m["content"] for m in prompts[1])


def test_a_lone_surrogate_from_the_model_fails_only_its_rollout() -> None:
    """A reply holding a lone surrogate (``\\udc3a`` in its JSON) is refused by verifiers' client as a model
    error: that rollout ends errored with score 0, and the evaluation completes."""

    class Broken(Agent):
        def act(self, observation: list[dict[str, str]], info: dict[str, Any]) -> str:
            return "<mem>x\udc3a</mem><think>t</think><search>Momo \udc3a</search>"

    env = vf.load_environment("memsearchqa", episodes=2, **SETTINGS)
    with policy_server(Broken(), SETTINGS, range(2)) as (client, _):
        outputs = evaluate(env, client)
    for output in outputs:
        assert output["stop_condition"] == "has_error" and output["reward"] == 0.0
        assert "surrogate" in str(output["error"])


def test_bad_arguments_are_named() -> None:
    with pytest.raises(RuntimeError, match="window:K needs a positive integer K .* got 'window'"):
        vf.load_environment("memsearchqa", context="window")
    with pytest.raises(RuntimeError, match="episodes must be at least 1"):
        vf.load_environment("memsearchqa", episodes=0)


def test_the_documented_snippet() -> None:
    """docs/trainers.md's verifiers snippet, run against the stand-in server (in place of the documented
    URL) with the oracle behind it."""
    [block] = [b for b in code_blocks("docs/trainers.md", lang="python") if b.heading == "verifiers"]
    assert block.tested_by == "tests/on_verifiers/test_verifiers_env.py::test_the_documented_snippet"
    documented = "http://127.0.0.1:8000/v1"
    assert documented in block.text
    settings = {"context": "memory", "objectives": 2}  # the snippet's, for the policy's look-up of objectives
    namespace: dict[str, Any] = {}
    with policy_server(make_agent("oracle"), settings, range(20)) as (client, _):
        exec(block.text.replace(documented, client.api_base_url), namespace)
    assert len(namespace["results"]["outputs"]) == 20
    assert namespace["results"]["metadata"]["avg_reward"] == 2.0
