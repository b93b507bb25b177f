"""The oracle-evidence mode (``search="oracle"``): a search shows the gold document of the next hop not yet
shown, whatever the query, so that F1 lost there is lost by memory alone."""

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import mempo_env  # noqa: F401
from agents import OracleAgent
from agents.runner import run_episode
from mempo_env import Document, MemSearchQAEnv, QARecord, QATask
from mempo_env.tasks import make_generated_task
from mempo_env.types import OracleStep

DOCS = [Document("d1", "Zorb", "Zorb is a film directed by Ann Lee."),
        Document("d2", "Ann Lee", "Ann Lee was born in Tarvik."),
        Document("d3", "Tarvik", "The mayor of Tarvik is Bo Moss."),
        Document("d4", "Quill", "Quill is a river.")]
CHAIN = [OracleStep("Zorb", "d1", "Zorb", "Ann Lee"), OracleStep("Ann Lee", "d2", "Ann Lee", "Tarvik")]
TASK = QATask("toy", [QARecord("q1", "Where was the director of Zorb born?", ["Tarvik"], CHAIN),
                      QARecord("q2", "Who is the mayor of Tarvik?", ["Bo Moss"],
                               [OracleStep("Tarvik", "d3", "Tarvik", "Bo Moss")])], DOCS)


def search(query: str, mem: str = "notes") -> str:
    return f"<mem>{mem}</mem><think>t</think><search>{query}</search>"


def test_the_oracle_agent_scores_every_objective_through_the_oracle():
    task = make_generated_task("test", hops=2)
    env = gym.make("MemSearchQA-v0", dataset=task, objectives=3, search="oracle", max_turns=7)
    for seed in range(5):
        r = run_episode(env, OracleAgent(), seed)
        assert r["score"] == 3 and r["format_ok"] and r["n_searches"] == 6, r["trajectory"]


def test_any_query_gets_the_next_hops_gold_document_in_order_then_nothing():
    env = MemSearchQAEnv(TASK, objectives=2, search="oracle", cache_dir=None)
    _, info0 = env.reset(options={"index": [0, 1]})
    shown, infos = [], []
    for _ in range(4):
        obs, _, terminated, truncated, info = env.step(search("anything at all"))
        shown.append(info["doc_ids"])
        infos.append(info)
        assert not (terminated or truncated)
    assert shown == [["d1"], ["d2"], ["d3"], []]
    assert "No results." in obs[-1]["content"]
    assert [i["memory_found"] for i in infos] == [0, 1, 2, 3]  # each reply shows one more hop's evidence
    # the info snapshots have the retriever mode's shape
    plain = MemSearchQAEnv(TASK, objectives=2, cache_dir=None)
    _, plain0 = plain.reset(options={"index": [0, 1]})
    info = plain.step(search("Zorb"))[4]
    assert info.keys() == infos[0].keys() and plain0.keys() == info0.keys()
    assert infos[0]["full_context"] == info["full_context"] and infos[0]["mem_context"] == info["mem_context"]


def test_a_document_shown_otherwise_counts_as_shown():
    """An ``<access>`` of the first hop's document moves the oracle on to the second hop."""
    env = MemSearchQAEnv(TASK, objectives=2, search="oracle", cache_dir=None)
    env.reset(options={"index": [0, 1]})
    assert env.step("<mem>m</mem><think>t</think><access>d1</access>")[4]["doc_ids"] == ["d1"]
    assert env.step(search("Zorb"))[4]["doc_ids"] == ["d2"]


def test_check_env_passes_in_oracle_mode():
    check_env(gym.make("MemSearchQA-v0", search="oracle").unwrapped, skip_render_check=True)


def test_an_unknown_search_mode_is_refused():
    with pytest.raises(ValueError, match="search must be one of"):
        MemSearchQAEnv(TASK, search="gold", cache_dir=None)
