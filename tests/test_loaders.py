"""Real-data loaders: row shapes, gold chains, error reporting, and the shared QA sets."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from shared_data import SHARED, needs_shared

from mempo_env.env import MemSearchQAEnv
from mempo_env.tasks import resolve_task
from mempo_env.tasks.loaders import (
    DATA_DIR_ENV,
    SHARED_SETS,
    DataError,
    content_id,
    corpus_from_contexts,
    data_dir,
    load_corpus,
    load_questions,
    load_shared,
    load_task,
)
from mempo_env.types import Document


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def raises_at(path: Path, row: int) -> Any:
    return pytest.raises(DataError, match=re.escape(f"{path} row {row}:"))


# --------------------------------------------------------------------------- hand-made rows

HOTPOT_ROW = {
    "id": "h1",
    "question": "Which band had the drummer of Nobody's Hero? ",
    "golden_answers": ["Rush"],
    "supporting_facts": [["Nobody's Hero", 0], ["Neil Peart", 1], ["Nobody's Hero", 1]],
    "context": [
        ["Neil Peart", ["Neil Peart was a drummer.", " He played in Rush."]],
        ["Distractor", ["Unrelated text."]],
        ["Nobody's Hero", ["Nobody's Hero is a song.", " Its drummer was Neil Peart."]],
    ],
    "type": "bridge",
}

WIKI_ROW = {
    "id": "w1",
    "question": "Where was the father of Charles Mathew buried?",
    "golden_answers": ["Cork"],
    "supporting_facts": [["Charles Mathew", 2], ["James Charles Mathew", 1]],
    "context": [
        ["Charles Mathew", ["Charles Mathew was a barrister.", "His father was James Charles Mathew."]],
        ["James Charles Mathew", ["James Charles Mathew was a judge.", "He was buried in Cork."]],
    ],
    "evidences": [["Charles Mathew", "father", "Sir James Charles Mathew"], ["James Charles Mathew", "burial", "Cork"]],
}

MUSIQUE_ROW = {
    "id": "2hop__1_2",
    "question": "What did the actress in My Fair Lady win a Tony for?",
    "golden_answers": ["Ondine", "leading role"],
    "question_decomposition": [
        {"id": 1, "question": "actress in my fair lady", "answer": "Audrey Hepburn", "paragraph_support_idx": 2},
        {"id": 2, "question": "what did #1 win a tony for", "answer": "Ondine", "paragraph_support_idx": 0},
    ],
    "paragraphs": [
        {
            "idx": 0,
            "title": "Audrey Hepburn",
            "paragraph_text": "Hepburn won a Tony for Ondine.",
            "is_supporting": True,
        },
        {
            "idx": 1,
            "title": "Audrey Hepburn",
            "paragraph_text": "Hepburn was born in Brussels.",
            "is_supporting": False,
        },
        {
            "idx": 2,
            "title": "My Fair Lady (film)",
            "paragraph_text": "The film stars Audrey Hepburn.",
            "is_supporting": True,
        },
    ],
}


def test_flashrag_rows_and_answer_fallbacks(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "qa.jsonl",
        [
            {"id": "a", "question": " Who? ", "golden_answers": [" X ", "Y", "X"], "prop": "occupation"},
            "",
            {"question": "When?", "answer": "1990"},
            {"id": 7, "question": "Where?", "answers": ["Paris"]},
        ],
    )
    a, b, c = load_questions(path)
    assert (a.id, a.question, a.answers, a.source, a.meta) == ("a", "Who?", ["X", "Y"], "qa", {"prop": "occupation"})
    assert (b.id, b.answers) == ("qa-3", ["1990"])  # id from the 1-based line number
    assert (c.id, c.answers, c.chain) == ("7", ["Paris"], [])
    assert [r.source for r in load_questions(path, source="nq")] == ["nq"] * 3
    assert [r.id for r in load_questions(path, limit=2)] == ["a", "qa-3"]


def test_json_list_and_jsonl_saved_as_json(tmp_path: Path) -> None:
    rows = [
        {"id": "1", "question": "Q1?", "golden_answers": ["A1"]},
        {"id": "2", "question": "Q2?", "golden_answers": ["A2"]},
    ]
    (tmp_path / "list.json").write_text(json.dumps(rows))
    as_lines = write_jsonl(tmp_path / "lines.json", rows)
    assert [r.answers for r in load_questions(tmp_path / "list.json")] == [["A1"], ["A2"]]
    assert [r.id for r in load_questions(as_lines)] == ["1", "2"]
    (tmp_path / "obj.json").write_text(json.dumps({"data": rows}))
    with pytest.raises(DataError, match="expected a JSON list"):
        load_questions(tmp_path / "obj.json")


GOOD = {"question": "Q?", "golden_answers": ["A"]}


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ('{"question": "Q?", "golden_answers": ["A"]', "invalid JSON"),
        ({"golden_answers": ["A"]}, "missing 'question'"),
        ({"question": "", "golden_answers": ["A"]}, "'question' must be a non-empty string"),
        ({"question": 3, "golden_answers": ["A"]}, "'question' must be a non-empty string"),
        ({"question": "Q?", "golden_answers": []}, "'golden_answers' must be a non-empty list of strings"),
        ({"question": "Q?", "golden_answers": "A"}, "'golden_answers' must be a non-empty list of strings"),
        ({"question": "Q?", "golden_answers": ["A", 3]}, "'golden_answers' must be a non-empty list of strings"),
        ({"question": "Q?", "golden_answers": [" "]}, "'golden_answers' must be a non-empty list of strings"),
        ({"question": "Q?"}, "missing answers"),
        ({"id": ["x"], "question": "Q?", "golden_answers": ["A"]}, "'id' must be a string or an integer"),
        (["Q?", "A"], "expected a JSON object"),
        ({"id": "dup", "question": "Q?", "golden_answers": ["A"]}, "duplicate question id 'dup' (first at row 1)"),
        (
            {"prompt": [{"role": "user", "content": "Q?"}], "reward_model": {"style": "rule"}},
            "reward_model.ground_truth.target",
        ),
        (
            {"prompt": [{"role": "system", "content": "Be brief."}], "reward_model": {"ground_truth": {"target": "A"}}},
            "no user message",
        ),
        (
            {**HOTPOT_ROW, "id": "x", "context": [["Neil Peart", "not a list"]]},
            "'context' must be a list of [title, [sentences]]",
        ),
        (
            {**HOTPOT_ROW, "id": "x", "supporting_facts": [["Nowhere", 0]]},
            "supporting title(s) ['Nowhere'] not in 'context'",
        ),
        (
            {**WIKI_ROW, "id": "x", "evidences": [["a", "b"]]},
            "'evidences' must be a list of [subject, relation, object]",
        ),
        (
            {**MUSIQUE_ROW, "question_decomposition": [{"answer": "A", "paragraph_support_idx": 9}]},
            "paragraph_support_idx 9 names no paragraph",
        ),
        (
            {**MUSIQUE_ROW, "question_decomposition": [{"paragraph_support_idx": [0]}]},
            "paragraph_support_idx [0] names no",
        ),
        (
            {"question": "Q?", "golden_answers": ["A"], "supporting_titles": []},
            "'supporting_titles' must be a non-empty list",
        ),
        (
            {k: v for k, v in HOTPOT_ROW.items() if k not in ("id", "supporting_facts")},
            "'context' but no 'supporting_facts'",
        ),
        (
            {k: v for k, v in MUSIQUE_ROW.items() if k not in ("id", "question_decomposition")},
            "'paragraphs' but no 'question_decomposition'",
        ),
    ],
)
def test_malformed_question_row_names_file_and_row(tmp_path: Path, bad: Any, message: str) -> None:
    path = write_jsonl(tmp_path / "bad.jsonl", [{"id": "dup", **GOOD}, "", bad])
    with raises_at(path, 3) as info:
        load_questions(path)
    assert message in str(info.value)
    assert [r.id for r in load_questions(path, limit=1)] == ["dup"]  # rows past the limit are not read


def test_bad_json_in_json_list_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('[\n{"question": "Q?", "golden_answers": ["A"]},\n{"question": \n]')
    with pytest.raises(DataError, match=re.escape(f"{path} line 4: invalid JSON")):
        load_questions(path)


def test_non_utf8_bytes_name_the_file_and_row(tmp_path: Path) -> None:
    good = json.dumps({"id": "a", **GOOD}).encode() + b"\n"
    bad = b'{"id": "q", "question": "caf\xe9", "golden_answers": ["x"]}\n'
    questions = tmp_path / "q.jsonl"
    questions.write_bytes(good + bad)
    offset = (good + bad).index(b"\xe9")
    with pytest.raises(DataError, match=re.escape(f"{questions} row 2: not UTF-8 (byte 0xe9 at file offset {offset})")):
        load_questions(questions)
    as_json = tmp_path / "q.json"
    as_json.write_bytes(b"[\n" + good[:-1] + b",\n" + bad + b"]")  # 3 more bytes before the bad one
    message = f"{as_json} line 3: not UTF-8 (byte 0xe9 at file offset {offset + 3})"
    with pytest.raises(DataError, match=re.escape(message)):
        load_questions(as_json)
    corpus = tmp_path / "c.jsonl"
    corpus.write_bytes(b'{"id": "d1", "title": "T", "text": "x"}\n{"id": "d2", "title": "\xff", "text": "y"}\n')
    with raises_at(corpus, 2) as info:
        load_corpus(corpus)
    assert "not UTF-8 (byte 0xff" in str(info.value)


# --------------------------------------------------------------------------- Search-R1 parquet


def test_search_r1_parquet_rows(tmp_path: Path) -> None:
    prefix = "Answer the given question. For example, <answer> Beijing </answer>. Question: "
    rows = [
        {
            "data_source": "nq",
            "prompt": [{"role": "user", "content": prefix + "who sang it?\n"}],
            "reward_model": {"style": "rule", "ground_truth": {"target": ["Linda Davis", "Reba"]}},
            "extra_info": {"split": "test", "index": 0},
            "id": "test_0",
            "question": None,
        },
        {
            "data_source": "hotpotqa",
            "prompt": [
                {"role": "system", "content": "Question: not this"},
                {"role": "user", "content": "No marker here?"},
            ],
            "reward_model": {"style": "rule", "ground_truth": {"target": ["x"]}},
            "extra_info": {"split": "test", "index": 1},
            "id": "test_1",
            "question": None,
        },
        {
            "data_source": "nq",
            "prompt": [{"role": "user", "content": prefix + "ignored"}],
            "reward_model": {"style": "rule", "ground_truth": {"target": ["y"]}},
            "extra_info": {"split": "test", "index": 2},
            "id": "test_2",
            "question": "the plain question?",
        },
    ]
    path = tmp_path / "test.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    a, b, c = load_questions(path)
    assert (a.id, a.question, a.answers, a.source) == ("test_0", "who sang it?", ["Linda Davis", "Reba"], "nq")
    assert (b.question, b.source, b.meta["data_source"]) == ("No marker here?", "hotpotqa", "hotpotqa")
    assert c.question == "the plain question?"
    assert len(load_questions(path, limit=1)) == 1

    str_target = tmp_path / "str_target.parquet"  # MEM1-style: target a string, question in extra_info
    pq.write_table(
        pa.Table.from_pylist(
            [
                {
                    "prompt": [{"role": "user", "content": "Question: long templated text"}],
                    "reward_model": {"ground_truth": {"target": "Paris"}},
                    "extra_info": {"question": "Capital of France?"},
                }
            ]
        ),
        str_target,
    )
    (r,) = load_questions(str_target)
    assert (r.id, r.question, r.answers) == ("str_target-1", "Capital of France?", ["Paris"])


def test_unreadable_parquet(tmp_path: Path) -> None:
    path = tmp_path / "junk.parquet"
    path.write_text("not parquet")
    with pytest.raises(DataError, match=re.escape(f"{path}: not a readable parquet file")):
        load_questions(path)


# --------------------------------------------------------------------------- corpora


def test_corpus_shapes(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "c.jsonl",
        [
            {"id": "d1", "title": "Paris", "text": "Paris is the capital."},
            {"id": 2, "contents": '"Lyon"\nLyon is a city.'},
            {"id": "d3", "contents": "no title line"},
        ],
    )
    assert load_corpus(path) == [
        Document("d1", "Paris", "Paris is the capital."),
        Document("2", "Lyon", "Lyon is a city."),
        Document("d3", "", "no title line"),
    ]
    assert len(load_corpus(path, limit=2)) == 2
    parquet = tmp_path / "c.parquet"
    pq.write_table(pa.Table.from_pylist([{"id": "0", "contents": '"Title"\nBody'}]), parquet)
    assert load_corpus(parquet) == [Document("0", "Title", "Body")]


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"id": "d1", "title": "T", "text": "other"}, "duplicate id 'd1' (first at row 1)"),
        ({"id": 1, "contents": "x"}, "duplicate id '1' (first at row 2)"),
        ({"title": "T", "text": "x"}, "'id' must be a string or an integer"),
        ({"id": "d9", "title": "T", "text": 5}, "'title' and 'text' must both be strings"),
        ({"id": "d9", "body": "x"}, "expected string fields"),
        ("{not json", "invalid JSON"),
    ],
)
def test_malformed_corpus_row(tmp_path: Path, bad: Any, message: str) -> None:
    path = write_jsonl(
        tmp_path / "corpus.jsonl", [{"id": "d1", "title": "T", "text": "x"}, {"id": "1", "text": "y", "title": ""}, bad]
    )
    with raises_at(path, 3) as info:
        load_corpus(path)
    assert message in str(info.value)


# --------------------------------------------------------------------------- native chains


def test_hotpot_and_2wiki_chains_and_context_corpus(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "native.jsonl", [HOTPOT_ROW, WIKI_ROW])
    hotpot, wiki = load_questions(path)
    # One hop per distinct supporting title in order of first appearance; the last gives the answer.
    assert [(s.query, s.title, s.answer) for s in hotpot.chain] == [
        ("Nobody's Hero", "Nobody's Hero", None),
        ("Neil Peart", "Neil Peart", "Rush"),
    ]
    assert hotpot.question == HOTPOT_ROW["question"].strip() and hotpot.meta == {"type": "bridge"}
    # HotpotQA sentences carry their leading space; 2Wiki's need one added.
    neil = "Neil Peart was a drummer. He played in Rush."
    assert hotpot.chain[1].doc_id == content_id("Neil Peart", neil)
    assert wiki.chain[1].doc_id == content_id(
        "James Charles Mathew", "James Charles Mathew was a judge. He was buried in Cork."
    )
    assert [s.answer for s in wiki.chain] == ["Sir James Charles Mathew", "Cork"]

    corpus = corpus_from_contexts(path)
    assert len(corpus) == 5 and Document(content_id("Neil Peart", neil), "Neil Peart", neil) in corpus
    task = load_task(path)
    assert task.name == "native" and task.corpus == corpus
    assert [q.chain for q in task.questions] == [hotpot.chain, wiki.chain]
    assert len(load_task(path, limit=1).corpus) == 3


def test_2wiki_bridges_by_subject_when_evidences_do_not_align(tmp_path: Path) -> None:
    row = {
        **WIKI_ROW,
        "evidences": [["James Charles Mathew", "burial", "Cork"], ["X", "y", "z"], ["Charles Mathew", "father", "J."]],
    }
    (q,) = load_questions(write_jsonl(tmp_path / "w.jsonl", [row]))
    assert [s.answer for s in q.chain] == ["J.", "Cork"]


def test_duplicate_paragraphs_collapse_across_rows(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "two.jsonl", [HOTPOT_ROW, {**HOTPOT_ROW, "id": "h2"}])
    assert len(corpus_from_contexts(path)) == 3
    assert len(load_task(path).corpus) == 3


def test_musique_chain_and_title_resolution(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "musique.jsonl", [MUSIQUE_ROW])
    (q,) = load_questions(path)
    assert [(s.title, s.answer) for s in q.chain] == [
        ("My Fair Lady (film)", "Audrey Hepburn"),
        ("Audrey Hepburn", "Ondine"),
    ]
    assert q.chain[1].doc_id == content_id("Audrey Hepburn", "Hepburn won a Tony for Ondine.")
    # An ambiguous title resolves to the doc with the native text, else to the first doc with the title.
    corpus = write_jsonl(
        tmp_path / "corpus.jsonl",
        [
            {"id": "born", "title": "Audrey Hepburn", "text": "Hepburn was born in Brussels."},
            {"id": "tony", "title": "Audrey Hepburn", "text": "Hepburn won a Tony for Ondine."},
            {"id": "film", "title": "My Fair Lady (film)", "text": "A different text."},
        ],
    )
    (r,) = load_task(path, corpus).questions
    assert [s.doc_id for s in r.chain] == ["film", "tony"]
    assert "missing_titles" not in r.meta


def test_title_only_chains_and_missing_titles(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "hippo.jsonl",
        [
            {"id": "1", "question": "Q1?", "golden_answers": ["Detroit", "Detroit"], "supporting_titles": ["A", "B"]},
            {"id": "2", "question": "Q2?", "golden_answers": ["x"], "supporting_titles": ["A", "Nowhere"]},
        ],
    )
    first, _ = load_questions(path)
    assert first.chain == [] and first.meta["supporting_titles"] == ["A", "B"] and first.answers == ["Detroit"]
    with pytest.raises(DataError, match="pass a corpus file"):
        load_task(path)
    corpus = write_jsonl(
        tmp_path / "c.jsonl", [{"id": "a", "title": "A", "text": "a"}, {"id": "b", "title": "B", "text": "b"}]
    )
    ok, missing = load_task(path, corpus).questions
    assert [(s.query, s.doc_id, s.answer) for s in ok.chain] == [("A", "a", None), ("B", "b", "Detroit")]
    assert missing.chain == [] and missing.meta["missing_titles"] == ["Nowhere"]


def test_empty_question_or_corpus_file(tmp_path: Path) -> None:
    empty = write_jsonl(tmp_path / "empty.jsonl", [""])
    with pytest.raises(DataError, match=re.escape(f"{empty}: no question rows")):
        load_task(empty)
    questions = write_jsonl(tmp_path / "q.jsonl", [{"id": "0", **GOOD}])
    with pytest.raises(DataError, match=re.escape(f"{empty}: no documents")):
        load_task(questions, empty)


def test_qa_only_set_needs_a_corpus(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "nq.jsonl", [{"id": "0", **GOOD}])
    with pytest.raises(DataError, match=re.escape(f"{path}: the rows have no native 'context' or 'paragraphs'")):
        load_task(path)
    corpus = write_jsonl(tmp_path / "c.jsonl", [{"id": "0", "contents": '"T"\nA'}])
    task = load_task(path, corpus, name="nq")
    assert task.name == "nq" and task.questions[0].chain == [] and task.corpus[0].title == "T"


# --------------------------------------------------------------------------- shared-set plumbing


def test_data_dir_and_missing_shared_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    assert data_dir() == Path(__file__).resolve().parents[1].parent / "shared" / "data" / "qa"
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "nowhere"))
    assert data_dir() == tmp_path / "nowhere"
    with pytest.raises(FileNotFoundError, match=f"{tmp_path / 'nowhere'} not found; set {DATA_DIR_ENV}"):
        load_shared("hotpotqa")
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    with pytest.raises(
        FileNotFoundError, match=re.escape(str(tmp_path / SHARED_SETS["musique"][0])) + ".*" + DATA_DIR_ENV
    ):
        load_shared("musique")
    with pytest.raises(ValueError, match="unknown shared set 'nope'; known: hotpotqa"):
        load_shared("nope")


@pytest.fixture
def shared_hotpot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A data folder holding HotpotQA's two splits (one question each) and their corpus."""
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    dev, train = SHARED_SETS["hotpotqa"][0], SHARED_SETS["hotpotqa-train100"][0]
    write_jsonl(tmp_path / dev, [{**HOTPOT_ROW, "id": "from-dev"}])
    write_jsonl(tmp_path / train, [{**HOTPOT_ROW, "id": "from-train"}])
    docs = corpus_from_contexts(tmp_path / dev)
    write_jsonl(tmp_path / SHARED_SETS["hotpotqa"][1], [{"id": d.id, "title": d.title, "text": d.text} for d in docs])
    return tmp_path


