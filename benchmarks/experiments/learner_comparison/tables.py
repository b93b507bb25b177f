"""The report's tables: learning against the control and the start, MemPO − GRPO, and the paper's three
questions, from the comparison's episodes and training logs, and their markdown."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from agents.episode_log import load_done
from agents.statistics import METRICS, mean_ci, table_head, units_to_resolve
from benchmarks.experiments.learner_comparison.memory import MEMORY, with_memory
from benchmarks.experiments.learner_comparison.settings import (
    ARMS,
    LEARNERS,
    POLICIES,
    RECALL,
    START,
    VARIANTS,
    WARMUP,
    WARMUP_FULL,
    arms_of,
)
from benchmarks.report import load_run


def load_records(out: Path, settings: dict[str, Any]) -> list[dict[str, Any]]:
    """The comparison's episodes (its seeds, horizons and episode count), ``agent`` set to the arm (the
    warm-up in the full context: ``WARMUP_FULL``), ``kind`` greedy or sampled, with what their memories held
    (``memory.with_memory``)."""
    records = []
    for kind, folder, horizons in (("greedy", "eval", settings["objectives"]),
                                   ("sampled", "sampled", settings["sampled_objectives"])):
        for context in ("memory", "full"):
            if not (out / folder / context).is_dir():  # a view none of the comparison's arms trains in
                continue
            for r in (r for run in sorted((out / folder / context).iterdir()) for r in load_run(run)[1]):
                m = re.fullmatch(r"(.+?)(?:-s(\d+))?(?:~(\d+))?", r["agent"])
                arm, seed = m[1], None if m[2] is None else int(m[2])
                if arm == WARMUP and context == "full":
                    arm = WARMUP_FULL
                if ((seed in settings["seeds"] or seed is None) and r["objectives"] in horizons
                        and r["episode"] < settings["episodes"]
                        and (m[3] is None or int(m[3]) <= settings.get("samples", 0))):
                    records.append({**with_memory(r), "policy": r["agent"], "agent": arm, "train_seed": seed,
                                    "kind": kind})
    return records


def load_runs(out: Path, settings: dict[str, Any]) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Each arm x seed's training log: ``metrics`` (a line per step) and ``curve`` (held-out F1 every
    ``eval_every`` steps), keyed ``ARM-sSEED``."""
    return {f"{arm}-s{seed}": {name: load_done(out / "runs" / f"{arm}-s{seed}" / f"{name}.jsonl")
                               for name in ("metrics", "curve")}
            for arm in arms_of(settings) for seed in settings["seeds"]}


# Paired F1 differences in table (a): MemPO against GRPO, and each memory-view arm against its start; each
# memory-reward variant against MemPO, GRPO and its start.
DIFFERENCES = (("mempo", "grpo"), ("mempo", WARMUP), ("grpo", WARMUP), ("control", WARMUP),
               *((v, other) for v in VARIANTS for other in ("mempo", "grpo", WARMUP)))
Cell = tuple[float, float] | None  # (mean, 95% half-width); None where a policy has no episodes


def seed_averaged(records: list[dict[str, Any]], metrics: Sequence[str] = METRICS) -> list[dict[str, Any]]:
    """One record per arm, horizon and question, each of ``metrics`` averaged over the arm's training seeds:
    every seed plays the same questions, so 3 seeds x 100 episodes are 100 questions, not 300 draws."""
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in records:
        groups.setdefault((r["agent"], r["objectives"], r["episode"]), []).append(r)
    averaged = []
    for rs in groups.values():
        row = {k: rs[0][k] for k in ("agent", "context", "objectives", "episode") if k in rs[0]}
        # a recall is None in an episode that found no evidence: averaged over the seeds that found some
        values = {m: [float(r[m]) for r in rs if r[m] is not None] for m in metrics if all(m in r for r in rs)}
        row.update({m: math.fsum(v) / len(v) if v else None for m, v in values.items()})
        averaged.append(row)
    return averaged


