"""Experiment tracking next to ``metrics.jsonl``: TensorBoard and/or Weights & Biases, off by default.

``Config.log = ("tensorboard",)`` writes event files to ``RUN_DIR/tensorboard`` (``tensorboard --logdir
runs``); ``("wandb",)`` logs to a W&B run in ``RUN_DIR/wandb`` (``WANDB_MODE=offline`` needs no network;
``wandb sync`` uploads it later). Both are optional extras (``pip install 'memsearchqa[tensorboard]'``,
``[wandb]``). Scalars are grouped as TRL and verl users find them: ``train/reward``, ``train/kl``, ...,
and the step time split under ``time/`` (``time/rollout_s``, ``time/memory_reward_s``, ``time/update_s``,
``time/sync_s``).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol


class Logger(Protocol):
    def log(self, metrics: dict[str, float], step: int) -> None: ...

    def close(self) -> None: ...


def scalars(metrics: dict[str, Any]) -> dict[str, float]:
    """The numbers of a metrics line under their group: ``time/`` for durations, ``train/`` for the rest
    (a key that already names its group is kept); ``step`` is the x axis, not a scalar."""
    return {k if "/" in k else f"{'time' if k.endswith('_s') else 'train'}/{k}": float(v)
            for k, v in metrics.items() if k != "step" and isinstance(v, (int, float))}


class TensorBoard:
    def __init__(self, run_dir: Path, config: dict[str, Any]) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(str(run_dir / "tensorboard"))
        self.writer.add_text("config", "\n".join(f"    {k}: {v!r}" for k, v in config.items()))

    def log(self, metrics: dict[str, Any], step: int) -> None:
        for key, value in scalars(metrics).items():
            self.writer.add_scalar(key, value, step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class WandB:
    def __init__(self, run_dir: Path, config: dict[str, Any]) -> None:
        import wandb

        self.run = wandb.init(project=os.environ.get("WANDB_PROJECT", "memsearchqa"), name=run_dir.name,
                              dir=str(run_dir), config=config)

    def log(self, metrics: dict[str, Any], step: int) -> None:
        self.run.log(scalars(metrics), step=step)

    def close(self) -> None:
        self.run.finish()


LOGGERS: dict[str, Callable[[Path, dict[str, Any]], Logger]] = {"tensorboard": TensorBoard, "wandb": WandB}


def check_loggers(names: Sequence[str]) -> None:
    """Refuse an unknown logger, or one whose package is not installed, before any work is done."""
    for name in names:
        if name not in LOGGERS:
            raise ValueError(f"unknown logger {name!r}; known: {', '.join(LOGGERS)}")
        try:
            importlib.import_module(name)  # each logger's package bears its name
        except ImportError:
            raise ValueError(f"log {name!r} needs the {name!r} package: "
                             f"pip install 'memsearchqa[{name}]' (or pip install {name})") from None


class Tracker:
    """Every chosen logger behind one ``log(metrics, step)`` and ``close()``."""

    def __init__(self, run_dir: str | Path, names: Sequence[str], config: dict[str, Any]) -> None:
        self.loggers = [LOGGERS[name](Path(run_dir), config) for name in names]

    def log(self, metrics: dict[str, Any], step: int) -> None:
        for logger in self.loggers:
            logger.log(metrics, step)

    def close(self) -> None:
        for logger in self.loggers:
            logger.close()
