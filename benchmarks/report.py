"""Rebuild tables and plots from finished runs, one run or several side by side.

    python -m benchmarks.report runs/eval                       # rewrite that run's table and plots
    python -m benchmarks.report runs/real/hotpotqa runs/real/2wiki --out runs/report

Everything is recomputed from each run's ``episodes.jsonl``, so a report never disagrees with the
episodes behind it: each episode once, within the grid the run's last command asked for (its agents,
views, objective counts and first N episodes per cell; a folder may hold more). With several runs the
table gains a ``run`` column (the run's dataset, or its folder name where two runs share a dataset)
and each plot gets one panel per run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agents.episode_log import read_episodes
from agents.statistics import GROUP, jsonable, markdown_table, summarize

EPISODES, CONFIG = "episodes.jsonl", "config.json"
EPISODE_KEY = ("agent", "context", "objectives", "episode")  # what identifies an episode within a run


class BenchmarkError(ValueError):
    """Bad input to a benchmark command: the message says what and how to fix it."""


def read_config(run_dir: Path) -> dict[str, Any]:
    """A run's ``config.json`` ({} where there is none); a damaged one is an error naming it."""
    path = run_dir / CONFIG
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise BenchmarkError(f"{path} is not valid JSON ({e}); restore it or use another folder") from None


def episode_key(record: dict[str, Any]) -> tuple:
    return tuple(record[k] for k in EPISODE_KEY)


def load_run(run_dir: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(``config.json``, episode records) of a run folder written by ``benchmarks.run``; an episode
    logged twice (two runs an older runner let share the folder) counts once."""
    run_dir = Path(run_dir)
    if not (run_dir / EPISODES).is_file():
        raise BenchmarkError(f"{run_dir} is not a benchmark run: no {EPISODES} in it")
    config = read_config(run_dir)
    unique: dict[tuple, dict[str, Any]] = {}
    for r in read_episodes(run_dir / EPISODES):
        unique.setdefault(episode_key(r), r)
    return config, list(unique.values())


def in_grid(records: list[dict[str, Any]], grid: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The records of a run's grid (``config.json``'s ``last_grid``; all of them where it has none)."""
    if not grid:
        return records
    return [r for r in records if r["agent"] in grid["agents"] and r["context"] in grid["contexts"]
            and r["objectives"] in grid["objectives"] and r["episode"] < grid["episodes"]]


def run_labels(run_dirs: Sequence[Path], configs: Sequence[dict[str, Any]]) -> list[str]:
    """Each run's dataset name; the folder name is added where two runs share a dataset."""
    names = [c.get("settings", {}).get("dataset_name") or d.name for d, c in zip(run_dirs, configs)]
    labels = [f"{n} ({d.name})" if names.count(n) > 1 else n for n, d in zip(names, run_dirs)]
    if len(set(labels)) < len(labels):
        raise BenchmarkError(f"two runs would share a label in {labels}; give them distinct folder names")
    return labels


def write_report(run_dirs: Sequence[str | Path], out_dir: str | Path, *,
                 plots: bool = True) -> tuple[list[dict[str, Any]], str]:
    """Write ``results.json``, ``table.md`` and the plots for these runs to ``out_dir``; return the
    summary rows and the markdown table."""
    dirs = [Path(d) for d in run_dirs]
    if not dirs:
        raise BenchmarkError("no run folders given")
    loaded = [load_run(d) for d in dirs]
    labels = run_labels(dirs, [c for c, _ in loaded])
    group = GROUP if len(dirs) == 1 else ("run", *GROUP)
    records = [{**r, "run": label} for label, (config, recs) in zip(labels, loaded)
               for r in in_grid(recs, config.get("last_grid"))]
    if not records:
        raise BenchmarkError(f"no finished episodes in {', '.join(map(str, dirs))}")
    rows = summarize(records, group)
    table = markdown_table(rows, group)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(jsonable(rows), indent=1))
    (out / "table.md").write_text(table + "\n")
    if plots:
        from benchmarks.plots import plot_runs  # matplotlib takes a second to import: only when plotting

        plot_runs({label: [r for r in rows if r.get("run", label) == label] for label in labels}, out)
    return rows, table


def heading_end(text: str, heading: str) -> int | None:
    """Where the line that is ``heading`` and nothing else ends in ``text`` (``None``: no such line). A whole
    line, not the first match: a documented command can carry the heading's words in an option
    (``--record-heading '## H'``), and the block must not go inside that command."""
    found = re.search(rf"^{re.escape(heading)}[ \t]*$", text, re.M)
    return found.end() if found else None


