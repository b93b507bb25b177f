"""End to end on the tiny policy: warm-up, one RL step of each algorithm, kill -9 and resume."""

import dataclasses
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
from shared_data import needs_shared
from transformers import AutoModelForCausalLM, AutoTokenizer

from agents.episode_log import RunFolderError
from algorithms.mempo import Config, load_checkpoint, save_checkpoint, train
from algorithms.sft import SFTConfig, ensure_warmup

TINY = dict(questions_per_step=2, group_size=2, max_turns=4, max_new_tokens=24, minibatch_size=8,
            pack_tokens=256, eval_episodes=0, eval_every=0)
ROOT = Path(__file__).resolve().parents[1]
TIMES = ("rollout_s", "memory_reward_s", "update_s", "sync_s", "step_s")


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


def test_warmup_leaves_out_turns_longer_than_the_window(policy_dir, tokenizer, tmp_path):
    """A full-context view at long horizons can outgrow the model's window: such turns are left out of
    training (not cut, which would teach from a prompt the model never sees whole) and counted."""
    from algorithms.sft import oracle_turns, warm_up

    base = tmp_path / "short-window"
    shutil.copytree(policy_dir, base)
    config = json.loads((base / "config.json").read_text())
    (base / "config.json").write_text(json.dumps({**config, "max_position_embeddings": 700}))
    cfg = SFTConfig(base=str(base), episodes=4, worlds=2, objectives=(3,), full_context=1.0, steps=1, batch_size=4)
    lengths = [len(p) + len(r) for p, r in oracle_turns(cfg, tokenizer)]
    over = sum(n > 700 for n in lengths)
    assert 0 < over < len(lengths)  # the case exists and does not empty the data
    build = json.loads((warm_up(cfg, tmp_path / "out") / "build.json").read_text())
    assert build["turns_over_window"] == over and build["turns"] == len(lengths) - over


def test_micro_batches_give_the_whole_steps_gradient(policy_dir, tokenizer):
    """A step split into micro-batches (in order of length) adds up to the gradient of the step at once."""
    from algorithms.compute import Setting
    from algorithms.sft import accumulate, oracle_turns

    model = AutoModelForCausalLM.from_pretrained(policy_dir, dtype=torch.float32)
    batch = oracle_turns(SFTConfig(episodes=3, worlds=1, objectives=(2,)), tokenizer)[:5]
    assert len({len(p) + len(r) for p, r in batch}) > 1  # lengths differ: the order and padding change

    def gradient(microbatch_size: int) -> tuple[float, torch.Tensor]:
        model.zero_grad()
        cfg = SFTConfig(microbatch_size=microbatch_size)
        loss = accumulate(model, batch, Setting(), cfg, tokenizer.pad_token_id)
        return loss, torch.cat([p.grad.flatten() for p in model.parameters()])

    (whole, g), (parts, g2) = gradient(0), gradient(2)
    assert parts == pytest.approx(whole, rel=1e-4)
    assert torch.allclose(g2, g, rtol=1e-3, atol=1e-6 * g.abs().max().item())


def test_default_warmup_is_one_honest_stage_over_every_horizon(monkeypatch, tmp_path):
    """The default recipe learns from the oracle that keeps its evidence, at 1-10 objectives; other
    worlds are built, world 0's is shipped and built only when asked."""
    import algorithms.sft as sft

    built = []
    monkeypatch.setattr(sft, "ensure_warmup", lambda cfg: built.append(cfg) or tmp_path / f"build{len(built)}")
    assert sft.default_warmup(task_seed=3, cache_dir=str(tmp_path)) == tmp_path / "build1"
    assert built == [SFTConfig(cache_dir=str(tmp_path), task_seed=3)]
    assert built[0].pointer_memory == 0 and built[0].full_context == 0 and built[0].objectives == tuple(range(1, 11))
    assert sft.default_warmup(cache_dir=str(tmp_path)) == sft.SHIPPED  # tests/test_shipped_warmup.py
    assert sft.default_warmup(cache_dir=str(tmp_path), build=True) == tmp_path / "build2"
    assert [cfg.task_seed for cfg in built] == [3, 0]


def metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("algo", ["mempo", "grpo"])
def test_one_step_of_each_algorithm(warmup, tmp_path, algo):
    run = tmp_path / algo
    result = train(Config(algo=algo, policy=str(warmup), run_dir=str(run), steps=1, **{**TINY, "eval_episodes": 2}))
    [m] = metrics(run)
    assert m["step"] == 1 and 0 <= m["reward"] <= 2 and m["total_tokens"] > 0
    assert all(m[k] >= 0 for k in TIMES)  # the step time split, for the loggers and the logs
    if algo == "grpo":
        assert "p_mem" not in m  # the memory term is MemPO's only
    assert (run / "checkpoint" / "model.safetensors").exists()
    assert set(result["eval"]) == {"start", "trained"} and (run / "eval.md").exists()
    means = {name: row["em"][0] for name, row in result["eval"].items()}
    assert result["gain"]["em"][0] == pytest.approx(means["trained"] - means["start"])  # paired, same questions
    assert "paired on the same questions" in (run / "eval.md").read_text()
    if algo == "mempo":  # a damaged checkpoint stops the resume with a clear error, and deletes nothing
        (run / "checkpoint" / "model.safetensors").write_bytes(b"not a tensor file")
        with pytest.raises(RunFolderError, match="unreadable"):
            train(Config(algo=algo, policy=str(warmup), run_dir=str(run), steps=2, **TINY))
        assert len(metrics(run)) == 1 and (run / "checkpoint" / "trainer.pt").exists()
        before = folder_state(run)  # the command line: one line, no traceback, nothing changed
        refused(run_cli(["--resume", str(run), "--steps", "2"]), f"checkpoint {run / 'checkpoint'} is unreadable")
        assert folder_state(run) == before


def test_a_step_in_another_context_strategy(warmup, tmp_path):
    """--context window:2: rollouts, update and the held-out evaluation in that strategy's view."""
    result = train(Config(policy=str(warmup), run_dir=str(tmp_path), steps=1, context="window:2",
                          **{**TINY, "eval_episodes": 2}))
    [m] = metrics(tmp_path)
    assert m["step"] == 1 and m["turns"] > 0 and m["update_s"] > 0
    assert {row["context"] for row in result["eval"].values()} == {"window:2"}


def run_cli(args: list[str]) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "algorithms.mempo", *args], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def tiny_run_args(warmup: Path, run: Path, steps: int) -> list[str]:
    """A CLI run of the TINY settings, checkpointed every step, on one thread (so that two runs compute alike)."""
    args = ["--policy", str(warmup), "--run-dir", str(run), "--steps", str(steps), "--checkpoint-every", "1",
            "--threads", "1"]
    return args + [f"--{k.replace('_', '-')}={v}" for k, v in TINY.items()]


