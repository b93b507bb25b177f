"""The ``summary`` context strategy: ReSum's compression (Wu et al. 2025, arXiv 2509.13313).

When the next prompt would pass ``budget`` characters, a summariser rewrites the turns since the
last summary, together with that summary, into a new one, and the episode continues from the
question + the summary (the question message carries it, so chat roles still alternate) + the last
``keep`` turns verbatim (ReSum keeps none). The budget counts characters, not tokens, so a strategy
compresses at the same points whatever tokenizer measures the costs.

The summariser is passed in: a Python callable reading a ``SummaryRequest`` or an agent (anything with
``act``), which reads the chat prompt ``SummaryRequest.messages`` (ReSum's instruction, the questions, the
previous summary, the turns). The environment loads no model: the agents layer builds one from an agent
spec (``agents.summariser``: ``summary:8000:hf:DIR``). The default, ``"extractive"``, is no model: for
every search or access it keeps the three retrieved sentences that best match the query and the questions
(``ExtractiveSummariser``). Every call is
counted in the episode's cost as if a model read ``SummaryRequest.messages`` and wrote the summary,
so summarisers compare on one scale.

A summariser that raises, outlives ``timeout``, returns no text, returns an empty summary or one
that would not shorten the prompt leaves the history as it was; the outcome is recorded in ``info``
(``context_event``, and ``context_events`` at the end) and the episode goes on. A summary is
neutralised like every text the environment shows (``protocol.neutralize``), and the outcome says so.
"""

from __future__ import annotations

import inspect
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mempo_env.context.base import ContextEvent, ContextStrategy, History
from mempo_env.protocol import neutralize, parse_turn
from mempo_env.reward import normalize_answer
from mempo_env.views import Message

SUMMARIES = {"summary": 0, "summary+keep1": 1}
"""The built-in summary strategies' names and the turns each keeps verbatim after its summary."""
BUDGET = 8000
"""Default budget in characters: about 2,200 tokens of the tiny policy's tokenizer, half its window."""

INSTRUCTION = (
    "You summarise the progress of a search agent. From the conversation below, keep only the facts "
    "that the retrieved documents state and that help answer the question(s), each with the title of "
    "its document. Do not guess or infer. Write the summary inside <summary>...</summary>.")
NOTE = "Summary of your earlier turns, which are no longer shown:"

_SUMMARY = re.compile(r"<summary>(.*?)(?:</summary>|$)", re.S)
_DOC = re.compile(r"^Doc \d+\(Title: (.*?)\) ", re.M)
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n")


