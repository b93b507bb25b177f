"""mempo_verl against verl 0.9.1 itself, on the CPU: the config and what it refuses, the trainer mode,
the agent loop behind verl's own LLM client and a stand-in rollout server (the project's HF backend
behind verl's generate and prompt_logprobs contract, ``verl_standins``), verl's TransferQueue
post-processing, and the advantages it stores.

Runs in the verl environment (``bash scripts/install_verl.sh``); skipped where verl is absent.
"""

import asyncio
from dataclasses import replace
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
from verl_standins import InProcessClient, StandInServer

from agents.backends.hf import HFBackend
from algorithms.advantages import grpo_advantages, memory_advantages, memory_rewards
from algorithms.batch import build_samples
from algorithms.memory_reward import answer_probabilities, mean_probability, scored_turns, scoring_requests
from algorithms.rollout import Rollout, collect_rollouts
from algorithms.sft import SHIPPED
from mempo_env.env import MemSearchQAEnv
from mempo_env.tasks import resolve_task
from mempo_verl.agent_loop import MemSearchQAAgentLoop
from mempo_verl.data import corpus_key
from mempo_verl.main import prepare_config
from mempo_verl.options import MemPOOptions
from mempo_verl.trainer import MemPOTrainer, mempo_advantages

CONFIG_DIR = str(Path(__file__).resolve().parents[2] / "mempo_verl" / "config")
GREEDY = {"temperature": 0.0, "top_p": 1.0, "top_k": -1, "repetition_penalty": 1.0, "logprobs": True}


def make_config(*overrides):
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base=None):
        return compose("mempo_trainer", overrides=[f"actor_rollout_ref.model.path={SHIPPED}", "mempo.env.max_turns=5",
                                                   *overrides])


@pytest.fixture(scope="module")
def policy():
    tokenizer = AutoTokenizer.from_pretrained(SHIPPED)
    model = AutoModelForCausalLM.from_pretrained(SHIPPED, dtype=torch.float32).eval()
    return tokenizer, HFBackend(model, tokenizer)


def agent_loop(config, policy, **server):
    """The agent loop as verl's worker makes it, its server a ``StandInServer`` on ``policy`` behind verl's
    own client."""
    tokenizer, backend = policy
    client = InProcessClient(config, StandInServer(backend, **server))
    return MemSearchQAAgentLoop(trainer_config=DictConfigWrap(config), server_manager=client,
                                tokenizer=tokenizer, processor=None, dataset_cls=RLHFDataset,
                                data_config=DictConfigWrap(config.data), hf_model_type="qwen2")


def questions(indices):
    task = resolve_task("generated")
    return [{"id": task.questions[i].id, "question": task.questions[i].question,
             "answers": np.array(task.questions[i].answers),  # as a parquet row gives them
             "source": "generated", "corpus": corpus_key(task.corpus)} for i in indices]


# ---- the config and the trainer mode ----------------------------------------------------------------
def test_config_composes_and_the_trainer_mode_is_registered():
    config = make_config()
    options = MemPOOptions.from_config(config)
    assert options.memory_advantage and options.env["context"] == "memory" and options.answer_think
    assert config.trainer.v1.trainer_mode == "mempo" and get_trainer_cls("mempo") is MemPOTrainer
    # with dynamic batch sizes, one mini-batch may hold every row of a step (128 questions x 16 turns)
    prepare_config(make_config("actor_rollout_ref.actor.ppo_mini_batch_size=2048"))
    with pytest.raises(ValueError, match="unknown mempo option"):
        MemPOOptions.from_config({"mempo": {**vars(options), "typo": 1}})


def test_mempo_refuses_settings_it_cannot_train_under():
    """Each with a clear error at the trainer's construction (and in ``python -m mempo_verl.main``,
    before Ray starts): no rollout log-probs would mask every token out of the loss (a silent no-op
    run), and a mini-batch-dependent token weight would make the equal episode weights approximate."""
    for override, message in (("algorithm.adv_estimator=gae", "adv_estimator"),
                              ("actor_rollout_ref.rollout.calculate_log_probs=false", "no token would train"),
                              ("actor_rollout_ref.actor.loss_agg_mode=token-mean", "one constant"),
                              ("actor_rollout_ref.actor.loss_scale_factor=null", "one constant"),
                              ("mempo.env.context=window:4", "not other context strategies")):
        with pytest.raises(ValueError, match=message):
            MemPOTrainer(make_config(override))
    assert MemPOTrainer(make_config("mempo.equal_episode_weight=false",
                                    "actor_rollout_ref.actor.loss_agg_mode=token-mean"))


