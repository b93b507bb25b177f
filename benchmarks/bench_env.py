"""``env.step`` overhead against a no-op Gymnasium step, measured in the same run.

    pytest benchmarks/bench_env.py

pytest-benchmark prints each row's ratio to the fastest in its group in parentheses. The search
tool is left out (``<access>`` is a dictionary lookup) so the number is the environment's own cost:
parsing, the format gate, the views and the snapshots.
"""

import gymnasium as gym
import pytest

import mempo_env  # noqa: F401

ACCESS = "<mem>facts so far</mem>\n<think>read it</think>\n<access>{}</access>"


class NoOpEnv(gym.Env):
    observation_space = gym.spaces.Discrete(1)
    action_space = gym.spaces.Discrete(1)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return 0, {}

    def step(self, action):
        return 0, 0.0, False, False, {}


@pytest.mark.benchmark(group="env.step")
def test_noop_gymnasium_step(benchmark):
    env = NoOpEnv()
    env.reset(seed=0)
    benchmark(env.step, 0)


@pytest.mark.benchmark(group="env.step")
@pytest.mark.parametrize("context", ["memory", "full"])
def test_memsearchqa_step_without_retrieval(benchmark, context):
    env = gym.make("MemSearchQA-v0", context=context, max_turns=16).unwrapped
    _, info = env.reset(seed=0)
    action = ACCESS.format(info["objectives"][0]["chain"][0]["doc_id"])

    def episode_turn():
        if len(env.messages) > 2 + 2 * 14:  # keep the history at a realistic length
            env.reset(seed=0)
        env.step(action)

    benchmark(episode_turn)
