"""An agent for any OpenAI-compatible endpoint: a user's vLLM or SGLang server, or an API model.

``api="chat"`` (default) sends the observation's messages to ``/chat/completions`` and lets the
server apply its chat template; ``api="completions"`` renders them locally with ``tokenizer``'s
template (``mempo_env.views.render_prompt``) and sends the text to ``/completions``, for servers
without a chat template or to control the rendering exactly.

Generation stops at the closing action tags. OpenAI-style servers cut the stop string from the
text; ``close_action`` puts it back, so the environment sees a whole turn. Errors come from
``http_json``: a server that is down fails after the retries with a message naming the URL.
"""

from __future__ import annotations

import os
import re
from typing import Any

from agents.backends.http_json import JSONClient, ServerError
from agents.base import Agent, Messages
from agents.model import STOP
from mempo_env.protocol import ACTIONS
from mempo_env.views import render_prompt

_OPEN_ACTION = re.compile(r"<({})>".format("|".join(ACTIONS)))


def close_action(text: str, choice: dict[str, Any]) -> str:
    """``text`` with the stop string the server cut put back (only when it stopped on one).

    vLLM names the stop string in ``stop_reason`` and SGLang in ``matched_stop`` (both ``None`` at
    an end-of-sequence token); other servers say only ``finish_reason="stop"``, and then the tag of
    the last opened action is closed if it is open.
    """
    if choice.get("finish_reason") != "stop":
        return text
    for key in ("stop_reason", "matched_stop"):
        if key in choice:
            matched = choice[key]
            return text + matched if isinstance(matched, str) and matched in STOP else text
    opened = _OPEN_ACTION.findall(text)
    if opened and not text.rstrip().endswith(f"</{opened[-1]}>"):
        return text + f"</{opened[-1]}>"
    return text


class OpenAIAgent(Agent):
    """``base_url``: the API root, e.g. ``http://127.0.0.1:8000/v1``; ``model``: the served name.

    ``timeout`` (read seconds per try), ``attempts``, ``backoff`` and ``max_wait`` (the retry loop's
    knobs: connection errors, timeouts, 429 and 5xx retried, see ``mempo_env.http_retry``) and
    ``concurrency`` (requests in flight for ``act_batch``) go to the HTTP client. The API key is read
    from the environment variable ``key_env`` when set there.
    """

    def __init__(self, base_url: str, model: str, *, api: str = "chat", tokenizer: Any = None,
                 max_tokens: int = 512, temperature: float = 0.0, top_p: float = 1.0, seed: int | None = 0,
                 timeout: float = 120.0, attempts: int = 4, backoff: float = 0.5, max_wait: float = 5.0,
                 concurrency: int = 8, key_env: str = "OPENAI_API_KEY", name: str | None = None) -> None:
        if api not in ("chat", "completions"):
            raise ValueError(f"api must be 'chat' or 'completions', not {api!r}")
        if api == "completions" and tokenizer is None:
            raise ValueError("api='completions' renders the chat template locally: give a tokenizer (path)")
        if isinstance(tokenizer, str):
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(tokenizer)
        key = os.environ.get(key_env)
        self.client = JSONClient(base_url, what="OpenAI-compatible server", timeout=(5.0, timeout),
                                 attempts=attempts, backoff=backoff, max_wait=max_wait, concurrency=concurrency,
                                 headers={"Authorization": f"Bearer {key}"} if key else None)
        self.model, self.api, self.tokenizer = model, api, tokenizer
        self.sampling = {"max_tokens": max_tokens, "temperature": temperature, "top_p": top_p, "stop": list(STOP)}
        if seed is not None:
            self.sampling["seed"] = seed
        self.name = name or f"openai:{model}"

    def act(self, observation: Messages, info: dict[str, Any]) -> str:
        if self.api == "chat":
            body = self.client.post("/chat/completions", {"model": self.model, "messages": observation,
                                                          **self.sampling})
            choice = self._choice(body)
            text = choice["message"].get("content") or ""
        else:
            prompt = render_prompt(observation, self.tokenizer)
            body = self.client.post("/completions", {"model": self.model, "prompt": prompt, **self.sampling})
            choice = self._choice(body)
            text = choice["text"]
        return close_action(text, choice)

    def act_batch(self, observations: list[Messages], infos: list[dict[str, Any]]) -> list[str]:
        return self.client.map(lambda pair: self.act(*pair), list(zip(observations, infos)))

    def _choice(self, body: Any) -> dict[str, Any]:
        try:
            return body["choices"][0]
        except (KeyError, IndexError, TypeError):
            raise ServerError(f"OpenAI-compatible server at {self.client.base_url} sent no choices: "
                              f"{body!r:.300}") from None
