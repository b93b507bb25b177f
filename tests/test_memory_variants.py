"""The memory reward's variants (``--memory-reward``) and their guards: hand-computed pure functions, then
the scoring each variant asks for, through the rollouts of a scripted policy."""

import re

import gymnasium as gym
import pytest
import torch

import mempo_env  # noqa: F401
from agents import OracleAgent
from algorithms.advantages import information_gains, memory_advantages, progress_pools, successful_only
from algorithms.memory_reward import is_copy, memory_term, scored_turns
from algorithms.mempo import MEMORY_REWARDS, Config
from algorithms.rollout import collect_rollouts
from mempo_env.env import MemSearchQAEnv
from mempo_env.tasks import make_generated_task
from tests.test_rollout import TASK, ScriptedBackend

QUESTION = "Who is the mayor of the city where the director of the film Zorb was born?"
REPLY = ("<tool_response>\nDoc 1(Title: Zorb) Zorb is a film directed by Ann Lee in the north.\n"
         "Doc 2(Title: Quill) Quill is a river that runs past the old mill of Tarvik.\n</tool_response>")


# ---- pure functions, exact numbers ---------------------------------------------------------------
def test_progress_pools_one_per_group_and_evidence_found():
    pools = progress_pools(torch.tensor([0, 0, 0, 1]), torch.tensor([1, 1, 2, 1]))
    assert pools.tolist() == [0, 0, 1, 2]


def test_progress_matching_cancels_the_reward_for_search_progress():
    """Three turns with one item found, one with two: pooled by question (the spec), the turn that found
    more gets the largest advantage; pooled by progress, it is alone in its pool and gets 0."""
    r, groups, found = torch.tensor([0.0, 1.0, 2.0, 9.0]), torch.tensor([0, 0, 0, 0]), torch.tensor([1, 1, 1, 2])
    assert memory_advantages(r, groups).argmax().item() == 3
    assert memory_advantages(r, progress_pools(groups, found), eps=0.0).tolist() == [-1.0, 0.0, 1.0, 0.0]


def test_kept_values_alone_make_the_pool():
    r = torch.tensor([0.0, 1.0, 2.0, 100.0])
    keep = torch.tensor([True, True, True, False])
    assert memory_advantages(r, torch.zeros(4, dtype=torch.long), eps=0.0, keep=keep).tolist() == [-1.0, 0.0, 1.0, 0.0]


def test_information_gain_is_a_difference_of_mean_log_probs():
    assert information_gains(torch.tensor([-1.0, -0.5]), torch.tensor([-2.0, -2.0])).tolist() == [1.0, 1.5]


def test_infomem_pays_nothing_on_failed_rollouts():
    """The guard InfoMem needs: a failed rollout gets 0 whatever its gain, and does not enter the
    successes' mean and spread (here its gain of 50 would otherwise dominate)."""
    gains = torch.tensor([1.0, 2.0, 3.0, 50.0, -7.0])
    success = torch.tensor([True, True, True, False, False])
    out = successful_only(gains, success, torch.zeros(5, dtype=torch.long), eps=0.0)
    assert out.tolist() == [-1.0, 0.0, 1.0, 0.0, 0.0]
    # z-normalised within each question group's successes; a lone success has nothing to compare with
    out = successful_only(gains, success, torch.tensor([0, 0, 1, 1, 1]), eps=0.0)
    assert out[2].item() == 0.0 and out[3].item() == 0.0 and out[0].item() == -out[1].item() != 0


# ---- the copy guard ----------------------------------------------------------------------------------
def test_a_memory_that_repeats_the_question_or_the_tool_response_is_a_copy():
    assert is_copy(QUESTION, [QUESTION, REPLY])
    assert is_copy(f"note: {QUESTION.upper()}", [QUESTION])  # normalised: case and punctuation do not hide it
    assert is_copy(REPLY.replace("<tool_response>", ""), [QUESTION, REPLY])
    assert not is_copy("Zorb is a film directed by Ann Lee", [QUESTION, REPLY])  # one quoted sentence
    assert not is_copy("director Ann Lee; Tarvik next", [QUESTION, REPLY])
    assert not is_copy("", [QUESTION])
    assert is_copy("who directed Zorb", ["Who directed Zorb?"])  # a source shorter than the n-grams
    assert not is_copy("Who directed Zorb? Ann Lee", ["Who directed Zorb?"])  # the question and its answer


