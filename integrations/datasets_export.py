"""MemSearchQA-v0 out to trainers as ``datasets``: the questions to train on as prompts, and played
episodes as conversational rows for supervised fine-tuning.

- ``prompt_dataset(env)``: one row per episode start, drawn by the env itself: ``prompt`` (the first
  observation: system message and question(s), the chat messages TRL's ``GRPOTrainer``, verifiers and
  verl read), ``index`` (the task's question indices; ``env.reset(options={"index": index})`` starts
  that episode again, which is how ``trl_env.MemSearchQAToolEnv`` resets), ``question_ids`` and
  ``golden_answers`` (what a reward function without the env needs).
- ``trajectory_dataset(episodes)``: finished episodes (``python -m benchmarks.run``'s ``episodes.jsonl``,
  or ``agents.runner.run_episode`` records played live) in the view they were played in. Memory view:
  one row per turn, ``prompt`` (the observation the policy answered) and ``completion`` (its turn), the
  prompt-completion form with which TRL's ``SFTTrainer`` trains the completion only. Full view: one row
  per episode, ``messages`` (the whole conversation), trained on its assistant turns with
  ``SFTConfig(assistant_only_loss=True)`` (a chat template with ``{% generation %}`` markers).

The ``*_rows`` functions give the same rows as plain lists without ``datasets`` (an optional
dependency, imported only to build a ``Dataset``).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import gymnasium as gym

from agents.episode_log import read_episodes  # the runner's own reader of its log
from mempo_env.tasks.hf_datasets import import_datasets
from mempo_env.views import prepare_prompt

VIEWS = ("memory", "full")
# What a trajectory row keeps of its episode record: who played it, on what, and how it scored.
EPISODE_FIELDS = ("agent", "context", "objectives", "episode", "seed", "question_ids", "golden_answers",
                  "score", "em", "f1", "format_ok", "n_turns")


def prompt_rows(env: gym.Env, episodes: int | None = None, *, seed: int = 0) -> list[dict[str, Any]]:
    """The rows of ``prompt_dataset``."""
    task, k = env.unwrapped.task, env.unwrapped.objectives
    index_of = {q.id: i for i, q in enumerate(task.questions)}
    if len(index_of) != len(task.questions):
        raise ValueError(f"task {task.name!r} repeats a question id; prompts are exported by id")
    if episodes is None:
        starts = [{"options": {"index": i}} for i in range(0, len(task.questions) - k + 1, k)]
    elif episodes < 1:
        raise ValueError(f"episodes must be at least 1 (or None: every question once), got {episodes}")
    else:
        starts = [{"seed": seed + e} for e in range(episodes)]
    rows = []
    for start in starts:
        obs, info = env.reset(**start)
        ids = [o["id"] for o in info["objectives"]]
        rows.append({"prompt": obs, "index": [index_of[i] for i in ids], "question_ids": ids,
                     "golden_answers": [o["answers"] for o in info["objectives"]]})
    return rows


def prompt_dataset(env: gym.Env, episodes: int | None = None, *, seed: int = 0) -> Any:
    """The episode starts of ``env`` as a ``datasets.Dataset`` of prompts (see the module docstring):
    ``episodes`` draws, episode ``e`` as ``env.reset(seed=seed + e)`` draws it (the episodes
    ``benchmarks.run`` plays), or, ``None``, every question once in task order, ``objectives`` at a time."""
    return import_datasets("prompt_dataset").Dataset.from_list(prompt_rows(env, episodes, seed=seed))


def _records(episodes: str | Path | Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    if isinstance(episodes, (str, Path)):
        if not Path(episodes).is_file():
            raise FileNotFoundError(f"episode log {episodes} not found")
        return read_episodes(Path(episodes))
    return list(episodes)


def trajectory_rows(episodes: str | Path | Iterable[dict[str, Any]], view: str | None = None) -> list[dict[str, Any]]:
    """The rows of ``trajectory_dataset``."""
    records = _records(episodes)
    if not records:
        raise ValueError("no episodes to export")
    played = {r.get("context") for r in records}
    if view is None:
        if None in played:
            raise ValueError("episodes played live carry no view: pass view='memory' or 'full', the env's context")
        if len(played) > 1:
            raise ValueError(f"the episodes were played in the views {sorted(played)}: pass view= to pick one")
        view = played.pop()
    if view not in VIEWS:
        raise ValueError(f"view must be one of {VIEWS}, not {view!r}")
    rows = []
    for record in records:
        if record.get("context", view) != view:
            continue  # played in the other view: its policy saw other prompts
        head = {k: record[k] for k in EPISODE_FIELDS if k in record}
        messages = record["trajectory"]
        if view == "full":
            rows.append({"messages": messages, **head})
            continue
        turns = [j for j, m in enumerate(messages) if m["role"] == "assistant"]
        rows += [{"prompt": prepare_prompt(messages[:j]), "completion": [messages[j]], "turn": t, **head}
                 for t, j in enumerate(turns, 1)]
    if not rows:
        raise ValueError(f"none of the {len(records)} episodes was played in the {view} view")
    return rows


def trajectory_dataset(episodes: str | Path | Iterable[dict[str, Any]], view: str | None = None) -> Any:
    """Finished episodes as conversational rows for ``SFTTrainer`` (see the module docstring).
    ``episodes``: an ``episodes.jsonl`` path or records with a ``trajectory`` (the env's full history,
    ``env.unwrapped.messages``). ``view``: the view they were played in; a log's records say theirs
    (``context``) and those of the other view are left out, records played live need it given."""
    return import_datasets("trajectory_dataset").Dataset.from_list(trajectory_rows(episodes, view))
