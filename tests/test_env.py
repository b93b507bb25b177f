"""MemSearchQA-v0: the Gymnasium API, the two views, the spec snapshots, costs, errors, hostile text."""

import json

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import mempo_env  # noqa: F401
from mempo_env import Document, MemSearchQAEnv, QARecord, QATask
from mempo_env.retrieval import Hit, RetrieverError

DOCS = [
    Document("d1", "Zorb", "Zorb is a film directed by Ann Lee."),
    Document("d2", "Ann Lee", "Ann Lee was born in Tarvik."),
    Document("d3", "Tarvik", "The mayor of Tarvik is Bo Moss."),
]
QUESTION = QARecord("q1", "Who is the mayor of the city where the director of Zorb was born?", ["Bo Moss"])
TASK = QATask("toy", [QUESTION, QARecord("q2", "Who directed Zorb?", ["Ann Lee"])], DOCS)


class TitleRetriever:
    """Deterministic: returns the document whose title is the query, else nothing."""

    def __init__(self):
        self.calls = 0

    def search(self, queries, topk):
        self.calls += 1
        return [[Hit(d, 1.0) for d in DOCS if d.title == q][:topk] for q in queries]


class DownRetriever:
    def search(self, queries, topk):
        raise RetrieverError("retriever at http://127.0.0.1:9 unreachable after 5 attempts")


def toy_env(**kw) -> MemSearchQAEnv:
    return MemSearchQAEnv(TASK, retriever=TitleRetriever(), **kw)


def act(mem, action, arg, think="t"):
    return f"<mem>{mem}</mem><think>{think}</think><{action}>{arg}</{action}>"


T1 = act("start", "search", "Zorb")
T2 = act("dir Ann Lee", "search", "Ann Lee")
T3 = act("born Tarvik", "search", "Tarvik")
R = {q: f"<tool_response>\nDoc 1(Title: {d.title}) {d.text}\n</tool_response>" for q, d in
     (("Zorb", DOCS[0]), ("Ann Lee", DOCS[1]), ("Tarvik", DOCS[2]))}


def test_check_env_passes_on_the_default_env():
    env = gym.make("MemSearchQA-v0")
    check_env(env.unwrapped, skip_render_check=True)
    obs, info = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    assert env.action_space.contains(T1) and not env.action_space.contains(3)


def test_same_seed_same_question_order():
    env = gym.make("MemSearchQA-v0")
    def order(seed):
        ids = [env.reset(seed=seed)[1]["objectives"][0]["id"]]
        ids += [env.reset()[1]["objectives"][0]["id"] for _ in range(5)]
        return ids
    assert order(3) == order(3)
    assert order(3) != order(4)


def test_reset_options_pick_questions():
    env = toy_env(objectives=2)
    _, info = env.reset(options={"index": 0})
    assert [o["id"] for o in info["objectives"]] == ["q1", "q2"]
    _, info = env.reset(options={"index": [1], "objectives": 1})
    assert [o["id"] for o in info["objectives"]] == ["q2"]
    obs, info = env.reset(options={"questions": {"question": "Who?", "golden_answers": ["X"]}})
    assert obs[1]["content"] == "Who?" and info["objectives"][0]["answers"] == ["X"]
    with pytest.raises(IndexError):
        env.reset(options={"index": 7})
    with pytest.raises(ValueError):
        env.reset(options={"questions": []})


def test_multi_objective_prompt_and_scoring():
    env = toy_env(objectives=2)
    obs, _ = env.reset(options={"index": 0})
    assert "Question 1: " + QUESTION.question in obs[1]["content"]
    assert "Question 2: Who directed Zorb?" in obs[1]["content"]
    env.step(T1)
    _, reward, terminated, _, info = env.step(act("m", "answer", "Bo Moss; Ann Lee"))
    assert terminated and reward == 2.0 and info["score"] == 2 and info["em"] == 1.0 and info["correct"] == [True, True]
    env.reset(options={"index": 0})
    env.step(T1)
    _, reward, _, _, info = env.step(act("m", "answer", "Bo Moss; wrong"))
    assert reward == 1.0 and info["correct"] == [True, False] and info["em"] == 0.5
    env.reset(options={"index": 0})  # one answer for two questions: the spec scores 0, the aligned count 1
    env.step(T1)
    _, reward, _, _, info = env.step(act("m", "answer", "Bo Moss"))
    assert reward == 0.0 and (info["score"], info["aligned_score"]) == (0, 1)
    env.reset(options={"index": 0})  # a broken format zeroes both
    _, _, _, _, info = env.step(act("m", "answer", "Bo Moss; Ann Lee"))
    assert not info["format_ok"] and (info["score"], info["aligned_score"]) == (0, 0)


