"""Episode prompts for verl: a train and a validation parquet of multi-objective MemSearchQA episodes.

    python -m mempo_verl.data --out data/mempo                                  # the generated task, 2 objectives
    python -m mempo_verl.data --sources hotpotqa:train100 nq_open_dev.jsonl --out data/paper-mix

Each row is one episode: ``extra_info["questions"]`` holds its questions (id, question, answers),
which ``mempo_verl.agent_loop`` hands to ``MemSearchQAEnv.reset(options={"questions": ...})``. With
several ``--sources`` the k-th question of an episode comes from source k (cycling), so two sources
and ``--objectives 2`` give the paper's training mix: one HotpotQA and one NQ question per episode.

Each question also carries its ``source`` and the ``corpus`` that holds its evidence: ``corpus_key`` of
its source's corpus, or None when the source brings none (a question file without context paragraphs,
such as NQ). The search tool itself is the config's ``mempo.env``; ``check_corpus`` refuses a tool that
cannot hold the questions' evidence (searching NQ questions in the generated task's corpus would train
on a reward of 0, quietly).

A source is anything ``mempo_env.tasks.resolve_task`` takes, with an optional ``:split``
("generated:train", "hotpotqa:train100", "musique"), or a question file (JSONL/JSON/parquet, read
with ``load_questions``). Validation questions never appear in training rows: the generated task's
"test" split, else a fixed ``--eval-fraction`` of each source's questions (``mempo_env.tasks.held_out``).
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mempo_env.prompts import get_prompt
from mempo_env.tasks import resolve_task
from mempo_env.tasks.loaders import corpus_from_contexts, load_questions
from mempo_env.types import Document, QARecord, QATask

AGENT_NAME = "memsearchqa"  # the agent loop's name in mempo_verl/config/agent_loops.yaml


def corpus_key(docs: Sequence[Document]) -> str:
    """A corpus's identity, the same wherever it is loaded from: a hash of its document ids (content
    hashes in the shared corpus files and in a corpus built from context paragraphs)."""
    return hashlib.sha256("\n".join(sorted(d.id for d in docs)).encode()).hexdigest()[:16]


def source_splits(source: str, eval_fraction: float) -> tuple[list[QARecord], list[QARecord], str | None]:
    """(train, validation) questions of one source, disjoint, and the ``corpus_key`` of the corpus that
    holds their evidence (None when the source brings none)."""
    from mempo_env.tasks import held_out

    if Path(source).is_file():
        task = QATask(Path(source).stem, load_questions(source), corpus_from_contexts(source))
    elif source == "generated":
        train, test = resolve_task(source, split="train"), resolve_task(source, split="test")
        return train.questions, test.questions, corpus_key(train.corpus)
    else:
        name, _, split = source.partition(":")
        task = resolve_task(name, split=split or None)
    train, val = held_out(task, eval_fraction)
    return train.questions, val.questions, corpus_key(task.corpus) if task.corpus else None


def search_task(search: dict[str, Any]) -> QATask:
    """The task whose corpus ``mempo.env``'s search keys (``MemPOOptions.search``) search with BM25."""
    return resolve_task(search["dataset"], corpus=search["corpus"], split=search["split"])


def check_corpus(needs: Iterable[tuple[str, str | None]], search: dict[str, Any], searched: str | None) -> None:
    """Refuse a search tool that cannot hold the evidence of the questions: ``needs`` are their
    ``(source, corpus)`` (``episode_rows``), ``search`` is ``mempo.env``'s search keys, ``searched`` the
    ``corpus_key`` of the corpus it builds (None with a ``retriever``: a server's corpus cannot be read
    here, so it must hold every question's evidence, e.g. a wiki-scale index for HotpotQA + NQ)."""
    if search["retriever"] is not None:
        return
    where = f"mempo.env searches the corpus of dataset={search['dataset']!r}" + (
        f" corpus={search['corpus']!r}" if search["corpus"] else "") + f" (corpus {searched})"
    for source, need in sorted(needs, key=str):
        if need is None and search["corpus"] is None:
            raise ValueError(f"questions from {source!r} bring no corpus of their own, and {where}: set "
                             "mempo.env.retriever=http://HOST:PORT/retrieve (a Search-R1 server over a corpus that "
                             "holds their evidence; mempo_env/retrieval/server.py serves one) or mempo.env.corpus=FILE")
        if need is not None and need != searched:
            raise ValueError(f"questions from {source!r} have their evidence in corpus {need}, but {where}: set "
                             "mempo.env.dataset (and split or corpus) to their source, or mempo.env.retriever to a "
                             "server over a corpus that holds it")