def require_heading(results_md: str | Path, heading: str) -> str:
    """The text of a results file that has ``heading`` as a line of its own; an error naming the file otherwise."""
    path = Path(results_md)
    text = path.read_text()
    if heading_end(text, heading) is None:
        raise BenchmarkError(f"{path} has no {heading!r} heading to write under")
    return text


def write_section(results_md: str | Path, heading: str, mark: str, block: list[str]) -> Path:
    """Put a comparison's generated ``block`` (its first line starts with ``mark``, its last is its end
    marker) under ``heading`` of a results file, in place of the block written under that heading
    before, so a rerun replaces it and keeps the reading written around it, and another heading of the
    file can hold another comparison's block."""
    path = Path(results_md)
    text = require_heading(path, heading)
    new, end = "\n".join(block), block[-1]
    at = heading_end(text, heading)
    level = len(heading) - len(heading.lstrip("#"))
    following = re.compile(rf"^#{{1,{level}}} ", re.M).search(text, at)  # where the heading's section ends
    i = text.find(mark, at, following.start() if following else len(text))  # this heading's block, not another's
    if i >= 0 and (j := text.find(end, i)) >= 0:
        text = text[:i] + new + text[j + len(end):]
    else:
        text = text[:at] + "\n\n" + new + text[at:]
    path.write_text(text)
    return path


def report_sections(report: str, titles: Sequence[str]) -> str:
    """The ``### `` sections of a report (each up to the next one) whose titles start with one of
    ``titles``, in the report's order: the part of a long report a results file shows."""
    parts = [p.strip("\n") for p in re.split(r"(?m)^(?=### )", report) if p.startswith("### ")]
    for title in titles:
        if sum(p[4:].startswith(title) for p in parts) != 1:
            raise BenchmarkError(f"the report has {sum(p[4:].startswith(title) for p in parts)} sections "
                                 f"titled {title!r}, not one")
    return "\n\n".join(p for p in parts if p[4:].startswith(tuple(titles)))


@dataclass(frozen=True)
class Comparison:
    """A finished comparison as the results files show it: its markers, its command (with the marker of
    the test that parses it), its machine line, its report, which of the report's sections the results
    file shows, and its plots as (source, file name under ``results/``, caption)."""

    mark: str
    begin: str
    end: str
    tested_by: str
    command: str
    machine: str
    report: str
    headline: Sequence[str]
    plots: Sequence[tuple[Path, str, str]]


def write_comparison(comparison: Comparison, results_md: str | Path, heading: str | None, record_md: str | Path,
                     record_heading: str) -> Path:
    """Write a comparison twice: under ``heading`` of the results file its command, machine, headline
    sections and plots, and a link to the experiment's record; under ``record_heading`` of that record
    the same with the whole report. Both files keep the reading written around their blocks; both
    headings are checked before either file changes; the plots (``Comparison.plots``' paths) go to
    ``results/`` beside the results file and both files link them there. ``heading`` None: the record
    only (a comparison the results file sums up in its own words), its plots still under ``results/``."""
    results, record = Path(results_md), Path(record_md)
    if heading is not None:
        require_heading(results, heading)
    require_heading(record, record_heading)
    c = comparison
    images = results.parent / "results"

    def block(md: Path, body: str, tail: list[str]) -> list[str]:
        where = Path(os.path.relpath(images.resolve(), md.parent.resolve())).as_posix()
        figures = [line for _, name, caption in c.plots for line in (f"![{caption}]({where}/{name})", "")]
        return [c.begin, "", c.tested_by, "```bash", c.command, "```", "", c.machine, "", body, "", *figures,
                *tail, c.end]

    for source, name, _ in c.plots:
        (images / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, images / name)
    if heading is not None:
        link = Path(os.path.relpath(record.resolve(), results.parent.resolve())).as_posix()
        write_section(results, heading, c.mark,
                      block(results, report_sections(c.report, c.headline),
                            [f"The settings and every table: [the experiment's record]({link}).", ""]))
    write_section(record, record_heading, c.mark, block(record, c.report.rstrip(), []))
    return record if heading is None else results


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    p = argparse.ArgumentParser(prog="python -m benchmarks.report", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", help="run folders written by python -m benchmarks.run")
    p.add_argument("--out", default=None, help="output folder (default: the run itself, or runs/report for several)")
    p.add_argument("--no-plots", action="store_true", help="tables only")
    args = p.parse_args(argv)
    out = args.out or (args.runs[0] if len(args.runs) == 1 else "runs/report")
    try:
        rows, table = write_report(args.runs, out, plots=not args.no_plots)
    except BenchmarkError as e:
        p.error(str(e))
    print(table)
    print(f"\nwritten to {out}/: results.json, table.md" + ("" if args.no_plots else ", *_vs_objectives.png"))
    return rows


if __name__ == "__main__":
    main()