def test_the_oracles_memories_are_never_copies():
    """The memories the warm-up imitates (quoted evidence sentences, one per hop) pass the guard at every
    turn, against the questions and the tool response each turn read."""
    task = make_generated_task("test", hops=2)
    env = gym.make("MemSearchQA-v0", dataset=task, objectives=3, max_turns=7)
    checked = 0
    for seed in range(5):
        agent, (obs, info) = OracleAgent(), env.reset(seed=seed)
        questions, done = [o["question"] for o in info["objectives"]], False
        while not done:
            obs, _, terminated, truncated, info = env.step(agent.act(obs, info))
            last = info["full_context"][-1]["content"]
            reply = [last] if last.startswith("<tool_response>") else []
            assert not is_copy(info["mem"], questions + reply), info["mem"]
            checked += bool(info["mem"])
            done = terminated or truncated
    assert checked >= 5 * 6


# ---- the variants through scripted rollouts ---------------------------------------------------------
class MemoryScorer(ScriptedBackend):
    """Scores the gold answer by what the context's last ``<mem>`` holds: per-token log-prob -2, +0.5 if
    it holds "Ann Lee", +1 if it holds "Tarvik"."""

    def score(self, contexts, continuations):
        self.scored.append((contexts, continuations))
        out = []
        for c, x in zip(contexts, continuations):
            mem = re.findall(r"<mem>(.*?)</mem>", self.tokenizer.decode(c), re.S)[-1]
            out.append([-2.0 + 0.5 * ("Ann Lee" in mem) + 1.0 * ("Tarvik" in mem)] * len(x))
        return out


def scripted(tokenizer, n):
    backend = MemoryScorer(tokenizer)
    envs = [MemSearchQAEnv(TASK, objectives=2, tokenizer=tokenizer, cache_dir=None) for _ in range(n)]
    return backend, collect_rollouts(backend, envs, [[0, 1]])


def set_memory(rollout, t, mem):
    rollout.turns[t].mem_context = [*rollout.turns[t].mem_context[:-1], {"role": "assistant",
                                                                          "content": f"<mem>{mem}</mem>"}]


def test_every_variant_the_learner_accepts_is_computed(tokenizer):
    backend, rs = scripted(tokenizer, 2)
    groups = torch.tensor([r.group for r in rs])
    for variant in MEMORY_REWARDS:
        term = memory_term(variant, backend, rs, groups)
        assert term.pairs == scored_turns(rs) and len(term.advantages) == len(term.pairs) == len(term.pools)
    with pytest.raises(ValueError, match="memory_reward must be one of"):
        Config(memory_reward="infomem-query")
    with pytest.raises(ValueError, match="needs algo mempo"):
        Config(algo="grpo", memory_reward="write")


def test_write_gain_compares_each_memory_with_the_one_before(tokenizer):
    """Memories "nothing yet", "Zorb: Ann Lee", "Zorb: Ann Lee; born Tarvik": log-probs -2, -1.5, -0.5, so
    the scored turns 2 and 3 gain 0.5 and 1.0; one scoring request per memory written and one empty
    memory per question group (7), where the spec's reward makes two per scored turn (8)."""
    backend, rs = scripted(tokenizer, 2)
    term = memory_term("write", backend, rs, torch.tensor([0, 0]))
    assert len(backend.scored[-1][0]) == 3 * 2 + 1
    assert term.stats["r_mem"] == 0.75 and term.stats["mem_copies"] == 0.0
    a = term.advantages.tolist()
    assert a[0] == a[2] < 0 < a[1] == a[3]
    memory_term("mempo", backend, rs, torch.tensor([0, 0]))
    assert len(backend.scored[-1][0]) == 2 * 4


def test_write_gain_pays_nothing_for_a_copied_memory(tokenizer):
    backend, rs = scripted(tokenizer, 2)
    read = rs[1].turns[2].full_context[-1]["content"]  # the tool response turn 3 read
    set_memory(rs[1], 2, read.removeprefix("<tool_response>").removesuffix("</tool_response>") + " Tarvik")
    term = memory_term("write", backend, rs, torch.tensor([0, 0]))
    assert term.stats["mem_copies"] == 0.25
    assert term.advantages[3].item() == 0.0 and term.advantages[:3].abs().min() > 0


