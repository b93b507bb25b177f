"""Loaders for real QA data: question sets, corpora, and the gold chains the scripted oracle follows.

Question rows come in five shapes, detected per row:

- FlashRAG: ``question`` + ``golden_answers`` (or ``answers`` / ``answer``);
- Search-R1 / MEM1 parquet: ``prompt`` (chat messages) + ``reward_model.ground_truth.target``;
- HotpotQA / 2WikiMultihopQA native: ``context`` + ``supporting_facts`` (+ 2Wiki ``evidences``), as
  lists of pairs or as the Hugging Face hub's ``hotpotqa/hotpot_qa`` stores them (a list per field);
- MuSiQue native: ``paragraphs`` + ``question_decomposition``;
- HippoRAG open retrieval: ``supporting_titles`` (titles only; a corpus file supplies the text).

Reading: JSON and JSONL go through ``json`` line by line, parquet through ``pyarrow``. ``datasets``
was measured and not used: 5.2 can read HotpotQA's mixed-type ``context`` (it infers a ``Json``
feature and round-trips all 573 rows), but it took 1.0 s against 0.03 s for ``json`` on that file,
it writes an Arrow copy under ``~/.cache/huggingface``, and a bad line fails the whole file with
"Expected object or value at position 0", naming neither file nor row. For parquet it is 2-3x
slower than ``pyarrow`` (again plus a cache copy), and ``ParquetFile.iter_batches`` lets ``limit``
stop reading early in a large Search-R1 training file. Where a user hands in ``datasets`` objects
(or a ``save_to_disk`` folder), ``hf_datasets`` feeds their rows to the same parser.

Document ids built here are ``content_id(title, text)``: the first 16 hex digits of
md5(title + "\\n" + text), the scheme the shared ``corpus_*.jsonl`` files already use, so a chain
built from native contexts points at the same ids whether the corpus comes from those contexts or
from the shared corpus file.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from mempo_env.types import Document, OracleStep, QARecord, QATask

DATA_DIR_ENV = "MEMPO_DATA_DIR"

# Short name -> (question file, corpus file or None to build the corpus from the native contexts).
# Each corpus file was checked to hold every paragraph of its question file verbatim (HotpotQA
# sentences joined with "", 2Wiki's with " "); tests/test_loaders.py re-checks it. The HotpotQA and
# MuSiQue corpora also hold the train100 files' paragraphs, which act as extra distractors for dev.
SHARED_SETS: dict[str, tuple[str, str | None]] = {
    "hotpotqa": ("hotpotqa_dev_with_context.jsonl", "corpus_hotpotqa.jsonl"),
    "hotpotqa-train100": ("hotpotqa_train100_with_context.jsonl", "corpus_hotpotqa.jsonl"),
    "2wiki": ("2wikimultihopqa_dev_with_context.jsonl", "corpus_2wikimultihopqa.jsonl"),
    "2wiki-hipporag": (
        "2wikimultihopqa_dev1000_hipporag_subset.jsonl",
        "corpus_2wikimultihopqa_hipporag6119.jsonl",
    ),
    "musique": ("musique_dev_with_context.jsonl", "corpus_musique.jsonl"),
    "musique-train100": ("musique_train100_with_context.jsonl", "corpus_musique.jsonl"),
}

# The splits each set offers: split -> the SHARED_SETS entry holding it. A name alone (split None)
# is that entry; "hotpotqa-train100" is "hotpotqa" with split "train100" and offers only that split.
SPLITS: dict[str, dict[str, str]] = {
    "hotpotqa": {"dev": "hotpotqa", "train100": "hotpotqa-train100"},
    "2wiki": {"dev": "2wiki"},
    "2wiki-hipporag": {"dev": "2wiki-hipporag"},
    "musique": {"dev": "musique", "train100": "musique-train100"},
}


class DataError(ValueError):
    """A data file or one of its rows is malformed. Messages name the file and the 1-based row."""


def content_id(title: str, text: str) -> str:
    """Deterministic document id from content, matching the ids of the shared corpus files."""
    return hashlib.md5(f"{title}\n{text}".encode()).hexdigest()[:16]


def data_dir() -> Path:
    """The shared QA data folder: ``$MEMPO_DATA_DIR``, else ``<repo root>/../shared/data/qa``."""
    env = os.environ.get(DATA_DIR_ENV)
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2].parent / "shared" / "data" / "qa"


# --------------------------------------------------------------------------- reading rows


def _rows(path: Path, limit: int | None) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(1-based row number, row)``, stopping after ``limit`` rows without reading further."""
    if limit is not None and limit <= 0:
        return
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        rows = _parquet_rows(path)
    elif suffix == ".json":
        rows = _json_rows(path)
    else:
        rows = _jsonl_rows(path)
    for count, (n, row) in enumerate(rows, 1):
        if not isinstance(row, dict):
            raise DataError(f"{path} row {n}: expected a JSON object, got {type(row).__name__}")
        yield n, row
        if count == limit:
            return


