"""MemSearchQA-v0 as an OpenEnv environment server (openenv-core 0.3.0, the ``openenv`` extra):
``python -m integrations.openenv_server --context memory --objectives 2 --port 8000``.

Every WebSocket session (OpenEnv's ``/ws``, what ``EnvClient`` and so ``MemSearchQAClient`` speak)
gets its own ``MemSearchQAEnv`` (``SUPPORTS_CONCURRENT_SESSIONS``); sessions share only the question
set and the search index, which episodes only read (``mempo_env.sessions.env_factory``). A session
whose client disconnects, even mid-episode, is closed by OpenEnv's server; with ``--session-timeout``
an idle one is too. OpenEnv 0.3.0's HTTP ``/reset`` and ``/step`` build a new environment per request,
so episodes go through the WebSocket.

The action is the model's whole turn as text. The observation carries the exact next prompt in the
server's view (``messages``), ``done``, ``reward`` (the score at the end, else 0) and the env's
``info`` (gold objectives, turn verdicts, and at the end ``em``, ``f1``, ``format_ok``,
``format_failed``, ``total_chars``, ``peak_chars``, ... as ``docs/environment.md`` lists) as
``metadata``. openenv-core 0.3.0's ``serialize_observation`` leaves ``metadata`` out of what it sends
(huggingface/OpenEnv#616, fixed after 0.3.0), so the same dict travels as the observation's ``info``
and ``MemSearchQAClient`` puts it back into ``metadata``. Reset options (``index``, ``objectives``,
``questions``) are keyword arguments of ``reset``; the env checks them, and a refused reset, a bad
action or a step outside an episode is answered with the env's error, the session kept open.
"""

from __future__ import annotations

import argparse
import functools
import inspect
import json
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from fastapi import FastAPI
from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient
from openenv.core.env_server.http_server import HTTPEnvServer
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, ConcurrencyConfig, EnvironmentMetadata, Observation, State
from pydantic import Field

from mempo_env.env import MemSearchQAEnv
from mempo_env.sessions import env_factory
from mempo_env.views import Message


class MemSearchQAAction(Action):
    text: str = Field(description="the model's whole turn: <mem>…</mem><think>…</think> and one of "
                                  "<search>, <access>, <answer>")


class MemSearchQAObservation(Observation):
    messages: list[Message] = Field(description="the next prompt, in the server's view (memory or full)")
    info: dict[str, Any] = Field(default_factory=dict, description="the env's info; also the metadata")
    truncated: bool = Field(default=False, description="the episode ended unanswered (turn budget or overflow)")


class MemSearchQAState(State):
    done: bool = Field(default=True, description="no episode is running")
    messages: list[Message] = Field(default_factory=list, description="the whole history, whatever the view")


class MemSearchQAEnvironment(Environment[MemSearchQAAction, MemSearchQAObservation, MemSearchQAState]):
    """One session's episode; ``make_env`` builds its ``MemSearchQAEnv``."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, make_env: Callable[[], MemSearchQAEnv]):
        super().__init__()
        self.env = make_env()
        self._state = MemSearchQAState()

    def reset(self, seed: int | None = None, episode_id: str | None = None, **options: Any) -> MemSearchQAObservation:
        self._state = MemSearchQAState()
        obs, info = self.env.reset(seed=seed, options=options or None)
        self._state = MemSearchQAState(episode_id=episode_id or str(uuid.uuid4()), done=False)
        return MemSearchQAObservation(messages=obs, info=info, metadata=info)

    def step(self, action: MemSearchQAAction, timeout_s: float | None = None, **kwargs: Any) -> MemSearchQAObservation:
        """``timeout_s`` is not used: a search is bounded by the retriever's own timeouts."""
        obs, reward, terminated, truncated, info = self.env.step(action.text)
        self._state.step_count += 1
        self._state.done = terminated or truncated
        return MemSearchQAObservation(messages=obs, info=info, metadata=info, reward=reward,
                                      done=self._state.done, truncated=truncated)

    @property
    def state(self) -> MemSearchQAState:
        return self._state.model_copy(update={"messages": self.env.messages})

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(name="MemSearchQA-v0", version="0.1.0", description=(
            "Multi-turn search QA where the policy may keep only its own memory (MemPO): "
            f"{self.env.context} view, {self.env.objectives} question(s) per episode, {self.env.task.name}."))

    def close(self) -> None:
        self.env.close()


