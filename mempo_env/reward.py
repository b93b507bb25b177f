"""Outcome reward (spec section 6): SQuAD normalisation, exact match and F1 over alias lists.

A target has one of three shapes:
- ``"Paris"``                          one question, one accepted string;
- ``["Paris", "City of Light"]``       one question, aliases;
- ``[["Paris"], ["Rome", "Roma"]]``    k questions (multi-objective), aliases per question.
Only the third shape splits the prediction on ``;``; a wrong number of parts scores 0.
``AnswerScore.aligned`` is a softer count for training rewards: the sub-answers right in order even
when one is dropped or repeated (``algorithms.mempo --reward aligned``); the metrics never use it.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from dataclasses import dataclass

Target = str | list[str] | list[list[str]]

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)


def normalize_answer(text: str) -> str:
    """Lower-case, drop punctuation and the articles a/an/the, squash whitespace (SQuAD)."""
    text = text.lower().translate(_PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, aliases: list[str]) -> bool:
    pred = normalize_answer(prediction)
    return any(pred == normalize_answer(a) for a in aliases)


def f1_score(prediction: str, aliases: list[str]) -> float:
    """Token-level F1, the best over the aliases."""
    pred = normalize_answer(prediction).split()
    best = 0.0
    for alias in aliases:
        gold = normalize_answer(alias).split()
        common = sum((Counter(pred) & Counter(gold)).values())
        if common:
            precision, recall = common / len(pred), common / len(gold)
            best = max(best, 2 * precision * recall / (precision + recall))
    return best


def alias_lists(target: Target) -> tuple[list[list[str]], bool]:
    """Normalise a target to one alias list per question; the flag says whether to split on ``;``."""
    if isinstance(target, str):
        return [[target]], False
    if target and all(isinstance(t, str) for t in target):
        return [list(target)], False
    if target and all(isinstance(t, list) and t and all(isinstance(a, str) for a in t) for t in target):
        return [list(t) for t in target], True
    raise ValueError(f"unsupported target shape: {target!r}")


@dataclass(frozen=True)
class AnswerScore:
    score: int  # number of sub-answers that exactly match (0..k)
    k: int  # number of questions
    f1: float  # token F1 averaged over questions
    correct: list[bool]  # per sub-question exact match
    aligned: int = 0  # in-order matches less extra parts (aligned_matches); equals score when the count is right

    @property
    def em(self) -> float:
        """Fraction of sub-questions answered exactly (1.0 or 0.0 when k == 1)."""
        return self.score / self.k


def aligned_matches(parts: list[str], aliases: list[list[str]]) -> int:
    """The most sub-answers that match in order (a longest common subsequence of ``parts`` and the
    sub-questions under ``exact_match``), less one for each part beyond the number of sub-questions.
    A list of ten that drops its last answer keeps its nine; one that lists every guess gains nothing."""
    best = [0] * (len(aliases) + 1)  # best[j]: matches of the parts so far with the first j sub-questions
    for part in parts:
        diagonal = 0
        for j, accepted in enumerate(aliases, start=1):
            diagonal, best[j] = best[j], max(best[j], best[j - 1], diagonal + exact_match(part, accepted))
    return max(best[-1] - max(len(parts) - len(aliases), 0), 0)


def score_answer(prediction: str | None, target: Target) -> AnswerScore:
    """Score an extracted answer against a target; ``None`` (no answer) scores 0."""
    aliases, split = alias_lists(target)
    k = len(aliases)
    if prediction is None:
        return AnswerScore(0, k, 0.0, [False] * k)
    parts = prediction.split(";") if split else [prediction]
    if len(parts) != k:
        return AnswerScore(0, k, 0.0, [False] * k, aligned_matches(parts, aliases))
    correct = [exact_match(p, a) for p, a in zip(parts, aliases)]
    f1 = sum(f1_score(p, a) for p, a in zip(parts, aliases)) / k
    return AnswerScore(sum(correct), k, f1, correct, sum(correct))
