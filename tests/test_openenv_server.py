"""The OpenEnv server (``integrations.openenv_server``) driven over loopback by OpenEnv's own clients
(openenv-core 0.3.0, the ``openenv`` extra): whole episodes observe and score as on the local env,
16 concurrent sessions stay apart, bad actions and reset options get the env's errors, a client that
vanishes mid-episode frees its session, and non-ASCII or large text crosses intact."""

from __future__ import annotations

import asyncio
import inspect
import json
import time
from typing import Any

import pytest

pytest.importorskip("openenv")

import requests
import websockets
from doc_blocks import code_blocks, python_module_args, shell_commands
from openenv.core.generic_client import GenericEnvClient
from openenv.core.utils import convert_to_ws_url
from openenv_helpers import openenv_client

from agents import make_agent
from agents.runner import play
from integrations.openenv_server import (
    MemSearchQAAction,
    MemSearchQAClient,
    MemSearchQAEnvironment,
    main,
    parse_args,
    serve_in_thread,
)
from mempo_env import MemSearchQAEnv

SETTINGS = {"objectives": 2, "prompt": "eval", "split": "test"}
FINAL = ("score", "em", "f1", "format_ok", "format_failed", "n_turns", "n_searches", "total_chars", "peak_chars")


@pytest.fixture(scope="module")
def memory_server():
    """A memory-view server with room for 16 sessions: (URL, OpenEnv's HTTPEnvServer)."""
    with serve_in_thread(context="memory", max_sessions=16, **SETTINGS) as served:
        yield served


def play_through(client: Any, spec: str, seed: int) -> tuple[list[list[dict[str, str]]], Any]:
    """Every observation of one episode played by ``spec`` through a sync client, and the last result."""
    agent = make_agent(spec)
    result = client.reset(seed=seed)
    seen = [result.observation.messages]
    while not result.done:
        observation = result.observation
        result = client.step(MemSearchQAAction(text=agent.act(observation.messages, observation.info)))
        seen.append(result.observation.messages)
    return seen, result


def local_observations(spec: str, seed: int, **kwargs: Any) -> list[list[dict[str, str]]]:
    agent, env = make_agent(spec), MemSearchQAEnv(**kwargs)
    obs, info = env.reset(seed=seed)
    seen, done = [obs], False
    while not done:
        obs, _, terminated, truncated, info = env.step(agent.act(obs, info))
        seen.append(obs)
        done = terminated or truncated
    return seen


@pytest.mark.parametrize("context", ["memory", "full"])
@pytest.mark.parametrize("spec", ["oracle", "random:3"])
def test_episodes_play_and_score_as_on_the_local_env(spec: str, context: str) -> None:
    kwargs = {**SETTINGS, "context": context}
    seeds = [0, 1, 2]
    records = dict(play(make_agent(spec), [MemSearchQAEnv(**kwargs)], seeds))
    with openenv_client(**kwargs) as client:
        for i, seed in enumerate(seeds):
            seen, result = play_through(client, spec, seed)
            assert seen == local_observations(spec, seed, **kwargs)  # the exact next prompt, every turn
            metadata = result.observation.metadata
            assert result.reward == metadata["score"] and metadata == result.observation.info
            assert {k: metadata[k] for k in FINAL} == {k: records[i][k] for k in FINAL}
            assert result.observation.truncated == (records[i]["answer"] is None)
            state = client.state()
            assert state.done and state.step_count == records[i]["n_turns"]
            assert state.messages == records[i]["trajectory"]
    if spec == "oracle":
        assert all(r["score"] == 2 for r in records.values())


