"""Run a snippet of the documents as a reader would copy it, at a size a test can afford: the block is
found by the ``<!-- tested by FILE::TEST -->`` marker above it, and each size reduction is a literal
replacement that must occur exactly once, so a document edit that drops it fails the test loudly."""

from __future__ import annotations

from typing import Any

from doc_blocks import code_blocks


def documented(file: str, test: str) -> str:
    """The text of the one block of ``file`` whose marker names ``test`` (a test function's name)."""
    blocks = [b for b in code_blocks(file) if b.tested_by.endswith(f"::{test}")]
    assert len(blocks) == 1, f"{file} has {len(blocks)} blocks marked as tested by {test}"
    return blocks[0].text


def run_reduced(text: str, reductions: dict[str, str]) -> dict[str, Any]:
    """Execute ``text`` with each key replaced by its value; return the names it defined."""
    for old, new in reductions.items():
        assert text.count(old) == 1, f"the documented snippet no longer holds {old!r} exactly once"
        text = text.replace(old, new)
    namespace: dict[str, Any] = {"__name__": "__documented__"}
    exec(compile(text, "<documented snippet>", "exec"), namespace)
    return namespace