def dataset_needs(rows: Iterable[dict[str, Any]], where: str) -> set[tuple[str, str | None]]:
    """The ``(source, corpus)`` pairs of the questions of ``rows`` (``episode_rows``, as read back)."""
    needs = set()
    for row in rows:
        for q in (row.get("extra_info") or {}).get("questions") or []:
            if "corpus" not in q:
                raise ValueError(f"{where}: a row's questions do not say which corpus holds their evidence; "
                                 "make the parquet with this version of python -m mempo_verl.data")
            needs.add((str(q.get("source")), q["corpus"]))
    return needs


def episode_rows(sources: list[list[QARecord]], objectives: int, episodes: int, *, seed: int = 0,
                 prompt: str = "train", data_source: str = AGENT_NAME,
                 tags: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """``episodes`` rows of ``objectives`` distinct questions each, the k-th from ``sources[k % len]``;
    ``tags[s]`` is added to every question of source ``s`` (its ``source`` and ``corpus``)."""
    tags = tags or [{} for _ in sources]
    rng = np.random.default_rng(seed)
    template = get_prompt(prompt)
    per_source = [sum(1 for k in range(objectives) if k % len(sources) == s) for s in range(len(sources))]
    for s, (pool, need) in enumerate(zip(sources, per_source)):
        if need > len(pool):
            raise ValueError(f"source {s} has {len(pool)} questions; an episode needs {need} of them")
    rows = []
    for i in range(episodes):
        picks = [iter(rng.choice(len(pool), need, replace=False).tolist()) for pool, need in zip(sources, per_source)]
        questions = [sources[k % len(sources)][next(picks[k % len(sources)])] for k in range(objectives)]
        rows.append({
            "data_source": data_source,
            "agent_name": AGENT_NAME,
            "prompt": [{"role": "system", "content": template.system},
                       {"role": "user", "content": template.user([q.question for q in questions])}],
            "reward_model": {"style": "rule", "ground_truth": "; ".join(q.answers[0] for q in questions)},
            "extra_info": {"index": i, "questions": [
                {"id": q.id, "question": q.question, "answers": list(q.answers), **tags[k % len(sources)]}
                for k, q in enumerate(questions)]},
        })
    return rows


def write_parquet(rows: list[dict[str, Any]], path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m mempo_verl.data", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sources", nargs="+", default=["generated"], help="question sources (module docstring)")
    parser.add_argument("--objectives", type=int, default=2, help="questions per episode (the paper trains at 2)")
    parser.add_argument("--train-episodes", type=int, default=10_000)
    parser.add_argument("--val-episodes", type=int, default=200)
    parser.add_argument("--eval-fraction", type=float, default=0.2,
                        help="share of a source's questions held out for validation (not for 'generated')")
    parser.add_argument("--prompt", default="train", help="prompt template of the rows (mempo_env.prompts)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, required=True, help="folder for train.parquet and val.parquet")
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = make_parser()
    args = parser.parse_args(argv)
    try:
        if args.objectives < 1:
            raise ValueError(f"--objectives must be >= 1, got {args.objectives}")
        splits = [source_splits(s, args.eval_fraction) for s in args.sources]
        tags = [{"source": s, "corpus": corpus} for s, (_, _, corpus) in zip(args.sources, splits)]
        name = "+".join(args.sources)
        for part, episodes, pools, seed in (("train", args.train_episodes, [t for t, _, _ in splits], args.seed),
                                            ("val", args.val_episodes, [v for _, v, _ in splits], args.seed + 1)):
            rows = episode_rows(pools, args.objectives, episodes, seed=seed, prompt=args.prompt,
                                data_source=f"{AGENT_NAME}/{name}", tags=tags)
            write_parquet(rows, args.out / f"{part}.parquet")
            print(f"{args.out / f'{part}.parquet'}: {len(rows)} episodes of {args.objectives} from {name}")
    except (ValueError, FileNotFoundError) as e:
        parser.exit(2, f"{parser.prog}: error: {e}\n")


if __name__ == "__main__":
    main(sys.argv[1:])
