"""Scripted policies: an oracle (upper bound and warm-up data source), a weak baseline, random.

The oracle and the baseline are stateless and read their progress back from their own previous
``<mem>``: under the memory-forcing view that block and the newest tool response are all that
survive, so these agents show the protocol working as intended.
"""

from __future__ import annotations

import re
import zlib
from typing import Any

import numpy as np

from agents.base import Agent, Messages
from mempo_env.protocol import parse_turn
from mempo_env.reward import normalize_answer

_FACT = re.compile(r"^Q(\d+)\.(\d+): ")
_DOC_PREFIX = re.compile(r"^(?:<tool_response>|</tool_response>|Doc \d+\(Title: .*?\) )", re.MULTILINE)
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n")
_SPAN = re.compile(r"[A-Z0-9][\w'-]*(?: (?:of |the |de )?[A-Z0-9][\w'-]*)*")


ANSWERING = "Every hop is resolved; answering."
"""The oracle's <think> before its answer (the memory reward scores answers after it, as the policy
that learned from the oracle writes them)."""


def turn(mem: str, think: str, action: str, argument: str) -> str:
    """One well-formed assistant turn. The argument follows its tag after a space: BPE gives "Veyu"
    and " Veyu" different ids, and everywhere else (question, documents, memory) a name follows a
    space, so this keeps each name one token sequence throughout the conversation."""
    return f"<mem>{mem}</mem>\n<think>{think}</think>\n<{action}> {argument}</{action}>"


def previous_turn(observation: Messages) -> tuple[str, str | None, str | None, str]:
    """(memory, last action, its argument, the environment's reply) of the last assistant turn."""
    last = max((i for i, m in enumerate(observation) if m["role"] == "assistant"), default=None)
    if last is None:
        return "", None, None, ""
    parsed = parse_turn(observation[last]["content"])
    reply = observation[last + 1]["content"] if last + 1 < len(observation) else ""
    return parsed.mem or "", parsed.action, parsed.argument, reply


class OracleAgent(Agent):
    """Follows each question's gold chain with real tool calls: for every hop it searches the hop's
    query and checks that the gold document came back (its title is shown); if it did not,
    it opens the document with ``<access>``; if that fails too, the hop is recorded as missing and
    that question is answered "unknown". Questions without a chain get one search of the question.
    Its ``<mem>`` lists every hop resolved so far, one line each: the retrieved sentence that states
    the hop's answer. With ``keep_evidence=False`` it is a sloppy demonstrator: its notes only name
    the documents found ("found TITLE"), and it answers "unknown" to every question but the last,
    whose document is the one still on screen.
    """

    name = "oracle"

    def __init__(self, keep_evidence: bool = True):
        self.keep_evidence = keep_evidence

    def act(self, observation: Messages, info: dict[str, Any]) -> str:
        objectives = info["objectives"]
        mem, action, argument, reply = previous_turn(observation)
        facts = {(int(m[1]), int(m[2])): m for m in map(_FACT.match, mem.splitlines()) if m}
        lines = [m.string for m in facts.values()]
        pending = self._next_step(objectives, facts)
        tried = pending is not None and action in ("search", "access")
        if tried and argument == self._query(objectives, *pending, action):
            step = self._step(objectives, *pending)
            if self._found(step, reply):
                note = self._evidence(step, reply) if self.keep_evidence else f"found {step['title']}"
                lines.append(f"Q{pending[0]}.{pending[1]}: {note}")
            elif action == "search":
                return turn("\n".join(lines), f"The search missed {step['title']}; open it directly.",
                            "access", self._query(objectives, *pending, "access"))
            else:
                lines.append(f"Q{pending[0]}.{pending[1]}: missing {step['title']}")
            facts[pending] = None
            pending = self._next_step(objectives, facts)
        memory = "\n".join(lines)
        if pending is not None:
            step = self._step(objectives, *pending)
            return turn(memory, f"For question {pending[0]} I need {step['title']}.",
                        "search", self._query(objectives, *pending, "search"))
        answers = []
        for j, objective in enumerate(objectives, 1):
            missing = any(line.startswith(f"Q{j}.") and " missing " in line for line in lines)
            forgotten = not self.keep_evidence and j < len(objectives)  # only the last answer is on screen
            answers.append("unknown" if missing or forgotten else objective["answers"][0])
        return turn(memory, ANSWERING, "answer", "; ".join(answers))

    @staticmethod
    def _steps(objective: dict[str, Any]) -> list[dict[str, Any]]:
        chain = objective["chain"]
        return chain or [{"query": objective["question"], "title": objective["question"], "answer": None,
                          "doc_id": None}]

    def _next_step(self, objectives: list[dict], facts: dict) -> tuple[int, int] | None:
        for j, objective in enumerate(objectives, 1):
            for h in range(1, len(self._steps(objective)) + 1):
                if (j, h) not in facts:
                    return j, h
        return None

    def _step(self, objectives: list[dict], j: int, h: int) -> dict[str, Any]:
        return self._steps(objectives[j - 1])[h - 1]

    def _query(self, objectives: list[dict], j: int, h: int, action: str) -> str:
        step = self._step(objectives, j, h)
        return step["query"] if action == "search" else (step["doc_id"] or step["title"])

    @staticmethod
    def _evidence(step: dict[str, Any], reply: str) -> str:
        """The gold document's sentence that states the hop's answer, quoted as it was retrieved
        (else "found TITLE -> ANSWER"). A quote is what a language model copies most easily: once
        it has started the right sentence, the rest, answer included, is a copy."""
        plain = f"found {step['title']}" + (f" -> {step['answer']}" if step.get("answer") else "")
        doc = reply.partition(f"(Title: {step['title']}) ")[2].partition("\nDoc ")[0]
        answer = re.compile(rf"(?<!\w){re.escape(step['answer'])}(?!\w)") if step.get("answer") else None
        for sentence in _SENTENCE.split(doc.partition("\n</tool_response>")[0]) if answer else ():
            if answer.search(sentence):
                return sentence.strip()
        return plain

    @staticmethod
    def _found(step: dict[str, Any], reply: str) -> bool:
        if step["doc_id"] is None:  # chain-less question: any result counts
            return "(Title: " in reply
        return f"(Title: {step['title']}) " in reply