def test_16_concurrent_sessions_keep_apart(memory_server) -> None:
    """16 clients, each its own seed and question count, step in turn through one server: every
    episode equals its local twin, and a 17th client is refused while they hold the server."""
    url, server = memory_server
    agent = make_agent("oracle")
    plans = [(seed, 1 + seed % 3) for seed in range(16)]

    async def session(client: MemSearchQAClient, seed: int, k: int, start: asyncio.Barrier) -> Any:
        result = await client.reset(seed=seed, objectives=k)
        await start.wait()  # all 16 are open before any plays
        while not result.done:
            obs = result.observation
            result = await client.step(MemSearchQAAction(text=agent.act(obs.messages, obs.info)))
            await asyncio.sleep(0)
        return await client.state(), result

    async def run() -> list[Any]:
        clients = [MemSearchQAClient(base_url=url) for _ in plans]
        start = asyncio.Barrier(len(plans) + 1)
        try:
            tasks = [asyncio.create_task(session(c, seed, k, start)) for c, (seed, k) in zip(clients, plans)]
            while server.active_sessions < len(plans):
                await asyncio.sleep(0.01)
            # The server refuses at the handshake: it sends the error, then closes, so read it
            # rather than race the close with a request of our own.
            async with websockets.connect(convert_to_ws_url(url) + "/ws") as extra:
                refusal = json.loads(await extra.recv())
            assert refusal["type"] == "error" and refusal["data"]["code"] == "CAPACITY_REACHED", refusal
            await start.wait()
            return await asyncio.gather(*tasks)
        finally:
            await asyncio.gather(*(c.close() for c in clients))

    for (seed, k), (state, result) in zip(plans, asyncio.run(run())):
        [(_, record)] = play(agent, [MemSearchQAEnv(**{**SETTINGS, "objectives": k})], [seed])
        assert state.messages == record["trajectory"] and result.reward == record["score"] == k


def test_bad_actions_and_options_get_the_envs_errors(memory_server) -> None:
    """Each refusal names the problem, and the same session then plays a whole episode."""
    url, _ = memory_server
    with MemSearchQAClient(base_url=url).sync() as client:
        for kwargs, message in [({"seed": 0, "objectives": 0}, "objectives'] must be >= 1, got 0"),
                                ({"seed": 0, "objectives": "2"}, r"objectives'\] must be an integer"),
                                ({"seed": 0, "colour": "red"}, "unknown reset option 'colour'"),
                                ({"seed": 0, "index": 10**6}, "question index 1000000 out of range"),
                                ({"seed": 0, "questions": []}, "options\\['questions'\\] is empty"),
                                ({"seed": -1}, "[Ss]eed must be")]:
            with pytest.raises(RuntimeError, match=message):
                client.reset(**kwargs)
            with pytest.raises(RuntimeError, match="call reset\\(\\) first"):  # a refused reset opens no episode
                client.step(MemSearchQAAction(text="<answer>x</answer>"))
        seen, result = play_through(client, "oracle", 0)
        assert result.reward == 2 and len(seen) == result.observation.metadata["n_turns"] + 1
        with pytest.raises(RuntimeError, match="the episode is over"):
            client.step(MemSearchQAAction(text="<answer>x</answer>"))
    with GenericEnvClient(base_url=url).sync() as raw:  # an action not of the declared type
        raw.reset(seed=0)
        for action in ({"text": 5}, {"txt": "hello"}, {}):
            with pytest.raises(RuntimeError, match="VALIDATION_ERROR"):
                raw.step(action)
        assert raw.step({"text": "<mem></mem><think>t</think><search>Momo</search>"}).observation["info"]["valid"]


def test_a_client_that_vanishes_mid_episode_frees_its_session(monkeypatch) -> None:
    """Two clients drop their connections mid-episode (no close message, the TCP connection aborted,
    as a crashed process does): the server closes both sessions' environments, and two new clients get
    the slots."""
    closed = []
    monkeypatch.setattr(MemSearchQAEnvironment, "close", lambda self: closed.append(self))
    with serve_in_thread(context="memory", max_sessions=2, **SETTINGS) as (url, server):

        async def start_episode() -> MemSearchQAClient:
            client = MemSearchQAClient(base_url=url)
            result = await client.reset(seed=0)
            obs = result.observation
            await client.step(MemSearchQAAction(text=make_agent("oracle").act(obs.messages, obs.info)))
            return client

        async def run() -> None:
            clients = await asyncio.gather(start_episode(), start_episode())
            assert server.active_sessions == 2
            for client in clients:
                client._ws.transport.abort()  # OpenEnv's client has no abort; its connection's transport does

        asyncio.run(run())
        deadline = time.monotonic() + 10
        while len(closed) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(closed) == 2 and server.active_sessions == 0
        with MemSearchQAClient(base_url=url).sync() as a, MemSearchQAClient(base_url=url).sync() as b:
            assert play_through(a, "oracle", 1)[1].reward == play_through(b, "oracle", 2)[1].reward == 2


