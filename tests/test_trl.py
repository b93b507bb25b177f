"""TRL 1.16's own trainers on MemSearchQA-v0, on CPU, through the snippets of docs/trainers.md: SFTTrainer on the
oracle's turns (memory view; full view), GRPOTrainer through environment_factory (full context), and the memory
view's per-turn rows, which the synchronous GRPOTrainer refuses.

The snippets run at a reduced size, stated in each ``run_reduced`` call: a few episodes and steps, small batches,
fp32 (``bf16=False``: TRL's default bf16 is emulated on AVX2-only CPUs, 13x slower, docs/learners.md), no
experiment tracker, a log line per step, and one torch thread (CI's 2 cores are shared). Assertions are on
structure, logged keys, finite values, step counts and moved weights, never on loss or reward values."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
from doc_snippets import documented, run_reduced

trl = pytest.importorskip("trl")
pytest.importorskip("datasets")

import torch  # noqa: E402
from safetensors.torch import load_file  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402
from trl.chat_template_utils import (  # noqa: E402
    is_chat_template_prefix_preserving,
    parse_response,
    supports_tool_calling,
)

import mempo_env  # noqa: E402,F401
from agents import make_agent  # noqa: E402
from algorithms.compute import num_threads  # noqa: E402
from algorithms.sft import SHIPPED  # noqa: E402
from algorithms.tiny_policy import CHATML  # noqa: E402
from integrations.datasets_export import prompt_dataset  # noqa: E402
from integrations.trl_env import MemSearchQAToolEnv, use_protocol_templates  # noqa: E402
from mempo_env.tasks import make_generated_task  # noqa: E402
from mempo_env.views import render_prompt  # noqa: E402

DOC = "docs/trainers.md"
CPU = 'bf16=False, report_to="none", '  # the reduction every documented config gets
ENV_KEYS = ("memsearchqa/em", "memsearchqa/f1", "memsearchqa/format_ok", "memsearchqa/answered",
            "memsearchqa/n_turns")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """Where the snippets run: they write runs/... relative to it, as a reader's would."""
    return tmp_path_factory.mktemp("trl")


def run_documented(test: str, workdir: Path, reductions: dict[str, str]) -> dict[str, Any]:
    with pytest.MonkeyPatch.context() as mp, num_threads(1):
        mp.chdir(workdir)
        mp.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
        return run_reduced(documented(DOC, test), reductions)


@pytest.fixture(scope="module")
def sft(workdir: Path) -> dict[str, Any]:
    return run_documented("test_the_documented_sft_snippet", workdir, {
        "range(512)": "range(16)",
        "max_steps=300, per_device_train_batch_size=16,":
            f"max_steps=6, per_device_train_batch_size=8, logging_steps=1, {CPU}",
    })


@pytest.fixture(scope="module")
def grpo(sft: dict[str, Any], workdir: Path) -> dict[str, Any]:
    return run_documented("test_the_documented_grpo_snippet", workdir, {
        "max_steps=100, per_device_train_batch_size=8, num_generations=8,":
            # The entropy bonus moves the weights at every step whatever rewards the sampled rollouts get (a
            # group whose rollouts all score the same has no advantage), so that "the weights moved" is checked
            # without depending on sampling.
            f"max_steps=2, per_device_train_batch_size=2, num_generations=2, entropy_coef=0.01, {CPU}",
        "max_completion_length=2048": "max_completion_length=384",
        "episodes=800": "episodes=4",
    })


def moved(model: torch.nn.Module, before: dict[str, torch.Tensor]) -> bool:
    return any(not torch.equal(p.detach().cpu(), before[n]) for n, p in model.named_parameters() if n in before)


def step_logs(trainer: Any) -> list[dict[str, float]]:
    return [h for h in trainer.state.log_history if "loss" in h]


