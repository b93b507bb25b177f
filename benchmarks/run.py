"""Evaluate agents on MemSearchQA-v0 as the horizon grows: ``python -m benchmarks.run``.

    python -m benchmarks.run                     # scripted agents on the generated task (~30 s)
    python -m benchmarks.run --dataset hotpotqa --objectives 1,2 --out runs/real/hotpotqa
    python -m benchmarks.run --agents vllm:MODEL --tokenizer MODEL --dataset musique --out runs/musique

Writes ``OUT/episodes.jsonl`` (one line per finished episode: questions, gold answers, trajectory,
metrics), ``config.json``, ``results.json``, ``table.md`` and the plots of ``benchmarks.report``.
Started again with the same arguments, a run skips the episodes it has, so a killed run loses at
most the episodes in flight (the log is only appended to; ``config.json`` is replaced whole); new
agents, views, objective counts or more episodes extend it; other settings, other data (a hash of
questions and corpus) or another spec behind a label are refused. A run holds the folder: a second
one into it fails at once. The table describes the grid asked for, also where the folder holds
more. Episode ``e`` of every cell is reset with seed ``seed + e``, so all agents and context
strategies (``--context memory,full,window:4,summary``; ``mempo_env.context``) answer the same
questions. The episodes of a cell run in lockstep, ``--batch`` at a time, so a model agent
generates one batch per turn (``act_batch``).

Memory content (``mempo_env.recall``): each episode's memory and context recall, the share of the gold
evidence found so far that a turn's ``<mem>`` and its prompt hold, averaged over its turns, in the table
and ``results.json`` (``memory_per_turn`` in the log has each turn's counts).

Costs: characters always; tokens (TT, PT) when ``--tokenizer`` names a Hugging Face tokenizer,
which should be the evaluated model's own. The turn budget of a k-objective episode is
``max(--max-turns, --turns-per-objective * k)``, so that at 10 objectives the budget, not memory,
is not what ends the oracle's episodes; ``--turns-per-objective 0`` keeps the paper's fixed 16.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
from tqdm import tqdm

import mempo_env  # noqa: F401  (registers MemSearchQA-v0)
from agents import Agent, make_agent
from agents.backends.common import parse_spec
from agents.checkpoints import CheckpointError, trained_here
from agents.episode_log import RunFolderError, hold_folder, load_done, write_atomic
from agents.runner import play
from agents.summariser import make_strategy
from benchmarks.report import CONFIG, EPISODES, BenchmarkError, episode_key, read_config, write_report
from mempo_env.context import ContextStrategy
from mempo_env.env import SEARCH_MODES
from mempo_env.prompts import get_prompt
from mempo_env.retrieval import make_retriever
from mempo_env.retrieval.base import Retriever, RetrieverError
from mempo_env.retrieval.cache import RecordReplayRetriever
from mempo_env.tasks import held_out, resolve_task
from mempo_env.types import QATask

OBJECTIVES = (1, 2, 4, 6, 8, 10)
CONTEXTS = ("memory", "full")
def dataset_name(dataset: str | Path | QATask | None, split: str | None, task: QATask) -> str:
    """The run's data in a word: ``generated-test``, a shared set's entry (``hotpotqa-train100``), a
    question file's stem or a ``QATask``'s name."""
    return f"generated-{split}" if dataset is None or dataset == "generated" else task.name


def load_task(dataset: str | Path | QATask | None, corpus: str | Path | None,
              split: str | None) -> tuple[QATask, str | None]:
    """The question set and the split it is: the one asked for, else the generated task's ``test``
    or a shared set's default (``None`` for a question file or a ``QATask``, which have no splits).
    Errors name the bad value and the fix."""
    from mempo_env.tasks.loaders import DATA_DIR_ENV, SHARED_SETS, shared_splits

    if split is None and (dataset is None or dataset == "generated"):
        split = "test"
    if corpus is not None and not Path(corpus).is_file():
        raise BenchmarkError(f"corpus file {corpus} not found")
    try:
        task = resolve_task(dataset, corpus=corpus, split=split)
    except FileNotFoundError as e:  # a shared set without the shared data folder
        raise BenchmarkError(f"{e} (set {DATA_DIR_ENV} to the folder of the shared QA files)") from None
    except ValueError as e:  # an unknown name, a split the dataset lacks, a malformed file
        raise BenchmarkError(str(e)) from None
    if split is None and isinstance(dataset, str) and dataset in SHARED_SETS:
        split = next((s for s, entry in shared_splits(dataset).items() if entry == task.name), None)
    return task, split


def task_fingerprint(task: QATask) -> str:
    """A hash of the questions, answers and corpus: a resumed run must see the same data, also when
    the same arguments now name different data (an edited file, a changed task generator)."""
    h = hashlib.md5()
    for q in task.questions:
        h.update(json.dumps([q.id, q.question, q.answers]).encode())
    for d in task.corpus:
        h.update(json.dumps([d.id, d.title, d.text]).encode())
    return h.hexdigest()[:16]


def load_tokenizer(name: str | None) -> Any:
    if name is None:
        return None
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise BenchmarkError("--tokenizer needs transformers: pip install -e '.[train]'") from None
    try:
        return AutoTokenizer.from_pretrained(name)
    except (OSError, ValueError) as e:
        raise BenchmarkError(f"cannot load tokenizer {name!r}: {e}") from None


def _labelled(agent: str | Agent) -> tuple[str, str | Agent]:
    """``LABEL=SPEC`` -> (LABEL, SPEC), as on the command line; another spec string is its own label, an
    ``Agent`` is labelled by its name. A spec's own ``=`` (``openai:URL#MODEL#concurrency=4``) follows a
    ``:`` or ``#``, never a bare label."""
    if not isinstance(agent, str):
        return agent.name, agent
    m = re.fullmatch(r"([\w.-]+)=(.+)", agent.strip())
    return (m[1], m[2]) if m else (agent, agent)