def test_local_paths_are_made_absolute_on_the_head_node(tmp_path, monkeypatch):
    """verl's actors open the data, model and checkpoint paths in their own working directories, on
    other nodes too: ``python -m mempo_verl.main`` makes the local ones absolute where it runs; a hub
    model id and a shared set's name stay as they are."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    for name in ("train.parquet", "val.parquet", "corpus.jsonl"):
        (tmp_path / "data" / name).touch()
    config = make_config("data.train_files=data/train.parquet", "data.val_files=[data/val.parquet]",
                         "actor_rollout_ref.model.path=Qwen/Qwen2.5-7B-Instruct", "mempo.env.dataset=hotpotqa",
                         "mempo.env.corpus=data/corpus.jsonl", "trainer.default_local_dir=checkpoints/run")
    prepare_config(config)
    assert config.data.train_files == str(tmp_path / "data" / "train.parquet")
    assert list(config.data.val_files) == [str(tmp_path / "data" / "val.parquet")]
    assert config.mempo.env.corpus == str(tmp_path / "data" / "corpus.jsonl")
    assert config.trainer.default_local_dir == str(tmp_path / "checkpoints" / "run")  # made later, by the run
    assert (config.actor_rollout_ref.model.path, config.mempo.env.dataset) == ("Qwen/Qwen2.5-7B-Instruct", "hotpotqa")


def test_the_configured_attention_loads_and_keeps_packed_rows_apart():
    """verl's FSDP engine builds the actor with ``from_pretrained(config=HFModelConfig.hf_config)`` and,
    with ``use_remove_padding``, feeds a micro-batch as one packed sequence: position ids restarting at 0
    for each row and no attention mask. The configured implementation loads where verl's default,
    flash_attention_2, does not (flash-attn is not installed), and gives every packed row the log-probs
    it has alone."""
    from verl.utils.config import omega_conf_to_dataclass

    model_config = omega_conf_to_dataclass(make_config().actor_rollout_ref.model)
    assert model_config.hf_config._attn_implementation == "sdpa"
    model = AutoModelForCausalLM.from_pretrained(model_config.local_path, config=model_config.hf_config,
                                                 dtype=torch.float32).eval()
    ids = torch.Generator().manual_seed(0)
    rows = [torch.randint(3, 1500, (n,), generator=ids) for n in (30, 55, 12)]
    with torch.no_grad():
        packed = model(input_ids=torch.cat(rows)[None], attention_mask=None, use_cache=False,  # as verl calls it
                       position_ids=torch.cat([torch.arange(len(r)) for r in rows])[None]).logits[0]
        alone = torch.cat([model(input_ids=r[None]).logits[0] for r in rows])
    assert torch.allclose(packed.log_softmax(-1), alone.log_softmax(-1), atol=1e-4)
    with pytest.raises(ImportError, match="FlashAttention2"):  # verl's default
        AutoModelForCausalLM.from_pretrained(model_config.local_path, attn_implementation="flash_attention_2")


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
            extra.append({"mem_turns": [{"turn": t, "start": 0, "end": 3, "p_mem": p_mem, "p_full": p_full,
                                         "p_full_dropped_turns": 0}], "n_generated": 18})
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


def test_the_advantages_carry_equal_episode_weights():
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


def test_questions_whose_evidence_the_search_tool_lacks_are_refused(policy):
    """A row says which corpus holds its questions' evidence (``mempo_verl.data``): one the configured
    search tool does not search is an error, not an episode scored 0 for want of documents."""
    loop = agent_loop(make_config(), policy)
    [q] = questions([0])
    for question, message in (({**q, "corpus": None}, "bring no corpus"), ({**q, "corpus": "0" * 16}, "corpus 0000"),
                              ({k: v for k, v in q.items() if k != "corpus"}, "this version")):
        with pytest.raises(ValueError, match=message):
            asyncio.run(loop.run(dict(GREEDY), extra_info={"questions": [question]}))
    served = agent_loop(make_config("mempo.env.retriever=http://localhost:1/retrieve"), policy)
    assert served.corpus is None  # a retriever server's corpus cannot be read: any row passes the check


def test_rows_carry_the_weight_versions_they_were_generated_under(policy):
    """verl's trainer reads every row's ``min_global_steps``/``max_global_steps`` (its staleness metrics,
    ``int`` arrays): the first and last weight versions of the episode's server calls, as verl's client
    sets them on each output. Here the weights change after every call."""
    loop = agent_loop(make_config("mempo.memory_advantage=false"), policy)
    server = loop.server_manager.server
    server.global_steps, generate = 7, server.generate

    async def then_update(*args, **kwargs):
        out = await generate(*args, **kwargs)
        server.global_steps += 1
        return out

    server.generate = then_update
    rows = asyncio.run(loop.run(dict(GREEDY), extra_info={"questions": questions([0, 1])}))
    assert [(r.extra_fields["min_global_steps"], r.extra_fields["max_global_steps"]) for r in rows] == \
        [(7, 7 + len(server.requests) - 1)] * len(rows)


def test_scoring_requests_fit_the_servers_engine(policy):
    """vLLM takes ``detokenize``, SGLang's ``SamplingParams`` refuses it: the memory reward's scoring
    requests work through an SGLang server too."""
    assert agent_loop(make_config(), policy).scoring["detokenize"] is False  # vLLM's, as verl's teacher sends it
    loop = agent_loop(make_config("actor_rollout_ref.rollout.name=sglang"), policy, engine="sglang")
    rows = asyncio.run(loop.run(dict(GREEDY), extra_info={"questions": questions([0, 1])}))
    assert any("prompt_logprobs" in p for p in loop.server_manager.server.requests)
    assert any(s["p_full"] is not None for r in rows for s in r.extra_fields["mem_turns"])


def test_a_history_longer_than_the_servers_window_is_scored_on_its_recent_turns(policy):
    """A server refuses a prompt longer than its ``max_model_len``; P_full of a longer history is then
    scored after the question and the most recent turns that fit, the count of left-out turns recorded,
    rather than failing (and dropping) exactly the long episodes MemPO is about."""
    tokenizer, backend = policy
    task = resolve_task("generated")
    env = MemSearchQAEnv(task, objectives=2, max_turns=5, tokenizer=tokenizer)
    [rollout] = collect_rollouts(backend, [env], [[0, 1]], max_new_tokens=1024, temperature=0.0)
    pairs = scored_turns([rollout])
    last = pairs[-1][1]
    assert last >= 2  # two earlier turns to leave out
    contexts, answers = scoring_requests(tokenizer, [rollout], pairs)
    window = len(contexts[-1]) + len(answers[-1])  # the last turn's full request is one token too long
    assert all(len(c) + len(a) < window for c, a in zip(contexts[:-1], answers[:-1]))

    loop = agent_loop(make_config(f"actor_rollout_ref.rollout.max_model_len={window}"), policy, max_model_len=window)
    rows = asyncio.run(loop.run(dict(GREEDY), extra_info={"questions": questions([0, 1])}))
    spans = {s["turn"]: s for r in rows for s in r.extra_fields["mem_turns"] if s["p_full"] is not None}
    assert {t: s["p_full_dropped_turns"] for t, s in spans.items()} == {t: int(t == last) for _, t in pairs}
    turn = rollout.turns[last]
    first = [m["role"] for m in turn.full_context].index("assistant")
    second = first + [m["role"] for m in turn.full_context[first + 1:]].index("assistant") + 1
    shorter = replace(turn, full_context=turn.full_context[:first] + turn.full_context[second:])
    [_, context], [_, answer] = scoring_requests(tokenizer, [Rollout(0, rollout.gold, [shorter])], [(0, 0)])
    [logps] = backend.score([context], [answer])
    assert spans[last]["p_full"] == pytest.approx(mean_probability(logps), rel=1e-4)
    p_mem, p_full = answer_probabilities(backend, [rollout], pairs)
    assert [spans[t]["p_mem"] for _, t in pairs] == pytest.approx(p_mem, rel=1e-4)
    assert [spans[t]["p_full"] for _, t in pairs[:-1]] == pytest.approx(p_full[:-1], rel=1e-4)


def test_grpo_mode_skips_the_scoring_pass(policy):
    loop = agent_loop(make_config("mempo.memory_advantage=false"), policy)
    rows = asyncio.run(loop.run(dict(GREEDY), extra_info={"questions": questions([2])}))
    assert all(s["p_mem"] is None for r in rows for s in r.extra_fields["mem_turns"])
    assert not any("prompt_logprobs" in p for p in loop.server_manager.server.requests)


# ---- verl's TransferQueue post-processing and the trainer's advantages -------------------------------
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
    tq.kv_clear(keys=keys, partition_id="train")
