"""Aggregate per-episode records into table rows: mean and 95% confidence half-width per metric."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

METRICS = ("em", "f1", "format_ok", "context_overflow", "n_turns", "n_searches", "total_chars", "peak_chars",
           "total_tokens", "peak_tokens")
GROUP = ("agent", "context", "objectives")
# Column headers. TT and PT are the paper's names for token counts; character counts say so.
LABELS = {"em": "EM %", "f1": "F1 %", "format_ok": "format ok %",
          "context_overflow": "overflow %", "n_turns": "turns", "n_searches": "searches",
          "total_chars": "total chars", "peak_chars": "peak chars", "total_tokens": "TT tokens",
          "peak_tokens": "PT tokens"}
PERCENT = ("em", "f1", "format_ok", "context_overflow")


def mean_ci(values: list[float]) -> tuple[float, float]:
    """Mean and the half-width of its 95% normal-approximation interval (0 for fewer than 2 values).
    Exactly rounded sums (``fsum``): the same episodes in any order give the same numbers."""
    n = len(values)
    mean = math.fsum(values) / n
    if n < 2:
        return mean, 0.0
    var = math.fsum((v - mean) ** 2 for v in values) / (n - 1)
    return mean, 1.96 * math.sqrt(var / n)


def summarize(records: list[dict[str, Any]], group: Sequence[str] = GROUP) -> list[dict[str, Any]]:
    """One row per ``group`` key (objectives sorted numerically) with ``{metric: (mean, ci)}`` and
    the episode count. A metric appears only where every episode of the row has it."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in records:
        groups[tuple(r[g] for g in group)].append(r)
    rows = []
    for key in sorted(groups, key=lambda k: tuple(v if isinstance(v, int) else str(v) for v in k)):
        eps = groups[key]
        row: dict[str, Any] = dict(zip(group, key), episodes=len(eps))
        for m in METRICS:
            if all(m in e for e in eps):
                row[m] = mean_ci([float(e[m]) for e in eps])
        rows.append(row)
    return rows


def markdown_table(rows: list[dict[str, Any]], group: Sequence[str] = GROUP) -> str:
    """EM, F1 and format validity in percent, the rest in their units, each as ``mean ± 95% CI``
    (one decimal; none for counts of 100 and more)."""
    metrics = [m for m in METRICS if any(m in r for r in rows)]
    head = list(group) + ["episodes"] + [LABELS[m] for m in metrics]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [str(r[g]) for g in group] + [str(r["episodes"])]
        for m in metrics:
            if m not in r:
                cells.append("")
                continue
            scale = 100 if m in PERCENT else 1
            mean, ci = r[m][0] * scale, r[m][1] * scale
            digits = 0 if m not in PERCENT and abs(mean) >= 100 else 1  # 41234 ± 812, 5.4 ± 0.2
            cells.append(f"{mean:.{digits}f} ± {ci:.{digits}f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
