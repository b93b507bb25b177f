"""Held-out evaluation of a policy backend on fixed questions: greedy, and sampled at the rollout temperature.

RL optimises the sampled policy: at 10 objectives the warm-up's rollouts at temperature 1 score 3-5 of
10 answers against 6.6 greedy, and that gap is where the group signal lives. So a policy is measured
both ways, on the same questions: greedy F1 (one episode per question) and sampled F1 (``samples``
episodes per question at the rollout temperature, averaged per question). Questions are the unit of
every interval and of every paired difference (tables: agents.statistics).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from agents.backends.base import PolicyBackend
from agents.summariser import make_strategy
from algorithms.rollout import collect_rollouts
from mempo_env.context import ContextStrategy
from mempo_env.env import MemSearchQAEnv
from mempo_env.retrieval import make_retriever
from mempo_env.types import QATask


def evaluate_policy(backend: PolicyBackend, task: QATask, *, episodes: int = 200, objectives: int = 2,
                    context: str | ContextStrategy = "memory", search: str = "retriever", max_turns: int = 16,
                    max_new_tokens: int = 96, seed: int = 12345, temperature: float = 0.0, samples: int = 1
                    ) -> list[dict[str, Any]]:
    """The final ``info`` of ``samples`` episodes on each of ``episodes`` questions (question ``q``'s are
    ``[q * samples, (q + 1) * samples)``), greedy at temperature 0, else sampled from a stream fixed by
    ``seed``. The questions depend only on ``seed`` (and the first ``n`` are the same for any
    ``episodes >= n``), so policies evaluated with the same seed answer the same questions. ``search``: the
    environment's (``"oracle"``: every search shows the next hop's gold document)."""
    rng = np.random.default_rng(seed)
    groups = [rng.choice(len(task.questions), objectives, replace=False).tolist() for _ in range(episodes)]
    retriever, strategy = make_retriever(None, task.corpus), make_strategy(context)  # one each for every env
    envs = [MemSearchQAEnv(task, retriever=retriever, search=search, objectives=objectives, context=strategy,
                           max_turns=max_turns, tokenizer=backend.tokenizer) for _ in range(episodes * samples)]
    rollouts = collect_rollouts(backend, envs, groups, max_new_tokens=max_new_tokens, temperature=temperature,
                                seed=seed if temperature else None)
    return [r.info for r in rollouts]


def greedy_and_sampled(backend: PolicyBackend, task: QATask, *, episodes: int, samples: int, temperature: float,
                       **settings: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Both evaluations on the same ``episodes`` questions: one greedy episode each, and ``samples`` at
    ``temperature`` (``settings``: ``evaluate_policy``'s)."""
    return (evaluate_policy(backend, task, episodes=episodes, **settings),
            evaluate_policy(backend, task, episodes=episodes, temperature=temperature, samples=samples, **settings))


def per_question(infos: Sequence[dict[str, Any]], samples: int, metric: str = "f1") -> list[float | None]:
    """``metric`` of each question, averaged over its ``samples`` episodes (``evaluate_policy``'s order).
    A recall (``episode_memory_recall``) is ``None`` in an episode that found no evidence: averaged over
    the episodes that found some, ``None`` for a question where none did."""
    values = [i[metric] for i in infos]
    means = []
    for q in range(0, len(values), samples):
        found = [float(v) for v in values[q : q + samples] if v is not None]
        means.append(float(np.mean(found)) if found else None)
    return means


def defined(values: Sequence[float | None]) -> list[float]:
    """The values that are not ``None`` (the questions where a recall is defined)."""
    return [v for v in values if v is not None]
