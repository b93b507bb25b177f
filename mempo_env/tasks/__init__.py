"""Question sets with their corpora: the generated default task and loaders for real QA data."""

from __future__ import annotations

from pathlib import Path

from mempo_env.tasks.generated import make_generated_task
from mempo_env.types import QATask


def resolve_task(
    dataset: str | Path | QATask | None = None,
    *,
    corpus: str | Path | None = None,
    split: str = "train",
    seed: int = 0,
) -> QATask:
    """``None``/``"generated"``: the generated task's ``split``; a name from ``SHARED_SETS``; a
    question file (with ``corpus``, or with native contexts that form one); or a ready ``QATask``."""
    if isinstance(dataset, QATask):
        return dataset
    if dataset is None or dataset == "generated":
        return make_generated_task(split, seed=seed)
    from mempo_env.tasks.loaders import SHARED_SETS, load_shared, load_task  # pulls in pyarrow: lazily

    if corpus is None and dataset in SHARED_SETS:
        return load_shared(str(dataset))
    return load_task(dataset, corpus)


__all__ = ["make_generated_task", "resolve_task"]
