"""verl's whole training step on the CPU: ``MemPOTrainer.fit`` for two steps, with verl's agent-loop
workers playing ``MemSearchQAAgentLoop`` episodes into TransferQueue, its replay buffer, its
advantage (the trainer mode's), its metrics and its logging. Only what needs a GPU is a stand-in
(``verl_standins``): the rollout replica's server and the FSDP actor/ref worker group, each at the
interface verl calls.

Runs in the verl environment (``bash scripts/install_verl.sh``); skipped where verl is absent.
"""

import asyncio
import json
from pathlib import Path

import pytest

pytest.importorskip("verl")
pytest.importorskip("transfer_queue")

import torch
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from transfer_queue import KVBatchMeta
from verl.checkpoint_engine import CheckpointEngineManager
from verl.experimental.reward_loop import RewardLoopManager
from verl.trainer.ppo.v1 import AgentLoopManagerTQ
from verl.utils.config import omega_conf_to_dataclass
from verl_standins import StandInServerManager, StandInWorkers

from algorithms.sft import SHIPPED
from mempo_verl import data
from mempo_verl.main import check_datasets, prepare_config
from mempo_verl.trainer import MemPOTrainer

CONFIG_DIR = str(Path(__file__).resolve().parents[2] / "mempo_verl" / "config")


def setup_on_cpu(trainer: MemPOTrainer) -> StandInWorkers:
    """``PPOTrainer._setup``, in its order, with the GPU side on the CPU: the actor/ref worker group is
    ``StandInWorkers`` and the rollout replicas ``StandInReplica``s; the data loaders, reward workers,
    LLM server manager, load balancer, checkpoint-engine manager and checkpoint loading are verl's."""
    trainer._init_tokenizer()
    trainer._init_dataloader()
    trainer._init_dump_executor()
    trainer._init_resource_pool_mgr()  # the GPU pools are only counted (throughput metrics), never created
    workers = StandInWorkers(trainer.config)
    trainer.actor_rollout_wg = trainer.ref_policy_wg = workers
    trainer.ref_in_actor = False
    trainer.reward_loop_manager = RewardLoopManager(config=trainer.config, rm_resource_pool=None)
    trainer.teacher_model_manager = trainer.distillation_config = None
    trainer.llm_server_manager = StandInServerManager.create(config=trainer.config, worker_group=workers)
    workers.servers = [replica.server_handle for replica in trainer.llm_server_manager.get_replicas()]
    engine = omega_conf_to_dataclass(trainer.config.actor_rollout_ref.rollout.checkpoint_engine)
    engine.backend = "naive"
    trainer.checkpoint_manager = CheckpointEngineManager(config=engine, actor_wg=workers,
                                                         replicas=trainer.llm_server_manager.get_replicas())
    trainer.checkpoint_manager.sleep_replicas()
    trainer._load_checkpoint()
    trainer.on_init_end()
    return workers


