"""MemSearchQA-v0 vectorised the Gymnasium way: make_vec (sync and async, default settings), shared
memory for the text spaces, and the list-of-infos view that batched agents use."""

import copy

import gymnasium as gym
import pytest
from doc_blocks import code_blocks
from gymnasium.vector.utils import create_shared_memory, read_from_shared_memory, write_to_shared_memory

import mempo_env  # noqa: F401
from mempo_env.spaces import ChatMessages, FreeText


def docs_example() -> str:
    """The vectorised rollout of docs/environment.md ("Vectorised environments")."""
    (block,) = [b for b in code_blocks("docs/environment.md", lang="python") if b.heading == "Vectorised environments"]
    return block.text


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_documented_oracle_rollout_solves_its_episodes(mode):
    code = docs_example()
    assert 'vectorization_mode="async"' in code
    scope = {}
    exec(code.replace('vectorization_mode="async"', f'vectorization_mode="{mode}"'), scope)
    finished = scope["finished"]
    assert len(finished) >= 8 and len({ep["objectives"][0]["id"] for ep in finished}) > 1  # new questions
    assert all(ep["score"] == len(ep["objectives"]) and ep["em"] == 1.0 for ep in finished)


def test_async_and_sync_vector_envs_agree():
    """Default settings (shared memory, next-step autoreset), same seeds and actions: the async batch
    equals the sync one, through a TimeLimit truncation (with its end-of-episode info) and the reset after."""
    action = "<mem>m</mem><think>t</think><search>Paris</search>"
    results = []
    for mode in ("sync", "async"):
        envs = gym.make_vec("MemSearchQA-v0", num_envs=3, vectorization_mode=mode, max_episode_steps=2)
        obs, _ = envs.reset(seed=1)
        steps = [envs.step((action,) * 3) for _ in range(3)]
        envs.close()
        results.append((obs, [(s[0], s[1].tolist(), s[3].tolist(), s[4]["turn"].tolist()) for s in steps],
                        steps[1][4]["score"].tolist()))
    assert results[0] == results[1]
    obs, steps, scores = results[1]
    assert all(isinstance(o, list) and o[0]["role"] == "system" for o in obs)
    assert [s[2] for s in steps] == [[False] * 3, [True] * 3, [False] * 3] and scores == [0, 0, 0]
    assert steps[2][3] == [0, 0, 0] and steps[2][0] != steps[1][0]  # next-step autoreset


@pytest.mark.parametrize("space, values", [
    (ChatMessages(), [[{"role": "user", "content": "Où est 日本?"}], [], [{"role": "system", "content": "x" * 99}]]),
    (FreeText(max_length=8), ["", "é日\n\udc3a", "<mem>"]),  # any str, a lone surrogate too
])
def test_shared_memory_round_trips_and_is_live(space, values):
    memory = create_shared_memory(space, n=3)
    batch = read_from_shared_memory(space, memory, n=3)
    for i, value in enumerate(values):
        write_to_shared_memory(space, i, value, memory)
    assert list(batch) == values and copy.deepcopy(batch) == tuple(values)
    write_to_shared_memory(space, 1, values[0], memory)
    assert batch[1] == values[0]


def test_an_observation_too_big_for_shared_memory_is_named():
    space = ChatMessages(max_bytes=64)
    memory = create_shared_memory(space, n=1)
    with pytest.raises(ValueError, match="shared_memory"):
        write_to_shared_memory(space, 0, [{"role": "user", "content": "x" * 100}], memory)
    assert not space.contains([{"role": "user", "content": "x" * 100}])