def test_hand_written_three_turn_episode_snapshots_and_views():
    """Spec section 3 on a hand-written episode: what each view shows, what each snapshot holds."""
    env = toy_env(context="memory")
    obs0, info0 = env.reset(options={"index": 0})
    system, user = obs0
    assert obs0 == [system, user] and info0["full_context"] == obs0 and info0["mem_context"] is None

    obs1, _, _, _, info1 = env.step(T1)
    assert info1["full_context"] == [system, user]  # history before turn 1's generation
    assert info1["mem_context"] == [system, user, {"role": "assistant", "content": "<mem>start</mem>"}]
    assert obs1 == [system, user, {"role": "assistant", "content": T1}, {"role": "user", "content": R["Zorb"]}]

    obs2, _, _, _, info2 = env.step(T2)
    assert info2["full_context"] == obs1
    assert info2["mem_context"][-1] == {"role": "assistant", "content": "<mem>dir Ann Lee</mem>"}
    # Memory view: only the previous turn and the newest tool response survive.
    assert obs2 == [system, user, {"role": "assistant", "content": T2}, {"role": "user", "content": R["Ann Lee"]}]

    obs3, _, _, _, info3 = env.step(T3)
    full_before_3 = [system, user, {"role": "assistant", "content": T1}, {"role": "user", "content": R["Zorb"]},
                     {"role": "assistant", "content": T2}, {"role": "user", "content": R["Ann Lee"]}]
    assert info3["full_context"] == full_before_3
    assert info3["mem_context"] == [system, user, {"role": "assistant", "content": "<mem>born Tarvik</mem>"}]
    assert obs3 == [system, user, {"role": "assistant", "content": T3}, {"role": "user", "content": R["Tarvik"]}]
    assert sum("<tool_response>" in m["content"] for m in obs3) == 1
    assert env.messages == full_before_3 + obs3[2:]

    _, reward, terminated, truncated, info = env.step(act("mayor Bo Moss", "answer", "Bo Moss"))
    assert (reward, terminated, truncated) == (1.0, True, False)
    assert info["format_ok"] and info["n_turns"] == 4 and info["n_searches"] == 3
    assert info["doc_ids"] == [] and info1["doc_ids"] == ["d1"]


def test_full_view_keeps_everything():
    env = toy_env(context="full")
    env.reset(options={"index": 0})
    env.step(T1)
    obs, *_ = env.step(T2)
    assert [m["content"] for m in obs[2:]] == [T1, R["Zorb"], T2, R["Ann Lee"]]


class WhitespaceTokenizer:
    chat_template = None

    def encode(self, text, add_special_tokens=False):
        return text.split()


def test_costs_chars_and_tokens():
    env = toy_env(tokenizer=WhitespaceTokenizer())
    obs0, _ = env.reset(options={"index": 0})
    obs1, *_ = env.step(T1)
    *_, info = env.step(act("m", "answer", "Bo Moss"))
    final = act("m", "answer", "Bo Moss")
    chars = [sum(len(m["content"]) for m in obs0) + len(T1), sum(len(m["content"]) for m in obs1) + len(final)]
    assert (info["total_chars"], info["peak_chars"]) == (sum(chars), max(chars))
    tokens = [len("\n".join(m["content"] for m in o).split()) + len(a.split()) for o, a in ((obs0, T1), (obs1, final))]
    assert (info["total_tokens"], info["peak_tokens"]) == (sum(tokens), max(tokens))
    assert "total_tokens" not in toy_env().reset()[1]


