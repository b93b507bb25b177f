"""The ``memsearchqa`` v1 taskset under verifiers 0.4.0's own loader and evaluation (``vf-eval``'s runner),
against an OpenAI-compatible stand-in server with a scripted policy behind it: rewards and metrics equal
the project's runner's (``benchmarks.run.play``) on the same episodes, every prompt the server receives
and every prompt on the trace's branches (the training samples) is the local env's observation, and
the branches split where the env's view does (memory) or not at all (full).

Runs in the verifiers environment (``bash scripts/install_verifiers.sh``); skipped where verifiers is absent.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("verifiers.v1")

from doc_blocks import code_blocks
from pydantic import ValidationError
from verifiers_helpers import eval_config, evaluate, policy_server, turns

from agents import Agent, make_agent
from agents.runner import play
from mempo_env import MemSearchQAEnv

# What benchmarks.run plays by default at 2 objectives: the test split, the eval prompt, 16 turns.
SETTINGS = {"split": "test", "prompt": "eval", "objectives": 2, "max_turns": 16}
METRICS = ("em", "f1", "format_ok", "n_searches", "total_chars", "peak_chars")


def replay(trace: Any, env_kwargs: dict[str, Any]) -> dict[str, Any]:
    """Plays the trace's replies on a local env from the trace's seed, checking that each turn's prompt on
    the trace is the local env's observation; returns the local env's final info."""
    env = MemSearchQAEnv(**env_kwargs)
    observation, info = env.reset(seed=trace.task.data.seed)
    assert trace.task.data.prompt_text == "\n\n".join(m["content"] for m in observation)
    done = False
    for prompt, reply in turns(trace):
        assert not done and prompt == observation
        observation, _, terminated, truncated, info = env.step(reply)
        done = terminated or truncated
    return info


def samples(played: list[tuple[list[dict[str, str]], str]]) -> int:
    """How many training samples the (prompt, reply) turns make: a prompt that extends the previous prompt
    and its reply continues that sample (turn 2 in the memory view: both are the history so far), any
    other starts one (a later memory-view turn; a turn after one the env stored neutralised)."""
    count, before = 0, None
    for prompt, reply in played:
        count += before is None or prompt[: len(before)] != before
        before = [*prompt, {"role": "assistant", "content": reply}]
    return count


@pytest.mark.parametrize("context", ["memory", "full"])
@pytest.mark.parametrize("spec", ["oracle", "weak", "random:3"])
def test_scores_and_prompts_equal_the_local_envs(spec: str, context: str, tmp_path: Path) -> None:
    kwargs, seeds = {**SETTINGS, "context": context}, range(5, 11)
    with policy_server(make_agent(spec), kwargs, seeds) as (url, policy):
        traces = evaluate(eval_config(url, tmp_path, {**kwargs, "episodes": len(seeds), "seed": seeds[0]}))
    runner = dict(play(make_agent(spec), [MemSearchQAEnv(**kwargs)], list(seeds)))
    assert [t.task.data.seed for t in traces] == list(seeds)
    for i, trace in enumerate(traces):
        record = runner[i]
        assert trace.ok and trace.stop_condition == "episode_over", trace.errors
        assert trace.reward == record["score"] == replay(trace, kwargs)["score"]
        assert trace.num_turns == record["n_turns"]
        assert trace.metrics == {name: float(record[name]) for name in METRICS}
        # what the model server was sent, in order, is what the trace holds
        assert policy.prompts[trace.task.data.prompt[1].content] == [prompt for prompt, _ in turns(trace)]
        # the training samples: a new one where the env's prompt does not extend the last prompt and reply
        assert len(trace.branches) == samples(turns(trace))
        if spec != "random:3":  # valid turns: one sample for the full history; a turn each in the memory view
            assert len(trace.branches) == (1 if context == "full" else max(record["n_turns"] - 1, 1))
    if spec == "oracle":
        assert all(t.reward == SETTINGS["objectives"] for t in traces)


def test_verifiers_turn_budget(tmp_path: Path) -> None:
    """verifiers' own turn budget (``--env.agent.max-turns``, below the env's) refuses the next model call:
    every turn generated is played, and an episode still open then ends unanswered (score 0) with the
    env's end-of-episode metrics."""
    [(_, record)] = play(make_agent("oracle"), [MemSearchQAEnv(**SETTINGS)], [0])
    for budget, score in ((record["n_turns"] - 1, 0.0), (record["n_turns"], record["score"])):
        with policy_server(make_agent("oracle"), SETTINGS, range(1)) as (url, _):
            config = eval_config(url, tmp_path / str(budget), {**SETTINGS, "episodes": 1},
                                 env={"agent": {"max_turns": budget}})
            [trace] = evaluate(config)
        assert trace.ok and trace.stop_condition == "max_turns" and trace.reward == score
        assert trace.num_turns == budget and trace.metrics["format_ok"] == float(score > 0)
        assert replay(trace, SETTINGS)["turn"] == budget


