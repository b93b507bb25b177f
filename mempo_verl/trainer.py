"""The MemPO trainer mode of verl's v1 trainer: verl's synchronous PPO step, plus the memory advantage.

``trainer.v1.trainer_mode=mempo`` selects ``MemPOTrainer``. Its one change is ``_compute_advantage``:
1. verl computes the outcome advantage as usual (``compute_advantage_for_multi_trajectories``: GRPO on
   each session's final row, copied to all its rows): the project's ``A_out``;
2. the memory advantage of ``algorithms.advantages`` is added on the ``<mem>`` tokens, from the
   ``P_mem``/``P_full`` that ``mempo_verl.agent_loop`` stored in each row's ``extra_fields``
   (``mempo.memory_advantage=false``: skipped, which is GRPO, the same code with the memory term off);
3. each episode's rows are scaled so that every episode weighs the same in the policy loss
   (``mempo.equal_episode_weight``).

Why 3: each turn is a row, so verl's ``seq-mean-token-mean`` would weigh an episode by its number of
turns, the bias the project's own learner removed (``algorithms/batch.py``), and verl has no per-row
loss weight. The config's ``seq-mean-token-sum-norm`` with a ``loss_scale_factor`` gives every generated
token one constant weight, 1 / (``ppo_mini_batch_size`` x ``rollout.n`` x ``loss_scale_factor``), in every
mini-batch; scaling episode ``e``'s advantages by ``n_mean / n_e`` (its generated tokens against the
batch's mean per episode) then gives every episode the same total weight, ``n_mean`` tokens' worth, in
the policy-gradient term of the step, however verl splits the rows into mini-batches. (``token-mean``
divides by each mini-batch's own token count, so an episode's weight would depend on its mini-batch;
``options.check_config`` refuses it.) The ratio clip is unchanged (PPO-clip is positively homogeneous
in the advantage). The KL loss (``actor.use_kl_loss``) is not scaled: every token weighs the same there,
so a longer episode weighs more.

verl copies an episode's reward to each of its rows, so its score statistics would weigh an episode by
its number of turns: ``_compute_metrics`` takes them over episodes instead.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import transfer_queue as tq
from tensordict import TensorDict
from transfer_queue import KVBatchMeta
from verl.trainer.ppo.v1 import PPOTrainerSync, register_trainer
from verl.workers.utils.padding import response_to_nested

from algorithms.advantages import memory_advantages, memory_rewards, token_advantages
from mempo_verl.options import check_config


def mempo_advantages(a_out: torch.Tensor, response_mask: torch.Tensor, keys: list[str], uids: list[str],
                     extra_fields: list[dict[str, Any]], *, memory_advantage: bool = True,
                     equal_episode_weight: bool = True) -> tuple[torch.Tensor, dict[str, float]]:
    """Per-token advantages of a batch of rows (``[rows, response tokens]``, right-padded).

    ``a_out``: verl's outcome advantages (constant over each row's response tokens); ``keys``: the rows'
    ``{uid}_{session}_{turn}`` keys; ``extra_fields``: what the agent loop stored (``mem_turns``,
    ``n_generated``). The memory reward ``P_mem - P_full`` is normalised over all scored turns of the
    same question (``uid``), as in ``algorithms.mempo``. Rows without a generated token carry nothing:
    verl's padding rows (``upsample_batch_to_divisible_size``) copy a real row's ``extra_fields``."""
    mask = response_mask.float()
    real = (mask.sum(1) > 0).tolist()
    a_out_rows = (a_out * mask).sum(1) / mask.sum(1).clamp(min=1)
    a_mem, mem_mask = torch.zeros_like(mask), torch.zeros_like(mask)
    stats: dict[str, float] = {}
    if memory_advantage:
        scored = [(r, span) for r, extra in enumerate(extra_fields) if real[r] for span in extra["mem_turns"]
                  if span["p_mem"] is not None]
        if not scored and any(span["turn"] > 0 for extra in extra_fields for span in extra["mem_turns"]):
            raise ValueError("no row carries P_mem/P_full, though later turns have <mem> spans: the agent loop "
                             "ran without mempo.memory_advantage (set it for both, or false for GRPO)")
        if scored:
            group_of = {uid: g for g, uid in enumerate(dict.fromkeys(uids))}
            r_mem = memory_rewards(torch.tensor([s["p_mem"] for _, s in scored]),
                                   torch.tensor([s["p_full"] for _, s in scored]))
            adv = memory_advantages(r_mem, torch.tensor([group_of[uids[r]] for r, _ in scored]))
            for (r, span), value in zip(scored, adv.tolist()):
                a_mem[r, span["start"]: span["end"]] = value
                mem_mask[r, span["start"]: span["end"]] = 1.0
            stats = {"mempo/p_mem": float(np.mean([s["p_mem"] for _, s in scored])),
                     "mempo/p_full": float(np.mean([s["p_full"] for _, s in scored])),
                     "mempo/r_mem": r_mem.mean().item(), "mempo/scored_turns": float(len(scored)),
                     # share of scored turns whose P_full saw only the most recent turns (agent_loop)
                     "mempo/p_full_shortened": float(np.mean([s["p_full_dropped_turns"] > 0 for _, s in scored]))}
    advantages = token_advantages(a_out_rows, a_mem, mask, mem_mask)
    if equal_episode_weight:
        sessions = [key.rsplit("_", 1)[0] for key in keys]
        n_generated = {s: max(int(e["n_generated"]), 1) for s, e, keep in zip(sessions, extra_fields, real) if keep}
        n_mean = float(np.mean(list(n_generated.values()))) if n_generated else 1.0
        advantages = advantages * torch.tensor([n_mean / n_generated.get(s, n_mean) for s in sessions])[:, None]
    return advantages, stats


@register_trainer("mempo")
class MemPOTrainer(PPOTrainerSync):
    """verl's synchronous trainer with the memory advantage (module docstring), as the config's
    ``mempo:`` section says (``memory_advantage``, ``equal_episode_weight``)."""

    def __init__(self, config: Any) -> None:
        self.options = check_config(config)
        super().__init__(config)

    def _build_replay_buffer(self) -> Any:
        # verl keys its synchronous behaviour (replay buffer, refills, resumption) on the mode's name
        # being "sync": this mode is "sync" with another advantage.
        self.trainer_mode = "sync"
        self.parameter_sync_step = self.config.trainer.v1.get("sync", {}).get("parameter_sync_step", 1)
        return super()._build_replay_buffer()

    def _compute_advantage(self, batch: KVBatchMeta, metrics: dict) -> KVBatchMeta:
        batch = super()._compute_advantage(batch, metrics)  # A_out, written to TransferQueue
        fields = ["uid", "response_mask", "advantages", "extra_fields"]
        data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=fields)
        nested_mask = data["response_mask"]
        advantages, stats = mempo_advantages(
            data["advantages"].to_padded_tensor(0.0), nested_mask.to_padded_tensor(0), list(batch.keys),
            [str(u) for u in data["uid"]], list(data["extra_fields"]),
            memory_advantage=self.options.memory_advantage, equal_episode_weight=self.options.equal_episode_weight)
        metrics.update(stats)
        nested = response_to_nested(advantages, nested_mask)
        return tq.kv_batch_put(keys=batch.keys, partition_id=batch.partition_id,
                               fields=TensorDict({"advantages": nested, "returns": nested}, batch_size=len(batch)))

    def _compute_metrics(self, batch: KVBatchMeta, metrics: dict, timing_raw: dict, global_steps: int,
                         epoch: int) -> None:
        """verl's metrics, with its score and reward statistics taken over episodes (each session's last
        row) instead of rows, which would weigh an episode by its number of turns."""
        super()._compute_metrics(batch, metrics, timing_raw, global_steps=global_steps, epoch=epoch)
        last: dict[str, tuple[int, str]] = {}
        for key, tag in zip(batch.keys, batch.tags):
            session, index = key.rsplit("_", 1)
            if not tag.get("is_padding", False) and int(index) >= last.get(session, (-1, ""))[0]:
                last[session] = (int(index), key)
        rewards = "token_level_rewards" if self.config.algorithm.use_kl_in_reward else "rm_scores"
        data = tq.kv_batch_get(keys=[key for _, key in last.values()], partition_id=batch.partition_id,
                               select_fields=sorted({"rm_scores", rewards}))
        for name, field in (("score", "rm_scores"), ("rewards", rewards)):
            per_episode = data[field].to_padded_tensor(0.0).sum(-1)
            metrics.update({f"critic/{name}/mean": per_episode.mean().item(),
                            f"critic/{name}/max": per_episode.max().item(),
                            f"critic/{name}/min": per_episode.min().item()})