def test_the_documented_sft_snippet(sft: dict[str, Any], workdir: Path) -> None:
    trainer = sft["trainer"]
    assert trainer.state.global_step == 6
    assert len(logs := step_logs(trainer)) == 6 and all(math.isfinite(h["loss"]) for h in logs)
    row, tokenizer = trainer.train_dataset[0], trainer.processing_class  # prompt-completion rows: only the turn
    trained = tokenizer.decode([t for t, label in zip(row["input_ids"], row["labels"], strict=True) if label != -100])
    assert trained == row["completion"][0]["content"] + "<|im_end|>\n"  # (and its end) is trained
    assert moved(trainer.model, load_file(SHIPPED / "model.safetensors"))
    assert sft["agent"].name == "hf:runs/trl-sft"  # the result loads back as an hf: agent...
    assert (workdir / "runs/trl-sft/tokenizer.json").is_file()
    record = sft["run_episode"](sft["env"], sft["agent"], seed=1)  # ...and plays whole episodes
    assert record["n_turns"] >= 1 and record["trajectory"][-1]["role"] in ("assistant", "user")
    assert {"em", "f1", "score", "format_ok"} <= set(record)


def test_the_documented_full_view_sft_snippet(workdir: Path) -> None:
    ns = run_documented("test_the_documented_full_view_sft_snippet", workdir, {
        "range(512)": "range(4)",
        "max_steps=300, per_device_train_batch_size=16,":
            f"max_steps=2, per_device_train_batch_size=4, logging_steps=1, {CPU}",
    })
    trainer, tokenizer = ns["trainer"], ns["trainer"].processing_class
    assert trainer.state.global_step == 2 and all(math.isfinite(h["loss"]) for h in step_logs(trainer))
    # assistant_only_loss: exactly the oracle's turns, each with its end token, are trained; prompts and tool replies
    # are not
    row, episode = trainer.train_dataset[0], ns["episodes"][0]
    trained = tokenizer.decode([t for t, label in zip(row["input_ids"], row["labels"], strict=True) if label != -100])
    assert trained == "".join(m["content"] + "<|im_end|>" for m in episode["messages"] if m["role"] == "assistant")
    assert moved(trainer.model, load_file(SHIPPED / "model.safetensors"))


def test_the_documented_grpo_snippet(grpo: dict[str, Any], workdir: Path) -> None:
    trainer = grpo["trainer"]
    assert trainer.state.global_step == 2
    logs = step_logs(trainer)
    assert len(logs) == 2
    for log in logs:  # TRL's own metrics and the environment's verdicts, each step
        for key in ("loss", "reward", "rewards/memsearchqa_reward/mean", "tools/call_frequency", *ENV_KEYS):
            assert math.isfinite(log[key]), key
        assert 0 <= log["memsearchqa/em"] <= 1 and 0 <= log["memsearchqa/format_ok"] <= 1
    assert moved(trainer.model, load_file(workdir / grpo["MODEL"] / "model.safetensors"))
    # every rollout's episode ended in the environment, answered or not: the reward is the environment's score
    assert all(env.info is not None and "score" in env.info for env in trainer.environments)