def test_non_ascii_large_and_unencodable_text() -> None:
    """Non-ASCII turns and full-view observations of a megabyte cross intact; a lone surrogate (what a
    ``surrogateescape`` decoder can emit) is answered, observation or error, and the session goes on."""
    kwargs = {**SETTINGS, "context": "full"}
    turns = ["<mem>日本 é \u2028 🙂</mem><think>考え</think><search>Momo 日本</search>",
             "<mem>" + "記" * 300_000 + "</mem><think>t</think><search>Momo</search>",
             "<mem>" + "a" * 600_000 + "</mem><think>t</think><search>Momo</search>"]
    env = MemSearchQAEnv(**kwargs)
    env.reset(seed=0)
    expected = [env.step(turn)[0] for turn in turns]
    with openenv_client(**kwargs) as client:
        client.reset(seed=0)
        for turn, obs in zip(turns, expected):
            assert client.step(MemSearchQAAction(text=turn)).observation.messages == obs
        assert max(len(json.dumps(obs, ensure_ascii=False).encode()) for obs in expected) > 500_000  # large ones went
        client.reset(seed=0)
        hostile = "<mem>x\udc3a</mem><think>t</think><search>Momo \udc3a</search>"
        try:
            result = client.step(MemSearchQAAction(text=hostile))
            assert result.observation.messages[-2]["role"] == "assistant"
        except RuntimeError as e:
            assert "surrogates not allowed" in str(e)
        seen, result = play_through(client, "oracle", 0)
        assert result.reward == 2 and seen == local_observations("oracle", 0, **kwargs)


def test_typed_schema_and_metadata(memory_server) -> None:
    url, _ = memory_server
    schema = requests.get(f"{url}/schema", timeout=10).json()
    assert schema["action"]["required"] == ["text"]
    assert {"messages", "info", "done", "reward", "truncated"} <= set(schema["observation"]["properties"])
    assert requests.get(f"{url}/metadata", timeout=10).json()["name"] == "MemSearchQA-v0"
    first = requests.post(f"{url}/reset", json={"seed": 0}, timeout=10).json()
    assert first["observation"]["messages"] == MemSearchQAEnv(context="memory", **SETTINGS).reset(seed=0)[0]


def test_command_line_options_are_the_envs_arguments() -> None:
    args = parse_args(["--context", "full", "--objectives", "2", "--retriever-options", '{"timeout": 3}',
                       "--dataset", "hotpotqa", "--require-search", "false", "--max-sessions", "8"])
    assert args.env_kwargs == {"context": "full", "objectives": 2, "retriever_options": {"timeout": 3},
                               "dataset": "hotpotqa", "require_search": False}
    assert args.max_sessions == 8
    env_args = set(inspect.signature(MemSearchQAEnv.__init__).parameters) - {"self", "render_mode"}
    assert env_args <= set(parse_args(["--" + a.replace("_", "-") + "=1" for a in env_args]).env_kwargs)
    for argv, message in [(["--context", "window"], "window:K needs a positive integer K .* got 'window'"),
                          (["--max-turns", "many"], "max_turns must be an integer"),
                          (["--max-sessions", "0"], "max_concurrent_envs")]:
        with pytest.raises(SystemExit, match=message):
            main(argv)


def test_the_documented_snippet() -> None:
    """docs/trainers.md's OpenEnv example: the documented server command's options (port 0 here, a free
    one, instead of 8000), and the client snippet against it."""
    [command_block, snippet] = [b for b in code_blocks("docs/trainers.md") if b.heading == "OpenEnv"]
    for block in (command_block, snippet):
        assert block.tested_by == "tests/test_openenv_server.py::test_the_documented_snippet"
    [command] = shell_commands(command_block)
    module, argv = python_module_args(command.removesuffix("&").strip())
    assert module == "integrations.openenv_server"
    args = parse_args(argv)
    assert (args.host, args.port) == ("127.0.0.1", 8000)
    with serve_in_thread(max_sessions=args.max_sessions, **args.env_kwargs) as (url, _):
        namespace: dict[str, Any] = {}
        exec(snippet.text.replace("http://127.0.0.1:8000", url), namespace)
    result = namespace["result"]
    assert result.done and result.reward == result.observation.metadata["score"] == args.env_kwargs["objectives"]
