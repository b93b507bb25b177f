"""Episode prompts for verl: a train and a validation parquet of multi-objective MemSearchQA episodes.

    python -m mempo_verl.data --out data/mempo                                  # the generated task, 2 objectives
    python -m mempo_verl.data --sources hotpotqa:train100 nq_open_dev.jsonl --out data/paper-mix

Each row is one episode: ``extra_info["questions"]`` holds its questions (id, question, answers),
which ``mempo_verl.agent_loop`` hands to ``MemSearchQAEnv.reset(options={"questions": ...})``. With
several ``--sources`` the k-th question of an episode comes from source k (cycling), so two sources
and ``--objectives 2`` give the paper's training mix: one HotpotQA and one NQ question per episode.
The search tool's corpus is not in the rows; the config's ``mempo.env`` names it (``dataset``,
``corpus`` or a ``retriever`` URL), since NQ brings no corpus of its own.

A source is anything ``mempo_env.tasks.resolve_task`` takes, with an optional ``:split``
("generated:train", "hotpotqa:train100", "musique"), or a question file (JSONL/JSON/parquet, read
with ``load_questions``). Validation questions never appear in training rows: the generated task's
"test" split, else a fixed ``--eval-fraction`` of each source's questions (``algorithms.mempo.held_out``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

from mempo_env.prompts import get_prompt
from mempo_env.tasks import resolve_task
from mempo_env.tasks.loaders import load_questions
from mempo_env.types import QARecord, QATask

AGENT_NAME = "memsearchqa"  # the agent loop's name in mempo_verl/config/agent_loops.yaml


def source_splits(source: str, eval_fraction: float) -> tuple[list[QARecord], list[QARecord]]:
    """(train, validation) questions of one source, disjoint."""
    from algorithms.mempo import held_out

    if Path(source).is_file():
        task = QATask(Path(source).stem, load_questions(source), [])
    else:
        name, _, split = source.partition(":")
        if name == "generated" and not split:
            return (resolve_task(name, split="train").questions, resolve_task(name, split="test").questions)
        task = resolve_task(name, split=split or None)
    train, val = held_out(task, eval_fraction)
    return train.questions, val.questions


def episode_rows(sources: list[list[QARecord]], objectives: int, episodes: int, *, seed: int = 0,
                 prompt: str = "train", data_source: str = AGENT_NAME) -> list[dict[str, Any]]:
    """``episodes`` rows of ``objectives`` distinct questions each, the k-th from ``sources[k % len]``."""
    rng = np.random.default_rng(seed)
    template = get_prompt(prompt)
    per_source = [sum(1 for k in range(objectives) if k % len(sources) == s) for s in range(len(sources))]
    for s, (pool, need) in enumerate(zip(sources, per_source)):
        if need > len(pool):
            raise ValueError(f"source {s} has {len(pool)} questions; an episode needs {need} of them")
    rows = []
    for i in range(episodes):
        picks = [iter(rng.choice(len(pool), need, replace=False).tolist()) for pool, need in zip(sources, per_source)]
        questions = [sources[k % len(sources)][next(picks[k % len(sources)])] for k in range(objectives)]
        rows.append({
            "data_source": data_source,
            "agent_name": AGENT_NAME,
            "prompt": [{"role": "system", "content": template.system},
                       {"role": "user", "content": template.user([q.question for q in questions])}],
            "reward_model": {"style": "rule", "ground_truth": "; ".join(q.answers[0] for q in questions)},
            "extra_info": {"index": i, "questions": [{"id": q.id, "question": q.question, "answers": list(q.answers)}
                                                     for q in questions]},
        })
    return rows


def write_parquet(rows: list[dict[str, Any]], path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m mempo_verl.data", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sources", nargs="+", default=["generated"], help="question sources (module docstring)")
    parser.add_argument("--objectives", type=int, default=2, help="questions per episode (the paper trains at 2)")
    parser.add_argument("--train-episodes", type=int, default=10_000)
    parser.add_argument("--val-episodes", type=int, default=200)
    parser.add_argument("--eval-fraction", type=float, default=0.2,
                        help="share of a source's questions held out for validation (not for 'generated')")
    parser.add_argument("--prompt", default="train", help="prompt template of the rows (mempo_env.prompts)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, required=True, help="folder for train.parquet and val.parquet")
    args = parser.parse_args(argv)
    try:
        if args.objectives < 1:
            raise ValueError(f"--objectives must be >= 1, got {args.objectives}")
        splits = [source_splits(s, args.eval_fraction) for s in args.sources]
        name = "+".join(args.sources)
        for part, episodes, pools, seed in (("train", args.train_episodes, [t for t, _ in splits], args.seed),
                                            ("val", args.val_episodes, [v for _, v in splits], args.seed + 1)):
            rows = episode_rows(pools, args.objectives, episodes, seed=seed, prompt=args.prompt,
                                data_source=f"{AGENT_NAME}/{name}")
            write_parquet(rows, args.out / f"{part}.parquet")
            print(f"{args.out / f'{part}.parquet'}: {len(rows)} episodes of {args.objectives} from {name}")
    except (ValueError, FileNotFoundError) as e:
        parser.exit(2, f"{parser.prog}: error: {e}\n")


if __name__ == "__main__":
    main(sys.argv[1:])
