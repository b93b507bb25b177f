"""The policy-backend interface: what a learner or a model-backed agent needs from an inference engine.

Every engine (Hugging Face transformers now; vLLM, SGLang later) speaks token ids in and token ids
out, so the trainer never re-tokenises text and the log-probs it gets back belong to exactly the
tokens it will train on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:  # torch is the optional `train` extra; the interface itself does not need it
    import torch


@dataclass
class Generation:
    """One sampled continuation of one prompt.

    ``token_ids`` are exactly the generated ids: up to and including the token that completes the
    first stop string (or an end-of-sequence token), else ``max_new_tokens`` of them. Nothing from
    padding or from other sequences of the batch appears here.

    ``logprobs[j]`` is the log-prob of ``token_ids[j]`` under the sampling distribution before
    top-p truncation, ``log_softmax(logits / temperature)``; temperature 0 (greedy) reports the
    temperature-1 log-probs. Top-p truncation is deliberately not reflected: the learner's ratio
    and KL terms are computed against the untruncated policy, and engines disagree on how they
    renormalise after truncation.

    ``text`` is ``tokenizer.decode(token_ids)`` with special and added tokens kept, so it may run a
    few characters past the stop string when the last token overhangs it. ``finish_reason`` is
    ``"stop"`` (stop string or end-of-sequence token) or ``"length"`` (``max_new_tokens`` reached).
    """

    token_ids: list[int]
    logprobs: list[float]
    text: str
    finish_reason: str


@runtime_checkable
class PolicyBackend(Protocol):
    """What every inference engine implements for the agents and learners."""

    tokenizer: Any

    def generate(self, prompts: list[list[int]], *, max_new_tokens: int, temperature: float = 1.0,
                 top_p: float = 1.0, n: int = 1, stop: Sequence[str] = (),
                 seed: int | None = None) -> list[list[Generation]]:
        """Sample ``n`` continuations of each prompt (token ids); one list of ``n`` per prompt, in order.

        Stop strings are matched in the generated text only, never across the prompt boundary. With
        ``seed`` the samples are reproducible for the same prompts and settings.
        """
        ...

    def score(self, contexts: list[list[int]], continuations: list[list[int]]) -> list[list[float]]:
        """``log π(cont[j] | context + cont[:j])`` for every continuation token, temperature 1."""
        ...

    def update_weights(self, model: torch.nn.Module) -> None:
        """Make the engine generate and score with these weights from now on."""
        ...
