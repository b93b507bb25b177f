"""Named, versioned prompt templates (spec section 4).

``train-v1`` is the minimal training prompt: the format is learned from warm-up and reward, not
from instructions. ``eval-v1`` spells the protocol out for models that were never trained on it.
Changing a template's wording means adding a new version, so logged runs stay comparable.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PromptTemplate:
    name: str
    system: str

    def user(self, questions: list[str]) -> str:
        """The user message: one question as is, several numbered (MEM1-style multi-objective)."""
        if len(questions) == 1:
            return questions[0]
        lines = [f"Answer the following {len(questions)} questions, in order, separated by ';'."]
        lines += [f"Question {i}: {q}" for i, q in enumerate(questions, 1)]
        return "\n".join(lines)


PROMPTS: dict[str, PromptTemplate] = {
    "train-v1": PromptTemplate("train-v1", "You are a helpful assistant."),
    "eval-v1": PromptTemplate(
        "eval-v1",
        "You answer questions by searching a document collection, one step per turn.\n"
        "Every turn, write first <mem>...</mem>: a concise rewrite of everything you have learned so "
        "far that matters for the question(s). Only your previous turn and the latest search result "
        "stay visible, so anything you do not keep in <mem> is lost.\n"
        "Then reason in <think>...</think>.\n"
        "Then write exactly one of:\n"
        "<search>one query</search> to search; results come back in <tool_response>;\n"
        "<access>a document title</access> to read one whole document;\n"
        "<answer>final answer</answer> with short phrases only, no explanation; for several "
        "questions give every answer in one <answer>, in order, separated by ';'.\n"
        "Search one query at a time and at least once per question before answering.",
    ),
}
ALIASES = {"train": "train-v1", "eval": "eval-v1"}


def get_prompt(name: str) -> PromptTemplate:
    key = ALIASES.get(name, name)
    if key not in PROMPTS:
        raise ValueError(f"unknown prompt {name!r}; known: {sorted(PROMPTS) + sorted(ALIASES)}")
    return PROMPTS[key]
