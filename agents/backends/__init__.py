"""Inference engines behind one interface (``PolicyBackend``): token ids in, tokens and log-probs out.

``HFBackend`` (transformers, in-process) needs the ``train`` extra (torch, transformers); it is
imported lazily so ``agents`` keeps working without them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agents.backends.base import Generation, PolicyBackend

if TYPE_CHECKING:
    from agents.backends.hf import HFBackend


def make_backend(name: str, model: Any, tokenizer: Any, **options: Any) -> PolicyBackend:
    """The rollout engine called ``name`` serving ``model`` (the trainer's ``torch.nn.Module``).

    ``"hf"``: transformers, in-process, sharing the trainer's model object.
    """
    if name == "hf":
        from agents.backends.hf import HFBackend

        return HFBackend(model, tokenizer, **options)
    raise ValueError(f"unknown backend {name!r}; known: hf")


def __getattr__(name: str) -> Any:
    if name == "HFBackend":
        from agents.backends.hf import HFBackend

        return HFBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Generation", "HFBackend", "PolicyBackend", "make_backend"]
