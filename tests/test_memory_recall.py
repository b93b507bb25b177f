"""Memory content (mempo_env.recall): what the episode found and how much of it each turn's memory keeps."""

import gymnasium as gym
import pytest
from shared_data import needs_shared

import mempo_env  # noqa: F401
from agents import OracleAgent
from agents.statistics import markdown_table, summarize
from mempo_env import Document, MemSearchQAEnv, OracleStep, QARecord, QATask
from mempo_env.recall import holds, words
from mempo_env.retrieval import Hit
from mempo_env.tasks import make_generated_task, resolve_task

DOCS = [
    Document("d1", "Zorb", "Zorb is a film directed by Ann Lee."),
    Document("d2", "Ann Lee", "Ann Lee was born in Tarvik."),
    Document("d3", "Tarvik", "The mayor of Tarvik is Bo Moss."),
]
CHAIN = [OracleStep("Zorb", "d1", "Zorb", "Ann Lee"), OracleStep("Ann Lee", "d2", "Ann Lee", "Tarvik"),
         OracleStep("Tarvik", "d3", "Tarvik", "Bo Moss")]
QUESTION = QARecord("q1", "Who is the mayor of the city where the director of Zorb was born?", ["Bo Moss"], CHAIN)
TASK = QATask("toy", [QUESTION], DOCS)


class TitleRetriever:
    """The document whose title is the query, and ``extra`` documents after it."""

    def __init__(self, extra=()):
        self.extra = [d for d in DOCS if d.id in extra]

    def search(self, queries, topk):
        return [[Hit(d, 1.0) for d in [d for d in DOCS if d.title == q] + self.extra][:topk] for q in queries]


def act(mem, action, arg):
    return f"<mem>{mem}</mem><think>t</think><{action}>{arg}</{action}>"


def play(env, turns):
    env.reset(options={"index": 0})
    return [env.step(t)[4] for t in turns]


# Found before each turn: none, then Ann Lee (hop 1), then Tarvik, then Bo Moss.
TURNS = [
    act("", "search", "Zorb"),
    act("director: ann lee.", "search", "Ann Lee"),  # kept in another case, with punctuation: counts
    act("the director Lee was born in Tarvik", "search", "Tarvik"),  # "Ann Lee" paraphrased: does not count
    act("Ann Lee\nTarvik", "search", "Tarvik"),  # Bo Moss dropped
    act("ANN LEE; TARVIK; bo moss.", "answer", "Bo Moss"),  # all three, upper and lower case
]


def test_hand_made_turns_keep_drop_paraphrase_and_change_case():
    infos = play(MemSearchQAEnv(TASK, retriever=TitleRetriever(), max_turns=8), TURNS)
    assert [(i["memory_found"], i["memory_kept"]) for i in infos] == [(0, 0), (1, 1), (2, 1), (3, 2), (3, 3)]
    assert [i["memory_recall"] for i in infos] == [None, 1.0, 0.5, 2 / 3, 1.0]
    final = infos[-1]
    assert final["score"] == 1 and final["evidence_items"] == final["evidence_found"] == 3
    assert final["memory_recall_turns"] == 4
    assert final["episode_memory_recall"] == pytest.approx((1 + 0.5 + 2 / 3 + 1) / 4)
    assert final["memory_per_turn"] == [{"found": f, "kept": k, "context_kept": c} for f, k, c in
                                        [(0, 0, 0), (1, 1, 1), (2, 1, 2), (3, 2, 2), (3, 3, 3)]]


def test_the_context_is_the_prompt_the_turn_was_written_from():
    """The full view holds everything found (the reference, 1.0); the memory view loses what neither
    the previous turn nor the newest reply holds."""
    full = play(MemSearchQAEnv(TASK, retriever=TitleRetriever(), context="full", max_turns=8), TURNS)
    assert [i["context_recall"] for i in full] == [None, 1.0, 1.0, 1.0, 1.0]
    memory = play(MemSearchQAEnv(TASK, retriever=TitleRetriever(), max_turns=8), TURNS)
    # turn 4's prompt is turn 3, which paraphrased Ann Lee, and the reply naming Tarvik and Bo Moss
    assert [i["context_kept"] for i in memory] == [0, 1, 2, 2, 3]
    forgetful = [act("", "search", "Zorb"), act("", "search", "Ann Lee"), act("", "search", "Tarvik"),
                 act("", "answer", "Bo Moss")]
    assert [i["context_kept"] for i in play(MemSearchQAEnv(TASK, retriever=TitleRetriever(), max_turns=8),
                                            forgetful)] == [0, 1, 2, 2]  # turn 3's: the search "Ann Lee"


def test_found_needs_the_gold_document_with_its_evidence_shown():
    """A reply clipped before the answer finds nothing; a gold document shown by a search for another
    one counts as found (the full history holds it), and so does it for the <mem> that then lacks it."""
    clipped = play(MemSearchQAEnv(TASK, retriever=TitleRetriever(), obs_budget=40, max_turns=8), TURNS)
    assert [i["memory_found"] for i in clipped] == [0, 0, 0, 0, 0]
    assert clipped[-1]["episode_memory_recall"] is None and clipped[-1]["memory_recall_turns"] == 0
    assert clipped[-1]["evidence_found"] == 0
    extra = play(MemSearchQAEnv(TASK, retriever=TitleRetriever(extra=["d3"]), max_turns=8), TURNS[:2])
    assert [(i["memory_found"], i["memory_kept"]) for i in extra] == [(0, 0), (2, 1)]  # Bo Moss seen at turn 1


