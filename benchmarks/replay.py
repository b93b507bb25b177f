"""The cost of the same trajectories in another view: replay a run's recorded actions.

A policy's episodes in the memory view, replayed action for action in the full-context view, give
the full context's token cost at exactly the same answers (the paper's "memory saves X% of the
tokens at equal accuracy"), without training a full-context policy:

    from benchmarks.replay import replay
    rows = replay("runs/eval-warmup/episodes.jsonl", task, tokenizer="algorithms/warmup")

Every episode is reset with its recorded seed and horizon, and each recorded assistant turn is
stepped in order; a replay that does not end with the recorded F1 raises, as it means the task or
the search tool is not the one the run used.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mempo_env.env import MemSearchQAEnv
from mempo_env.retrieval import make_retriever
from mempo_env.types import QATask


def replay(episodes: str | Path, task: QATask, *, context: str = "full", tokenizer: Any = None,
           prompt: str = "train") -> list[dict[str, Any]]:
    """One row per recorded episode: its agent, horizon, F1 and the recorded and replayed token (or,
    without ``tokenizer``, character) costs, ``total`` and ``peak``."""
    if isinstance(tokenizer, (str, Path)):
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(tokenizer)
    unit = "tokens" if tokenizer is not None else "chars"
    retriever, rows = make_retriever(None, task.corpus), []
    for line in Path(episodes).read_text().splitlines():
        record = json.loads(line)
        env = MemSearchQAEnv(task, retriever=retriever, context=context, prompt=prompt, tokenizer=tokenizer,
                             objectives=record["objectives"], max_turns=record["max_turns"])
        env.reset(seed=record["seed"])
        info: dict[str, Any] = {}
        for message in record["trajectory"]:
            if message["role"] == "assistant":
                _, _, terminated, truncated, info = env.step(message["content"])
                if terminated or truncated:
                    break
        if info.get("f1") != record["f1"]:
            raise ValueError(f"episode {record['episode']} of {record['agent']} replays to F1 {info.get('f1')}, "
                             f"not the recorded {record['f1']}: another task or search tool than the run's")
        rows.append({"agent": record["agent"], "objectives": record["objectives"], "f1": record["f1"],
                     "recorded_context": record["context"], "context": context,
                     "recorded_total": record[f"total_{unit}"], "recorded_peak": record[f"peak_{unit}"],
                     "total": info[f"total_{unit}"], "peak": info[f"peak_{unit}"]})
    return rows