def folder_state(run: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``run``, its bytes and modification time: what a refused command must leave alone
    (but ``run.lock``, where whichever learner holds the folder writes its pid)."""
    return {str(p.relative_to(run)): (p.read_bytes(), p.stat().st_mtime_ns) for p in run.rglob("*")
            if p.is_file() and p.name != "run.lock"}


def refused(proc: subprocess.Popen, *messages: str) -> str:
    """The error of a CLI run that had to refuse: exit 2, one line holding every message, no traceback."""
    assert proc.wait(timeout=300) == 2
    err = proc.stderr.read().decode()
    assert "Traceback" not in err and err.count("error:") == 1 and all(m in err for m in messages), err[-2000:]
    return err


def without_times(lines: list[dict]) -> list[dict]:
    """Metrics lines less their seconds, which differ from run to run."""
    return [{k: v for k, v in m.items() if k not in (*TIMES, "eval_s")} for m in lines]


def test_killed_run_resumes_to_the_same_steps_without_duplicate_metrics(warmup, tmp_path):
    """kill -9, then --resume continues from the checkpoint to the metrics of an uninterrupted run. Without a
    complete checkpoint it refuses in one line and changes nothing, where starting again would rewrite the
    steps metrics.jsonl records."""
    run, whole = tmp_path / "run", tmp_path / "uninterrupted"
    uninterrupted = run_cli(tiny_run_args(warmup, whole, steps=4))
    proc = run_cli(tiny_run_args(warmup, run, steps=4))
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        step_file = run / "checkpoint" / "step.json"
        if step_file.exists() and json.loads(step_file.read_text())["step"] >= 2:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert json.loads((run / "checkpoint" / "step.json").read_text())["step"] >= 2
    step_json, kept = run / "checkpoint" / "step.json", tmp_path / "step.json"
    step_json.rename(kept)  # an incomplete checkpoint
    before = folder_state(run)
    refused(run_cli(["--resume", str(run)]), f"{run / 'checkpoint'} lacks step.json", "another --run-dir")
    assert folder_state(run) == before
    kept.rename(step_json)
    # no checkpoint at all (nor the previous one, which a kill while it was being removed leaves in part)
    aside = {name: tmp_path / "aside" / name for name in ("checkpoint", "checkpoint.old") if (run / name).exists()}
    (tmp_path / "aside").mkdir()
    for name, path in aside.items():
        (run / name).rename(path)
    before = folder_state(run)
    refused(run_cli(["--resume", str(run)]), f"{run / 'metrics.jsonl'} records", "no checkpoint to continue from")
    assert folder_state(run) == before
    for name, path in aside.items():
        path.rename(run / name)
    resumed = run_cli(["--resume", str(run)])
    assert resumed.wait(timeout=300) == 0, resumed.stderr.read().decode()[-2000:]
    assert uninterrupted.wait(timeout=300) == 0, uninterrupted.stderr.read().decode()[-2000:]
    assert [m["step"] for m in metrics(run)] == [1, 2, 3, 4]
    assert without_times(metrics(run)) == without_times(metrics(whole))
    assert json.loads((run / "checkpoint" / "step.json").read_text())["step"] == 4


def test_a_resume_refuses_a_damaged_history(warmup, tmp_path):
    """A checkpoint at step N needs metrics.jsonl to record steps 1-N once each: with a line lost or repeated,
    a continued run would average its rewards over a gap or a repeat, so the resume is refused in one line."""
    run = tmp_path / "run"
    train(Config(policy=str(warmup), run_dir=str(run), steps=2, checkpoint_every=1, **TINY))
    lines = (run / "metrics.jsonl").read_text().splitlines(keepends=True)
    for damaged in (lines[1:], [*lines, lines[1]]):
        (run / "metrics.jsonl").write_text("".join(damaged))
        before = folder_state(run)
        refused(run_cli(["--resume", str(run), "--steps", "3"]), f"{run / 'metrics.jsonl'} does not record steps 1-2")
        assert folder_state(run) == before


def test_a_second_learner_on_a_run_folder_is_refused_and_the_first_completes(warmup, tmp_path):
    """A run folder is held by one learner: a second one on it exits 2 at once, naming the holder, and
    touches nothing; the first completes every step once. The first is stopped (SIGSTOP) while the second
    tries, so that it holds the folder whatever the machine's speed."""
    run = tmp_path / "run"
    first = run_cli(tiny_run_args(warmup, run, steps=2))
    try:
        deadline = time.time() + 300
        lock = run / "run.lock"
        while time.time() < deadline and first.poll() is None:
            if lock.exists() and lock.read_text().strip() == str(first.pid) and (run / "config.json").exists():
                break
            time.sleep(0.05)
        first.send_signal(signal.SIGSTOP)
        assert lock.exists() and lock.read_text().strip() == str(first.pid), "the learner never held its folder"
        before = folder_state(run)
        busy = f"{run} is in use by another run (pid {first.pid}); wait for it to end or use another --run-dir"
        refused(run_cli(tiny_run_args(warmup, run, steps=2)), busy)
        refused(run_cli(["--resume", str(run)]), busy)
        assert folder_state(run) == before
        first.send_signal(signal.SIGCONT)
        assert first.wait(timeout=600) == 0, first.stderr.read().decode()[-2000:]
    finally:
        first.kill()  # a stopped or running learner never outlives the test
        first.wait()
    assert [m["step"] for m in metrics(run)] == [1, 2]
    assert json.loads((run / "checkpoint" / "step.json").read_text())["step"] == 2


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
    (["--dataset", "nope"], "unknown dataset 'nope'"),
    (["--split", "test", "--eval-split", "test"], "--eval-split 'test' shares"),
    (["--eval-fraction", "1"], "eval_fraction must be in (0, 1), got 1.0"),
    (["--reward", "f1"], "reward must be one of ('score', 'aligned'), not 'f1'"),
    (["--min-objectives", "11"], "min_objectives must be 0 or from 1 to objectives (6), got 11"),
    (["--context", "window:0"], "window:K needs a positive integer K (the turns kept), got 0"),
    (["--device", "tpu"], "device must be 'auto', 'cpu', 'cuda' or 'cuda:N', not 'tpu'"),
    (["--memory-reward", "query"], "memory_reward must be one of ('mempo', 'progress', 'infomem', 'write'), not"),
    (["--memory-reward", "write"], "memory_reward 'write' needs algo mempo"),
    (["--search", "gold"], "search must be one of ('retriever', 'oracle'), not 'gold'"),
])
def test_bad_cli_values_exit_2_naming_the_value(args, message, capsys):
    from algorithms.mempo import main

    with pytest.raises(SystemExit) as exit_:
        main("grpo", args)
    assert exit_.value.code == 2 and message in " ".join(capsys.readouterr().err.split())


