"""The ``mempo:`` section of the verl config, read by both the agent loop and the trainer mode, and
what it requires of the rest of the config (``check_config``).

Its defaults live in one place, ``mempo_verl/config/mempo_trainer.yaml``; override any of them on the
command line (``mempo.memory_advantage=false``, ``mempo.env.dataset=hotpotqa``, ...).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from omegaconf import OmegaConf

from agents.scripted import ANSWERING

# the mempo.env keys that pick the search tool (its corpus and retriever); the rest configure the episode
SEARCH_KEYS = ("dataset", "split", "corpus", "retriever", "retriever_options", "cache_dir")
# the loss aggregation under which mempo.equal_episode_weight is exact (mempo_verl.trainer)
EQUAL_WEIGHT_AGG = "seq-mean-token-sum-norm"


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

    @property
    def search(self) -> dict[str, Any]:
        """Where the search tool looks: ``mempo.env``'s ``SEARCH_KEYS`` (absent ones None, ``cache_dir``
        "default")."""
        return {k: self.env.get(k, "default" if k == "cache_dir" else None) for k in SEARCH_KEYS}

    @property
    def env_args(self) -> dict[str, Any]:
        """The other ``mempo.env`` keys: ``MemSearchQAEnv`` arguments of every episode."""
        return {k: v for k, v in self.env.items() if k not in SEARCH_KEYS}

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
        context = (values["env"] or {}).get("context", "memory")
        if context not in ("memory", "full"):  # the agent loop's two layouts: one row per turn, or per episode
            raise ValueError(f"mempo.env.context={context!r}: the verl agent loop trains the memory view or the full "
                             "context, not other context strategies yet")
        return cls(**values)


def check_config(config: Any) -> MemPOOptions:
    """The ``mempo:`` section, after refusing the verl settings MemPO cannot train under, each with a
    clear error (run by ``python -m mempo_verl.main`` before Ray starts, and by the trainer mode)."""
    options = MemPOOptions.from_config(config)
    if config.algorithm.adv_estimator != "grpo":
        raise ValueError(f"trainer_mode=mempo adds to GRPO's outcome advantage; algorithm.adv_estimator is "
                         f"{config.algorithm.adv_estimator!r}, set it to grpo")
    rollout, actor = config.actor_rollout_ref.rollout, config.actor_rollout_ref.actor
    if not rollout.calculate_log_probs:
        raise ValueError("actor_rollout_ref.rollout.calculate_log_probs=false: the agent loop marks a turn's tokens "
                         "as trainable by their generation log-probs (algorithms.batch.build_samples), so no "
                         "token would train; set it to true")
    if options.equal_episode_weight and (actor.loss_agg_mode != EQUAL_WEIGHT_AGG or actor.loss_scale_factor is None):
        raise ValueError(
            f"mempo.equal_episode_weight weighs episodes through their advantages, which is exact only when every "
            f"token's loss weight is one constant: set actor_rollout_ref.actor.loss_agg_mode={EQUAL_WEIGHT_AGG} with "
            f"a loss_scale_factor (got {actor.loss_agg_mode!r}, {actor.loss_scale_factor!r}; token-mean divides by "
            f"each mini-batch's own token count), or mempo.equal_episode_weight=false")
    return options
