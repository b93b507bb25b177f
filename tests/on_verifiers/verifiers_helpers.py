"""A stand-in OpenAI-compatible server with a scripted policy behind it, and verifiers' own v1 evaluation
(``vf-eval``'s runner) of the ``memsearchqa`` taskset against it, for tests/on_verifiers."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fake_server import serve
from verifiers.v1 import Episode, Trace
from verifiers.v1.cli.eval.runner import run_eval
from verifiers.v1.configs.cli.eval import EvalConfig

from agents import Agent
from mempo_env import MemSearchQAEnv

Messages = list[dict[str, str]]


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
        self.prompts: dict[str, list[Messages]] = defaultdict(list)

    def __call__(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        messages = [{"role": m["role"], "content": m["content"]} for m in body["messages"]]
        self.prompts[messages[1]["content"]].append(messages)
        text = self.agent.act(messages, {"objectives": self.objectives[messages[1]["content"]]})
        return 200, {"id": "stand-in", "object": "chat.completion", "created": 0, "model": body["model"],
                     "choices": [{"index": 0, "finish_reason": "stop",
                                  "message": {"role": "assistant", "content": text}}]}


@contextmanager
def policy_server(agent: Agent, env_kwargs: dict[str, Any], seeds: range) -> Iterator[tuple[str, Policy]]:
    """(the base URL of a stand-in server playing ``agent``, its policy)."""
    policy = Policy(agent, env_kwargs, seeds)
    with serve(policy) as (url, _):
        yield f"{url}/v1", policy


def eval_config(base_url: str, out: Path, taskset: dict[str, Any], **run: Any) -> EvalConfig:
    """The config ``vf-eval memsearchqa`` parses, for the stand-in server at ``base_url``: no dashboard,
    no upload, results under ``out``; ``taskset`` holds the taskset's fields, ``run`` any other field
    (``env`` settings such as ``{"agent": {"max_turns": 3}}``, ``max_concurrent``, ...)."""
    env = {**run.pop("env", {}), "taskset": {"id": "memsearchqa", **taskset}}
    return EvalConfig.model_validate({
        "env": env, "model": "scripted", "rich": None, "push": False, "output_dir": str(out),
        "client": {"base_url": base_url, "api_key_var": "MEMPO_TEST_NO_KEY"}, **run})


def evaluate(config: EvalConfig) -> list[Trace]:
    """verifiers' own evaluation of ``config``; one trace per task, in task order."""
    episodes: list[Episode] = asyncio.run(run_eval(config))
    traces = [trace for episode in episodes for trace in episode.traces]
    assert len(traces) == len(episodes)
    return sorted(traces, key=lambda trace: trace.task.data.idx)


def turns(trace: Trace) -> list[tuple[Messages, str]]:
    """(prompt, reply) of each model turn, in order, read off the trace's branches (the training samples):
    each sampled assistant message and the messages before it on its branch."""
    seen: dict[int, tuple[Messages, str]] = {}
    for branch in trace.branches:
        for i, node in enumerate(branch.nodes):
            if node.sampled and id(node) not in seen:
                prompt = [{"role": n.message.role, "content": n.message.content} for n in branch.nodes[:i]]
                seen[id(node)] = (prompt, node.message.content or "")
    order = {id(node): i for i, node in enumerate(trace.nodes)}
    return [seen[key] for key in sorted(seen, key=order.__getitem__)]