def test_a_dead_search_server_fails_the_rollout(tmp_path: Path) -> None:
    """A retriever failure (the env's Search-R1 server unreachable) fails that rollout, naming the server,
    after verifiers' opt-in retries of the whole rollout (one here); the evaluation ends, every rollout
    recorded."""
    kwargs = {**SETTINGS, "retriever": "http://127.0.0.1:9/retrieve", "retriever_options": {"attempts": 1}}
    with policy_server(make_agent("oracle"), SETTINGS, range(2)) as (url, _):
        config = eval_config(url, tmp_path, {**kwargs, "episodes": 2}, env={"agent": {"retries": {"max_retries": 1}}})
        traces = evaluate(config)
    for trace in traces:
        assert not trace.ok and trace.stop_condition == "harness_error" and trace.reward == 0.0
        assert [e.type for e in trace.errors] == ["HarnessError", "HarnessError"]  # the try and its retry
        assert all("RetrieverError" in e.message and "127.0.0.1:9" in e.message for e in trace.errors)


@pytest.mark.parametrize("context", ["memory", "full"])
def test_non_ascii_and_large_turns(context: str, tmp_path: Path) -> None:
    """Turns of non-ASCII text and a 300,000-character memory go through verifiers and the stand-in server."""

    class Loud(Agent):
        def act(self, observation: list[dict[str, str]], info: dict[str, Any]) -> str:
            last = [m["content"] for m in observation if m["role"] == "assistant"][-1:]
            turn = 0 if not last else 1 if "記記" in last[0] else 2  # the memory view shows one turn
            mem = "日本 é \u2028 🙂 " + "記" * 300_000 if turn == 0 else "短い"
            action = "answer" if turn == 2 else "search"
            return f"<mem>{mem}</mem><think>考え</think><{action}>Momo 日本</{action}>"

    kwargs = {**SETTINGS, "context": context}
    with policy_server(Loud(), kwargs, range(1)) as (url, policy):
        [trace] = evaluate(eval_config(url, tmp_path, {**kwargs, "episodes": 1}))
    [runner] = [record for _, record in play(Loud(), [MemSearchQAEnv(**kwargs)], [0])]
    assert trace.ok and trace.reward == runner["score"] == replay(trace, kwargs)["score"]
    assert trace.metrics["total_chars"] == runner["total_chars"] > 600_000
    [prompts] = policy.prompts.values()
    assert len(prompts) == 3 and any("記" * 300_000 in m["content"] for m in prompts[1])


def test_bad_arguments_are_named(tmp_path: Path) -> None:
    with policy_server(make_agent("oracle"), SETTINGS, range(1)) as (url, _):
        with pytest.raises(ValueError, match="window:K needs a positive integer K .* got 'window'"):
            evaluate(eval_config(url, tmp_path / "window", {"context": "window"}))
        with pytest.raises(ValidationError, match="episodes"):
            eval_config(url, tmp_path / "none", {"episodes": 0})


def test_the_documented_command(tmp_path: Path) -> None:
    """docs/trainers.md's ``vf-eval`` command, run as documented (verifiers' CLI) against the stand-in server
    in place of the documented URL, with the oracle behind it; results in verifiers' own trace store."""
    [block] = [b for b in code_blocks("docs/trainers.md", lang="bash") if b.heading == "verifiers"]
    assert block.tested_by == "tests/on_verifiers/test_taskset.py::test_the_documented_command"
    documented = "http://127.0.0.1:8000/v1"
    assert documented in block.text and block.text.startswith("vf-eval memsearchqa ")
    settings = {"context": "memory", "objectives": 2}  # the command's, for the policy's look-up of objectives
    vf_eval = Path(sys.executable).parent / "vf-eval"
    with policy_server(make_agent("oracle"), settings, range(20)) as (url, _):
        command = block.text.replace("\\\n", " ").replace(documented, url).split()
        run = subprocess.run([str(vf_eval), *command[1:], "--no-rich", "--output-dir", str(tmp_path)],
                             capture_output=True, text=True, timeout=600, cwd=tmp_path, env={**os.environ})
    assert run.returncode == 0, run.stderr[-3000:]
    [traces_file] = tmp_path.glob("*/traces.jsonl")
    episodes = [json.loads(line) for line in traces_file.read_text().splitlines()]
    assert len(episodes) == 20
    assert all(trace["rewards"]["episode_score"]["score"] == 2.0 for e in episodes for trace in e["traces"])