@dataclass(frozen=True)
class SummaryRequest:
    """What a summariser is given: the episode's questions, the previous summary and the turns it replaces."""

    questions: list[str]
    previous: str | None
    turns: list[Message]

    @property
    def messages(self) -> list[Message]:
        """The chat prompt a model summariser reads (ReSum's shape)."""
        parts = ["\n".join(f"Question {i}: {q}" for i, q in enumerate(self.questions, 1))]
        if self.previous:
            parts.append(f"Previous summary:\n{self.previous}")
        parts.append("Conversation:\n" + "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in self.turns))
        return [{"role": "system", "content": INSTRUCTION}, {"role": "user", "content": "\n\n".join(parts)}]


Summariser = Callable[[SummaryRequest], Any]


def _words(text: str) -> set[str]:
    return set(normalize_answer(text).split())


class ExtractiveSummariser:
    """Deterministic and model-free: for each valid search or access among the turns, the ``per_call``
    retrieved sentences ranked first by (their document's title is the query, words of the query in
    the sentence, words of the closest question), each as ``Title: sentence``, after the previous
    summary's lines, no line twice. It keeps what the documents said, never what the policy wrote,
    and, unlike a language model, cannot combine or rephrase facts."""

    name = "extractive"

    def __init__(self, per_call: int = 3):
        self.per_call = per_call

    def __call__(self, request: SummaryRequest) -> str:
        lines = request.previous.splitlines() if request.previous else []
        questions = [_words(q) for q in request.questions]
        turns, replies = request.turns, request.turns[1:] + [{"role": "assistant", "content": ""}]
        for message, reply in zip(turns, replies):
            if message["role"] != "assistant" or reply["role"] == "assistant":
                continue  # not a response, or one without a reply
            turn = parse_turn(message["content"])
            if turn.valid and turn.action in ("search", "access"):
                lines += [line for line in self._best(turn.argument, questions, reply["content"]) if line not in lines]
        return "\n".join(lines)

    def _best(self, query: str, questions: list[set[str]], reply: str) -> list[str]:
        words = _words(query)
        body = reply.removeprefix("<tool_response>\n").removesuffix("\n</tool_response>")
        parts = _DOC.split(body)  # [before, title 1, text 1, title 2, text 2, ...]
        ranked = []
        for title, text in zip(parts[1::2], parts[2::2]):
            named = _words(title) == words
            for sentence in filter(None, (s.strip() for s in _SENTENCE.split(text))):
                found = _words(sentence)
                score = (len(words & found), max((len(q & found) for q in questions), default=0))
                if any(score):
                    ranked.append(((named, *score), f"{title}: {sentence}"))
        ranked.sort(key=lambda r: r[0], reverse=True)  # stable: ties keep the retrieval order
        return [line for _, line in ranked[: self.per_call]]


class _TimedOut(Exception):
    pass


def _from_agent(agent: Any) -> Summariser:
    return lambda request: agent.act(request.messages, {})


def as_summariser(summariser: str | Any) -> Summariser:
    """``"extractive"``, an ``Agent`` (anything with ``act``) or a callable taking one ``SummaryRequest``.
    Any other string is an agent spec, a model the environment does not load: an error saying where to build it."""
    if isinstance(summariser, str) and summariser == "extractive":
        return ExtractiveSummariser()
    if isinstance(summariser, str):
        raise ValueError(f"summariser {summariser!r}: the environment knows 'extractive'; a model summariser (an "
                         f"agent spec of agents.make_agent) is built by the agents layer: "
                         f"agents.summariser.make_summariser({summariser!r}), or "
                         f"agents.summariser.make_strategy('summary:CHARS:{summariser}') for a strategy name")
    if callable(getattr(summariser, "act", None)):
        return _from_agent(summariser)
    if not callable(summariser):
        raise TypeError(f"a summariser is 'extractive', an Agent or a callable, not {summariser!r}")
    try:
        inspect.signature(summariser).bind(None)
    except TypeError:
        raise ValueError(f"summariser {summariser!r} must take one argument (a SummaryRequest)") from None
    except ValueError:  # a builtin without a signature: called as it is
        pass
    return summariser


class SummaryStrategy(ContextStrategy):
    """See the module docstring. ``timeout``: seconds a summariser call may take (``None``: no limit);
    a call that outlives it is abandoned (it runs on in a background thread) and the history kept."""

    prefix = False

    def __init__(self, budget: int = BUDGET, summariser: str | Any = "extractive", *, keep: int = 0,
                 timeout: float | None = None, name: str | None = None):
        for what, value, least in (("budget", budget, 1), ("keep", keep, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValueError(f"summary: {what} must be an integer >= {least}, got {value!r}")
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                    or not timeout > 0):
            raise ValueError(f"summary: timeout must be a positive number of seconds or None, got {timeout!r}")
        self.budget, self.keep, self.timeout = budget, keep, timeout
        self.summariser = as_summariser(summariser)
        self.name = name or self._name(summariser)

    @classmethod
    def from_spec(cls, arg: str | None, *, keep: int = 0, name: str = "summary",
                  build: Callable[[str], Summariser] | None = None) -> SummaryStrategy:
        """``NAME``, ``NAME:CHARS`` or ``NAME:CHARS:SUMMARISER`` (``extractive``, or a spec that ``build``
        turns into a summariser; an agent spec may hold colons itself: ``summary:8000:hf:runs/smol``),
        keeping the last ``keep`` turns; ``name``: the name the strategy is registered under."""
        if arg is None:
            return cls(keep=keep, name=None if name == "summary" and not keep else name)
        budget, _, summariser = arg.partition(":")
        if not budget.isdigit():
            raise ValueError(f"{name}:CHARS[:SUMMARISER] needs CHARS, a positive integer, got '{name}:{arg}'")
        summariser = summariser or "extractive"
        if build is not None and summariser != "extractive":
            summariser = build(summariser)
        return cls(int(budget), summariser, keep=keep, name=f"{name}:{arg}")

    def _name(self, summariser: Any) -> str:
        if (self.budget, summariser, self.keep) == (BUDGET, "extractive", 0):
            return "summary"
        label = summariser if isinstance(summariser, str) else getattr(summariser, "name", type(summariser).__name__)
        return f"summary:{self.budget}:{label}" + (f"+keep{self.keep}" if self.keep else "")

    def prompt(self, history: History) -> list[Message]:
        head = [dict(m) for m in history.head]
        summary = history.memo.get("summary")
        if summary:
            head[-1]["content"] += f"\n\n{NOTE}\n<summary>\n{summary}\n</summary>"
        return head + [dict(m) for m in history.messages[history.memo.get("since", len(head)):]]

    def after_turn(self, history: History) -> ContextEvent | None:
        before = self.prompt(history)
        if _chars(before) <= self.budget:
            return None
        since = history.memo.get("since", len(history.head))
        starts = [i for i in range(since, len(history.messages)) if history.messages[i]["role"] == "assistant"]
        if len(starts) <= self.keep:
            return None  # every turn since the last summary is one to keep verbatim
        cut = starts[len(starts) - self.keep] if self.keep else len(history.messages)
        request = SummaryRequest(list(history.questions), history.memo.get("summary"), history.messages[since:cut])
        outcome, detail, wrote, summary = self._summarise(request)
        if summary is not None:
            after = self.prompt(History(history.questions, history.messages, {"summary": summary, "since": cut}))
            if _chars(after) < _chars(before):
                history.memo.update(summary=summary, since=cut)
            else:
                outcome, detail = "too long", f"{_chars(after)} characters of prompt with it, {_chars(before)} without"
        return ContextEvent("summary", outcome, detail, request.messages, wrote)

    def _summarise(self, request: SummaryRequest) -> tuple[str, str, str, str | None]:
        """(outcome, detail, the text the summariser wrote, the summary to use or None)."""
        try:
            out = self._call(request)
        except _TimedOut:
            return "timed out", f"no summary within {self.timeout} s", "", None
        except Exception as e:  # a summariser's failure is recorded, not raised: the episode goes on
            return "failed", f"{type(e).__name__}: {e}", "", None
        if not isinstance(out, str):
            return "failed", f"the summariser returned {type(out).__name__}, not text", "", None
        found = _SUMMARY.search(out)
        summary = (found.group(1) if found else out).strip()
        if not summary:
            return "empty", "", out, None
        safe = neutralize(summary)
        if safe != summary:
            return "neutralised", "special-token or tool-tag look-alikes made inert", out, safe
        return "summarised", "", out, summary

    def _call(self, request: SummaryRequest) -> Any:
        if self.timeout is None:
            return self.summariser(request)
        box: dict[str, Any] = {}

        def run() -> None:
            try:
                box["out"] = self.summariser(request)
            except BaseException as e:  # handed to the caller's thread
                box["error"] = e

        thread = threading.Thread(target=run, daemon=True, name="summariser")
        thread.start()
        thread.join(self.timeout)
        if thread.is_alive():
            raise _TimedOut
        if "error" in box:
            raise box["error"]
        return box["out"]


def _chars(messages: list[Message]) -> int:
    return sum(len(m["content"]) for m in messages)
