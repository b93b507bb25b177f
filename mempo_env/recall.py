"""Memory content as a metric: of the gold evidence the episode has found, how much a turn's memory keeps.

MemPO's memory reward, P(gold | memory) - P(gold | full history), is a proxy for what a ``<mem>``
holds; this module measures the content itself, so the proxy can be checked against it.

- **Evidence**: one item per hop of each objective's gold chain (``QARecord.chain``): the hop's
  answer (the bridge entity the hop reveals; in the generated task the next entity's name, the
  question's answer at the last hop), else the title of its gold document (HotpotQA's bridge hops,
  which name no entity; HippoRAG's title-only chains). A question without a chain has no evidence.
- **Found**: a hop is found by the first tool reply that shows its gold document (by id, among the
  reply's documents) and holds its evidence text, so evidence a clipped document lost, or an answer
  the paragraph does not state verbatim (HotpotQA's "yes"/"no"), is never counted as found. A gold
  document shown by a search aimed elsewhere counts too: the full history holds it, which is the
  comparison the memory reward makes.
- **Kept**: turn t's memory keeps a found item when the item's text occurs in it, both under the
  project's answer normalisation (``reward.normalize_answer``: lower case, no punctuation, no
  articles, squashed spaces), as whole words; a markup tag (``</mem>``) or the answer separator ``;``
  separates words first, as a space does (the normalisation deletes punctuation, which would glue
  "Bevor</mem>" into one word). So a case change or a dropped full stop still counts,
  "Tara Quzen" is not kept by "Tara Quzenia", and a paraphrase ("the mayor is the Quzen woman")
  does not count: exact but normalised, as the answer is scored.

At turn t the found items are those the replies of turns 1..t-1 showed: what the policy could have
read before writing turn t's ``<mem>``. Two memories are measured: the turn's ``<mem>`` (every
strategy's turns carry one, format rule 1), and the **context**, the prompt the turn was generated
from, which is what a strategy itself carries of the past (the whole history for ``full``, hence
recall 1 there by construction: the reference; the previous turn and the newest reply for
``memory``; the summary and the turns since for ``summary``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mempo_env.reward import normalize_answer
from mempo_env.types import QARecord
from mempo_env.views import Message

_SEPARATORS = re.compile(r"<[^<>]*>|;")


def words(text: str) -> str:
    """``text`` normalised for matching: tags and ``;`` made spaces, then ``reward.normalize_answer``."""
    return normalize_answer(_SEPARATORS.sub(" ", text))


@dataclass(frozen=True)
class Evidence:
    """One hop's gold evidence: objective (0-based, question order), hop (0-based), its gold document
    and its text, normalised."""

    objective: int
    hop: int
    doc_id: str
    text: str


def gold_evidence(records: Sequence[QARecord]) -> list[Evidence]:
    """The evidence of every hop of every objective, in order; a hop whose text normalises to nothing
    (a title of punctuation and articles only) cannot be matched and is left out."""
    items = []
    for j, record in enumerate(records):
        for h, step in enumerate(record.chain):
            text = words(step.answer or step.title)
            if text:
                items.append(Evidence(j, h, step.doc_id, text))
    return items


def holds(normalised: str, evidence: str) -> bool:
    """Whether normalised ``evidence`` occurs in ``normalised`` text as whole words."""
    return f" {evidence} " in f" {normalised} "


class MemoryRecall:
    """One episode's tracker: ``measure`` a turn's memory against what was found before it, then
    ``observe`` the turn's reply; ``episode`` sums the turns up."""

    def __init__(self, records: Sequence[QARecord]):
        self.evidence = gold_evidence(records)
        self.found: list[Evidence] = []
        self.turns: list[dict[str, int]] = []

    def measure(self, mem: str | None, prompt: Sequence[Message]) -> dict[str, Any]:
        """The turn's counts and recalls: ``memory_found`` (items found before this turn),
        ``memory_kept`` (of those, in the turn's ``<mem>``; 0 without one), ``context_kept`` (in the
        ``prompt`` the turn was generated from), and ``memory_recall`` / ``context_recall``, kept /
        found (``None`` while nothing is found)."""
        memory, context = words(mem or ""), words("\n".join(m["content"] for m in prompt))
        found = len(self.found)
        kept = sum(holds(memory, e.text) for e in self.found)
        in_context = sum(holds(context, e.text) for e in self.found)
        self.turns.append({"found": found, "kept": kept, "context_kept": in_context})
        return {"memory_found": found, "memory_kept": kept, "context_kept": in_context,
                "memory_recall": kept / found if found else None,
                "context_recall": in_context / found if found else None}

    def observe(self, doc_ids: Sequence[str], reply: str | None) -> None:
        """Count as found every item not found yet whose gold document is among ``doc_ids`` and whose
        text ``reply`` (the environment's answer to the turn) holds."""
        if not doc_ids or reply is None:
            return
        shown, text = set(doc_ids), words(reply)
        new = [e for e in self.evidence if e.doc_id in shown and e not in self.found and holds(text, e.text)]
        self.found += new

    def episode(self) -> dict[str, Any]:
        """The episode's aggregate: ``episode_memory_recall`` and ``episode_context_recall``, the mean of
        the per-turn recalls over the turns that had something found (``memory_recall_turns`` of them;
        ``None`` where no turn had), ``evidence_items`` (the episode's hops with evidence),
        ``evidence_found`` (of them, those its replies showed, the last one's included) and
        ``memory_per_turn`` (each turn's ``found``, ``kept`` and ``context_kept``)."""
        counted = [t for t in self.turns if t["found"]]

        def mean(key: str) -> float | None:
            return sum(t[key] / t["found"] for t in counted) / len(counted) if counted else None

        return {"episode_memory_recall": mean("kept"), "episode_context_recall": mean("context_kept"),
                "memory_recall_turns": len(counted), "evidence_items": len(self.evidence),
                "evidence_found": len(self.found),
                "memory_per_turn": [dict(t) for t in self.turns]}
