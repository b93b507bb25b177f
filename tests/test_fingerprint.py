"""Index fingerprints (mempo_env/retrieval/fingerprint.py): derived from what is served, so two
builds of one corpus agree, whichever way they were built, and anything that changes a search
result changes the fingerprint; an index built before fingerprints gets a stand-in that is stable."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from mempo_env.retrieval.bm25 import BM25Retriever
from mempo_env.retrieval.index import META, BM25Index, BM25IndexError, build_index
from mempo_env.retrieval.index import main as index_main
from mempo_env.retrieval.store import PassageStore
from mempo_env.tasks import make_generated_task
from mempo_env.types import Document

CORPUS = make_generated_task("train").corpus[:40]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_index(enumerate(CORPUS, 1), tmp_path_factory.mktemp("fp") / "index")


def test_the_index_command_and_the_in_memory_retriever_agree_on_one_corpus(built: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": d.id, "title": d.title, "text": d.text}) + "\n" for d in CORPUS))
    index_main(["--corpus", str(corpus), "--out", str(tmp_path / "cli"), "--workers", "1"])
    recorded = json.loads((tmp_path / "cli" / META).read_text())["fingerprint"]
    assert recorded == BM25Index(tmp_path / "cli").fingerprint == BM25Index(built).fingerprint
    assert recorded == BM25Retriever(CORPUS, cache_dir=None).fingerprint
    # built again from its own passage store: the same passages, the same fingerprint
    assert BM25Index(build_index(PassageStore(built), tmp_path / "again")).fingerprint == recorded


@pytest.mark.parametrize("change", ["text", "order", "k1", "b"])
def test_what_changes_a_result_changes_the_fingerprint(built: Path, tmp_path: Path, change: str) -> None:
    corpus, knobs = list(CORPUS), {}
    if change == "text":
        corpus[3] = Document(corpus[3].id, corpus[3].title, corpus[3].text + " more")
    elif change == "order":  # ties rank in corpus order
        corpus[0], corpus[1] = corpus[1], corpus[0]
    else:
        knobs = {change: 0.5}
    other = BM25Index(build_index(enumerate(corpus, 1), tmp_path / "other", **knobs)).fingerprint
    assert other != BM25Index(built).fingerprint
    assert other == BM25Retriever(corpus, cache_dir=None, **knobs).fingerprint


def test_a_lone_surrogate_and_an_empty_title_are_hashed_alike_from_a_store_and_a_list(tmp_path: Path) -> None:
    corpus = [*CORPUS[:5], Document("s", "Surrogate", "broken \udc80 byte"), Document("t", "", "no title")]
    assert BM25Index(build_index(enumerate(corpus, 1), tmp_path / "i")).fingerprint == \
        BM25Retriever(corpus, cache_dir=None).fingerprint


def test_an_index_json_without_its_fingerprint_is_refused_at_open(built: Path, tmp_path: Path) -> None:
    """Every index this version writes records what it serves; one without is damaged, not served as
    an unknown corpus."""
    old = tmp_path / "old"
    shutil.copytree(built, old)
    meta = json.loads((old / META).read_text())
    del meta["fingerprint"]
    (old / META).write_text(json.dumps(meta))
    with pytest.raises(BM25IndexError, match="fingerprint"):
        BM25Index(old)
