"""F1 and cost against the number of objectives: one line per agent x view, one panel per run (a
line whose agent is named after its view, as in a comparison of strategies, is labelled once).

The figures answer the benchmark's question at a glance: does accuracy hold while the cost grows
slowly as more questions share an episode? Shaded bands are the tables' 95% intervals
(``agents.statistics``); lines that coincide (an oracle scoring 100% in both views) stay visible
through their own style, marker and a small sideways offset.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, no display needed
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from agents.statistics import LABELS, PERCENT  # noqa: E402

# Per view: line style, marker, marker size, filled, x shift (a fraction of the x range). A filled dot
# inside a hollow square, side by side, shows both views where they score the same. Other context
# strategies (window:K, summary, ...) take the next of OTHERS in order of appearance.
STYLE = {"memory": ("-", "o", 4, True, -0.01), "full": ("--", "s", 7, False, 0.01)}
OTHERS = ((":", "^", 6, False, 0.0), ("-.", "D", 5, False, 0.005), (":", "v", 6, False, -0.005),
          ("-.", "P", 6, False, 0.015), (":", "X", 6, False, -0.015), ("-.", "*", 7, False, 0.02))
BANDS = {"f1": "bands: 95% intervals (Wilson where every episode scored 0 or 1, else Student-t, within 0-100%)",
         "cost": "bands: 95% Student-t intervals"}


def _cost_metrics(rows: list[dict[str, Any]]) -> tuple[str, str]:
    """Tokens where every row has them, else characters (never a mix within one panel)."""
    if rows and all("total_tokens" in r for r in rows):
        return "total_tokens", "peak_tokens"
    return "total_chars", "peak_chars"


def _episodes(rows: list[dict[str, Any]]) -> str:
    """Episodes per point in words: one number, or the range where cells differ."""
    counts = sorted({r["episodes"] for r in rows})
    return f"{counts[0]}" if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"


def _panel(ax: Any, rows: list[dict[str, Any]], metric: str, colors: dict[str, Any]) -> None:
    lines: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        lines.setdefault((r["agent"], r["context"]), []).append(r)
    scale = 100 if metric in PERCENT else 1
    ks = [r["objectives"] for r in rows]
    span = max(max(ks) - min(ks), 3)
    others = list(dict.fromkeys(context for _, context in lines if context not in STYLE))
    for (agent, context), pts in lines.items():
        pts = sorted((p for p in pts if metric in p), key=lambda p: p["objectives"])
        if not pts:
            continue
        style, marker, size, filled, shift = STYLE.get(context) or OTHERS[others.index(context) % len(OTHERS)]
        x = [p["objectives"] + shift * span for p in pts]
        mean, low, high = ([v * scale for v in vs] for vs in zip(*(p[metric][:3] for p in pts)))
        color = colors.setdefault(agent, f"C{len(colors)}")
        ax.plot(x, mean, style, marker=marker, markersize=size, markerfacecolor=color if filled else "none",
                color=color, alpha=0.9, label=agent if agent == context else f"{agent} ({context})")
        if not any(math.isnan(v) for v in low):  # single-episode points have no interval
            ax.fill_between(x, low, high, color=color, alpha=0.12, linewidth=0)
    ax.set_xticks(sorted({r["objectives"] for r in rows}))
    ax.set_xlabel("objectives (questions) per episode")
    ax.set_ylabel(f"{LABELS[metric]} (mean over episodes)" if metric in PERCENT else f"{LABELS[metric]} per episode")
    ax.grid(alpha=0.3)


def figures(runs: Mapping[str, list[dict[str, Any]]]) -> dict[str, Figure]:
    """``f1_vs_objectives`` and ``cost_vs_objectives`` (total and peak cost): one column per run of
    ``runs`` (a run's label, e.g. its dataset and split, to its summary rows)."""
    colors: dict[str, Any] = {}  # one colour per agent across every panel and figure
    n = len(runs)
    f1, axes = plt.subplots(1, n, figsize=(5 * n, 4), squeeze=False)
    for ax, (label, rows) in zip(axes[0], runs.items()):
        _panel(ax, rows, "f1", colors)
        ax.set_title(f"{label}: {_episodes(rows)} episodes per point", fontsize=10)
        ax.set_ylim(-2, 102)  # room for markers at 0; the bands stay within 0-100
    f1.suptitle(f"F1 against objectives per episode\n{BANDS['f1']}", fontsize=10)

    cost, axes = plt.subplots(2, n, figsize=(5 * n, 8), squeeze=False)
    for col, (label, rows) in enumerate(runs.items()):
        for ax, metric in zip(axes[:, col], _cost_metrics(rows)):
            _panel(ax, rows, metric, colors)
            ax.set_title(f"{label}: {_episodes(rows)} episodes per point", fontsize=10)
            ax.set_ylim(bottom=0)
    cost.suptitle(f"Context cost against objectives per episode (total: summed over turns; peak: the largest "
                  f"turn)\n{BANDS['cost']}", fontsize=10)
    return {"f1_vs_objectives": f1, "cost_vs_objectives": cost}


def plot_runs(runs: Mapping[str, list[dict[str, Any]]], out_dir: str | Path) -> list[Path]:
    """Write ``f1_vs_objectives.png`` and ``cost_vs_objectives.png`` (see ``figures``) to ``out_dir``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    return [_save(fig, out_dir / f"{name}.png") for name, fig in figures(runs).items()]


def _save(fig: Figure, path: Path) -> Path:
    """One legend for the figure, right of the panels, with every line of every panel once."""
    entries: dict[str, Any] = {}
    for ax in fig.axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            entries.setdefault(label, handle)
    labels = sorted(entries)
    fig.tight_layout()
    fig.legend([entries[k] for k in labels], labels, loc="center left", bbox_to_anchor=(1, 0.5), frameon=False)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path
