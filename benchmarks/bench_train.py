"""Where a MemPO training step spends its time: the memory-reward forward pass and the weight sync,
each as a share of the whole step, measured inside one short run of ``algorithms.mempo.train``.

    pytest benchmarks/bench_train.py         # or: python -m benchmarks.systems --only train

The run is the learner's default step (``algorithms.mempo.Config``: 8 questions x 8 rollouts, 2
objectives, memory layout, up to 8 turns of 64 new tokens) on the warmed-up tiny policy
(``runs/cache``, built first if missing), for ``STEPS`` steps. The shares belong to this setting:
the tiny model's generation is bound by per-token overhead, not by batch size, so a smaller batch
gives other shares. The times are the learner's own step time split (``metrics.jsonl``:
``rollout_s``, ``memory_reward_s``, ``sync_s`` and their step's ``step_s``), so a step runs from the
start of its rollouts to the end of its weight sync. The in-process HF engine shares the trainer's module, so
its sync is a no-op; ``test_weight_copy_into_a_separate_hf_engine`` shows what a copy would cost.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import statistics
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

from agents.backends import make_backend  # noqa: E402
from algorithms import mempo  # noqa: E402
from algorithms.sft import default_warmup  # noqa: E402

STEPS = 1  # the learner's default step is over a minute on 2 CPU cores


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
def test_training_step_breakdown(benchmark: Any, tmp_path: Path, start_policy: Path, backend: str) -> None:
    cfg = mempo.Config(policy=str(start_policy), run_dir=str(tmp_path / "run"), steps=STEPS, eval_episodes=0,
                       backend=backend)
    try:
        benchmark.pedantic(mempo.train, args=(cfg,), rounds=1, iterations=1)
    except ValueError as e:
        if "unknown backend" in str(e):
            pytest.skip(str(e))
        raise
    steps = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert len(steps) == STEPS

    def mean(key: str) -> float:
        return statistics.mean(m[key] for m in steps)

    label = step_label(backend)
    sync = "hf: the engine shares the trainer's module" if backend == "hf" else backend
    benchmark.extra_info["parts"] = [
        {"label": label, "seconds": mean("step_s")},
        {"label": f"rollout generation ({backend})", "seconds": mean("rollout_s"), "vs": label, "share": True},
        {"label": f"memory-reward forward pass ({backend})", "seconds": mean("memory_reward_s"), "vs": label,
         "share": True},
        {"label": f"weight sync ({sync})", "seconds": mean("sync_s"), "vs": label, "share": True},
    ]


def test_weight_copy_into_a_separate_hf_engine(benchmark: Any, start_policy: Path) -> None:
    model = AutoModelForCausalLM.from_pretrained(start_policy, dtype=torch.float32)
    engine = make_backend("hf", copy.deepcopy(model), AutoTokenizer.from_pretrained(start_policy))
    benchmark.extra_info.update(label="weight sync into a separate HF engine (load_state_dict)",
                                vs=step_label("hf"), share=True)
    benchmark(engine.update_weights, model)
