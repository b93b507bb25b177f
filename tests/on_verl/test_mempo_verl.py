"""mempo_verl against verl 0.9.1 itself, on the CPU: the trainer mode, the agent loop driven by a
stand-in rollout server (the project's HF backend behind verl's generate and prompt_logprobs
contract), verl's TransferQueue post-processing, and the advantages it stores.

Runs in the verl environment (``bash scripts/install_verl.sh``); skipped where verl is absent.
"""

import asyncio
import itertools
from pathlib import Path

import pytest

pytest.importorskip("verl")
pytest.importorskip("transfer_queue")

import numpy as np
import torch
from hydra import compose, initialize_config_dir
from transformers import AutoModelForCausalLM, AutoTokenizer
from verl.experimental.agent_loop.agent_loop import DictConfigWrap
from verl.protocol import DataProto
from verl.trainer.ppo.v1 import get_trainer_cls
from verl.trainer.ppo.v1.utils import compute_advantage_for_multi_trajectories
from verl.utils.dataset.rl_dataset import RLHFDataset
from verl.workers.rollout.replica import TokenOutput

from agents.backends.hf import HFBackend
from algorithms.advantages import grpo_advantages, memory_advantages, memory_rewards
from algorithms.batch import build_samples
from algorithms.memory_reward import answer_probabilities, scored_turns
from algorithms.rollout import collect_rollouts
from algorithms.sft import SHIPPED
from mempo_env.env import MemSearchQAEnv
from mempo_env.tasks import resolve_task
from mempo_verl.agent_loop import MemSearchQAAgentLoop
from mempo_verl.options import MemPOOptions
from mempo_verl.trainer import MemPOTrainer, mempo_advantages

CONFIG_DIR = str(Path(__file__).resolve().parents[2] / "mempo_verl" / "config")
GREEDY = {"temperature": 0.0, "top_p": 1.0, "top_k": -1, "repetition_penalty": 1.0, "logprobs": True}


def make_config(*overrides):
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base=None):
        return compose("mempo_trainer", overrides=[f"actor_rollout_ref.model.path={SHIPPED}", "mempo.env.max_turns=5",
                                                   *overrides])


class StandInServer:
    """verl's ``LLMServerClient.generate`` contract over the project's HF backend: a generation returns
    token ids and their log-probs; ``prompt_logprobs=0`` returns, as vLLM does through verl
    (``extract_prompt_logprobs``), entry ``k`` = ``[log π(token k+1 | tokens ≤ k)]``, then a dummy
    ``[0.0]`` for the last token. Each sampled request gets the next seed, so runs repeat."""

    def __init__(self, backend):
        self.backend, self.seeds, self.requests = backend, itertools.count(), []

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):
        p = dict(sampling_params)
        self.requests.append(p)
        if "prompt_logprobs" in p:
            assert p["prompt_logprobs"] == 0 and p["max_tokens"] == 1
            [logps] = self.backend.score([prompt_ids[:1]], [prompt_ids[1:]])
            return TokenOutput(token_ids=[0], extra_fields={"prompt_logprobs": [[lp] for lp in logps] + [[0.0]]})
        [[g]] = self.backend.generate([prompt_ids], max_new_tokens=p["max_tokens"], temperature=p["temperature"],
                                      top_p=p["top_p"], stop=p.get("stop", ()), seed=next(self.seeds))
        return TokenOutput(token_ids=g.token_ids, log_probs=g.logprobs if p.get("logprobs") else None,
                           stop_reason="completed")


@pytest.fixture(scope="module")
def policy():
    tokenizer = AutoTokenizer.from_pretrained(SHIPPED)
    model = AutoModelForCausalLM.from_pretrained(SHIPPED, dtype=torch.float32).eval()
    return tokenizer, HFBackend(model, tokenizer)


def agent_loop(config, policy):
    tokenizer, backend = policy
    return MemSearchQAAgentLoop(trainer_config=DictConfigWrap(config), server_manager=StandInServer(backend),
                                tokenizer=tokenizer, processor=None, dataset_cls=RLHFDataset,
                                data_config=DictConfigWrap(config.data), hf_model_type="qwen2")