def _utf8(data: bytes, path: Path, row: int | None = None, offset: int = 0) -> str:
    """Decode a JSONL ``row`` found at byte ``offset`` of ``path``, or (``row`` None) the whole file.
    A non-UTF-8 byte is reported with its row (else its line) and its offset in the file."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        where = f"row {row}" if row is not None else f"line {line}"
        byte = f"0x{data[e.start]:02x}"
        raise DataError(f"{path} {where}: not UTF-8 (byte {byte} at file offset {offset + e.start})") from None


def _jsonl_rows(path: Path) -> Iterator[tuple[int, Any]]:
    with path.open("rb") as f:
        offset = 0
        for n, raw in enumerate(f, 1):
            line = _utf8(raw, path, n, offset)
            offset += len(raw)
            if not line.strip():
                continue
            try:
                yield n, json.loads(line)
            except json.JSONDecodeError as e:
                raise DataError(f"{path} row {n}: invalid JSON ({e.msg}, column {e.colno})") from None


def _json_rows(path: Path) -> Iterator[tuple[int, Any]]:
    """A JSON list of objects; JSON Lines saved as ``.json`` (common in QA repos) falls back to JSONL."""
    text = _utf8(path.read_bytes(), path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        if e.msg == "Extra data":
            yield from _jsonl_rows(path)
            return
        raise DataError(f"{path} line {e.lineno}: invalid JSON ({e.msg}, column {e.colno})") from None
    if not isinstance(data, list):
        raise DataError(f"{path}: expected a JSON list of objects, got {type(data).__name__}")
    yield from enumerate(data, 1)


def _parquet_rows(path: Path) -> Iterator[tuple[int, Any]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(path)
    except (pa.ArrowInvalid, OSError) as e:
        if not path.exists():
            raise
        raise DataError(f"{path}: not a readable parquet file ({e})") from None
    n = 0
    for batch in parquet.iter_batches(batch_size=1024):
        for row in batch.to_pylist():
            n += 1
            yield n, row


# --------------------------------------------------------------------------- field checks


def _text(value: Any, what: str, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise DataError(f"{where}: {what} must be a non-empty string, got {value!r:.80}")
    return value.strip()


def _answers(value: Any, key: str, where: str, *, allow_str: bool) -> list[str]:
    """Stripped, de-duplicated aliases in order (the HippoRAG subset repeats aliases in 649 rows)."""
    if allow_str and isinstance(value, str):
        value = [value]
    if not (isinstance(value, list) and value and all(isinstance(a, str) and a.strip() for a in value)):
        kind = "a non-empty string or list of strings" if allow_str else "a non-empty list of strings"
        raise DataError(f"{where}: {key!r} must be {kind}, got {value!r:.80}")
    return list(dict.fromkeys(a.strip() for a in value))


def _question_from_prompt(prompt: Any, where: str) -> str:
    """The last user message, cut to the text after its last ``Question:`` (Search-R1's template)."""
    if not isinstance(prompt, list):
        raise DataError(f"{where}: 'prompt' must be a list of chat messages")
    users = [m for m in prompt if isinstance(m, dict) and m.get("role") == "user"]
    if not users:
        raise DataError(f"{where}: 'prompt' has no user message to take the question from")
    content = _text(users[-1].get("content"), "the last user message", where)
    return _text(content.rpartition("Question:")[2], "the question after 'Question:'", where)


def _question_and_answers(row: dict[str, Any], where: str) -> tuple[str, list[str]]:
    if "reward_model" in row or "prompt" in row:
        reward = row.get("reward_model")
        truth = reward.get("ground_truth") if isinstance(reward, dict) else None
        if not isinstance(truth, dict) or "target" not in truth:
            raise DataError(f"{where}: Search-R1 row needs 'reward_model.ground_truth.target'")
        answers = _answers(truth["target"], "reward_model.ground_truth.target", where, allow_str=True)
        extra = row.get("extra_info")
        question = (extra.get("question") if isinstance(extra, dict) else None) or row.get("question")
        if question is None:
            return _question_from_prompt(row.get("prompt"), where), answers
        return _text(question, "'question'", where), answers
    if "question" not in row:
        raise DataError(f"{where}: missing 'question'")
    question = _text(row["question"], "'question'", where)
    for key in ("golden_answers", "answers", "answer"):
        if key in row:
            return question, _answers(row[key], key, where, allow_str=key == "answer")
    raise DataError(f"{where}: missing answers (expected 'golden_answers', 'answers' or 'answer')")


# --------------------------------------------------------------------------- gold chains


@dataclass(frozen=True)
class _Gold:
    """One hop before it is tied to a corpus: title, native text (None if only the title is known)."""

    title: str
    text: str | None
    answer: str | None
    query: str | None = None  # the oracle's search query; the title when None


@dataclass
class _Parsed:
    record: QARecord
    gold: list[_Gold]
    paragraphs: list[Document]  # the row's own context: distractors included


def _is_str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(x, str) for x in value)


