"""The one interface every policy implements, scripted or model-backed."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

Messages = list[dict[str, str]]


class Agent(ABC):
    """Maps the environment's observation (chat messages) to one assistant response.

    ``info`` is the environment's latest ``info`` dict; model-backed agents ignore it, scripted ones
    read the episode's question records from ``info["objectives"]``. Agents keep no per-episode
    state: everything a turn needs is in the observation, as it must be under the memory view.
    """

    name: str = "agent"

    @abstractmethod
    def act(self, observation: Messages, info: dict[str, Any]) -> str: ...

    def act_batch(self, observations: list[Messages], infos: list[dict[str, Any]]) -> list[str]:
        """One response per live episode; engines override this to generate in one batch."""
        return [self.act(o, i) for o, i in zip(observations, infos)]