def questions(indices):
    task = resolve_task("generated")
    return [{"id": task.questions[i].id, "question": task.questions[i].question,
             "answers": np.array(task.questions[i].answers)} for i in indices]  # as a parquet row gives them


# ---- the config and the trainer mode ----------------------------------------------------------------
def test_config_composes_and_the_trainer_mode_is_registered():
    config = make_config()
    options = MemPOOptions.from_config(config)
    assert options.memory_advantage and options.env["context"] == "memory" and options.answer_think
    assert config.trainer.v1.trainer_mode == "mempo" and get_trainer_cls("mempo") is MemPOTrainer
    with pytest.raises(ValueError, match="unknown mempo option"):
        MemPOOptions.from_config({"mempo": {**vars(options), "typo": 1}})
    with pytest.raises(ValueError, match="adv_estimator"):
        MemPOTrainer(make_config("algorithm.adv_estimator=gae"))
    with pytest.raises(ValueError, match="token-mean"):
        MemPOTrainer(make_config("actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-mean"))


def test_the_gpu_check_config_passes_verls_validation():
    """scripts/verl_gpu_check.sh's overrides name keys that exist, and verl accepts the result."""
    import shlex

    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    script = (Path(CONFIG_DIR).parents[1] / "scripts" / "verl_gpu_check.sh").read_text()
    block = script[script.index("mempo_verl.main"): script.index('"${@:3}"')]
    for var, value in {'"$model"': str(SHIPPED), '"$out': '"runs/check', '"$gpus"': "1", '"$steps"': "3"}.items():
        block = block.replace(var, value)
    overrides = [t for t in shlex.split(block.replace("\\\n", " ")) if "=" in t]
    assert "actor_rollout_ref.rollout.n=4" in overrides and len(overrides) > 15
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base=None):
        config = compose("mempo_trainer", overrides=overrides)
    validate_config(config=config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))


def spec_rows():
    """One question, 15 sessions of 3 turns (rows); scores [1,0,1,1,0] x 3 (spec section 7). Sessions 0
    and 1 have scored turns 1 and 2, whose R_mem pool has mean -0.01 and std 0.18 and holds the
    spec's -0.23 (P 0.12 vs 0.35) and +0.05 (0.73 vs 0.68) (section 8)."""
    a, b = 0.19728, -0.05728  # the pool's other two values: mean -0.01, std 0.18
    probs = {(0, 1): (0.12, 0.35), (0, 2): (0.73, 0.68), (1, 1): (0.5 + a, 0.5), (1, 2): (0.5 + b, 0.5)}
    keys, extra, scores = [], [], [1, 0, 1, 1, 0] * 3
    for s in range(15):
        for t in range(3):
            keys.append(f"q_{s}_{t}")
            p_mem, p_full = probs.get((s, t), (None, None))
            extra.append({"mem_turns": [{"turn": t, "start": 0, "end": 3, "p_mem": p_mem, "p_full": p_full}],
                          "n_generated": 18})
    mask = torch.ones(len(keys), 6)
    rewards = torch.zeros(len(keys), 6)
    rewards[:, -1] = torch.tensor([float(scores[int(k.split("_")[1])]) for k in keys])
    return keys, extra, mask, rewards, scores


def verl_outcome_advantages(keys, mask, rewards):
    data = DataProto.from_dict(tensors={"response_mask": mask, "token_level_rewards": rewards},
                               non_tensors={"uid": np.array([k.split("_")[0] for k in keys], dtype=object)})
    return compute_advantage_for_multi_trajectories(data, keys, "grpo", num_repeat=15).batch["advantages"]


