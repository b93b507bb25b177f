"""The code the project's documents print, read from the documents themselves, so that tests run (or
at least parse and validate) exactly what a reader copies and a doc edit cannot drift from the code."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# README.md, docs/ (docs/experiments/ included: each experiment's record) and the results.
DOCUMENTS = ("README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md")),
             "benchmarks/RESULTS.md")
# A fence at the start of a line or indented (a block inside a list item); it closes at the same indent.
_FENCE = re.compile(r"^( *)```(\w*)[^\n]*\n(.*?)^\1```", re.S | re.M)
_TESTED_BY = re.compile(r"<!--\s*tested by\s+(\S+)\s*-->\s*$")
# An inline code span of prose (not inside a fence) that is a `python -m MODULE ...` command, maybe
# after environment variables (`VAR=1 python -m ...`); it may wrap over lines.
_INLINE = re.compile(r"(?<!`)`([^`]+)`(?!`)")
_PYTHON_M = re.compile(r"(?:[A-Z_][A-Z0-9_]*=\S*\s+)*(?:\S*/)?python3?\s+-m\s+\S")


@dataclass(frozen=True)
class Block:
    """One fenced code block (or, ``lang="inline"``, one inline ``python -m`` command of prose): where it
    is (``file:line``, under which heading) and its text (dedented, for a block inside a list item)."""

    file: str
    line: int
    heading: str
    lang: str
    text: str
    tested_by: str = ""  # "tests/test_x.py::test_y" from a ``<!-- tested by ... -->`` line just above the fence

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


def _headings(before: str) -> list[str]:
    return re.findall(r"^#{1,6} (.+)$", _FENCE.sub("", before), re.M)  # not a shell comment in a block


def code_blocks(*files: str, lang: str | None = None) -> list[Block]:
    """The fenced blocks of ``files`` (paths relative to the repository; default every document), in
    order, of one language (``"bash"``, ``"python"``) or all."""
    blocks = []
    for name in files or DOCUMENTS:
        text = (ROOT / name).read_text()
        for m in _FENCE.finditer(text):
            before = text[: m.start()]
            indent = m.group(1)
            body = re.sub(rf"^{indent}", "", m.group(3), flags=re.M) if indent else m.group(3)
            headings = _headings(before)
            marker = _TESTED_BY.search(before.rstrip("\n"))
            block = Block(name, before.count("\n") + 1, headings[-1] if headings else "", m.group(2), body,
                          marker.group(1) if marker else "")
            if lang is None or block.lang == lang:
                blocks.append(block)
    return blocks


def inline_commands(*files: str) -> list[Block]:
    """The inline ``python -m ...`` commands of the prose of ``files`` (default every document), each a
    one-line ``Block`` of language ``"inline"`` (a span wrapped over lines is joined)."""
    commands = []
    for name in files or DOCUMENTS:
        text = (ROOT / name).read_text()
        prose = _FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)  # fences blanked, lines kept
        for m in _INLINE.finditer(prose):
            code = " ".join(m.group(1).split())
            if _PYTHON_M.match(code):
                headings = _headings(text[: m.start()])
                commands.append(Block(name, prose[: m.start()].count("\n") + 1, headings[-1] if headings else "",
                                      "inline", code))
    return commands


def shell_commands(block: Block) -> list[str]:
    """The commands of a shell block, in order: continuation lines joined, comments and blank lines
    dropped, ``a && b`` and a trailing ``&`` split off, ``for V in X Y; do ... done`` loops expanded (one
    command per value, ``$V`` substituted), and a variable assigned a plain value (``M=Qwen/...``)
    substituted into the commands after it (the assignment itself is kept; ``V=$(...)`` is kept as is)."""
    joined = re.sub(r"\\\n\s*", " ", block.text)
    lines = [line.split(" #", 1)[0].strip() for line in joined.splitlines() if not line.lstrip().startswith("#")]
    variables: dict[str, str] = {}
    commands: list[str] = []

    def add(line: str, bound: dict[str, str]) -> None:
        line = re.sub(r"\$\{?(\w+)\}?", lambda m: bound.get(m.group(1), m.group(0)), line)
        for part in (p.strip() for p in line.split("&&")):
            part = part.removesuffix("&").strip() if part.endswith(" &") else part
            if not part:
                continue
            if (m := re.fullmatch(r"(\w+)=([^\s$`'\"()]+)", part)) is not None:
                variables[m.group(1)] = m.group(2)
            commands.append(part)

    lines = [line for line in lines if line]
    i = 0
    while i < len(lines):
        loop = re.fullmatch(r"for (\w+) in (.+?); do", lines[i])
        if loop is None:
            add(lines[i], variables)
            i += 1
            continue
        end = lines.index("done", i)
        for value in shlex.split(loop.group(2)):
            for body in lines[i + 1 : end]:
                add(body, {**variables, loop.group(1): value})
        i = end + 1
    return commands


def python_module_args(command: str) -> tuple[str, list[str]] | None:
    """``("pkg.mod", [args])`` for a ``python -m pkg.mod args`` command (any interpreter path, maybe after
    ``VAR=value`` environment variables), else None."""
    words = shlex.split(command)
    while words and re.fullmatch(r"[A-Za-z_]\w*=.*", words[0]):
        words = words[1:]
    for i, word in enumerate(words[:-1]):
        if word == "-m" and words and Path(words[0]).name.startswith("python"):
            return words[i + 1], words[i + 2:]
    return None


def script_commands(script: Path, package: str, values: dict[str, str] | None = None) -> list[str]:
    """The ``python -m PACKAGE...`` commands of a shell script (a GPU check), its variables set to
    ``values`` or else their defaults (``name="${1:-default}"``, ``name=word``), its extra arguments,
    output redirection and pipes left out."""
    text = re.sub(r"\\\n\s*", " ", script.read_text())
    values = {"python": "python", **(values or {})}
    defaults = re.findall(r'^(\w+)="?\$\{[\w]+:-([^$}]*)\}"?$', text, re.M)
    for name, value in defaults + re.findall(r"^(\w+)=(\w+)$", text, re.M):
        values.setdefault(name, value)
    commands = []
    for line in text.splitlines():
        if f" -m {package}" in line:
            line = re.split(r' "\$\{@:\d+\}"| 2>| \|', line)[0]
            commands.append(re.sub(r"\$\{?(\w+)\}?", lambda m: values[m.group(1)], line))
    return commands


_DELIMITER_ROW = re.compile(r"\|?(\s*:?-+:?\s*\|)*\s*:?-+:?\s*\|?")


def _cells(row: str) -> int:
    return len(re.split(r"(?<!\\)\|", row.strip().strip("|")))


def malformed_tables(markdown: str) -> list[str]:
    """The markdown tables whose delimiter row has another number of cells than their header: GitHub
    renders such a table as a paragraph of pipes. Each named by its header's line number."""
    lines = markdown.splitlines()
    return [f"line {i}: {_cells(lines[i - 1])} header cells, {_cells(row)} in the delimiter row"
            for i, row in enumerate(lines) if i and lines[i - 1].lstrip().startswith("|")
            and _DELIMITER_ROW.fullmatch(row.strip()) and _cells(row) != _cells(lines[i - 1])]
