"""Gymnasium spaces that tell the truth about a text environment: free text in, chat messages out."""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.spaces import Space

# Sampled text mixes protocol tags with plain and non-ASCII characters, so random actions probe
# the parser instead of being trivially invalid.
_PIECES = ("<mem>", "</mem>", "<think>", "</think>", "<search>", "</search>", "<answer>", "</answer>",
           "<access>", "</access>", "<tool_response>", " ", "a", "b", "Paris", ";", "\n", "é", "日")


def _random_text(rng: np.random.Generator, max_pieces: int) -> str:
    return "".join(rng.choice(_PIECES) for _ in range(int(rng.integers(0, max_pieces + 1))))


class FreeText(Space[str]):
    """Any Python string of at most ``max_length`` characters (an LLM's raw response)."""

    def __init__(self, max_length: int = 1 << 20, seed: int | np.random.Generator | None = None):
        self.max_length = max_length
        super().__init__(seed=seed)

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        return _random_text(self.np_random, 32)[: self.max_length]

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"FreeText(max_length={self.max_length})"

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, FreeText) and other.max_length == self.max_length


class ChatMessages(Space[list]):
    """A list of ``{"role": ..., "content": str}`` chat messages, roles from ``roles``."""

    def __init__(self, roles: tuple[str, ...] = ("system", "user", "assistant"), max_messages: int | None = None,
                 seed: int | np.random.Generator | None = None):
        self.roles = roles
        self.max_messages = max_messages
        super().__init__(seed=seed)

    def sample(self, mask: Any = None, probability: Any = None) -> list[dict[str, str]]:
        n = int(self.np_random.integers(1, min(self.max_messages or 6, 6) + 1))
        return [{"role": str(self.np_random.choice(self.roles)), "content": _random_text(self.np_random, 16)}
                for _ in range(n)]

    def contains(self, x: Any) -> bool:
        return (
            isinstance(x, list)
            and (self.max_messages is None or len(x) <= self.max_messages)
            and all(
                isinstance(m, dict) and m.keys() == {"role", "content"}
                and m["role"] in self.roles and isinstance(m["content"], str)
                for m in x
            )
        )

    def __repr__(self) -> str:
        return f"ChatMessages(roles={self.roles}, max_messages={self.max_messages})"

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, ChatMessages) and (other.roles, other.max_messages) == (self.roles, self.max_messages)
