"""MemSearchQA-v0: multi-turn search QA where the policy may keep only its own memory.

One episode = one or more questions (objectives). Each step takes one assistant response
(``<mem>…</mem><think>…</think>`` + one action), runs the action (search, access, answer) and
returns the chat messages the policy conditions on next, built by a context strategy
(``mempo_env.context``): the whole history (``context="full"``), the memory-forcing view of
``prepare_prompt`` (``context="memory"``), the last K turns (``"window:K"``), ReSum's summaries
(``"summary"``) or a strategy of the user's. ``info`` carries both spec snapshots (``full_context``,
``mem_context``) at every turn whatever the strategy, how much of the gold evidence found so far the
turn's memory and context keep (``mempo_env.recall``), and the score and token costs at the end.
Reward: at the final answer, the number of exactly matched sub-answers, 0 unless the whole
trajectory passes the format gate. Special-token and tool-tag look-alikes in model text make a turn
invalid (rule 5) and, like any in a document, reach no message in their original form
(``protocol.neutralize``), so no chat template renders a forged turn.

Hostile text is handled at the boundary, ``step``: code points UTF-8 cannot encode (lone surrogates)
become U+FFFD before parsing, so every string downstream encodes; and no observation outside the
observation space is ever returned: a turn whose next observation would not fit its ``max_bytes``
ends the episode (``info["observation_overflow"]``).
"""

from __future__ import annotations

import numbers
import re
from dataclasses import asdict
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from mempo_env.context import ContextEvent, ContextStrategy, History, make_strategy
from mempo_env.prompts import get_prompt
from mempo_env.protocol import Turn, check_trajectory, corrective_message, neutralize, parse_turn
from mempo_env.recall import MemoryRecall
from mempo_env.retrieval import Hit, Retriever, make_retriever, render_hits
from mempo_env.reward import score_answer
from mempo_env.spaces import ChatMessages, FreeText
from mempo_env.tasks import resolve_task
from mempo_env.types import Document, QARecord, QATask
from mempo_env.views import Message, count_tokens, full_view, mem_context

RESET_OPTIONS = ("index", "objectives", "questions")
SEARCH_MODES = ("retriever", "oracle")
_SURROGATE, _REPLACEMENT = re.compile("[\ud800-\udfff]"), "\ufffd"  # the code points UTF-8 cannot encode, and U+FFFD
# A character takes at most 6 bytes of JSON (a control character's \u escape) and a message's keys,
# role and separators under 64, so a view under this bound fits without being encoded.
_MAX_JSON_BYTES_PER_CHAR, _MAX_JSON_BYTES_PER_MESSAGE = 6, 64


def _clip(text: str, budget: int) -> str:
    return text if len(text) <= budget else text[: max(budget - 3, 0)] + "..."


def _integer(name: str, value: Any, minimum: int | None = 1) -> int:
    """``value`` as a plain int. Python and NumPy integers pass; a bool, a float or a string is refused
    here rather than failing later in a comparison or silently meaning 0/1."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, not {value!r}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def _boolean(name: str, value: Any) -> bool:
    """``value`` as a plain bool (Python or NumPy); anything else, even 0/1 or "no", is refused."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, not {value!r}")
    return bool(value)


