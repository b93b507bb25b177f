"""A real vLLM OpenAI server on 127.0.0.1 serving the tiny policy: the OpenAI-compatible agent (chat
and completions) acts as the HF model does, and the token-level VLLMServerBackend generates, scores
and reloads weights in agreement with the HF backend on the same weights."""

from __future__ import annotations

import copy
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("vllm")
import requests
from engine_helpers import QUESTION, TURN, chat_ids, flat, max_diff, memorised_policy

from agents.backends import HFBackend, VLLMServerBackend
from agents.backends.http_json import ServerError
from agents.backends.vllm_engine import cpu_env
from agents.model import STOP, ModelAgent
from agents.openai_agent import OpenAIAgent

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

TOL = 1e-4
MEMORISED = [{"role": "user", "content": QUESTION}]
OTHERS = [[{"role": "system", "content": "Answer."}, {"role": "user", "content": q}]
          for q in ("Where was Timo Solri born?", "x", "Kelmo")]


@pytest.fixture(scope="module")
def trainer(policy_dir: Path, tokenizer):
    return memorised_policy(policy_dir, tokenizer)


@pytest.fixture(scope="module")
def server(trainer, tokenizer, tmp_path_factory):
    """``python -m vllm.entrypoints.openai.api_server`` with the trained weights; its base URL."""
    model_dir = tmp_path_factory.mktemp("served")
    trainer.save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = (tmp_path_factory.mktemp("server") / "server.log").open("w")
    env = {**os.environ, **cpu_env(), "VLLM_SERVER_DEV_MODE": "1", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir),
         "--served-model-name", "tiny", "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32",
         "--enforce-eager", "--max-model-len", "1024", "--logprobs-mode", "processed_logprobs", "--seed", "0"],
        stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while True:
            if proc.poll() is not None:
                pytest.fail(f"vLLM server exited ({proc.returncode}):\n{Path(log.name).read_text()[-3000:]}")
            try:
                if requests.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"vLLM server not healthy after 300 s:\n{Path(log.name).read_text()[-3000:]}")
            time.sleep(1)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # the server and its engine process, started by this fixture
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


@pytest.fixture(scope="module")
def hf(trainer, tokenizer) -> HFBackend:
    return HFBackend(trainer, tokenizer)




def test_openai_agent_acts_as_the_model_does(server: str, hf: HFBackend, tokenizer, policy_dir: Path) -> None:
    reference = ModelAgent(hf, max_new_tokens=24)
    observations = [MEMORISED, *OTHERS]
    expected = [tokenizer.decode(tokenizer.encode(a), skip_special_tokens=True)  # the server's text drops them
                for a in reference.act_batch(observations, [{}] * len(observations))]
    assert expected[0] == TURN[:TURN.index("</search>") + len("</search>")]  # a turn cut at its stop string
    chat = OpenAIAgent(f"{server}/v1", "tiny", max_tokens=24, concurrency=2)
    assert chat.act_batch(observations, [{}] * len(observations)) == expected
    completions = OpenAIAgent(f"{server}/v1", "tiny", api="completions", tokenizer=str(policy_dir), max_tokens=24)
    assert [completions.act(o, {}) for o in observations] == expected


def test_server_backend_agrees_with_hf(server: str, hf: HFBackend, tokenizer) -> None:
    backend = VLLMServerBackend(server, tokenizer, concurrency=4)
    assert backend.model == "tiny"
    prompts = [chat_ids(tokenizer, o) for o in (MEMORISED, *OTHERS)]
    generations = backend.generate(prompts, max_new_tokens=20, n=2, stop=["</search>", "k"], seed=0)
    contexts = [p for p in prompts for _ in range(2)]
    tokens = [g.token_ids for g in flat(generations)]
    assert max_diff([g.logprobs for g in flat(generations)], hf.score(contexts, tokens)) <= TOL
    assert max_diff(backend.score(contexts, tokens), hf.score(contexts, tokens)) <= TOL
    assert tokens == [g.token_ids for g in flat(backend.generate(prompts, max_new_tokens=20, n=2,
                                                                 stop=["</search>", "k"], seed=0))]
    for stop in (list(STOP), ["more text"]):
        ours = flat(backend.generate(prompts, max_new_tokens=30, temperature=0, stop=stop))
        ref = flat(hf.generate(prompts, max_new_tokens=30, temperature=0, stop=stop))
        assert [(g.token_ids, g.finish_reason) for g in ours] == [(g.token_ids, g.finish_reason) for g in ref]
        assert max_diff([g.logprobs for g in ours], [g.logprobs for g in ref]) <= TOL


def test_server_backend_reloads_weights(server: str, trainer, hf: HFBackend, tokenizer) -> None:
    backend = VLLMServerBackend(f"{server}/v1", tokenizer)
    prompts = [chat_ids(tokenizer, o) for o in (MEMORISED, *OTHERS)]
    tokens = [g.token_ids for g in flat(backend.generate(prompts, max_new_tokens=12, seed=1))]
    moved = copy.deepcopy(trainer)
    with torch.no_grad():
        for p in moved.parameters():
            p.add_(torch.randn(p.shape, generator=torch.Generator().manual_seed(0)) * 0.05)
    try:
        backend.update_weights(moved)
        assert backend.last_sync_s is not None
        now = backend.score(prompts, tokens)
        assert max_diff(now, HFBackend(moved, tokenizer).score(prompts, tokens)) <= TOL
        assert max_diff(now, hf.score(prompts, tokens)) > 0.01
    finally:
        backend.update_weights(trainer)
    assert max_diff(backend.score(prompts, tokens), hf.score(prompts, tokens)) <= TOL


def test_server_errors_are_clear(server: str, tokenizer) -> None:
    backend = VLLMServerBackend(server, tokenizer, model="no-such-model", attempts=1)
    with pytest.raises(ServerError, match=rf"vLLM server at {server}/v1/completions rejected the request"):
        backend.generate([[5, 6]], max_new_tokens=2)