def per_episode(records: list[dict[str, Any]], arm: str, k: int, metric: str = "f1") -> dict[int, float | None]:
    """An arm's ``metric`` per evaluation question at ``k`` objectives, averaged over its training seeds."""
    mine = [r for r in records if r["agent"] == arm and r["objectives"] == k]
    return {r["episode"]: r.get(metric) for r in seed_averaged(mine, (metric,))}  # None: not measured


def cell(records: list[dict[str, Any]], arm: str, k: int, metric: str = "f1") -> Cell:
    """``metric``'s mean and interval over the questions (a question where it is undefined, a recall where
    no seed found evidence, is left out)."""
    values = [v for v in per_episode(records, arm, k, metric).values() if v is not None]
    return mean_ci(values) if values else None


def paired(records: list[dict[str, Any]], a: str, b: str, k: int, metric: str = "f1") -> Cell:
    """``metric`` of ``a`` minus ``b`` per question (each averaged over its seeds), on the questions where
    both have it."""
    first, second = per_episode(records, a, k, metric), per_episode(records, b, k, metric)
    diffs = [first[e] - second[e] for e in sorted(first.keys() & second.keys())
             if first[e] is not None and second[e] is not None]
    return mean_ci(diffs) if diffs else None


def average(cells: list[Cell]) -> Cell:
    """The mean of several horizons' means, their half-widths combined as independent: pooling the
    episodes instead would count the spread between horizons as noise."""
    if not cells or None in cells:
        return None
    return math.fsum(m for m, _ in cells) / len(cells), math.hypot(*(c for _, c in cells)) / len(cells)


def fewer(mem: Cell, full: Cell) -> Cell:
    """``1 - mem / full`` with a delta-method 95% half-width (independent means)."""
    if mem is None or full is None or not full[0] or not mem[0]:
        return None
    ratio = mem[0] / full[0]
    return 1 - ratio, ratio * math.hypot(mem[1] / mem[0], full[1] / full[0])


def change(a: Cell, b: Cell) -> Cell:
    """``b - a`` for two cells of different episodes (independent)."""
    return None if a is None or b is None else (b[0] - a[0], math.hypot(a[1], b[1]))


def one_seed(records: list[dict[str, Any]], seed: int) -> list[dict[str, Any]]:
    """The episodes of training seed ``seed``'s policies and of the warm-up (seed None: every seed's start)."""
    return [r for r in records if r["train_seed"] in (seed, None)]


def over_seeds(values: Mapping[int, float | None]) -> Cell:
    """Mean and 95% Student-t half-width over training seeds (the runs are the independent unit)."""
    got = [v for v in values.values() if v is not None]
    return mean_ci(got) if got else None


