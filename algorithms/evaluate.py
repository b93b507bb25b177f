"""Held-out evaluation of a policy backend: greedy episodes on fixed questions (tables: benchmarks.summary)."""

from __future__ import annotations

from typing import Any

import numpy as np

from agents.backends.base import PolicyBackend
from algorithms.rollout import collect_rollouts
from mempo_env.env import MemSearchQAEnv
from mempo_env.retrieval import make_retriever
from mempo_env.types import QATask


def evaluate_policy(backend: PolicyBackend, task: QATask, *, episodes: int = 200, objectives: int = 2,
                    context: str = "memory", max_turns: int = 16, max_new_tokens: int = 96,
                    seed: int = 12345) -> list[dict[str, Any]]:
    """The final ``info`` of ``episodes`` greedy episodes. The questions depend only on ``seed``, so
    two policies evaluated with the same seed answer the same questions."""
    rng = np.random.default_rng(seed)
    groups = [rng.choice(len(task.questions), objectives, replace=False).tolist() for _ in range(episodes)]
    retriever = make_retriever(None, task.corpus)
    envs = [MemSearchQAEnv(task, retriever=retriever, objectives=objectives, context=context, max_turns=max_turns,
                           tokenizer=backend.tokenizer) for _ in range(episodes)]
    rollouts = collect_rollouts(backend, envs, groups, max_new_tokens=max_new_tokens, temperature=0.0)
    return [r.info for r in rollouts]