def test_the_device_is_the_gpu_where_torch_sees_one_and_a_missing_gpu_is_one_clear_error(monkeypatch, capsys):
    import torch

    from algorithms.mempo import main, resolve_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    assert resolve_device("auto") == "cpu" and resolve_device("cpu") == "cpu"
    with pytest.raises(SystemExit) as exit_:
        main("mempo", ["--device", "cuda"])
    assert exit_.value.code == 2 and "device cuda: torch" in capsys.readouterr().err
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert resolve_device("auto") == "cuda" and resolve_device("cuda:1") == "cuda:1"
    with pytest.raises(ValueError, match="device cuda:2: torch .* sees 2 CUDA GPU"):
        resolve_device("cuda:2")


def test_every_step_reaches_the_chosen_loggers(warmup, tmp_path, monkeypatch, capsys):
    """train logs each metrics.jsonl line to the loggers of Config.log, and says where it wrote."""
    import algorithms.mempo as mempo
    import algorithms.tracking as tracking

    logged, closed = [], []

    class Recorder:
        def log(self, metrics: dict, step: int) -> None:
            logged.append((step, metrics))

        def close(self) -> None:
            closed.append(True)

    monkeypatch.setattr(mempo, "check_loggers", lambda names: None)  # Config's check: the package may be absent
    monkeypatch.setitem(tracking.LOGGERS, "tensorboard", lambda run_dir, config: Recorder())
    run = tmp_path / "run"
    train(Config(algo="grpo", policy=str(warmup), run_dir=str(run), steps=2, log=("tensorboard",), **TINY))
    assert [(step, m) for step, m in logged] == [(m["step"], m) for m in metrics(run)] and closed == [True]
    assert f"written to {run}" in capsys.readouterr().out


