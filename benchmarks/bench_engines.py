"""Rollout engines: generated tokens/s of vLLM (in-process) vs the HF backend on the same model, batch
and lengths, in one run; vLLM's start-up and weight-sync times.

    python benchmarks/bench_engines.py       # one markdown table
    pytest benchmarks/bench_engines.py       # or: python -m benchmarks.systems --only engines

The batch is the learner's rollout shape: 32 first-turn prompts of MemSearchQA-v0 (memory view, 2
objectives, about 80 tokens) through the tiny policy's chat template, 128 sampled tokens each
(temperature 1, no stop strings: only an end-of-sequence token ends a row early; tokens/s counts
the tokens actually generated). Models: the untrained tiny policy (1.3M parameters) and a 20M
Qwen2 with the same tokenizer (hidden 512, 4 layers), both fp32.

The engines run on 1 and on 2 cores (HF: torch threads; vLLM: its OpenMP threads bound to those
cores), one process per core count (vLLM binds the threads of the whole process), their batches
interleaved so that a change in the machine's load hits all of them alike: on a 2-core machine
shared with other work, 2 threads can be several times slower than 1. vLLM runs compiled (the
default, as the learners use it) and with ``enforce_eager``. The weight sync is
``VLLMBackend.update_weights`` (``reload_weights`` + prefix-cache reset); its share of a training
step comes from ``bench_train.py`` (``MemPO training step (vllm engine...)``) when both run in one
``benchmarks.systems`` call.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("vllm")

import gymnasium as gym  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

import mempo_env  # noqa: E402,F401
from agents.backends import HFBackend, VLLMBackend  # noqa: E402
from agents.statistics import table_head  # noqa: E402
from algorithms.tiny_policy import build_model, build_tiny_policy  # noqa: E402
from mempo_env.views import render_prompt  # noqa: E402

BATCH, NEW_TOKENS, REPEATS = 32, 128, 5
MODELS = {"tiny policy (1.3M)": None, "Qwen2 20M": dict(hidden=512, layers=4, heads=8)}
TRAIN_STEP = "MemPO training step (vllm engine, default config)"  # bench_train.step_label("vllm")


def model_dir(root: Path, name: str) -> Path:
    """The tiny policy, or a bigger random Qwen2 saved with its tokenizer."""
    policy = build_tiny_policy(root / "tiny") if not (root / "tiny").exists() else root / "tiny"
    size = MODELS[name]
    if size is None:
        return policy
    out = root / name.replace(" ", "_")
    if not out.exists():
        tokenizer = AutoTokenizer.from_pretrained(policy)
        model = build_model(len(tokenizer), **size, eos_token_id=tokenizer.eos_token_id,
                            pad_token_id=tokenizer.pad_token_id)
        model.save_pretrained(out)
        tokenizer.save_pretrained(out)
    return out


def rollout_prompts(tokenizer: Any) -> list[list[int]]:
    env = gym.make("MemSearchQA-v0", objectives=2)
    return [tokenizer(render_prompt(env.reset(seed=s)[0], tokenizer), add_special_tokens=False)["input_ids"]
            for s in range(BATCH)]


def rate(backend: Any, prompts: list[list[int]], seed: int) -> float:
    """Generated tokens/s of one batch."""
    start = time.perf_counter()
    out = backend.generate(prompts, max_new_tokens=NEW_TOKENS, seed=seed)
    return sum(len(g[0].token_ids) for g in out) / (time.perf_counter() - start)


def worker(path: Path, cores: int) -> dict[str, Any]:
    """Every engine on ``cores`` cores in one process, batches interleaved (HF, vLLM, vLLM eager, HF,
    ...) so a change in the machine's load hits all of them alike; medians of REPEATS batches."""
    os.environ["VLLM_CPU_OMP_THREADS_BIND"] = ",".join(map(str, sorted(os.sched_getaffinity(0))[:cores]))
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    prompts = rollout_prompts(tokenizer)
    engines: dict[str, Any] = {}
    start_s = {}
    for name, eager in (("vllm", False), ("vllm-eager", True)):
        start = time.perf_counter()
        engines[name] = VLLMBackend.for_model(model, tokenizer, max_model_len=1024, enforce_eager=eager)
        start_s[name] = time.perf_counter() - start
    torch.set_num_threads(cores)  # after the engines: vLLM binds its OpenMP threads to the same cores
    engines["hf"] = HFBackend(model, tokenizer)
    rates: dict[str, list[float]] = {name: [] for name in engines}
    for name, backend in engines.items():
        backend.generate(prompts[:4], max_new_tokens=8, seed=0)  # warm-up
    for r in range(REPEATS):
        for name, backend in engines.items():
            rates[name].append(rate(backend, prompts, r))
    syncs = []
    for _ in range(5):
        engines["vllm"].update_weights(model)
        syncs.append(engines["vllm"].last_sync_s)
    return {"tokens_per_s": {name: statistics.median(v) for name, v in rates.items()}, "start_s": start_s,
            "sync_s": statistics.median(syncs)}