def test_context_overflow_ends_the_episode_unanswered():
    tok = WhitespaceTokenizer()
    first = len("\n".join(m["content"] for m in toy_env().reset(options={"index": 0})[0]).split())
    env = toy_env(context="full", tokenizer=tok, max_context_tokens=first + 5)  # the first tool response overflows
    env.reset(options={"index": 0})
    _, reward, terminated, truncated, info = env.step(T1)
    assert truncated and not terminated and reward == 0.0
    assert info["context_overflow"] and info["answer"] is None and info["score"] == 0 and info["n_turns"] == 1
    roomy = toy_env(context="full", tokenizer=tok, max_context_tokens=10_000)
    roomy.reset(options={"index": 0})
    roomy.step(T1)
    *_, info = roomy.step(act("m", "answer", "Bo Moss"))
    assert info["context_overflow"] is False and info["score"] == 1
    plain = toy_env()
    plain.reset(options={"index": 0})
    plain.step(T1)
    assert "context_overflow" not in plain.step(act("m", "answer", "Bo Moss"))[-1]
    tight = toy_env(tokenizer=tok, max_context_tokens=first - 1)
    with pytest.raises(ValueError, match="longer than max_context_tokens"):
        tight.reset(options={"index": 0})
    with pytest.raises(RuntimeError, match="reset"):  # no episode was started
        tight.step(T1)
    with pytest.raises(ValueError, match="needs a tokenizer"):
        toy_env(max_context_tokens=100)


def test_invalid_turn_gets_a_correction_and_fails_the_gate():
    env = toy_env()
    env.reset(options={"index": 0})
    obs, reward, terminated, truncated, info = env.step("just text")
    assert not (terminated or truncated) and reward == 0.0
    assert obs[-1]["content"].startswith("Invalid turn") and info["format_errors"] == 1 and not info["valid"]
    assert info["mem_context"] is None and set(info["failed_rules"]) >= {1, 2, 3}
    env.step(T3)
    _, reward, terminated, _, info = env.step(act("m", "answer", "Bo Moss"))
    assert terminated and reward == 0.0 and info["score"] == 0 and not info["format_ok"] and 1 in info["format_failed"]


def test_end_on_invalid():
    env = toy_env(end_on_invalid=True)
    env.reset(options={"index": 0})
    _, reward, terminated, _, info = env.step("<mem>m</mem><answer>x</answer>")
    assert terminated and reward == 0.0 and info["answer"] is None


def test_turn_budget_truncates():
    env = toy_env(max_turns=2)
    env.reset(options={"index": 0})
    assert not env.step(T1)[3]
    _, reward, terminated, truncated, info = env.step(T2)
    assert truncated and not terminated and reward == 0.0 and 6 in info["format_failed"]
    with pytest.raises(RuntimeError, match="reset"):
        env.step(T3)


def test_answer_without_search_fails_rule_8_unless_disabled():
    env = toy_env()
    env.reset(options={"index": 0})
    assert env.step(act("m", "answer", "Bo Moss"))[1] == 0.0
    env = toy_env(require_search=False)
    env.reset(options={"index": 0})
    assert env.step(act("m", "answer", "Bo Moss"))[1] == 1.0


def test_access_opens_one_document_and_budget_truncates():
    env = toy_env(obs_budget=20)
    env.reset(options={"index": 0})
    obs, *_, info = env.step(act("m", "access", "d2"))
    body = obs[-1]["content"].removeprefix("<tool_response>\n").removesuffix("\n</tool_response>")
    assert len(body) == 20 and body.endswith("...") and info["doc_ids"] == ["d2"]
    obs, *_, info = env.step(act("m", "access", "tarvik"))  # by title, case-insensitive
    assert info["doc_ids"] == ["d3"]
    obs, *_, info = env.step(act("m", "access", "Nowhere"))
    assert "No document" in obs[-1]["content"] and info["valid"]


def test_retriever_failure_raises_and_loses_nothing():
    env = MemSearchQAEnv(TASK, retriever=DownRetriever())
    env.reset(options={"index": 0})
    before = env.messages
    with pytest.raises(RetrieverError, match="unreachable"):
        env.step(T1)
    assert env.messages == before  # the turn can be retried once the server is back
    env.retriever = TitleRetriever()
    _, _, _, _, info = env.step(T1)
    assert info["turn"] == 1 and info["doc_ids"] == ["d1"]


def test_bad_arguments_fail_clearly():
    with pytest.raises(ValueError, match="context"):
        toy_env(context="partial")
    with pytest.raises(ValueError, match="max_turns"):
        toy_env(max_turns=0)
    with pytest.raises(ValueError, match="prompt"):
        toy_env(prompt="nope")
    with pytest.raises(ValueError, match="retriever"):
        MemSearchQAEnv(TASK, retriever="ftp://x")
    env = toy_env()
    env.reset()
    with pytest.raises(TypeError, match="str"):
        env.step(None)


