"""Question sets handed in as `datasets` objects or save_to_disk folders: the loaders' row shapes, splits,
errors, and `gym.make(..., dataset=...)`."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
from doc_snippets import documented, run_reduced
from shared_data import SHARED, needs_shared
from test_loaders import HOTPOT_ROW, MUSIQUE_ROW, WIKI_ROW, write_jsonl

import mempo_env  # noqa: F401
from mempo_env.tasks import resolve_task
from mempo_env.tasks.loaders import SHARED_SETS, DataError, load_task

datasets = pytest.importorskip("datasets")

# HotpotQA as the Hugging Face hub stores it (hotpotqa/hotpot_qa): a list per field, not a list of pairs.
HUB_HOTPOT_ROW = {
    **HOTPOT_ROW,
    "context": {"title": [t for t, _ in HOTPOT_ROW["context"]], "sentences": [s for _, s in HOTPOT_ROW["context"]]},
    "supporting_facts": {"title": [t for t, _ in HOTPOT_ROW["supporting_facts"]],
                         "sent_id": [i for _, i in HOTPOT_ROW["supporting_facts"]]},
}
SEARCH_R1_ROW = {"data_source": "nq", "prompt": [{"role": "user", "content": "Answer. Question: who sang it?"}],
                 "reward_model": {"ground_truth": {"target": ["Reba"]}}, "id": "sr"}
CORPUS = [{"id": "a", "title": "A", "text": "Reba sang it."}, {"id": "b", "title": "B", "text": "Other."}]


def as_dataset(rows: list[dict[str, Any]]) -> Any:
    """Rows as `datasets` stores them: mixed-type lists (HotpotQA's [title, [sentences]]) as Json."""
    return datasets.Dataset.from_list(rows, on_mixed_types="use_json")


def content(task: Any) -> list[tuple]:
    """A task's questions less their ``source``, which names where they were read from."""
    return [(q.id, q.question, q.answers, q.chain, q.meta) for q in task.questions]


@pytest.mark.parametrize("rows, corpus", [
    ([{"id": "f", "question": "Who sang it?", "golden_answers": ["Reba"]}, {"question": "And?", "answer": "x"}],
     CORPUS),
    ([SEARCH_R1_ROW], CORPUS),
    ([HOTPOT_ROW], None),
    ([WIKI_ROW], None),
    ([MUSIQUE_ROW], None),
    ([{"id": "h", "question": "Who sang it?", "golden_answers": ["Reba"], "supporting_titles": ["A"]}], CORPUS),
], ids=["flashrag", "search-r1", "hotpotqa", "2wiki", "musique", "hipporag"])
def test_every_row_shape_gives_the_task_its_file_gives(tmp_path: Path, rows: list[dict], corpus: list | None) -> None:
    corpus_file = None if corpus is None else write_jsonl(tmp_path / "corpus.jsonl", corpus)
    # a file named after the dataset's default name, so that default ids and sources agree too
    from_file = load_task(write_jsonl(tmp_path / "dataset.jsonl", rows), corpus_file)
    # by columns: a key a row lacks is None in its table, as in any dataset of mixed rows
    table = datasets.Dataset.from_dict({k: [r.get(k) for r in rows] for k in dict.fromkeys(k for r in rows for k in r)},
                                       on_mixed_types="use_json")
    from_dataset = resolve_task(table, corpus=corpus_file)
    assert (from_dataset.name, from_dataset.questions, from_dataset.corpus) == (
        "dataset", from_file.questions, from_file.corpus)


def test_hub_hotpotqa_columns_read_as_the_native_pairs() -> None:
    hub = resolve_task(datasets.Dataset.from_list([HUB_HOTPOT_ROW]))
    native = resolve_task(as_dataset([HOTPOT_ROW]))
    assert (hub.questions, hub.corpus) == (native.questions, native.corpus)
    assert [s.title for s in hub.questions[0].chain] == ["Nobody's Hero", "Neil Peart"]


def test_a_dataset_dict_split_is_picked_like_the_envs_split() -> None:
    train, dev = as_dataset([HOTPOT_ROW]), datasets.Dataset.from_list([MUSIQUE_ROW])
    both = datasets.DatasetDict({"train": train, "dev": dev})
    assert content(resolve_task(both)) == content(resolve_task(train))  # train by default
    assert resolve_task(both, split="dev").name == "dataset-dev"
    assert content(resolve_task(datasets.DatasetDict({"dev": dev}))) == content(resolve_task(dev))  # its only split
    with pytest.raises(ValueError, match=re.escape("the DatasetDict has no split 'test'; its splits: train, dev")):
        resolve_task(both, split="test")
    with pytest.raises(ValueError, match="the DatasetDict has the splits dev, test: pass split= to pick one"):
        resolve_task(datasets.DatasetDict({"dev": dev, "test": dev}))
    with pytest.raises(ValueError, match="the Dataset is one split .* it has no split 'train'"):
        resolve_task(train, split="train")


def test_save_to_disk_folders_through_gym_make(tmp_path: Path) -> None:
    both = datasets.DatasetDict({"train": as_dataset([HOTPOT_ROW]), "dev": datasets.Dataset.from_list([MUSIQUE_ROW])})
    both.save_to_disk(tmp_path / "qa")
    datasets.Dataset.from_list([MUSIQUE_ROW]).save_to_disk(tmp_path / "musique")
    env = gym.make("MemSearchQA-v0", dataset=str(tmp_path / "qa"), split="dev", cache_dir=None)
    obs, _ = env.reset(seed=0)
    assert obs[1]["content"] == MUSIQUE_ROW["question"]
    assert env.unwrapped.task.name == "qa-dev"
    assert content(resolve_task(tmp_path / "musique")) == content(env.unwrapped.task)
    env = gym.make("MemSearchQA-v0", dataset=datasets.Dataset.from_list([HUB_HOTPOT_ROW]), cache_dir=None)
    assert env.reset(seed=0)[0][1]["content"] == HOTPOT_ROW["question"].strip()


def test_a_bad_row_is_named_by_dataset_split_and_row(tmp_path: Path) -> None:
    rows = [{"question": "Q?", "golden_answers": ["A"]}, {"question": " ", "golden_answers": ["A"]}]
    bad = datasets.DatasetDict({"train": datasets.Dataset.from_list(rows)})
    corpus = write_jsonl(tmp_path / "c.jsonl", CORPUS)
    with pytest.raises(DataError, match=re.escape("the DatasetDict split 'train' row 2: 'question' must be")):
        resolve_task(bad, corpus=corpus)
    bad.save_to_disk(tmp_path / "bad")
    with pytest.raises(DataError, match=re.escape(f"the saved dataset {tmp_path / 'bad'} split 'train' row 2:")):
        resolve_task(tmp_path / "bad", corpus=corpus)
    with pytest.raises(DataError, match="the Dataset: the rows have no native 'context' or 'paragraphs'"):
        resolve_task(datasets.Dataset.from_list(rows[:1]))


def test_a_saved_folder_without_datasets_installed_says_what_to_install(tmp_path: Path, monkeypatch) -> None:
    datasets.Dataset.from_list([MUSIQUE_ROW]).save_to_disk(tmp_path / "saved")
    monkeypatch.setitem(sys.modules, "datasets", None)  # `import datasets` now fails, as where it is not installed
    with pytest.raises(ImportError, match="needs the datasets package: pip install datasets"):
        resolve_task(tmp_path / "saved")
    with pytest.raises(ValueError, match="nor a datasets object or save_to_disk folder"):
        resolve_task(tmp_path)  # a plain folder is no dataset


@needs_shared
def test_shared_hotpotqa_read_by_datasets_equals_the_shared_set(tmp_path: Path) -> None:
    question_file, _ = SHARED_SETS["hotpotqa"]
    dataset = datasets.Dataset.from_json(str(SHARED / question_file), cache_dir=str(tmp_path))
    shared, handed_in = load_task(SHARED / question_file), resolve_task(dataset)
    assert (content(handed_in), handed_in.corpus) == (content(shared), shared.corpus)


def test_the_documented_datasets_in_snippet(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)  # it saves a folder where it runs
    ns = run_reduced(documented("docs/trainers.md", "test_the_documented_datasets_in_snippet"), {})
    assert capsys.readouterr().out == "Were Scott Derrickson and Ed Wood of the same nationality?\n"
    task = ns["env"].unwrapped.task  # the saved folder's task: the hub row's question, chain and corpus
    assert task.name == "hotpot-validation" and task.questions[0].answers == ["yes"]
    assert [s.title for s in task.questions[0].chain] == ["Scott Derrickson", "Ed Wood"]
    assert sorted(d.title for d in task.corpus) == ["Ed Wood", "Scott Derrickson"]
