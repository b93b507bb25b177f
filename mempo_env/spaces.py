"""Gymnasium spaces that tell the truth about a text environment: free text in, chat messages out.

Both register Gymnasium's shared-memory functions, so ``AsyncVectorEnv`` (and ``gym.make_vec(...,
vectorization_mode="async")``) works with its defaults: each environment gets a fixed slot of bytes
(``max_bytes``) holding its observation as UTF-8 (JSON for chat messages), and the batch read back
is a live view decoded on access, as Gymnasium's array views are.
"""

from __future__ import annotations

import json
import multiprocessing as mp
from collections.abc import Sequence
from ctypes import c_uint8
from types import ModuleType
from typing import Any

import numpy as np
from gymnasium.spaces import Space
from gymnasium.vector.utils import create_shared_memory, read_from_shared_memory, write_to_shared_memory

# Sampled text mixes protocol tags with plain and non-ASCII characters, so random actions probe
# the parser instead of being trivially invalid.
_PIECES = ("<mem>", "</mem>", "<think>", "</think>", "<search>", "</search>", "<answer>", "</answer>",
           "<access>", "</access>", "<tool_response>", " ", "a", "b", "Paris", ";", "\n", "é", "日")


def _random_text(rng: np.random.Generator, max_pieces: int) -> str:
    return "".join(rng.choice(_PIECES) for _ in range(int(rng.integers(0, max_pieces + 1))))


class FreeText(Space[str]):
    """Any Python string of at most ``max_length`` characters (an LLM's raw response), lone surrogates
    included: its bytes are UTF-8 with ``surrogatepass``, so every string in the space serialises."""

    def __init__(self, max_length: int = 1 << 20, seed: int | np.random.Generator | None = None):
        self.max_length = max_length
        self.max_bytes = 4 * max_length  # UTF-8 takes at most 4 bytes a character
        super().__init__(seed=seed)

    def to_bytes(self, x: str) -> bytes:
        return x.encode("utf-8", "surrogatepass")

    def from_bytes(self, data: bytes) -> str:
        return data.decode("utf-8", "surrogatepass")

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        return _random_text(self.np_random, 32)[: self.max_length]

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"FreeText(max_length={self.max_length})"

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, FreeText) and other.max_length == self.max_length


class ChatMessages(Space[list]):
    """A list of ``{"role": ..., "content": str}`` chat messages, roles from ``roles``, at most ``max_bytes``
    as UTF-8 JSON (the shared memory ``AsyncVectorEnv`` gives each environment's observation). Text UTF-8
    cannot encode (a lone surrogate) is outside the space: ``contains`` answers False for it."""

    def __init__(self, roles: tuple[str, ...] = ("system", "user", "assistant"), max_messages: int | None = None,
                 max_bytes: int = 1 << 20, seed: int | np.random.Generator | None = None):
        self.roles = roles
        self.max_messages = max_messages
        self.max_bytes = max_bytes
        super().__init__(seed=seed)

    def to_bytes(self, x: list) -> bytes:
        return json.dumps(x, ensure_ascii=False).encode()

    def from_bytes(self, data: bytes) -> list:
        return json.loads(data)

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
            and self._size(x) <= self.max_bytes
        )

    def _size(self, x: list) -> float:
        """Bytes of ``x`` as UTF-8 JSON; infinite when UTF-8 cannot encode it."""
        try:
            return len(self.to_bytes(x))
        except UnicodeEncodeError:
            return float("inf")

    def __repr__(self) -> str:
        return f"ChatMessages(roles={self.roles}, max_messages={self.max_messages}, max_bytes={self.max_bytes})"

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, ChatMessages) and (
            (other.roles, other.max_messages, other.max_bytes) == (self.roles, self.max_messages, self.max_bytes))


# ---- shared memory for AsyncVectorEnv --------------------------------------------------------
TextSpace = FreeText | ChatMessages
_LENGTH = 8  # bytes before each slot's payload: the payload's length


class SharedBatch(Sequence):
    """The batch in shared memory: item ``i`` is decoded from environment ``i``'s slot when read. A deep
    copy (what ``AsyncVectorEnv`` returns by default) is a plain tuple, like a synchronous batch."""

    def __init__(self, space: TextSpace, memory: Any, n: int):
        self.space, self.slots = space, np.frombuffer(memory.get_obj(), dtype=np.uint8).reshape(n, -1)

    def __len__(self) -> int:
        return len(self.slots)

    def __getitem__(self, i: int | slice) -> Any:
        if isinstance(i, slice):
            return tuple(self)[i]
        slot = self.slots[i]
        length = int.from_bytes(slot[:_LENGTH].tobytes(), "little")
        return self.space.from_bytes(slot[_LENGTH:_LENGTH + length].tobytes())

    def __deepcopy__(self, memo: dict) -> tuple:
        return tuple(self)


@create_shared_memory.register(FreeText)
@create_shared_memory.register(ChatMessages)
def _create_text_memory(space: TextSpace, n: int = 1, ctx: ModuleType = mp) -> Any:
    return ctx.Array(c_uint8, n * (_LENGTH + space.max_bytes))


@read_from_shared_memory.register(FreeText)
@read_from_shared_memory.register(ChatMessages)
def _read_text_memory(space: TextSpace, shared_memory: Any, n: int = 1) -> SharedBatch:
    return SharedBatch(space, shared_memory, n)


@write_to_shared_memory.register(FreeText)
@write_to_shared_memory.register(ChatMessages)
def _write_text_memory(space: TextSpace, index: int, value: Any, shared_memory: Any) -> None:
    data = space.to_bytes(value)
    if len(data) > space.max_bytes:
        raise ValueError(f"an observation of {len(data)} bytes does not fit the {space.max_bytes} bytes of shared "
                         "memory per env; vectorise with vector_kwargs={'shared_memory': False}")
    slot = np.frombuffer(shared_memory.get_obj(), dtype=np.uint8).reshape(-1, _LENGTH + space.max_bytes)[index]
    slot[:_LENGTH] = np.frombuffer(len(data).to_bytes(_LENGTH, "little"), dtype=np.uint8)
    slot[_LENGTH:_LENGTH + len(data)] = np.frombuffer(data, dtype=np.uint8)