def test_render_ansi_and_eval_prompt():
    env = toy_env(render_mode="ansi", prompt="eval")
    obs, _ = env.reset(options={"index": 0})
    assert "<mem>" in obs[0]["content"]
    env.step(T1)
    text = env.render()
    assert "--- assistant ---" in text and T1 in text and R["Zorb"] in text


def test_default_bm25_search_finds_the_entity_document(tmp_path):
    env = gym.make("MemSearchQA-v0", cache_dir=tmp_path)
    _, info = env.reset(seed=1)
    step = info["objectives"][0]["chain"][0]
    obs, *_, info = env.step(act("m", "search", step["query"]))
    assert step["doc_id"] in info["doc_ids"] and len(info["doc_ids"]) == 3
    assert obs[-1]["content"].count("Doc ") == 3


class TemplateTokenizer:
    """A stand-in for a Hugging Face tokenizer with a ChatML-style template."""

    chat_template = "chatml"

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=True):
        text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
        return text + ("<|im_start|>assistant\n" if add_generation_prompt else "")

    def encode(self, text, add_special_tokens=False):
        return text.split()


@pytest.mark.filterwarnings("ignore:.*different from the unwrapped")
def test_observation_as_one_prompt_string():
    from gymnasium.utils.env_checker import check_env

    from mempo_env.wrappers import ChatTemplateText

    env = ChatTemplateText(toy_env(), TemplateTokenizer())
    text, _ = env.reset(options={"index": 0})
    assert text.startswith("<|im_start|>system\n") and text.endswith("<|im_start|>assistant\n")
    text, *_ = env.step(T1)
    assert text.count("<|im_start|>") == 5 and R["Zorb"] in text
    check_env(ChatTemplateText(gym.make("MemSearchQA-v0").unwrapped, TemplateTokenizer()), skip_render_check=True)
    with pytest.raises(ValueError, match="chat template"):
        ChatTemplateText(toy_env(), object())


def test_token_costs_use_the_chat_template():
    tok = TemplateTokenizer()
    env = toy_env(tokenizer=tok)
    obs0, _ = env.reset(options={"index": 0})
    obs1, *_ = env.step(T1)
    final = act("m", "answer", "Bo Moss")
    *_, info = env.step(final)
    tokens = [len(tok.apply_chat_template(o).split()) + len(a.split()) for o, a in ((obs0, T1), (obs1, final))]
    assert (info["total_tokens"], info["peak_tokens"]) == (sum(tokens), max(tokens))


@pytest.mark.parametrize("system", [True, False])
def test_views_with_and_without_a_system_message(system):
    from mempo_env.views import mem_context, prepare_prompt

    head = [{"role": "system", "content": "S"}] * system + [{"role": "user", "content": "Q"}]
    a1, r1 = {"role": "assistant", "content": "A1"}, {"role": "user", "content": "R1"}
    a2, r2 = {"role": "assistant", "content": "A2"}, {"role": "user", "content": "R2"}
    assert prepare_prompt(head) == head
    assert prepare_prompt(head + [a1]) == head + [a1]
    assert prepare_prompt(head + [a1, r1]) == head + [a1, r1]
    assert prepare_prompt(head + [a1, r1, a2, r2]) == head + [a2, r2]
    assert mem_context(head + [a1, r1], "m") == head + [{"role": "assistant", "content": "<mem>m</mem>"}]


@pytest.mark.parametrize("options, error, match", [
    ({"indx": 3}, ValueError, "unknown reset option 'indx'"),
    ({"index": 0, "questions": {"question": "Who?", "answers": ["X"]}}, ValueError, "'index'"),
    ({"index": []}, ValueError, "options\\['index'\\] is empty"),
    ({"index": True}, TypeError, "options\\['index'\\]"),
    ({"index": 0.0}, TypeError, "options\\['index'\\]"),
    ({"index": "0"}, TypeError, "options\\['index'\\]"),
    ({"index": [0, "1"]}, TypeError, "options\\['index'\\]\\[1\\]"),
    ({"index": [0, 1], "objectives": 1}, ValueError, "objectives"),
    ({"objectives": 2.7}, TypeError, "options\\['objectives'\\]"),
    ({"objectives": "2"}, TypeError, "options\\['objectives'\\]"),
    ({"objectives": True}, TypeError, "options\\['objectives'\\]"),
    ({"objectives": 3}, ValueError, "options\\['objectives'\\]"),
])
def test_bad_reset_options_are_named(options, error, match):
    env = toy_env()
    env.reset(options={"index": 0})
    with pytest.raises(error, match=match):
        env.reset(options=options)
    with pytest.raises(RuntimeError, match="reset"):  # the refused reset left no episode open
        env.step(T1)


