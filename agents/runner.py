"""Play an agent in the environment: episodes in lockstep, each finished one as the record the
episodes log keeps (``agents.episode_log``). The evaluation runner (``benchmarks.run``), the tiny
policy's build (``algorithms.tiny_policy``) and the trainers' datasets (``integrations``) play through it."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import gymnasium as gym

from agents.base import Agent

KEEP = ("answer", "score", "aligned_score", "em", "f1", "correct", "format_ok", "format_failed", "context_overflow",
        "n_turns", "n_searches", "total_chars", "peak_chars", "total_tokens", "peak_tokens", "context_events",
        "episode_memory_recall", "episode_context_recall", "memory_recall_turns", "evidence_items", "evidence_found",
        "memory_per_turn")


def episode_record(env: gym.Env, info: dict[str, Any]) -> dict[str, Any]:
    """What the log keeps of a finished episode: metrics, the questions and the whole trajectory."""
    record = {k: info[k] for k in KEEP if k in info}
    record["question_ids"] = [o["id"] for o in info["objectives"]]
    record["questions"] = [o["question"] for o in info["objectives"]]
    record["golden_answers"] = [o["answers"] for o in info["objectives"]]
    record["trajectory"] = env.unwrapped.messages
    return record


def play(agent: Agent, envs: Sequence[gym.Env], seeds: Sequence[int]) -> Iterator[tuple[int, dict[str, Any]]]:
    """Play one episode per seed, ``len(envs)`` at a time in lockstep (one ``act_batch`` call per
    turn); yield ``(index into seeds, record)`` as each episode finishes."""
    queue = list(enumerate(seeds))
    free, live = list(envs), []  # live: [index, env, observation, info]
    while queue or live:
        while queue and free:
            i, seed = queue.pop(0)
            env = free.pop()
            live.append([i, env, *env.reset(seed=seed)])
        actions = agent.act_batch([slot[2] for slot in live], [slot[3] for slot in live])
        still = []
        for (i, env, _, _), action in zip(live, actions):
            obs, _, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                free.append(env)
                yield i, episode_record(env, info)
            else:
                still.append([i, env, obs, info])
        live = still


def run_episode(env: gym.Env, agent: Agent, seed: int) -> dict[str, Any]:
    """One episode from ``env.reset(seed=seed)`` to its end."""
    return next(play(agent, [env], [seed]))[1]