class MemSearchQAEnv(gym.Env[list, str]):
    """See the module docstring. Every argument has a working offline default."""

    metadata = {"render_modes": ["ansi"], "render_fps": 1}

    def __init__(
        self,
        dataset: str | Path | QATask | None = None,
        *,
        corpus: str | Path | None = None,
        split: str | None = None,
        task_seed: int = 0,
        retriever: str | Retriever | None = None,
        retriever_options: dict[str, Any] | None = None,
        search: str = "retriever",
        cache_dir: str | Path | None = "default",
        context: str | ContextStrategy = "memory",
        prompt: str = "train",
        max_turns: int = 16,
        topk: int = 3,
        obs_budget: int = 2000,
        objectives: int = 1,
        end_on_invalid: bool = False,
        require_search: bool = True,
        tokenizer: Any = None,
        max_context_tokens: int | None = None,
        render_mode: str | None = None,
    ):
        """
        Args:
            dataset: ``None`` for the generated task, a name from ``mempo_env.tasks.loaders.SHARED_SETS``,
                a question file (JSONL/JSON/parquet), or a ``QATask``.
            corpus: the corpus file for a question file without native context paragraphs.
            split: the dataset's split: ``"train"`` (default) or ``"test"`` of the generated task, a shared
                set's split (``mempo_env.tasks.loaders.SPLITS``; default the named file); a question file or
                a ``QATask`` is one split. A split the dataset lacks raises ``ValueError``.
            task_seed: which world of the generated task.
            retriever: ``None`` for in-process BM25 over the corpus, a Search-R1 ``/retrieve`` URL (or
                several, comma-separated: replicas), an index folder from ``python -m
                mempo_env.retrieval.index`` (memory-mapped, shared by processes), or any object with
                ``search(queries, topk)``.
            retriever_options: keyword arguments for the retriever built from ``retriever``: for a URL
                ``timeout`` (seconds, or (connect, read)), ``attempts``, ``backoff``, ``max_wait`` (the longest
                pause between tries) and ``pool_size`` (``RemoteRetriever``); for BM25 ``k1`` and ``b``; for an
                index folder ``threads``.
            search: what a ``<search>`` returns: ``"retriever"`` (the retriever's top-k for the query) or
                ``"oracle"`` (the gold document of the next hop whose document the episode has not shown yet,
                whatever the query; "No results." once every hop's has been shown). The oracle takes
                retrieval out of the task, as LongMemEval's oracle split does, so F1 lost there is lost by
                memory; the retriever is still built (``access`` and wrappers may use it) but not searched.
            cache_dir: where the BM25 index is cached; ``"default"`` uses ``$MEMPO_CACHE_DIR`` or
                ``~/.cache/mempo_env``, ``None`` disables the cache.
            context: the context strategy that builds each observation (``mempo_env.context``): ``"memory"``
                (prepare_prompt view), ``"full"`` (whole history), ``"window:K"`` (the last K turns),
                ``"summary[:CHARS[:extractive]]"`` (ReSum), ``"summary+keep1[...]"`` (ReSum keeping the
                latest turn), a name given to ``register_strategy``, or a ``ContextStrategy`` (one with a
                model summariser: ``agents.summariser.make_strategy("summary:8000:hf:DIR")``).
                ``env.context`` is its name, ``env.strategy`` the strategy.
            prompt: prompt template name (``"train"``, ``"eval"`` or a versioned name).
            max_turns: turn budget; the episode is truncated when it runs out (a ``TimeLimit`` from
                ``gym.make(..., max_episode_steps=N)`` may cut it shorter, with the same final ``info``).
            topk: documents per search.
            obs_budget: characters of one tool response (search results share it equally).
            objectives: questions per episode; answers are ``;``-separated in question order.
            end_on_invalid: end the episode (reward 0) at the first invalid turn instead of correcting.
            require_search: format rule 8, at least one ``<search>`` (an ``<access>`` alone does not count)
                before the answer.
            tokenizer: a Hugging Face tokenizer; when given, token costs (TT, PT) are reported.
            max_context_tokens: the longest observation (in ``tokenizer``'s tokens) the policy can read,
                e.g. its context window less its generation budget. An episode whose next observation is
                longer is truncated unanswered (score 0; the final ``info["context_overflow"]`` says
                whether that happened), as a real engine refuses such a prompt; ``None``: no limit.
        """
        if render_mode not in (None, "ansi"):
            raise ValueError(f"render_mode must be None or 'ansi', not {render_mode!r}")
        max_turns, topk, obs_budget, objectives = (
            _integer(name, value) for name, value in
            (("max_turns", max_turns), ("topk", topk), ("obs_budget", obs_budget), ("objectives", objectives)))
        task_seed = _integer("task_seed", task_seed, minimum=None)
        end_on_invalid = _boolean("end_on_invalid", end_on_invalid)
        require_search = _boolean("require_search", require_search)
        if search not in SEARCH_MODES:
            raise ValueError(f"search must be one of {SEARCH_MODES}, not {search!r}")
        if max_context_tokens is not None:
            if tokenizer is None:
                raise ValueError("max_context_tokens needs a tokenizer")
            max_context_tokens = _integer("max_context_tokens", max_context_tokens)
        self.task = resolve_task(dataset, corpus=corpus, split=split, seed=task_seed)
        if objectives > len(self.task.questions):
            raise ValueError(f"objectives={objectives} exceeds the {len(self.task.questions)} questions")
        self.retriever = make_retriever(retriever, self.task.corpus, cache_dir=cache_dir, options=retriever_options)
        self.strategy = make_strategy(context)
        self.context, self.prompt = self.strategy.name, get_prompt(prompt)
        self.max_turns, self.topk, self.obs_budget, self.objectives = max_turns, topk, obs_budget, objectives
        self.end_on_invalid, self.require_search, self.search = end_on_invalid, require_search, search
        self.tokenizer, self.max_context_tokens, self.render_mode = tokenizer, max_context_tokens, render_mode
        self.action_space = FreeText()
        self.observation_space = ChatMessages()
        self._docs_by_id = {d.id: d for d in self.task.corpus}
        self._docs_by_title: dict[str, Document] = {}
        for d in self.task.corpus:
            self._docs_by_title.setdefault(d.title.lower(), d)
        self._messages: list[Message] = []
        self._prompt: list[Message] = []
        self._done = True

    # ---- episode start -------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[list, dict]:
        """Start an episode. ``options`` (see ``RESET_OPTIONS``): ``questions`` (a record/dict or a list of
        them) alone, or ``index`` (an int: that question and the next ones; or a list of ints) and/or
        ``objectives``. A refused reset leaves no episode open."""
        self._done = True
        super().reset(seed=seed)
        self._records = self._pick(options or {})
        bad = next((r.id for r in self._records if any(_SURROGATE.search(t) for t in (r.question, *r.answers))), None)
        if bad is not None:
            raise ValueError(f"question {bad!r} holds a lone surrogate (U+D800-U+DFFF), which UTF-8 cannot encode")
        self._target = self._records[0].answers if len(self._records) == 1 else [r.answers for r in self._records]
        questions = [r.question for r in self._records]
        self._messages = [{"role": "system", "content": self.prompt.system},
                          {"role": "user", "content": self.prompt.user(questions)}]
        self._turns: list[Turn] = []
        self._seen: dict[str, Document] = {}
        self._shown: set[str] = set()  # ids of every document a reply has shown (the oracle's progress)
        self._n_searches = self._n_invalid = 0
        self._cost = {"total_chars": 0, "peak_chars": 0, "total_tokens": 0, "peak_tokens": 0}
        self._history, self._events = History(questions, self._messages), []
        self._recall = MemoryRecall(self._records)
        self._prompt = []
        self._next_prompt()
        self._done = False
        self._objectives = [asdict(r) for r in self._records]
        info = {
            "turn": 0,
            "full_context": full_view(self._messages),
            "mem_context": None,
            "objectives": self._objectives,
        }
        if self._overflows():
            self._done = True
            raise ValueError(f"the first observation is longer than max_context_tokens={self.max_context_tokens}")
        observation = self._view()
        if not self._fits(observation):
            self._done = True
            raise ValueError(f"the first observation does not fit the observation space's "
                             f"max_bytes={self.observation_space.max_bytes}")
        return observation, info

    def _pick(self, options: dict[str, Any]) -> list[QARecord]:
        if not isinstance(options, dict):
            raise TypeError(f"reset options must be a dict, not {type(options).__name__}")
        unknown = [key for key in options if key not in RESET_OPTIONS]
        if unknown:
            raise ValueError(f"unknown reset option {unknown[0]!r}; known: {', '.join(RESET_OPTIONS)}")
        if "questions" in options:
            extra = [key for key in options if key != "questions"]
            if extra:
                raise ValueError(f"reset option 'questions' picks the questions itself; drop {extra[0]!r}")
            given = options["questions"]
            given = given if isinstance(given, list) else [given]
            if not given:
                raise ValueError("options['questions'] is empty")
            return [self._as_record(q, i) for i, q in enumerate(given)]
        n = len(self.task.questions)
        k = _integer("options['objectives']", options.get("objectives", self.objectives))
        if k > n:
            raise ValueError(f"options['objectives'] must be at most the {n} questions, got {k}")
        if "index" not in options:
            indices = self.np_random.choice(n, size=k, replace=False).tolist()
            return [self.task.questions[i] for i in indices]
        index = options["index"]
        index = index.tolist() if isinstance(index, np.ndarray) else index
        if isinstance(index, (list, tuple)):
            if not index:
                raise ValueError("options['index'] is empty")
            indices = [_integer(f"options['index'][{j}]", i, minimum=None) for j, i in enumerate(index)]
            if "objectives" in options and len(indices) != k:
                raise ValueError(f"options['index'] lists {len(indices)} questions but options['objectives'] is {k}")
        elif isinstance(index, numbers.Integral) and not isinstance(index, bool):
            indices = list(range(int(index), int(index) + k))
        else:
            raise TypeError(f"options['index'] must be an integer or a list of integers, not {index!r}")
        bad = [i for i in indices if not 0 <= i < n]
        if bad:
            raise IndexError(f"question index {bad[0]} out of range for {n} questions")
        return [self.task.questions[i] for i in indices]

    @staticmethod
    def _as_record(q: QARecord | dict[str, Any], i: int) -> QARecord:
        if isinstance(q, QARecord):
            return q
        if not isinstance(q, dict):
            raise TypeError(f"options['questions'][{i}] must be a QARecord or a dict, not {type(q).__name__}")
        answers = q.get("answers", q.get("golden_answers"))
        return QARecord(str(q.get("id", f"custom-{i}")), q.get("question", ""),
                        [answers] if isinstance(answers, str) else answers)

    # ---- one turn ------------------------------------------------------------------------
    def step(self, action: str) -> tuple[list, float, bool, bool, dict]:
        if self._done:
            raise RuntimeError("the episode is over (or never started): call reset() first")
        if not isinstance(action, str):
            raise TypeError(f"action must be a str (the model's response), not {type(action).__name__}")
        action, replaced = _SURROGATE.subn(_REPLACEMENT, action)  # so that every string downstream encodes
        turn = parse_turn(action)
        seen_by_policy = self._view()
        history = full_view(self._messages)
        # Run the tool before touching any state, so a retriever failure can be retried.
        reply, doc_ids = self._act(turn)
        self._shown.update(doc_ids)
        answered = turn.valid and turn.action == "answer"
        terminated = answered or (not turn.valid and self.end_on_invalid)

        self._turns.append(turn)
        self._n_invalid += not turn.valid
        self._n_searches += turn.valid and turn.action == "search"
        self._account(seen_by_policy, action, self._obs_tokens)
        recall = self._recall.measure(turn.mem, seen_by_policy)  # against what earlier replies showed
        self._recall.observe(doc_ids, reply)
        # Stored inert, so no chat template renders a forged turn from it; a valid turn is unchanged.
        new = [{"role": "assistant", "content": neutralize(action)}]
        new += [] if reply is None else [{"role": "user", "content": reply}]
        self._messages += new
        # no strategy work (a summary) for a prompt nobody will read
        event = None if terminated or len(self._turns) >= self.max_turns else self._after_turn()
        self._next_prompt()
        observation = self._view()
        # An observation that does not fit the space is never returned: the episode ends at this turn
        # and the caller gets back the last observation that fit (the one this turn answered).
        too_big = not self._fits(observation)
        overflow = not terminated and self._overflows()
        truncated = not terminated and (len(self._turns) >= self.max_turns or overflow or too_big)
        self._done = terminated or truncated

        info: dict[str, Any] = {
            "turn": len(self._turns),
            "full_context": history,
            "mem_context": mem_context(history, neutralize(turn.mem)) if turn.mem is not None else None,
            "mem": turn.mem,
            "think": turn.think,
            "action": turn.action,
            "argument": turn.argument,
            "valid": turn.valid,
            "failed_rules": list(turn.failed),
            "format_errors": self._n_invalid,
            "doc_ids": doc_ids,
            "context_event": event,
            "objectives": self._objectives,
            "replaced_surrogates": replaced,
            **recall,
        }
        reward = 0.0
        if self._done:
            info.update(self._final(turn.argument if answered else None, overflow, too_big))
            reward = float(info["score"])
        return seen_by_policy if too_big else observation, reward, terminated, truncated, info

    def truncate(self) -> dict[str, Any]:
        """End the running episode unanswered, for a wrapper that truncates it (``TimeLimit``), and return
        the end-of-episode info the env's own turn budget gives (score 0); ``wrappers.EndOfEpisodeInfo``
        adds it to the final ``info``."""
        if self._done:
            raise RuntimeError("the episode is over (or never started): call reset() first")
        self._done = True
        return self._final(None)

    def _act(self, turn: Turn) -> tuple[str | None, list[str]]:
        """The environment's reply to a turn and the ids of the documents it shows."""
        if not turn.valid:
            return corrective_message(turn), []
        if turn.action == "search":
            hits = self._oracle() if self.search == "oracle" else self.retriever.search([turn.argument], self.topk)[0]
            for h in hits:
                self._seen[h.document.id] = h.document
            per_doc = self.obs_budget // max(len(hits), 1)
            clipped = [Hit(Document(h.document.id, h.document.title, _clip(h.document.text, per_doc)), h.score)
                       for h in hits]
            body = render_hits(clipped) if hits else "No results."
            return self._tool_response(body), [h.document.id for h in hits]
        if turn.action == "access":
            doc = self._lookup(turn.argument)
            if doc is None:
                return self._tool_response(f"No document with id or title {turn.argument!r}."), []
            return self._tool_response(render_hits([Hit(doc, 0.0)])), [doc.id]
        return None, []

    def _oracle(self) -> list[Hit]:
        """The oracle's search result: the gold document of the first hop, in question and hop order, that
        no reply has shown yet (hops whose document is not in the corpus are skipped); none once all were."""
        for record in self._records:
            for step in record.chain:
                if step.doc_id not in self._shown and step.doc_id in self._docs_by_id:
                    return [Hit(self._docs_by_id[step.doc_id], 1.0)]
        return []

    def _tool_response(self, body: str) -> str:
        """The reply to a tool call; documents and quoted arguments are neutralised (protocol rule 5), and
        lone surrogates (a retriever's JSON can carry them as escapes) replaced as in actions."""
        body = neutralize(_SURROGATE.sub(_REPLACEMENT, body))
        return f"<tool_response>\n{_clip(body, self.obs_budget)}\n</tool_response>"

    def _lookup(self, key: str) -> Document | None:
        """A document by id, else by title: documents this episode has seen first, then the corpus."""
        if key in self._seen or key in self._docs_by_id:
            return self._seen.get(key) or self._docs_by_id[key]
        title = key.lower().strip('"')
        seen = next((d for d in self._seen.values() if d.title.lower() == title), None)
        return seen or self._docs_by_title.get(title)

    def _after_turn(self) -> dict[str, Any] | None:
        """The strategy's work between two turns (``after_turn``), its model calls counted in the costs."""
        event = self.strategy.after_turn(self._history)
        if event is None:
            return None
        if not isinstance(event, ContextEvent):
            raise TypeError(f"context strategy {self.context!r}: after_turn returned {event!r}, not a ContextEvent "
                            "or None")
        read = _checked(event.read, self.context)
        tokens = count_tokens(read, self.tokenizer) if self.tokenizer is not None and read else 0
        chars, tokens = self._account(read, event.wrote, tokens)
        record = {"turn": len(self._turns), "kind": event.kind, "outcome": event.outcome, "detail": event.detail,
                  "chars": chars}
        if self.tokenizer is not None:
            record["tokens"] = tokens
        self._events.append(record)
        return record

    def _next_prompt(self) -> None:
        """Build the next observation with the strategy, check it, and count its tokens (``None`` without a
        tokenizer) once for both the limit and the costs. A prompt that is not a prefix of the next is
        rendered and counted whole: it is what the policy reads anyway. One that is (``strategy.prefix``,
        checked here) is never re-tokenised: its count is the last count plus each new message's own
        tokens after the system message and question. That is exact for a chat template that renders
        every message on its own (ChatML, the tiny policy's); for one that renders a message differently
        once others follow it (e.g. drops earlier turns' reasoning) it is an estimate that counts every
        message as first rendered, and for plain newline-joined text (no template) it can differ by a
        token where a message meets the next."""
        prompt, before = _checked(self.strategy.prompt(self._history), self.context), self._prompt
        grows = self.strategy.prefix and bool(before)
        if grows and prompt[: len(before)] != before:
            raise ValueError(f"context strategy {self.context!r} says prefix=True, but its prompt after turn "
                             f"{len(self._turns)} does not extend the one before")
        self._prompt = prompt
        if self.tokenizer is None:
            self._obs_tokens = None
        elif grows:
            head = prompt[:2]
            base = count_tokens(head, self.tokenizer)
            self._obs_tokens += sum(count_tokens(head + [m], self.tokenizer) - base for m in prompt[len(before):])
        else:
            self._obs_tokens = count_tokens(prompt, self.tokenizer)

    def _fits(self, observation: list[Message]) -> bool:
        """Whether ``observation`` fits the observation space's ``max_bytes`` (as UTF-8 JSON); most are
        cleared by a bound on their length, without encoding them."""
        limit = self.observation_space.max_bytes
        bound = sum(_MAX_JSON_BYTES_PER_CHAR * len(m["content"]) + _MAX_JSON_BYTES_PER_MESSAGE for m in observation)
        return bound <= limit or len(self.observation_space.to_bytes(observation)) <= limit

    def _overflows(self) -> bool:
        """Whether the observation is longer than the policy can read."""
        return self.max_context_tokens is not None and self._obs_tokens > self.max_context_tokens

    def _account(self, prompt: list[Message], text: str, prompt_tokens: int | None) -> tuple[int, int | None]:
        """Context cost of one model call, a policy turn or a strategy's (a summariser's): what it read
        (``prompt``, of ``prompt_tokens`` counted already) plus what it wrote. TT sums it over the calls,
        PT maxes it. Returns (characters, tokens)."""
        chars = sum(len(m["content"]) for m in prompt) + len(text)
        self._cost["total_chars"] += chars
        self._cost["peak_chars"] = max(self._cost["peak_chars"], chars)
        if self.tokenizer is None:
            return chars, None
        tokens = prompt_tokens + len(self.tokenizer.encode(text, add_special_tokens=False))
        self._cost["total_tokens"] += tokens
        self._cost["peak_tokens"] = max(self._cost["peak_tokens"], tokens)
        return chars, tokens

    def _final(self, answer: str | None, overflow: bool = False, too_big: bool = False) -> dict[str, Any]:
        report = check_trajectory(self._turns, require_search=self.require_search)
        result = score_answer(answer, self._target)
        ok = report.ok
        final = {
            "answer": answer,
            "score": result.score if ok else 0,
            "aligned_score": result.aligned if ok else 0,
            "em": result.em if ok else 0.0,
            "f1": result.f1 if ok else 0.0,
            "correct": [c and ok for c in result.correct],
            "format_ok": ok,
            "format_failed": list(report.failed),
            "n_turns": len(self._turns),
            "n_searches": self._n_searches,
            **self._cost,
            "observation_overflow": too_big,
            "context_events": list(self._events),
            **self._recall.episode(),
        }
        if self.tokenizer is None:
            del final["total_tokens"], final["peak_tokens"]
        if self.max_context_tokens is not None:
            final["context_overflow"] = overflow
        return final

    # ---- views ---------------------------------------------------------------------------
    def _view(self) -> list[Message]:
        return [dict(m) for m in self._prompt]

    @property
    def messages(self) -> list[Message]:
        """The full history so far (a copy), whatever the observation view."""
        return full_view(self._messages)

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        lines = []
        for m in self._messages:
            lines.append(f"--- {m['role']} ---")
            lines.append(m["content"])
        return "\n".join(lines) + "\n"


def _checked(messages: Any, strategy: str) -> list[Message]:
    """A strategy's messages, copied, after checking that they are chat messages: a wrong shape is an error
    naming the strategy here, not a template's failure later."""
    if not isinstance(messages, list) or not all(
            isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
            for m in messages):
        raise TypeError(f"context strategy {strategy!r} returned {messages!r:.200}, not a list of "
                        "{'role': str, 'content': str} messages")
    return [dict(m) for m in messages]