@pytest.mark.parametrize(
    ("name", "split", "expected"),
    [
        ("hotpotqa", None, ("hotpotqa", "from-dev")),
        ("hotpotqa", "dev", ("hotpotqa", "from-dev")),
        ("hotpotqa", "train100", ("hotpotqa-train100", "from-train")),
        ("hotpotqa-train100", None, ("hotpotqa-train100", "from-train")),
        ("hotpotqa-train100", "train100", ("hotpotqa-train100", "from-train")),
    ],
)
def test_shared_set_splits(shared_hotpot: Path, name: str, split: str | None, expected: tuple[str, str]) -> None:
    task = resolve_task(name, split=split)
    assert (task.name, *[q.id for q in task.questions]) == expected


@pytest.mark.parametrize(
    ("name", "split", "message"),
    [
        ("hotpotqa", "bogus", "dataset 'hotpotqa' has no split 'bogus'; its splits: dev, train100"),
        ("hotpotqa", "test", "dataset 'hotpotqa' has no split 'test'; its splits: dev, train100"),
        ("hotpotqa-train100", "dev", "dataset 'hotpotqa-train100' has no split 'dev'; its splits: train100"),
        ("2wiki", "train100", "dataset '2wiki' has no split 'train100'; its splits: dev"),
        ("generated", "dev", "split must be 'train' or 'test', not 'dev'"),
    ],
)
def test_a_split_the_dataset_lacks_is_refused(shared_hotpot: Path, name: str, split: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        resolve_task(name, split=split)
    with pytest.raises(ValueError, match=re.escape(message)):
        MemSearchQAEnv(name, split=split)


def test_generated_split_defaults_to_train() -> None:
    assert resolve_task(None).name.endswith("/train")
    assert resolve_task("generated", split="test").name.endswith("/test")
    assert MemSearchQAEnv().task.name.endswith("/train")


def test_a_question_file_or_a_ready_task_is_one_split(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "q.jsonl", [HOTPOT_ROW])
    task = resolve_task(path)
    assert [q.id for q in task.questions] == ["h1"] and resolve_task(task) is task
    with pytest.raises(ValueError, match=re.escape(f"the question file {path} has no split 'test'")):
        resolve_task(path, split="test")
    with pytest.raises(ValueError, match=re.escape("the QATask 'q' has no split 'dev'")):
        resolve_task(task, split="dev")


def test_a_shared_set_over_another_corpus(shared_hotpot: Path, tmp_path: Path) -> None:
    corpus = write_jsonl(tmp_path / "mine.jsonl", [{"id": "x", "title": "Neil Peart", "text": "A drummer."}])
    task = resolve_task("hotpotqa", corpus=corpus, split="train100")
    assert [q.id for q in task.questions] == ["from-train"] and [d.id for d in task.corpus] == ["x"]


def test_a_corpus_is_refused_where_it_would_be_ignored(tmp_path: Path) -> None:
    corpus = write_jsonl(tmp_path / "c.jsonl", [{"id": "x", "title": "T", "text": "y"}])
    task = resolve_task(write_jsonl(tmp_path / "q.jsonl", [HOTPOT_ROW]))
    for dataset, what in ((None, "the generated task"), ("generated", "the generated task"), (task, "the QATask 'q'")):
        with pytest.raises(ValueError, match=re.escape(f"{what} brings its own corpus; corpus={str(corpus)!r}")):
            resolve_task(dataset, corpus=corpus)


@pytest.mark.parametrize("dataset", ["hotpot", "missing/questions.jsonl"])
def test_unknown_dataset_lists_the_known_names(tmp_path: Path, dataset: str) -> None:
    message = f"unknown dataset '{dataset}': neither a file nor a known name (generated, hotpotqa, hotpotqa-train100, "
    with pytest.raises(ValueError, match=re.escape(message)):
        resolve_task(dataset)
    with pytest.raises(ValueError, match=re.escape(message)):
        resolve_task(dataset, corpus=write_jsonl(tmp_path / "c.jsonl", [{"id": "x", "title": "T", "text": "y"}]))


# --------------------------------------------------------------------------- the shared data

# README row counts: (questions, corpus passages).
EXPECTED = {
    "hotpotqa": (573, 6586),
    "hotpotqa-train100": (100, 6586),
    "2wiki": (657, 4306),
    "2wiki-hipporag": (1000, 6119),
    "musique": (292, 6417),
    "musique-train100": (100, 6417),
}
HOPS = {
    "hotpotqa": {2},
    "hotpotqa-train100": {2},
    "2wiki": {2, 4},
    "2wiki-hipporag": {2, 4},
    "musique": {2, 3, 4},
    "musique-train100": {2, 3, 4},
}


@needs_shared
@pytest.mark.parametrize("name", sorted(SHARED_SETS))
def test_shared_set_loads_whole(name: str) -> None:
    assert set(EXPECTED) == set(SHARED_SETS)
    task = load_shared(name)
    assert (task.name, len(task.questions), len(task.corpus)) == (name, *EXPECTED[name])
    ids = {d.id for d in task.corpus}
    assert len({q.id for q in task.questions}) == len(task.questions)
    for q in task.questions:
        assert q.question and q.answers and all(a.strip() == a and a for a in q.answers)
        assert len(q.chain) in HOPS[name], q.id
        assert all(s.doc_id in ids and s.query.startswith(s.title) for s in q.chain)
        assert q.chain[-1].answer == q.answers[0]
        assert "missing_titles" not in q.meta


@needs_shared
@pytest.mark.parametrize("name", ["hotpotqa", "hotpotqa-train100", "2wiki", "musique", "musique-train100"])
def test_shared_corpus_holds_the_native_contexts(name: str) -> None:
    """Why SHARED_SETS may use the corpus files: every context paragraph is in them verbatim, under
    its content id, and chains resolved by title land on the very paragraph the native data name."""
    questions, corpus_file = SHARED_SETS[name]
    assert corpus_file is not None
    corpus = load_corpus(SHARED / corpus_file)
    assert all(d.id == content_id(d.title, d.text) for d in corpus)
    assert set(corpus_from_contexts(SHARED / questions)) <= set(corpus)
    native = load_questions(SHARED / questions)
    assert [q.chain for q in load_shared(name).questions] == [q.chain for q in native]


@needs_shared
def test_shared_2wiki_bridges_and_musique_hops() -> None:
    wiki = {q.id: q for q in load_questions(SHARED / SHARED_SETS["2wiki"][0], limit=1)}
    assert [s.answer for s in wiki["100c512a0bde11eba7f7acde48001122"].chain] == ["Sir James Charles Mathew", "Cork"]
    (mus,) = load_questions(SHARED / SHARED_SETS["musique"][0], limit=1)
    assert [s.title for s in mus.chain] == [
        "My Fair Lady (film)",
        "List of awards and honours received by Audrey Hepburn",
    ]
    assert mus.chain[0].answer == "Audrey Hepburn"


@needs_shared
def test_shared_limit_and_context_corpus() -> None:
    task = load_shared("hotpotqa", limit=5)
    assert len(task.questions) == 5 and len(task.corpus) == 6586
    from_contexts = load_task(SHARED / SHARED_SETS["hotpotqa"][0], limit=5)
    assert len(from_contexts.corpus) == len(corpus_from_contexts(SHARED / SHARED_SETS["hotpotqa"][0], limit=5)) <= 50
    assert [q.chain for q in from_contexts.questions] == [q.chain for q in task.questions]


@needs_shared
def test_shared_qa_only_sets() -> None:
    bamboogle = load_questions(SHARED / "bamboogle.jsonl")
    assert len(bamboogle) == 125 and all(not q.chain for q in bamboogle)
    trivia = load_questions(SHARED / "triviaqa_dev.jsonl", limit=50)
    assert len(trivia) == 50 and max(len(q.answers) for q in trivia) > 1
    with pytest.raises(DataError, match="pass a corpus file"):
        load_task(SHARED / "nq_open_dev.jsonl", limit=10)
