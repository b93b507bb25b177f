"""OpenAIAgent and its HTTP client against local stand-in servers: request shape, the stop string put
back, retries with backoff, clear errors for a server that is down, refuses or hangs, the concurrency
bound. (The agent against a real vLLM server: test_vllm_server.py.)"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import pytest
from fake_server import serve

from agents import make_agent
from agents.backends.http_json import JSONClient, ServerError
from agents.openai_agent import OpenAIAgent, close_action

OBS = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "Who founded Pose Yufe?"}]
TURN = "<mem>m</mem><think>t</think><search>Pose Yufe"


def chat_reply(text: str, **choice: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                         "finish_reason": "stop", **choice}]}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("choice, expected", [
    ({"finish_reason": "stop", "stop_reason": "</search>"}, TURN + "</search>"),  # vLLM names the stop string
    ({"finish_reason": "stop", "matched_stop": "</search>"}, TURN + "</search>"),  # SGLang too
    ({"finish_reason": "stop", "stop_reason": None}, TURN),  # vLLM: end-of-sequence token
    ({"finish_reason": "stop"}, TURN + "</search>"),  # others: close the open action
    ({"finish_reason": "length"}, TURN),
])
def test_close_action(choice: dict[str, Any], expected: str) -> None:
    assert close_action(TURN, choice) == expected
    assert close_action("<answer>x</answer>", {"finish_reason": "stop"}) == "<answer>x</answer>"


def test_chat_request_and_reply(monkeypatch) -> None:
    seen = []

    def app(method: str, path: str, body: Any) -> tuple[int, Any]:
        seen.append((method, path, body))
        return 200, chat_reply(TURN, stop_reason="</search>")

    monkeypatch.setenv("MY_KEY", "secret")
    with serve(app) as (url, headers):
        agent = make_agent(f"openai:{url}/v1#tiny#key_env=MY_KEY#max_tokens=64")
        assert agent.act(OBS, {}) == TURN + "</search>"
    method, path, body = seen[0]
    assert (method, path) == ("POST", "/v1/chat/completions")
    assert body["model"] == "tiny" and body["messages"] == OBS and body["max_tokens"] == 64
    assert body["temperature"] == 0.0 and body["stop"] == ["</search>", "</access>", "</answer>"]
    assert headers[0]["Authorization"] == "Bearer secret"


def test_completions_api_renders_the_chat_template(policy_dir) -> None:
    transformers = pytest.importorskip("transformers")
    from mempo_env.views import render_prompt

    seen = []

    def app(method: str, path: str, body: Any) -> tuple[int, Any]:
        seen.append((path, body))
        return 200, {"choices": [{"index": 0, "text": "<answer>Momil", "finish_reason": "stop"}]}

    tokenizer = transformers.AutoTokenizer.from_pretrained(policy_dir)
    with serve(app) as (url, _):
        agent = OpenAIAgent(f"{url}/v1", "tiny", api="completions", tokenizer=str(policy_dir))
        assert agent.act(OBS, {}) == "<answer>Momil</answer>"
    assert seen[0][0] == "/v1/completions" and seen[0][1]["prompt"] == render_prompt(OBS, tokenizer)
    with pytest.raises(ValueError, match="tokenizer"):
        OpenAIAgent(url, "tiny", api="completions")


def test_retries_5xx_then_succeeds() -> None:
    calls = []

    def app(method: str, path: str, body: Any) -> tuple[int, Any]:
        calls.append(path)
        return (503, {"error": "busy"}) if len(calls) < 3 else (200, chat_reply("<answer>x</answer>"))

    with serve(app) as (url, _):
        assert OpenAIAgent(url, "m", attempts=3).act(OBS, {}) == "<answer>x</answer>"
    assert len(calls) == 3
    calls.clear()
    with serve(app) as (url, _), pytest.raises(ServerError, match=f"{url}/chat/completions failed after 2 attempt"):
        OpenAIAgent(url, "m", attempts=2).act(OBS, {})


def test_a_refused_request_fails_at_once_with_the_servers_message() -> None:
    calls = []

    def app(method: str, path: str, body: Any) -> tuple[int, Any]:
        calls.append(path)
        return 400, {"error": {"message": "model 'm' does not exist"}}

    with serve(app) as (url, _), pytest.raises(ServerError, match="rejected the request: HTTP 400.*does not exist"):
        OpenAIAgent(url, "m").act(OBS, {})
    assert len(calls) == 1


def test_a_server_that_is_down_is_named() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    start = time.perf_counter()
    with pytest.raises(ServerError, match=rf"{url}/chat/completions failed after 2 attempt\(s\): unreachable"):
        make_agent(f"openai:{url}#m#attempts=2").act(OBS, {})
    assert time.perf_counter() - start < 10


def test_a_hanging_server_times_out() -> None:
    def app(method: str, path: str, body: Any) -> tuple[int, Any]:
        time.sleep(1.5)
        return 200, chat_reply("late")

    with serve(app) as (url, _), pytest.raises(ServerError, match="no answer within 0.3 s"):
        OpenAIAgent(url, "m", timeout=0.3, attempts=1).act(OBS, {})


def test_act_batch_keeps_order_within_the_concurrency_bound() -> None:
    lock, live, peak = threading.Lock(), [0], [0]

    def app(method: str, path: str, body: Any) -> tuple[int, Any]:
        with lock:
            live[0] += 1
            peak[0] = max(peak[0], live[0])
        time.sleep(0.2)
        with lock:
            live[0] -= 1
        return 200, chat_reply(f"<answer>{body['messages'][-1]['content']}</answer>")

    observations = [[{"role": "user", "content": str(i)}] for i in range(7)]
    with serve(app) as (url, _):
        actions = OpenAIAgent(url, "m", concurrency=3).act_batch(observations, [{}] * 7)
    assert actions == [f"<answer>{i}</answer>" for i in range(7)]
    assert peak[0] == 3


def test_client_edges() -> None:
    with pytest.raises(ValueError):
        JSONClient("http://127.0.0.1:1", concurrency=0)
    with pytest.raises(ValueError, match="api"):
        OpenAIAgent("http://127.0.0.1:1", "m", api="responses")
    with pytest.raises(ValueError, match="unknown agent spec"):
        make_agent("openai:http://127.0.0.1:1")  # no model name
    with pytest.raises(ValueError, match="agent spec .*colour"):
        make_agent("openai:http://127.0.0.1:1#m#colour=blue")

    def app(method: str, path: str, body: Any) -> tuple[int, Any]:
        return 200, {"unexpected": True}

    with serve(app) as (url, _), pytest.raises(ServerError, match="no choices"):
        OpenAIAgent(url, "m").act(OBS, {})
