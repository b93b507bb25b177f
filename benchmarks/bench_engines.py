"""Rollout engines: generated tokens/s of vLLM (in-process) vs the HF backend on the same model, batch
and lengths, in one run; vLLM's start-up and weight-sync times.

    python benchmarks/bench_engines.py       # one markdown table
    pytest benchmarks/bench_engines.py       # or: python -m benchmarks.systems --only engines

The batch is the learner's rollout shape: 32 first-turn prompts of MemSearchQA-v0 (memory view, 2
objectives, about 80 tokens) through the tiny policy's chat template, 128 sampled tokens each
(temperature 1, no stop strings: only an end-of-sequence token ends a row early; tokens/s counts
the tokens actually generated). Models: the untrained tiny policy (1.3M parameters) and a 20M
Qwen2 with the same tokenizer (hidden 512, 4 layers), both fp32.

Each engine runs in a process of its own, on 1 and on 2 cores (HF: torch threads; vLLM: its OpenMP
threads bound to that many cores), because vLLM binds the threads of the whole process and because
on a 2-core machine shared with other work 2 threads can be several times slower than 1: compare
engines at the same core count, and read the load next to the numbers. vLLM runs compiled (the
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
from algorithms.tiny_policy import build_model, build_tiny_policy  # noqa: E402
from mempo_env.views import render_prompt  # noqa: E402

BATCH, NEW_TOKENS, REPEATS = 32, 128, 3
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


def tokens_per_second(backend: Any, prompts: list[list[int]]) -> float:
    """Median over REPEATS seeded batches, after one warm-up batch."""
    backend.generate(prompts[:4], max_new_tokens=8, seed=0)
    rates = []
    for r in range(REPEATS):
        start = time.perf_counter()
        out = backend.generate(prompts, max_new_tokens=NEW_TOKENS, seed=r)
        rates.append(sum(len(g[0].token_ids) for g in out) / (time.perf_counter() - start))
    return statistics.median(rates)


def worker(engine: str, path: Path, cores: int) -> dict[str, float]:
    """One engine on ``cores`` cores, in a process of its own (vLLM binds the process's OpenMP threads)."""
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    prompts = rollout_prompts(tokenizer)
    if engine == "hf":
        torch.set_num_threads(cores)
        return {"tokens_per_s": tokens_per_second(HFBackend(model, tokenizer), prompts)}
    os.environ["VLLM_CPU_OMP_THREADS_BIND"] = ",".join(map(str, sorted(os.sched_getaffinity(0))[:cores]))
    start = time.perf_counter()
    backend = VLLMBackend.for_model(model, tokenizer, max_model_len=1024, enforce_eager=engine == "vllm-eager")
    result = {"start_s": time.perf_counter() - start, "tokens_per_s": tokens_per_second(backend, prompts)}
    syncs = []
    for _ in range(5):
        backend.update_weights(model)
        syncs.append(backend.last_sync_s)
    return {**result, "sync_s": statistics.median(syncs)}


ENGINES = [("hf", 1), ("hf", 2), ("vllm", 1), ("vllm", 2), ("vllm-eager", 2)]


def measure(name: str, root: Path) -> dict[str, dict[str, float]]:
    """``"engine/cores"`` -> that worker's numbers, every engine on the same model, batch and lengths."""
    path = model_dir(root, name)
    found = {}
    for engine, cores in ENGINES:
        if cores > len(os.sched_getaffinity(0)):
            continue
        run = subprocess.run([sys.executable, __file__, "--worker", engine, str(path), str(cores)],
                             capture_output=True, text=True, check=False)
        if run.returncode:
            raise RuntimeError(f"{engine} on {cores} core(s) failed:\n{run.stderr[-3000:]}")
        found[f"{engine}/{cores}"] = json.loads(run.stdout.strip().splitlines()[-1])
    return found


def best_hf(result: dict[str, dict[str, float]]) -> float:
    return max(v["tokens_per_s"] for k, v in result.items() if k.startswith("hf/"))


@pytest.mark.parametrize("name", list(MODELS))
def test_rollout_throughput_and_sync(benchmark: Any, tmp_path_factory: Any, name: str) -> None:
    root = tmp_path_factory.getbasetemp() / "engines"
    result = benchmark.pedantic(measure, args=(name, root), rounds=1, iterations=1)
    hf_label = f"HF rollout, {name}, {BATCH} x {NEW_TOKENS} tokens (per token, best of 1-2 threads)"
    parts = [{"label": hf_label, "seconds": 1 / best_hf(result)}]
    for key, value in result.items():
        if key.startswith("vllm"):
            parts.append({"label": f"vLLM rollout, {name}, {key} cores (per token)",
                          "seconds": 1 / value["tokens_per_s"], "vs": hf_label})
    sync = result.get("vllm/2", result["vllm/1"])["sync_s"]
    parts.append({"label": f"vLLM weight sync, {name}", "seconds": sync, "vs": TRAIN_STEP, "share": True})
    benchmark.extra_info["parts"] = parts
    benchmark.extra_info["measured"] = result


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        rows = {name: measure(name, Path(tmp)) for name in MODELS}
    columns = [f"{engine}/{cores}" for engine, cores in ENGINES if f"{engine}/{cores}" in rows[next(iter(rows))]]
    print(f"\nbatch {BATCH} x {NEW_TOKENS} sampled tokens, fp32, generated tokens/s (median of {REPEATS}); "
          "engine/cores; vLLM start-up and weight sync on 2 cores\n")
    print("| model | " + " | ".join(columns) + " | vLLM / HF, 1 core | vLLM / HF, 2 cores | vLLM start, compiled "
          "/ eager | weight sync |")
    print("|---" * (len(columns) + 5) + "|")
    for name, r in rows.items():
        rates = " | ".join(f"{r[c]['tokens_per_s']:.0f}" for c in columns)
        ratios = " | ".join(f"{r[f'vllm/{n}']['tokens_per_s'] / r[f'hf/{n}']['tokens_per_s']:.2f}x"
                            if f"vllm/{n}" in r else "" for n in (1, 2))
        last = "vllm/2" if "vllm/2" in r else "vllm/1"
        eager = r.get("vllm-eager/2", {}).get("start_s", float("nan"))
        print(f"| {name} | {rates} | {ratios} | {r[last]['start_s']:.0f} s / {eager:.0f} s | "
              f"{1000 * r[last]['sync_s']:.0f} ms |")

if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        print(json.dumps(worker(sys.argv[2], Path(sys.argv[3]), int(sys.argv[4]))))
    else:
        main()
