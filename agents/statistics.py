"""The statistics of a run, for the learners and the benchmarks alike: per-episode records aggregated into
table rows, the mean and a 95% interval per metric.

Intervals stay inside what a metric can be. A percentage whose episodes all scored 0 or 1 (format ok,
overflow, EM at one objective, a perfect F1) is a proportion of episodes: Wilson score interval. Any
other mean (F1, EM over k objectives, turns, tokens, characters) and paired differences: Student-t,
cut to the metric's range ([0, 1], or from 0 for counts). Episodes are the independent unit: the k
answers of one episode share its context, so they are not counted as k trials.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Sequence
from typing import Any, NamedTuple

METRICS = ("em", "f1", "format_ok", "context_overflow", "n_turns", "n_searches", "total_chars", "peak_chars",
           "total_tokens", "peak_tokens", "episode_memory_recall", "episode_context_recall")
# Defined only for an episode that found some gold evidence (mempo_env.recall): averaged over those episodes.
WHERE_FOUND = ("episode_memory_recall", "episode_context_recall")
GROUP = ("agent", "context", "objectives")
# Column headers. TT and PT are the paper's names for token counts; character counts say so.
LABELS = {"em": "EM %", "f1": "F1 %", "format_ok": "format ok %",
          "context_overflow": "overflow %", "n_turns": "turns", "n_searches": "searches",
          "total_chars": "total chars", "peak_chars": "peak chars", "total_tokens": "TT tokens",
          "peak_tokens": "PT tokens", "episode_memory_recall": "memory recall %",
          "episode_context_recall": "context recall %"}
PERCENT = ("em", "f1", "format_ok", "context_overflow", *WHERE_FOUND)
CONFIDENCE = 0.95
FOOTNOTE = ("Cells: mean [95% interval] over episodes. % columns: Wilson score interval where every episode "
            "scored 0 or 1 (always for format ok and overflow, and EM at 1 objective), otherwise Student-t cut to "
            "[0, 100]; other columns: Student-t, cut at 0; n/a: one episode. EM at k objectives: the mean over "
            "episodes of the fraction of an episode's k answers that match exactly.")
RECALL_NOTE = ("Memory (context) recall: of the gold evidence found so far, the share the turn's <mem> (the prompt it "
               "was written from) holds, averaged over an episode's turns with some found, then over the episodes with "
               "some found (docs/environment.md#memory-content).")


class Interval(NamedTuple):
    """A mean and its 95% interval (``nan`` bounds where none exists); ``[0]`` is the mean, as before."""

    mean: float
    low: float
    high: float
    method: str  # "wilson" or "t"


def mean_ci(values: Sequence[float]) -> tuple[float, float]:
    """Mean and the half-width of its 95% Student-t interval (``nan`` for fewer than 2 values: no spread to
    measure). Also for paired differences. Exactly rounded sums (``fsum``): any order gives the same numbers."""
    from scipy import stats  # half a second to import: only when a table is made, not for a CLI's --help

    n = len(values)
    mean = math.fsum(values) / n
    if n < 2:
        return mean, math.nan
    sd = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))
    return mean, float(stats.t.ppf((1 + CONFIDENCE) / 2, n - 1)) * sd / math.sqrt(n)


def units_to_resolve(values: Sequence[float], limit: int = 10_000) -> int | None:
    """How many independent units (training seeds) a mean of this size and spread needs before its 95%
    Student-t interval excludes 0: the smallest n >= 2 with t(n - 1) sd / sqrt(n) < |mean|, the sd and
    mean those of ``values``; None for a zero mean, a single value, or more than ``limit``. What a
    difference inside its interval would take, if the seeds to come looked like these."""
    from scipy import stats

    if len(values) < 2 or (mean := statistics.fmean(values)) == 0:
        return None
    sd = statistics.stdev(values)
    if sd == 0:
        return 2
    n = max(2, math.ceil((stats.norm.ppf((1 + CONFIDENCE) / 2) * sd / abs(mean)) ** 2))  # t > z: no fewer
    while n <= limit and float(stats.t.ppf((1 + CONFIDENCE) / 2, n - 1)) * sd / math.sqrt(n) >= abs(mean):
        n += 1
    return n if n <= limit else None


def interval(values: Sequence[float], bounded: bool = False) -> Interval:
    """The mean of ``values`` with its 95% interval: Wilson for 0/1 values of a ``bounded`` ([0, 1]) metric,
    else Student-t cut to [0, 1] (``bounded``) or at 0 (counts and sizes, never negative)."""
    from scipy import stats

    n = len(values)
    if bounded and all(v in (0, 1) for v in values):
        ci = stats.binomtest(int(sum(values)), n).proportion_ci(CONFIDENCE, method="wilson")
        return Interval(math.fsum(values) / n, float(ci.low), float(ci.high), "wilson")
    mean, half = mean_ci(values)
    if math.isnan(half):
        return Interval(mean, math.nan, math.nan, "t")
    return Interval(mean, max(0.0, mean - half), min(1.0 if bounded else math.inf, mean + half), "t")


def summarize(records: list[dict[str, Any]], group: Sequence[str] = GROUP) -> list[dict[str, Any]]:
    """One row per ``group`` key (objectives sorted numerically) with ``{metric: Interval}`` and
    the episode count. A metric appears only where every episode of the row has it, except the recalls
    (``WHERE_FOUND``), averaged over the episodes where they are not ``None`` (some evidence found);
    ``{metric}_episodes`` counts those."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in records:
        groups[tuple(r[g] for g in group)].append(r)
    rows = []
    for key in sorted(groups, key=lambda k: tuple(v if isinstance(v, int) else str(v) for v in k)):
        eps = groups[key]
        row: dict[str, Any] = dict(zip(group, key), episodes=len(eps))
        for m in METRICS:
            if m in WHERE_FOUND:
                values = [float(e[m]) for e in eps if e.get(m) is not None]
                if values:
                    row[m], row[f"{m}_episodes"] = interval(values, True), len(values)
            elif all(m in e for e in eps):
                row[m] = interval([float(e[m]) for e in eps], m in PERCENT)
        rows.append(row)
    return rows


