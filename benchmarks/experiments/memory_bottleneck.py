"""Where a policy's F1 goes: evidence never found, found but dropped from memory, or lost in the answer.

    python -m benchmarks.experiments.memory_bottleneck runs/memory-bottleneck --play   # the warm-up, then the split
    python -m benchmarks.experiments.memory_bottleneck runs/learners5/eval/memory/mempo-s0   # any benchmarks.run folder
    python -m benchmarks.experiments.memory_bottleneck runs/learners5/sampled/memory/* --pool-seeds   # an arm per row

Issue 34 asks for a setting where memory is the bottleneck before MemPO and GRPO are compared
there: a memory-level advantage can only add what memory loses. This reads the episodes of a
``benchmarks.run`` folder (any agents, views and horizons) and splits each cell's F1 gap, 1 − F1
summed over its episodes, by the first thing that went wrong in an episode that did not score 1:

- **no answer**: the episode ended without one (turn budget, format, context);
- **not found**: some gold evidence was never retrieved (``mempo_env.recall``'s ``found`` at the
  last turn is below the episode's evidence items);
- **dropped**: everything was found, but the last turn's ``<mem>`` does not hold all of it;
- **answer**: found and kept, and the answer is still wrong (of those, how many answers have a
  wrong number of ``;``-separated parts, which misaligns every part after the slip).

A last column counts, of every answered episode, the answers with as many parts as the episode has
questions: a policy that answers two questions with one part scores at most half of each.

Each is a share of the cell's episodes and the F1 points it costs the cell (its episodes' 1 − F1
over all the cell's episodes): the "dropped" points bound what better memory could add there.
Several folders are read together; ``--pool-seeds`` makes one cell of an arm's training seeds
(the learner comparison's ``ARM-sSEED`` policies), as its sample suffix ``~j`` always is.

``--play`` first plays ``--policy`` (default: the learners' warm-up, every arm's start) into the
folder as the learner comparison (``benchmarks.experiments.learner_comparison``) evaluates a policy: its
held-out questions, prompt, turn budget and window, greedy and ``--samples`` times at the rollout
temperature, in the memory view (resumed episode by episode); ``--search oracle`` plays it in the
oracle-evidence mode, where retrieval cannot fail (docs/environment.md#oracle-evidence-search).
"""

from __future__ import annotations

import argparse
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from mempo_env.env import SEARCH_MODES

CAUSES = ("no answer", "not found", "dropped", "answer")


def cause(record: dict[str, Any]) -> str | None:
    """The first thing that went wrong in an episode (``None``: it scored F1 1)."""
    if record["f1"] >= 1.0:
        return None
    if not record["answer"]:
        return "no answer"
    turns = [t for t in record["memory_per_turn"] if t["found"]]
    last = turns[-1] if turns else {"found": 0, "kept": 0}
    if last["found"] < record["evidence_items"]:
        return "not found"
    if last["kept"] < last["found"]:
        return "dropped"
    return "answer"


def wrong_parts(record: dict[str, Any]) -> bool:
    """Whether the answer has another number of ``;``-separated parts than the episode has questions."""
    return len(record["answer"].split(";")) != len(record["golden_answers"])


