"""Question sets with their corpora: the generated default task and loaders for real QA data."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from mempo_env.tasks.generated import make_generated_task
from mempo_env.types import QATask


def resolve_task(
    dataset: str | Path | QATask | Any | None = None,
    *,
    corpus: str | Path | None = None,
    split: str | None = None,
    seed: int = 0,
) -> QATask:
    """``None``/``"generated"``: the generated task's ``split`` (default ``"train"``); a name from
    ``SHARED_SETS``: its ``split`` (see ``SPLITS``; default the named file), over ``corpus`` if given;
    a question file (with ``corpus``, or with native contexts that form one); a ``datasets.Dataset``,
    a ``DatasetDict`` (its ``split``: default ``train``, or its only one) or a ``save_to_disk`` folder
    of such rows (``hf_datasets``); or a ready ``QATask``. A file, a ``Dataset`` or a ``QATask`` is
    one split. An argument the dataset cannot use raises ``ValueError`` (a split it lacks, naming its
    splits; a corpus for the generated task or a ``QATask``)."""
    if dataset is None or dataset == "generated":
        _no_corpus("the generated task", corpus)
        return make_generated_task("train" if split is None else split, seed=seed)
    from mempo_env.tasks.hf_datasets import dataset_task, is_hf_dataset, is_saved_dataset
    from mempo_env.tasks.loaders import SHARED_SETS, load_shared, load_task  # pulls in pyarrow: lazily

    if isinstance(dataset, str) and dataset in SHARED_SETS:
        return load_shared(dataset, split=split, corpus=corpus)
    if is_hf_dataset(dataset) or (isinstance(dataset, (str, Path)) and is_saved_dataset(dataset)):
        return dataset_task(dataset, split=split, corpus=corpus)
    if isinstance(dataset, QATask):
        what = f"the QATask {dataset.name!r}"
    elif isinstance(dataset, (str, Path)) and Path(dataset).is_file():
        what = f"the question file {dataset}"
    else:
        raise ValueError(
            f"unknown dataset {str(dataset)!r}: neither a file nor a known name (generated, {', '.join(SHARED_SETS)}), "
            "nor a datasets object or save_to_disk folder"
        )
    if split is not None:
        raise ValueError(f"{what} has no split {split!r}; only the generated task, the shared sets and a "
                         "DatasetDict have splits")
    if isinstance(dataset, QATask):
        _no_corpus(what, corpus)
        return dataset
    return load_task(dataset, corpus)


def held_out(task: QATask, fraction: float, seed: int = 0) -> tuple[QATask, QATask]:
    """``task`` split in two by a shuffle fixed by ``seed`` (not the training seed: every run of a dataset
    holds out the same questions: the learners' evaluation, the warm-up's exclusions and ``benchmarks.run``'s
    ``--held-out``): the rest to train on, ``fraction`` of it to evaluate on."""
    order = np.random.default_rng(seed).permutation(len(task.questions))
    cut = round(fraction * len(task.questions))
    if not 0 < cut < len(task.questions):
        raise ValueError(f"eval_fraction {fraction} of {task.name!r}'s {len(task.questions)} questions leaves "
                         "nothing to train or to evaluate on")
    test = set(order[:cut].tolist())
    return (QATask(f"{task.name}[train]", [q for i, q in enumerate(task.questions) if i not in test], task.corpus),
            QATask(f"{task.name}[held-out]", [q for i, q in enumerate(task.questions) if i in test], task.corpus))


def _no_corpus(what: str, corpus: str | Path | None) -> None:
    if corpus is not None:
        raise ValueError(f"{what} brings its own corpus; corpus={str(corpus)!r} would be ignored")


__all__ = ["held_out", "make_generated_task", "resolve_task"]
