"""The hostile-action soak (benchmarks/hostile.py) through the verifiers environment and verifiers' own
evaluation loop: a stand-in model server replies with hostile turns, and every prompt verifiers sends
it must be inside the environment's observation space, every rollout must end with the environment's
own verdict (or, for a reply verifiers' client refuses, its model error). ``MEMPO_SOAK_EPISODES``
sets the size (default 40 episodes a view, about 150 actions; the benchmark size, about 100,000
actions: ``MEMPO_SOAK_EPISODES=25000``)."""

from __future__ import annotations

import os
import threading
from typing import Any

import pytest

vf = pytest.importorskip("verifiers")

from verifiers_helpers import evaluate, policy_server

from agents import Agent
from benchmarks.hostile import SURROGATES, hostile_actions
from mempo_env.spaces import ChatMessages

EPISODES = int(os.environ.get("MEMPO_SOAK_EPISODES", 40))
SETTINGS = {"max_turns": 6}  # short episodes, as in benchmarks/soak.py
# replies verifiers' own client refuses: JSON with a lone surrogate (ModelError), an empty one
MODEL_ERRORS = ("ModelError", "EmptyModelResponseError")


class Hostile(Agent):
    """The next hostile action, whatever the prompt (rollouts ask from several threads); keeps each one."""

    def __init__(self, seed: int) -> None:
        self.actions, self.lock, self.sent = hostile_actions(seed), threading.Lock(), []

    def act(self, observation: list[dict[str, str]], info: dict[str, Any]) -> str:
        with self.lock:
            action = next(self.actions)
            self.sent.append(action)
            return action


@pytest.mark.parametrize("context", ["memory", "full"])
def test_hostile_turns_through_verifiers(context: str) -> None:
    kwargs, space = {**SETTINGS, "context": context}, ChatMessages()
    env = vf.load_environment("memsearchqa", episodes=EPISODES, **kwargs)
    agent = Hostile(seed=1)
    with policy_server(agent, kwargs, range(EPISODES)) as (client, policy):
        outputs = evaluate(env, client, max_concurrent=32)  # as a served model would be queried
    prompts = [p for per_question in policy.prompts.values() for p in per_question]
    assert len(prompts) == len(agent.sent) >= EPISODES
    outside = [i for i, p in enumerate(prompts) if not space.contains(p)]
    assert not outside, f"{len(outside)} prompts outside {space}"
    assert max(len(space.to_bytes(p)) for p in prompts) > 500_000  # the 600 KB turns reached a prompt
    assert len(outputs) == EPISODES
    for output in outputs:
        if output["error"] is not None:  # verifiers refuses a reply with a lone surrogate, or an empty one
            assert output["error"]["error"] in MODEL_ERRORS, output["error"]
            assert output["reward"] == 0.0
        else:
            assert output["stop_condition"] == "has_final_env_response"
            assert output["metrics"]["num_turns"] <= SETTINGS["max_turns"]
            assert output["reward"] == output["metrics"]["score"]
    refused = sum(o["error"] is not None for o in outputs)
    print(f"verifiers soak, {context} view: {len(agent.sent)} hostile turns in {EPISODES} episodes, {refused} refused "
          f"by verifiers' client, largest prompt {max(len(space.to_bytes(p)) for p in prompts)} bytes, 0 outside")
    assert 0 < refused < EPISODES  # the seeded mix has replies with and without lone surrogates
    assert any(any(s in a for s in SURROGATES) for a in agent.sent)