def _pairs(value: Any, keys: tuple[str, str]) -> Any:
    """The Hugging Face hub's column form of a list of pairs (``{"title": [...], "sent_id": [...]}``, what
    ``datasets`` makes of a sequence of structs) as that list of pairs; anything else as it is."""
    if isinstance(value, dict) and set(value) == set(keys) and all(isinstance(value[k], list) for k in keys):
        return [list(pair) for pair in zip(*(value[k] for k in keys), strict=True)]
    return value


def _hotpot_gold(row: dict[str, Any], where: str) -> tuple[list[_Gold], list[Document]]:
    """HotpotQA / 2Wiki: a hop per distinct supporting title, in order of first appearance."""
    context = _pairs(row["context"], ("title", "sentences"))
    if not (
        isinstance(context, list)
        and all(isinstance(p, list) and len(p) == 2 and isinstance(p[0], str) and _is_str_list(p[1]) for p in context)
    ):
        raise DataError(f"{where}: 'context' must be a list of [title, [sentences]]")
    # HotpotQA sentences after the first carry their own leading space, and joined with "" all its
    # paragraphs match corpus_hotpotqa (even the 163 of 5,286 dev paragraphs where some sentence
    # lacks the space and the join glues "career".She). 2Wiki's never carry one and need " ".
    # Decided per row, since a row comes from one dataset.
    sep = "" if any(s[:1].isspace() for _, sents in context for s in sents[1:]) else " "
    joined = [(title, sep.join(sents)) for title, sents in context]
    paragraphs = [Document(content_id(t, x), t, x) for t, x in joined]
    texts: dict[str, str] = {}
    for p in paragraphs:
        texts.setdefault(p.title, p.text)  # 2Wiki repeats a paragraph in 25 rows, with the same text
    facts = _pairs(row["supporting_facts"], ("title", "sent_id"))
    if not (
        isinstance(facts, list)
        and all(isinstance(f, list) and len(f) == 2 and isinstance(f[0], str) and isinstance(f[1], int) for f in facts)
    ):
        raise DataError(f"{where}: 'supporting_facts' must be a list of [title, sentence_id]")
    titles = list(dict.fromkeys(f[0] for f in facts))
    missing = [t for t in titles if t not in texts]
    if missing:
        raise DataError(f"{where}: supporting title(s) {missing} not in 'context'")
    bridges: list[str | None] = [None] * len(titles)
    if "evidences" in row:
        evidences = row["evidences"]
        if not (isinstance(evidences, list) and all(_is_str_list(e) and len(e) == 3 for e in evidences)):
            raise DataError(f"{where}: 'evidences' must be a list of [subject, relation, object]")
        if len(evidences) == len(titles):
            # Aligned hop by hop; the subject spelling can differ from the title ("Charles Howard").
            bridges = [e[2] for e in evidences]
        else:
            objects: dict[str, str] = {}
            for subject, _, obj in evidences:
                objects.setdefault(subject, obj)
            bridges = [objects.get(t) for t in titles]
    return [_Gold(t, texts[t], a) for t, a in zip(titles, bridges, strict=True)], paragraphs


