"""MemSearchQA-v0 as a verifiers environment: ``vf.load_environment("memsearchqa", context="memory", ...)``
(verifiers 0.3.1, in an environment of its own: ``bash scripts/install_verifiers.sh``).

One dataset row is one episode, ``MemSearchQAEnv.reset(seed=s)`` for ``s`` in ``seed .. seed + episodes - 1``:
the episodes ``benchmarks.run`` plays with the same seed. Each rollout plays its own ``MemSearchQAEnv``
(question set and search index shared, ``mempo_env.sessions.env_factory``); every model turn is one
``env.step``, and the next prompt is the env's observation in its view (``get_prompt_messages``, which
verifiers provides for non-linear conversations: the memory view rewrites the history every turn, so a
turn's prompt is not the last one extended). The rubric's reward is the env's score (its reward at the
end); ``em``, ``f1``, ``format_ok``, searches and context costs are metrics (weight 0). An episode the
rollout leaves unfinished (an error, verifiers' timeout) ends unanswered, as the env's turn budget
ends one (score 0).
"""

from __future__ import annotations

import asyncio
from typing import Any

import verifiers as vf
from datasets import Dataset
from verifiers.utils.message_utils import normalize_messages

from mempo_env.retrieval import RetrieverError
from mempo_env.sessions import env_factory

METRICS = ("em", "f1", "format_ok", "n_searches", "total_chars", "peak_chars")
TOKEN_METRICS = ("total_tokens", "peak_tokens")  # with a tokenizer


def load_environment(episodes: int = 100, seed: int = 0, **env_kwargs: Any) -> vf.MultiTurnEnv:
    """``episodes`` episodes from reset seed ``seed`` on, of ``MemSearchQAEnv(**env_kwargs)`` (its
    arguments: ``dataset``, ``split``, ``context``, ``objectives``, ``prompt``, ``max_turns``,
    ``retriever``, ...; docs/environment.md)."""
    return MemSearchQAVerifiersEnv(episodes, seed, **env_kwargs)


def _metric(name: str) -> Any:
    """A rubric function reading ``name`` from the episode's final info."""

    def metric(state: vf.State) -> float:
        return float(state["episode_info"][name])

    metric.__name__ = name
    return metric


def _text(message: Any) -> str:
    """A completion message's text; a turn without text content plays as an empty (invalid) turn."""
    content = message["content"]
    return content if isinstance(content, str) else ""


class MemSearchQAVerifiersEnv(vf.MultiTurnEnv):
    """See the module docstring; the rollout keeps its env in ``state["episode_env"]`` and the env's latest
    ``info`` in ``state["episode_info"]``, which the rubric reads."""

    def __init__(self, episodes: int, seed: int, **env_kwargs: Any):
        if episodes < 1:
            raise ValueError(f"episodes must be at least 1, got {episodes}")
        self.make_env = env_factory(**env_kwargs)
        env = self.make_env()
        rows = [{"prompt": env.reset(seed=s)[0], "info": {"seed": s}} for s in range(seed, seed + episodes)]
        rubric = vf.Rubric(funcs=[_metric("score")], weights=[1.0])
        for name in METRICS + (TOKEN_METRICS if env.tokenizer is not None else ()):
            rubric.add_metric(_metric(name))
        dataset = Dataset.from_list(rows)
        super().__init__(dataset=dataset, eval_dataset=dataset, rubric=rubric)

    async def setup_state(self, state: vf.State) -> vf.State:
        env = self.make_env()
        _, state["episode_info"] = env.reset(seed=state["info"]["seed"])
        state["episode_env"] = env
        return state

    def _play(self, state: vf.State, text: str) -> vf.Messages:
        """One turn of the episode and its record in the state; returns the env's reply (tool response or
        correction, none at the answer), which is the final env response when the turn ends the episode.
        Runs in a worker thread (a search may wait on a server): a rollout cancelled mid-step (verifiers'
        timeout) leaves it to finish, and ``end_episode`` waits for it."""
        env = state["episode_env"]
        before = len(env.messages)
        try:
            obs, _, terminated, truncated, state["episode_info"] = env.step(text)
        except RetrieverError as e:  # the search server failed; the episode is unchanged, the rollout retryable
            raise vf.InfraError(str(e)) from e
        state["observation"] = normalize_messages(obs)
        reply = normalize_messages(env.messages[before + 1:])
        if terminated or truncated:
            state["final_env_response"] = reply
        return reply

    async def env_response(self, messages: vf.Messages, state: vf.State, **kwargs: Any) -> vf.Messages:
        """Plays the last message as one turn of the episode."""
        step = state["episode_step"] = asyncio.ensure_future(asyncio.to_thread(self._play, state, _text(messages[-1])))
        return await asyncio.shield(step)

    async def get_prompt_messages(self, state: vf.State) -> vf.Messages:
        """The env's next observation in its view."""
        if not state["trajectory"]:
            return state["prompt"]
        await self.env_response(state["trajectory"][-1]["completion"], state)
        return state["observation"]

    async def render_completion(self, state: vf.State) -> None:
        """The whole episode after the prompt, from the env's history (a memory-view prompt holds part of it)."""
        state["completion"] = state.get("episode_history", [])[len(state["prompt"]):]

    @vf.cleanup(priority=200)  # before verifiers' render_state (100), which calls render_completion
    async def end_episode(self, state: vf.State) -> None:
        """Ends the episode when verifiers stopped the rollout first (its turn budget, its timeout, an
        error): a last completion not yet played is played (unless the rollout failed), as verifiers scores
        a final completion, and an episode still open ends unanswered (score 0, the env's end-of-episode
        metrics). Keeps the history and releases the env."""
        env = state.get("episode_env")
        if env is None:
            return
        step = state.get("episode_step")
        if step is not None and not step.done():
            await asyncio.wait([step])
        unplayed = len(state["trajectory"]) > state["episode_info"]["turn"]
        if state.get("final_env_response") is None and unplayed and state.get("error") is None:
            try:
                await self.env_response(state["trajectory"][-1]["completion"], state)
            except vf.InfraError as e:
                state["error"] = e
        if state.get("final_env_response") is None:
            state["episode_info"] = env.truncate()
        state["episode_history"] = env.messages
        del state["episode_env"]
        env.close()
