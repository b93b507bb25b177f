"""Context strategies: how the environment builds the policy's next prompt from the episode so far.

The spec's two views (section 3) are two strategies: ``full`` (the whole history; ReAct, Search-R1)
and ``memory`` (``prepare_prompt``: [system +] question + the previous turn; MemPO, MEM1). Built in
besides: ``window:K``, the last K turns verbatim, ``summary``, ReSum's compression
(``mempo_env.context.summary``), and ``summary+keep1``, which also keeps the latest turn verbatim (so the
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

The package: ``base`` (``History``, ``ContextEvent``, ``ContextStrategy``), ``strategies`` (the built-ins, their
registry and ``make_strategy``) and ``summary`` (``SummaryStrategy``, whose summariser is passed in: a model
summariser is built by the agents layer, ``agents.summariser``). Each imports only those before it.
"""

from mempo_env.context.base import ContextEvent, ContextStrategy, History
from mempo_env.context.strategies import (
    STRATEGIES,
    FullContext,
    MemoryContext,
    WindowContext,
    make_strategy,
    register_strategy,
)
from mempo_env.context.summary import ExtractiveSummariser, Summariser, SummaryRequest, SummaryStrategy

__all__ = [
    "STRATEGIES", "ContextEvent", "ContextStrategy", "ExtractiveSummariser", "FullContext", "History", "MemoryContext",
    "Summariser", "SummaryRequest", "SummaryStrategy", "WindowContext", "make_strategy", "register_strategy",
]
