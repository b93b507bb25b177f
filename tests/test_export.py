"""MemSearchQA out as `datasets`: episode starts as prompts, played episodes as conversational rows in the view
they were played in."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import pytest
from doc_snippets import documented, run_reduced

import mempo_env  # noqa: F401
from agents import OracleAgent, WeakAgent
from agents.runner import run_episode
from benchmarks.run import evaluate
from integrations.datasets_export import prompt_dataset, prompt_rows, trajectory_dataset, trajectory_rows
from mempo_env.tasks import make_generated_task
from mempo_env.types import QARecord, QATask

datasets = pytest.importorskip("datasets")
TASK = make_generated_task("train", hops=1)


def make_env(**kwargs):
    return gym.make("MemSearchQA-v0", dataset=TASK, cache_dir=None, **kwargs)


def test_prompts_are_the_envs_own_episode_starts() -> None:
    env = make_env(objectives=2)
    drawn = prompt_rows(env, 3, seed=7)
    for e, row in enumerate(drawn):
        obs, info = env.reset(seed=7 + e)  # the episodes benchmarks.run plays
        assert row["prompt"] == obs and row["question_ids"] == [o["id"] for o in info["objectives"]]
        assert row["golden_answers"] == [o["answers"] for o in info["objectives"]]
        assert env.reset(options={"index": row["index"]})[0] == obs  # the row starts its episode again
    every = prompt_rows(env)
    assert len(every) == len(TASK.questions) // 2 and every[1]["index"] == [2, 3]
    dataset = prompt_dataset(env, 3, seed=7)
    assert dataset.column_names == ["prompt", "index", "question_ids", "golden_answers"]
    assert dataset.to_list() == drawn


def test_prompts_refuse_bad_requests() -> None:
    with pytest.raises(ValueError, match="episodes must be at least 1"):
        prompt_rows(make_env(), 0)
    twins = QATask("twins", [QARecord("q", "A?", ["a"]), QARecord("q", "B?", ["b"])], TASK.corpus)
    with pytest.raises(ValueError, match="task 'twins' repeats a question id"):
        prompt_rows(gym.make("MemSearchQA-v0", dataset=twins, cache_dir=None))


@pytest.mark.parametrize("view", ["memory", "full"])
def test_a_live_episode_becomes_the_prompts_its_policy_answered(view: str) -> None:
    env, agent = make_env(context=view, objectives=2), OracleAgent()
    obs, info = env.reset(seed=3)
    seen, done = [], False
    while not done:
        action = agent.act(obs, info)
        seen.append((obs, action))
        obs, _, terminated, truncated, info = env.step(action)
        done = terminated or truncated
    record = {"trajectory": env.unwrapped.messages, **{k: info[k] for k in ("score", "em", "n_turns")}}
    rows = trajectory_rows([record], view)
    if view == "memory":  # one row per turn: the observation and the turn
        assert [(r["prompt"], r["completion"], r["turn"]) for r in rows] == [
            (o, [{"role": "assistant", "content": a}], t) for t, (o, a) in enumerate(seen, 1)]
    else:  # one row per episode: the whole conversation, whose every prefix was an observation
        assert [r["messages"] for r in rows] == [env.unwrapped.messages]
        assert all(rows[0]["messages"][: len(o)] == o for o, _ in seen)
    assert {(r["score"], r["em"], r["n_turns"]) for r in rows} == {(2, 1.0, len(seen))}


def test_a_benchmark_log_exports_the_episodes_of_one_view(tmp_path: Path) -> None:
    out = tmp_path / "run"
    evaluate(["oracle", "weak"], out_dir=out, dataset=TASK, objectives=[1], episodes=2, plots=False, verbose=False)
    with pytest.raises(ValueError, match=r"played in the views \['full', 'memory'\]: pass view= to pick one"):
        trajectory_rows(out / "episodes.jsonl")
    full = trajectory_dataset(out / "episodes.jsonl", view="full")
    assert full.num_rows == 4 and set(full["context"]) == {"full"} and set(full["agent"]) == {"oracle", "weak"}
    memory = trajectory_dataset(out / "episodes.jsonl", view="memory")
    assert {"prompt", "completion", "turn", "agent", "episode", "score", "format_ok"} <= set(memory.column_names)
    assert memory.num_rows == sum(r["n_turns"] for r in full)
    oracle = memory.filter(lambda r: r["agent"] == "oracle")
    assert all(r["completion"][0]["content"].startswith("<mem>") for r in oracle)


def test_trajectory_export_refuses_what_it_cannot_tell(tmp_path: Path) -> None:
    live = run_episode(make_env(), WeakAgent(), 0)
    with pytest.raises(ValueError, match="episodes played live carry no view: pass view='memory' or 'full'"):
        trajectory_rows([live])
    with pytest.raises(ValueError, match="view must be one of"):
        trajectory_rows([live], "summary")
    with pytest.raises(ValueError, match="no episodes to export"):
        trajectory_rows([])
    with pytest.raises(ValueError, match="none of the 1 episodes was played in the full view"):
        trajectory_rows([{**live, "context": "memory"}], "full")
    with pytest.raises(FileNotFoundError, match="episode log .* not found"):
        trajectory_rows(tmp_path / "episodes.jsonl")


def test_the_documented_datasets_out_snippet(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    # the log it reads: the README's main job, reduced to the oracle and 2 episodes per cell at 1 and 2 objectives
    evaluate(["oracle"], out_dir="runs/eval", objectives=[1, 2], episodes=2, plots=False, verbose=False)
    ns = run_reduced(documented("docs/trainers.md", "test_the_documented_datasets_out_snippet"), {})
    assert ns["prompts"].num_rows == 1000 and ns["prompts"][0]["prompt"] == ns["env"].reset(seed=0)[0]
    turns, logged = ns["turns"], ns["logged"]
    assert turns.num_rows == sum(r["n_turns"] for r in ns["turns"].to_list() if r["turn"] == 1)
    assert {"prompt", "completion", "turn", "score", "em"} <= set(turns.column_names)
    assert logged.num_rows == 4 and set(logged["context"]) == {"full"} and "messages" in logged.column_names
    out = capsys.readouterr().out
    assert out.count("Dataset(") == 2
