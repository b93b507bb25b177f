"""Where a MemPO training step spends its time: the memory-reward forward pass and the weight sync,
each as a share of the whole step, measured inside one short run of ``algorithms.mempo.train``.

    pytest benchmarks/bench_train.py         # or: python -m benchmarks.systems --only train

The run is the learner's default step (``algorithms.mempo.Config``: 8 questions x 8 rollouts, 2
objectives, memory layout, up to 8 turns of 64 new tokens) on the warmed-up tiny policy
(``runs/cache``, built first if missing), for ``STEPS`` steps. The shares belong to this setting:
the tiny model's generation is bound by per-token overhead, not by batch size, so a smaller batch
gives other shares. Timers wrap the learner's own calls (``collect_rollouts``,
``answer_probabilities``, the backend's ``update_weights``); a step runs from the start of its
rollouts to the end of its weight sync. The in-process HF engine shares the trainer's module, so
its sync is a no-op; ``test_weight_copy_into_a_separate_hf_engine`` shows what a copy would cost.
"""

from __future__ import annotations

import copy
import importlib.util
import statistics
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

from agents.backends import make_backend  # noqa: E402
from algorithms import mempo  # noqa: E402
from algorithms.sft import default_warmup  # noqa: E402

STEPS = 1  # the learner's default step is over a minute on 2 CPU cores


class Spans:
    """Start and end times of every call of the wrapped functions, by name."""

    def __init__(self) -> None:
        self.spans: dict[str, list[tuple[float, float]]] = defaultdict(list)

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.spans[name].append((start, time.perf_counter()))

        return timed

    def mean(self, name: str) -> float:
        return statistics.mean(end - start for start, end in self.spans[name])


@pytest.fixture(scope="module")
def start_policy() -> Path:
    return default_warmup()


def step_label(backend: str) -> str:
    return f"MemPO training step ({backend} engine, default config)"


VLLM = pytest.param("vllm", marks=[
    pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vllm is not installed"),
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU: the vLLM variant is for GPU machines"),
])


@pytest.mark.parametrize("backend", ["hf", VLLM])
def test_training_step_breakdown(benchmark: Any, monkeypatch: Any, tmp_path: Path, start_policy: Path,
                                 backend: str) -> None:
    spans = Spans()
    monkeypatch.setattr(mempo, "collect_rollouts", spans.wrap("rollouts", mempo.collect_rollouts))
    monkeypatch.setattr(mempo, "answer_probabilities", spans.wrap("memory reward", mempo.answer_probabilities))

    def timed_backend(*args: Any, **kwargs: Any) -> Any:
        engine = make_backend(*args, **kwargs)
        engine.update_weights = spans.wrap("weight sync", engine.update_weights)
        return engine

    monkeypatch.setattr(mempo, "make_backend", timed_backend)
    cfg = mempo.Config(policy=str(start_policy), run_dir=str(tmp_path / "run"), steps=STEPS, eval_episodes=0,
                       backend=backend)
    try:
        benchmark.pedantic(mempo.train, args=(cfg,), rounds=1, iterations=1)
    except ValueError as e:
        if "unknown backend" in str(e):
            pytest.skip(str(e))
        raise
    for name in ("rollouts", "memory reward", "weight sync"):
        assert len(spans.spans[name]) == STEPS, f"algorithms.mempo.train no longer calls {name} once per step"
    step = statistics.mean(end - start for (start, _), (_, end) in zip(spans.spans["rollouts"],
                                                                       spans.spans["weight sync"]))
    label = step_label(backend)
    sync = "hf: the engine shares the trainer's module" if backend == "hf" else backend
    benchmark.extra_info["parts"] = [
        {"label": label, "seconds": step},
        {"label": f"rollout generation ({backend})", "seconds": spans.mean("rollouts"), "vs": label, "share": True},
        {"label": f"memory-reward forward pass ({backend})", "seconds": spans.mean("memory reward"), "vs": label,
         "share": True},
        {"label": f"weight sync ({sync})", "seconds": spans.mean("weight sync"), "vs": label, "share": True},
    ]


def test_weight_copy_into_a_separate_hf_engine(benchmark: Any, start_policy: Path) -> None:
    model = AutoModelForCausalLM.from_pretrained(start_policy, dtype=torch.float32)
    engine = make_backend("hf", copy.deepcopy(model), AutoTokenizer.from_pretrained(start_policy))
    benchmark.extra_info.update(label="weight sync into a separate HF engine (load_state_dict)",
                                vs=step_label("hf"), share=True)
    benchmark(engine.update_weights, model)
