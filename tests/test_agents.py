"""Scripted agents on the generated task: the oracle solves every episode with real searches."""

import gymnasium as gym
import pytest

import mempo_env  # noqa: F401
from agents import OracleAgent, RandomAgent, WeakAgent, make_agent
from agents.runner import run_episode
from mempo_env.protocol import check_trajectory
from mempo_env.retrieval import Hit
from mempo_env.tasks import make_generated_task


@pytest.mark.parametrize("hops", [1, 2, 3, 4])
@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_oracle_scores_every_objective(hops, k):
    task = make_generated_task("test", hops=hops)
    for context in ("memory", "full"):
        env = gym.make("MemSearchQA-v0", dataset=task, objectives=k, context=context, max_turns=hops * k + 1)
        for seed in range(15):
            r = run_episode(env, OracleAgent(), seed)
            assert r["score"] == k and r["format_ok"], r["trajectory"]
            assert r["n_searches"] == hops * k and r["n_turns"] == hops * k + 1
            turns = [m["content"] for m in r["trajectory"] if m["role"] == "assistant"]
            assert check_trajectory(turns).ok  # warm-up data must pass the gate on its own


def test_memory_view_costs_less_than_full_context_for_the_same_trajectory():
    task = make_generated_task("test", hops=2)
    costs = {}
    for context in ("memory", "full"):
        env = gym.make("MemSearchQA-v0", dataset=task, objectives=3, context=context)
        costs[context] = run_episode(env, OracleAgent(), 0)
    assert costs["memory"]["trajectory"] == costs["full"]["trajectory"]
    assert costs["memory"]["total_chars"] < costs["full"]["total_chars"]
    assert costs["memory"]["peak_chars"] < costs["full"]["peak_chars"]


def test_oracle_without_evidence_keeps_only_pointers_in_memory():
    """The sloppy demonstrator's memory names the documents without their content, so it can answer
    only the last question, whose document is still on screen."""
    task = make_generated_task("test", hops=1)
    env = gym.make("MemSearchQA-v0", dataset=task, objectives=2)
    for seed in range(5):
        r = run_episode(env, OracleAgent(keep_evidence=False), seed)
        assert r["correct"] == [False, True] and r["format_ok"] and r["answer"].startswith("unknown; ")
        memory = r["trajectory"][-1]["content"].partition("<mem>")[2].partition("</mem>")[0]
        assert [line.split(": ", 1)[1].startswith("found ") for line in memory.splitlines()] == [True, True]
        assert not any(answers[0] in memory for answers in r["golden_answers"])


class MissingRetriever:
    """Never returns the document asked for (only the first document of the corpus)."""

    def __init__(self, corpus):
        self.decoy = corpus[0]

    def search(self, queries, topk):
        return [[Hit(self.decoy, 1.0)] for _ in queries]


def test_oracle_opens_missed_documents_with_access():
    task = make_generated_task("test", hops=2)
    env = gym.make("MemSearchQA-v0", dataset=task, retriever=MissingRetriever(task.corpus))
    r = run_episode(env, OracleAgent(), 0)
    actions = [m["content"] for m in r["trajectory"] if m["role"] == "assistant"]
    assert sum("<access>" in a for a in actions) == 2 and r["score"] == 1


def test_oracle_says_unknown_when_a_document_cannot_be_found():
    task = make_generated_task("test", hops=1)
    q = task.questions[0]
    broken = {"id": q.id, "question": q.question, "answers": q.answers,
              "chain": [{"query": "nothing", "doc_id": "no-such-doc", "title": "No such doc", "answer": None}]}
    env = gym.make("MemSearchQA-v0", dataset=task).unwrapped
    obs, info = env.reset(options={"questions": q})
    info["objectives"] = [broken]
    agent, done = OracleAgent(), False
    while not done:
        obs, _, terminated, truncated, info = env.step(agent.act(obs, info))
        info["objectives"] = [broken]
        done = terminated or truncated
    assert info["answer"] == "unknown" and info["format_ok"] and info["score"] == 0


def test_weak_baseline_answers_single_hop_only():
    def em(hops):
        env = gym.make("MemSearchQA-v0", dataset=make_generated_task("test", hops=hops))
        return sum(run_episode(env, WeakAgent(), s)["em"] for s in range(60)) / 60
    assert em(1) > 0.4 and em(3) < 0.1


def test_random_agent_is_reproducible_and_scores_nothing():
    env = gym.make("MemSearchQA-v0")
    a = [run_episode(env, RandomAgent(1), s)["trajectory"] for s in range(5)]
    b = [run_episode(env, RandomAgent(1), s)["trajectory"] for s in range(5)]
    assert a == b
    assert sum(run_episode(env, RandomAgent(2), s)["score"] for s in range(30)) == 0


def test_agent_specs():
    assert isinstance(make_agent("oracle"), OracleAgent)
    assert make_agent("random:7").seed == 7
    with pytest.raises(ValueError, match="unknown agent"):
        make_agent("gpt")
