"""The SGLang backend: a ``PolicyBackend`` over a running SGLang server's native API.

Generation and scoring are batched ``/generate`` calls with ``input_ids`` and ``return_logprob``;
``update_weights`` writes the trainer's weights to ``weights_dir`` (a folder the server can read)
and calls ``/update_weights_from_disk`` and ``/flush_cache``. Every wire shape lives in
``sglang_api`` (with where each comes from, and what was and was not verified).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agents.backends import sglang_api as api
from agents.backends.base import Generation
from agents.backends.common import (
    check_generate_args,
    check_score_args,
    request_seeds,
    save_weights,
    weights_folder,
)
from agents.backends.http_json import JSONClient, ServerError

log = logging.getLogger(__name__)


class SGLangBackend:
    """Token-level generation, scoring and weight reloads against the SGLang server at ``url``.

    Each of the ``n`` samples of a prompt is its own batch item with seed ``s + k`` (``s`` derived
    from ``seed`` and the prompt's index), as vLLM seeds its ``n`` samples.
    """

    def __init__(self, url: str, tokenizer: Any, *, weights_dir: str | Path | None = None, timeout: float = 600.0,
                 attempts: int = 4, backoff: float = 0.5, max_wait: float = 5.0) -> None:
        self.client = JSONClient(url, what="SGLang server", timeout=(5.0, timeout), attempts=attempts, backoff=backoff,
                                 max_wait=max_wait, concurrency=1)
        self.tokenizer = tokenizer
        self.weights_dir, self._tmp = weights_folder(weights_dir, "sglang-weights-")
        self.last_sync_s: float | None = None

    def generate(self, prompts: list[list[int]], *, max_new_tokens: int, temperature: float = 1.0,
                 top_p: float = 1.0, n: int = 1, stop: Sequence[str] = (),
                 seed: int | None = None) -> list[list[Generation]]:
        check_generate_args(prompts, max_new_tokens, temperature, top_p, n, stop)
        if max_new_tokens == 0:
            return [[Generation([], [], "", "length") for _ in range(n)] for _ in prompts]
        seeds = [None if s is None else s + k for s in request_seeds(seed, len(prompts)) for k in range(n)]
        flat = [p for p in prompts for _ in range(n)]
        body = self.client.post(api.GENERATE, api.generate_request(
            flat, max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p, stop=stop, seeds=seeds))
        items = self._items(body, len(flat))
        generations = []
        for item in items:
            ids, logprobs, reason = self._parse(api.parse_generation, item)
            generations.append(Generation(ids, logprobs, self.tokenizer.decode(ids), reason))
        return [generations[i * n:(i + 1) * n] for i in range(len(prompts))]

    def score(self, contexts: list[list[int]], continuations: list[list[int]]) -> list[list[float]]:
        """Continuation log-probs at temperature 1 from SGLang's input log-probs, one batched request."""
        check_score_args(contexts, continuations)
        todo = [k for k, x in enumerate(continuations) if x]
        results: list[list[float]] = [[] for _ in contexts]
        if todo:
            body = self.client.post(api.GENERATE, api.score_request([contexts[k] for k in todo],
                                                                    [continuations[k] for k in todo]))
            for k, item in zip(todo, self._items(body, len(todo))):
                results[k] = self._parse(api.parse_score, item, continuations[k])
        return results

    def update_weights(self, model: Any) -> None:
        """Write ``model``'s weights to ``weights_dir``, load them in the server, flush its cache."""
        start = time.perf_counter()
        save_weights(model, self.weights_dir)
        body = self.client.post(api.UPDATE_WEIGHTS_FROM_DISK, api.update_weights_request(str(self.weights_dir)))
        self._parse(api.parse_update_weights, body)
        self.client.post(api.FLUSH_CACHE, None)
        self.last_sync_s = time.perf_counter() - start
        log.info("SGLang weight sync: %.3f s", self.last_sync_s)

    def _items(self, body: Any, count: int) -> list[dict[str, Any]]:
        if not isinstance(body, list) or len(body) != count:
            raise ServerError(f"SGLang server at {self.client.base_url} sent {type(body).__name__} "
                              f"for a batch of {count}: {body!r:.300}")
        return body

    def _parse(self, parse: Any, *args: Any) -> Any:
        try:
            return parse(*args)
        except (KeyError, TypeError, IndexError, ValueError) as e:
            raise ServerError(f"SGLang server at {self.client.base_url}: unexpected answer ({e!r})") from e
