"""What needs a GPU in a verl run, on the CPU, for tests/on_verl: a rollout replica's server (the
project's HF backend behind verl's vLLM/SGLang server contract) and the FSDP actor/ref worker group
(the tiny policy trained by verl's own mini-batch split and PPO loss). Everything around them in
the tests is verl's own: its LLM client and router, checkpoint-engine manager, agent-loop workers,
TransferQueue, trainer, advantage and metrics code.
"""

from __future__ import annotations

import itertools
from typing import Any

import ray
import torch
import transfer_queue as tq
from tensordict import TensorDict
from transfer_queue import KVBatchMeta
from transformers import AutoModelForCausalLM, AutoTokenizer
from verl.utils import tensordict_utils as tu
from verl.utils.config import omega_conf_to_dataclass
from verl.workers.rollout.llm_server import LLMServerClient, LLMServerManager
from verl.workers.rollout.replica import RolloutReplica, TokenOutput
from verl.workers.utils.losses import ppo_loss

from agents.backends.hf import HFBackend
from algorithms.sft import SHIPPED

# What verl's SGLang server hands on to sglang's SamplingParams(**...) (sglang 0.5.12,
# sglang/srt/sampling/sampling_params.py) after popping max_tokens, logprobs and prompt_logprobs
# (verl/workers/rollout/sglang_rollout/async_sglang_server.py): a key outside it fails the request.
SGLANG_SAMPLING = {"max_new_tokens", "stop", "stop_token_ids", "stop_regex", "temperature", "top_p", "top_k", "min_p",
                   "frequency_penalty", "presence_penalty", "repetition_penalty", "min_new_tokens", "n", "json_schema",
                   "regex", "ebnf", "structural_tag", "ignore_eos", "skip_special_tokens",
                   "spaces_between_special_tokens", "no_stop_trim", "custom_params", "stream_interval", "logit_bias",
                   "sampling_seed"}


def load_policy(path: str = str(SHIPPED)) -> tuple[Any, torch.nn.Module]:
    return AutoTokenizer.from_pretrained(path), AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()


class StandInServer:
    """A rollout replica's server (verl's ``vLLMHttpServer.generate`` contract) over the project's HF
    backend: a generation returns token ids and, when asked, their log-probs; ``prompt_logprobs=0``
    returns entry ``k`` = ``[log π(token k+1 | tokens ≤ k)]`` then a dummy ``[0.0]``, as verl's
    ``extract_prompt_logprobs`` does; ``extra_fields["global_steps"]`` is the weights' version. Like
    vLLM it refuses a prompt that leaves no room for one token in ``max_model_len``; as ``engine="sglang"``
    it refuses sampling keys that SGLang's ``SamplingParams`` does not take. Each sampled request gets the
    next seed, so runs repeat."""

    def __init__(self, backend: HFBackend | None = None, *, engine: str = "vllm", max_model_len: int | None = None):
        if backend is None:
            tokenizer, model = load_policy()
            backend = HFBackend(model, tokenizer)
        self.backend, self.engine = backend, engine
        self.max_model_len = max_model_len or backend.model.config.max_position_embeddings
        self.seeds, self.requests, self.global_steps = itertools.count(), [], None

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any],
                       image_data: Any = None, video_data: Any = None, **kwargs: Any) -> TokenOutput:
        p = dict(sampling_params)
        self.requests.append(p)
        if len(prompt_ids) > self.max_model_len - 1:
            raise ValueError(f"Prompt length ({len(prompt_ids)}) leaves no room to generate within the model's "
                             f"maximum context length ({self.max_model_len})")
        unknown = set(p) - {"max_tokens", "logprobs", "prompt_logprobs"} - SGLANG_SAMPLING
        if self.engine == "sglang" and unknown:
            raise TypeError(f"SamplingParams.__init__() got an unexpected keyword argument {sorted(unknown)[0]!r}")
        extra = {"global_steps": self.global_steps}
        if "prompt_logprobs" in p:
            assert p["prompt_logprobs"] == 0 and p["max_tokens"] == 1
            [logps] = self.backend.score([prompt_ids[:1]], [prompt_ids[1:]])
            return TokenOutput(token_ids=[0], extra_fields={**extra, "prompt_logprobs": [[x] for x in logps] + [[0.0]]})
        [[g]] = self.backend.generate([prompt_ids], max_new_tokens=p["max_tokens"], temperature=p["temperature"],
                                      top_p=p["top_p"], stop=p.get("stop", ()), seed=next(self.seeds))
        return TokenOutput(token_ids=g.token_ids, log_probs=g.logprobs if p.get("logprobs") else None,
                           stop_reason="completed", extra_fields=extra)

    async def set_global_steps(self, global_steps: int) -> None:
        self.global_steps = global_steps

    async def load_weights(self, state_dict: dict[str, torch.Tensor]) -> None:
        self.backend.model.load_state_dict(state_dict)

    async def sleep(self) -> None:  # vLLM frees its weights and KV cache here; nothing to free on the CPU
        return None

    async def wake_up(self) -> None:
        return None