def measure(name: str, root: Path) -> dict[int, dict[str, Any]]:
    """cores -> that worker's numbers, every engine on the same model, batch and lengths."""
    path = model_dir(root, name)
    found = {}
    for cores in range(1, min(2, len(os.sched_getaffinity(0))) + 1):
        run = subprocess.run([sys.executable, __file__, "--worker", str(path), str(cores)],
                             capture_output=True, text=True, check=False)
        if run.returncode:
            raise RuntimeError(f"the {cores}-core worker failed:\n{run.stderr[-3000:]}")
        found[cores] = json.loads(run.stdout.strip().splitlines()[-1])
    return found


@pytest.mark.parametrize("name", list(MODELS))
def test_rollout_throughput_and_sync(benchmark: Any, tmp_path_factory: Any, name: str) -> None:
    root = tmp_path_factory.getbasetemp() / "engines"
    result = benchmark.pedantic(measure, args=(name, root), rounds=1, iterations=1)
    parts = []
    for cores, r in result.items():
        hf_label = f"HF rollout, {name}, {BATCH} x {NEW_TOKENS} tokens, {cores} core(s) (per token)"
        parts.append({"label": hf_label, "seconds": 1 / r["tokens_per_s"]["hf"]})
        for engine in ("vllm", "vllm-eager"):
            parts.append({"label": f"{engine} rollout, {name}, {cores} core(s) (per token)",
                          "seconds": 1 / r["tokens_per_s"][engine], "vs": hf_label})
    sync = result[max(result)]["sync_s"]
    parts.append({"label": f"vLLM weight sync, {name}", "seconds": sync, "vs": TRAIN_STEP, "share": True})
    benchmark.extra_info["parts"] = parts
    benchmark.extra_info["measured"] = result


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        rows = {name: measure(name, Path(tmp)) for name in MODELS}
    print(f"\nbatch {BATCH} x {NEW_TOKENS} sampled tokens, fp32, generated tokens/s (median of {REPEATS} "
          "interleaved batches)\n")
    print(*table_head(["model", "cores", "HF", "vLLM compiled", "vLLM eager", "vLLM / HF",
                       "vLLM start, compiled / eager", "weight sync"]), sep="\n")
    for name, result in rows.items():
        for cores, r in result.items():
            t, start = r["tokens_per_s"], r["start_s"]
            print(f"| {name} | {cores} | {t['hf']:.0f} | {t['vllm']:.0f} | {t['vllm-eager']:.0f} | "
                  f"{t['vllm'] / t['hf']:.2f}x / {t['vllm-eager'] / t['hf']:.2f}x | {start['vllm']:.0f} s / "
                  f"{start['vllm-eager']:.0f} s | {1000 * r['sync_s']:.0f} ms |")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        print(json.dumps(worker(Path(sys.argv[2]), int(sys.argv[3]))))
    else:
        main()
