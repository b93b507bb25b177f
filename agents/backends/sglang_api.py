"""SGLang's HTTP contract as this project uses it: every request and response shape in one place.

Read from the source of sglang 0.5.23 (the PyPI wheel, ``python/sglang/srt/...``); nothing here
was checked against a running SGLang server, which cannot start on a CPU-only machine (it needs
``libcuda.so.1``). The tests run the client against ``tests/test_sglang_backend.py``'s stand-in
server, which implements these shapes. Check this module first on a GPU machine.

- ``POST /generate`` (``entrypoints/http_server.py: generate_request``) takes a
  ``GenerateReqInput`` (``managers/io_struct.py``): ``input_ids`` (one list of ids, or a list of
  them for a batch), ``sampling_params`` (a dict, or one per batch item), ``return_logprob``,
  ``logprob_start_len`` (per item; default -1: output tokens only). ``sampling_params`` fields
  (``sampling/sampling_params.py: SamplingParams``): ``max_new_tokens``, ``temperature`` (below
  1e-6: greedy, and logits left at temperature 1), ``top_p``, ``stop`` (strings), ``n``,
  ``sampling_seed``, ``skip_special_tokens``, ``spaces_between_special_tokens``, ``no_stop_trim``.
- Its answer (``managers/tokenizer_manager.py``, ``_handle_batch_output``): per item
  ``{"text", "output_ids", "meta_info"}`` (a list of them for a batch, in order); ``meta_info``
  has ``finish_reason`` as ``{"type": "stop", "matched": id-or-string}``,
  ``{"type": "length", "length": n}`` or ``{"type": "abort", "message": ...}``
  (``managers/schedule_batch.py``, ``FINISH_*.to_json``), and with ``return_logprob``
  ``output_token_logprobs`` and ``input_token_logprobs`` as ``[logprob, token_id, text]`` triples
  (text ``None`` unless ``return_text_in_logprobs``; ``tokenizer_manager.detokenize_logprob_tokens``).
- ``input_token_logprobs`` covers ``input_ids[logprob_start_len:]`` and its first logprob is
  ``None`` (``managers/scheduler_components/logprob_result_processor.py``:
  ``[None] + input_token_logprobs[:-1]``): starting at ``len(context) - 1`` gives exactly the
  continuation's log-probs after the first entry.
- Log-prob values (``layers/sampler.py``): ``log_softmax(logits / temperature)`` for sampled
  batches, temperature-1 values for greedy ones, as ``Generation`` specifies (not verified for
  top-p < 1, where SGLang may report the truncated distribution).
- ``POST /update_weights_from_disk`` (``UpdateWeightFromDiskReqInput``): ``{"model_path": folder}``
  (also ``load_format``, ``flush_cache`` default true, ...); answers
  ``{"success", "message", "num_paused_requests"}``, HTTP 200 or 400.
- ``GET|POST /flush_cache``: plain text, HTTP 200, or 400 while requests are running.
- ``GET /health``: 200 once the server can generate.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

GENERATE = "/generate"
UPDATE_WEIGHTS_FROM_DISK = "/update_weights_from_disk"
FLUSH_CACHE = "/flush_cache"
HEALTH = "/health"


def generate_request(prompts: Sequence[Sequence[int]], *, max_new_tokens: int, temperature: float, top_p: float,
                     stop: Sequence[str], seeds: Sequence[int | None]) -> dict[str, Any]:
    """One batched ``/generate`` body: item ``i`` samples ``prompts[i]`` once with ``seeds[i]``."""
    params = [{"max_new_tokens": max_new_tokens, "temperature": temperature, "top_p": top_p, "stop": list(stop),
               "n": 1, "sampling_seed": seed, "skip_special_tokens": False,
               "spaces_between_special_tokens": False, "no_stop_trim": True} for seed in seeds]
    return {"input_ids": [list(p) for p in prompts], "sampling_params": params, "return_logprob": True}


def parse_generation(item: dict[str, Any]) -> tuple[list[int], list[float], str]:
    """(output ids, their log-probs, "stop" or "length") of one ``/generate`` answer item."""
    meta = item["meta_info"]
    reason = meta["finish_reason"] or {}
    kind = reason.get("type")
    if kind not in ("stop", "length"):
        raise ValueError(f"generation ended with finish_reason={reason!r}")
    ids = [int(t) for t in item["output_ids"]]
    triples = meta["output_token_logprobs"]
    if [int(t[1]) for t in triples] != ids:
        raise ValueError("output_token_logprobs do not match output_ids")
    return ids, [float(t[0]) for t in triples], kind


def score_request(contexts: Sequence[Sequence[int]], continuations: Sequence[Sequence[int]]) -> dict[str, Any]:
    """A batched ``/generate`` body that returns the prompt log-probs of every continuation (greedy:
    temperature-1 values; one token is generated and ignored)."""
    return {
        "input_ids": [list(c) + list(x) for c, x in zip(contexts, continuations)],
        "sampling_params": [{"max_new_tokens": 1, "temperature": 0.0} for _ in contexts],
        "return_logprob": True,
        "logprob_start_len": [len(c) - 1 for c in contexts],
    }


def parse_score(item: dict[str, Any], continuation: Sequence[int]) -> list[float]:
    """The continuation's log-probs from one item of a ``score_request`` answer."""
    triples = item["meta_info"]["input_token_logprobs"][1:]  # the first is the context's last token: None
    if [int(t[1]) for t in triples] != list(continuation):
        raise ValueError("input_token_logprobs do not match the continuation")
    return [float(t[0]) for t in triples]


def update_weights_request(model_path: str) -> dict[str, Any]:
    return {"model_path": model_path, "flush_cache": True}


def parse_update_weights(body: Any) -> None:
    """Raise unless the answer says the weights were loaded."""
    if not (isinstance(body, dict) and body.get("success")):
        raise ValueError(f"weight update failed: {body!r:.500}")