def question_tables(records: list[dict[str, Any]], objectives: Sequence[int], long_from: int) -> dict[str, list]:
    """Rows of tables (a), (b), (c): ``{"objectives": label, column: Cell}``; a row over several
    horizons averages their cells."""
    ks = sorted(objectives)
    f1 = {(arm, k): cell(records, arm, k) for arm in (*POLICIES, WARMUP_FULL) for k in ks}
    tt = {(arm, k): cell(records, arm, k, "total_tokens") for arm in ARMS for k in ks}
    # Differences are paired per question on each training seed's policies, and their interval is over
    # the seeds, as in ``learning_tables``.
    seeds = sorted({r["train_seed"] for r in records} - {None})
    by_seed = {(a, b, k, s): paired(one_seed(records, s), a, b, k) for a, b in DIFFERENCES for k in ks for s in seeds}

    def seed_means(a: str, b: str, kk: list[int]) -> dict[int, float | None]:
        """Each training seed's ``a - b``, the mean over the horizons ``kk``."""
        cells = {s: average([by_seed[a, b, k, s] for k in kk]) for s in seeds}
        return {s: None if c is None else c[0] for s, c in cells.items()}

    def a_row(name: str, kk: list[int]) -> dict[str, Any]:
        row = {"objectives": name, **{arm: average([f1[arm, k] for k in kk]) for arm in POLICIES}}
        for a, b in DIFFERENCES:
            row[f"{a} - {b} by seed"] = seed_means(a, b, kk)
            row[f"{a} - {b}"] = over_seeds(row[f"{a} - {b} by seed"])
        return row

    def b_row(name: str, kk: list[int]) -> dict[str, Any]:
        row = {"objectives": name, **{arm: average([tt[arm, k] for k in kk]) for arm in ARMS}}
        return {**row, "mempo fewer": fewer(row["mempo"], row["grpo-full"]),
                "grpo fewer": fewer(row["grpo"], row["grpo-full"])}

    long = [k for k in ks if k >= long_from]
    several = len(ks) > 1
    a = [a_row(str(k), [k]) for k in long] + ([a_row(f"{long[0]}-{long[-1]}", long)] if len(long) > 1 else [])
    b = [b_row(str(k), [k]) for k in ks] + ([b_row("all", ks)] if several else [])
    c = [{"objectives": str(k), **{arm: f1[arm, k] for arm in (*POLICIES, WARMUP_FULL)}} for k in ks]
    if several:
        c.append({"objectives": f"change {ks[0]}→{ks[-1]}", "difference": True,
                  **{arm: change(f1[arm, ks[0]], f1[arm, ks[-1]]) for arm in (*POLICIES, WARMUP_FULL)}})
    return {"a": a, "b": b, "c": c}