def test_infomem_scores_successful_rollouts_only(tokenizer):
    """Rollout 0's final memory holds both answers (gain 1.5 over the empty memory), rollout 1's one (0.5),
    rollout 2 failed: it is not scored at all (2 final memories + 1 empty memory) and gets 0 on every turn."""
    backend, rs = scripted(tokenizer, 3)
    set_memory(rs[1], 2, "Zorb: Ann Lee")
    rs[2].info["correct"] = [True, False]
    term = memory_term("infomem", backend, rs, torch.tensor([0, 0, 0]))
    assert len(backend.scored[-1][0]) == 3
    assert term.stats["r_mem"] == 1.0 and term.stats["mem_successes"] == pytest.approx(2 / 3)
    a = dict(zip(term.pairs, term.advantages.tolist()))
    assert a[0, 1] == a[0, 2] > 0 > a[1, 1] == a[1, 2] and a[2, 1] == a[2, 2] == 0.0


def test_infomem_pays_nothing_for_a_final_memory_that_copies_the_question(tokenizer):
    backend, rs = scripted(tokenizer, 3)
    set_memory(rs[1], 2, "Zorb: Ann Lee")
    set_memory(rs[2], 2, TASK.questions[1].question)  # "Where was Ann Lee born?": scored as holding "Ann Lee"
    term = memory_term("infomem", backend, rs, torch.tensor([0, 0, 0]))
    a = dict(zip(term.pairs, term.advantages.tolist()))
    assert a[2, 1] == a[2, 2] == 0.0 and a[0, 1] > 0 > a[1, 1] and term.stats["mem_copies"] == pytest.approx(1 / 3)


def test_progress_pools_turns_by_evidence_found(tokenizer):
    """With every turn at the same evidence found, the progress-matched advantages are the spec's; with
    turn 3 ahead, its turns form their own pool."""
    backend, rs = scripted(tokenizer, 2)
    groups = torch.tensor([0, 0])
    spec, same = (memory_term(v, backend, rs, groups) for v in ("mempo", "progress"))
    assert same.advantages.tolist() == spec.advantages.tolist() and same.stats["mem_copies"] == 0.0
    for r in rs:
        r.turns[2].found = 1
    ahead = memory_term("progress", backend, rs, groups)
    assert ahead.pools.tolist() == [0, 1, 0, 1]


def test_a_memory_cut_by_the_generation_budget_earns_no_variant_anything(tokenizer):
    """Memory cannot grow without bound: every turn rewrites it within one generation (max_new_tokens), so
    a memory longer than that budget is cut before its </mem>. Such a turn has no memory to score under any
    variant, and the episode fails the format gate, so InfoMem pays it nothing either."""
    endless = "<mem>" + "Ann Lee Tarvik " * 200
    backend = MemoryScorer(tokenizer, turns=[endless] * 4)
    envs = [MemSearchQAEnv(TASK, objectives=2, max_turns=4, tokenizer=tokenizer, cache_dir=None) for _ in range(2)]
    rs = collect_rollouts(backend, envs, [[0, 1]])
    assert all(t.mem_context is None for r in rs for t in r.turns) and all(r.score == 0 for r in rs)
    for variant in MEMORY_REWARDS:
        term = memory_term(variant, backend, rs, torch.tensor([0, 0]), first_turn=True)
        assert term.pairs == [] and term.advantages.numel() == 0


@pytest.mark.parametrize("variant", ["progress", "infomem", "write"])
def test_a_training_step_with_each_variant_in_the_oracle_setting(variant, tmp_path):
    """The learner wires each variant and the oracle search through a step of the shipped warm-up (the
    tiny settings of tests/test_training.py)."""
    import json

    from algorithms.mempo import train

    cfg = Config(run_dir=str(tmp_path), steps=1, memory_reward=variant, search="oracle", questions_per_step=2,
                 group_size=2, max_turns=4, max_new_tokens=24, minibatch_size=8, pack_tokens=256, eval_episodes=0,
                 eval_every=0, threads=1)
    train(cfg)
    [m] = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert m["step"] == 1 and 0 <= m["mem_copies"] <= 1
    assert ("mem_successes" in m) == (variant == "infomem") and ("p_mem" in m) == (variant == "progress")