def test_protocol_turns_reach_trl_as_tool_calls_and_glue_into_the_full_view(grpo: dict[str, Any]) -> None:
    """TRL's own parser and tool-reply suffix, fed the oracle's turns, rebuild exactly the full view's ChatML
    rendering: the token sequence GRPOTrainer trains on is the one the environment shows."""
    trainer = grpo["trainer"]
    tokenizer = trainer.processing_class
    assert supports_tool_calling(tokenizer) and is_chat_template_prefix_preserving(tokenizer)
    env = gym.make("MemSearchQA-v0", **grpo["env_kwargs"], context="full")
    oracle = make_agent("oracle")
    obs, info = env.reset(seed=3)

    def chatml(messages: list[dict[str, str]]) -> str:
        return tokenizer.apply_chat_template(messages, chat_template=CHATML, tokenize=False, add_generation_prompt=True)

    def encode(text: str) -> list[int]:
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    assert render_prompt(obs, tokenizer) == chatml(obs)  # plain messages render as ChatML renders them
    ids, done = encode(chatml(obs)), False
    while not done:
        action = oracle.act(obs, info)
        turn = encode(action) + [tokenizer.eos_token_id]  # a turn as the policy ends it
        parsed = parse_response(tokenizer, turn, prefix=ids, tools=trainer.tools)
        obs, _, terminated, truncated, info = env.step(action)
        done = terminated or truncated
        if info["action"] == "answer":
            assert parsed == {"role": "assistant", "content": action}  # no tool call: the rollout's last turn
            continue
        call = {"type": "function", "function": {"name": info["action"], "arguments": {"turn": action}}}
        assert parsed == {"role": "assistant", "content": "", "tool_calls": [call]}
        reply = [{"role": "tool", "name": info["action"], "content": obs[-1]["content"]}]
        ids += turn + trainer._get_tool_suffix_ids(reply)
        assert tokenizer.decode(ids) == chatml(obs)
    assert info["em"] == 1.0


def test_grpo_trainer_takes_one_row_per_prompt_and_generation_not_one_per_turn(sft: dict[str, Any],
                                                                               workdir: Path) -> None:
    """The memory view's episode is a row per turn. A rollout_func that returns them is refused by TRL's own check:
    a reward per prompt and generation (docs/trainers.md, the memory view)."""
    task = make_generated_task("train", hops=1)
    env, oracle = gym.make("MemSearchQA-v0", dataset=task, cache_dir=None), make_agent("oracle")
    tokenizer = AutoTokenizer.from_pretrained(workdir / "runs/trl-sft")

    def per_turn_rows(prompts: list, trainer: Any) -> dict[str, list]:
        rows: dict[str, list] = {"prompt_ids": [], "completion_ids": [], "logprobs": []}
        for seed, _ in enumerate(prompts):
            obs, info = env.reset(seed=seed)
            done = False
            while not done:
                action = oracle.act(obs, info)
                prompt = tokenizer(render_prompt(obs, tokenizer), add_special_tokens=False)["input_ids"]
                completion = tokenizer(action, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
                rows["prompt_ids"].append(prompt)
                rows["completion_ids"].append(completion)
                rows["logprobs"].append([0.0] * len(completion))
                obs, _, terminated, truncated, info = env.step(action)
                done = terminated or truncated
        return rows

    def turn_reward(completions: list, **_: Any) -> list[float]:
        return [0.0] * len(completions)

    with pytest.MonkeyPatch.context() as mp, num_threads(1):
        mp.chdir(workdir)
        mp.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
        trainer = GRPOTrainer(model=str(workdir / "runs/trl-sft"), reward_funcs=turn_reward,
                              args=GRPOConfig(output_dir="runs/per-turn", max_steps=1, per_device_train_batch_size=2,
                                              num_generations=2, bf16=False, report_to="none"),
                              train_dataset=prompt_dataset(env, 2), rollout_func=per_turn_rows)
        with pytest.raises(ValueError, match=r"'turn_reward' returned 4 rewards, but 2 were expected"):
            trainer.train()
    with pytest.raises(ValueError, match="trains the full-context view only"):
        MemSearchQAToolEnv(dataset=task, context="memory")


def test_a_row_from_another_environment_is_refused() -> None:
    task = make_generated_task("train", hops=1)
    rows = prompt_dataset(gym.make("MemSearchQA-v0", dataset=task, prompt="eval", cache_dir=None), 1)
    env = MemSearchQAToolEnv(dataset=task, cache_dir=None)  # the train prompt: another first observation
    with pytest.raises(ValueError, match="the row's prompt is not this environment's first observation"):
        env.reset(**rows[0])
    with pytest.raises(ValueError, match="each row must say which episode to start"):
        env.reset()
    with pytest.raises(ValueError, match="written for ChatML"):
        use_protocol_templates(type("Tok", (), {"eos_token": "</s>"})())
