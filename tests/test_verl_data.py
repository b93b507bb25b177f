"""mempo_verl.data: the episode parquets verl trains on (needs no verl: it runs in the main suite)."""

import pyarrow.parquet as pq
import pytest
from shared_data import SHARED, needs_shared

from mempo_env.env import MemSearchQAEnv
from mempo_env.retrieval import make_retriever
from mempo_env.reward import normalize_answer
from mempo_env.tasks import resolve_task
from mempo_env.tasks.loaders import load_questions
from mempo_env.types import QARecord
from mempo_verl.data import (
    AGENT_NAME,
    check_corpus,
    corpus_key,
    dataset_needs,
    episode_rows,
    main,
    search_task,
    source_splits,
)

GENERATED = {"dataset": "generated", "split": None, "corpus": None, "retriever": None}  # mempo.env's default search


def pool(name, n):
    return [QARecord(f"{name}{i}", f"{name} question {i}?", [f"{name} answer {i}"]) for i in range(n)]


def test_each_objective_comes_from_its_source_in_turn():
    rows = episode_rows([pool("h", 5), pool("n", 3)], objectives=3, episodes=20, seed=1)
    assert len(rows) == 20 and all(r["agent_name"] == AGENT_NAME for r in rows)
    for r in rows:
        ids = [q["id"] for q in r["extra_info"]["questions"]]
        assert [i[0] for i in ids] == ["h", "n", "h"] and len(set(ids)) == 3
        assert r["reward_model"]["ground_truth"] == "; ".join(q["answers"][0] for q in r["extra_info"]["questions"])
        assert r["prompt"][1]["content"].startswith("Answer the following 3 questions")
    assert episode_rows([pool("h", 5)], 2, 4, seed=1) == episode_rows([pool("h", 5)], 2, 4, seed=1)
    with pytest.raises(ValueError, match="needs 2"):
        episode_rows([pool("h", 1), pool("n", 3)], objectives=3, episodes=1)


def test_parquet_rows_replay_in_the_environment(tmp_path):
    """Written and read back as verl reads them, a row's questions start the episode the parquet
    prompt shows, over the generated task's corpus; validation questions never appear in training."""
    main(["--out", str(tmp_path), "--train-episodes", "6", "--val-episodes", "3", "--objectives", "2"])
    train, val = (pq.read_table(tmp_path / f"{part}.parquet").to_pylist() for part in ("train", "val"))
    assert len(train) == 6 and len(val) == 3
    ids = {part: {q["id"] for r in rows for q in r["extra_info"]["questions"]}
           for part, rows in (("t", train), ("v", val))}
    assert ids["t"] and ids["v"] and not ids["t"] & ids["v"]
    row = train[0]
    env = MemSearchQAEnv(resolve_task("generated"), objectives=2)
    obs, _ = env.reset(options={"questions": row["extra_info"]["questions"]})
    assert [m["content"] for m in obs] == [m["content"] for m in row["prompt"]]
    # every question names its source and the corpus of its evidence: the one mempo.env searches by default
    key = corpus_key(search_task(GENERATED).corpus)
    assert dataset_needs(train + val, "here") == {("generated", key)}
    check_corpus(dataset_needs(train + val, "here"), GENERATED, key)


def test_a_search_tool_without_the_questions_evidence_is_refused():
    """``check_corpus``: questions need their source's corpus (by its documents), or, when the source
    brings none, a corpus file or a retriever server (whose corpus cannot be read, so it passes)."""
    key = corpus_key(search_task(GENERATED).corpus)
    other = corpus_key(resolve_task("generated", split="test").corpus[:-1])
    assert corpus_key(resolve_task("generated", split="test").corpus) == key != other  # a split shares its corpus
    with pytest.raises(ValueError, match="'nq' bring no corpus.*mempo.env.retriever"):
        check_corpus({("generated", key), ("nq", None)}, GENERATED, key)
    with pytest.raises(ValueError, match=f"'hotpotqa' have their evidence in corpus {other}"):
        check_corpus({("hotpotqa", other)}, GENERATED, key)
    check_corpus({("nq", None)}, {**GENERATED, "corpus": "wiki.jsonl"}, other)  # a corpus file for questions without
    check_corpus({("hotpotqa", other), ("nq", None)}, {**GENERATED, "retriever": "http://host:8000/retrieve"}, None)
    with pytest.raises(ValueError, match="this version of python -m mempo_verl.data"):
        dataset_needs([{"extra_info": {"questions": [{"id": "1", "question": "q", "answers": ["a"]}]}}], "old.parquet")


def test_bad_arguments_exit_with_a_message(tmp_path, capsys):
    for args in (["--objectives", "0"], ["--sources", "no-such-set"]):
        with pytest.raises(SystemExit) as exit_:
            main(["--out", str(tmp_path), *args])
        assert exit_.value.code == 2 and "error:" in capsys.readouterr().err


@needs_shared
def test_the_paper_mix_holds_out_questions_of_both_sources(tmp_path):
    nq = str(SHARED / "nq_open_dev.jsonl")
    (h_train, h_val, h_corpus), (n_train, n_val, n_corpus) = (source_splits("hotpotqa:train100", 0.2),
                                                              source_splits(nq, 0.2))
    assert len(h_val) == 20 and not {q.id for q in h_train} & {q.id for q in h_val}
    assert not {q.id for q in n_train} & {q.id for q in n_val}
    # HotpotQA's evidence is in its shared corpus (dev and train100 share it); NQ brings none
    assert h_corpus == corpus_key(resolve_task("hotpotqa").corpus) and n_corpus is None
    rows = episode_rows([h_train, n_train], objectives=2, episodes=4)
    assert all([q["id"] in {x.id for x in pool_} for q, pool_ in zip(r["extra_info"]["questions"], (h_train, n_train))]
               for r in rows)


@needs_shared
def test_the_generated_corpus_holds_none_of_the_paper_mixs_evidence():
    """Why the corpus check: searched in the generated task's corpus, the paper mix's questions find their
    answer in BM25's top 3 for none of 100 HotpotQA and 500 NQ questions; HotpotQA in its own corpus for
    54 of 100 (docs/verl.md)."""

    def found(questions, corpus):
        hits = make_retriever(None, corpus, cache_dir=None).search([q.question for q in questions], 3)
        text = [normalize_answer(" ".join(f"{h.document.title} {h.document.text}" for h in top)) for top in hits]
        return sum(any(normalize_answer(a) in t for a in q.answers if normalize_answer(a))
                   for q, t in zip(questions, text))

    generated, hotpotqa = resolve_task("generated").corpus, resolve_task("hotpotqa", split="train100")
    nq = load_questions(SHARED / "nq_open_dev.jsonl", limit=500)
    assert found(hotpotqa.questions, generated) == found(nq, generated) == 0
    assert found(hotpotqa.questions, hotpotqa.corpus) >= 40
