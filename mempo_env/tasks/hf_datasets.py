"""Question sets handed in as Hugging Face ``datasets``: a ``Dataset``, a ``DatasetDict`` and one of its
splits, or a folder written by ``save_to_disk``, in any row shape ``loaders`` reads (its row parser:
FlashRAG, Search-R1 / MEM1, HotpotQA / 2Wiki / MuSiQue native, HippoRAG titles).

``datasets`` stays optional: an object handed in already is one of its own, and a folder imports it
only when read. Files keep going through ``loaders`` (``json`` and ``pyarrow``, measured faster than
``datasets`` there; see its docstring).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mempo_env.tasks.loaders import _build_task, _parse_rows
from mempo_env.types import QATask

# What save_to_disk writes at the top of its folder: a Dataset's state, or a DatasetDict's list of splits.
_SAVED = ("state.json", "dataset_dict.json")


def is_hf_dataset(obj: Any) -> bool:
    """Whether ``obj`` is a ``datasets`` object (checked without importing ``datasets``)."""
    return type(obj).__module__.partition(".")[0] == "datasets"


def is_saved_dataset(path: str | Path) -> bool:
    """Whether ``path`` is a folder written by ``Dataset.save_to_disk`` or ``DatasetDict.save_to_disk``."""
    return Path(path).is_dir() and any((Path(path) / name).is_file() for name in _SAVED)


def import_datasets(purpose: str) -> Any:
    """The ``datasets`` module, or an ``ImportError`` saying that ``purpose`` needs it and how to install it."""
    try:
        import datasets
    except ImportError:
        raise ImportError(f"{purpose} needs the datasets package: pip install datasets") from None
    return datasets


def _one_split(dataset: Any, split: str | None, origin: str) -> tuple[Any, str | None]:
    """The rows to read and their split: a ``DatasetDict``'s ``split`` (default ``train`` where it has
    one, else its only split); a ``Dataset`` is one split already (``None``)."""
    datasets = import_datasets("a datasets object")  # installed: the object handed in is one of its own
    if not isinstance(dataset, (datasets.DatasetDict, datasets.IterableDatasetDict)):
        if split is not None:
            raise ValueError(f"{origin} is one split (a {type(dataset).__name__}); it has no split {split!r}")
        return dataset, None
    splits = list(dataset)
    if split is None:
        if "train" not in splits and len(splits) != 1:
            raise ValueError(f"{origin} has the splits {', '.join(splits)}: pass split= to pick one")
        split = "train" if "train" in splits else splits[0]
    if split not in splits:
        raise ValueError(f"{origin} has no split {split!r}; its splits: {', '.join(splits)}")
    return dataset[split], split


def dataset_task(dataset: Any, *, split: str | None = None, corpus: str | Path | None = None,
                 name: str | None = None) -> QATask:
    """A task from a ``datasets`` question set (``Dataset``, ``DatasetDict`` + ``split``, or a
    ``save_to_disk`` folder), over ``corpus`` (a corpus file) or the corpus its native contexts form.
    Errors name the dataset, the split and the 1-based row. ``name`` defaults to the dataset's name
    (the folder's, else ``info.dataset_name``) and split."""
    if isinstance(dataset, (str, Path)):
        origin, default = f"the saved dataset {dataset}", Path(dataset).name
        dataset = import_datasets("reading a save_to_disk folder").load_from_disk(str(dataset))
    else:
        origin, default = f"the {type(dataset).__name__}", None
    rows, split = _one_split(dataset, split, origin)
    if default is None:
        named = getattr(getattr(rows, "info", None), "dataset_name", None)
        origin, default = (f"{origin} {named!r}", named) if named else (origin, "dataset")
    if split is not None:
        origin, default = f"{origin} split {split!r}", f"{default}-{split}"
    name = name or default
    # A table gives every row every column: a value a row lacks is None there, and absent from the row here.
    present = ((n, {k: v for k, v in row.items() if v is not None}) for n, row in enumerate(rows, 1))
    return _build_task(_parse_rows(present, origin, name, None), corpus, name, origin)
