"""SGLangBackend against a stand-in for an SGLang server (SGLang cannot start without CUDA).

The stand-in implements SGLang 0.5.23's native endpoints as its source defines them, written here
independently of ``agents.backends.sglang_api`` so the test checks the client's shapes rather than
repeating them: ``/generate`` (``GenerateReqInput``, ``SamplingParams``, the ``meta_info`` answer),
``/update_weights_from_disk``, ``/flush_cache``, ``/health``. It generates with the HF backend, so
the log-probs are real. What a real SGLang may do differently is listed in ``sglang_api``.
"""

from __future__ import annotations

import copy
import socket
from pathlib import Path
from typing import Any

import pytest
from engine_helpers import flat, max_diff
from fake_server import serve

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
from safetensors import safe_open
from transformers import AutoModelForCausalLM

from agents.backends import HFBackend, SGLangBackend, make_backend
from agents.backends.http_json import ServerError

TOL = 1e-4
# Field names from sglang/srt/managers/io_struct.py (GenerateReqInput) and
# sglang/srt/sampling/sampling_params.py (SamplingParams), a subset: the stand-in rejects the rest.
REQUEST_FIELDS = {"input_ids", "sampling_params", "return_logprob", "logprob_start_len", "top_logprobs_num",
                  "return_text_in_logprobs", "stream", "rid"}
SAMPLING_FIELDS = {"max_new_tokens", "stop", "stop_token_ids", "temperature", "top_p", "top_k", "min_p", "n",
                   "ignore_eos", "skip_special_tokens", "spaces_between_special_tokens", "no_stop_trim",
                   "sampling_seed", "min_new_tokens", "frequency_penalty", "presence_penalty", "repetition_penalty"}