def split(records: list[dict[str, Any]], pool_seeds: bool = False) -> list[dict[str, Any]]:
    """One row per (objectives, context, agent) cell, the agent's sample suffix (``~j``) pooled, and
    with ``pool_seeds`` its training seed's (``-sN``) too."""
    cells: dict[tuple[int, str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        agent = r["agent"].split("~")[0]
        cells[(r["objectives"], r["context"], re.sub(r"-s\d+$", "", agent) if pool_seeds else agent)].append(r)
    rows = []
    for (objectives, context, agent), rs in sorted(cells.items()):
        n = len(rs)
        by_cause = {c: [r for r in rs if cause(r) == c] for c in CAUSES}
        rows.append({
            "objectives": objectives, "context": context, "agent": agent, "episodes": n,
            "f1": 100 * sum(r["f1"] for r in rs) / n,
            "share": {c: 100 * len(by_cause[c]) / n for c in CAUSES},
            "points": {c: 100 * sum(1 - r["f1"] for r in by_cause[c]) / n for c in CAUSES},
            "wrong_parts": sum(wrong_parts(r) for r in by_cause["answer"]),
            "answered": sum(bool(r["answer"]) for r in rs),
            "right_parts": sum(bool(r["answer"]) and not wrong_parts(r) for r in rs),
        })
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    from agents.statistics import table_head

    lines = table_head(["objectives", "view", "agent", "episodes", "F1 %",
                        *(f"{c}: episodes %, F1 points" for c in CAUSES), "wrong number of parts",
                        "answers in the right number of parts"])
    for r in rows:
        causes = " | ".join(f"{r['share'][c]:.0f}, {r['points'][c]:.1f}" for c in CAUSES)
        answer_cause = round(r["share"]["answer"] * r["episodes"] / 100)
        lines.append(f"| {r['objectives']} | {r['context']} | {r['agent']} | {r['episodes']} | {r['f1']:.1f} | "
                     f"{causes} | {r['wrong_parts']} of {answer_cause} | {r['right_parts']} of {r['answered']} |")
    return "\n".join(lines)


def play(out: Path, policy: str, objectives: list[int], episodes: int, samples: int,
         search: str = "retriever") -> None:
    """``policy`` greedy and sampled into ``out``, with the learner comparison's evaluation settings
    (``benchmarks.experiments.learner_comparison.settings``); ``search``: the environment's (``"oracle"``:
    search returns the next hop's gold evidence, so "not found" can only come from a search never made)."""
    from transformers import AutoConfig

    from algorithms.mempo import Config
    from algorithms.sft import default_warmup
    from benchmarks.experiments.learner_comparison import settings as learners
    from benchmarks.run import evaluate

    base = Config()
    path = policy or str(default_warmup(base.task_seed, base.hops))
    greedy = f"hf:{path}#max_new_tokens={learners.EVAL_MAX_NEW_TOKENS}"
    agents = {"greedy": greedy, **{f"T{base.temperature:g}~{j}": f"{greedy}#temperature={base.temperature}"
                                   f"#seed={j * learners.SAMPLING_SEED}" for j in range(1, samples + 1)}}
    window = AutoConfig.from_pretrained(path).max_position_embeddings - learners.EVAL_MAX_NEW_TOKENS
    evaluate(agents, out_dir=out, dataset=learners.eval_task("test", base), objectives=objectives,
             contexts=["memory"], episodes=episodes, prompt=learners.TRAIN_PROMPT, max_turns=base.max_turns,
             tokenizer=path, max_context_tokens=window, plots=False, verbose=False, batch_size=episodes,
             search_mode=search)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.experiments.memory_bottleneck",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("run", nargs="+", help="benchmarks.run output folders (their episodes.jsonl)")
    parser.add_argument("--play", action="store_true", help="first play --policy into it (see the module doc)")
    parser.add_argument("--policy", default="", help="a model folder; empty: the learners' warm-up")
    parser.add_argument("--objectives", default="6,8,10", help="horizons to play, comma-separated")
    parser.add_argument("--episodes", type=int, default=40, help="held-out questions per horizon")
    parser.add_argument("--samples", type=int, default=2, help="sampled episodes per question")
    parser.add_argument("--search", default="retriever", choices=SEARCH_MODES,
                        help="with --play: what a search returns (docs/environment.md#oracle-evidence-search)")
    parser.add_argument("--pool-seeds", action="store_true", help="one row per arm: its training seeds together")
    args = parser.parse_args(argv)
    from agents.episode_log import read_episodes  # the runner's reader: a folder still being written reads too

    if args.play:
        if len(args.run) > 1:
            raise SystemExit("error: --play plays into one folder")
        play(Path(args.run[0]), args.policy, [int(k) for k in args.objectives.split(",")], args.episodes, args.samples,
             args.search)
    records = []
    for run in args.run:
        path = Path(run) / "episodes.jsonl"
        if not path.exists():
            raise SystemExit(f"error: {path} does not exist (run benchmarks.run into {run} first)")
        records += read_episodes(path)
    print(table(split(records, args.pool_seeds)))


if __name__ == "__main__":
    main()
