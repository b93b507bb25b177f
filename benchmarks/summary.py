"""Aggregate per-episode records into table rows: mean and 95% confidence half-width per metric."""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

METRICS = ("em", "f1", "format_ok", "n_turns", "n_searches", "total_chars", "peak_chars", "total_tokens",
           "peak_tokens")
GROUP = ("agent", "context", "objectives")


def mean_ci(values: list[float]) -> tuple[float, float]:
    """Mean and the half-width of its 95% normal-approximation interval (0 for fewer than 2 values)."""
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, 0.0
    var = sum((v - mean) ** 2 for v in values) / (n - 1)
    return mean, 1.96 * math.sqrt(var / n)


def summarize(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (agent, context, objectives) with ``{metric: (mean, ci)}`` and the episode count."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in records:
        groups[tuple(r[g] for g in GROUP)].append(r)
    rows = []
    for key in sorted(groups, key=lambda k: tuple(map(str, k[:2])) + (k[2],)):
        eps = groups[key]
        row: dict[str, Any] = dict(zip(GROUP, key), episodes=len(eps))
        for m in METRICS:
            if all(m in e for e in eps):
                row[m] = mean_ci([float(e[m]) for e in eps])
        rows.append(row)
    return rows


def markdown_table(rows: list[dict[str, Any]]) -> str:
    """EM and F1 in percent, costs in their units, each as ``mean ± 95% CI``."""
    metrics = [m for m in METRICS if any(m in r for r in rows)]
    head = list(GROUP) + ["episodes"] + metrics
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [str(r[g]) for g in GROUP] + [str(r["episodes"])]
        for m in metrics:
            if m not in r:
                cells.append("")
                continue
            mean, ci = r[m]
            scale = 100 if m in ("em", "f1", "format_ok") else 1
            cells.append(f"{mean * scale:.1f} ± {ci * scale:.1f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