class _InProcess:
    """``handle.method.remote(...)`` of a Ray actor handle, for an object in this process."""

    def __init__(self, target: Any):
        self.target = target

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.target, name)
        return type("Remote", (), {"remote": staticmethod(method)})


class InProcessClient(LLMServerClient):
    """verl's ``LLMServerClient`` with its Ray routing replaced by one server in this process: its
    ``generate`` (which sets every output's ``min_global_steps``/``max_global_steps``) is verl's own."""

    def __init__(self, config: Any, server: StandInServer):
        super().__init__(config)
        self.server = server

    async def _acquire_server(self, request_id: str, **extra: Any) -> tuple[str, Any]:
        return "in-process", _InProcess(self.server)

    def _release_server(self, server_id: str, request_id: str | None = None) -> None:
        return None


class StandInReplica(RolloutReplica):
    """A rollout replica whose server is a ``StandInServer`` Ray actor (``launch_servers`` is the hook
    verl's vLLM and SGLang replicas implement)."""

    async def launch_servers(self) -> None:
        server = ray.remote(StandInServer).options(name=f"stand_in_server_{self.replica_rank}").remote(
            engine=self.config.name, max_model_len=self.config.max_model_len)
        self.servers, self._server_handle, self._server_address = [server], server, f"stand-in:{self.replica_rank}"


class StandInServerManager(LLMServerManager):
    """verl's ``LLMServerManager`` (its load balancer, its clients) over ``StandInReplica``s, through its
    ``rollout_replica_class`` hook."""

    rollout_replica_class = StandInReplica


