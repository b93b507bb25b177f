"""Evaluate agents on MemSearchQA-v0: ``python -m benchmarks.run`` (defaults: the generated task).

Every episode is appended to ``episodes.jsonl`` as it finishes; started again with the same
arguments, a run skips the episodes it already has. Episode ``e`` of every agent and view is reset
with seed ``seed + e``, so all agents answer the same questions.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import gymnasium as gym
from tqdm import tqdm

import mempo_env  # noqa: F401  (registers MemSearchQA-v0)
from agents import Agent, make_agent
from benchmarks.summary import markdown_table, summarize
from mempo_env.retrieval import make_retriever
from mempo_env.retrieval.cache import RecordReplayRetriever
from mempo_env.tasks import resolve_task


def run_episode(env: gym.Env, agent: Agent, seed: int) -> dict[str, Any]:
    obs, info = env.reset(seed=seed)
    done = False
    while not done:
        obs, _, terminated, truncated, info = env.step(agent.act(obs, info))
        done = terminated or truncated
    keep = ("answer", "score", "em", "f1", "correct", "format_ok", "format_failed", "n_turns", "n_searches",
            "total_chars", "peak_chars", "total_tokens", "peak_tokens")
    record = {k: info[k] for k in keep if k in info}
    record["question_ids"] = [o["id"] for o in info["objectives"]]
    record["golden_answers"] = [o["answers"] for o in info["objectives"]]
    record["trajectory"] = env.unwrapped.messages
    return record


def load_done(path: Path) -> list[dict[str, Any]]:
    """Finished episodes; a torn last line (killed mid-write) is dropped and rewritten later."""
    if not path.exists():
        return []
    records = []
    for line in path.read_text().splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            break
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return records


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--agents", default="oracle,weak,random", help="comma-separated agent specs")
    p.add_argument("--dataset", default=None, help="generated task (default), a shared set name or a file")
    p.add_argument("--corpus", default=None, help="corpus file for --dataset")
    p.add_argument("--split", default="test", help="generated task split")
    p.add_argument("--retriever", default=None, help="Search-R1 /retrieve URL (default: in-process BM25)")
    p.add_argument("--record-retrieval", metavar="LOG", help="append every search result to this JSONL log")
    p.add_argument("--replay-retrieval", metavar="LOG", help="answer searches only from this log (exact rerun)")
    p.add_argument("--objectives", default="1,2,4", help="comma-separated questions per episode")
    p.add_argument("--context", default="memory,full", help="comma-separated views: memory, full")
    p.add_argument("--prompt", default="eval", help="prompt template")
    p.add_argument("--episodes", type=int, default=100, help="episodes per agent x view x objectives")
    p.add_argument("--max-turns", type=int, default=16)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tokenizer", default=None, help="HF tokenizer path: report TT/PT in tokens too")
    p.add_argument("--out", default="runs/eval", help="output folder")
    args = p.parse_args(argv)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    episodes_path = out / "episodes.jsonl"
    records = load_done(episodes_path)
    done = {(r["agent"], r["context"], r["objectives"], r["episode"]) for r in records}
    tokenizer = None
    if args.tokenizer:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(args.tokenizer)
    task = resolve_task(args.dataset, corpus=args.corpus, split=args.split)
    if args.replay_retrieval:
        retriever = RecordReplayRetriever(args.replay_retrieval, mode="replay")
    else:
        retriever = make_retriever(args.retriever, task.corpus)
        if args.record_retrieval:
            retriever = RecordReplayRetriever(args.record_retrieval, retriever, mode="record")
    agents = [make_agent(s) for s in args.agents.split(",")]
    grid = [(a, c, int(k)) for a in agents for c in args.context.split(",") for k in args.objectives.split(",")]
    total = len(grid) * args.episodes
    with episodes_path.open("a") as sink, tqdm(total=total, initial=len(done), desc="episodes") as bar:
        for agent, context, k in grid:
            todo = [e for e in range(args.episodes) if (agent.name, context, k, e) not in done]
            if not todo:
                continue
            env = gym.make("MemSearchQA-v0", dataset=task, retriever=retriever, context=context,
                           prompt=args.prompt, objectives=k, max_turns=args.max_turns, tokenizer=tokenizer)
            for e in todo:
                record = {"agent": agent.name, "context": context, "objectives": k, "episode": e,
                          "seed": args.seed + e, **run_episode(env, agent, args.seed + e)}
                sink.write(json.dumps(record) + "\n")
                sink.flush()
                records.append(record)
                bar.update()
    rows = summarize(records)
    table = markdown_table(rows)
    (out / "results.json").write_text(json.dumps(rows, indent=1))
    (out / "table.md").write_text(table + "\n")
    print(table)
    return rows


if __name__ == "__main__":
    main()