def test_reset_options_take_numpy_integers():
    import numpy as np

    env = toy_env()
    _, info = env.reset(options={"index": np.int64(1)})
    assert [o["id"] for o in info["objectives"]] == ["q2"]
    _, info = env.reset(options={"index": np.array([1, 0]), "objectives": np.int32(2)})
    assert [o["id"] for o in info["objectives"]] == ["q2", "q1"]


@pytest.mark.parametrize("kwargs, error, match", [
    ({"topk": "3"}, TypeError, "topk must be an integer, not '3'"),
    ({"max_turns": 2.0}, TypeError, "max_turns"),
    ({"obs_budget": True}, TypeError, "obs_budget"),
    ({"objectives": None}, TypeError, "objectives"),
    ({"task_seed": "0"}, TypeError, "task_seed"),
    ({"max_context_tokens": 9.5, "tokenizer": WhitespaceTokenizer()}, TypeError, "max_context_tokens"),
    ({"max_context_tokens": 0, "tokenizer": WhitespaceTokenizer()}, ValueError, "max_context_tokens"),
    ({"end_on_invalid": "no"}, TypeError, "end_on_invalid must be a bool, not 'no'"),
    ({"require_search": 1}, TypeError, "require_search"),
])
def test_constructor_checks_argument_types(kwargs, error, match):
    with pytest.raises(error, match=match):
        toy_env(**kwargs)
    with pytest.raises(error, match=match):
        gym.make("MemSearchQA-v0", **kwargs)


def test_constructor_takes_numpy_numbers():
    import numpy as np

    env = toy_env(topk=np.int64(2), max_turns=np.int32(3), end_on_invalid=np.bool_(True))
    assert (env.topk, env.max_turns, env.end_on_invalid) == (2, 3, True)
    assert type(env.topk) is int and type(env.end_on_invalid) is bool


@pytest.mark.parametrize("context", ["memory", "full"])
def test_token_costs_and_limit_match_the_rendered_observation(tokenizer, context):
    """Per-message token counts add up to the chat-template count of each observation (the tiny policy's
    ChatML tokenizer), through invalid turns, accesses and several searches."""
    from mempo_env.views import count_tokens

    invalid = "<mem>x</mem> no action <|im_end|>"
    actions = [T1, invalid, act("m", "access", "Ann Lee"), T3, act("m", "answer", "Bo Moss")]
    env = toy_env(context=context, tokenizer=tokenizer)
    obs, _ = env.reset(options={"index": 0})
    counts, costs = [], []
    for a in actions:
        counts.append(count_tokens(obs, tokenizer))
        costs.append(counts[-1] + len(tokenizer.encode(a, add_special_tokens=False)))
        obs, *_, info = env.step(a)
    assert (info["total_tokens"], info["peak_tokens"]) == (sum(costs), max(costs))
    longest = max(counts)
    assert counts.index(longest) > 0
    for limit in (longest, longest - 1):  # the longest observation just fits, then overflows
        env = toy_env(context=context, tokenizer=tokenizer, max_context_tokens=limit)
        env.reset(options={"index": 0})
        for a in actions:
            *_, terminated, truncated, info = env.step(a)
            if terminated or truncated:
                break
        assert info["context_overflow"] == (limit < longest)
        assert info["turn"] == (len(actions) if limit == longest else counts.index(longest))


class CountingTokenizer(TemplateTokenizer):
    """Counts the characters it is asked to tokenise."""

    def __init__(self):
        self.chars = 0

    def encode(self, text, add_special_tokens=False):
        self.chars += len(text)
        return super().encode(text)


def test_full_history_is_tokenised_once_not_every_turn():
    tok = CountingTokenizer()
    env = toy_env(context="full", tokenizer=tok, max_turns=12, max_context_tokens=10**9)
    env.reset(options={"index": 0})
    for _ in range(12):
        env.step(act("x " * 5000, "search", "Zorb"))
    history = sum(len(m["content"]) for m in env.messages)
    assert tok.chars < 3 * history  # each action twice (as written, as a message), each reply once