def test_two_training_steps_through_verls_fit(tmp_path, monkeypatch, transfer_queue):
    """Two MemPO steps of 2 questions x 2 episodes, validated after the last, each step's rows split into
    several mini-batches: ``fit`` runs through, and every step logs the memory reward, the actor update
    and verl's staleness metrics (which need each row's weight versions), the weights of step 1 reaching
    the rollout server before step 2 generates."""
    data.main(["--out", str(tmp_path / "data"), "--train-episodes", "8", "--val-episodes", "2"])
    overrides = [f"actor_rollout_ref.model.path={SHIPPED}",
                 f"data.train_files={tmp_path}/data/train.parquet", f"data.val_files={tmp_path}/data/val.parquet",
                 "data.train_batch_size=2", "data.max_prompt_length=1024", "data.max_response_length=128",
                 "data.dataloader_num_workers=0", "actor_rollout_ref.rollout.n=2",
                 "actor_rollout_ref.actor.ppo_mini_batch_size=2",
                 "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
                 "actor_rollout_ref.rollout.agent.num_workers=1", "mempo.env.max_turns=4",
                 "trainer.n_gpus_per_node=1", "trainer.nnodes=1", "trainer.total_training_steps=2",
                 "trainer.val_before_train=false", "trainer.test_freq=2", "trainer.save_freq=-1",
                 f"trainer.default_local_dir={tmp_path}/checkpoints", "trainer.logger=[console,file]"]
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base=None):
        config = compose("mempo_trainer", overrides=overrides)
    prepare_config(config)  # as python -m mempo_verl.main, then as verl's TaskRunnerV1.run
    check_datasets(config)
    config.transfer_queue.enable = True
    OmegaConf.resolve(config)
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(tmp_path / "metrics.jsonl"))

    trainer = MemPOTrainer(config)
    workers = setup_on_cpu(trainer)
    manager = AgentLoopManagerTQ.create(config=config, llm_client=trainer.get_llm_client(),
                                        teacher_client=trainer.get_teacher_client(),
                                        reward_loop_worker_handles=trainer.get_reward_handles())
    trainer.fit(manager)

    logged = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [entry["step"] for entry in logged] == [1, 2]
    for entry in logged:
        metrics = entry["data"]
        for key in ("mempo/p_mem", "mempo/p_full", "mempo/r_mem", "critic/score/mean", "actor/pg_loss",
                    "training/off_policy/trajectory_spans/max", "training/num_turns/mean"):
            assert key in metrics, key
        # every row was generated under the weights of the step before (verl's versions start at 0)
        assert metrics["training/off_policy/trajectory_spans/max"] == 1
        assert metrics["training/off_policy/trajectory_staleness/max"] == 0
        # the rollouts and the actor agree on their tokens' probabilities: step 1's update reached the server
        # before step 2 generated (without it, 0.999 here)
        assert metrics["training/rollout_probs_diff_max"] < 0.01
    assert any(key.startswith("val-core/") for key in logged[1]["data"])
    assert len(workers.weights) > 2  # several mini-batches a step


def make_config(*overrides):
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base=None):
        return compose("mempo_trainer", overrides=[f"actor_rollout_ref.model.path={SHIPPED}", *overrides])


TURNS = {("qa", 0): [9, 30, 4], ("qa", 1): [21], ("qb", 0): [5, 17], ("qb", 1): [12, 3, 25, 8]}  # tokens a turn
SCORES = {("qa", 0): 1.0, ("qa", 1): 0.0, ("qb", 0): 0.0, ("qb", 1): 1.0}


