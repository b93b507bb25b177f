"""F1 and cost against the number of objectives: one line per agent x view, one panel per run.

The figures answer the benchmark's question at a glance: does accuracy hold while the cost grows
slowly as more questions share an episode? Shaded bands are the 95% confidence intervals.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, no display needed
import matplotlib.pyplot as plt  # noqa: E402

from benchmarks.summary import LABELS  # noqa: E402

LINESTYLE = {"memory": "-", "full": "--"}


def _cost_metrics(rows: list[dict[str, Any]]) -> tuple[str, str]:
    """Tokens where every row has them, else characters (never a mix within one panel)."""
    if rows and all("total_tokens" in r for r in rows):
        return "total_tokens", "peak_tokens"
    return "total_chars", "peak_chars"


def _panel(ax: Any, rows: list[dict[str, Any]], metric: str, scale: float, colors: dict[str, Any]) -> None:
    lines: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        lines.setdefault((r["agent"], r["context"]), []).append(r)
    for (agent, context), pts in lines.items():
        pts = sorted((p for p in pts if metric in p), key=lambda p: p["objectives"])
        if not pts:
            continue
        x = [p["objectives"] for p in pts]
        mean = [p[metric][0] * scale for p in pts]
        ci = [p[metric][1] * scale for p in pts]
        color = colors.setdefault(agent, f"C{len(colors)}")
        ax.plot(x, mean, LINESTYLE.get(context, ":"), marker="o", color=color, label=f"{agent} ({context})")
        ax.fill_between(x, [m - c for m, c in zip(mean, ci)], [m + c for m, c in zip(mean, ci)], color=color,
                        alpha=0.15, linewidth=0)
    ax.set_xticks(sorted({r["objectives"] for r in rows}))
    ax.set_xlabel("objectives per episode")
    ax.set_ylabel(LABELS[metric])
    ax.grid(alpha=0.3)


def plot_runs(runs: Mapping[str, list[dict[str, Any]]], out_dir: str | Path) -> list[Path]:
    """Write ``f1_vs_objectives.png`` and ``cost_vs_objectives.png`` (total and peak cost) to
    ``out_dir``; ``runs`` maps a run's label (e.g. its dataset) to its summary rows."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    colors: dict[str, Any] = {}  # one colour per agent across every panel and figure
    n = len(runs)
    paths = []

    fig, axes = plt.subplots(1, n, figsize=(5 * n, 4), squeeze=False)
    for ax, (label, rows) in zip(axes[0], runs.items()):
        _panel(ax, rows, "f1", 100, colors)
        ax.set_title(label)
        ax.set_ylim(-2, 102)
    paths.append(_save(fig, axes, out_dir / "f1_vs_objectives.png"))

    fig, axes = plt.subplots(2, n, figsize=(5 * n, 8), squeeze=False)
    for col, (label, rows) in enumerate(runs.items()):
        for ax, metric in zip(axes[:, col], _cost_metrics(rows)):
            _panel(ax, rows, metric, 1, colors)
            ax.set_title(label)
    paths.append(_save(fig, axes, out_dir / "cost_vs_objectives.png"))
    return paths


def _save(fig: Any, axes: Any, path: Path) -> Path:
    """One legend for the figure, right of the panels, with every line of every panel once."""
    entries: dict[str, Any] = {}
    for ax in axes.flat:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            entries.setdefault(label, handle)
    labels = sorted(entries)
    fig.tight_layout()
    fig.legend([entries[k] for k in labels], labels, loc="center left", bbox_to_anchor=(1, 0.5), frameon=False)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path
