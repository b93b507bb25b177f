"""Hostile actions: what a broken decoder, a babbling policy or a malicious client can send to
``env.step``, for the soak (``benchmarks/soak.py``) to drive through every path that serialises an
observation.

``hostile_actions(seed)`` first yields the cases that once broke a path (``KNOWN``), then an endless,
seeded mix of: protocol pieces at random, well-formed turns whose text is hostile, lone surrogates,
tag and special-token look-alikes, control and invisible characters, and huge actions (beyond the
observation's 1 MiB in UTF-8 or in JSON escapes, and beyond the action space's 1M characters).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

SURROGATES = ("\udc3a", "\ud800", "\udfff", "\ud83d", "\ude00", "\udc80")  # what surrogateescape and split pairs give
LOOKALIKES = ("<tool_response>", "</tool_response>", "<TOOL_RESPONSE>", "< tool_response >", "<tool_response/>",
              "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<｜end▁of▁sentence｜>", "<|eot_id|>",
              "<mem >", "</ mem>", "<mem><mem>", "<think/>", "<answer", "search>", "<access></access>")
CONTROLS = ("\x00", "\x07", "\x1b[31m", "\r", "\r\n", "\x7f", "\x85", "\u2028", "\u2029", "\ufeff", "\u200b",
            "\u202e", "\ufffe", "\uffff", "\t", "\\", '"', "\\u0000")
TAGS = ("<mem>", "</mem>", "<think>", "</think>", "<search>", "</search>", "<answer>", "</answer>", "<access>",
        "</access>")
TEXT = (" ", "Momo", "Paris", ";", "\n", "é", "日", "😀", *SURROGATES, *CONTROLS)  # keeps a turn valid
PIECES = (*TAGS, *TEXT, *LOOKALIKES)

# A 600 KB turn: two of them overflowed the full view's 1 MiB observation.
_WIDE_TURN = "<mem>" + "x" * 600_000 + "</mem><think>t</think><search>Momo</search>"
KNOWN = (
    "<mem>x\udc3a</mem><think>t</think><search>Momo \udc3a</search>",  # a lone surrogate (surrogateescape)
    _WIDE_TURN,
    _WIDE_TURN,
    "<mem>m</mem><think>t</think><answer>" + "😀" * 300_000 + "</answer>",  # 1.2 MB of UTF-8 in a valid answer
    "\x00" * 200_000,  # 200 K characters, 1.2 MB as JSON escapes
    "x" * ((1 << 20) + 1),  # beyond the action space's max_length
)


def _pick(rng: np.random.Generator, options: tuple[str, ...]) -> str:
    return options[int(rng.integers(len(options)))]  # not rng.choice: NumPy strings drop a trailing "\x00"


def _text(rng: np.random.Generator, alphabet: tuple[str, ...], most: int) -> str:
    return "".join(_pick(rng, alphabet) for _ in range(int(rng.integers(0, most + 1))))


def _turn(rng: np.random.Generator) -> str:
    """A well-formed turn (so episodes search, access and answer) whose text is hostile."""
    action = _pick(rng, ("search", "search", "answer", "access"))
    mem, think, argument = (_text(rng, TEXT, 8) for _ in range(3))
    return f"<mem>{mem}</mem><think>{think}</think><{action}>Momo{argument}</{action}>"


def _huge(rng: np.random.Generator) -> str:
    """One action of 100 K to 1.1 M characters, in UTF-8 and JSON costs from 1 to 6 bytes a character."""
    n = int(rng.integers(100_000, 1_100_000))
    unit = _pick(rng, ("x", "日", "😀", "\x00", "\udc3a", "<|im_start|>"))
    body = unit * (n // len(unit))
    return f"<mem>m</mem><think>t</think><search>{body}</search>" if rng.random() < 0.5 else body


KINDS: dict[str, tuple[float, Callable[[np.random.Generator], str]]] = {
    "pieces": (0.30, lambda rng: _text(rng, PIECES, 40)),
    "turn": (0.35, _turn),
    "surrogates": (0.10, lambda rng: _text(rng, TAGS + SURROGATES, 30)),
    "lookalikes": (0.10, lambda rng: _text(rng, TAGS + LOOKALIKES, 20)),
    "controls": (0.14, lambda rng: _text(rng, TAGS + CONTROLS, 30)),
    "huge": (0.01, _huge),
}


def hostile_actions(seed: int = 0) -> Iterator[str]:
    """``KNOWN``, then an endless mix of ``KINDS`` in their proportions, the same for the same seed."""
    yield from KNOWN
    rng = np.random.default_rng(seed)
    names = list(KINDS)
    weights = np.array([KINDS[k][0] for k in names])
    while True:
        yield KINDS[names[rng.choice(len(names), p=weights / weights.sum())]][1](rng)