class StandInWorkers:
    """The FSDP actor/ref worker group (one data-parallel rank) on the CPU: the tiny policy and a frozen
    reference copy compute log-probs into TransferQueue as verl's workers do, and ``update_actor`` trains
    as verl's ``TrainingWorker.train_mini_batch`` does: verl's own mini-batch iterator over the rows in
    the trainer's order, verl's own ``ppo_loss`` normalised as its FSDP engine normalises it. Each
    mini-batch's ``-d loss / d log π`` of every response token (its advantage times its loss weight, at a
    ratio of 1) is kept in ``weights``, by row key, for the tests."""

    world_size, workers = 1, []

    def __init__(self, config: Any, lr: float = 1e-3):
        self.config = config
        self.actor_config = omega_conf_to_dataclass(config.actor_rollout_ref.actor)
        self.model, self.ref = load_policy()[1].train(), load_policy()[1]
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=lr)
        self._dispatch_info: dict[str, list[int]] = {}
        self.servers: list[Any] = []
        self.weights: list[dict[str, torch.Tensor]] = []

    def _query_dispatch_info(self, role: str) -> list[int]:
        return [0]

    def log_probs(self, model: torch.nn.Module, input_ids: torch.Tensor, temperature: float
                  ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(log π(token k+1 | ≤ k), entropy)`` of every token of the rows, flat (the rows one after the
        other), 0 at each row's last token: the layout of verl's workers' outputs."""
        rows = input_ids.unbind()
        padded = torch.nn.utils.rnn.pad_sequence(rows, batch_first=True)
        mask = torch.nn.utils.rnn.pad_sequence([torch.ones_like(r) for r in rows], batch_first=True)
        logp_all = torch.log_softmax(model(input_ids=padded, attention_mask=mask).logits.float() / temperature, -1)
        logp = torch.nn.functional.pad(logp_all[:, :-1].gather(-1, padded[:, 1:, None]).squeeze(-1), (0, 1))
        entropy = -(logp_all.exp() * logp_all).sum(-1)
        return tuple(torch.cat([x[i, :len(r)] for i, r in enumerate(rows)]) for x in (logp, entropy))

    def _write_log_probs(self, model: torch.nn.Module, batch: KVBatchMeta, fields: list[str]) -> KVBatchMeta:
        data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=["input_ids"])
        with torch.no_grad():
            flat = self.log_probs(model, data["input_ids"], batch.extra_info["temperature"])
        offsets = data["input_ids"].offsets()
        out = dict(zip(("log_probs", "entropy"), (torch.nested.nested_tensor_from_jagged(x, offsets=offsets)
                                                   for x in flat)))
        tq.kv_batch_put(keys=batch.keys, partition_id=batch.partition_id,
                        fields=TensorDict({k: out[k] for k in fields}, batch_size=len(batch)))
        return batch

    def compute_log_prob(self, batch: KVBatchMeta) -> KVBatchMeta:
        return self._write_log_probs(self.model, batch, ["log_probs", "entropy"])

    def compute_ref_log_prob(self, batch: KVBatchMeta) -> KVBatchMeta:
        return self._write_log_probs(self.ref, batch, ["log_probs"])

    def update_actor(self, batch: KVBatchMeta) -> dict[str, Any]:
        fields = ["input_ids", "prompts", "responses", "response_mask", "loss_mask", "old_log_probs", "advantages",
                  "ref_log_prob"]
        data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=fields)
        data["row"] = torch.arange(len(batch))
        info = dict(batch.extra_info)
        minibatches = tu.make_iterator(data, mini_batch_size=info["mini_batch_size"], epochs=info["epochs"],
                                       seed=info["seed"], dataloader_kwargs=info["dataloader_kwargs"])
        self.weights, losses, norms = [], [], []
        for mini in minibatches:
            # normalised as verl's FSDP engine normalises it: the mini-batch's token count, one rank
            tu.assign_non_tensor(mini, dp_size=1, batch_num_tokens=int(mini["loss_mask"].values().sum()),
                                 global_batch_size=info["global_batch_size"])
            logp, _ = self.log_probs(self.model, mini["input_ids"], info["temperature"])
            logp.retain_grad()
            loss, _ = ppo_loss(self.actor_config, {"log_probs": logp}, mini)
            loss.backward()
            ends = mini["input_ids"].offsets()[1:].tolist()
            self.weights.append({batch.keys[row]: -logp.grad[end - n - 1: end - 1]  # the response's log-probs
                                 for row, end, n in zip(mini["row"].tolist(), ends,
                                                        mini["responses"].offsets().diff().tolist())})
            norms.append(torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.actor_config.grad_clip).item())
            self.optimizer.step()
            self.optimizer.zero_grad()
            losses.append(loss.item())
        return {"metrics": {"pg_loss": losses, "grad_norm": norms, "mfu": 0.0}}

    def update_weights(self, global_steps: int | None = None, mode: str = "auto") -> list[Any]:
        """The naive checkpoint engine: the trained weights into every server, then their version."""
        state = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
        return [call for server in self.servers
                for call in (server.load_weights.remote(state), server.set_global_steps.remote(global_steps))]
