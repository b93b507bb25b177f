"""The learner's step speed against a baseline commit, back to back on this machine: rollout turns
trained per second of a step, and where the step's time goes (generation, memory-reward scoring,
update).

    python -m benchmarks.bench_step                       # 322c495 (before issue 27) vs this tree
    python -m benchmarks.bench_step --baseline REV --rounds 3 --steps 2 --threads 1

Both trees train the same step: the baseline's ``algorithms.mempo.Config`` defaults (10 objectives, 4
questions x 8 rollouts, 256 new tokens a turn, MemPO) from the shipped warm-up, the same seed, no
evaluation. The baseline is ``git archive``-d into a temporary folder and each run is a subprocess
with ``PYTHONPATH`` at its tree, alternating baseline and new ``--rounds`` times, so that a machine
shared with other jobs loads both alike. Step 1 of both starts from the same weights and seeds, so
its rollouts match; later steps differ as the updates do, which turns per second allows for. The
ratio is the median over rounds of new / baseline turns per second, on two clocks: the wall clock
(the learner's own ``metrics.jsonl`` split) and the process's CPU clock (the same phases timed with
``time.process_time``), which other jobs on a shared machine slow far less; with one thread the two
agree on an idle machine.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BASELINE = "322c495"  # main before issue 27
PHASES = ("rollout_s", "memory_reward_s", "update_s", "sync_s", "step_s")
CLOCKS = ("wall", "cpu")
RUN = """
import dataclasses, json, sys, time
import algorithms.mempo as mempo

class Timer(mempo.PhaseTimer):  # the learner's own step split, also on this process's CPU clock
    def __init__(self):
        super().__init__()
        self.cpu, self.last_cpu = {}, time.process_time()
        steps.append(self.cpu)

    def lap(self, name):
        super().lap(name)
        now = time.process_time()
        self.cpu[name], self.last_cpu = now - self.last_cpu, now

steps = []
mempo.PhaseTimer = Timer
fields = {f.name for f in dataclasses.fields(mempo.Config)}
mempo.train(mempo.Config(**{k: v for k, v in json.loads(sys.argv[1]).items() if k in fields}))
print("CPU", json.dumps(steps))
"""
DEFAULTS = ("import dataclasses, json; from algorithms.mempo import Config; "
            "print(json.dumps(dataclasses.asdict(Config())))")


def python(tree: Path, code: str, *args: str) -> str:
    env = {"PYTHONPATH": str(tree), "TOKENIZERS_PARALLELISM": "false", "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", code, *args], cwd=tree, env=env, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"{tree}: {done.stderr[-3000:]}")
    return done.stdout


def one_run(tree: Path, settings: dict[str, Any], run_dir: Path) -> list[dict[str, Any]]:
    """Each step of a run of ``settings`` in ``tree``: its rollout turns and its phases' seconds on the
    wall clock (``metrics.jsonl``) and on the process's CPU clock."""
    printed = python(tree, RUN, json.dumps({**settings, "run_dir": str(run_dir)}))
    cpu = json.loads(printed.rsplit("CPU ", 1)[1])
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    turns = settings["questions_per_step"] * settings["group_size"]
    return [{"turns": m["turns"] * turns, "wall": {k: m[k] for k in PHASES},
             "cpu": {**c, "step_s": sum(c.values())}} for m, c in zip(lines, cpu)]


def turns_per_second(steps: list[dict[str, Any]], clock: str) -> float:
    return sum(s["turns"] for s in steps) / sum(s[clock]["step_s"] for s in steps)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmarks.bench_step", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--baseline", default=BASELINE, help=f"git revision to compare with (default {BASELINE})")
    p.add_argument("--rounds", type=int, default=2, help="baseline/new pairs, alternated (default 2)")
    p.add_argument("--steps", type=int, default=1, help="RL steps per run (default 1)")
    p.add_argument("--threads", type=int, default=1, help="torch threads of both (default 1; 0: each times its own)")
    p.add_argument("--out", default="runs/bench-step", help="where the runs and result.json go")
    return p


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parser().parse_args(argv)
    out = Path(args.out).resolve()  # the runs happen in each tree's folder
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bench-step-") as tmp:
        old = Path(tmp) / "baseline"
        old.mkdir()
        archive = subprocess.run(["git", "archive", args.baseline], cwd=ROOT, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
        # the baseline's default step, set explicitly for both trees (this tree's defaults may differ)
        settings = {**json.loads(python(old, DEFAULTS)), "steps": args.steps, "eval_episodes": 0, "eval_every": 0,
                    "threads": args.threads}
        results: dict[str, list[list[dict[str, Any]]]] = {"baseline": [], "new": []}
        for r in range(args.rounds):
            for name, tree in (("baseline", old), ("new", ROOT)):
                run_dir = out / f"{name}-{r}"
                shutil.rmtree(run_dir, ignore_errors=True)
                results[name].append(one_run(tree, settings, run_dir))
                print(f"round {r} {name}: " + ", ".join(f"{turns_per_second(results[name][-1], c):.2f} turns per "
                                                        f"{c} second" for c in CLOCKS), flush=True)
    from agents.statistics import table_head
    from algorithms.compute import cpu_name

    result: dict[str, Any] = {"baseline": args.baseline, "cpu": cpu_name(), "threads": args.threads,
                              "steps": args.steps, "runs": results}
    lines = [f"{cpu_name()}, {args.threads} thread(s), {args.rounds} rounds of {args.steps} step(s) each; seconds "
             "per step, median over the rounds:"]
    for clock in CLOCKS:
        ratios = [turns_per_second(n, clock) / turns_per_second(b, clock)
                  for b, n in zip(results["baseline"], results["new"])]
        split = {name: {k: statistics.median(sum(s[clock][k] for s in run) / len(run) for run in runs)
                        for k in PHASES if k in runs[0][0][clock]} for name, runs in results.items()}
        result[clock] = {"ratios": ratios, "ratio": statistics.median(ratios), "split_s": split}
        lines += ["", f"{clock} clock:", "",
                  *table_head(["code", "generation", "memory-reward scoring", "update", "step", "turns/s"])]
        for name, runs in results.items():
            t = split[name]
            rate = statistics.median(turns_per_second(run, clock) for run in runs)
            lines.append(f"| {name} | {t['rollout_s']:.1f} | {t['memory_reward_s']:.1f} | {t['update_s']:.1f} | "
                         f"{t['step_s']:.1f} | {rate:.2f} |")
        lines += ["", f"new / baseline turns per second ({clock}): {result[clock]['ratio']:.2f} (rounds: "
                      f"{', '.join(f'{x:.2f}' for x in ratios)})"]
    result["markdown"] = "\n".join(lines)
    (out / "result.json").write_text(json.dumps(result, indent=1))
    print("\n" + result["markdown"])
    return result


if __name__ == "__main__":
    main()
