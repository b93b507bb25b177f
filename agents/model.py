"""Model-backed agents: any ``PolicyBackend`` (HF checkpoint, vLLM, a served engine) as an ``Agent``.

The observation is rendered with the model's chat template (``mempo_env.views.render_prompt``) and
the response is generated up to the closing action tag, greedy by default, all live episodes of a
benchmark step in one batch. The action is the decoded response less a turn-ending end-of-sequence
token (``action_text``), which the chat template, not the model's text, carries; the learners'
rollouts and held-out evaluation act the same way, so a checkpoint scores here what it scored there.
"""

from __future__ import annotations

from typing import Any

from agents.backends.base import Generation, PolicyBackend
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
        return [action_text(generations[0], tokenizer) for generations in outputs]


def action_text(generation: Generation, tokenizer: Any) -> str:
    """The action a response stands for: its text, less a final end-of-sequence token. A chat model
    ends its turn with one (ChatML's ``<|im_end|>``); the chat template writes it, so as text it
    would be a forged special token (protocol rule 5) and void every turn of a model that stops."""
    if generation.finish_reason == "stop" and not any(s in generation.text for s in STOP):
        return tokenizer.decode(generation.token_ids[:-1])
    return generation.text


_SAMPLING = ("max_new_tokens", "temperature", "top_p", "seed")


def _split(options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(agent sampling options, engine options)."""
    return ({k: v for k, v in options.items() if k in _SAMPLING},
            {k: v for k, v in options.items() if k not in _SAMPLING})


def hf_agent(path: str, **options: Any) -> ModelAgent:
    """An HF checkpoint folder (or hub name, where the hub is reachable) with the transformers backend.
    A GGUF checkpoint is a ``.gguf`` file or ``gguf_file=NAME.gguf`` in its folder (needs the
    ``gguf`` package; de-quantised to ``dtype``). Engine options: ``dtype`` (default float32),
    ``device``, ``batch_size``. A path that is no causal LM with a chat template is one clear error
    (``agents.checkpoints``)."""
    import torch

    from agents.backends.hf import HFBackend
    from agents.checkpoints import load_policy

    sampling, engine = _split(options)
    dtype = getattr(torch, engine.pop("dtype", "float32"))
    model, tokenizer = load_policy(path, engine.pop("gguf_file", None), dtype=dtype)
    model.eval()
    if "device" in engine:
        model.to(engine["device"])
    return ModelAgent(HFBackend(model, tokenizer, **engine), name=f"hf:{path}", **sampling)


def vllm_agent(path: str, **options: Any) -> ModelAgent:
    """An HF checkpoint folder served by in-process vLLM; engine options go to ``vllm.LLM``. ``dtype``
    defaults to float32, as for ``hf:``: vLLM's own default downcasts a float32 checkpoint to bfloat16,
    which would score another policy than ``hf:`` does, and emulate bfloat16 on a CPU without its
    instructions. vLLM 0.32 reads no GGUF: a GGUF checkpoint (as for ``hf:``) is de-quantised by
    transformers (float32) and served from a temporary HF copy (``VLLMBackend.for_model``)."""
    from agents.backends.vllm_engine import VLLMBackend
    from agents.checkpoints import load_policy, resolve

    sampling, engine = _split(options)
    engine.setdefault("dtype", "float32")
    gguf_file = engine.pop("gguf_file", None)
    if not resolve(path, gguf_file)[1]:
        return ModelAgent(VLLMBackend(path, **engine), name=f"vllm:{path}", **sampling)
    import torch

    model, tokenizer = load_policy(path, gguf_file, dtype=getattr(torch, engine.pop("dtype")))
    backend = VLLMBackend.for_model(model.eval(), tokenizer, **engine)
    return ModelAgent(backend, name=f"vllm:{path}", **sampling)
