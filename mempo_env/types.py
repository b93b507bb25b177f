"""Plain records shared by tasks, retrievers, the environment and agents."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Document:
    """One retrievable passage. ``id`` is unique within a corpus."""

    id: str
    title: str
    text: str

    @property
    def contents(self) -> str:
        """The Search-R1 corpus rendering: ``"Title"\\ntext``."""
        return f'"{self.title}"\n{self.text}'

    @classmethod
    def from_contents(cls, id: str, contents: str) -> Document:
        """Parse a Search-R1 ``contents`` field (``"Title"\\ntext``; a missing title is allowed)."""
        head, sep, text = contents.partition("\n")
        if not sep:
            return cls(id=str(id), title="", text=contents)
        return cls(id=str(id), title=head.strip().strip('"'), text=text)


@dataclass(frozen=True)
class OracleStep:
    """One hop of a gold reasoning chain: what to look up and what it yields."""

    query: str  # a query that should retrieve the gold document
    doc_id: str  # the gold document of this hop
    title: str
    answer: str | None = None  # the bridge entity (or final answer) this hop reveals


@dataclass
class QARecord:
    """One question with its aliases (``answers[0]`` is canonical) and, when known, its gold chain."""

    id: str
    question: str
    answers: list[str]
    chain: list[OracleStep] = field(default_factory=list)
    source: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.question or not isinstance(self.question, str):
            raise ValueError(f"question {self.id!r}: empty or non-string question")
        if not self.answers or not all(isinstance(a, str) for a in self.answers):
            raise ValueError(f"question {self.id!r}: answers must be a non-empty list of strings")


@dataclass
class QATask:
    """A question set plus the corpus its search tool retrieves from."""

    name: str
    questions: list[QARecord]
    corpus: list[Document]

    def __post_init__(self) -> None:
        if not self.questions:
            raise ValueError(f"task {self.name!r} has no questions")
        ids = [d.id for d in self.corpus]
        if len(set(ids)) != len(ids):
            raise ValueError(f"task {self.name!r}: corpus document ids are not unique")
