"""Rollouts: G episodes per question, all live episodes generating together each turn.

Token in, token out: every turn records the exact prompt ids the policy conditioned on, the ids it
generated and their log-probs under the generating weights. Environment text (prompts, tool
responses) is tokenised once, here, and never trained on.

Two layouts, by the environment's context strategy (``mempo_env.context``):
- a strategy whose prompt is not a prefix of the next (``"memory"``, ``"window:K"``, ``"summary"``,
  your own): each turn's prompt is the strategy's view, freshly rendered; one training sample per turn.
- ``"full"`` (any strategy with ``prefix``): each turn's prompt is the previous prompt + the previous
  response + the tokens of the environment's reply, so the whole episode is one growing sequence and
  one training sample.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agents.backends.base import Generation, PolicyBackend
from agents.model import STOP, action_text
from mempo_env.env import MemSearchQAEnv
from mempo_env.views import Message, render_prompt

REWARDS = {"score": "score", "aligned": "aligned_score"}  # outcome reward -> the final info's key


@dataclass
class TurnRecord:
    prompt_ids: list[int]
    response_ids: list[int]
    logprobs: list[float]  # old log-probs of response_ids, from the weights that generated them
    mem_span: tuple[int, int] | None  # [start, end) of the <mem> block within response_ids
    full_context: list[Message]  # spec snapshots, for the memory reward
    mem_context: list[Message] | None
    found: int = 0  # gold evidence items the replies before this turn showed (info["memory_found"])


@dataclass
class Rollout:
    group: int  # index of the question group: GRPO compares rollouts of the same group only
    gold: str  # the ';'-joined canonical answers, scored by the memory reward
    turns: list[TurnRecord] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)  # the environment's final info

    @property
    def score(self) -> float:
        return self.reward("score")

    def reward(self, kind: str) -> float:
        """The outcome reward named by ``kind`` (``REWARDS``): the spec's ``score`` or the ``aligned``
        count that a dropped or repeated answer does not zero (``mempo_env.reward.aligned_matches``)."""
        return float(self.info.get(REWARDS[kind], 0.0))


def encode(tokenizer: Any, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def mem_token_span(tokenizer: Any, ids: list[int], include_tags: bool = True) -> tuple[int, int] | None:
    """The tokens of the first ``<mem>…</mem>`` block, found through the character offsets of the
    decoded ids (never by re-tokenising text): every token that writes part of it, also one that goes
    on past it (SmolLM2's BPE writes the ``>`` of ``</mem>`` and a ``<`` right after it as one token). Without
    ``include_tags``, the tokens that write part of what is between the tags."""
    ends = [len(tokenizer.decode(ids[: k + 1])) for k in range(len(ids))]
    text = tokenizer.decode(ids)
    start = text.find("<mem>")
    stop = text.find("</mem>", start + 1)
    if start < 0 or stop < 0:
        return None
    lo, hi = (start, stop + len("</mem>")) if include_tags else (start + len("<mem>"), stop)
    begins = [0] + ends[:-1]
    tokens = [k for k in range(len(ids)) if begins[k] < hi and ends[k] > lo]
    return (tokens[0], tokens[-1] + 1) if tokens else None


class Episode:
    """One live episode: its environment and the token context of its next turn. Driven one
    generation at a time by ``step``, so any engine can play it: ``collect_rollouts`` batches the
    live episodes of a step, the verl agent loop (``mempo_verl``) awaits one server call per turn."""

    def __init__(self, env: MemSearchQAEnv, tokenizer: Any, group: int, reset_options: dict[str, Any],
                 include_tags: bool = True):
        self.env, self.tokenizer, self.include_tags = env, tokenizer, include_tags
        obs, info = env.reset(options=reset_options)
        self.rollout = Rollout(group, "; ".join(o["answers"][0] for o in info["objectives"]))
        self.prompt_ids = encode(tokenizer, render_prompt(obs, tokenizer))
        self.done = False

    def step(self, generation: Generation) -> None:
        tok, response_ids, logprobs = self.tokenizer, generation.token_ids, generation.logprobs
        action = action_text(generation, tok)  # as the benchmark's model agents act: no turn-ending eos
        obs, _, terminated, truncated, info = self.env.step(action)
        self.rollout.turns.append(TurnRecord(
            self.prompt_ids, response_ids, logprobs, mem_token_span(tok, response_ids, self.include_tags),
            info["full_context"], info["mem_context"], info["memory_found"],
        ))
        self.done = terminated or truncated
        if self.done:
            self.rollout.info = info
        elif not self.env.strategy.prefix:  # the strategy's own view of the next turn
            self.prompt_ids = encode(tok, render_prompt(obs, tok))
        else:  # extend the running sequence by the environment's reply, tokenised once
            history = self.env.messages  # the response as stored: an invalid turn's look-alikes neutralised
            ended = generation.text[len(action):]  # a turn-ending eos: the template's own end of the turn
            before = render_prompt(info["full_context"], tok) + history[len(info["full_context"])]["content"] + ended
            after = render_prompt(history, tok)
            if not after.startswith(before):
                raise ValueError("the chat template does not render the history as a growing prefix; "
                                 "use context='memory' with this tokenizer")
            self.prompt_ids = self.prompt_ids + response_ids + encode(tok, after[len(before):])


def collect_rollouts(
    backend: PolicyBackend,
    envs: list[MemSearchQAEnv],
    groups: list[list[int]],
    *,
    max_new_tokens: int = 96,
    temperature: float = 1.0,
    top_p: float = 1.0,
    seed: int | None = None,
    include_mem_tags: bool = True,
) -> list[Rollout]:
    """Play ``len(envs) // len(groups)`` episodes of each question group (``groups[g]``: question
    indices of one episode, as many as its objectives), all live episodes generating in one batch per turn."""
    per_group = len(envs) // len(groups)
    episodes = [Episode(env, backend.tokenizer, i // per_group,
                        {"index": groups[i // per_group], "objectives": len(groups[i // per_group])}, include_mem_tags)
                for i, env in enumerate(envs[: per_group * len(groups)])]
    turn = 0
    while live := [e for e in episodes if not e.done]:
        outs = backend.generate([e.prompt_ids for e in live], max_new_tokens=max_new_tokens,
                                temperature=temperature, top_p=top_p, n=1, stop=STOP,
                                seed=None if seed is None else seed + turn)
        for episode, (gen,) in zip(live, outs):
            episode.step(gen)
        turn += 1
    return [e.rollout for e in episodes]
