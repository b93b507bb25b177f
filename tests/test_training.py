"""End to end on the tiny policy: warm-up, one RL step of each algorithm, kill -9 and resume."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from algorithms.mempo import Config, train
from algorithms.sft import SFTConfig, ensure_warmup

TINY = dict(questions_per_step=2, group_size=2, max_turns=4, max_new_tokens=24, minibatch_size=8,
            microbatch_size=4, eval_episodes=0)
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def warmup(tmp_path_factory):
    cfg = SFTConfig(cache_dir=str(tmp_path_factory.mktemp("cache")), episodes=20, steps=3, batch_size=8)
    path = ensure_warmup(cfg)
    assert ensure_warmup(cfg) == path  # built once, then reused
    return path


def metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("algo", ["mempo", "grpo"])
def test_one_step_of_each_algorithm(warmup, tmp_path, algo):
    run = tmp_path / algo
    result = train(Config(algo=algo, policy=str(warmup), run_dir=str(run), steps=1, **{**TINY, "eval_episodes": 2}))
    [m] = metrics(run)
    assert m["step"] == 1 and 0 <= m["reward"] <= 2 and m["total_tokens"] > 0
    if algo == "grpo":
        assert "p_mem" not in m  # the memory term is MemPO's only
    assert (run / "checkpoint" / "model.safetensors").exists()
    assert set(result["eval"]) == {"start", "trained"} and (run / "eval.md").exists()


def run_cli(args: list[str]) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "algorithms.mempo", *args], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def test_killed_run_resumes_to_the_same_steps_without_duplicate_metrics(warmup, tmp_path):
    run = tmp_path / "run"
    args = ["--policy", str(warmup), "--run-dir", str(run), "--steps", "4", "--checkpoint-every", "1"]
    args += [f"--{k.replace('_', '-')}={v}" for k, v in TINY.items()]
    proc = run_cli(args)
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        step_file = run / "checkpoint" / "step.json"
        if step_file.exists() and json.loads(step_file.read_text())["step"] >= 2:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert json.loads((run / "checkpoint" / "step.json").read_text())["step"] >= 2
    resumed = run_cli(["--resume", str(run)])
    assert resumed.wait(timeout=300) == 0, resumed.stderr.read().decode()[-2000:]
    steps = [m["step"] for m in metrics(run)]
    assert steps == [1, 2, 3, 4]
    assert json.loads((run / "checkpoint" / "step.json").read_text())["step"] == 4