class StandIn:
    """SGLang's HTTP behaviour over an HF model; ``calls`` records (path, body)."""

    def __init__(self, model: Any, tokenizer: Any) -> None:
        self.backend = HFBackend(model, tokenizer)
        self.tokenizer = tokenizer
        self.calls: list[tuple[str, Any]] = []
        self.abort = False

    def __call__(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        self.calls.append((path, body))
        route = path.split("?")[0]
        if route == "/health":
            return 200, ""
        if route == "/flush_cache":
            return 200, "Cache flushed.\nPlease check backend logs for more details. (When there are running or " \
                        "waiting requests, the operation will not be performed.)\n"
        if route == "/update_weights_from_disk" and method == "POST":
            try:
                model = AutoModelForCausalLM.from_pretrained(body["model_path"], dtype=torch.float32).eval()
            except Exception as e:  # SGLang answers any load failure with 400
                return 400, {"success": False, "message": f"Failed to update weights: {e}.", "num_paused_requests": 0}
            self.backend = HFBackend(model, self.tokenizer)
            return 200, {"success": True, "message": "Succeeded to update model weights.", "num_paused_requests": 0}
        if route == "/generate" and method == "POST":
            return self.generate(body)
        return 404, {"detail": "Not Found"}

    def generate(self, body: dict[str, Any]) -> tuple[int, Any]:
        if set(body) - REQUEST_FIELDS:
            return 400, {"error": f"unknown fields {set(body) - REQUEST_FIELDS}"}
        batch = bool(body["input_ids"]) and isinstance(body["input_ids"][0], list)
        inputs = body["input_ids"] if batch else [body["input_ids"]]
        params = body.get("sampling_params") or {}
        params = params if isinstance(params, list) else [params] * len(inputs)
        starts = body.get("logprob_start_len", -1)
        starts = starts if isinstance(starts, list) else [starts] * len(inputs)
        items = [self.one(ids, sp, start, body.get("return_logprob", False))
                 for ids, sp, start in zip(inputs, params, starts)]
        return 200, items if batch else items[0]

    def one(self, ids: list[int], sp: dict[str, Any], start: int, logprob: bool) -> dict[str, Any]:
        assert not set(sp) - SAMPLING_FIELDS, set(sp) - SAMPLING_FIELDS
        assert sp.get("n", 1) == 1, "the stand-in samples once per item"
        temperature = sp.get("temperature", 1.0)
        stop = sp.get("stop") or []
        (g,), = self.backend.generate([ids], max_new_tokens=sp.get("max_new_tokens", 128),
                                      temperature=0.0 if temperature < 1e-6 else temperature,
                                      top_p=sp.get("top_p", 1.0), stop=stop, seed=sp.get("sampling_seed"))
        text = self.tokenizer.decode(g.token_ids, skip_special_tokens=sp.get("skip_special_tokens", True))
        matched = next((s for s in stop if s in text), None)
        if matched is not None:
            reason = {"type": "stop", "matched": matched}
            if not sp.get("no_stop_trim", False):
                text = text[:text.index(matched)]
        elif g.finish_reason == "stop":
            reason = {"type": "stop", "matched": g.token_ids[-1]}
        else:
            reason = {"type": "length", "length": len(g.token_ids)}
        if self.abort:
            reason = {"type": "abort", "message": "aborted by the test", "status_code": 500, "err_type": None}
        meta: dict[str, Any] = {"id": "x", "finish_reason": reason, "prompt_tokens": len(ids),
                                "completion_tokens": len(g.token_ids), "cached_tokens": 0}
        if logprob:
            meta["output_token_logprobs"] = [[lp, t, None] for lp, t in zip(g.logprobs, g.token_ids)]
            meta["input_token_logprobs"] = []
            if start >= 0:
                scored = self.backend.score([ids[:start + 1]], [ids[start + 1:]])[0]
                meta["input_token_logprobs"] = [[None, ids[start], None]] + [
                    [lp, t, None] for lp, t in zip(scored, ids[start + 1:])]
        return {"text": text, "output_ids": g.token_ids, "meta_info": meta}


@pytest.fixture(scope="module")
def model(policy_dir: Path):
    return AutoModelForCausalLM.from_pretrained(policy_dir, dtype=torch.float32).eval()


@pytest.fixture
def sglang(model, tokenizer):
    stand_in = StandIn(copy.deepcopy(model), tokenizer)
    with serve(stand_in) as (url, _):
        yield url, stand_in


def prompts(tokenizer) -> list[list[int]]:
    return [tokenizer.encode(q) for q in ("Who founded Pose Yufe?", "x", "Where was Timo Solri born? Kelmo")]




def test_generate_and_score(sglang, model, tokenizer) -> None:
    url, stand_in = sglang
    backend, hf, ps = SGLangBackend(url, tokenizer), HFBackend(model, tokenizer), prompts(tokenizer)
    generations = backend.generate(ps, max_new_tokens=16, n=2, stop=["k", "</search>"], seed=5)
    assert [len(g) for g in generations] == [2] * len(ps)
    path, body = stand_in.calls[-1]
    assert path == "/generate" and body["return_logprob"] is True and len(body["input_ids"]) == 2 * len(ps)
    assert all(sp["no_stop_trim"] and not sp["skip_special_tokens"] for sp in body["sampling_params"])
    contexts = [p for p in ps for _ in range(2)]
    tokens = [g.token_ids for g in flat(generations)]
    assert max_diff([g.logprobs for g in flat(generations)], hf.score(contexts, tokens)) <= TOL
    for g in flat(generations):
        assert g.text == tokenizer.decode(g.token_ids)
        assert g.finish_reason == ("stop" if any(s in g.text for s in ("k", "</search>")) else "length")
    # seeds: reproducible, one per sample, so identical prompts differ
    again = backend.generate(ps, max_new_tokens=16, n=2, stop=["k", "</search>"], seed=5)
    assert [g.token_ids for g in flat(again)] == tokens
    assert len({tuple(g.token_ids) for g in flat(backend.generate([ps[1]] * 3, max_new_tokens=8, seed=1))}) == 3
    # greedy equals the HF backend's greedy
    greedy = flat(backend.generate(ps, max_new_tokens=10, temperature=0))
    assert [g.token_ids for g in greedy] == [g.token_ids for g in flat(hf.generate(ps, max_new_tokens=10,
                                                                                   temperature=0))]
    scores = backend.score(contexts + [ps[0]], tokens + [[]])
    assert max_diff(scores[:-1], hf.score(contexts, tokens)) <= TOL and scores[-1] == []
    assert stand_in.calls[-1][1]["logprob_start_len"] == [len(c) - 1 for c in contexts]
    assert backend.generate(ps, max_new_tokens=0)[0][0].token_ids == []


def test_update_weights_from_disk_and_flush(sglang, model, tokenizer, tmp_path: Path) -> None:
    url, stand_in = sglang
    moved = copy.deepcopy(model)
    with torch.no_grad():
        for p in moved.parameters():
            p.add_(torch.randn(p.shape, generator=torch.Generator().manual_seed(0)) * 0.05)
    backend = make_backend(f"sglang:{url}#weights_dir={tmp_path / 'w'}", moved, tokenizer)  # pushes the weights
    assert [c[0] for c in stand_in.calls] == ["/update_weights_from_disk", "/flush_cache"]
    assert stand_in.calls[0][1] == {"model_path": str(tmp_path / "w"), "flush_cache": True}
    with safe_open(tmp_path / "w" / "model.safetensors", "pt") as f:
        assert "lm_head.weight" in f.keys()  # tied, but written out for engines that reload in place
    ps = prompts(tokenizer)
    tokens = [g.token_ids for g in flat(backend.generate(ps, max_new_tokens=8, seed=0))]
    assert max_diff(backend.score(ps, tokens), HFBackend(moved, tokenizer).score(ps, tokens)) <= TOL
    assert max_diff(backend.score(ps, tokens), HFBackend(model, tokenizer).score(ps, tokens)) > 0.01
    assert backend.last_sync_s is not None


def test_errors_name_the_server(sglang, tokenizer, tmp_path: Path) -> None:
    url, stand_in = sglang
    backend = SGLangBackend(url, tokenizer, weights_dir=tmp_path / "w")
    stand_in.abort = True
    with pytest.raises(ServerError, match=f"SGLang server at {url}: unexpected answer.*abort"):
        backend.generate(prompts(tokenizer), max_new_tokens=4)
    stand_in.abort = False

    class Broken(torch.nn.Module):  # saves a config the stand-in cannot load a model from
        config = type("C", (), {"save_pretrained": lambda self, d: None})()

    with pytest.raises(ServerError, match="update_weights_from_disk rejected the request: HTTP 400"):
        backend.update_weights(Broken())
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        down = f"http://127.0.0.1:{s.getsockname()[1]}"
    with pytest.raises(ServerError, match=rf"SGLang server at {down}/generate failed after 1 attempt.*unreachable"):
        SGLangBackend(down, tokenizer, attempts=1).generate([[5]], max_new_tokens=2)
