"""Policies behind one interface (``Agent.act(observation, info) -> str``), built from spec strings."""

from __future__ import annotations

from agents.base import Agent
from agents.scripted import OracleAgent, RandomAgent, WeakAgent


def make_agent(spec: str) -> Agent:
    """``oracle``, ``weak``, ``random`` or ``random:SEED``."""
    kind, _, arg = spec.partition(":")
    if kind == "oracle" and not arg:
        return OracleAgent()
    if kind == "weak" and not arg:
        return WeakAgent()
    if kind == "random":
        return RandomAgent(int(arg) if arg else 0)
    raise ValueError(f"unknown agent spec {spec!r}; known: oracle, weak, random[:SEED]")


__all__ = ["Agent", "OracleAgent", "RandomAgent", "WeakAgent", "make_agent"]