def test_a_question_without_a_chain_has_no_evidence():
    env = MemSearchQAEnv(TASK, retriever=TitleRetriever(), max_turns=4)
    env.reset(options={"questions": {"question": "Who?", "answers": ["Bo Moss"]}})
    env.step(act("", "search", "Tarvik"))
    info = env.step(act("Bo Moss", "answer", "Bo Moss"))[4]
    assert (info["memory_found"], info["memory_recall"], info["evidence_items"]) == (0, None, 0)
    assert info["episode_memory_recall"] is None


@pytest.mark.parametrize(("evidence", "memory", "kept"), [
    ("Tara Quzen", "Q1.1: The mayor of Solsol is TARA QUZEN.", True),
    ("Tara Quzen", "tara quzen</mem>", True),  # a tag separates words, as a space does
    ("Tara Quzen", "Bevor;Tara Quzen", True),  # so does the answer separator
    ("Tara Quzen", "Tara Quzenia", False),  # whole words only
    ("Tara Quzen", "the mayor is the Quzen woman", False),  # a paraphrase
    ("The Momil Citadel", "Momil Citadel", True),  # articles are dropped, as in answer scoring
    ("Kiss and Tell (1945 film)", "found Kiss and Tell (1945 film)", True),
])
def test_matching_is_exact_but_normalised(evidence, memory, kept):
    assert holds(words(memory), words(evidence)) is kept


def oracle_episode(env, seed, agent=OracleAgent()):
    obs, info = env.reset(seed=seed)
    infos, done = [], False
    while not done:
        obs, _, terminated, truncated, info = env.step(agent.act(obs, info))
        infos.append(info)
        done = terminated or truncated
    return infos


def test_the_oracle_keeps_everything_at_one_objective():
    env = gym.make("MemSearchQA-v0", dataset=make_generated_task("test", hops=1), objectives=1)
    for seed in range(20):
        infos = oracle_episode(env, seed)
        assert infos[-1]["score"] == 1
        assert [i["memory_recall"] for i in infos] == [None, 1.0]
        assert infos[-1]["episode_memory_recall"] == 1.0 and infos[-1]["episode_context_recall"] == 1.0


def unnoted(infos):
    """Per turn, the hops whose gold document was shown before it but which the turn's memory has no note
    of ("Qj.h: ..."): evidence shown by a search for another hop (or on the way to another hop of the
    same document), which the oracle, noting only the hop it looked up, may lack."""
    chain = [(j, h, s["doc_id"]) for j, o in enumerate(infos[0]["objectives"], 1) for h, s in enumerate(o["chain"], 1)]
    shown, counts = set(), []
    for info in infos:
        noted = {line.partition(":")[0] for line in (info["mem"] or "").splitlines()}
        counts.append(sum(d in shown and f"Q{j}.{h}" not in noted for j, h, d in chain))
        shown |= set(info["doc_ids"])
    return counts


@pytest.mark.parametrize("hops", [1, (1, 2, 3)])
def test_the_oracle_keeps_every_hop_it_looked_up(hops):
    """At several objectives (and hops) a search shows other hops' documents too; the oracle's memory lacks
    only some of those, never a hop it noted, and under the full view the context holds all (1.0)."""
    task = make_generated_task("test", hops=hops)
    recalls = []
    for k in (2, 6, 10):
        env = gym.make("MemSearchQA-v0", dataset=task, objectives=k, max_turns=4 * k + 4, context="full")
        for seed in range(6):
            infos = oracle_episode(env, seed)
            assert infos[-1]["score"] == k
            assert all(i["memory_found"] - i["memory_kept"] <= n for i, n in zip(infos, unnoted(infos)))
            assert all(i["context_recall"] in (None, 1.0) for i in infos)
            recalls.append(infos[-1]["episode_memory_recall"])
    assert min(recalls) < 1.0  # the case arises


def test_a_sloppy_memory_scores_lower():
    """The oracle that notes only the titles it found ("found TITLE") keeps none of the answers."""
    env = gym.make("MemSearchQA-v0", dataset=make_generated_task("test", hops=1), objectives=4, max_turns=12)
    good = [oracle_episode(env, s)[-1]["episode_memory_recall"] for s in range(5)]
    sloppy = [oracle_episode(env, s, OracleAgent(keep_evidence=False))[-1]["episode_memory_recall"] for s in range(5)]
    assert min(good) > 0.9 and max(sloppy) < 0.3


def test_the_benchmark_table_reports_memory_recall():
    records = [{"agent": "a", "context": "memory", "objectives": 1, "em": 1.0, "f1": 1.0,
                "episode_memory_recall": r, "episode_context_recall": r} for r in (1.0, 0.5, None)]
    (row,) = summarize(records)
    assert row["episode_memory_recall"].mean == 0.75 and row["episode_memory_recall_episodes"] == 2
    table = markdown_table([row])
    assert "memory recall %" in table.splitlines()[0] and "| 75.0 [" in table and "Memory (context) recall" in table
    assert "Memory (context) recall" not in markdown_table(summarize([{k: v for k, v in r.items() if "recall" not in k}
                                                                      for r in records]))


@needs_shared
@pytest.mark.parametrize("name", ["hotpotqa-train100", "musique-train100"])
def test_the_oracle_on_real_sets(name):
    """Real chains: HotpotQA's bridge hops are titles, MuSiQue's answers; the oracle misses only evidence
    it had not searched for."""
    env = gym.make("MemSearchQA-v0", dataset=resolve_task(name), objectives=1)
    found = 0
    for seed in range(10):
        infos = oracle_episode(env, seed)
        assert all(i["memory_found"] - i["memory_kept"] <= n for i, n in zip(infos, unnoted(infos)))
        found += infos[-1]["memory_found"]
    assert found >= 15