def _musique_gold(row: dict[str, Any], where: str) -> tuple[list[_Gold], list[Document]]:
    """MuSiQue: a hop per decomposition step, its paragraph and its answer."""
    paragraphs = row["paragraphs"]
    if not (
        isinstance(paragraphs, list)
        and all(
            isinstance(p, dict)
            and isinstance(p.get("idx"), int)
            and isinstance(p.get("title"), str)
            and isinstance(p.get("paragraph_text"), str)
            for p in paragraphs
        )
    ):
        raise DataError(f"{where}: 'paragraphs' must be a list of {{idx, title, paragraph_text}}")
    by_idx = {
        p["idx"]: Document(content_id(p["title"], p["paragraph_text"]), p["title"], p["paragraph_text"])
        for p in paragraphs
    }
    steps = row["question_decomposition"]
    if not (isinstance(steps, list) and steps and all(isinstance(s, dict) for s in steps)):
        raise DataError(f"{where}: 'question_decomposition' must be a non-empty list of objects")
    gold = []
    for i, step in enumerate(steps):
        idx = step.get("paragraph_support_idx")
        doc = by_idx.get(idx) if isinstance(idx, int) else None
        if doc is None:
            raise DataError(
                f"{where}: question_decomposition[{i}].paragraph_support_idx {idx!r} names no paragraph idx"
            )
        answer = step.get("answer")
        if answer is not None and not isinstance(answer, str):
            raise DataError(f"{where}: question_decomposition[{i}].answer must be a string")
        # MuSiQue titles are ambiguous ("Korean War" has 18 passages): add the hop's own question,
        # with its "#k" references to earlier hops' answers filled in.
        hop = str(step.get("question") or "")
        for k, prev in enumerate(gold, 1):
            hop = hop.replace(f"#{k}", prev.answer or "")
        gold.append(_Gold(doc.title, doc.text, answer, f"{doc.title} {hop}".strip()))
    return gold, list(by_idx.values())


def _parse_row(origin: str, name: str, n: int, row: dict[str, Any], source: str | None) -> _Parsed:
    """Row ``n`` of ``origin`` (a file, or a ``datasets`` split: ``hf_datasets``), whose default id and
    source come from ``name``."""
    where = f"{origin} row {n}"
    question, answers = _question_and_answers(row, where)
    rid = row.get("id", row.get("_id"))
    if rid is None:
        rid = f"{name}-{n}"
    elif isinstance(rid, bool) or not isinstance(rid, (str, int)):
        raise DataError(f"{where}: 'id' must be a string or an integer, got {rid!r:.80}")
    consumed = {"id", "_id", "question", "golden_answers", "answers", "answer"}
    meta = {k: v for k, v in row.items() if k not in consumed and isinstance(v, (str, int, float, bool))}
    gold: list[_Gold] = []
    paragraphs: list[Document] = []
    if "paragraphs" in row and "question_decomposition" in row:
        gold, paragraphs = _musique_gold(row, where)
    elif "context" in row and "supporting_facts" in row:
        gold, paragraphs = _hotpot_gold(row, where)
    elif "supporting_titles" in row:
        titles = row["supporting_titles"]
        if not (_is_str_list(titles) and titles):
            raise DataError(f"{where}: 'supporting_titles' must be a non-empty list of strings")
        gold = [_Gold(t, None, None) for t in dict.fromkeys(titles)]
        meta["supporting_titles"] = list(dict.fromkeys(titles))
    elif "context" in row or "paragraphs" in row:  # native paragraphs, but nothing says which ones are gold
        key, need = ("context", "supporting_facts") if "context" in row else ("paragraphs", "question_decomposition")
        raise DataError(f"{where}: has {key!r} but no {need!r}; native rows need both")
    if gold:  # the last hop completes the question: its answer is the canonical one
        gold[-1] = replace(gold[-1], answer=answers[0])
    data_source = row.get("data_source")
    record = QARecord(
        id=str(rid),
        question=question,
        answers=answers,
        source=source or (data_source if isinstance(data_source, str) else name),
        meta=meta,
    )
    return _Parsed(record, gold, paragraphs)


