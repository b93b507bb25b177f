"""Context strategies: how the environment builds the policy's next prompt from the episode so far.

The spec's two views (section 3) are two strategies: ``full`` (the whole history; ReAct, Search-R1)
and ``memory`` (``prepare_prompt``: [system +] question + the previous turn; MemPO, MEM1). Built in
besides: ``window:K``, the last K turns verbatim, ``summary``, ReSum's compression
(``mempo_env.summary``), and ``summary+keep1``, which also keeps the latest turn verbatim (so the
policy still reads its own last ``<mem>`` after a summary). A turn is one assistant response and the
environment's reply to it (a tool response or a corrective message; the final answer has none), so
``window:1`` is the memory view's prompt: what makes MemPO's view a strategy of its own is the
``<mem>`` the policy writes into it.

A strategy subclasses ``ContextStrategy``:

- ``name``: what runs, logs and ``env.context`` call it;
- ``prefix``: whether every prompt is a prefix of the next. Then a learner can train an episode as
  one growing sequence (``full``); otherwise it needs one sample per turn (every other built-in). The
  environment checks the claim at every turn;
- ``prompt(history)``: the next prompt, a function of the episode's state (``History``) and nothing
  else;
- ``after_turn(history)`` (optional): work between two turns, such as a summary, which keeps its
  per-episode values in ``history.memo`` and reports what a model read and wrote for it
  (``ContextEvent``): the environment adds that to the episode's cost and records the event in ``info``.

A strategy holds no per-episode state of its own, so one object serves any number of environments
(a summariser model is loaded once). ``make_strategy`` builds one from a name such as ``"window:4"``;
``register_strategy`` adds names.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mempo_env.views import Message, _head, full_view, last_turns, prepare_prompt


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
        from mempo_env.summary import SummaryStrategy  # its summariser may need the agents package

        return SummaryStrategy.from_spec(arg, keep=keep, name=name)
    return factory


STRATEGIES: dict[str, Callable[[str | None], ContextStrategy]] = {
    "memory": _no_argument(MemoryContext), "full": _no_argument(FullContext), "window": _window,
    "summary": _summary("summary", keep=0), "summary+keep1": _summary("summary+keep1", keep=1),
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
    ``ContextStrategy``. Errors name the bad part."""
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