@pytest.fixture(scope="module")
def uneven_step(transfer_queue):
    """Four episodes of 3, 1, 2 and 4 turns of unequal lengths (two questions x two sessions, scores 1 and
    0 in each), put into TransferQueue by verl's own post-processing, through verl's own steps after
    sampling (balance, old and reference log-probs, the trainer mode's advantage, the actor update in
    mini-batches of 2 rows, the metrics). Yields the stand-in workers, each row's advantages, the metrics."""
    from verl.experimental.agent_loop.agent_loop import AgentLoopMetrics, AgentLoopOutput
    from verl.trainer.ppo.v1 import AgentLoopWorkerTQ

    config = make_config("mempo.memory_advantage=false", "actor_rollout_ref.rollout.n=2",
                         "actor_rollout_ref.actor.ppo_mini_batch_size=1", "data.max_response_length=64")
    ids = torch.Generator().manual_seed(0)
    worker = object.__new__(AgentLoopWorkerTQ.__ray_actor_class__)  # its post-processing, not its Ray set-up
    worker.reward_loop_worker_handles, worker.distillation_enabled, worker.processor = None, False, None
    keys = []
    for (uid, session), lengths in TURNS.items():
        rows = [AgentLoopOutput(prompt_ids=torch.randint(3, 1500, (40,), generator=ids).tolist(),
                                response_ids=torch.randint(3, 1500, (n,), generator=ids).tolist(),
                                response_mask=[1] * n, response_logprobs=[-1.0] * n, reward_score=SCORES[uid, session],
                                num_turns=2, metrics=AgentLoopMetrics(),
                                extra_fields={"mem_turns": [], "n_generated": sum(lengths), "reward_extra_info": {},
                                              "min_global_steps": 0, "max_global_steps": 0})
                for n in lengths]
        asyncio.run(worker._agent_loop_postprocess(rows, False, uid=uid, session_id=session, global_steps=1,
                                                   raw_prompt=[], extra_info={}))
        keys += [f"{uid}_{session}_{t}" for t in range(len(lengths))]
    tags = transfer_queue.kv_list("train")["train"]
    trainer = MemPOTrainer(config)
    trainer._init_tokenizer()
    trainer._init_resource_pool_mgr()
    trainer.actor_rollout_wg = trainer.ref_policy_wg = workers = StandInWorkers(config, lr=0.0)
    trainer.ref_in_actor, trainer.global_steps, metrics = False, 1, {}
    batch = KVBatchMeta(partition_id="train", keys=keys, tags=[tags[k] for k in keys])
    try:
        batch = trainer._balance_batch(batch, metrics)
        for stage in (trainer._compute_old_log_prob, trainer._compute_ref_log_prob, trainer._compute_advantage,
                      trainer._update_actor):
            batch = stage(batch, metrics=metrics)
        trainer._compute_metrics(batch, metrics, {"step": 1.0}, global_steps=1, epoch=0)
        advantages = transfer_queue.kv_batch_get(keys=keys, partition_id="train", select_fields=["advantages"])
        yield workers, dict(zip(keys, advantages["advantages"])), metrics, len(batch)
    finally:
        transfer_queue.kv_clear(keys=list(batch.keys), partition_id="train")


def test_every_episode_weighs_the_same_however_verl_splits_the_rows(uneven_step):
    """Trained with verl's ``ppo_loss``, every generated token has the same loss weight in every mini-batch
    (``-d loss / d log π`` over its advantage), so every episode weighs the same in the step's policy
    gradient, per unit of its outcome advantage. Under token-mean the weight would be 1 / (the mini-batch's
    tokens), which differ here."""
    workers, advantages, _, rows = uneven_step
    assert len(workers.weights) == rows // 2 >= 5  # mini-batches of ppo_mini_batch_size x n rows
    tokens = [sum(len(w) for key, w in mini.items() if key in advantages) for mini in workers.weights]
    assert len(set(tokens)) > 1  # mini-batches of different token counts
    constant = 1 / (2 * 64)  # 1 / (mini-batch rows x loss_scale_factor, the response length)
    episode = dict.fromkeys(TURNS, 0.0)
    for mini in workers.weights:
        for key, gradient in mini.items():
            if key in advantages:  # not one of verl's padding rows
                assert (gradient / advantages[key]).tolist() == pytest.approx([constant] * len(gradient), rel=1e-4)
                uid, session, _ = key.split("_")
                a_out = 0.5 ** 0.5 * (1 if SCORES[uid, int(session)] else -1)  # GRPO over scores 1 and 0
                episode[uid, int(session)] += (gradient / a_out).sum().item()
    assert list(episode.values()) == pytest.approx([next(iter(episode.values()))] * 4, rel=1e-4)


def test_logged_scores_weigh_each_episode_once(uneven_step):
    """verl copies an episode's reward to each of its rows: over rows the mean score here would be 7/10
    (the 3- and 4-turn episodes scored 1); over episodes it is 2/4."""
    *_, metrics, _ = uneven_step
    assert (metrics["critic/score/mean"], metrics["critic/score/max"], metrics["critic/score/min"]) == (0.5, 1.0, 0.0)
    assert metrics["critic/rewards/mean"] == 0.5