def _parse_file(path: str | Path, limit: int | None, source: str | None) -> list[_Parsed]:
    path = Path(path)
    return _parse_rows(_rows(path, limit), str(path), path.stem, source)


def _parse_rows(
    rows: Iterable[tuple[int, dict[str, Any]]], origin: str, name: str, source: str | None
) -> list[_Parsed]:
    """``(1-based row number, row)`` pairs of ``origin`` parsed, question ids checked for repeats."""
    parsed: list[_Parsed] = []
    first_row: dict[str, int] = {}
    for n, row in rows:
        item = _parse_row(origin, name, n, row, source)
        rid = item.record.id
        if rid in first_row:
            raise DataError(f"{origin} row {n}: duplicate question id {rid!r} (first at row {first_row[rid]})")
        first_row[rid] = n
        parsed.append(item)
    return parsed


def _chain(gold: list[_Gold], corpus_by_title: dict[str, list[Document]]) -> tuple[list[OracleStep], list[str]]:
    """Tie hops to corpus docs by title, preferring the doc with the native text. Returns (chain, missing)."""
    chain, missing = [], []
    for g in gold:
        candidates = corpus_by_title.get(g.title)
        if not candidates:
            missing.append(g.title)
            continue
        doc = next((d for d in candidates if d.text == g.text), candidates[0])
        chain.append(OracleStep(query=g.query or g.title, doc_id=doc.id, title=g.title, answer=g.answer))
    return ([] if missing else chain), missing


# --------------------------------------------------------------------------- public API


def load_questions(path: str | Path, *, limit: int | None = None, source: str | None = None) -> list[QARecord]:
    """Questions from JSONL, JSON (a list) or parquet; see the module docstring for the row shapes.

    ``source`` defaults to the row's ``data_source`` (Search-R1), else the file's stem.

    Native rows (HotpotQA, 2Wiki, MuSiQue) get chains whose doc ids are ``content_id``s, valid for
    ``corpus_from_contexts`` and the shared corpus files; ``load_task`` re-ties them to any corpus.
    Title-only rows (HippoRAG) get an empty chain and ``meta["supporting_titles"]`` until then.
    """
    records = []
    for item in _parse_file(path, limit, source):
        chain = [
            OracleStep(g.query or g.title, content_id(g.title, g.text), g.title, g.answer)
            for g in item.gold
            if g.text is not None
        ]
        if len(chain) == len(item.gold):
            item.record.chain = chain
        records.append(item.record)
    return records


def corpus_from_contexts(path: str | Path, *, limit: int | None = None) -> list[Document]:
    """The corpus formed by the native ``context`` / ``paragraphs`` of the first ``limit`` rows.

    Identical (title, text) pairs collapse into one document; order is first appearance.
    """
    return _dedupe(p for item in _parse_file(path, limit, None) for p in item.paragraphs)


def _dedupe(docs: Iterable[Document]) -> list[Document]:
    return list({d.id: d for d in docs}.values())  # ids are content ids: same id, same document


def iter_corpus(path: str | Path, *, limit: int | None = None) -> Iterator[tuple[int, Document]]:
    """``(row number, document)`` of rows ``{id, title, text}`` or Search-R1's ``{id, contents}``, read
    as they come (a wiki-size file never sits in memory); ids are not checked for duplicates here."""
    path = Path(path)
    for n, row in _rows(path, limit):
        where = f"{path} row {n}"
        rid = row.get("id")
        if isinstance(rid, bool) or not isinstance(rid, (str, int)):
            raise DataError(f"{where}: 'id' must be a string or an integer, got {rid!r:.80}")
        rid = str(rid)
        if "title" in row or "text" in row:
            title, text = row.get("title"), row.get("text")
            if not isinstance(title, str) or not isinstance(text, str):
                raise DataError(f"{where}: 'title' and 'text' must both be strings")
            yield n, Document(rid, title, text)
        elif isinstance(row.get("contents"), str):
            yield n, Document.from_contents(rid, row["contents"])
        else:
            raise DataError(f"{where}: expected string fields 'title' and 'text', or 'contents'")


