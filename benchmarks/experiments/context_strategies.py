"""Context strategies compared on one benchmark: a warm-up per strategy, one budget, 1-10 objectives.

    python -m benchmarks.experiments.context_strategies --jobs 2   # 6 strategies, 100 episodes a cell (1.1 h, 2 cores)
    python -m benchmarks.experiments.context_strategies --quick    # 10 steps, 10 episodes at 1, 2, 6, 10 objectives
    python -m benchmarks.experiments.context_strategies --results-md benchmarks/RESULTS.md   # and its section, record

Builds: every strategy (``--strategies``) fine-tunes the shipped warm-up (``algorithms/warmup``,
trained in the memory view) with ``algorithms.sft``: the same oracle episodes rendered in that
strategy, the same budget (steps x turns, learning rate, batch order), into ``OUT/builds/S``. A
strategy whose rendered turns equal an earlier one's (``window:1`` and ``memory`` build the same
prompts) reuses its build. The start is memory-trained, which favours ``memory``: so ``memory``
gets the same extra steps as the others, and the zero-shot rows (the warm-up itself in every
strategy) show its head start.

Evaluation (``benchmarks.run.evaluate``): the oracle, the zero-shot warm-up and the fine-tuned policy
in each strategy, on the same held-out questions (world 0's test split, 1-hop, the training prompt,
greedy, up to 256 new tokens a turn, an episode whose next prompt outgrows the policy's window ending
unanswered), into ``OUT/eval-S``.

Each stage is skipped where its outputs exist (a build's folder, an evaluation's episodes), so the
same command resumes a killed run; a folder built or played with other settings is refused. The
report (``report.md``, ``results.json``, ``f1_vs_objectives.png``, ``cost_vs_objectives.png``): F1,
total and peak tokens per strategy with 95% intervals, what each build cost, and where each strategy
breaks: how its episodes end per horizon (format, context overflow, answer count, turn budget) and
what its summaries did (``context_events``).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import inspect
import json
import os
import re
import shlex
import sys
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from agents.statistics import FOOTNOTE, cell_text, jsonable, mean_ci, summarize, table_head
from algorithms.sft import SHIPPED, SFTConfig, oracle_turns, recipe, warm_up
from benchmarks.experiments.learner_comparison.comparison import in_parallel
from benchmarks.experiments.learner_comparison.report import commit, machine
from benchmarks.report import BenchmarkError, Comparison, load_run, write_comparison
from benchmarks.run import _int_list, build_strategies, evaluate
from mempo_env.env import MemSearchQAEnv
from mempo_env.tasks import make_generated_task

# summary at 4,000 characters: at 8,000 (the default) it engages only at 10 objectives in this 1-hop world.
STRATEGIES = ("full", "memory", "window:1", "window:4", "summary:4000", "summary+keep1:4000")
POLICIES = ("fine-tuned", "zero-shot", "oracle")
EPISODES, OBJECTIVES = 100, (1, 2, 4, 6, 8, 10)
# The fine-tune of every strategy: 2,000 oracle episodes (1-10 objectives over 200 worlds) rendered in
# it, steps of 16 turns (micro-batches of 4 in order of length) at lr 5e-4 after 10 warm-up steps.
FINE_TUNE = {"episodes": 2000, "steps": 100, "batch_size": 16, "microbatch_size": 4, "lr": 5e-4, "warmup_steps": 10}
QUICK = {"fine_tune": {"episodes": 200, "steps": 10}, "episodes": 10, "objectives": (1, 2, 6, 10)}
PER_STRATEGY = ("context", "base", "cache_dir")  # SFTConfig fields the comparison sets itself
PROMPT = inspect.signature(MemSearchQAEnv).parameters["prompt"].default  # the one the oracle turns are rendered in
# As the learner comparison: up to 256 new tokens a turn (the oracle's longest turn at 10 objectives
# is 207 of the tiny policy's tokens) and 14 turns or 4 per objective, so that the memory view's
# zero-shot row replays that comparison's warm-up row.
MAX_NEW_TOKENS, MAX_TURNS = 256, 14
COMPARISON, BUILDS = "comparison.json", "builds.json"
HEADING = "## 5. Context strategies compared"  # of RESULTS.md, which shows the HEADLINE sections
HEADLINE = ("(a) ", "(d) ")
RECORD, RECORD_HEADING = "docs/experiments/context-strategies.md", "## The tables"  # the whole report
MARK = "<!-- benchmarks.experiments.context_strategies: generated"
BEGIN = MARK + " from {out}; write the reading outside it -->"
END = "<!-- benchmarks.experiments.context_strategies: end -->"
TESTED_BY = "<!-- tested by tests/test_strategies.py::test_the_documented_strategy_commands_parse -->"


def slug(strategy: str) -> str:
    """A strategy's name as a folder name (``window:4`` -> ``window-4``)."""
    return re.sub(r"[^\w.+-]", "-", strategy)