class MemSearchQAClient(EnvClient[MemSearchQAAction, MemSearchQAObservation, MemSearchQAState]):
    """OpenEnv's client for this server: ``MemSearchQAClient(base_url=URL).sync()`` for plain calls."""

    def _step_payload(self, action: MemSearchQAAction) -> dict[str, Any]:
        return action.model_dump()

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[MemSearchQAObservation]:
        sent = payload["observation"]
        observation = MemSearchQAObservation(**sent, metadata=sent["info"], reward=payload["reward"],
                                             done=payload["done"])
        return StepResult(observation=observation, reward=payload["reward"], done=payload["done"])

    def _parse_state(self, payload: dict[str, Any]) -> MemSearchQAState:
        return MemSearchQAState(**payload)


def create_app(*, max_sessions: int = 64, session_timeout: float | None = None, **env_kwargs: Any) -> FastAPI:
    """The server's FastAPI app: OpenEnv's routes (``/ws``, ``/reset``, ``/step``, ``/state``, ``/schema``,
    ``/health``, ...) for ``MemSearchQAEnv(**env_kwargs)``. ``max_sessions`` concurrent sessions at most;
    ``session_timeout``: seconds after which an idle session is closed (``None``: never). The OpenEnv
    ``HTTPEnvServer`` is ``app.state.env_server`` (its ``active_sessions``)."""
    server = HTTPEnvServer(functools.partial(MemSearchQAEnvironment, env_factory(**env_kwargs)),
                           MemSearchQAAction, MemSearchQAObservation,
                           concurrency_config=ConcurrencyConfig(max_concurrent_envs=max_sessions,
                                                                session_timeout=session_timeout))
    app = FastAPI(title="MemSearchQA-v0 (OpenEnv)")
    server.register_routes(app)
    app.state.env_server = server
    return app


@contextmanager
def serve_in_thread(**options: Any) -> Iterator[tuple[str, HTTPEnvServer]]:
    """``create_app(**options)`` served on a free loopback port from a background thread, for a test, a
    notebook or a benchmark in one process: yields (base URL, OpenEnv's ``HTTPEnvServer``) while it serves."""
    import uvicorn

    app = create_app(**options)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))  # a free port, held from here on
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the OpenEnv server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}", app.state.env_server
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def _value(text: str) -> Any:
    """A command-line value as JSON where it is JSON (``16``, ``true``, ``{"timeout": 10}``), else text."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The server's options, and one ``--ARG VALUE`` per ``MemSearchQAEnv`` argument (in ``env_kwargs``,
    only those given: the env's own defaults and checks apply)."""
    p = argparse.ArgumentParser(prog="python -m integrations.openenv_server", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--max-sessions", type=int, default=64, help="concurrent sessions at most")
    p.add_argument("--session-timeout", type=float, default=None, help="close a session idle this many seconds")
    env = p.add_argument_group("environment", "MemSearchQAEnv's arguments (docs/environment.md); values are "
                                              "JSON where they parse as JSON, else text")
    skip = ("self", "tokenizer", "render_mode")
    for name, param in inspect.signature(MemSearchQAEnv.__init__).parameters.items():
        if name not in skip:
            env.add_argument(f"--{name.replace('_', '-')}", dest=name, type=_value, default=argparse.SUPPRESS,
                             metavar="VALUE", help=f"default: {param.default!r}")
    env.add_argument("--tokenizer", dest="tokenizer", default=argparse.SUPPRESS, metavar="NAME",
                     help="a Hugging Face tokenizer (path or hub id): token costs in the metrics")
    args = p.parse_args(argv)
    server = ("host", "port", "max_sessions", "session_timeout")
    args.env_kwargs = {key: value for key, value in vars(args).items() if key not in server}
    return args


def main(argv: list[str] | None = None) -> None:
    import uvicorn

    args = parse_args(argv)
    if "tokenizer" in args.env_kwargs:
        from transformers import AutoTokenizer

        args.env_kwargs["tokenizer"] = AutoTokenizer.from_pretrained(args.env_kwargs["tokenizer"])
    try:
        app = create_app(max_sessions=args.max_sessions, session_timeout=args.session_timeout, **args.env_kwargs)
    except (ValueError, TypeError, FileNotFoundError) as e:  # a bad argument, named by the env or OpenEnv
        raise SystemExit(f"python -m integrations.openenv_server: error: {e}") from None
    uvicorn.run(app, host=args.host, port=args.port)


if __name__ == "__main__":
    main()
