"""Inference engines behind one interface (``PolicyBackend``): token ids in, tokens and log-probs out.

``HFBackend`` (transformers, in-process) needs the ``train`` extra (torch, transformers); it is
imported lazily so ``agents`` keeps working without them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agents.backends.base import Generation, PolicyBackend

if TYPE_CHECKING:
    from agents.backends.hf import HFBackend


def __getattr__(name: str) -> Any:
    if name == "HFBackend":
        from agents.backends.hf import HFBackend

        return HFBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Generation", "HFBackend", "PolicyBackend"]
