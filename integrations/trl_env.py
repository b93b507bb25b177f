"""MemSearchQA-v0 for TRL's ``GRPOTrainer(environment_factory=...)`` (TRL 1.16), full-context view.

TRL drives an environment through tool calls: it renders the prompt with the tokenizer's chat
template (and the tools' JSON schemas), generates, parses the reply with the tokenizer's response
parser (``tokenizer.parse_response``, set by ``tokenizer.response_template``), calls the public
method of the environment that each tool call names, appends the result as a ``tool`` message and
generates again, until a reply calls no tool (``trl/trainer/grpo_trainer.py``, ``_tool_call_loop``).
Every turn is glued to the same token sequence, so only the full-context view fits this loop.

The project's policies do not write JSON tool calls: a turn is ``<mem>…</mem><think>…</think>`` and
one action. So the protocol itself is declared as the tokenizer's tool-call format
(``use_protocol_templates``): a turn whose action is ``<search>`` or ``<access>`` parses as a call of
the tool of that name with the whole turn as its one argument (the environment judges the whole turn:
memory, thought and format, not only the query), and a reply with neither is the rollout's last turn,
the answer, which ``memsearchqa_reward`` gives the environment to score. The chat template renders
such a call back as the turn itself and a ``tool`` message as the environment's ``user`` reply, so the
token sequence TRL trains on is, turn for turn, the full view's ChatML rendering.
"""

from __future__ import annotations

from collections.abc import Sequence
from statistics import fmean
from typing import Any

import gymnasium as gym

import mempo_env  # noqa: F401  (registers MemSearchQA-v0)

# ChatML, the tiny policy's template (algorithms.tiny_policy.CHATML), rendering plain messages exactly as it does,
# plus what TRL's trainers need: a protocol tool call (its one argument, ``turn``) rendered as that turn, a ``tool``
# message as the user message the environment replies with, any other tool call as JSON (TRL checks that a template
# renders a generic one: ``supports_tool_calling``), and ``{% generation %}`` markers around each assistant turn and
# its end token, which ``SFTConfig(assistant_only_loss=True)`` trains on a conversation.
PROTOCOL_CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{%- set role = 'user' if message['role'] == 'tool' else message['role'] -%}"
    "{{- '<|im_start|>' + role + '\\n' -}}"
    "{%- if role == 'assistant' -%}{%- generation -%}"
    "{{- message['content'] or '' -}}"
    "{%- for call in message['tool_calls'] or [] -%}"
    "{%- set arguments = call['function']['arguments'] -%}"
    "{%- if arguments is mapping and arguments | list == ['turn'] -%}{{- arguments['turn'] -}}"
    "{%- else -%}{{- '<tool_call>' + call['function'] | tojson + '</tool_call>' -}}{%- endif -%}"
    "{%- endfor -%}"
    "{{- '<|im_end|>' -}}"
    "{%- endgeneration -%}{%- else -%}{{- message['content'] + '<|im_end|>' -}}{%- endif -%}"
    "{{- '\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)

# transformers' response template (>= 5.13): a reply that names <search> or <access> before its end is one
# tool call of that name whose argument ``turn`` is the whole reply, verbatim; any other reply is content.
PROTOCOL_RESPONSE_TEMPLATE = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|im_start|>assistant\n",
    "fields": {
        "tool_calls": {
            "open_pattern": r"\A(?=(?:(?!<\|im_end\|>).)*?<(?P<name>search|access)>)",
            "close_pattern": r"(?=<\|im_end\|>)",
            "content": "text",
            "content_args": {"strip": False},
            "repeats": True,
            "transform": {"type": "function", "function": {"name": "{name}", "arguments": {"turn": "{content}"}}},
        },
        "content": {"close_pattern": r"<\|im_end\|>", "content": "text", "content_args": {"strip": False}},
    },
}


