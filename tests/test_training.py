"""End to end on the tiny policy: warm-up, one RL step of each algorithm, kill -9 and resume."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from algorithms.mempo import Config, load_checkpoint, save_checkpoint, train
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


def test_warmup_turns_come_in_both_views(tokenizer):
    """A full_context share of the oracle episodes is seen as the whole history, the rest as the
    memory view: the memory view keeps the last search only, the full view every earlier one."""
    from algorithms.sft import oracle_turns

    def searches_in_prompts(share: float) -> list[int]:
        turns = oracle_turns(SFTConfig(episodes=12, worlds=2, full_context=share), tokenizer)
        return [tokenizer.decode(p).count("<search>") for p, _ in turns]

    def long_prompts(share: float) -> int:
        return sum(n >= 2 for n in searches_in_prompts(share))

    assert max(searches_in_prompts(0.0)) == 1
    assert 0 < long_prompts(0.5) < long_prompts(1.0)


def test_warmup_pointer_memory_share(tokenizer):
    """A pointer_memory share of the episodes comes from the oracle whose notes only name documents."""
    from algorithms.sft import oracle_turns

    def pointer_notes(share: float) -> int:
        turns = oracle_turns(SFTConfig(episodes=12, worlds=2, pointer_memory=share), tokenizer)
        return sum(tokenizer.decode(r).count(": found ") for _, r in turns)

    assert pointer_notes(0.0) == 0 and 0 < pointer_notes(0.5) < pointer_notes(1.0)


def test_default_warmup_continues_the_reader_with_pointer_memory(monkeypatch, tmp_path):
    """Stage 2 starts from stage 1's checkpoint, with longer horizons and the sloppy demonstrator."""
    import algorithms.sft as sft

    built = []
    monkeypatch.setattr(sft, "ensure_warmup", lambda cfg: built.append(cfg) or tmp_path / f"stage{len(built)}")
    assert sft.default_warmup(task_seed=3, cache_dir=str(tmp_path)) == tmp_path / "stage2"
    reader, memory = built
    assert reader == SFTConfig(cache_dir=str(tmp_path), task_seed=3)
    assert memory.base == str(sft.warmup_dir(reader)) and memory.task_seed == 3 and memory.pointer_memory == 0.5
    assert max(memory.objectives) > max(reader.objectives) and memory.steps < reader.steps
    # world 0's is shipped (tests/test_shipped_warmup.py), and built only when asked
    assert sft.default_warmup(cache_dir=str(tmp_path), build=True) == tmp_path / "stage4"
    assert [cfg.task_seed for cfg in built] == [3, 3, 0, 0]


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
    means = {name: row["em"][0] for name, row in result["eval"].items()}
    assert result["gain"]["em"][0] == pytest.approx(means["trained"] - means["start"])  # paired, same questions
    assert "paired on the same questions" in (run / "eval.md").read_text()
    if algo == "mempo":  # a damaged checkpoint stops the resume with a clear error, and deletes nothing
        (run / "checkpoint" / "model.safetensors").write_bytes(b"not a tensor file")
        with pytest.raises(RuntimeError, match="unreadable"):
            train(Config(algo=algo, policy=str(warmup), run_dir=str(run), steps=2, **TINY))
        assert len(metrics(run)) == 1 and (run / "checkpoint" / "trainer.pt").exists()


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


def test_checkpoint_swap_survives_a_kill_at_any_point(warmup, tmp_path):
    model = AutoModelForCausalLM.from_pretrained(warmup)
    tokenizer = AutoTokenizer.from_pretrained(warmup)
    optimizer = torch.optim.AdamW(model.parameters())
    step = lambda: json.loads((load_checkpoint(tmp_path) / "step.json").read_text())["step"]  # noqa: E731
    save_checkpoint(tmp_path, model, tokenizer, optimizer, 1)
    # killed after the current checkpoint was moved aside, before the new one took its place
    (tmp_path / "checkpoint").rename(tmp_path / "checkpoint.old")
    assert load_checkpoint(tmp_path) == tmp_path / "checkpoint.old" and step() == 1
    save_checkpoint(tmp_path, model, tokenizer, optimizer, 2)
    assert load_checkpoint(tmp_path) == tmp_path / "checkpoint" and step() == 2
    assert not (tmp_path / "checkpoint.old").exists()
    # killed after the new checkpoint was in place, before the old one was removed
    shutil.copytree(tmp_path / "checkpoint", tmp_path / "checkpoint.old")
    save_checkpoint(tmp_path, model, tokenizer, optimizer, 3)
    assert step() == 3 and not (tmp_path / "checkpoint.old").exists()


@pytest.mark.parametrize("args, message", [
    (["--group-size", "0"], "group_size must be >= 1, got 0"),
    (["--steps", "-1"], "steps must be >= 1, got -1"),
    (["--backend", "bogus"], "unknown backend 'bogus'"),
    (["--policy", "/nonexistent"], "policy '/nonexistent' is not a model folder"),
    (["--resume", "/nonexistent"], "--resume /nonexistent: no config.json there"),
])
def test_bad_cli_values_exit_2_naming_the_value(args, message, capsys):
    from algorithms.mempo import main

    with pytest.raises(SystemExit) as exit_:
        main("grpo", args)
    assert exit_.value.code == 2 and message in " ".join(capsys.readouterr().err.split())
