"""Wrappers: the end-of-episode info for an episode a wrapper truncates; the observation as one prompt string."""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from mempo_env.spaces import FreeText
from mempo_env.views import Message, render_prompt


class EndOfEpisodeInfo(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Ends an episode that an inner wrapper truncated (``TimeLimit`` from ``gym.make(...,
    max_episode_steps=N)``) with the same final ``info`` (score, em, f1, costs) as the env's own turn
    budget gives it. ``gym.make`` applies it outermost, as the spec's additional wrapper."""

    def __init__(self, env: gym.Env):
        gym.utils.RecordConstructorArgs.__init__(self)
        gym.Wrapper.__init__(self, env)

    def step(self, action: str) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = self.env.step(action)
        if truncated and not terminated and "score" not in info:
            info = {**info, **self.env.unwrapped.truncate()}
        return observation, reward, terminated, truncated, info


class ChatTemplateText(gym.ObservationWrapper, gym.utils.RecordConstructorArgs):
    """Renders each observation through ``tokenizer``'s chat template, generation prompt included."""

    def __init__(self, env: gym.Env, tokenizer: Any):
        gym.utils.RecordConstructorArgs.__init__(self, tokenizer=tokenizer)
        gym.ObservationWrapper.__init__(self, env)
        if not getattr(tokenizer, "chat_template", None):
            raise ValueError("the tokenizer has no chat template; set tokenizer.chat_template first")
        self.tokenizer = tokenizer
        self.observation_space = FreeText()

    def observation(self, observation: list[Message]) -> str:
        return render_prompt(observation, self.tokenizer)