def use_protocol_templates(tokenizer: Any) -> Any:
    """``tokenizer`` (a ChatML one: the tiny policy's, Qwen's) set for TRL's trainers: the turn protocol
    read and rendered as tool calls (see the module docstring), and assistant turns marked for
    ``assistant_only_loss``. Returned for chaining."""
    if tokenizer.eos_token != "<|im_end|>":
        raise ValueError(f"the protocol templates are written for ChatML, whose turns end with <|im_end|>; this "
                         f"tokenizer ends them with {tokenizer.eos_token!r}")
    tokenizer.chat_template = PROTOCOL_CHAT_TEMPLATE
    tokenizer.response_template = PROTOCOL_RESPONSE_TEMPLATE
    return tokenizer


class MemSearchQAToolEnv:
    """One MemSearchQA-v0 episode at a time for ``environment_factory``; ``env_kwargs`` go to ``gym.make``
    (the view is the full context). Rows come from ``integrations.datasets_export.prompt_dataset`` of an env made
    with the same arguments: ``reset`` starts the row's episode and checks that its prompt is the row's."""

    def __init__(self, **env_kwargs: Any) -> None:
        if env_kwargs.get("context", "full") != "full":
            raise ValueError("TRL's GRPOTrainer glues every turn to one token sequence, so it trains the full-context "
                             "view only; the memory view's prompt is rewritten every turn (docs/trainers.md, TRL)")
        self.env = gym.make("MemSearchQA-v0", **{**env_kwargs, "context": "full"})
        self.info: dict[str, Any] | None = None  # the episode's final info, once it is over

    def reset(self, index: Sequence[int] | None = None, prompt: list[dict[str, str]] | None = None,
              **row: Any) -> None:
        if index is None or prompt is None:
            raise ValueError("each row must say which episode to start: give GRPOTrainer the rows of "
                             "integrations.datasets_export.prompt_dataset(env) as train_dataset")
        obs, _ = self.env.reset(options={"index": list(index)})
        if obs != prompt:
            raise ValueError("the row's prompt is not this environment's first observation for its questions: "
                             "export the rows from an env made with the same dataset, prompt and objectives")
        self.info = None

    def search(self, turn: str) -> str:
        """Search the document collection.

        Args:
            turn: The whole assistant turn, `<mem>...</mem><think>...</think><search>query</search>`.
        """
        return self._step(turn)

    def access(self, turn: str) -> str:
        """Read one document whole.

        Args:
            turn: The whole assistant turn, `<mem>...</mem><think>...</think><access>title</access>`.
        """
        return self._step(turn)

    def _step(self, turn: str) -> str:
        """One turn; the environment's reply (a tool response, or the correction of an invalid turn)."""
        if self.info is not None:
            raise RuntimeError("the episode is over")  # TRL reports it as a failed tool call
        obs, _, terminated, truncated, info = self.env.step(turn)
        if terminated or truncated:
            self.info = info
        return obs[-1]["content"] if obs[-1]["role"] == "user" else ""

    def _finish(self, completion: list[dict[str, Any]]) -> dict[str, Any]:
        """The episode's final info. A rollout that ended on a reply without a tool call ends with it (the
        answer, scored by the environment); an episode still open after that ends unanswered (score 0)."""
        last = completion[-1] if completion else {}
        if self.info is None and last.get("role") == "assistant" and not last.get("tool_calls"):
            self._step(last.get("content") or "")
        if self.info is None:
            self.info = self.env.unwrapped.truncate()
        return self.info


def memsearchqa_reward(completions: list[list[dict[str, Any]]], environments: list[MemSearchQAToolEnv],
                       log_metric: Any = None, **_: Any) -> list[float]:
    """TRL reward function: each rollout's environment reward (the spec's score: exact matches, 0 unless
    the whole trajectory passes the format gate); its EM, F1, format verdict, whether it answered and its
    turns are logged as ``memsearchqa/...`` metrics."""
    infos = [env._finish(completion) for completion, env in zip(completions, environments, strict=True)]
    if log_metric is not None:
        for key in ("em", "f1", "format_ok", "n_turns"):
            log_metric(f"memsearchqa/{key}", fmean(float(info[key]) for info in infos))
        log_metric("memsearchqa/answered", fmean(info["answer"] is not None for info in infos))
    return [float(info["score"]) for info in infos]
