"""Model-backed agents: any ``PolicyBackend`` (HF checkpoint, vLLM, a served engine) as an ``Agent``.

The observation is rendered with the model's chat template (``mempo_env.views.render_prompt``) and
the response is generated up to the closing action tag, greedy by default, all live episodes of a
benchmark step in one batch. The action is the decoded response, exactly as the learners' rollouts
and held-out evaluation see it, so a checkpoint scores here what it scored in training.
"""

from __future__ import annotations

from typing import Any

from agents.backends.base import PolicyBackend
from agents.base import Agent, Messages
from mempo_env.protocol import ACTIONS
from mempo_env.views import render_prompt

STOP = tuple(f"</{action}>" for action in ACTIONS)


class ModelAgent(Agent):
    """Generates each turn with ``backend``. ``seed`` (sampling only) is advanced every batch."""

    def __init__(self, backend: PolicyBackend, *, name: str = "model", max_new_tokens: int = 256,
                 temperature: float = 0.0, top_p: float = 1.0, seed: int | None = 0) -> None:
        self.backend = backend
        self.name = name
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature
        self.top_p = top_p
        self.seed = seed
        self._calls = 0

    def act(self, observation: Messages, info: dict[str, Any]) -> str:
        return self.act_batch([observation], [info])[0]

    def act_batch(self, observations: list[Messages], infos: list[dict[str, Any]]) -> list[str]:
        tokenizer = self.backend.tokenizer
        prompts = [tokenizer(render_prompt(o, tokenizer), add_special_tokens=False)["input_ids"] for o in observations]
        seed = None if self.seed is None else self.seed + self._calls
        self._calls += 1
        outputs = self.backend.generate(prompts, max_new_tokens=self.max_new_tokens, temperature=self.temperature,
                                        top_p=self.top_p, n=1, stop=STOP, seed=seed)
        return [generations[0].text for generations in outputs]


_SAMPLING = ("max_new_tokens", "temperature", "top_p", "seed")


def _split(options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(agent sampling options, engine options)."""
    return ({k: v for k, v in options.items() if k in _SAMPLING},
            {k: v for k, v in options.items() if k not in _SAMPLING})


def hf_agent(path: str, **options: Any) -> ModelAgent:
    """An HF checkpoint folder (or hub name, where the hub is reachable) with the transformers backend.
    Engine options: ``dtype`` (default float32), ``device``, ``batch_size``."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from agents.backends.hf import HFBackend

    sampling, engine = _split(options)
    dtype = getattr(torch, engine.pop("dtype", "float32"))
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype).eval()
    if "device" in engine:
        model.to(engine["device"])
    backend = HFBackend(model, AutoTokenizer.from_pretrained(path), **engine)
    return ModelAgent(backend, name=f"hf:{path}", **sampling)


def vllm_agent(path: str, **options: Any) -> ModelAgent:
    """An HF checkpoint folder served by in-process vLLM; engine options go to ``vllm.LLM``."""
    from agents.backends.vllm_engine import VLLMBackend

    sampling, engine = _split(options)
    return ModelAgent(VLLMBackend(path, **engine), name=f"vllm:{path}", **sampling)
