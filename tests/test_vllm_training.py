"""The learners with the in-process vLLM rollout engine: MemPO through ``train`` and GRPO through its
command line, 2 steps each, on the untrained tiny policy."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("vllm")

pytestmark = pytest.mark.vllm

BACKEND = "vllm#enforce_eager=true#max_model_len=2048"
SMALL = dict(steps=2, eval_episodes=0, questions_per_step=2, group_size=2, max_turns=3, max_new_tokens=24)


def check_run(run_dir: Path) -> list[dict]:
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2]
    assert all(m["format_ok"] >= 0 and m["turns"] >= 1 for m in metrics)
    assert json.loads((run_dir / "checkpoint" / "step.json").read_text()) == {"step": 2}
    return metrics


def test_mempo_trains_with_vllm(policy_dir: Path, tmp_path: Path) -> None:
    from algorithms.mempo import Config, train

    for backend in (BACKEND, "hf"):
        result = train(Config(backend=backend, policy=str(policy_dir), run_dir=str(tmp_path / backend), **SMALL))
        assert result["steps"] == 2
    # the same loop, the same quantities logged (the samples differ: each engine has its own sampler),
    # plus the engine's weight-sync time
    engine_keys = [set(m) for m in check_run(tmp_path / BACKEND)]
    assert engine_keys == [set(m) | {"sync_s"} for m in check_run(tmp_path / "hf")]


def test_grpo_command_line_trains_with_vllm(policy_dir: Path, tmp_path: Path) -> None:
    args = [f"--{k.replace('_', '-')}={v}" for k, v in SMALL.items()]
    run = subprocess.run([sys.executable, "-m", "algorithms.grpo", f"--backend={BACKEND}", f"--policy={policy_dir}",
                          f"--run-dir={tmp_path / 'grpo'}", *args], capture_output=True, text=True, timeout=900,
                         env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})
    assert run.returncode == 0, run.stderr[-3000:]
    check_run(tmp_path / "grpo")