def test_spec_worked_numbers_through_verl():
    keys, extra, mask, rewards, scores = spec_rows()
    a_out = verl_outcome_advantages(keys, mask, rewards)
    project = grpo_advantages(torch.tensor(scores, dtype=torch.float), torch.zeros(15, dtype=torch.long))
    assert a_out[::3, 0].tolist() == pytest.approx(project.tolist(), abs=1e-5)
    assert a_out[0, 0].item() == pytest.approx(0.8, abs=0.02) and a_out[3, 0].item() == pytest.approx(-1.2, abs=0.02)
    adv, stats = mempo_advantages(a_out, mask, keys, ["q"] * len(keys), extra, equal_episode_weight=False)
    # session 0 (+0.8): turn 1's <mem> tokens -0.42, turn 2's +1.13, every other token +0.8 (the spec's
    # rounded figures: its std 0.5 is 0.507 unbiased, as verl and the project compute it)
    assert adv[1].tolist() == pytest.approx([-0.42] * 3 + [0.8] * 3, abs=0.02)
    assert adv[2].tolist() == pytest.approx([1.13] * 3 + [0.8] * 3, abs=0.02)
    assert adv[0].tolist() == pytest.approx([0.8] * 6, abs=0.02) and stats["mempo/scored_turns"] == 4
    r_mem = memory_rewards(torch.tensor([0.12, 0.73, 0.5 + 0.19728, 0.5 - 0.05728]), torch.tensor([0.35, 0.68, .5, .5]))
    a_mem = memory_advantages(r_mem, torch.zeros(4, dtype=torch.long))
    assert adv[[1, 2, 4, 5], 0].tolist() == pytest.approx((a_out[[1, 2, 4, 5], 0] + a_mem).tolist(), abs=1e-5)
    grpo, _ = mempo_advantages(a_out, mask, keys, ["q"] * len(keys), extra, memory_advantage=False,
                               equal_episode_weight=False)
    assert torch.equal(grpo, a_out)  # GRPO: the same code with the memory term off


def test_every_episode_weighs_the_same_in_a_token_mean_loss():
    keys = ["q_0_0", "q_0_1", "q_1_0"]  # session 0: two turns of 10 generated tokens; session 1: one of 40
    mask = torch.zeros(3, 40)
    mask[0, :10] = mask[1, :10] = mask[2, :] = 1
    extra = [{"mem_turns": [], "n_generated": n} for n in (20, 20, 40)]
    adv, _ = mempo_advantages(torch.ones(3, 40) * mask, mask, keys, ["q"] * 3, extra, memory_advantage=False)
    per_session = [(adv[:2] * mask[:2]).sum().item(), (adv[2] * mask[2]).sum().item()]
    assert per_session == pytest.approx([30.0, 30.0])  # n_mean = 30 tokens each, whatever the length


def test_verls_padding_rows_change_nothing():
    """verl pads a batch with rows that copy the first row's extra_fields and have no generated token."""
    keys, extra, mask, rewards, _ = spec_rows()
    a_out = verl_outcome_advantages(keys, mask, rewards)
    adv, stats = mempo_advantages(a_out, mask, keys, ["q"] * len(keys), extra)
    padded = mempo_advantages(torch.cat([a_out, torch.zeros(2, 6)]), torch.cat([mask, torch.zeros(2, 6)]),
                              keys + ["pad_0_0", "pad_1_0"], ["q"] * len(keys) + ["pad"] * 2, extra + [extra[1]] * 2)
    assert torch.equal(padded[0][: len(keys)], adv) and padded[1] == stats and not padded[0][len(keys):].any()


def test_mempo_refuses_rows_without_memory_probabilities():
    keys, extra, mask, rewards, _ = spec_rows()
    unscored = [{**e, "mem_turns": [{**s, "p_mem": None, "p_full": None} for s in e["mem_turns"]]} for e in extra]
    with pytest.raises(ValueError, match="ran without mempo.memory_advantage"):
        mempo_advantages(torch.zeros_like(mask), mask, keys, ["q"] * len(keys), unscored)


