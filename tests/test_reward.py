"""Outcome reward (spec section 6): normalisation, EM, F1, the three target shapes, ';' scoring."""

import pytest

from mempo_env.reward import alias_lists, aligned_matches, exact_match, f1_score, normalize_answer, score_answer


def test_squad_normalisation():
    assert normalize_answer("  The  Eiffel-Tower!! ") == "eiffeltower"
    assert normalize_answer("A cat, an apple and THE dog.") == "cat apple and dog"
    assert normalize_answer("Theatre") == "theatre"  # 'the' only as a word


def test_exact_match_and_f1_over_aliases():
    assert exact_match("the Big Apple", ["New York City", "Big Apple"])
    assert not exact_match("New York", ["New York City"])
    assert f1_score("New York", ["New York City"]) == pytest.approx(0.8)
    assert f1_score("New York", ["Boston", "New York City", "york"]) == pytest.approx(0.8)
    assert f1_score("nothing", ["New York"]) == 0.0
    assert f1_score("", ["x"]) == 0.0


def test_target_shapes():
    assert alias_lists("Paris") == ([["Paris"]], False)
    assert alias_lists(["Paris", "City of Light"]) == ([["Paris", "City of Light"]], False)
    assert alias_lists([["Paris"], ["Rome", "Roma"]]) == ([["Paris"], ["Rome", "Roma"]], True)
    with pytest.raises(ValueError):
        alias_lists([])
    with pytest.raises(ValueError):
        alias_lists([["a"], "b"])


def test_single_question_is_not_split():
    assert score_answer("Paris", "paris").score == 1
    assert score_answer("City of Light", ["Paris", "City of Light"]).score == 1
    assert score_answer("Paris; Rome", ["Paris"]).score == 0
    assert score_answer(None, "Paris").score == 0


def test_multi_objective_counts_exact_sub_answers():
    target = [["Paris"], ["Rome", "Roma"], ["Berlin"]]
    s = score_answer("paris; Roma ;Munich", target)
    assert (s.score, s.k, s.correct) == (2, 3, [True, True, False])
    assert s.em == pytest.approx(2 / 3)
    assert s.f1 == pytest.approx(2 / 3)
    # A wrong number of ';'-separated answers scores 0 (and F1 0).
    for wrong in ("Paris; Rome", "Paris; Rome; Berlin; Oslo", "Paris Rome Berlin"):
        s = score_answer(wrong, target)
        assert (s.score, s.f1) == (0, 0.0)


def test_partial_f1_averaged_over_sub_questions():
    s = score_answer("New York; Rome", [["New York City"], ["Rome"]])
    assert s.score == 1
    assert s.f1 == pytest.approx((0.8 + 1.0) / 2)


def test_aligned_credit_survives_a_dropped_or_repeated_answer():
    target = [["Paris"], ["Rome", "Roma"], ["Berlin"], ["Oslo"]]
    assert score_answer("Paris; Rome; Berlin", target).aligned == 3  # the last one dropped: score 0
    assert score_answer("Paris; Berlin; Oslo", target).aligned == 3  # a middle one dropped
    assert score_answer("Paris; Roma; Roma; Berlin; Oslo", target).aligned == 3  # one repeated: 4 in order, 1 extra
    assert score_answer("Paris; Rome; Berlin; Oslo; Bonn; Lima", target).aligned == 2  # two extra guesses cost 2
    assert score_answer("x; y", target).aligned == 0 and score_answer(None, target).aligned == 0
    for right_count in ("Paris; Rome; Oslo; Berlin", "Paris; x; Berlin; Oslo"):  # the count is right: the score
        s = score_answer(right_count, target)
        assert s.aligned == s.score == sum(s.correct)
    assert aligned_matches(["Oslo", "Paris"], target) == 1  # in order only
    assert score_answer("Paris", "Paris").aligned == 1 and score_answer("Rome", "Paris").aligned == 0
