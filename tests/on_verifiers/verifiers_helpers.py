"""A stand-in OpenAI-compatible server with a scripted policy behind it, for tests that run the verifiers
environment (``memsearchqa``) through verifiers' own evaluation loop (tests/on_verifiers; reusable by a soak)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import verifiers as vf
from fake_server import serve

from agents import Agent
from mempo_env import MemSearchQAEnv


class Policy:
    """A scripted agent behind a chat-completions endpoint. The agent reads the gold objectives, which
    a chat request does not carry: they are looked up by the episode's question message. Every prompt
    received is kept, by question, in arrival order."""

    def __init__(self, agent: Agent, env_kwargs: dict[str, Any], seeds: range):
        self.agent = agent
        env = MemSearchQAEnv(**env_kwargs)
        self.objectives = {}
        for seed in seeds:
            obs, info = env.reset(seed=seed)
            self.objectives[obs[1]["content"]] = info["objectives"]
        self.prompts: dict[str, list[list[dict[str, str]]]] = defaultdict(list)

    def __call__(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        messages = [{"role": m["role"], "content": m["content"]} for m in body["messages"]]
        self.prompts[messages[1]["content"]].append(messages)
        text = self.agent.act(messages, {"objectives": self.objectives[messages[1]["content"]]})
        return 200, {"id": "stand-in", "object": "chat.completion", "created": 0, "model": body["model"],
                     "choices": [{"index": 0, "finish_reason": "stop",
                                  "message": {"role": "assistant", "content": text}}]}


@contextmanager
def policy_server(agent: Agent, env_kwargs: dict[str, Any], seeds: range) -> Iterator[tuple[Any, Policy]]:
    """(verifiers client config, policy) of a stand-in server playing ``agent``."""
    policy = Policy(agent, env_kwargs, seeds)
    with serve(policy) as (url, _):
        yield vf.ClientConfig(api_base_url=f"{url}/v1", api_key_var="MEMPO_TEST_NO_KEY", max_retries=0), policy


def evaluate(env: Any, client: Any, max_concurrent: int = -1) -> list[dict[str, Any]]:
    """verifiers' evaluation loop (``max_concurrent`` rollouts at a time; -1: all); the outputs in example order."""
    return env.evaluate_sync(client=client, model="scripted", max_concurrent=max_concurrent)["outputs"]
