"""Model summarisers for the ``summary`` context strategies (``mempo_env.context.summary``).

The environment takes its summariser as a callable and loads no model, so it imports no agent; this module
is where an agent spec becomes one: ``make_summariser("hf:DIR")``, or a whole strategy name such as
``make_strategy("summary:8000:hf:DIR")``, which the runners' ``--context`` and the learners' ``context`` go
through, so a model summariser is given there as before.
"""

from __future__ import annotations

from agents import make_agent
from agents.base import Agent
from mempo_env.context import ContextStrategy, ExtractiveSummariser, Summariser, SummaryRequest, SummaryStrategy
from mempo_env.context import make_strategy as make_env_strategy
from mempo_env.context.summary import SUMMARIES


class AgentSummariser:
    """An agent as a summariser: it reads ``SummaryRequest.messages`` (ReSum's chat prompt) as its
    observation and writes the summary; ``name`` labels the strategy (the spec it was built from)."""

    def __init__(self, agent: Agent, name: str):
        self.agent, self.name = agent, name

    def __call__(self, request: SummaryRequest) -> str:
        return self.agent.act(request.messages, {})


def make_summariser(spec: str | Agent) -> Summariser:
    """``"extractive"`` (the environment's own, no model), an agent spec of ``agents.make_agent``
    (``"hf:DIR"``, ``"openai:URL#MODEL"``, ...: a model loads here and a bad spec fails now) or an ``Agent``."""
    if spec == "extractive":
        return ExtractiveSummariser()
    if isinstance(spec, str):
        return AgentSummariser(make_agent(spec), spec)
    return AgentSummariser(spec, spec.name)


def make_strategy(spec: str | ContextStrategy) -> ContextStrategy:
    """``mempo_env.context.make_strategy``, where the summaries' ``SUMMARISER`` may also be an agent spec
    (``summary:8000:hf:DIR``, ``summary+keep1:4000:openai:URL#MODEL``), built by ``make_summariser``."""
    if isinstance(spec, str):
        name, colon, arg = spec.partition(":")
        if name in SUMMARIES and colon:
            return make_env_strategy(SummaryStrategy.from_spec(arg, keep=SUMMARIES[name], name=name,
                                                               build=make_summariser))
    return make_env_strategy(spec)