def label_agents(agents: Sequence[str | Agent] | Mapping[str, str | Agent]) -> dict[str, str | Agent]:
    """Label -> spec string or ``Agent``, from a ``{label: spec or Agent}`` mapping or a list of specs
    (each ``LABEL=SPEC`` or labelled by itself) and ``Agent`` objects (labelled by their names)."""
    items = list(agents.items()) if isinstance(agents, Mapping) else [_labelled(a) for a in agents]
    if not items:
        raise BenchmarkError("no agents given")
    labels = [label for label, _ in items]
    if len(set(labels)) < len(labels):
        raise BenchmarkError(f"agent labels must be distinct, got {labels}; name them LABEL=SPEC")
    return dict(items)


def spec_of(agent: str | Agent) -> str:
    """What an agent's episodes are kept under: its whole spec string (options too), or a ready
    ``Agent``'s class and name."""
    return agent if isinstance(agent, str) else f"{type(agent).__name__}:{agent.name}"


ENGINES = ("hf", "vllm")


def on_engine(spec: str | Agent, engine: str) -> str | Agent:
    """The spec that computes ``spec`` on ``engine``: ``engine="vllm"`` serves an ``hf:`` checkpoint with
    the same path and options by vLLM. Both are float32 and greedy unless told otherwise, so they are one
    policy computed two ways, as on two processors; a folder keeps the ``hf:`` spec and each episode the
    engine that played it (docs/benchmarks.md)."""
    if engine not in ENGINES:
        raise BenchmarkError(f"engine must be one of {ENGINES}, not {engine!r}")
    if engine == "vllm" and isinstance(spec, str) and spec.startswith("hf:"):
        return "vllm:" + spec.removeprefix("hf:")
    return spec