def load_corpus(path: str | Path, *, limit: int | None = None) -> list[Document]:
    """Documents from rows ``{id, title, text}`` or Search-R1's ``{id, contents}``; a repeated id is refused."""
    docs: list[Document] = []
    first_row: dict[str, int] = {}
    for n, doc in iter_corpus(path, limit=limit):
        if doc.id in first_row:
            raise DataError(f"{Path(path)} row {n}: duplicate id {doc.id!r} (first at row {first_row[doc.id]})")
        first_row[doc.id] = n
        docs.append(doc)
    return docs


def load_task(
    questions: str | Path,
    corpus: str | Path | None = None,
    *,
    name: str | None = None,
    limit: int | None = None,
) -> QATask:
    """A task from a question file plus a corpus file, or plus the corpus its native contexts form.

    ``limit`` caps the questions only: an explicit corpus is loaded whole, a context-built one holds
    the paragraphs of the loaded questions. A hop whose title is not in the corpus leaves its
    question without a chain and lists the titles in ``meta["missing_titles"]``.
    """
    return _build_task(_parse_file(questions, limit, None), corpus, name or Path(questions).stem, str(questions))


def _build_task(parsed: list[_Parsed], corpus: str | Path | None, name: str, origin: str) -> QATask:
    """The task of the questions ``parsed`` from ``origin``, over ``corpus`` or their native contexts."""
    if not parsed:
        raise DataError(f"{origin}: no question rows")
    if corpus is not None:
        docs = load_corpus(corpus)
        if not docs:
            raise DataError(f"{corpus}: no documents")
    else:
        docs = _dedupe(p for item in parsed for p in item.paragraphs)
        if not docs:
            raise DataError(
                f"{origin}: the rows have no native 'context' or 'paragraphs' to build a corpus "
                "from; pass a corpus file (rows {id, title, text} or {id, contents})"
            )
    by_title: dict[str, list[Document]] = {}
    for d in docs:
        by_title.setdefault(d.title, []).append(d)
    for item in parsed:
        item.record.chain, missing = _chain(item.gold, by_title)
        if missing:
            item.record.meta["missing_titles"] = missing
    return QATask(name=name, questions=[p.record for p in parsed], corpus=docs)


def shared_splits(name: str) -> dict[str, str]:
    """The splits the shared set ``name`` offers, each mapped to the ``SHARED_SETS`` entry holding it."""
    if name in SPLITS:
        return SPLITS[name]
    return {split: entry for splits in SPLITS.values() for split, entry in splits.items() if entry == name}


def load_shared(
    name: str, *, split: str | None = None, corpus: str | Path | None = None, limit: int | None = None
) -> QATask:
    """A named set from ``SHARED_SETS``, read from ``data_dir()``: its ``split`` (one of
    ``shared_splits(name)``; None: the named entry), over its own corpus or the ``corpus`` file given."""
    if name not in SHARED_SETS:
        raise ValueError(f"unknown shared set {name!r}; known: {', '.join(SHARED_SETS)}")
    if split is not None:
        splits = shared_splits(name)
        if split not in splits:
            raise ValueError(f"dataset {name!r} has no split {split!r}; its splits: {', '.join(splits)}")
        name = splits[split]
    root = data_dir()
    if not root.is_dir():
        raise FileNotFoundError(
            f"shared QA data folder {root} not found; set {DATA_DIR_ENV} to the folder holding the *.jsonl files"
        )
    question_file, corpus_file = SHARED_SETS[name]
    questions = root / question_file
    own_corpus = root / corpus_file if corpus is None and corpus_file is not None else None
    for p in (questions, own_corpus):
        if p is not None and not p.is_file():
            raise FileNotFoundError(f"{p} not found (shared set {name!r}; data folder from {DATA_DIR_ENV})")
    return load_task(questions, own_corpus or corpus, name=name, limit=limit)
