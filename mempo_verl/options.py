"""The ``mempo:`` section of the verl config, read by both the agent loop and the trainer mode.

Its defaults live in one place, ``mempo_verl/config/mempo_trainer.yaml``; override any of them on the
command line (``mempo.memory_advantage=false``, ``mempo.env.dataset=hotpotqa``, ...).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from omegaconf import OmegaConf

from agents.scripted import ANSWERING


@dataclass(frozen=True)
class MemPOOptions:
    memory_advantage: bool
    """MemPO: score P_mem/P_full in the agent loop and add the memory advantage; false: GRPO"""
    equal_episode_weight: bool
    """every episode weighs the same in the token-mean policy loss (mempo_verl.trainer)"""
    env: dict[str, Any]
    """MemSearchQAEnv keyword arguments: dataset/split/corpus/retriever say where the search tool looks"""
    max_new_tokens: int | None
    """generation limit of one turn; null: actor_rollout_ref.rollout.response_length"""
    mem_first_turn: bool
    """give the first turn's <mem> a memory advantage too"""
    include_mem_tags: bool
    """count the <mem>/</mem> tag tokens as memory tokens"""
    answer_think: str
    """the answering turn's <think> text, after which the memory reward scores the gold answer;
    None: the embedded policy's (agents.scripted.ANSWERING)"""
    answer_prefix: str
    """what the policy writes between <answer> and its answer"""

    @classmethod
    def from_config(cls, config: Any) -> MemPOOptions:
        section = config.get("mempo") if config is not None else None
        if section is None:
            raise ValueError("the verl config has no mempo section: start from mempo_verl/config/mempo_trainer.yaml "
                             "(python -m mempo_verl.main)")
        values = OmegaConf.to_container(section, resolve=True) if OmegaConf.is_config(section) else dict(section)
        names = {f.name for f in dataclasses.fields(cls)}
        if unknown := sorted(set(values) - names):
            raise ValueError(f"unknown mempo option(s) {unknown}; known: {sorted(names)}")
        if missing := sorted(names - set(values)):
            raise ValueError(f"mempo option(s) {missing} missing from the config")
        if values["answer_think"] is None:
            values["answer_think"] = ANSWERING
        return cls(**values)