def build_agents(agents: Mapping[str, str | Agent]) -> dict[str, Agent]:
    """Label -> agent, each spec string built (a model agent loads its weights here)."""
    built = {}
    for label, agent in agents.items():
        try:
            built[label] = make_agent(agent) if isinstance(agent, str) else agent
        except CheckpointError as e:  # a path that is no usable policy (agents.checkpoints): one line
            raise BenchmarkError(f"cannot load agent {agent!r}: {e}") from None
        except ValueError as e:
            raise BenchmarkError(str(e)) from None
        except OSError as e:  # a checkpoint that is not there or cannot be read
            reason = str(e).partition("\n")[0]
            raise BenchmarkError(f"cannot load agent {agent!r}: {reason}") from None
    return built


def warn_prompt(specs: Mapping[str, str], prompt: str) -> None:
    """Say so when a checkpoint this project trained (with the ``train`` prompt) is to play with another."""
    trained = [label for label, spec in specs.items()
               if (parsed := parse_spec(spec))[0] in ("hf", "vllm") and parsed[1] and trained_here(parsed[1][0])]
    if trained and get_prompt(prompt).name != get_prompt("train").name:
        print(f"warning: {', '.join(trained)} trained with the 'train' prompt; --prompt {prompt} shows a system prompt "
              "it never saw (pass --prompt train to evaluate it as trained)", file=sys.stderr)


def make_search(retriever: str | None, task: QATask, record: str | Path | None,
                replay: str | Path | None) -> Retriever:
    """The search backend: a replay log alone, else BM25 or a Search-R1 server (appended to ``record``)."""
    if replay and not Path(replay).is_file():
        raise BenchmarkError(f"replay log {replay} not found")
    try:
        if replay:
            return RecordReplayRetriever(replay, mode="replay")
        search = make_retriever(retriever, task.corpus)
        return RecordReplayRetriever(record, search, mode="record") if record else search
    except (ValueError, RetrieverError) as e:
        raise BenchmarkError(str(e)) from None


def check_settings(out: Path, config: dict[str, Any], settings: dict[str, Any], specs: dict[str, str]) -> None:
    """Refuse to mix episodes run with different settings in one folder (a resumed run must match),
    or another agent under a label the folder already has."""
    if not config:
        if (out / EPISODES).exists() and (out / EPISODES).stat().st_size:
            raise BenchmarkError(f"{out / EPISODES} has no {CONFIG} beside it (an older runner wrote it); "
                                 "delete the folder or use another --out")
        return
    saved, saved_specs = config["settings"], config.get("agents", {})
    changed = {k: (saved.get(k), v) for k, v in settings.items() if saved.get(k) != v}
    changed |= {f"agent {label!r}": (saved_specs[label], spec) for label, spec in specs.items()
                if saved_specs.get(label, spec) != spec}
    if changed:
        what = "; ".join(f"{k}: {a!r} there, {b!r} now" for k, (a, b) in changed.items())
        raise BenchmarkError(f"{out} holds a run with other settings ({what}); use another --out")


def build_strategies(contexts: Sequence[str | ContextStrategy]) -> dict[str, ContextStrategy]:
    """Name -> context strategy, each built once for all the envs of its cells."""
    try:
        strategies = [make_strategy(c) for c in contexts]
    except (ValueError, TypeError) as e:
        raise BenchmarkError(str(e)) from None
    names = [s.name for s in strategies]
    if not names or len(set(names)) < len(names):
        raise BenchmarkError(f"contexts must be distinct context strategies, got {names}")
    return dict(zip(names, strategies))