def eval_dir(out: Path, strategy: str) -> Path:
    return out / f"eval-{slug(strategy)}"


def fine_tune_config(warmup: Path, fine_tune: Mapping[str, Any]) -> SFTConfig:
    """The fine-tune every strategy gets: ``FINE_TUNE`` with ``fine_tune`` over it, from ``warmup``."""
    if bad := sorted(set(fine_tune) & set(PER_STRATEGY)):
        raise BenchmarkError(f"fine-tune settings {bad} are set per strategy by the comparison")
    try:
        cfg = SFTConfig(**{**FINE_TUNE, **fine_tune, "base": str(warmup)})
    except TypeError as e:
        raise BenchmarkError(f"fine-tune settings: {e}") from None
    for name in ("steps", "batch_size", "episodes", "worlds"):
        if getattr(cfg, name) < 1:
            raise BenchmarkError(f"fine-tune {name} must be at least 1, got {getattr(cfg, name)}")
    if cfg.microbatch_size < 0:
        raise BenchmarkError(f"fine-tune microbatch_size must be >= 0 (0: a whole step), got {cfg.microbatch_size}")
    return cfg


def build_all(out: Path, strategies: Sequence[str], base: SFTConfig) -> dict[str, dict[str, Any]]:
    """Fine-tune each strategy (``OUT/builds/S``) unless it is built; return ``builds.json``: strategy ->
    ``{"recipe", "turns_sha", "render_s", "checkpoint", "same_as"?, "build"?}``."""
    path = out / BUILDS
    records: dict[str, dict[str, Any]] = json.loads(path.read_text()) if path.exists() else {}
    tokenizer = None
    for name in strategies:
        cfg = dataclasses.replace(base, context=name)
        folder = out / "builds" / slug(name)
        done = records.get(name)
        if done and (done.get("same_as") or (folder / "config.json").is_file()):
            continue
        from transformers import AutoTokenizer

        tokenizer = tokenizer or AutoTokenizer.from_pretrained(base.base)
        started = time.perf_counter()
        turns = oracle_turns(cfg, tokenizer)
        record = {"recipe": recipe(cfg), "turns_sha": hashlib.sha1(json.dumps(turns).encode()).hexdigest()[:16],
                  "render_s": round(time.perf_counter() - started)}
        same = next((n for n, r in records.items() if r["turns_sha"] == record["turns_sha"] and "build" in r), None)
        if same:  # the same prompts token for token: the same training, so the same checkpoint
            record.update(same_as=same, checkpoint=records[same]["checkpoint"])
        else:
            warm_up(cfg, folder, turns)
            record.update(checkpoint=str(folder), build=json.loads((folder / "build.json").read_text()))
        records[name] = record
        path.write_text(json.dumps(records, indent=1))
    return records


def check_builds(out: Path, strategies: Sequence[str], base: SFTConfig) -> None:
    """Refuse builds made with other fine-tune settings, before any work."""
    path = out / BUILDS
    records = json.loads(path.read_text()) if path.exists() else {}
    for name in strategies:
        if name in records:
            now = json.loads(json.dumps(recipe(dataclasses.replace(base, context=name))))
            saved = records[name]["recipe"]
            if changed := "; ".join(f"{k}: {saved.get(k)!r} there, {v!r} now" for k, v in now.items()
                                    if saved.get(k) != v):
                raise BenchmarkError(f"{out} holds a build of {name} with other settings ({changed}); "
                                     "use another --out")


