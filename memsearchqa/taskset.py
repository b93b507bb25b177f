"""MemSearchQA-v0 episodes as verifiers v1 tasks: one ``Task`` per episode seed, scored by the env.

Task ``e`` is the episode ``MemSearchQAEnv.reset(seed=seed + e)``, the one ``benchmarks.run`` plays with
the same seed; its prompt is that reset's first observation. The harness (``memsearchqa.harness``)
plays the episode and leaves its outcome in the rollout's ``EpisodeState``, which the task's hooks
read: the env's stop (``@vf.stop``), its score (``@vf.reward``) and its end-of-episode numbers
(``@vf.metric``).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import verifiers.v1 as vf
from pydantic import Field

from mempo_env import MemSearchQAEnv
from mempo_env.sessions import env_factory
from memsearchqa.search import SearchConfig, SearchToolset

METRICS = ("em", "f1", "format_ok", "n_searches", "total_chars", "peak_chars")


class MemSearchQAConfig(vf.TasksetConfig):
    """Which episodes (``episodes`` from reset seed ``seed`` on) of which env. The other fields are
    ``MemSearchQAEnv``'s keywords (docs/environment.md); ``options`` takes any further one (``topk``,
    ``obs_budget``, ``task_seed``, ``end_on_invalid``, ...); ``search`` places the search server."""

    episodes: int = Field(100, ge=1)
    seed: int = 0
    dataset: str | None = None
    split: str | None = None
    context: str = "memory"
    prompt: str = "train"
    objectives: int = 1
    max_turns: int = 16
    retriever: str | None = None
    retriever_options: dict[str, Any] = Field(default_factory=dict)
    options: dict[str, Any] = Field(default_factory=dict)
    search: SearchConfig = SearchConfig()

    @property
    def settings(self) -> dict[str, Any]:
        """The ``MemSearchQAEnv`` keywords."""
        fields = ("dataset", "split", "context", "prompt", "objectives", "max_turns", "retriever",
                  "retriever_options")
        return {**{name: getattr(self, name) for name in fields}, **self.options}


class MemSearchQAData(vf.TaskData):
    """One episode: its reset seed and the env keywords, which the harness rebuilds the env from."""

    seed: int
    settings: dict[str, Any]


class EpisodeState(vf.State):
    """A rollout's episode outcome: ``over`` once the env has ended it, ``final`` its end-of-episode
    numbers (the score, the metrics; set however the episode ended)."""

    over: bool = False
    final: dict[str, float] = Field(default_factory=dict)

    def end(self, info: Mapping[str, Any], *, by_env: bool) -> None:
        """Records the env's final ``info``; ``by_env``: the env ended the episode (not verifiers)."""
        self.over = by_env
        self.final = {name: float(value) for name, value in info.items()
                      if name in (*METRICS, "score", "n_turns", "total_tokens", "peak_tokens")}


class MemSearchQATask(vf.Task[MemSearchQAData, EpisodeState, vf.TaskConfig]):
    """The env's stop, reward and metrics over the episode the harness played."""

    @vf.stop
    def episode_over(self, trace: vf.Trace) -> bool:
        """Refuses the model call after the env ended the episode: the harness stops there."""
        return trace.state.over

    @vf.reward
    async def episode_score(self, trace: vf.Trace) -> float:
        """The env's reward: correct sub-answers, 0 unless the format gate passes."""
        return trace.state.final["score"]

    @vf.metric
    async def episode_metrics(self, trace: vf.Trace) -> dict[str, float]:
        """EM, F1, the format gate, searches and context costs (in tokens too with a tokenizer)."""
        final = trace.state.final
        return {name: value for name, value in final.items() if name not in ("score", "n_turns")}


class MemSearchQATaskset(vf.Taskset[MemSearchQATask, MemSearchQAConfig]):
    """``episodes`` tasks, reset seeds ``seed .. seed + episodes - 1``."""

    def load(self) -> Iterator[MemSearchQATask]:
        config, settings = self.config, self.config.settings
        env = episode_envs(settings)()
        for seed in range(config.seed, config.seed + config.episodes):
            observation, _ = env.reset(seed=seed)
            data = MemSearchQAData(name=f"memsearchqa#{seed}", prompt=observation, seed=seed, settings=settings)
            yield MemSearchQATask(data, config.task)

    @classmethod
    def toolsets(cls, config: MemSearchQAConfig) -> list[vf.Toolset]:
        return [SearchToolset(config.search.model_copy(update={"settings": config.settings}))]


def episode_envs(settings: Mapping[str, Any]) -> Callable[..., MemSearchQAEnv]:
    """``env_factory(**settings)``, one per process and settings: every env made shares the question set
    and the search index, loaded once."""
    return _factory(json.dumps(settings, sort_keys=True))


@functools.cache
def _factory(settings: str) -> Callable[..., MemSearchQAEnv]:
    return env_factory(**json.loads(settings))
