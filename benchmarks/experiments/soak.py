"""The hostile-action soak: drive hostile actions (what a broken decoder, a babbling policy or a malicious
client can send to ``env.step``) through every path that serialises an observation, and check that every
observation is in the environment's observation space, every ``info`` encodes, and every episode ends
cleanly (a final ``info`` with its score, the reward equal to it).

    python -m benchmarks.experiments.soak --actions 100000                 # every path, both views
    python -m benchmarks.experiments.soak --actions 2000 --paths plain     # one path

``hostile_actions(seed)`` first yields the cases that once broke a path (``KNOWN``), then an endless,
seeded mix of: protocol pieces at random, well-formed turns whose text is hostile, lone surrogates,
tag and special-token look-alikes, control and invisible characters, and huge actions (beyond the
observation's 1 MiB in UTF-8 or in JSON escapes, and beyond the action space's 1M characters).

A path is a class with ``observation_space``, ``reset(seed) -> observations``, ``step(actions) ->
outcomes`` and ``close()`` (``Path``); ``PATHS`` names them. Every path follows Gymnasium's default
next-step autoreset: the step after an episode ends resets that slot and ignores its action.
``tests/test_soak.py`` runs a small soak through each path in the default suite. The verifiers
environment, which lives in an environment of its own, is soaked through verifiers' own evaluation
loop by ``tests/on_verifiers/test_soak.py`` (its size: ``MEMPO_SOAK_EPISODES``).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import gymnasium as gym
import numpy as np
from gymnasium.wrappers.vector import DictInfoToList

import mempo_env  # noqa: F401  (registers MemSearchQA-v0)
from agents.statistics import table_head
from benchmarks.extras import runnable
from mempo_env.spaces import ChatMessages

# ---- hostile actions --------------------------------------------------------------------------------

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


# ---- the soak --------------------------------------------------------------------------------

Observation = list[dict[str, str]]
ENV_KWARGS: dict[str, Any] = {"max_turns": 6}  # short episodes: many of them end, many resets


@dataclass
class Outcome:
    """One slot's result of a step: ``reset`` when the slot started a new episode instead of stepping."""

    observation: Observation
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    info: dict[str, Any] = field(default_factory=dict)
    reset: bool = False


class Path(Protocol):
    observation_space: ChatMessages

    def reset(self, seed: int) -> list[Observation]: ...

    def step(self, actions: list[str]) -> list[Outcome]: ...

    def close(self) -> None: ...


class PlainPath:
    """``gym.make`` environments (with their checker and wrappers), one per slot, stepped in turn."""

    def __init__(self, num_envs: int, env_kwargs: dict[str, Any]) -> None:
        self.envs = [gym.make("MemSearchQA-v0", **env_kwargs) for _ in range(num_envs)]
        self.observation_space = self.envs[0].observation_space
        self._ended = [False] * num_envs

    def reset(self, seed: int) -> list[Observation]:
        self._ended = [False] * len(self.envs)
        return [env.reset(seed=seed + i)[0] for i, env in enumerate(self.envs)]

    def step(self, actions: list[str]) -> list[Outcome]:
        outcomes = []
        for i, (env, action) in enumerate(zip(self.envs, actions)):
            if self._ended[i]:
                outcome = Outcome(env.reset()[0], reset=True)
            else:
                outcome = Outcome(*env.step(action))
            self._ended[i] = outcome.terminated or outcome.truncated
            outcomes.append(outcome)
        return outcomes

    def close(self) -> None:
        for env in self.envs:
            env.close()


class AsyncVectorPath:
    """``gym.make_vec(..., vectorization_mode="async")`` with Gymnasium's defaults (shared memory,
    next-step autoreset), its infos split per env by ``DictInfoToList``."""

    def __init__(self, num_envs: int, env_kwargs: dict[str, Any]) -> None:
        self.envs = DictInfoToList(gym.make_vec("MemSearchQA-v0", num_envs=num_envs, vectorization_mode="async",
                                                **env_kwargs))
        self.observation_space = self.envs.single_observation_space
        self._ended = [False] * num_envs

    def reset(self, seed: int) -> list[Observation]:
        self._ended = [False] * self.envs.num_envs
        return list(self.envs.reset(seed=seed)[0])

    def step(self, actions: list[str]) -> list[Outcome]:
        observations, rewards, terminated, truncated, infos = self.envs.step(tuple(actions))
        outcomes = [Outcome(observation, float(rewards[i]), bool(terminated[i]), bool(truncated[i]), infos[i],
                            reset=self._ended[i]) for i, observation in enumerate(observations)]
        self._ended = [o.terminated or o.truncated for o in outcomes]
        return outcomes

    def close(self) -> None:
        self.envs.close()