def compare(out_dir: str | Path = "runs/strategies", *, strategies: Sequence[str] = STRATEGIES,
            episodes: int = EPISODES, objectives: Sequence[int] = OBJECTIVES, warmup: str | Path | None = None,
            fine_tune: Mapping[str, Any] | None = None, jobs: int = 1, command: str | None = None,
            verbose: bool = True) -> dict[str, Any]:
    """Build, evaluate and report (see the module docstring); return ``report``'s result.

    ``fine_tune``: ``SFTConfig`` fields over ``FINE_TUNE`` (e.g. ``{"steps": 2}``), the same for every
    strategy. ``warmup``: the start of every fine-tune and the zero-shot policy (default: the shipped one).
    ``jobs``: strategies evaluated at once, each in a process of its own (the fine-tunes run one by one).
    """
    start = time.perf_counter()
    out = Path(out_dir)
    strategies, objectives = list(strategies), list(objectives)
    try:
        names = list(build_strategies(strategies))  # a bad name fails here, before any work
    except BenchmarkError as e:
        raise BenchmarkError(f"strategies: {e}") from None
    if names != strategies:
        raise BenchmarkError(f"strategies must be given by their names, e.g. {names}, not {strategies}")
    if len({slug(s) for s in strategies}) < len(strategies):
        raise BenchmarkError(f"strategies {strategies} would share an output folder")
    if episodes < 1 or jobs < 1:
        raise BenchmarkError(f"episodes and jobs must be at least 1, got {episodes}, {jobs}")
    if not objectives or len(set(objectives)) < len(objectives) or min(objectives) < 1:
        raise BenchmarkError(f"objectives must be distinct positive integers, got {objectives}")
    warmup = Path(warmup) if warmup else SHIPPED
    if not (warmup / "config.json").is_file():
        raise BenchmarkError(f"warm-up {warmup} is not a checkpoint folder (no config.json)")
    base = fine_tune_config(warmup, dict(fine_tune or {}))
    task = make_generated_task("test", seed=base.task_seed, hops=base.hops)  # held out from every fine-tune
    if max(objectives) > len(task.questions):
        raise BenchmarkError(f"{max(objectives)} objectives but {task.name} has {len(task.questions)} questions")
    check_builds(out, strategies, base)
    from transformers import AutoConfig

    max_context = AutoConfig.from_pretrained(warmup).max_position_embeddings - MAX_NEW_TOKENS

    previous = json.loads((out / COMPARISON).read_text()) if (out / COMPARISON).exists() else {}
    info = {"settings": {"strategies": strategies, "episodes": episodes, "objectives": objectives,
                         "task": task.name, "warmup": str(warmup), "prompt": PROMPT, "max_turns": MAX_TURNS,
                         "max_new_tokens": MAX_NEW_TOKENS, "max_context_tokens": max_context,
                         "fine_tune": dataclasses.asdict(base)},
            "command": command or "benchmarks.experiments.context_strategies.compare (library call)",
            "wall_s": previous.get("wall_s", 0.0), "machine": machine(), "commit": commit()}
    out.mkdir(parents=True, exist_ok=True)
    (out / COMPARISON).write_text(json.dumps(info, indent=1))

    builds = build_all(out, strategies, base)
    spec = f"hf:{{}}#max_new_tokens={MAX_NEW_TOKENS}"
    in_parallel(jobs, [(partial(evaluate, out_dir=eval_dir(out, name), dataset=task, objectives=objectives,
                                contexts=[name], episodes=episodes, prompt=PROMPT, max_turns=MAX_TURNS,
                                tokenizer=str(warmup), max_context_tokens=max_context, plots=False,
                                verbose=verbose and jobs == 1),
                        {"fine-tuned": spec.format(builds[name]["checkpoint"]), "zero-shot": spec.format(warmup),
                         "oracle": "oracle"})
                       for name in strategies])

    info["wall_s"] += time.perf_counter() - start
    (out / COMPARISON).write_text(json.dumps(info, indent=1))
    result = report(out)
    if verbose:
        print(result["markdown"])
    return result


# ---- the report ----------------------------------------------------------------------------------
OUTCOMES = ("all right", "right count, some wrong", "too many answers", "too few answers", "format failed",
            "no answer (turn budget)", "context overflow")


def outcome(record: dict[str, Any]) -> str:
    """How an episode ended, the first that applies: its prompt outgrew the window, it never answered,
    it answered with a turn that broke the format, with a wrong number of answers, or the right number."""
    if record.get("context_overflow"):
        return "context overflow"
    if record["answer"] is None:
        return "no answer (turn budget)"
    if not record["format_ok"]:
        return "format failed"
    k, parts = record["objectives"], len(record["answer"].split(";"))
    if k > 1 and parts != k:  # one question's answer is never split
        return "too many answers" if parts > k else "too few answers"
    return "all right" if record["em"] == 1 else "right count, some wrong"


