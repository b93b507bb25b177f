"""Which benchmark paths this install can run: a path that needs an optional extra (the OpenEnv server needs
``openenv``) is left out of a default run with a line saying so, and refused by name with the install line,
so a benchmark never measures half its paths and then dies on an import."""

from __future__ import annotations

import argparse
import importlib.util
from collections.abc import Mapping, Sequence

MODULES = {"openenv": ("openenv", "fastapi")}  # extra -> the modules it installs that the paths import


def missing(extra: str) -> bool:
    return any(importlib.util.find_spec(m) is None for m in MODULES[extra])


def runnable(parser: argparse.ArgumentParser, requested: Sequence[str] | None, paths: Sequence[str],
             needs: Mapping[str, str]) -> list[str]:
    """``requested`` (None: every path in ``paths`` this install can run); ``needs``: path -> its extra.
    A requested path whose extra is missing ends the CLI through ``parser.error`` (exit 2) before any work."""
    lacking = {p: needs[p] for p in (requested or paths) if p in needs and missing(needs[p])}
    if requested is None:
        for p, e in lacking.items():
            print(f"the {p} path is left out: it needs the {e} extra (pip install -e '.[{e}]')")
        return [p for p in paths if p not in lacking]
    if lacking:
        parser.error("; ".join(f"the {p} path needs the {e} extra (pip install -e '.[{e}]')"
                               for p, e in lacking.items()))
    return list(requested)
