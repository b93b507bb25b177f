"""``env.step`` overhead against a no-op Gymnasium step, measured in the same run.

    pytest benchmarks/bench_env.py          # or: python -m benchmarks.systems --only env

pytest-benchmark prints each row's ratio to the fastest in its group in parentheses;
``benchmarks.systems`` reads the ``label``/``vs`` of ``extra_info`` for its ratio table. The search
tool is left out in the ``access`` rows (``<access>`` is a dictionary lookup), so they show the
environment's own cost: parsing, the format gate, the views and the snapshots; the ``search`` rows
add one in-process BM25 query over the generated corpus.
"""

import gymnasium as gym
import pytest

import mempo_env  # noqa: F401

ACCESS = "<mem>facts so far</mem>\n<think>read it</think>\n<access>{}</access>"
SEARCH = "<mem>facts so far</mem>\n<think>look it up</think>\n<search>{}</search>"
NOOP = "no-op Gymnasium env.step"


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
    benchmark.extra_info["label"] = NOOP
    benchmark(env.step, 0)


@pytest.mark.benchmark(group="env.step")
@pytest.mark.parametrize("context", ["memory", "full"])
@pytest.mark.parametrize("tool", ["access", "search"])
def test_memsearchqa_step(benchmark, context, tool):
    env = gym.make("MemSearchQA-v0", context=context, max_turns=16).unwrapped
    _, info = env.reset(seed=0)
    hop = info["objectives"][0]["chain"][0]
    action = ACCESS.format(hop["doc_id"]) if tool == "access" else SEARCH.format(hop["query"])
    what = "document lookup" if tool == "access" else "BM25 search, top-3"
    benchmark.extra_info.update(label=f"MemSearchQA-v0 env.step ({context} view, {what})", vs=NOOP)

    def episode_turn():
        if len(env.messages) > 2 + 2 * 14:  # keep the history at a realistic length
            env.reset(seed=0)
        env.step(action)

    benchmark(episode_turn)
