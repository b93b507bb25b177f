"""Held-out evaluation of a policy backend: greedy episodes, EM, F1 and token costs with 95% CIs."""

from __future__ import annotations

from typing import Any

import numpy as np

from agents.backends.base import PolicyBackend
from algorithms.rollout import collect_rollouts
from benchmarks.summary import mean_ci
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


def summarize(infos: list[dict[str, Any]]) -> dict[str, tuple[float, float]]:
    """Mean and 95% half-width of EM, F1 (in %), total tokens (TT) and peak tokens (PT)."""
    return {
        "em": mean_ci([100 * i["em"] for i in infos]),
        "f1": mean_ci([100 * i["f1"] for i in infos]),
        "format_ok": mean_ci([100 * i["format_ok"] for i in infos]),
        "total_tokens": mean_ci([i["total_tokens"] for i in infos]),
        "peak_tokens": mean_ci([i["peak_tokens"] for i in infos]),
    }


def table(rows: dict[str, dict[str, tuple[float, float]]]) -> str:
    """A markdown table, one row per named policy."""
    cols = ["em", "f1", "format_ok", "total_tokens", "peak_tokens"]
    lines = ["| policy | EM % | F1 % | format ok % | total tokens | peak tokens |", "|---" * 6 + "|"]
    for name, stats in rows.items():
        lines.append("| " + " | ".join([name] + [f"{stats[c][0]:.1f} ± {stats[c][1]:.1f}" for c in cols]) + " |")
    return "\n".join(lines)
