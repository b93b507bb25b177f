"""The contract between the environment and a context strategy: the episode so far (``History``), the work a
strategy does between turns (``ContextEvent``) and the strategy itself (``ContextStrategy``); see the package
docstring."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from mempo_env.views import Message, _head


@dataclass
class History:
    """The episode so far, as the environment hands it to a strategy (read it, do not change it)."""

    questions: list[str]
    messages: list[Message]
    """the whole history: [system,] the question message, then each turn's response and reply"""
    memo: dict[str, Any] = field(default_factory=dict)
    """the strategy's own per-episode values (empty at every reset)"""

    @property
    def head(self) -> list[Message]:
        """[System +] the question message: what every built-in prompt starts with."""
        return self.messages[: _head(self.messages)]

    @property
    def turns(self) -> list[list[Message]]:
        """The turns so far, each ``[response]`` or ``[response, reply]``."""
        starts = [i for i, m in enumerate(self.messages) if m["role"] == "assistant"]
        return [self.messages[a:b] for a, b in zip(starts, starts[1:] + [len(self.messages)])]


@dataclass(frozen=True)
class ContextEvent:
    """Work a strategy did between two turns: its kind, how it ended (``outcome``, with ``detail``)
    and what a model read and wrote for it, counted in the episode's cost like a policy turn."""

    kind: str
    outcome: str
    detail: str = ""
    read: list[Message] = field(default_factory=list)
    wrote: str = ""


class ContextStrategy(ABC):
    """Builds the next prompt from the episode so far; see the module docstring."""

    name: str = "custom"
    prefix: bool = False

    @abstractmethod
    def prompt(self, history: History) -> list[Message]: ...

    def after_turn(self, history: History) -> ContextEvent | None:
        """Work to do before the next prompt is built, after a turn that does not end the episode."""
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

