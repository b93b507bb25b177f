"""What the held-out memories hold, per episode: their length and how much of them is duplication (issue 51,
item 5: the hacks the field has seen are memories that copy the question or the tool response verbatim, and
memories that grow without bound; a memory reward that pays for what the memory holds invites both).

Measured from an episode's transcript when its record is read (``with_memory``) and kept as fields of the
record by ``archive``, which drops the transcripts: a restored seed still has them."""

from __future__ import annotations

from typing import Any

from mempo_env.protocol import parse_turn
from mempo_env.recall import words

# The fields ``with_memory`` adds to an episode record, and what each means (the report's columns).
MEMORY = {"memory_chars": "mean characters of the episode's <mem> blocks (stripped)",
          "memory_copied": "share of its <mem> blocks that copy a question of the episode or the tool response "
                           "the turn read (algorithms.memory_reward.is_copy)",
          "memory_repeated": "share of its <mem> lines that repeat an earlier line of the same <mem> (after the "
                             "recall's normalisation)"}


def memory_measures(trajectory: list[dict[str, str]], questions: list[str]) -> dict[str, float | None]:
    """``MEMORY`` of one episode from its transcript (the full history); None where it wrote no ``<mem>``
    (or, for ``memory_repeated``, no non-empty line)."""
    from algorithms.memory_reward import is_copy  # torch comes with it: only to read transcripts

    chars, copies, lines, repeats = [], 0, 0, 0
    for i, message in enumerate(trajectory):
        mem = parse_turn(message["content"]).mem if message["role"] == "assistant" else None
        if mem is None:
            continue
        before = trajectory[i - 1] if i else {"role": "", "content": ""}
        reply = [before["content"]] if before["role"] == "user" and before["content"].startswith(
            "<tool_response>") else []
        chars.append(len(mem))
        copies += is_copy(mem, [*questions, *reply])
        seen: set[str] = set()
        for line in filter(None, (words(x) for x in mem.splitlines())):
            lines, repeats = lines + 1, repeats + (line in seen)
            seen.add(line)
    return {"memory_chars": sum(chars) / len(chars) if chars else None,
            "memory_copied": copies / len(chars) if chars else None,
            "memory_repeated": repeats / lines if lines else None}


def with_memory(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` with ``MEMORY`` measured from its transcript; one without a transcript (archived) keeps
    the fields it has (none in an archive made before they existed: the report shows "–")."""
    if "trajectory" not in record or all(k in record for k in MEMORY):
        return record
    return {**record, **memory_measures(record["trajectory"], record.get("questions", []))}
