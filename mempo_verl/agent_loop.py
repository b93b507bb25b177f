"""MemSearchQA-v0 as a verl agent loop: one episode per call, one training row per turn.

verl's ``ToolAgentLoop`` merges every turn into one growing context; the memory view is the
opposite (each turn a fresh prompt: question, ``<mem>``, newest tool result). verl's v1 trainer
takes a list of ``AgentLoopOutput`` from one ``run`` and stores each under ``{uid}_{session}_{turn}``,
so the memory layout needs no patch of verl: the episode is played by the project's own
``algorithms.rollout.Episode`` and cut into rows by ``algorithms.batch.build_samples``, as the
single-process learner does.

Every row carries, in ``extra_fields["mem_turns"]``, the ``<mem>`` spans it holds (in response
coordinates) and, for MemPO (``mempo.memory_advantage``), each scored turn's ``P_mem`` and ``P_full``, computed
with the same rollout servers through ``prompt_logprobs`` (the path verl's distillation teacher
uses). ``mempo_verl.trainer`` turns them into the memory advantage. It also carries the weight versions
the episode was generated under (``min_global_steps``/``max_global_steps``), which verl's own loops copy
from the servers' outputs and its trainer reads for every row.

Registered in a verl config through ``actor_rollout_ref.rollout.agent.agent_loop_config_path``
(``mempo_verl/config/agent_loops.yaml``); its settings are the config's ``mempo:`` section.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import time
from typing import Any
from uuid import uuid4

from transformers import AutoConfig
from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput
from verl.utils.fs import copy_to_local
from verl.workers.rollout.replica import TokenOutput
from verl.workers.rollout.utils import get_max_position_embeddings

from agents.backends.base import Generation
from agents.model import STOP
from algorithms.batch import build_samples
from algorithms.memory_reward import mean_probability, scored_turns, scoring_requests
from algorithms.rollout import Episode, Rollout
from mempo_env.env import MemSearchQAEnv
from mempo_env.retrieval import make_retriever
from mempo_env.types import QATask
from mempo_verl.data import check_corpus, corpus_key, dataset_needs, search_task
from mempo_verl.options import MemPOOptions

# prompt log-probs of a whole sequence, one forward pass: verl's teacher settings (teacher_manager.py)
SCORING = {"max_tokens": 1, "temperature": 1.0, "prompt_logprobs": 0}
# vLLM's own setting: SGLang's SamplingParams takes no detokenize and would fail the request
VLLM_SCORING = {"detokenize": False}


@functools.lru_cache(maxsize=4)
def _search_tool(search: str) -> tuple[QATask, Any, str | None]:
    """The task, its search tool and the ``corpus_key`` of what it searches (None for a retriever
    server) for the JSON of ``mempo.env``'s search keys, built once per process: verl makes an agent
    loop per episode, and each worker plays thousands of episodes."""
    args = json.loads(search)
    task = search_task(args)
    retriever = make_retriever(args["retriever"], task.corpus, cache_dir=args["cache_dir"],
                               options=args["retriever_options"])
    return task, retriever, None if args["retriever"] else corpus_key(task.corpus)


@functools.lru_cache(maxsize=4)
def _model_window(path: str, trust_remote_code: bool) -> int:
    """The servers' ``max_model_len`` when ``rollout.max_model_len`` is unset: the model's
    ``max_position_embeddings``, as verl's vLLM and SGLang servers set it."""
    return get_max_position_embeddings(AutoConfig.from_pretrained(copy_to_local(path),
                                                                  trust_remote_code=trust_remote_code))