def evaluate(
    agents: Sequence[str | Agent] | Mapping[str, str | Agent],
    *,
    out_dir: str | Path = "runs/eval",
    dataset: str | Path | QATask | None = None,
    corpus: str | Path | None = None,
    split: str | None = None,
    held_out_share: float | None = None,
    search_mode: str = "retriever",
    objectives: Sequence[int] = OBJECTIVES,
    contexts: Sequence[str | ContextStrategy] = CONTEXTS,
    episodes: int = 100,
    seed: int = 0,
    prompt: str = "eval",
    max_turns: int = 16,
    turns_per_objective: int = 4,
    tokenizer: str | None = None,
    max_context_tokens: int | None = None,
    retriever: str | None = None,
    record_retrieval: str | Path | None = None,
    replay_retrieval: str | Path | None = None,
    batch_size: int = 32,
    engine: str = "hf",
    plots: bool = True,
    verbose: bool = True,
) -> list[dict[str, Any]]:
    """Evaluate every agent x context x objectives cell on ``episodes`` episodes; return the summary
    rows (``agents.statistics.summarize``) of that grid and write the run to ``out_dir`` (see the module doc).

    ``split``: ``None`` is the generated task's ``test`` or a shared set's default split. ``held_out_share``:
    only that share of it, the questions ``algorithms.mempo`` holds out at that ``--eval-fraction`` and
    ``algorithms.sft --real`` never trains on (``mempo_env.tasks.held_out``). ``search_mode``: the
    environment's ``search`` (``"oracle"``: the gold evidence of the next hop, docs/environment.md).
    ``contexts``: context strategies by name (``memory``, ``full``, ``window:K``,
    ``summary[:CHARS[:SUMMARISER]]``, a registered one) or ``ContextStrategy`` objects; each is built once
    (a summariser model loads here) and its name labels its episodes.
    ``agents``: spec strings (``oracle``, ``weak``, ``random``, model specs of ``agents.make_agent``), each
    labelled by itself or ``LABEL=SPEC`` as on the command line, ready ``Agent`` objects, or a
    ``{label: spec or Agent}`` mapping. ``record_retrieval``: a log of this call's searches, so
    the folder must not hold episodes of the grid already unless the log is that run's own.
    ``max_context_tokens`` (needs ``tokenizer``): an episode whose next prompt is longer ends unanswered
    (the environment's ``context_overflow``), for a model whose window it exceeds. ``engine``: ``vllm``
    plays the ``hf:`` checkpoints with vLLM (``on_engine``; their episodes record ``"engine": "vllm"``).
    ``verbose``: a progress bar, and the table printed at the end.
    """
    objectives = list(objectives)
    if not objectives or any(not isinstance(k, int) or k < 1 for k in objectives) or len(set(objectives)) < len(
            objectives):
        raise BenchmarkError(f"objectives must be distinct positive integers, got {objectives}")
    strategies = build_strategies(contexts)
    if max_context_tokens is not None and (tokenizer is None or max_context_tokens < 1):
        raise BenchmarkError(f"max_context_tokens must be at least 1 and counts the tokenizer's tokens: give a "
                             f"tokenizer too (got {max_context_tokens}, tokenizer {tokenizer!r})")
    for name, value in (("episodes", episodes), ("batch_size", batch_size), ("max_turns", max_turns)):
        if value < 1:
            raise BenchmarkError(f"{name} must be at least 1, got {value}")
    try:
        get_prompt(prompt)
    except ValueError as e:
        raise BenchmarkError(str(e)) from None
    task, split = load_task(dataset, corpus, split)
    if held_out_share is not None:
        try:
            task = held_out(task, held_out_share)[1]
        except ValueError as e:
            raise BenchmarkError(f"held_out: {e}") from None
    if search_mode not in SEARCH_MODES:
        raise BenchmarkError(f"search must be one of {SEARCH_MODES}, not {search_mode!r}")
    if max(objectives) > len(task.questions):
        raise BenchmarkError(f"{max(objectives)} objectives per episode but {task.name} has only "
                             f"{len(task.questions)} questions")
    settings = {"dataset": None if dataset is None or isinstance(dataset, QATask) else str(dataset),
                "dataset_name": dataset_name(dataset, split, task), "data_hash": task_fingerprint(task),
                "corpus": None if corpus is None else str(corpus),
                "split": split, "seed": seed, "prompt": prompt, "max_turns": max_turns,
                "turns_per_objective": turns_per_objective, "tokenizer": tokenizer,
                "max_context_tokens": max_context_tokens, "retriever": retriever,
                # recorded only when set: folders of earlier runs lack them and keep resuming
                **({"held_out": held_out_share} if held_out_share is not None else {}),
                **({"search": search_mode} if search_mode != "retriever" else {})}
    labelled = label_agents(agents)
    specs = {label: spec_of(agent) for label, agent in labelled.items()}
    played_as = {label: on_engine(agent, engine) for label, agent in labelled.items()}  # what plays: specs keep hf:
    moved = {label for label in labelled if played_as[label] != labelled[label]}
    warn_prompt(specs, prompt)
    search = make_search(retriever, task, record_retrieval, replay_retrieval)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with hold_folder(out):
        config = read_config(out)
        check_settings(out, config, settings, specs)
        episodes_path = out / EPISODES
        done = {episode_key(r) for r in load_done(episodes_path)}
        cells = [(label, c, k) for label in labelled for c in strategies for k in objectives]
        todo = {cell: [e for e in range(episodes) if (*cell, e) not in done] for cell in cells}
        total, left = len(cells) * episodes, sum(map(len, todo.values()))
        if record_retrieval and left < total and not Path(record_retrieval).stat().st_size:
            raise BenchmarkError(
                f"record_retrieval {record_retrieval}: {out} already holds {total - left} of the {total} episodes "
                "asked for; a run plays only what its folder lacks, so their searches would be missing from the "
                "new log: record into a new out_dir (--out)")
        tok = load_tokenizer(tokenizer)
        built = build_agents(played_as)  # last: a model agent loads its weights here
        grid = {"agents": list(built), "contexts": list(strategies), "objectives": objectives, "episodes": episodes}
        write_atomic(out / CONFIG, json.dumps({"settings": settings, "agents": {**config.get("agents", {}), **specs},
                                                "last_grid": grid}, indent=1))
        if not left and verbose:
            print(f"{out} already holds all {total} episodes asked for: none played, the report is rebuilt from "
                  "its log (a new out_dir, --out, runs them again)")
        with episodes_path.open("a") as sink, tqdm(total=total, initial=total - left,
                                                   desc="episodes", disable=not verbose) as bar:
            for (label, context, k), eps in todo.items():
                if not eps:
                    continue
                bar.set_postfix_str(f"{label} {context} k={k}")
                turns = max(max_turns, turns_per_objective * k)
                envs = [gym.make("MemSearchQA-v0", dataset=task, retriever=search, search=search_mode,
                                 context=strategies[context],
                                 prompt=prompt, objectives=k, max_turns=turns, tokenizer=tok,
                                 max_context_tokens=max_context_tokens)
                        for _ in range(min(batch_size, len(eps)))]
                for i, record in play(built[label], envs, [seed + e for e in eps]):
                    head = {"agent": label, "context": context, "objectives": k, "episode": eps[i],
                            "seed": seed + eps[i], "max_turns": turns, **({"engine": engine} if label in moved else {})}
                    sink.write(json.dumps({**head, **record}) + "\n")
                    sink.flush()
                    bar.update()
        rows, table = write_report([out], out, plots=plots)
    if verbose:
        print(table)
    return rows


