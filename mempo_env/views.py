"""The two context views of spec section 3 (the ``full`` and ``memory`` strategies of
``mempo_env.context``), and rendering a view for a tokenizer.

Messages are plain ``{"role", "content"}`` dicts. The full history is
``[system, user(question), assistant(turn 1), user(<tool_response> 1), assistant(turn 2), ...]``;
environment replies use the ``user`` role so that any chat template can render them.
"""

from __future__ import annotations

from typing import Any

Message = dict[str, str]


def full_view(messages: list[Message]) -> list[Message]:
    """Full context (ReAct / Search-R1): everything so far."""
    return [dict(m) for m in messages]


def _head(messages: list[Message]) -> int:
    """How many leading messages every view keeps: the system message, when there is one, and the question."""
    return 2 if messages and messages[0]["role"] == "system" else 1


def prepare_prompt(messages: list[Message]) -> list[Message]:
    """Memory-forcing view: [system +] question + the previous assistant turn + the newest tool reply.

    Everything older is dropped, so whatever the policy did not carry in its last ``<mem>`` is gone.
    """
    return last_turns(messages, 1)


def last_turns(messages: list[Message], k: int) -> list[Message]:
    """[System +] question + the last ``k`` turns verbatim. A turn is one assistant response and the
    environment's reply to it (a tool response or a corrective message; the final answer has none)."""
    n = _head(messages)
    starts = [i for i in range(n, len(messages)) if messages[i]["role"] == "assistant"]
    kept = messages[:n] + (messages[starts[-k:][0]:] if starts else [])
    return [dict(m) for m in kept]


def mem_context(messages: list[Message], mem: str) -> list[Message]:
    """[System +] question + this turn's memory only: the context the memory reward scores (spec 8)."""
    return [dict(m) for m in messages[: _head(messages)]] + [{"role": "assistant", "content": f"<mem>{mem}</mem>"}]


def render_prompt(messages: list[Message], tokenizer: Any, *, continue_final: bool = False) -> str:
    """One prompt string through the tokenizer's chat template: a generation prompt after the
    messages, or, with ``continue_final``, the last (assistant) message left open to continue."""
    if not getattr(tokenizer, "chat_template", None):
        raise ValueError("the tokenizer has no chat template; set tokenizer.chat_template first")
    if continue_final:
        return tokenizer.apply_chat_template(messages, tokenize=False, continue_final_message=True)
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


def count_tokens(messages: list[Message], tokenizer: Any) -> int:
    """Tokens of a view as the policy sees it: the chat-template rendering when the tokenizer has
    one, otherwise the contents joined by newlines."""
    if getattr(tokenizer, "chat_template", None):
        text = render_prompt(messages, tokenizer)
    else:
        text = "\n".join(m["content"] for m in messages)
    return len(tokenizer.encode(text, add_special_tokens=False))
