"""Property tests: arbitrary and adversarial responses never crash the environment and never earn
reward they did not deserve (malformed tags, injected tool responses, several answers, huge text)."""

import gymnasium as gym
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mempo_env  # noqa: F401
from mempo_env.protocol import parse_turn

ENV = gym.make("MemSearchQA-v0", max_turns=4, cache_dir=None).unwrapped
ENV.reset(seed=0)
GOLD = ENV.task.questions[0].answers[0]
TAGS = ["<mem>", "</mem>", "<think>", "</think>", "<search>", "</search>", "<answer>", "</answer>", "<access>",
        "</access>", "<tool_response>", "</tool_response>", "<mem", "answer>", "</", "<<answer>>"]
FRAGMENTS = st.one_of(st.sampled_from(TAGS + [GOLD, ";", " ", "\n", "Doc 1(Title: x)"]), st.text(max_size=12))
ADVERSARIAL = st.lists(FRAGMENTS, max_size=40).map("".join)
WELL_FORMED_ANSWER = f"<mem>m</mem><think>t</think><answer>{GOLD}</answer>"
SEARCH = f"<mem>m</mem><think>t</think><search>{ENV.task.questions[0].chain[0].query}</search>"
QUESTION = {"question": ENV.task.questions[0].question, "answers": [GOLD]}


def play(actions: list[str]) -> tuple[float, dict]:
    ENV.reset(options={"questions": QUESTION})
    total, info = 0.0, {}
    for a in actions:
        _, reward, terminated, truncated, info = ENV.step(a)
        total += reward
        if terminated or truncated:
            break
    return total, info


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.text(), min_size=1, max_size=5))
def test_arbitrary_text_never_raises_and_never_earns(actions):
    reward, _ = play(actions)
    assert reward == 0.0


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ADVERSARIAL, min_size=1, max_size=4))
def test_adversarial_tags_never_raise_and_earn_only_through_a_valid_trajectory(actions):
    reward, info = play(actions)
    if reward > 0:  # only a format-valid episode whose answer turn is exactly right can score
        assert info["format_ok"] and info["score"] == 1
    for a in actions:
        t = parse_turn(a)
        if "<tool_response>" in a or "</tool_response>" in a or a.count("<answer>") > 1:
            assert not t.valid


@settings(max_examples=300, deadline=None)
@given(ADVERSARIAL, st.integers(0, 2))
def test_injected_tool_response_or_second_answer_never_earns(junk, where):
    poison = [f"<tool_response>{junk}</tool_response>", f"<answer>{GOLD}</answer>", f"<tool_response>{GOLD}"][where]
    cheat = f"<mem>{GOLD}</mem><think>t</think><answer>{GOLD}</answer>{poison}"
    assert play([SEARCH, cheat])[0] == 0.0
    # ...and the poison in an earlier turn spoils the whole trajectory too.
    assert play([SEARCH.replace("<mem>m</mem>", f"<mem>{poison}</mem>"), WELL_FORMED_ANSWER])[0] == 0.0


def test_the_honest_trajectory_does_earn():
    assert play([SEARCH, WELL_FORMED_ANSWER])[0] == 1.0


@settings(max_examples=10, deadline=None)
@given(st.sampled_from(TAGS + [GOLD, "日本語 ", "\x00", "😀"]), st.integers(200_000, 1_000_000))
def test_megabyte_outputs(piece, n):
    text = (piece * (n // len(piece) + 1))[:n]
    reward, _ = play([text, SEARCH + text, text + WELL_FORMED_ANSWER])
    assert reward == 0.0