def _int_list(text: str, flag: str) -> list[int]:
    if not re.fullmatch(r"\s*\d+(\s*,\s*\d+)*\s*", text):
        raise BenchmarkError(f"{flag}: expected comma-separated positive integers like 1,2,4, got {text!r}")
    return [int(v) for v in text.split(",")]



def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    p = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--agents", default="oracle,weak,random",
                   help="comma-separated agent specs (oracle, weak, random[:SEED], hf:PATH, vllm:PATH, "
                        "openai:URL#MODEL), each optionally LABEL=SPEC")
    p.add_argument("--dataset", default=None,
                   help="generated (default), a shared set (hotpotqa, 2wiki, musique, ...) or a question file")
    p.add_argument("--corpus", default=None, help="corpus file for a --dataset file without native paragraphs")
    p.add_argument("--split", default=None,
                   help="the dataset's split: train or test (default) of the generated task; a shared set's "
                        "(hotpotqa, musique: dev (default), train100)")
    p.add_argument("--held-out", type=float, default=None, metavar="SHARE",
                   help="only this share of the split: the questions algorithms.mempo --eval-fraction SHARE "
                        "evaluates on and algorithms.sft --real never trains on (e.g. 0.2)")
    p.add_argument("--search", default="retriever", choices=SEARCH_MODES,
                   help="what a search returns: the retriever's top-k, or the gold evidence of the next hop "
                        "(oracle: F1 lost is memory's alone; docs/environment.md)")
    p.add_argument("--retriever", default=None, help="Search-R1 /retrieve URL (default: in-process BM25)")
    p.add_argument("--record-retrieval", metavar="LOG", help="append every search result to this JSONL log")
    p.add_argument("--replay-retrieval", metavar="LOG", help="answer searches only from this log (exact rerun)")
    p.add_argument("--objectives", default=",".join(map(str, OBJECTIVES)), help="questions per episode: 1,2,4")
    p.add_argument("--context", default=",".join(CONTEXTS),
                   help="context strategies, comma-separated: memory, full, window:K, summary[:CHARS[:SUMMARISER]] "
                        "(docs/environment.md)")
    p.add_argument("--prompt", default="eval", help="prompt template")
    p.add_argument("--episodes", type=int, default=100, help="episodes per agent x view x objectives")
    p.add_argument("--max-turns", type=int, default=16, help="turn budget (at least; see --turns-per-objective)")
    p.add_argument("--turns-per-objective", type=int, default=4, help="budget per objective; 0: --max-turns only")
    p.add_argument("--seed", type=int, default=0, help="episode e is reset with seed + e")
    p.add_argument("--tokenizer", default=None, help="HF tokenizer (path or hub id): report TT/PT in tokens too")
    p.add_argument("--max-context-tokens", type=int, default=None, metavar="N",
                   help="end an episode unanswered when its next prompt exceeds N tokens of --tokenizer "
                        "(the model's window less its generation budget)")
    p.add_argument("--batch", type=int, default=32, help="episodes played in lockstep per agent call")
    p.add_argument("--engine", default="hf", choices=ENGINES,
                   help="vllm: play the hf: checkpoints with vLLM, the same float32 greedy policy (the folder keeps "
                        "their hf: specs; each episode records the engine)")
    p.add_argument("--out", default="runs/eval", help="output folder")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    args = p.parse_args(argv)
    try:
        agents = [s.strip() for s in args.agents.split(",") if s.strip()]
        records = evaluate(agents, out_dir=args.out, dataset=args.dataset, corpus=args.corpus,
                           split=args.split, held_out_share=args.held_out, search_mode=args.search,
                           objectives=_int_list(args.objectives, "--objectives"),
                           contexts=[c.strip() for c in args.context.split(",")], episodes=args.episodes,
                           seed=args.seed, prompt=args.prompt, max_turns=args.max_turns,
                           turns_per_objective=args.turns_per_objective, tokenizer=args.tokenizer,
                           max_context_tokens=args.max_context_tokens,
                           retriever=args.retriever, record_retrieval=args.record_retrieval,
                           replay_retrieval=args.replay_retrieval, batch_size=args.batch,
                           engine=args.engine, plots=not args.no_plots)
    except (BenchmarkError, RunFolderError) as e:
        p.error(str(e))
    print(f"written to {args.out}")
    return records


if __name__ == "__main__":
    main()
