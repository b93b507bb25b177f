"""The built-in context strategies (``full``, ``memory``, ``window:K`` and the summaries of ``summary``), the
registry of names and ``make_strategy``, which builds a strategy from a name such as ``"window:4"``."""

from __future__ import annotations

from collections.abc import Callable

from mempo_env.context.base import ContextStrategy, History
from mempo_env.context.summary import SUMMARIES, SummaryStrategy
from mempo_env.views import Message, full_view, last_turns, prepare_prompt


class FullContext(ContextStrategy):
    """Everything so far; every prompt is a prefix of the next."""

    name, prefix = "full", True

    def prompt(self, history: History) -> list[Message]:
        return full_view(history.messages)


class MemoryContext(ContextStrategy):
    """The memory-forcing view (``prepare_prompt``)."""

    name = "memory"

    def prompt(self, history: History) -> list[Message]:
        return prepare_prompt(history.messages)


class WindowContext(ContextStrategy):
    """The last ``k`` turns verbatim (verl-agent's ``history_length``); older ones are dropped."""

    def __init__(self, k: int):
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"window:K needs a positive integer K (the turns kept), got {k!r}")
        self.k, self.name = k, f"window:{k}"

    def prompt(self, history: History) -> list[Message]:
        return last_turns(history.messages, self.k)


def _no_argument(strategy: type[ContextStrategy]) -> Callable[[str | None], ContextStrategy]:
    def factory(arg: str | None) -> ContextStrategy:
        if arg is not None:
            raise ValueError(f"context strategy {strategy.name!r} takes no argument, got {strategy.name}:{arg}")
        return strategy()
    return factory


def _window(arg: str | None) -> ContextStrategy:
    if arg is None or not arg.isdigit():
        given = "window" if arg is None else f"window:{arg}"
        raise ValueError(f"window:K needs a positive integer K (the turns kept), got {given!r}")
    return WindowContext(int(arg))


def _summary(name: str, keep: int) -> Callable[[str | None], ContextStrategy]:
    def factory(arg: str | None) -> ContextStrategy:
        return SummaryStrategy.from_spec(arg, keep=keep, name=name)
    return factory


STRATEGIES: dict[str, Callable[[str | None], ContextStrategy]] = {
    "memory": _no_argument(MemoryContext), "full": _no_argument(FullContext), "window": _window,
    **{name: _summary(name, keep) for name, keep in SUMMARIES.items()},
}
"""name -> factory, called with the text after ``name:`` (``None`` without a colon)."""


def register_strategy(name: str, factory: Callable[[str | None], ContextStrategy], *, replace: bool = False) -> None:
    """Make ``make_strategy(name)`` (and ``name:ARG``, the factory gets ``ARG``) build ``factory(arg)``,
    so that ``gym.make("MemSearchQA-v0", context=name)`` and the runners' ``--context`` know it."""
    if not isinstance(name, str) or not name or ":" in name or "," in name:
        raise ValueError(f"a strategy name is a non-empty string without ':' or ',', got {name!r}")
    if not callable(factory):
        raise TypeError(f"the factory of strategy {name!r} must be callable, not {factory!r}")
    if name in STRATEGIES and not replace:
        raise ValueError(f"context strategy {name!r} exists; pass replace=True to replace it")
    STRATEGIES[name] = factory


def make_strategy(spec: str | ContextStrategy) -> ContextStrategy:
    """A strategy from a name (``memory``, ``full``, ``window:K``, ``summary[:CHARS[:SUMMARISER]]``,
    ``summary+keep1[:CHARS[:SUMMARISER]]`` or a registered one), or ``spec`` itself when it is a
    ``ContextStrategy``. Errors name the bad part. The summaries' ``SUMMARISER`` is ``extractive`` here: a
    model (an agent spec) is built by the agents layer, ``agents.summariser.make_strategy``."""
    if isinstance(spec, ContextStrategy):
        strategy = spec
    elif isinstance(spec, str):
        name, colon, arg = spec.partition(":")
        if name not in STRATEGIES:
            raise ValueError(f"unknown context strategy {spec!r}; known: {', '.join(STRATEGIES)} "
                             "(window and summary take arguments: window:4, summary:8000)")
        strategy = STRATEGIES[name](arg if colon else None)
        if not isinstance(strategy, ContextStrategy):
            raise TypeError(f"the factory of context strategy {name!r} returned {strategy!r}, not a ContextStrategy")
    else:
        raise TypeError(f"context must be a strategy name or a ContextStrategy, not {type(spec).__name__}")
    if not isinstance(strategy.name, str) or not strategy.name or not isinstance(strategy.prefix, bool):
        raise TypeError(f"{type(strategy).__name__}: a strategy needs a non-empty str name and a bool prefix, "
                        f"got name={strategy.name!r}, prefix={strategy.prefix!r}")
    return strategy
