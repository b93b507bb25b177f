"""The hostile-action soak (benchmarks/experiments/soak.py) through the v1 taskset and verifiers' own evaluation: a
stand-in model server replies with hostile turns (malformed, empty, lone surrogates, megabytes), and every
prompt verifiers sends it must be inside the env's observation space, every rollout must end with the
env's own verdict (its score and metrics) with every reply the model sent reaching the env as sent, or
fail where verifiers' interception refuses a reply holding a lone surrogate (invalid JSON to it).
``MEMPO_SOAK_EPISODES`` sets the size (default 40 episodes a view, about 150 actions; the benchmark
size, about 100,000 actions: ``MEMPO_SOAK_EPISODES=25000``)."""

from __future__ import annotations

import os
import threading
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("verifiers.v1")

from verifiers_helpers import eval_config, evaluate, policy_server, turns

from agents import Agent
from benchmarks.experiments.soak import SURROGATES, hostile_actions
from mempo_env.spaces import ChatMessages

EPISODES = int(os.environ.get("MEMPO_SOAK_EPISODES", 40))
SETTINGS = {"max_turns": 6}  # short episodes, as in benchmarks/experiments/soak.py


class Hostile(Agent):
    """The next hostile action, whatever the prompt (rollouts ask from several threads); keeps each one."""

    def __init__(self, seed: int) -> None:
        self.actions, self.lock, self.sent = hostile_actions(seed), threading.Lock(), defaultdict(list)

    def act(self, observation: list[dict[str, str]], info: dict[str, Any]) -> str:
        with self.lock:
            action = next(self.actions)
            self.sent[observation[1]["content"]].append(action)  # by episode (its question)
            return action


def paired(text: str) -> str:
    """``text`` as a reply's JSON brings it: a high and a low surrogate in a row decode to one character."""
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "surrogatepass")


@pytest.mark.parametrize("context", ["memory", "full"])
def test_hostile_turns_through_verifiers(context: str, tmp_path: Path) -> None:
    kwargs, space = {**SETTINGS, "context": context}, ChatMessages()
    agent = Hostile(seed=1)
    with policy_server(agent, kwargs, range(EPISODES)) as (url, policy):
        config = eval_config(url, tmp_path, {**kwargs, "episodes": EPISODES}, max_concurrent=32)
        traces = evaluate(config)  # as a served model would be queried
    prompts = [p for per_question in policy.prompts.values() for p in per_question]
    sent = [a for actions in agent.sent.values() for a in actions]
    assert len(prompts) == len(sent) >= EPISODES
    outside = [i for i, p in enumerate(prompts) if not space.contains(p)]
    assert not outside, f"{len(outside)} prompts outside {space}"
    assert max(len(space.to_bytes(p)) for p in prompts) > 500_000  # the 600 KB turns reached a prompt
    assert len(traces) == EPISODES
    refused = 0
    for trace in traces:
        actions = agent.sent[trace.task.data.prompt[1].content]
        played = [reply for _, reply in turns(trace)]
        if trace.ok:
            assert trace.stop_condition == "episode_over" and trace.num_turns <= SETTINGS["max_turns"]
            assert trace.reward == trace.state.final["score"] and played == [paired(a) for a in actions]
        else:  # verifiers' interception refuses a reply holding a lone surrogate (invalid JSON to it)
            refused += 1
            assert [e.type for e in trace.errors] == ["ProviderError"], trace.errors
            assert "malformed upstream response" in trace.errors[-1].message
            assert any(s in paired(actions[-1]) for s in SURROGATES)
            assert played == [paired(a) for a in actions[:-1]] and trace.reward == 0.0
    print(f"verifiers soak, {context} view: {len(sent)} hostile turns in {EPISODES} episodes, {refused} refused "
          f"by verifiers, largest prompt {max(len(space.to_bytes(p)) for p in prompts)} bytes, 0 outside")
    assert 0 < refused < EPISODES  # the seeded mix has replies with and without lone surrogates