class OpenEnvPath:
    """The OpenEnv server (``integrations.openenv_server``, the ``openenv`` extra) on loopback, one WebSocket
    session per slot through OpenEnv's own client: the observation and info as they arrive over the wire."""

    def __init__(self, num_envs: int, env_kwargs: dict[str, Any]) -> None:
        from integrations.openenv_server import MemSearchQAAction, MemSearchQAClient, serve_in_thread

        self.action = MemSearchQAAction
        self._stack = contextlib.ExitStack()
        url, _ = self._stack.enter_context(serve_in_thread(max_sessions=num_envs, **env_kwargs))
        self.clients = [self._stack.enter_context(MemSearchQAClient(base_url=url).sync()) for _ in range(num_envs)]
        self.observation_space = ChatMessages()
        self._ended = [False] * num_envs

    def reset(self, seed: int) -> list[Observation]:
        self._ended = [False] * len(self.clients)
        return [client.reset(seed=seed + i).observation.messages for i, client in enumerate(self.clients)]

    def step(self, actions: list[str]) -> list[Outcome]:
        outcomes = []
        for i, (client, action) in enumerate(zip(self.clients, actions)):
            if self._ended[i]:
                outcome = Outcome(client.reset().observation.messages, reset=True)
            else:
                obs = client.step(self.action(text=action)).observation
                outcome = Outcome(obs.messages, obs.reward or 0.0, obs.done and not obs.truncated, obs.truncated,
                                  obs.metadata)
            self._ended[i] = outcome.terminated or outcome.truncated
            outcomes.append(outcome)
        return outcomes

    def close(self) -> None:
        self._stack.close()


PATHS: dict[str, type] = {"plain": PlainPath, "async": AsyncVectorPath, "openenv": OpenEnvPath}
NEEDS = {"openenv": "openenv"}  # path -> the extra it needs


@dataclass
class Report:
    """What a soak saw; ``failures`` lists every broken promise (empty when the path held)."""

    actions: int = 0
    episodes: int = 0
    replaced_surrogates: int = 0
    observation_overflows: int = 0
    largest_observation_bytes: int = 0
    seconds: float = 0.0
    failures: list[str] = field(default_factory=list)


def soak(path: Path, actions: Iterator[str], n_actions: int, *, max_turns: int, seed: int = 0) -> Report:
    """Step ``path`` until ``n_actions`` actions went in, checking every outcome (see the module doc)."""
    report, space = Report(), path.observation_space
    start = time.perf_counter()

    def check_observation(observation: Observation, where: str) -> None:
        if not space.contains(observation):
            report.failures.append(f"{where}: an observation outside {space}")
        else:
            report.largest_observation_bytes = max(report.largest_observation_bytes, len(space.to_bytes(observation)))

    observations = path.reset(seed)
    for i, observation in enumerate(observations):
        check_observation(observation, f"reset of slot {i}")
    turns = [0] * len(observations)
    step = 0
    while report.actions < n_actions:
        batch = list(itertools.islice(actions, len(turns)))
        for i, outcome in enumerate(path.step(batch)):
            where = f"step {step}, slot {i}"
            check_observation(outcome.observation, where)
            if outcome.reset:
                turns[i] = 0
                continue
            report.actions += 1
            turns[i] += 1
            try:
                json.dumps(outcome.info, default=str).encode()
            except (TypeError, ValueError) as e:  # UnicodeEncodeError is a ValueError
                report.failures.append(f"{where}: info does not encode ({e!r:.200})")
            report.replaced_surrogates += outcome.info.get("replaced_surrogates", 0)
            if turns[i] > max_turns:
                report.failures.append(f"{where}: an episode ran past max_turns={max_turns}")
            if outcome.terminated or outcome.truncated:
                report.episodes += 1
                final = outcome.info
                if "score" not in final or outcome.reward != final["score"] or final.get("n_turns") != turns[i]:
                    report.failures.append(f"{where}: an episode ended without its final info")
                report.observation_overflows += bool(final.get("observation_overflow"))
        step += 1
    report.seconds = time.perf_counter() - start
    return report


def run(path_name: str, context: str, n_actions: int, *, num_envs: int = 2, seed: int = 0) -> Report:
    """A soak of ``n_actions`` hostile actions (seeded) through one path in one view."""
    path = PATHS[path_name](num_envs, {**ENV_KWARGS, "context": context})
    try:
        return soak(path, hostile_actions(seed), n_actions, max_turns=ENV_KWARGS["max_turns"], seed=seed)
    finally:
        path.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], prog="python -m benchmarks.experiments.soak")
    parser.add_argument("--actions", type=int, default=100_000, help="hostile actions per path and view")
    parser.add_argument("--paths", nargs="+", choices=list(PATHS), default=None,
                        help="default: every path whose extra is installed")
    parser.add_argument("--contexts", nargs="+", choices=["memory", "full"], default=["memory", "full"])
    parser.add_argument("--num-envs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    args.paths = runnable(parser, args.paths, list(PATHS), NEEDS)
    failed = False
    print(*table_head(["path", "view", "actions", "episodes", "surrogates replaced", "observation overflows",
                       "largest observation (bytes)", "seconds", "failures"]), sep="\n")
    for path_name in args.paths:
        for context in args.contexts:
            r = run(path_name, context, args.actions, num_envs=args.num_envs, seed=args.seed)
            print(f"| {path_name} | {context} | {r.actions} | {r.episodes} | {r.replaced_surrogates} | "
                  f"{r.observation_overflows} | {r.largest_observation_bytes} | {r.seconds:.0f} | {len(r.failures)} |",
                  flush=True)
            for failure in r.failures[:10]:
                print("   ", failure)
            failed |= bool(r.failures)
    raise SystemExit(1 if failed else 0)


if __name__ == "__main__":
    main()
