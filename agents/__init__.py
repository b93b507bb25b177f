"""Policies behind one interface (``Agent.act(observation, info) -> str``), built from spec strings."""

from __future__ import annotations

import importlib

from agents.backends.common import parse_spec
from agents.base import Agent
from agents.scripted import OracleAgent, RandomAgent, WeakAgent

# kind -> (builder, number of positional arguments)
_MODEL_AGENTS = {"hf": ("agents.model.hf_agent", 1), "vllm": ("agents.model.vllm_agent", 1),
                 "openai": ("agents.openai_agent.OpenAIAgent", 2)}
SPECS = ("oracle, weak, random[:SEED], hf:PATH[#OPTION=VALUE...], vllm:PATH[#OPTION=VALUE...], "
         "openai:URL#MODEL[#OPTION=VALUE...]")


def make_agent(spec: str) -> Agent:
    """An agent from a spec string (``agents.backends.common.parse_spec``):

    - ``oracle``, ``weak``, ``random`` or ``random:SEED``: scripted;
    - ``hf:PATH``: an HF checkpoint with transformers (options: ``max_new_tokens``, ``temperature``,
      ``top_p``, ``seed``, ``dtype``, ``device``, ``batch_size``); a GGUF checkpoint is
      ``hf:FILE.gguf`` or ``hf:DIR#gguf_file=NAME.gguf`` (the ``pretrained`` extra);
    - ``vllm:PATH``: the same with in-process vLLM (sampling options as above; others go to
      ``vllm.LLM``, e.g. ``enforce_eager=true``, ``max_model_len=4096``; ``dtype`` float32 unless
      given, as for ``hf:``);
    - ``openai:URL#MODEL``: an OpenAI-compatible server, e.g.
      ``openai:http://127.0.0.1:8000/v1#my-model#concurrency=16`` (options: ``api`` chat or
      completions, ``tokenizer``, ``max_tokens``, ``temperature``, ``top_p``, ``seed``,
      ``timeout``, ``attempts``, ``concurrency``, ``key_env``).

    Model agents greedy-decode by default. A bad spec raises ``ValueError``.
    """
    kind, args, options = parse_spec(spec)
    if kind in ("oracle", "weak") and not args and not options:
        return OracleAgent() if kind == "oracle" else WeakAgent()
    if kind == "random" and len(args) <= 1 and not options:
        return RandomAgent(_int(args[0], spec) if args else 0)
    builder = _MODEL_AGENTS.get(kind)
    if builder is not None and len(args) == builder[1]:
        module, name = builder[0].rsplit(".", 1)
        try:
            return getattr(importlib.import_module(module), name)(*args, **options)
        except TypeError as e:  # an option the agent does not take
            raise ValueError(f"agent spec {spec!r}: {e}") from None
    raise ValueError(f"unknown agent spec {spec!r}; known: {SPECS}")


def _int(text: str, spec: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"agent spec {spec!r}: expected an integer seed, got {text!r}") from None


__all__ = ["Agent", "OracleAgent", "RandomAgent", "WeakAgent", "make_agent"]