def best_span(question: str, reply: str) -> str:
    """The capitalised span, absent from the question, of the retrieved sentence that shares the
    most words with the question ("unknown" if there is none)."""
    asked = normalize_answer(question)
    words = set(asked.split())
    best, best_overlap = "unknown", -1
    for sentence in _SENTENCE.split(_DOC_PREFIX.sub("", reply)):
        overlap = len(words & set(normalize_answer(sentence).split()))
        if overlap <= best_overlap:
            continue
        spans = [s for s in _SPAN.findall(sentence) if normalize_answer(s) not in asked]
        if spans:
            best, best_overlap = spans[0], overlap
    return best


class WeakAgent(Agent):
    """A one-shot retrieval baseline: searches each question once and answers with ``best_span``
    of the results. It can answer single-hop questions and has no way to chain hops."""

    name = "weak"

    def act(self, observation: Messages, info: dict[str, Any]) -> str:
        objectives = info["objectives"]
        mem, action, _, reply = previous_turn(observation)
        lines = mem.splitlines() if mem else []
        if action == "search":
            lines.append(f"Q{len(lines) + 1}: {best_span(objectives[len(lines)]['question'], reply)}")
        if len(lines) < len(objectives):
            return turn("\n".join(lines), "Search the question as asked.", "search",
                        objectives[len(lines)]["question"])
        answers = [line.split(": ", 1)[1] for line in lines]
        return turn("\n".join(lines), "Answer with the top titles.", "answer", "; ".join(answers))


class RandomAgent(Agent):
    """Random protocol fragments and words from the observation: the floor, and a fuzzing policy.
    Its randomness is a function of (seed, observation), so resumed runs repeat themselves."""

    name = "random"

    def __init__(self, seed: int = 0):
        self.seed = seed

    def act(self, observation: Messages, info: dict[str, Any]) -> str:
        text = " ".join(m["content"] for m in observation)
        rng = np.random.default_rng([self.seed, zlib.crc32(text.encode())])
        words = text.split() or ["x"]
        pick = lambda n: " ".join(rng.choice(words, size=n))  # noqa: E731
        action = rng.choice(["search", "search", "access", "answer", "invalid"])
        if action == "invalid":
            return pick(5)
        return turn(pick(3), pick(4), str(action), pick(int(rng.integers(1, 4))))