# ---- the agent loop --------------------------------------------------------------------------------
@pytest.mark.parametrize("context", ["memory", "full"])
def test_agent_loop_rows_are_the_project_rollout(policy, context):
    """Greedy, the agent loop through the stand-in server plays exactly what the project's own
    ``collect_rollouts`` plays on the same backend, and cuts it into the learner's training rows."""
    tokenizer, backend = policy
    config = make_config(f"mempo.env.context={context}")
    loop = agent_loop(config, policy)
    rows = asyncio.run(loop.run(dict(GREEDY), extra_info={"questions": questions([0, 1])}))

    task = resolve_task("generated")
    env = MemSearchQAEnv(task, objectives=2, context=context, max_turns=5, tokenizer=tokenizer)
    [rollout] = collect_rollouts(backend, [env], [[0, 1]], max_new_tokens=loop.max_new_tokens, temperature=0.0)
    samples = build_samples([rollout], [0.0], {}, context)
    assert len(rows) == len(samples) == (len(rollout.turns) if context == "memory" else 1)
    for row, sample in zip(rows, samples):
        assert row.prompt_ids + row.response_ids == sample.input_ids
        assert row.response_mask == [int(m) for m in sample.response_mask[len(row.prompt_ids):]]
        assert row.reward_score == rollout.score and row.extra_fields["n_generated"] == sum(
            len(t.response_ids) for t in rollout.turns)
        for span in row.extra_fields["mem_turns"]:
            text = tokenizer.decode(row.response_ids[span["start"]: span["end"]])
            assert text.startswith("<mem>") and text.endswith("</mem>")
    if context == "memory":  # each row's prompt is that turn's memory view, freshly rendered
        for row, turn in zip(rows, rollout.turns):
            assert row.prompt_ids == turn.prompt_ids
        assert "<tool_response>" not in tokenizer.decode(rows[0].prompt_ids)
        assert tokenizer.decode(rows[1].prompt_ids).count("<tool_response>") == 1
    # P_mem and P_full through prompt_logprobs equal the learner's answer_probabilities
    pairs = scored_turns([rollout])
    p_mem, p_full = answer_probabilities(backend, [rollout], pairs)
    got = {s["turn"]: (s["p_mem"], s["p_full"]) for row in rows for s in row.extra_fields["mem_turns"]
           if s["p_mem"] is not None}
    assert sorted(got) == [t for _, t in pairs] and len(pairs) >= 1
    for (_, t), pm, pf in zip(pairs, p_mem, p_full):
        assert got[t] == pytest.approx((pm, pf), rel=1e-4)


def test_a_row_without_questions_is_refused(policy):
    loop = agent_loop(make_config(), policy)
    for kwargs in ({}, {"extra_info": {"index": 3}}, {"extra_info": {"questions": []}}):
        with pytest.raises(ValueError, match="python -m mempo_verl.data"):
            asyncio.run(loop.run(dict(GREEDY), **kwargs))


def test_grpo_mode_skips_the_scoring_pass(policy):
    loop = agent_loop(make_config("mempo.memory_advantage=false"), policy)
    rows = asyncio.run(loop.run(dict(GREEDY), extra_info={"questions": questions([2])}))
    assert all(s["p_mem"] is None for r in rows for s in r.extra_fields["mem_turns"])
    assert not any("prompt_logprobs" in p for p in loop.server_manager.requests)


# ---- verl's TransferQueue post-processing and the trainer's advantages -------------------------------
@pytest.fixture(scope="module")
def transfer_queue():
    import ray
    import transfer_queue as tq

    # TransferQueue's controller and storage units each take a CPU: with fewer, tq.init() hangs
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False)
    tq.init()
    yield tq
    tq.close()
    ray.shutdown()