def test_tensorboard_writes_event_files(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from algorithms.tracking import Tracker

    tracker = Tracker(tmp_path, ("tensorboard",), {"algo": "mempo"})
    tracker.log({"step": 1, "reward": 0.5, "p_mem": 0.25, "rollout_s": 2.0}, step=1)
    tracker.close()
    events = EventAccumulator(str(tmp_path / "tensorboard")).Reload()
    assert {"train/reward", "train/p_mem", "time/rollout_s"} <= set(events.Tags()["scalars"])
    assert [(e.step, e.value) for e in events.Scalars("train/reward")] == [(1, 0.5)]


def test_wandb_logs_offline(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    from algorithms.tracking import Tracker

    monkeypatch.setenv("WANDB_MODE", "offline")
    tracker = Tracker(tmp_path, ("wandb",), {"algo": "mempo"})
    tracker.log({"step": 1, "reward": 0.5, "rollout_s": 2.0}, step=1)
    tracker.close()
    assert list((tmp_path / "wandb").glob("offline-run-*"))


@pytest.mark.parametrize("name, package", [("tensorboard", "tensorboard"), ("wandb", "wandb")])
def test_a_logger_without_its_package_is_one_clear_error(name, package, monkeypatch):
    monkeypatch.setitem(sys.modules, package, None)  # import fails, as where it is not installed
    with pytest.raises(ValueError, match=f"log {name!r} needs the {package!r} package"):
        Config(log=(name,))
    with pytest.raises(ValueError, match="unknown logger 'mlflow'"):
        Config(log=("mlflow",))


def test_grpo_help_is_grpos():
    """algorithms.grpo's --help names GRPO's options only (that no --help imports torch: test_cli_help)."""
    help_ = subprocess.run([sys.executable, "-m", "algorithms.grpo", "--help"], cwd=ROOT, capture_output=True,
                           text=True, check=True, env={**os.environ, "COLUMNS": "200"}).stdout
    assert help_.startswith("usage: python -m algorithms.grpo") and "GRPO:" in help_ and "MemPO:" not in help_


def test_the_runner_says_where_it_wrote(tmp_path, capsys):
    from benchmarks.run import main as run_main

    out = tmp_path / "eval"
    run_main(["--agents", "oracle", "--objectives", "1", "--context", "memory", "--episodes", "1", "--no-plots",
              "--out", str(out)])
    assert capsys.readouterr().out.rstrip().endswith(f"written to {out}")


def test_held_out_questions_never_train():
    """A dataset without an evaluation split loses a fixed share of its questions to the evaluation."""
    from mempo_env.tasks import held_out, make_generated_task

    task = make_generated_task("test", hops=1)
    train_, test = held_out(task, 0.25)
    assert held_out(task, 0.25) == (train_, test)  # deterministic
    ids = lambda t: {q.id for q in t.questions}  # noqa: E731
    assert not ids(train_) & ids(test) and ids(train_) | ids(test) == ids(task)
    assert len(test.questions) == round(0.25 * len(task.questions)) and test.corpus is task.corpus


def test_question_groups_cover_the_horizons_asked_for():
    """A pure function of (seed, step); with min_objectives, each group's size is drawn from the range."""
    from algorithms.mempo import question_groups

    cfg = Config(objectives=4, min_objectives=2, questions_per_step=50)
    groups = question_groups(cfg, 3, 20)
    assert groups == question_groups(cfg, 3, 20) and {len(g) for g in groups} == {2, 3, 4}
    assert all(len(set(g)) == len(g) for g in groups)
    assert {len(g) for g in question_groups(Config(objectives=4, questions_per_step=5), 3, 20)} == {4}


@needs_shared
def test_one_step_on_a_shared_set(warmup, tmp_path):
    """Trained on hotpotqa's train100, evaluated on a held-out share of it (a dev split would be --eval-split dev)."""
    from algorithms.mempo import datasets

    cfg = Config(dataset="hotpotqa", split="train100", eval_fraction=0.2, policy=str(warmup),
                 run_dir=str(tmp_path / "run"), steps=1, **{**TINY, "eval_episodes": 2})
    train_, test = datasets(cfg)
    assert len(train_.questions) == 80 and len(test.questions) == 20
    result = train(cfg)
    [m] = metrics(tmp_path / "run")
    assert m["step"] == 1 and m["total_tokens"] > 0  # the tiny policy, trained on generated questions, fails them
    assert set(result["eval"]) == {"start", "trained"}
    assert datasets(Config(dataset="hotpotqa", split="train100", eval_split="dev"))[1].name == "hotpotqa"


def test_a_run_logs_its_learning_curve_and_a_sampled_evaluation(warmup, tmp_path):
    """Every step: the rollout reward per question group and its moving average with an interval; every
    eval_every steps (and at 0): held-out greedy and sampled F1; at the end: both, start vs trained, paired."""
    run = tmp_path / "run"
    curve = dict(objectives=2, eval_every=1, curve_questions=2, eval_samples=2, eval_episodes=3, reward_window=2)
    result = train(Config(policy=str(warmup), run_dir=str(run), steps=2, **{**TINY, **curve}))
    lines = metrics(run)
    assert [len(m["group_rewards"]) for m in lines] == [2, 2]
    assert lines[1]["reward_avg"] == pytest.approx(sum(lines[0]["group_rewards"] + lines[1]["group_rewards"]) / 4)
    assert lines[1]["reward_avg_ci"] >= 0 and all(m["eval_s"] > 0 for m in lines)
    points = [json.loads(x) for x in (run / "curve.jsonl").read_text().splitlines()]
    assert [p["step"] for p in points] == [0, 1, 2]
    assert all(len(p["per_question"]["greedy"]) == len(p["per_question"]["sampled"]) == 2 for p in points)
    record = json.loads((run / "eval.json").read_text())
    assert record["samples"] == 2 and len(record["sampled_per_question"]["trained"]) == 3
    start, trained = (record["sampled_per_question"][k] for k in ("start", "trained"))
    assert result["gain"]["sampled_f1"][0] == pytest.approx(sum(trained) / 3 - sum(start) / 3)
    assert "Sampled at temperature 1.0, 2 episodes per question" in (run / "eval.md").read_text()


def test_the_control_trains_on_the_same_questions_without_the_information(warmup, tmp_path):
    """Step 1 of a run and of its control plays the same rollouts (same weights, seeds and questions);
    the control's update then sees the advantages permuted within groups."""
    runs = {control: tmp_path / control for control in ("none", "shuffled")}
    for control, run in runs.items():
        train(Config(policy=str(warmup), run_dir=str(run), steps=1, control=control, **TINY))
    first = {control: metrics(run)[0] for control, run in runs.items()}
    assert first["none"]["group_rewards"] == first["shuffled"]["group_rewards"]
    assert (first["none"]["total_tokens"], first["none"]["turns"]) == (first["shuffled"]["total_tokens"],
                                                                       first["shuffled"]["turns"])
    with pytest.raises(ValueError, match="control must be one of"):
        Config(control="zero")


def test_a_run_folder_of_other_settings_is_refused_and_a_control_gets_its_own(warmup, tmp_path):
    """The README prints a run and its control back to back: by default each has its own folder, and a
    learner started on a folder that holds a run of other settings (the control on its run's folder) is
    refused with nothing changed, instead of taking over that run's checkpoint and reporting its policy."""
    assert (Config().run_dir, Config(control="shuffled").run_dir) == ("runs/mempo", "runs/mempo-shuffled")
    assert (Config(algo="grpo").run_dir, Config(algo="grpo", control="shuffled").run_dir) == (
        "runs/grpo", "runs/grpo-shuffled")
    import algorithms.mempo as mempo

    started = []  # the command lines too: the folder follows the options given
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(mempo, "train", lambda cfg, data, strategy: started.append(cfg.run_dir))
        for algo, args in (("mempo", []), ("mempo", ["--control", "shuffled"]), ("grpo", ["--control", "shuffled"]),
                           ("mempo", ["--control", "shuffled", "--run-dir", "runs/mine"])):
            mempo.main(algo, args)
    assert started == ["runs/mempo", "runs/mempo-shuffled", "runs/grpo-shuffled", "runs/mine"]
    run = tmp_path / "run"
    train(Config(policy=str(warmup), run_dir=str(run), steps=1, **TINY))
    before = folder_state(run)
    with pytest.raises(RunFolderError, match="other settings \\(control: 'none' there, 'shuffled' now\\)"):
        train(Config(policy=str(warmup), run_dir=str(run), steps=1, control="shuffled", **TINY))
    assert folder_state(run) == before
    refused(run_cli(["--policy", str(warmup), "--run-dir", str(run), "--lr", "1e-3", *tiny_args()]),
            "holds a run with other settings (lr: 5e-05 there, 0.001 now)", f"--resume {run}")
    assert folder_state(run) == before


def tiny_args() -> list[str]:
    return [f"--{k.replace('_', '-')}={v}" for k, v in {**TINY, "steps": 1}.items()]


def test_resume_takes_new_budgets_and_refuses_other_changes(tmp_path, monkeypatch, capsys):
    """--resume RUN keeps the run's settings; the step budget and evaluation settings may change, any
    other option given is refused in one line naming it."""
    import algorithms.mempo as mempo

    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({**dataclasses.asdict(Config(algo="grpo")), "lr": 3e-4}))
    started = []
    monkeypatch.setattr(mempo, "train", lambda cfg, data, strategy: started.append(cfg))
    mempo.main("grpo", ["--resume", str(run), "--steps", "40", "--eval-episodes", "50"])
    [cfg] = started
    assert (cfg.steps, cfg.eval_episodes, cfg.lr, cfg.run_dir) == (40, 50, 3e-4, str(run))
    for args, message in ((["--lr", "1e-3", "--group-size", "4"], "not group_size, lr"),
                          (["--run-dir", str(tmp_path / "elsewhere")], "not run_dir")):
        with pytest.raises(SystemExit) as exit_:
            mempo.main("grpo", ["--resume", str(run), *args])
        assert exit_.value.code == 2 and message in capsys.readouterr().err
    with pytest.raises(SystemExit):
        mempo.main("mempo", ["--resume", str(run)])
    assert "a grpo run; resume it with python -m algorithms.grpo" in capsys.readouterr().err
    (run / "config.json").write_text(json.dumps({**dataclasses.asdict(Config(algo="grpo")), "microbatch_size": 16}))
    with pytest.raises(SystemExit):
        mempo.main("grpo", ["--resume", str(run)])
    assert "settings this version does not know (microbatch_size)" in capsys.readouterr().err
    assert len(started) == 1


def test_resume_of_a_damaged_config_names_the_file(tmp_path):
    """A truncated, mistyped or wrong-typed config.json stops --resume in one line that names the file."""
    run = tmp_path / "run"
    run.mkdir()
    config = run / "config.json"
    settings = json.dumps(dataclasses.asdict(Config(algo="grpo")))
    for text, message in ((settings[:200], f"{config} is not valid JSON"),  # `truncate -s 200`
                          ("[]", f"{config} holds no run's settings (a JSON object)"),
                          (settings.replace('"steps": 10,', '"steps": "ten",'), f"{config}: ")):
        config.write_text(text)
        proc = subprocess.Popen([sys.executable, "-m", "algorithms.grpo", "--resume", str(run)], cwd=ROOT,
                                env={**os.environ, "PYTHONPATH": str(ROOT)}, stderr=subprocess.PIPE)
        refused(proc, message)
        assert config.read_text() == text


@needs_shared
def test_warmup_hops_mix_is_a_cli_option_and_leaves_the_default_key(tokenizer):
    """``--hops 1 2 3`` warms up on the generated task's multi-hop questions too (the mix ``benchmarks.run``
    evaluates on), each oracle episode searching once a hop; the default (1) keeps its recipe key."""
    import tyro

    from algorithms.sft import default_recipe, oracle_turns, recipe

    cfg = tyro.cli(SFTConfig, args=["--hops", "1", "2", "3", "--episodes", "12", "--worlds", "2", "--objectives", "1"])
    assert cfg.hops == (1, 2, 3) and recipe(default_recipe())["hops"] == 1  # an int, as in the shipped key
    searches = sum(tokenizer.decode(r).count("<search>") for _, r in oracle_turns(cfg, tokenizer))
    one_hop = sum(tokenizer.decode(r).count("<search>")
                  for _, r in oracle_turns(dataclasses.replace(cfg, hops=1), tokenizer))
    assert one_hop == 12 and searches > one_hop


def test_warmup_real_questions_never_include_a_held_out_one(tokenizer):
    """``algorithms.sft --real``: a real set's warm-up questions are its train100 split and its dev split
    less the held-out share the learner evaluates on; a share of the oracle episodes is played on them."""
    from algorithms.mempo import datasets
    from algorithms.sft import oracle_turns, real_training_task
    from mempo_env.tasks import resolve_task

    for name in ("hotpotqa", "musique"):
        warm = {q.id for q in real_training_task(name, 0.2).questions}
        _, test = datasets(Config(dataset=name))
        dev, train100 = ({q.id for q in resolve_task(name, split=s).questions} for s in ("dev", "train100"))
        assert not warm & {q.id for q in test.questions} and warm == train100 | (dev - {q.id for q in test.questions})
    cfg = SFTConfig(episodes=8, worlds=2, objectives=(1,), real=("hotpotqa",), real_share=0.5)
    prompts = [tokenizer.decode(p) for p, _ in oracle_turns(cfg, tokenizer)]
    hotpot = {q.question for q in real_training_task("hotpotqa", 0.2).questions}
    asked = {next((q for q in hotpot if q in p), None) for p in prompts} - {None}
    assert 1 <= len(asked) <= 4 and any(not any(q in p for q in hotpot) for p in prompts)


def test_a_lora_warm_up_saves_a_plain_model_and_its_adapter(tmp_path):
    """--lora-rank: the adapter is trained alone (far fewer parameters) and merged when saved, so the warm-up
    loads as the base's own architecture; the adapter is kept beside it."""
    cfg = SFTConfig(cache_dir=str(tmp_path), episodes=4, worlds=2, steps=2, batch_size=4, lora_rank=4, lr=1e-2,
                    precision="fp32", threads=1)
    out = ensure_warmup(cfg)
    build = json.loads((out / "build.json").read_text())
    base = json.loads((out / "sft_config.json").read_text())
    assert base["lora_rank"] == 4 and (out / "adapter" / "adapter_config.json").is_file()
    model = AutoModelForCausalLM.from_pretrained(out)
    assert 0 < build["trainable_parameters"] < sum(p.numel() for p in model.parameters()) / 10
    assert not any("lora" in name for name, _ in model.named_parameters())
    with pytest.raises(ValueError, match="lora_rank must be >= 0"):
        ensure_warmup(dataclasses.replace(cfg, lora_rank=-1))


def test_a_shipped_adapter_restores_its_warm_up_from_the_same_base_anywhere(tmp_path):
    """--from-adapter: a LoRA warm-up's ``adapter/`` and ``recipe.json``, copied elsewhere (as
    benchmarks/results/smollm2-warmup is) and merged onto the same base installed at another path, give the
    warm-up's own folder name and weights; an adapter of another recipe, or a folder without one, is refused."""
    from algorithms.sft import base_identity
    from algorithms.tiny_policy import build_tiny_policy

    tiny = build_tiny_policy(tmp_path / "here" / "tiny", hidden=32, layers=1, heads=2)
    cfg = SFTConfig(base=str(tiny), cache_dir=str(tmp_path / "built"), episodes=4, worlds=2, steps=2, batch_size=4,
                    lora_rank=4, lr=1e-2, precision="fp32", threads=1)
    built = ensure_warmup(cfg)
    shipped = tmp_path / "shipped"
    shutil.copytree(built / "adapter", shipped / "adapter")
    for name in ("recipe.json", "build.json", "losses.json"):
        shutil.copy(built / name, shipped / name)
    elsewhere = shutil.copytree(tiny, tmp_path / "there" / "tiny")
    assert base_identity(str(elsewhere)) == base_identity(str(tiny)) != base_identity(str(built))
    again = dataclasses.replace(cfg, base=str(elsewhere), cache_dir=str(tmp_path / "restored"),
                                from_adapter=str(shipped))
    out = ensure_warmup(again)
    assert out.name == built.name and json.loads((out / "build.json").read_text())["restored_from"] == str(shipped)
    a, b = (AutoModelForCausalLM.from_pretrained(d).state_dict() for d in (out, built))
    assert a.keys() == b.keys() and all(torch.allclose(a[k], b[k], rtol=1e-6, atol=1e-8) for k in a)
    with pytest.raises(ValueError, match="other settings .*steps 2 there, 3 here"):
        ensure_warmup(dataclasses.replace(again, steps=3))
    with pytest.raises(FileNotFoundError, match="no readable recipe.json"):
        ensure_warmup(dataclasses.replace(again, cache_dir=str(tmp_path / "none"), from_adapter=str(tmp_path)))


def test_a_killed_warm_up_continues_to_the_weights_of_an_uninterrupted_one(tmp_path):
    """kill -9 during a warm-up's build, then the same command again: it continues from its last saved state
    (``.warmup-KEY.partial``) to the weights and losses of a build that was never interrupted, and removes
    that state when done."""
    from algorithms.sft import warmup_dir

    args = ["--episodes", "4", "--worlds", "2", "--steps", "16", "--batch-size", "4", "--checkpoint-every", "4",
            "--precision", "fp32", "--threads", "1"]

    def build(cache: Path) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "algorithms.sft", *args, "--cache-dir", str(cache)], cwd=ROOT,
                                env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)

    out = warmup_dir(SFTConfig(cache_dir=str(tmp_path / "killed"), episodes=4, worlds=2, steps=16, batch_size=4))
    state = out.with_name(f".{out.name}.partial") / "state.pt"
    proc = build(tmp_path / "killed")
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None and not state.exists():
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert state.exists() and not out.exists(), "the build ended before it could be killed"
    for cache in ("killed", "whole"):
        assert build(tmp_path / cache).wait(timeout=600) == 0
    whole = warmup_dir(SFTConfig(cache_dir=str(tmp_path / "whole"), episodes=4, worlds=2, steps=16, batch_size=4))
    resumed_at = json.loads((out / "build.json").read_text())["resumed_at_step"]
    assert resumed_at and resumed_at % 4 == 0 and not state.parent.exists()
    assert json.loads((out / "losses.json").read_text()) == pytest.approx(
        json.loads((whole / "losses.json").read_text()), rel=1e-4, abs=1e-6)
    a, b = (AutoModelForCausalLM.from_pretrained(d).state_dict() for d in (out, whole))
    assert all(torch.allclose(a[k], b[k], rtol=1e-4, atol=1e-6) for k in a)
