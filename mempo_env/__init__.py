"""MemSearchQA: a Gymnasium environment for search agents that manage their own memory (MemPO).

``import mempo_env`` registers ``MemSearchQA-v0``; ``gym.make("MemSearchQA-v0")`` runs offline on
the generated default task.
"""

from gymnasium.envs.registration import WrapperSpec, register

from mempo_env.context import (
    ContextEvent,
    ContextStrategy,
    History,
    SummaryRequest,
    SummaryStrategy,
    make_strategy,
    register_strategy,
)
from mempo_env.env import MemSearchQAEnv
from mempo_env.protocol import RULES, check_trajectory, extract_answer, parse_turn
from mempo_env.reward import exact_match, f1_score, normalize_answer, score_answer
from mempo_env.types import Document, OracleStep, QARecord, QATask
from mempo_env.views import full_view, mem_context, prepare_prompt, render_prompt

# The turn budget is the env's own ``max_turns`` (spec.max_episode_steps stays None); an episode that
# ``gym.make(..., max_episode_steps=N)``'s TimeLimit truncates still ends with its metrics.
register(id="MemSearchQA-v0", entry_point="mempo_env.env:MemSearchQAEnv", additional_wrappers=(
    WrapperSpec("EndOfEpisodeInfo", "mempo_env.wrappers:EndOfEpisodeInfo", {}),))

__all__ = [
    "RULES", "ContextEvent", "ContextStrategy", "Document", "History", "MemSearchQAEnv", "OracleStep", "QARecord",
    "QATask", "SummaryRequest", "SummaryStrategy", "check_trajectory", "exact_match", "extract_answer", "f1_score",
    "full_view", "make_strategy", "mem_context", "normalize_answer", "parse_turn", "prepare_prompt",
    "register_strategy", "render_prompt", "score_answer",
]