def test_rows_through_transfer_queue_and_the_trainer(policy, transfer_queue):
    """Two questions x two sampled sessions: the agent loop's rows go through verl's own
    ``AgentLoopWorkerTQ._agent_loop_postprocess`` into TransferQueue under ``{uid}_{session}_{turn}``;
    ``MemPOTrainer._compute_advantage`` then stores A_out + A_mem (times the episode weights) on every
    row, equal to the project's functions applied to the same episodes."""
    from verl.trainer.ppo.v1 import AgentLoopWorkerTQ

    tq = transfer_queue
    config = make_config("actor_rollout_ref.rollout.n=2")
    loop = agent_loop(config, policy)
    worker = object.__new__(AgentLoopWorkerTQ.__ray_actor_class__)  # its post-processing, not its Ray set-up
    worker.reward_loop_worker_handles, worker.distillation_enabled, worker.processor = None, False, None
    sampled = {**GREEDY, "temperature": 1.0}
    episodes = {}
    for uid, indices in (("qa", [0, 1]), ("qb", [2, 3])):
        for session in range(2):
            kwargs = {"uid": uid, "extra_info": {"questions": questions(indices)}, "raw_prompt": [],
                      "global_steps": 1}
            rows = asyncio.run(loop.run(dict(sampled), **kwargs))
            episodes[(uid, session)] = rows
            asyncio.run(worker._agent_loop_postprocess(rows, False, session_id=session, **kwargs))
    keys = [f"{uid}_{s}_{t}" for (uid, s), rows in episodes.items() for t in range(len(rows))]
    stored = tq.kv_batch_get(keys=keys, partition_id="train", select_fields=["prompts", "responses", "rm_scores"])
    flat = [row for rows in episodes.values() for row in rows]
    for k, row in enumerate(flat):
        assert stored["prompts"][k].tolist() == row.prompt_ids and stored["responses"][k].tolist() == row.response_ids
        assert stored["rm_scores"][k][-1].item() == row.reward_score

    # what the PPO step has computed before the advantage (stand-ins: the advantage reads but ignores them)
    from tensordict import TensorDict
    from transfer_queue import KVBatchMeta

    zeros = torch.nested.as_nested_tensor([torch.zeros(len(r.response_ids)) for r in flat], layout=torch.jagged)
    tq.kv_batch_put(keys=keys, partition_id="train", fields=TensorDict(
        {"old_log_probs": zeros, "ref_log_prob": zeros, "values": zeros}, batch_size=len(keys)))
    trainer = object.__new__(MemPOTrainer)
    trainer.config, trainer.options = config, MemPOOptions.from_config(config)
    batch = trainer._compute_advantage(KVBatchMeta(partition_id="train", keys=keys, tags=[{}] * len(keys)), {})
    advantages = tq.kv_batch_get(keys=batch.keys, partition_id="train", select_fields=["advantages"])["advantages"]

    # the project's learner on the same four episodes
    sessions = list(episodes)
    groups = torch.tensor([0 if uid == "qa" else 1 for uid, _ in sessions])
    a_out = grpo_advantages(torch.tensor([episodes[s][0].reward_score for s in sessions]), groups)
    scored = [(e, r, span) for e, s in enumerate(sessions) for r, row in enumerate(episodes[s])
              for span in row.extra_fields["mem_turns"] if span["p_mem"] is not None]
    r_mem = memory_rewards(torch.tensor([x["p_mem"] for *_, x in scored]),
                           torch.tensor([x["p_full"] for *_, x in scored]))
    a_mem = memory_advantages(r_mem, groups[[e for e, *_ in scored]])
    n = {s: episodes[s][0].extra_fields["n_generated"] for s in sessions}
    n_mean = sum(n.values()) / len(n)
    k = 0
    for e, s in enumerate(sessions):
        for r, row in enumerate(episodes[s]):
            expected = torch.full((len(row.response_ids),), a_out[e].item())
            for (e2, r2, span), value in zip(scored, a_mem.tolist()):
                if (e2, r2) == (e, r):
                    expected[span["start"]: span["end"]] += value
            expected *= torch.tensor(row.response_mask, dtype=torch.float) * n_mean / n[s]
            assert advantages[k].tolist() == pytest.approx(expected.tolist(), abs=1e-5)
            k += 1
    assert len(scored) >= 2