def jsonable(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` for ``json.dumps``: each interval as ``{mean, low, high, interval}`` (``None`` for no bound)."""
    def cell(v: Any) -> Any:
        if not isinstance(v, Interval):
            return v
        return {"mean": v.mean, "low": None if math.isnan(v.low) else v.low,
                "high": None if math.isnan(v.high) else v.high, "interval": v.method}

    return [{k: cell(v) for k, v in r.items()} for r in rows]


def markdown_table(rows: list[dict[str, Any]], group: Sequence[str] = GROUP) -> str:
    """EM, F1 and format validity in percent, the rest in their units, each as ``mean [low, high]``
    (one decimal; none for counts of 100 and more), then a line saying which intervals."""
    metrics = [m for m in METRICS if any(m in r for r in rows)]
    lines = table_head([*group, "episodes", *(LABELS[m] for m in metrics)])
    for r in rows:
        cells = [str(r[g]) for g in group] + [str(r["episodes"])]
        cells += [cell_text(r[m], m) if m in r else "" for m in metrics]
        lines.append("| " + " | ".join(cells) + " |")
    note = FOOTNOTE + (" " + RECALL_NOTE if any(m in WHERE_FOUND for m in metrics) else "")
    return "\n".join(lines + ["", note])


def table_head(columns: Sequence[str], align: str = "") -> list[str]:
    """A markdown table's header row and its delimiter row, the delimiter made from the columns: one written
    by hand drifts from its header, and GitHub does not render a table whose counts differ. ``align``: a
    character a column, ``l`` (left) or ``r`` (right, for numbers); the columns it does not reach are left."""
    if len(align) > len(columns) or set(align) - {"l", "r"}:
        raise ValueError(f"align {align!r}: at most one of 'l' or 'r' for each of the {len(columns)} columns")
    marks = ["---:" if a == "r" else "---" for a in align.ljust(len(columns), "l")]
    return ["| " + " | ".join(columns) + " |", "|" + "|".join(marks) + "|"]


def cell_text(value: Interval, metric: str) -> str:
    """A table cell: ``mean [low, high]``, in percent for EM, F1 and the shares, else in the metric's
    unit; one decimal, none for counts of 100 and more (``41234 [40422, 42046]``, ``5.4 [5.2, 5.6]``)."""
    scale = 100 if metric in PERCENT else 1
    mean, low, high = (x * scale for x in value[:3])
    digits = 0 if metric not in PERCENT and abs(mean) >= 100 else 1
    bounds = "n/a" if math.isnan(low) else f"{low:.{digits}f}, {high:.{digits}f}"
    return f"{mean:.{digits}f} [{bounds}]"