def late_mean(lines: list[dict[str, Any]], steps: int, key: str = "reward") -> float | None:
    """A run's ``key`` (its training reward, or its rollouts' ``memory_recall``) over the second half of
    its steps (step 1 of every arm of a seed is the same rollouts from the same weights; the arms part
    as their updates do); None for an unfinished run or a log without it."""
    late = [m[key] for m in lines if m["step"] > steps // 2 and m.get(key) is not None]
    return math.fsum(late) / len(late) if late and max(m["step"] for m in lines) >= steps else None


def learning_tables(records: list[dict[str, Any]], runs: Mapping[str, Mapping[str, list]],
                    settings: dict[str, Any]) -> dict[str, list]:
    """``learning``: per arm, the training reward against the control (paired by seed), held-out sampled
    F1 at the training horizon and greedy F1 at the long horizons, and the memory recall of both
    (``episode_memory_recall``: the share of the evidence found that the last ``<mem>`` keeps), each
    against the start and the control; ``mempo_grpo``: MemPO − GRPO on the same measures, with each
    training seed's value; ``variants``: each memory-reward variant arm − MemPO and − GRPO (``pair``) likewise;
    ``memory``: per arm and start, the held-out memories' length and duplication (``memory.MEMORY``), mean
    and interval over the questions. Rows hold ``Cell``s and ``{seed: value}`` spreads.

    Every difference is taken per training seed (held out: paired per question on that seed's policies)
    and its interval is over the seeds, the independent unit: an interval over questions of the
    seed-averaged differences treats the trained policies as fixed and hides the spread between runs
    (three seeds of −10.4, +3.8 and −10.0 sampled F1 points gave −5.6 ± 4.7 per question)."""
    steps, seeds = settings["learner"]["steps"], settings["seeds"]
    k = settings["sampled_objectives"][0]
    long = [h for h in settings["objectives"] if h >= settings["long_from"]]
    greedy = [r for r in records if r["kind"] == "greedy"]
    sampled = [r for r in records if r["kind"] == "sampled"]
    late = {key: {arm: {s: late_mean(runs.get(f"{arm}-s{s}", {}).get("metrics", []), steps, key) for s in seeds}
                  for arm in ARMS} for key in ("reward", "memory_recall")}
    reward = late["reward"]

    def seed_diff(a: str, b: str, key: str = "reward") -> dict[int, float | None]:
        x = late[key]
        return {s: None if x[a][s] is None or x[b][s] is None else x[a][s] - x[b][s] for s in seeds}

    def sampled_diff(rs: list[dict[str, Any]], a: str, b: str, metric: str = "f1") -> Cell:
        return paired(rs, a, b, k, metric)

    def greedy_diff(rs: list[dict[str, Any]], a: str, b: str, metric: str = "f1") -> Cell:
        return average([paired(rs, a, b, h, metric) for h in long]) if long else None

    def per_seed(diff: Callable[..., Cell], rs: list[dict[str, Any]], a: str, b: str,
                 metric: str = "f1") -> dict[int, float | None]:
        return {s: None if (c := diff(one_seed(rs, s), a, b, metric)) is None else c[0] for s in seeds}

    def greedy_cell(arm: str, metric: str = "f1") -> Cell:
        return average([cell(greedy, arm, h, metric) for h in long]) if long else None

    def held_out(arm: str, against: Mapping[str, str | None]) -> dict[str, Cell]:
        """``sampled``/``greedy`` F1 and their ``recall``, and each minus ``against``'s policies per
        question (``{"start": ..., "control": ...}``; a None policy: not compared)."""
        row: dict[str, Cell] = {}
        for suffix, metric in (("", "f1"), (" recall", RECALL)):
            row[f"sampled{suffix}"], row[f"greedy{suffix}"] = cell(sampled, arm, k, metric), greedy_cell(arm, metric)
            for name, other in against.items():
                if other:
                    row[f"sampled{suffix} - {name}"] = over_seeds(per_seed(sampled_diff, sampled, arm, other, metric))
                    row[f"greedy{suffix} - {name}"] = over_seeds(per_seed(greedy_diff, greedy, arm, other, metric))
                else:
                    row[f"sampled{suffix} - {name}"] = row[f"greedy{suffix} - {name}"] = None
        return row

    arms = arms_of(settings)
    rows = []
    for arm in arms:
        learner = arm in LEARNERS
        rows.append({
            "arm": arm, "reward": over_seeds(reward[arm]),
            "reward - control": over_seeds(seed_diff(arm, "control")) if learner else None,
            "reward - control by seed": seed_diff(arm, "control") if learner else {},
            "training recall": over_seeds(late["memory_recall"][arm]),
            "training recall - control": over_seeds(seed_diff(arm, "control", "memory_recall")) if learner else None,
            **held_out(arm, {"start": START[arm], "control": "control" if learner else None})})
    starts = [start for start in (WARMUP, WARMUP_FULL) if any(r["agent"] == start for r in records)]
    rows += [{"arm": start, **held_out(start, {})} for start in starts]

    def pair_rows(a: str, b: str, key: str) -> list[dict[str, Any]]:
        """``a`` − ``b`` on the learning measures, per training seed; the difference under ``key``."""
        measures = [("training reward (2nd half of the steps)", seed_diff(a, b), 1),
                    (f"held-out sampled F1 % at {k} objectives", per_seed(sampled_diff, sampled, a, b), 100),
                    ("training memory recall % (2nd half of the steps)", seed_diff(a, b, "memory_recall"), 100),
                    (f"held-out sampled memory recall % at {k} objectives",
                     per_seed(sampled_diff, sampled, a, b, RECALL), 100)]
        if long:
            span = f"{long[0]}-{long[-1]}"
            measures += [(f"held-out greedy F1 % at {span} objectives", per_seed(greedy_diff, greedy, a, b), 100),
                         (f"held-out greedy memory recall % at {span} objectives",
                          per_seed(greedy_diff, greedy, a, b, RECALL), 100)]
        return [{"measure": name, key: over_seeds(by_seed), "by seed": by_seed, "scale": scale,
                 "seeds to resolve": units_to_resolve([v for v in by_seed.values() if v is not None])}
                for name, by_seed, scale in measures]

    variants = [{"pair": f"{v} − {b}", **row} for v in arms if v in VARIANTS for b in ("mempo", "grpo")
                if b in arms for row in pair_rows(v, b, "difference")]
    memory = [{"arm": arm, **{f"sampled {m}": cell(sampled, arm, k, m) for m in MEMORY},
               **{f"greedy {m}": greedy_cell(arm, m) for m in MEMORY}} for arm in (*arms, *starts)]
    return {"learning": rows, "mempo_grpo": pair_rows("mempo", "grpo", "mempo - grpo"), "variants": variants,
            "memory": memory}


def half_width(half: float, scale: float, digits: int) -> str:
    """An interval's half-width, or "–" where one value (one seed, one question) leaves it undefined."""
    return "–" if math.isnan(half) else f"{half * scale:.{digits}f}"


def signed(value: Cell, scale: float, digits: int) -> str:
    return "–" if value is None else f"{value[0] * scale:+.{digits}f} ± {half_width(value[1], scale, digits)}"


def verdict(value: Cell) -> str:
    if value is None:
        return "not measured"
    if math.isnan(value[1]):
        return "no interval from one value"
    return ("inside its interval" if not abs(value[0]) > value[1]
            else f"{'positive' if value[0] > 0 else 'negative'} beyond its interval")


def held_out_cells(row: dict[str, Any], suffix: str) -> list[str]:
    """A learning row's sampled and greedy cells (F1, or ``suffix`` " recall"), each then − start, − control, in %."""
    return [part for kind in ("sampled", "greedy") for part in (
        "–" if row.get(kind + suffix) is None else text(row[kind + suffix], 100, 1, bounded=True),
        signed(row.get(f"{kind}{suffix} - start"), 100, 1), signed(row.get(f"{kind}{suffix} - control"), 100, 1))]


def learning_markdown(tables: dict[str, list], settings: dict[str, Any]) -> list[str]:
    """The learning and MemPO − GRPO tables, then a verdict line per target."""
    k = settings["sampled_objectives"][0]
    long = [h for h in settings["objectives"] if h >= settings["long_from"]]
    span = f"{long[0]}-{long[-1]}" if long else "–"
    lines = ["", "### Learning: each arm against the control (same seeds and questions) and its start", "",
             *table_head(["arm", "training reward, 2nd half", "− control (paired by seed)", "by seed",
                          f"sampled F1 % at {k}", "− start", "− control", f"greedy F1 % at {span}", "− start",
                          "− control"])]
    for row in tables["learning"]:
        by_seed = ", ".join(f"{v:+.2f}" for v in row.get("reward - control by seed", {}).values() if v is not None)
        reward = row.get("reward")
        lines.append(" | ".join([
            f"| {row['arm']}", "–" if reward is None else f"{reward[0]:.2f} ± {half_width(reward[1], 1, 2)}",
            signed(row.get("reward - control"), 1, 2), by_seed or "–", *held_out_cells(row, "")]) + " |")
    lines += ["", "### Memory recall: each arm against the control and its start", "",
              "Of the gold evidence an episode found, the share its last `<mem>` keeps "
              "(`episode_memory_recall`; an episode that found none is left out), %.", "",
              *table_head(["arm", "training rollouts, 2nd half", "− control (paired by seed)", f"sampled at {k}",
                           "− start", "− control", f"greedy at {span}", "− start", "− control"])]
    for row in tables["learning"]:
        lines.append(" | ".join([
            f"| {row['arm']}",
            "–" if row.get("training recall") is None else text(row["training recall"], 100, 1, bounded=False),
            signed(row.get("training recall - control"), 100, 1), *held_out_cells(row, " recall")]) + " |")
    lines += ["", "### MemPO − GRPO", "",
              "Last column: how many training seeds like these a mean of this size needs before its 95% interval "
              "over seeds excludes 0 (`agents.statistics.units_to_resolve`; –: a zero mean, one seed, or over "
              "10,000).",
              "", *table_head(["measure", "mempo − grpo", "by training seed", "seeds to clear 0"])]
    lines += ["| " + " | ".join([row["measure"], *paired_cells(row, "mempo - grpo")]) + " |"
              for row in tables["mempo_grpo"]]
    lines.append("")
    rows = {row["arm"]: row for row in tables["learning"]}
    for arm in (arm for arm in LEARNERS if arm in rows):
        row = rows[arm]
        lines += [f"- {arm}: training reward − control {signed(row['reward - control'], 1, 2)} "
                  f"({verdict(row['reward - control'])}); held-out sampled F1 at {k} objectives − start "
                  f"{signed(row['sampled - start'], 100, 1)} points ({verdict(row['sampled - start'])}); greedy F1 "
                  f"at {span} objectives − start {signed(row['greedy - start'], 100, 1)} points "
                  f"({verdict(row['greedy - start'])}); sampled memory recall at {k} objectives − start "
                  f"{signed(row['sampled recall - start'], 100, 1)} points ({verdict(row['sampled recall - start'])})."]
    for row in tables["mempo_grpo"]:
        lines.append(f"- mempo − grpo, {row['measure']}: {signed(row['mempo - grpo'], row['scale'], 2)} "
                     f"({verdict(row['mempo - grpo'])}).")
    return lines + variants_markdown(tables.get("variants", [])) + memory_markdown(tables.get("memory", []), k, span)


def paired_cells(row: dict[str, Any], key: str) -> list[str]:
    """A difference paired by training seed, as table cells: its mean ± 95% over seeds, each seed's value,
    and the seeds a mean of this size needs to clear 0."""
    digits = 2 if row["scale"] == 1 else 1
    spread = ", ".join(f"{v * row['scale']:+.{digits}f} (seed {s})" for s, v in row["by seed"].items() if v is not None)
    needed = row.get("seeds to resolve")
    return [signed(row[key], row["scale"], digits), spread or "–", "–" if needed is None else str(needed)]


def variants_markdown(rows: list[dict[str, Any]]) -> list[str]:
    """Each memory-reward variant − MemPO and − GRPO, by training seed, then a verdict line each (none: no variant)."""
    if not rows:
        return []
    lines = ["", "### Each memory-reward variant − MemPO and − GRPO", "",
             "Paired by training seed as MemPO − GRPO above; last column as there.", "",
             *table_head(["difference", "measure", "mean ± 95% over seeds", "by training seed", "seeds to clear 0"])]
    lines += ["| " + " | ".join([row["pair"], row["measure"], *paired_cells(row, "difference")]) + " |"
              for row in rows]
    lines.append("")
    lines += [f"- {row['pair']}, {row['measure']}: {signed(row['difference'], row['scale'], 2)} "
              f"({verdict(row['difference'])})." for row in rows]
    return lines


def memory_markdown(rows: list[dict[str, Any]], k: int, span: str) -> list[str]:
    """Per arm, the held-out memories' mean length and their copies and repeated lines (``memory.MEMORY``)."""
    if not rows:
        return []
    lines = ["", "### Memory length and duplication (held-out episodes)", "",
             "Per episode: the mean length of its `<mem>` blocks in characters; the share of them that copy a "
             "question of the episode or the tool response the turn read (`algorithms.memory_reward.is_copy`); "
             "the share of their lines that repeat an earlier line of the same `<mem>`. Then mean [95% interval "
             "over the questions] of each arm's seeds averaged per question; –: not measured (an archive made "
             "before these fields).", "",
             *table_head(["arm", f"sampled at {k}: chars", "copies %", "repeated lines %", f"greedy at {span}: chars",
                          "copies %", "repeated lines %"])]
    for row in rows:
        cells = ["–" if row[f"{kind} {m}"] is None else text(row[f"{kind} {m}"], scale, digits, bounded=True)
                 for kind in ("sampled", "greedy")
                 for m, scale, digits in (("memory_chars", 1, 0), ("memory_copied", 100, 1),
                                          ("memory_repeated", 100, 1))]
        lines.append(f"| {row['arm']} | " + " | ".join(cells) + " |")
    return lines


# (title, columns: (key, header, scale, digits))
TABLES = {
    "a": ("(a) MemPO vs GRPO at long horizons: F1 %", [
        ("mempo", "mempo", 100, 1), ("grpo", "grpo", 100, 1), ("mempo - grpo", "mempo − grpo (paired)", 100, 1),
        ("control", "control", 100, 1), ("grpo-full", "grpo-full (full context)", 100, 1), (WARMUP, WARMUP, 100, 1),
        (f"mempo - {WARMUP}", "mempo − warm-up (paired)", 100, 1),
        (f"grpo - {WARMUP}", "grpo − warm-up (paired)", 100, 1),
        (f"control - {WARMUP}", "control − warm-up (paired)", 100, 1),
        *((f"{v}{other}", f"{v}{header}", 100, 1) for v in VARIANTS
          for other, header in (("", ""), (" - mempo", " − mempo (paired)"), (" - grpo", " − grpo (paired)"),
                                (f" - {WARMUP}", " − warm-up (paired)")))]),
    "b": ("(b) Total tokens (TT) per episode: memory view vs full context", [
        ("mempo", "mempo (memory)", 1, 0), ("grpo", "grpo (memory)", 1, 0), ("grpo-full", "grpo-full (full)", 1, 0),
        ("mempo fewer", "mempo: % fewer than grpo-full", 100, 1),
        ("grpo fewer", "grpo: % fewer than grpo-full", 100, 1), *((v, f"{v} (memory)", 1, 0) for v in VARIANTS)]),
    "c": ("(c) F1 % as objectives grow (last row: the change from fewest to most)", [
        (WARMUP, "warm-up (memory)", 100, 1), ("mempo", "mempo (memory)", 100, 1), ("grpo", "grpo (memory)", 100, 1),
        ("control", "control (memory)", 100, 1), (WARMUP_FULL, "warm-up (full)", 100, 1),
        ("grpo-full", "grpo-full (full)", 100, 1), *((v, f"{v} (memory)", 100, 1) for v in VARIANTS)]),
}


def text(value: tuple[float, float], scale: float, digits: int, bounded: bool) -> str:
    """A cell: a policy's mean with its interval cut to the metric's range (F1 in [0, 1], tokens >= 0),
    or a difference or change as mean ± half-width (it may be negative)."""
    mean, half = value
    if not bounded:
        return f"{mean * scale:.{digits}f} ± {half_width(half, scale, digits)}"
    if math.isnan(half):
        return f"{mean * scale:.{digits}f} [–]"
    low, high = max(mean - half, 0.0), mean + half if scale == 1 else min(mean + half, 1.0)
    return f"{mean * scale:.{digits}f} [{low * scale:.{digits}f}, {high * scale:.{digits}f}]"


def markdown(tables: dict[str, list], settings: dict[str, Any]) -> str:
    lines = [describe(settings), "",
             f"F1 and token cells: each of the {settings['episodes']} evaluation questions per horizon scored "
             f"by an arm's {len(settings['seeds'])} training seeds averaged (and, sampled, its episodes), then "
             f"mean [95% Student-t interval over the questions, cut to the metric's range]; differences: "
             f"each training seed's policies paired per question, then mean ± 95% Student-t half-width over "
             f"the training seeds; rows over several horizons: the mean of their means; % fewer and changes: "
             f"± half-widths combined from the cells (independent). Training reward: each run's mean rollout "
             f"reward over the second half of its steps, mean ± 95% Student-t half-width over the training "
             f"seeds; against the control, the per-seed differences (the control of seed s trains on seed s's "
             f"questions)."]
    if "learning" in tables:
        lines += learning_markdown(tables, settings)
    for name, (title, columns) in TABLES.items():
        lines += ["", f"### {title}", ""]
        if not tables[name]:
            lines.append(f"No evaluated horizon reaches {settings['long_from']} objectives.")
            continue
        columns = [c for c in columns if any(row[c[0]] is not None for row in tables[name])]  # the arms compared
        lines += table_head(["objectives", *(h for _, h, _, _ in columns)])
        for row in tables[name]:
            cells = ["–" if row[key] is None else
                     text(row[key], s, d, bounded=key in (*POLICIES, WARMUP_FULL) and not row.get("difference"))
                     for key, _, s, d in columns]
            lines.append(f"| {row['objectives']} | " + " | ".join(cells) + " |")
    last = tables["a"][-1] if tables["a"] else {}
    verdicts = []
    for a, b in DIFFERENCES:
        if (d := last.get(f"{a} - {b}")) is not None:
            seeds = ", ".join(f"{100 * v:+.1f} (seed {s})" for s, v in last[f"{a} - {b} by seed"].items()
                              if v is not None)
            verdicts.append(f"- At {last['objectives']} objectives {a} − {b} is {signed(d, 100, 1)} F1 points: "
                            f"{verdict(d)}; by training seed {seeds}.")
    if verdicts:
        lines += ["", *verdicts]
    return "\n".join(lines)


def describe(settings: dict[str, Any]) -> str:
    """The budget and the evaluation in words, from the recorded settings."""
    c = settings["learner"]
    limit = settings.get("max_context_tokens")  # absent from comparisons made before the limit existed
    window = (f"an episode whose next prompt exceeds {limit} tokens ends unanswered (the policy's window less "
              f"that budget)" if limit else "no context limit")
    arms = arms_of(settings)
    views = "; ".join(f"the warm-up, {', '.join(a for a in arms if ARMS[a]['context'] == context)} in {name}"
                      for context, name in (("memory", "the memory view"), ("full", "the full context"))
                      if any(ARMS[a]["context"] == context for a in arms))
    variants = "".join(f"; {a} is mempo with `--memory-reward {VARIANTS[a]}`" for a in arms if a in VARIANTS)
    search = ("; every search, in training and evaluation, returns the next hop's gold evidence (`--search oracle`)"
              if c.get("search", "retriever") == "oracle" else "")
    horizon = (f"{c['objectives']}-objective" if not c.get("min_objectives")
               else f"{c['min_objectives']}-{c['objectives']}-objective")
    return (f"Learners (`algorithms.mempo.Config`, the same for every arm): steps × question groups × rollouts "
            f"= {c['steps']} × {c['questions_per_step']} × {c['group_size']}, lr {c['lr']}, KL {c['kl_coef']}, "
            f"rollout temperature {c['temperature']}, {horizon} training episodes of {c['hops']}-hop questions "
            f"(world {c['task_seed']}), {c['max_turns']} turns, from the warm-up `{settings['warmup']}`; the "
            f"control is grpo with its advantages shuffled within groups{variants}{search}. Evaluation "
            f"(`benchmarks.run.evaluate`) on `{settings['task']}`, training seeds "
            f"{', '.join(map(str, settings['seeds']))}: "
            f"{settings['episodes']} questions per policy and horizon, greedy, and sampled at temperature "
            f"{c['temperature']} at {', '.join(map(str, settings['sampled_objectives']))} objectives, "
            f"{settings['samples']} episodes per question; prompt `{settings['prompt']}`, turn budget "
            f"max({c['max_turns']}, 4 × objectives); {views}; up to "
            f"{settings.get('max_new_tokens', c['max_new_tokens'])} new tokens per turn; {window}; TT in the "
            f"policy's tokens.")
