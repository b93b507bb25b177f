"""Many concurrent episodes of one configuration, for servers that give each client its own episode
(the OpenEnv server, the verifiers environment)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from mempo_env.env import MemSearchQAEnv

# The arguments that build the question set and the search index, which episodes only read.
_DATA_ARGS = ("dataset", "corpus", "split", "task_seed", "retriever", "retriever_options", "cache_dir")


def env_factory(**env_kwargs: Any) -> Callable[[], MemSearchQAEnv]:
    """A maker of ``MemSearchQAEnv(**env_kwargs)`` instances. The arguments are checked here, by building
    the first environment (so a bad one fails before anything is served); every environment made then
    shares its question set and search index, loaded once, and has its own episode state."""
    first = MemSearchQAEnv(**env_kwargs)
    rest = {key: value for key, value in env_kwargs.items() if key not in _DATA_ARGS}
    return functools.partial(MemSearchQAEnv, first.task, retriever=first.retriever, **rest)
