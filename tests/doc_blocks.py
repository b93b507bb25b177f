"""The code the project's documents print, read from the documents themselves, so that tests run (or
at least parse and validate) exactly what a reader copies and a doc edit cannot drift from the code."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = ("README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")),
             "benchmarks/RESULTS.md")
_FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.S | re.M)
_TESTED_BY = re.compile(r"<!--\s*tested by\s+(\S+)\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    """One fenced code block: where it is (``file:line``, under which ``##`` heading) and its text."""

    file: str
    line: int
    heading: str
    lang: str
    text: str
    tested_by: str = ""  # "tests/test_x.py::test_y" from a ``<!-- tested by ... -->`` line just above the fence

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


def code_blocks(*files: str, lang: str | None = None) -> list[Block]:
    """The fenced blocks of ``files`` (paths relative to the repository; default every document), in
    order, of one language (``"bash"``, ``"python"``) or all."""
    blocks = []
    for name in files or DOCUMENTS:
        text = (ROOT / name).read_text()
        for m in _FENCE.finditer(text):
            before = text[: m.start()]
            headings = re.findall(r"^#{1,6} (.+)$", _FENCE.sub("", before), re.M)  # not a shell comment
            marker = _TESTED_BY.search(before.rstrip("\n"))
            block = Block(name, before.count("\n") + 1, headings[-1] if headings else "", m.group(1), m.group(2),
                          marker.group(1) if marker else "")
            if lang is None or block.lang == lang:
                blocks.append(block)
    return blocks


def shell_commands(block: Block) -> list[str]:
    """The commands of a shell block: continuation lines joined, comments and blank lines dropped,
    ``a && b`` split into ``a`` and ``b``."""
    joined = re.sub(r"\\\n\s*", " ", block.text)
    commands = []
    for line in joined.splitlines():
        line = line.split(" #", 1)[0].strip() if not line.lstrip().startswith("#") else ""
        commands += [part.strip() for part in line.split("&&") if part.strip()]
    return commands


def python_module_args(command: str) -> tuple[str, list[str]] | None:
    """``("pkg.mod", [args])`` for a ``python -m pkg.mod args`` command (any interpreter path), else None."""
    words = shlex.split(command)
    for i, word in enumerate(words[:-1]):
        if word == "-m" and Path(words[0]).name.startswith("python"):
            return words[i + 1], words[i + 2:]
    return None
