"""A comparison's report (``results.json``, ``report.md``, the plots) rebuilt from its folder, and written
into RESULTS.md and the experiment's record."""

from __future__ import annotations

import json
import math
import os
import platform
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from agents.statistics import jsonable, mean_ci, summarize
from algorithms.compute import cpu_name
from benchmarks.experiments.learner_comparison.settings import (
    BEGIN,
    COMPARISON,
    END,
    HEADING,
    HEADLINE,
    LEARNERS,
    MARK,
    RECORD,
    RECORD_HEADING,
    TESTED_BY,
    arms_of,
)
from benchmarks.experiments.learner_comparison.tables import (
    Cell,
    learning_tables,
    load_records,
    load_runs,
    markdown,
    question_tables,
    seed_averaged,
)
from benchmarks.report import BenchmarkError, Comparison, write_comparison


def curve_series(runs: Mapping[str, Mapping[str, list]], arm: str, seeds: Sequence[int], log: str,
                 key: str) -> tuple[list[int], list[Cell]]:
    """Steps and, at each, ``key``'s mean and 95% interval over the seeds that logged it (``reward_avg`` of
    ``metrics``; ``sampled_f1`` or ``greedy_f1`` of ``curve``, whose values are (mean, half-width)); none for
    an arm the comparison did not train (a learner's panel without the control)."""
    by_step: dict[int, list[float]] = {}
    for s in seeds:
        for line in runs.get(f"{arm}-s{s}", {}).get(log, []):
            if key in line:
                value = line[key]
                by_step.setdefault(line["step"], []).append(value[0] if isinstance(value, list) else value)
    steps = sorted(by_step)
    return steps, [mean_ci(by_step[t]) for t in steps]


def plot_curves(runs: Mapping[str, Mapping[str, list]], settings: dict[str, Any], path: Path) -> Path:
    """``curves.png``: per learner, the rollout reward's moving average and the held-out sampled and
    greedy F1 against steps, trained vs the control, bands: 95% intervals over the training seeds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    c, seeds = settings["learner"], settings["seeds"]
    rows = [("metrics", "reward_avg", f"rollout reward, moving average of {c.get('reward_window', 1)} steps"),
            ("curve", "sampled_f1", f"held-out sampled F1 (T={c['temperature']}), {c['objectives']} objectives"),
            ("curve", "greedy_f1", f"held-out greedy F1, {c['objectives']} objectives")]
    columns = [arm for arm in (*LEARNERS, "grpo-full") if arm in arms_of(settings)]
    fig, axes = plt.subplots(len(rows), len(columns), figsize=(5 * len(columns), 3.2 * len(rows)), squeeze=False)
    for col, arm in enumerate(columns):
        for row, (log, key, label) in enumerate(rows):
            ax = axes[row][col]
            for name, color in ((arm, "C0"), ("control", "C7")) if arm in LEARNERS else ((arm, "C0"),):
                steps, cells = curve_series(runs, name, seeds, log, key)
                if not steps:
                    continue
                mean = [m for m, _ in cells]
                ax.plot(steps, mean, "-o", markersize=3, color=color, label=name)
                if not any(math.isnan(h) for _, h in cells):
                    ax.fill_between(steps, [m - h for m, h in cells], [m + h for m, h in cells], color=color,
                                    alpha=0.2, linewidth=0)
            ax.set_title(f"{arm}: {label}", fontsize=9)
            ax.set_xlabel("RL step")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
    fig.suptitle(f"Learning curves, {len(seeds)} training seeds per arm (line: their mean; band: 95% Student-t "
                 f"interval over the seeds)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def report(out_dir: str | Path) -> dict[str, Any]:
    """Rebuild ``results.json``, ``report.md`` and the plots of a comparison folder from its logs."""
    out = Path(out_dir)
    if not (out / COMPARISON).is_file():
        raise BenchmarkError(f"{out} is not a learner comparison: no {COMPARISON} in it")
    settings = json.loads((out / COMPARISON).read_text())["settings"]
    records, runs = load_records(out, settings), load_runs(out, settings)
    greedy = [r for r in records if r["kind"] == "greedy"]
    tables = {**learning_tables(records, runs, settings),
              **question_tables(greedy, settings["objectives"], settings["long_from"])}
    rows = summarize(seed_averaged(greedy))  # the plots' bands over questions, as in the tables
    text_ = markdown(tables, settings)
    result = {"settings": settings, "tables": tables, "arms": jsonable(rows),
              "policies": jsonable(summarize(greedy, ("policy", "context", "objectives"))), "markdown": text_}
    (out / "results.json").write_text(json.dumps(result, indent=1))
    (out / "report.md").write_text(text_ + "\n")
    from benchmarks.plots import plot_runs  # matplotlib: imported only to plot

    plot_runs({f"{settings['task']}, greedy, trained arms averaged over {len(settings['seeds'])} seeds": rows}, out)
    plot_curves(runs, settings, out / "curves.png")
    return result


def write_results_section(out_dir: str | Path, results_md: str | Path = "benchmarks/RESULTS.md",
                          record_md: str | Path = RECORD, *, heading: str | None = HEADING,
                          record_heading: str = RECORD_HEADING) -> Path:
    """Put a finished comparison under RESULTS.md's learners ``heading`` (command, machine, the learning and
    MemPO − GRPO tables, the plots) and its whole report under the experiment's record's
    (``benchmarks.report.write_comparison``). ``heading`` None: the record only, for a comparison
    RESULTS.md sums up in its own words; its plots go to ``results/OUT/`` (OUT: the comparison's
    folder name), not over the plots RESULTS.md shows."""
    out = Path(out_dir)
    info = json.loads((out / COMPARISON).read_text())
    name = "learners_{}.png" if heading is not None else f"{out.resolve().name}/{{}}.png"
    comparison = Comparison(
        MARK, BEGIN.format(out=out), END, TESTED_BY, info["command"],
        f"Machine: {info['machine']}; commit {info['commit']}; wall time {info['wall_s'] / 60:.0f} min "
        "(the invocations that ran to the end).", (out / "report.md").read_text(), HEADLINE,
        [(out / "curves.png", name.format("curves"), "learning curves, trained vs control"),
         (out / "f1_vs_objectives.png", name.format("f1"), "F1 vs objectives, learners"),
         (out / "cost_vs_objectives.png", name.format("cost"), "cost vs objectives, learners")])
    return write_comparison(comparison, results_md, heading, record_md, record_heading)


def machine() -> str:
    import torch

    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU"
    return (f"{os.cpu_count()} CPU cores ({cpu_name()}), {memory:.0f} GiB, {gpu}; "
            f"Python {platform.python_version()}, torch {torch.__version__}")


def commit() -> str:
    try:
        return subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True,
                              cwd=Path(__file__).parent).stdout.strip() or "unknown"
    except OSError:
        return "unknown"