@pytest.mark.parametrize("limit", [{"max_episode_steps": 2}, {"max_turns": 2}])
def test_a_truncated_episode_ends_with_its_metrics_whoever_truncates_it(limit):
    """The env's own turn budget and gym.make's TimeLimit end an episode with the same final info."""
    env = gym.make("MemSearchQA-v0", **limit)
    env.reset(seed=0)
    assert not any(env.step(act("m", "search", "x"))[2:4])
    _, reward, terminated, truncated, info = env.step(act("m", "search", "y"))
    assert truncated and not terminated and reward == 0.0
    assert (info["score"], info["em"], info["f1"], info["answer"], info["n_turns"]) == (0, 0.0, 0.0, None, 2)
    with pytest.raises(RuntimeError, match="reset"):
        env.unwrapped.step(T1)


# ---- hostile text at the boundary (the soak drives it at scale: tests/test_soak.py) -------------------
SURROGATE_TURN = "<mem>x\udc3a</mem><think>t</think><search>Zorb \udc3a</search>"


def test_lone_surrogates_become_u_fffd_and_everything_after_encodes():
    env = toy_env()
    env.reset(options={"index": 0})
    obs, _, _, _, info = env.step(SURROGATE_TURN)
    assert info["replaced_surrogates"] == 2 and info["valid"] and info["argument"] == "Zorb \ufffd"
    assert env.observation_space.contains(obs) and obs[2]["content"] == SURROGATE_TURN.replace("\udc3a", "\ufffd")
    json.dumps([info, env.messages], ensure_ascii=False).encode()  # info strings and history encode


def test_a_surrogate_in_an_observation_is_outside_the_space_and_contains_says_so():
    space = toy_env().observation_space
    assert not space.contains([{"role": "user", "content": "x\udc3a"}])  # an answer, not a UnicodeEncodeError


def test_a_retrievers_lone_surrogates_are_replaced_too():
    class Escaping:  # a JSON server can send "\udc3a" as an escape
        def search(self, queries, topk):
            return [[Hit(Document("d9", "Zorb", "Zorb \udc3a is a film."), 1.0)] for _ in queries]

    env = MemSearchQAEnv(TASK, retriever=Escaping())
    env.reset(options={"index": 0})
    obs, *_ = env.step(T1)
    assert "Zorb \ufffd is a film." in obs[-1]["content"] and env.observation_space.contains(obs)


def test_an_observation_that_would_not_fit_the_space_ends_the_episode():
    env = toy_env(context="full")
    obs0, _ = env.reset(options={"index": 0})
    wide = act("x" * 600_000, "search", "Zorb")
    obs1, _, terminated, truncated, info = env.step(wide)
    assert not (terminated or truncated) and "observation_overflow" not in info
    obs2, reward, terminated, truncated, info = env.step(wide)  # 1.2 MB of full view
    assert truncated and not terminated and reward == 0.0 and info["score"] == 0
    assert info["observation_overflow"] and obs2 == obs1  # the last observation that fit
    assert env.observation_space.contains(obs2) and env.messages[-2]["content"] == wide  # history verbatim
    with pytest.raises(RuntimeError, match="reset"):
        env.step(T1)


def test_an_answer_too_big_to_observe_still_ends_scored():
    env = toy_env()
    env.reset(options={"index": 0})
    obs1, *_ = env.step(T1)
    obs2, reward, terminated, truncated, info = env.step(act("m", "answer", "Bo Moss" + " " * 1_100_000))
    assert terminated and info["observation_overflow"] and reward == info["score"] == 1 and obs2 == obs1


def test_a_normal_episode_ends_without_observation_overflow():
    env = toy_env()
    env.reset(options={"index": 0})
    env.step(T1)
    *_, info = env.step(act("m", "answer", "Bo Moss"))
    assert info["observation_overflow"] is False and info["replaced_surrogates"] == 0


@pytest.mark.parametrize(("question", "match"), [
    ({"question": "Who? \udc3a", "answers": ["x"]}, "lone surrogate"),
    ({"question": "Who?", "answers": ["x\ud800"]}, "lone surrogate"),
    ({"question": "x" * (1 << 20), "answers": ["x"]}, "does not fit the observation space's max_bytes=1048576"),
])
def test_reset_refuses_questions_that_cannot_be_observed(question, match):
    env = toy_env()
    with pytest.raises(ValueError, match=match):
        env.reset(options={"questions": question})
    with pytest.raises(RuntimeError, match="reset"):  # the refused reset left no episode open
        env.step(T1)