def failures(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per policy, strategy and horizon: episodes by ``outcome``, summaries per episode and their outcomes."""
    cells: dict[tuple, list[dict[str, Any]]] = {}
    for r in records:
        cells.setdefault((r["agent"], r["context"], r["objectives"]), []).append(r)
    rows = []
    for (agent, context, k), rs in cells.items():
        events = [e for r in rs for e in r.get("context_events", [])]
        rows.append({"agent": agent, "context": context, "objectives": k, "episodes": len(rs),
                     **Counter(outcome(r) for r in rs), "events per episode": len(events) / len(rs),
                     "event outcomes": dict(Counter(e["outcome"] for e in events))})
    return rows


def load_records(out: Path, settings: dict[str, Any]) -> list[dict[str, Any]]:
    """The comparison's episodes: its strategies, policies, horizons and first ``episodes`` per cell."""
    records = []
    for name in settings["strategies"]:
        records += [r for r in load_run(eval_dir(out, name))[1]
                    if r["agent"] in POLICIES and r["context"] == name and r["objectives"] in settings["objectives"]
                    and r["episode"] < settings["episodes"]]
    return records


def _pivot(title: str, strategies: Sequence[str], objectives: Sequence[int], cell: Any) -> list[str]:
    """A table of one value per horizon (rows) and strategy (columns)."""
    return ["", f"### {title}", "", *table_head(["objectives", *strategies]),
            *(f"| {k} | " + " | ".join(cell(s, k) for s in strategies) + " |" for k in objectives)]


def markdown(records: list[dict[str, Any]], builds: dict[str, dict[str, Any]], settings: dict[str, Any],
             failure_rows: list[dict[str, Any]]) -> str:
    strategies, ks = settings["strategies"], settings["objectives"]
    rows = {(r["agent"], r["context"], r["objectives"]): r for r in summarize(records)}
    f1 = {(r["agent"], r["context"], r["objectives"], r["episode"]): r["f1"] for r in records}

    def value(policy: str, metric: str):
        return lambda s, k: cell_text(rows[policy, s, k][metric], metric) if (policy, s, k) in rows else "–"

    def gain(s: str, k: int) -> str:
        diffs = [f1["fine-tuned", s, k, e] - f1["zero-shot", s, k, e] for e in range(settings["episodes"])
                 if ("fine-tuned", s, k, e) in f1 and ("zero-shot", s, k, e) in f1]
        if len(diffs) < 2:
            return "–"
        mean, half = mean_ci(diffs)
        return f"{100 * mean:+.1f} ± {100 * half:.1f}"

    lines = [describe(settings), "", FOOTNOTE + " Paired differences: mean ± 95% Student-t half-width of the "
             "per-question differences."]
    lines += _pivot("(a) F1 % of the fine-tuned policies", strategies, ks, value("fine-tuned", "f1"))
    lines += _pivot("(b) F1 % zero-shot: the warm-up, trained in the memory view", strategies, ks,
                    value("zero-shot", "f1"))
    lines += _pivot("(c) Fine-tuned − zero-shot, F1 points (paired)", strategies, ks, gain)
    lines += _pivot("(d) Total tokens (TT) per episode, fine-tuned (summaries included)", strategies, ks,
                    value("fine-tuned", "total_tokens"))
    lines += _pivot("(e) Peak tokens (PT) per episode, fine-tuned", strategies, ks, value("fine-tuned", "peak_tokens"))
    last = max(ks)
    lines += ["", f"### (f) The oracle at {last} objectives: the same searches in every strategy that shows "
              "it its last turn", "", *table_head(["strategy", "F1 %", "TT tokens", "PT tokens"])]
    lines += [f"| {s} | " + " | ".join(value("oracle", m)(s, last) for m in ("f1", "total_tokens", "peak_tokens"))
              + " |" for s in strategies]
    lines += ["", "### (g) What each fine-tune cost", "",
              *table_head(["strategy", "build", "turns trained", "tokens trained", "rendering the oracle turns",
                           "training", "per step", "compute"])]
    for s in strategies:
        b = builds[s]
        if "same_as" in b:
            lines.append(f"| {s} | {b['same_as']}'s: the same prompts, token for token | | | "
                         f"{b['render_s'] / 60:.1f} min | | | |")
            continue
        build, cfg = b["build"], b["recipe"]
        lines.append(f"| {s} | {cfg['steps']} steps × {cfg['batch_size']} turns, lr {cfg['lr']} | "
                     f"{cfg['steps'] * cfg['batch_size']:,} of {build['turns']:,} | {build['trained_tokens']:,} | "
                     f"{b['render_s'] / 60:.1f} min | {build['seconds'] / 60:.1f} min | "
                     f"{build['seconds'] / cfg['steps']:.1f} s | {build['compute']} |")
    head = ["strategy", "objectives", "F1 %", *OUTCOMES, "summaries per episode", "summary outcomes"]
    lines += ["", "### (h) Where each strategy breaks: how the fine-tuned policies' episodes end", "",
              *table_head(head)]
    by_cell = {(r["agent"], r["context"], r["objectives"]): r for r in failure_rows}
    for s in strategies:
        for k in ks:
            if (r := by_cell.get(("fine-tuned", s, k))) is None:
                continue
            events = ", ".join(f"{n} {o}" for o, n in sorted(r["event outcomes"].items(), key=lambda x: -x[1]))
            lines.append(f"| {s} | {k} | {value('fine-tuned', 'f1')(s, k)} | "
                         + " | ".join(str(r.get(o, 0)) for o in OUTCOMES)
                         + f" | {r['events per episode']:.1f} | {events or '–'} |")
    return "\n".join(lines)


def describe(settings: dict[str, Any]) -> str:
    """The builds and the evaluation in words, from the recorded settings."""
    c = settings["fine_tune"]
    return (f"Fine-tune of every strategy (`algorithms.sft`, the same for each): from `{settings['warmup']}`, "
            f"{c['steps']} steps × {c['batch_size']} turns, lr {c['lr']} ({c['warmup_steps']} warm-up steps, "
            f"cosine decay), context weight {c['context_weight']}, on the turns of {c['episodes']:,} oracle "
            f"episodes at {min(c['objectives'])}-{max(c['objectives'])} objectives over {c['worlds']} generated "
            f"worlds of {c['hops']}-hop questions (train splits, world {c['task_seed']} first), rendered in the "
            f"strategy; the same batches of turns in every strategy. Evaluation (`benchmarks.run.evaluate`): "
            f"{settings['episodes']} greedy episodes per policy, strategy and horizon on `{settings['task']}`, "
            f"the same questions for every strategy, prompt `{settings['prompt']}`, turn budget "
            f"max({settings['max_turns']}, 4 × objectives), up to {settings['max_new_tokens']} new tokens a turn, "
            f"an episode whose next prompt exceeds {settings['max_context_tokens']} tokens ending unanswered "
            f"(the policy's window less that budget); TT and PT in the policy's tokens, a summary's reading and "
            f"writing counted in them. Policies: fine-tuned (its strategy's build), zero-shot (the warm-up "
            f"itself), oracle (scripted).")


def report(out_dir: str | Path) -> dict[str, Any]:
    """Rebuild ``results.json``, ``report.md`` and the plots of a comparison folder from its episodes."""
    out = Path(out_dir)
    if not (out / COMPARISON).is_file():
        raise BenchmarkError(f"{out} is not a strategy comparison: no {COMPARISON} in it")
    settings = json.loads((out / COMPARISON).read_text())["settings"]
    builds = json.loads((out / BUILDS).read_text())
    records = load_records(out, settings)
    failure_rows = failures(records)
    text = markdown(records, builds, settings, failure_rows)
    rows = summarize(records)
    result = {"settings": settings, "builds": builds, "rows": jsonable(rows), "failures": failure_rows,
              "markdown": text}
    (out / "results.json").write_text(json.dumps(result, indent=1))
    (out / "report.md").write_text(text + "\n")
    from benchmarks.plots import plot_runs  # matplotlib: imported only to plot

    # One panel per policy, one line per strategy (its colour the same in every panel).
    panels = {policy: summarize([{**r, "agent": r["context"]} for r in records if r["agent"] == policy])
              for policy in POLICIES}
    plot_runs({"fine-tuned": panels["fine-tuned"], "zero-shot (the memory-view warm-up)": panels["zero-shot"],
               "oracle": panels["oracle"]}, out)
    return result


def write_results_section(out_dir: str | Path, results_md: str | Path = "benchmarks/RESULTS.md",
                          record_md: str | Path = RECORD) -> Path:
    """Put a finished comparison under RESULTS.md's strategies heading (command, machine, the F1 and
    total-token tables, the plots) and its whole report under the experiment's record's
    (``benchmarks.report.write_comparison``)."""
    out = Path(out_dir)
    info = json.loads((out / COMPARISON).read_text())
    comparison = Comparison(
        MARK, BEGIN.format(out=out), END, TESTED_BY, info["command"],
        f"Machine: {info['machine']}; commit {info['commit']}; wall time {info['wall_s'] / 3600:.1f} h "
        "(the invocations that ran to the end).", (out / "report.md").read_text(), HEADLINE,
        [(out / "f1_vs_objectives.png", "strategies_f1.png", "F1 vs objectives, context strategies"),
         (out / "cost_vs_objectives.png", "strategies_cost.png", "cost vs objectives, context strategies")])
    return write_comparison(comparison, results_md, HEADING, record_md, RECORD_HEADING)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(prog="python -m benchmarks.experiments.context_strategies", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help=f"a first look: {QUICK['fine_tune']['steps']} steps on {QUICK['fine_tune']['episodes']} oracle "
                        f"episodes, {QUICK['episodes']} evaluation episodes at objectives "
                        f"{','.join(map(str, QUICK['objectives']))} (explicit flags still win)")
    p.add_argument("--out", default=None, help="output folder (default runs/strategies; runs/strategies-quick)")
    p.add_argument("--strategies", default=",".join(STRATEGIES),
                   help="context strategies, comma-separated: any name of mempo_env.context")
    p.add_argument("--steps", type=int, default=None,
                   help=f"fine-tune steps per strategy (default {FINE_TUNE['steps']})")
    p.add_argument("--batch-size", type=int, default=None, help=f"turns per step (default {FINE_TUNE['batch_size']})")
    p.add_argument("--microbatch-size", type=int, default=None,
                   help=f"turns per forward and backward pass (default {FINE_TUNE['microbatch_size']}; 0: all)")
    p.add_argument("--lr", type=float, default=None, help=f"peak learning rate (default {FINE_TUNE['lr']})")
    p.add_argument("--train-episodes", type=int, default=None,
                   help=f"oracle episodes whose turns are rendered in each strategy (default {FINE_TUNE['episodes']})")
    p.add_argument("--threads", type=int, default=None, help="torch threads of a fine-tune (default: measured)")
    p.add_argument("--episodes", type=int, default=None,
                   help=f"evaluation episodes per policy, strategy and horizon (default {EPISODES})")
    p.add_argument("--objectives", default=None, help=f"evaluation horizons (default {','.join(map(str, OBJECTIVES))})")
    p.add_argument("--warmup", default=None, help=f"the start of every fine-tune (default {SHIPPED})")
    p.add_argument("--jobs", type=int, default=1, help="strategies evaluated at once, a process each")
    p.add_argument("--results-md", default=None, metavar="PATH",
                   help=f'then write the "{HEADING[3:]}" section of this file (benchmarks/RESULTS.md)')
    p.add_argument("--record-md", default=RECORD, metavar="PATH",
                   help=f"with --results-md: the experiment's record that gets the whole report (default {RECORD})")
    args = p.parse_args(argv)
    quick = QUICK if args.quick else {"fine_tune": {}, "episodes": EPISODES, "objectives": OBJECTIVES}
    flags = {"steps": args.steps, "batch_size": args.batch_size, "microbatch_size": args.microbatch_size,
             "lr": args.lr, "episodes": args.train_episodes, "threads": args.threads}
    fine_tune = {**quick["fine_tune"], **{k: v for k, v in flags.items() if v is not None}}
    out = args.out or ("runs/strategies-quick" if args.quick else "runs/strategies")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        result = compare(
            out, strategies=[s.strip() for s in args.strategies.split(",") if s.strip()],
            episodes=quick["episodes"] if args.episodes is None else args.episodes,
            objectives=_int_list(args.objectives, "--objectives") if args.objectives else quick["objectives"],
            warmup=args.warmup, fine_tune=fine_tune, jobs=args.jobs,
            command=shlex.join(["python", "-m", "benchmarks.experiments.context_strategies",
                                *(sys.argv[1:] if argv is None else argv)]))
        if args.results_md:
            print(f"written to {write_results_section(out, args.results_md, args.record_md)} and {args.record_md}")
    except BenchmarkError as e:
        p.error(str(e))
    print(f"written to {out}")
    return result


if __name__ == "__main__":
    main()