class MemSearchQAAgentLoop(AgentLoopBase):
    """Plays one MemSearchQA-v0 episode with the rollout servers, as the config's ``mempo:`` section
    (``mempo_verl.options.MemPOOptions``) says; the questions come from each dataset row
    (``mempo_verl.data``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.options = MemPOOptions.from_config(self.config)
        # built here, on the event loop's thread: only the first episode of a worker process waits for it
        self.task, self.retriever, self.corpus = _search_tool(json.dumps(self.options.search, sort_keys=True))
        self.env_args = self.options.env_args
        self.context = self.env_args.get("context", "memory")
        self.max_new_tokens = self.options.max_new_tokens or self.rollout_config.response_length
        self.scoring = {**SCORING, **(VLLM_SCORING if self.rollout_config.name == "vllm" else {})}
        if self.options.memory_advantage:
            model = self.config.actor_rollout_ref.model
            window = self.rollout_config.max_model_len or _model_window(model.path, model.trust_remote_code)
            self.max_request = window - 1  # the servers refuse a prompt that leaves no room for one token
        self.versions: list[int] = []

    def make_env(self) -> MemSearchQAEnv:
        # verl pads every prompt to rollout.prompt_length and cuts longer ones; the environment ends an
        # episode whose next observation would not fit (score 0), as a real engine refuses it.
        window = self.rollout_config.prompt_length
        if self.context == "full":
            window += self.rollout_config.response_length
        return MemSearchQAEnv(self.task, retriever=self.retriever, tokenizer=self.tokenizer, max_context_tokens=window,
                              **self.env_args)

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> list[AgentLoopOutput]:
        rows = (kwargs.get("extra_info") or {}).get("questions")
        if rows is None or not len(rows):
            raise ValueError("the dataset row has no extra_info.questions: make the parquet with "
                             "python -m mempo_verl.data")
        check_corpus(dataset_needs([kwargs], "a dataset row"), self.options.search, self.corpus)
        # a parquet round trip turns lists into numpy arrays: back to plain strings for the reward
        questions = [{"id": str(q["id"]), "question": str(q["question"]), "answers": [str(a) for a in q["answers"]]}
                     for q in rows]
        self.versions = []  # verl makes one agent loop per episode; a test may reuse one
        # The environment's search (a BM25 query, or an HTTP call to a retriever server) must not block
        # the event loop that every episode of this worker shares: it runs in a worker thread.
        episode = await asyncio.to_thread(lambda: Episode(
            self.make_env(), self.tokenizer, 0, {"questions": questions}, self.options.include_mem_tags))
        params = {**sampling_params, "max_tokens": self.max_new_tokens, "stop": list(STOP)}
        metrics = AgentLoopMetrics()
        while not episode.done:
            start = time.perf_counter()
            out = await self.generate(episode.prompt_ids, params)
            middle = time.perf_counter()
            await asyncio.to_thread(episode.step, self._generation(out))
            metrics.generate_sequences += middle - start
            metrics.tool_calls += time.perf_counter() - middle
        rollout = episode.rollout
        start = time.perf_counter()
        mem_turns = await self.memory_probabilities(rollout) if self.options.memory_advantage else {}
        metrics.compute_score = time.perf_counter() - start  # the memory reward's scoring pass
        return self.rows(rollout, mem_turns, metrics)

    async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any]) -> TokenOutput:
        """One server call, noting the weight versions it ran under (verl's client sets them)."""
        out: TokenOutput = await self.server_manager.generate(
            request_id=uuid4().hex, prompt_ids=prompt_ids, sampling_params=sampling_params)
        versions = (out.extra_fields.get("min_global_steps"), out.extra_fields.get("max_global_steps"))
        self.versions += [v for v in versions if v is not None]
        return out

    def _generation(self, out: TokenOutput) -> Generation:
        """verl's token output as the project's ``Generation`` (its finish reason recovered from the text:
        a stop string or an end-of-sequence token ends a turn, anything else ran out of tokens)."""
        if out.stop_reason == "aborted":
            raise RuntimeError("the rollout server aborted a generation (weights being updated?)")
        ids = list(out.token_ids)
        text = self.tokenizer.decode(ids)
        stopped = any(s in text for s in STOP) or (ids and ids[-1] == self.tokenizer.eos_token_id)
        return Generation(ids, list(out.log_probs or []), text, "stop" if stopped else "length")

    async def memory_probabilities(self, rollout: Rollout) -> dict[int, tuple[float, float, int]]:
        """``{turn: (P_mem, P_full, dropped)}`` of the scored turns: the gold answer's per-token probability
        after the turn's memory alone and after the history, each one prompt-log-prob request. A history
        longer than the servers' window is scored on its most recent turns that fit (``dropped``: how
        many older turns were left out), rather than fail the episode."""
        pairs = scored_turns([rollout], first_turn=self.options.mem_first_turn)
        contexts, continuations = self.scoring_requests(rollout, pairs)
        dropped = []
        for k, (_, t) in enumerate(pairs):
            if len(contexts[2 * k]) + len(continuations[2 * k]) > self.max_request:
                raise ValueError(f"turn {t}'s memory context and answer ({len(contexts[2 * k])} + "
                                 f"{len(continuations[2 * k])} tokens) exceed the servers' window "
                                 f"({self.max_request + 1})")
            contexts[2 * k + 1], n = self.fitted_history(rollout, t, contexts[2 * k + 1], continuations[2 * k + 1])
            dropped.append(n)
        logps = await asyncio.gather(*(self.continuation_logprobs(c, x) for c, x in zip(contexts, continuations)))
        probs = [mean_probability(lp) for lp in logps]
        return {t: (probs[2 * k], probs[2 * k + 1], dropped[k]) for k, (_, t) in enumerate(pairs)}

    def scoring_requests(self, rollout: Rollout, pairs: list[tuple[int, int]]
                         ) -> tuple[list[list[int]], list[list[int]]]:
        return scoring_requests(self.tokenizer, [rollout], pairs, think=self.options.answer_think,
                                prefix=self.options.answer_prefix)

    def fitted_history(self, rollout: Rollout, t: int, context: list[int], answer: list[int]) -> tuple[list[int], int]:
        """Turn ``t``'s P_full context within the servers' window, and how many of its oldest turns it left
        out: the whole history when it fits, else the question and the most recent turns that fit."""
        if len(context) + len(answer) <= self.max_request:
            return context, 0
        turn = rollout.turns[t]
        history = turn.full_context
        starts = [i for i, m in enumerate(history) if m["role"] == "assistant"]  # where each earlier turn begins
        head = history[: starts[0]]  # [system +] question
        for n, start in enumerate(starts[1:], 1):
            shorter = dataclasses.replace(turn, full_context=head + history[start:])
            [_, context], _ = self.scoring_requests(Rollout(rollout.group, rollout.gold, [shorter]), [(0, 0)])
            if len(context) + len(answer) <= self.max_request:
                return context, n
        raise ValueError(f"turn {t}'s question and last turn exceed the servers' window "
                         f"({self.max_request + 1} tokens)")

    async def continuation_logprobs(self, context: list[int], continuation: list[int]) -> list[float]:
        """``log π(continuation | context)`` per token, from the server's prompt log-probs (verl's
        contract: entry ``k`` of ``extra_fields["prompt_logprobs"]`` scores token ``k + 1``)."""
        out = await self.generate(context + continuation, dict(self.scoring))
        rows = out.extra_fields["prompt_logprobs"][len(context) - 1: len(context) - 1 + len(continuation)]
        return [row[0] for row in rows]

    def rows(self, rollout: Rollout, mem_turns: dict[int, tuple[float, float, int]],
             metrics: AgentLoopMetrics) -> list[AgentLoopOutput]:
        """The episode's training rows, as the project's learner cuts them (``build_samples``): one per
        turn in the memory layout, one per episode in the full layout."""
        info = rollout.info
        reward_info = {k: float(info.get(k, 0.0)) for k in ("em", "f1", "format_ok", "n_turns", "total_tokens")}
        samples = build_samples([rollout], [0.0], {}, self.context)
        n = len(rollout.turns)
        row_turns = [[t] for t in range(n)] if self.context == "memory" else [list(range(n))]  # as build_samples
        n_generated = sum(len(turn.response_ids) for turn in rollout.turns)
        versions = {"min_global_steps": min(self.versions, default=None),
                    "max_global_steps": max(self.versions, default=None)}
        outputs = []
        for sample, turns in zip(samples, row_turns):
            cut = len(rollout.turns[turns[0]].prompt_ids)
            spans = []
            for t in turns:
                turn = rollout.turns[t]
                if turn.mem_span is not None:
                    offset = len(turn.prompt_ids) - cut  # where the turn's response starts in this row's response
                    p_mem, p_full, dropped = mem_turns.get(t, (None, None, 0))
                    spans.append({"turn": t, "start": offset + turn.mem_span[0], "end": offset + turn.mem_span[1],
                                  "p_mem": p_mem, "p_full": p_full, "p_full_dropped_turns": dropped})
            has_logprobs = all(len(rollout.turns[t].logprobs) == len(rollout.turns[t].response_ids) for t in turns)
            outputs.append(AgentLoopOutput(
                prompt_ids=sample.input_ids[:cut],
                response_ids=sample.input_ids[cut:],
                response_mask=[int(m) for m in sample.response_mask[cut:]],
                response_logprobs=sample.old_logp[cut:] if has_logprobs else None,
                reward_score=rollout.score,
                num_turns=2 * len(turns),
                metrics=metrics,
                extra_fields={"mem_turns": spans, "n_generated": n_generated, "reward_extra_info": reward_info,
                              **versions},
            ))
        return outputs
