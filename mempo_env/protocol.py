"""The turn protocol and the trajectory-level format gate (spec sections 2 and 5).

An assistant turn is ``<mem>…</mem><think>…</think>`` followed by exactly one action:
``<search>query</search>``, ``<access>doc id or title</access>`` or ``<answer>…</answer>``.
Everything here is a plain function of text, so a learner or a benchmark can check any transcript
without the environment.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ACTIONS = ("search", "access", "answer")
_TAG = re.compile(r"<(/?)(mem|think|search|access|answer)>")
# What model text may not contain (rule 5), because a chat template or a tokenizer would read it as
# the environment's or the template's own: a special token of the <|…|> family (ChatML, Llama 3, Phi;
# DeepSeek writes its bars as ｜) and the environment's <tool_response> tag in any case or spacing.
_FORGED = re.compile(r"<[|｜][^<>|｜\s]*[|｜]>|<\s*(?:/\s*)?tool_response\b[^<>]*>", re.IGNORECASE)

RULES: dict[int, str] = {
    1: "every turn starts with exactly one <mem>…</mem> block",
    2: "exactly one <think>…</think> block, right after <mem>",
    3: "exactly one non-empty action (<search>, <access> or <answer>) right after <think>, nothing after it",
    4: "tags are balanced and not nested",
    5: "the model never writes a tool_response tag (in any case or spacing) or a special token (<|…|>) itself",
    6: "the last turn is an <answer>, and only the last",
    7: "one <mem> and one <think> block per assistant turn",
    8: "at least one <search> before the answer (an <access> alone does not count)",
}


@dataclass(frozen=True)
class Turn:
    """One parsed assistant turn. ``failed`` lists the per-turn rules (1-5) it breaks."""

    text: str
    mem: str | None
    think: str | None
    action: str | None  # one of ACTIONS, or None when no single action could be read
    argument: str | None
    failed: tuple[int, ...]
    n_mem: int
    n_think: int

    @property
    def valid(self) -> bool:
        return not self.failed


def parse_turn(text: str) -> Turn:
    """Parse one assistant response and check rules 1-5 on it. Never raises on any string."""
    failed: set[int] = set()
    blocks: list[tuple[str, str]] = []  # (tag, content) in order of appearance
    gaps: list[str] = []  # gaps[i] is the text before blocks[i]; gaps[-1] the text after the last
    open_tag, open_end, last_end = None, 0, 0
    if _FORGED.search(text):
        failed.add(5)
    for m in _TAG.finditer(text):
        closing, name = m.group(1) == "/", m.group(2)
        if not closing:
            if open_tag is not None:
                failed.add(4)  # nested
                continue
            gaps.append(text[last_end : m.start()])
            open_tag, open_end = name, m.end()
        elif name == open_tag:
            blocks.append((name, text[open_end : m.start()]))
            open_tag, last_end = None, m.end()
        else:
            failed.add(4)  # closes a tag that is not open
    if open_tag is not None:
        failed.add(4)  # left open
        gaps.pop()
    gaps.append(text[last_end:])

    names = [b[0] for b in blocks]
    n_mem, n_think = names.count("mem"), names.count("think")
    actions = [i for i, n in enumerate(names) if n in ACTIONS]
    blank = [not g.strip() for g in gaps]
    if n_mem != 1 or not names or names[0] != "mem" or not blank[0]:
        failed.add(1)
    think_at = names.index("think") if n_think else -1
    if n_think != 1 or think_at != n_mem or (think_at >= 0 and not blank[think_at]):
        failed.add(2)
    action = argument = None
    if len(actions) == 1:
        i = actions[0]
        action, argument = names[i], blocks[i][1].strip()
        if i != len(blocks) - 1 or i != think_at + 1 or not blank[i] or not blank[-1] or not argument:
            failed.add(3)
    else:
        failed.add(3)
    mem = blocks[names.index("mem")][1].strip() if n_mem else None
    think = blocks[think_at][1].strip() if n_think else None
    return Turn(text, mem, think, action, argument, tuple(sorted(failed)), n_mem, n_think)


def extract_answer(text: str) -> str | None:
    """The content of the last ``<answer>…</answer>`` in ``text`` (never anything else), stripped.

    Blocks are read left to right, each closed by the first ``</answer>`` after it, as a lazy regex
    would; plain ``find`` keeps that linear where a regex rescans the tail from every unclosed tag."""
    found, pos = None, 0
    while (start := text.find("<answer>", pos)) >= 0:
        end = text.find("</answer>", start + len("<answer>"))
        if end < 0:
            break
        found, pos = text[start + len("<answer>") : end], end + len("</answer>")
    return found.strip() if found is not None else None


def neutralize(text: str) -> str:
    """``text`` with every rule-5 forgery made inert (its ``<`` written ``&lt;``), so no chat template or
    tokenizer reads model text as a special token or as the environment's own tool response. The
    environment passes everything it echoes through here; a turn that needs it is invalid anyway."""
    return _FORGED.sub(lambda m: "&lt;" + m.group()[1:], text)


@dataclass(frozen=True)
class FormatReport:
    ok: bool
    failed: tuple[int, ...]  # every rule (1-8) broken somewhere in the trajectory
    per_turn: tuple[tuple[int, ...], ...]  # rules 1-5 broken by each turn

    def describe(self) -> list[str]:
        return [f"rule {r}: {RULES[r]}" for r in self.failed]


def check_trajectory(turns: list[str] | list[Turn], *, require_search: bool = True) -> FormatReport:
    """The trajectory-level gate: reward is 0 unless every rule holds for the assistant turns."""
    parsed = [t if isinstance(t, Turn) else parse_turn(t) for t in turns]
    failed = {r for t in parsed for r in t.failed}
    answers = [i for i, t in enumerate(parsed) if t.action == "answer" and t.valid]
    if not parsed or answers != [len(parsed) - 1]:
        failed.add(6)
    if sum(t.n_mem for t in parsed) != len(parsed) or sum(t.n_think for t in parsed) != len(parsed):
        failed.add(7)
    if require_search and not any(t.action == "search" and t.valid for t in parsed):
        failed.add(8)
    per_turn = tuple(t.failed for t in parsed)
    return FormatReport(not failed, tuple(sorted(failed)), per_turn)


def corrective_message(turn: Turn) -> str:
    """The short observation an invalid turn gets back: what was wrong and the expected shape."""
    problems = "; ".join(RULES[r] for r in turn.failed)
    return (
        f"Invalid turn ({problems}). Write <mem>…</mem><think>…</think> followed by exactly one of "
        "<search>query</search>, <access>document title</access> or <answer>…</answer>."
    )
