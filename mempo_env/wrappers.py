"""Observation as one prompt string, for agents that consume text instead of chat messages."""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from mempo_env.spaces import FreeText
from mempo_env.views import Message, render_prompt


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
