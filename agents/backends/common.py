"""Pieces every engine backend shares: argument checks, per-request seeds, weights as checkpoint tensors."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import torch


def check_generate_args(prompts: Sequence[Sequence[int]], max_new_tokens: int, temperature: float, top_p: float,
                        n: int, stop: Sequence[str]) -> None:
    """One set of argument errors for every engine's ``generate``, so all reject the same calls."""
    if max_new_tokens < 0 or temperature < 0 or not 0 < top_p <= 1 or n < 1:
        raise ValueError(f"bad sampling settings: max_new_tokens={max_new_tokens}, "
                         f"temperature={temperature}, top_p={top_p}, n={n}")
    if any(not p for p in prompts):
        raise ValueError("every prompt needs at least one token")
    if any(not s for s in stop):
        raise ValueError("empty stop string")


def needs_rescore(temperature: float, top_p: float) -> bool:
    """Whether sampled log-probs must be re-scored to follow ``Generation``'s contract (vLLM).

    vLLM's processed log-probs are ``log_softmax(logits / T)`` but also renormalised over the top-p
    nucleus; its prompt log-probs are untruncated but at temperature 1. So top-p < 1 is re-scored
    at temperature 1 and refused at any other sampling temperature.
    """
    if top_p < 1 and temperature not in (0, 1):
        raise ValueError("vLLM reports top-p-renormalised log-probs, and prompt log-probs only at temperature 1: "
                         f"use top_p=1 or temperature 1, not top_p={top_p} with temperature={temperature}")
    return top_p < 1 and temperature == 1


def rescore(backend: Any, prompts: Sequence[Sequence[int]], results: list[list[Any]]) -> None:
    """Replace every generation's log-probs with ``backend.score`` of its tokens (in place)."""
    flat = [(list(p), g) for p, gens in zip(prompts, results) for g in gens]
    for (_, g), logprobs in zip(flat, backend.score([p for p, _ in flat], [g.token_ids for _, g in flat])):
        g.logprobs = logprobs


def check_score_args(contexts: Sequence[Sequence[int]], continuations: Sequence[Sequence[int]]) -> None:
    if len(contexts) != len(continuations):
        raise ValueError(f"{len(contexts)} contexts but {len(continuations)} continuations")
    if any(not c for c in contexts):
        raise ValueError("every context needs at least one token")


def request_seeds(seed: int | None, count: int) -> list[int | None]:
    """One seed per prompt, derived from ``(seed, index)``.

    Engines seed each request on its own (vLLM gives the k-th of ``n`` samples ``seed + k``). One
    shared seed would give identical samples to identical prompts, and GRPO sends each question's
    G rollouts as G identical first-turn prompts.
    """
    if seed is None:
        return [None] * count
    return [int(s) for s in np.random.SeedSequence(seed).generate_state(count, dtype=np.uint32) >> 1]


def checkpoint_weights(model: torch.nn.Module) -> list[tuple[str, torch.Tensor]]:
    """The model's tensors under their checkpoint names, tied ones included.

    ``state_dict`` keeps ``lm_head.weight`` when it is tied to the embeddings (``save_pretrained``
    drops it): engines that reload weights in place need it, or the reload leaves the output layer
    stale and nothing fails loudly.
    """
    return [(name, tensor.detach()) for name, tensor in model.state_dict().items()]


def weights_folder(weights_dir: str | Path | None, prefix: str) -> tuple[Path, tempfile.TemporaryDirectory[str] | None]:
    """Where a server backend writes weights for its server to load: ``weights_dir``, or a temporary
    folder on this machine (returned with its handle, which keeps it alive)."""
    if weights_dir:
        return Path(weights_dir), None
    tmp = tempfile.TemporaryDirectory(prefix=prefix)
    return Path(tmp.name), tmp


def save_weights(model: Any, out_dir: str | Path) -> Path:
    """Config and every weight (tied ones as separate copies) in one safetensors file, for engines
    that reload from a folder (vLLM's ``reload_weights(weights_path=)``, SGLang's
    ``/update_weights_from_disk``)."""
    from safetensors.torch import save_file

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    model.config.save_pretrained(out_dir)
    tensors = {name: t.contiguous().clone() for name, t in checkpoint_weights(model)}  # clone: no shared storage
    tmp = out_dir / "model.safetensors.tmp"
    save_file(tensors, str(tmp), metadata={"format": "pt"})
    tmp.replace(out_dir / "model.safetensors")
    (out_dir / "model.safetensors.index.json").unlink(missing_ok=True)  # a stale sharded index would win
    return out_dir


def parse_value(text: str) -> Any:
    """A spec option's value: int, float, bool (true/false) or the string itself."""
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    return text


def parse_spec(spec: str) -> tuple[str, list[str], dict[str, Any]]:
    """``KIND[:ARG[#ARG...][#KEY=VALUE...]]`` -> (kind, positional args, options).

    ``#`` separates the parts because the benchmark CLI already splits agent lists on commas and
    URLs contain colons: ``openai:http://127.0.0.1:8000/v1#tiny#concurrency=4``.
    """
    kind, _, rest = spec.partition(":")
    if "#" in kind:  # options without an argument: "vllm#enforce_eager=true"
        kind, _, rest = spec.partition("#")
        rest = "#" + rest
    args: list[str] = []
    options: dict[str, Any] = {}
    for i, part in enumerate(rest.split("#") if rest else []):
        key, eq, value = part.partition("=")
        if eq and i > 0:
            options[key.strip()] = parse_value(value.strip())
        elif part:
            args.append(part)
    return kind.strip(), args, options

