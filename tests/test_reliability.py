"""The reliability benchmark (``benchmarks/experiments/reliability.py``) as a regression test: every fault it
injects is refused clearly or absorbed, none answered wrongly or crashed on. The quick cases run by
default; the kill cases (server, builder, learner: real processes, SIGKILL) are slow."""

from __future__ import annotations

import subprocess

import pytest

from benchmarks.experiments.reliability import OUTCOMES, Try, clear_refusal, run_cases, table


def defects(tries: list[Try]) -> list[Try]:
    return [t for t in tries if t.outcome in ("silent", "failed")]


def test_damaged_folders_bad_paths_mismatched_replicas_and_hostile_requests_are_refused():
    tries = run_cases(["folders", "damage", "replicas", "requests"], trials=1)
    assert not defects(tries), table(tries)
    assert {t.case for t in tries} == {"folders", "damage", "replicas", "requests"}
    # what must be refused is refused, not answered (a damaged index may also serve the good rankings)
    assert all(t.outcome == "refused" for t in tries if t.case in ("folders", "replicas"))
    assert [t.outcome for t in tries if "surrogate" in t.fault] == ["correct"]


@pytest.mark.slow
def test_kills_of_the_server_the_builder_and_the_learner_lose_nothing():
    tries = run_cases(["server", "builder", "learner"], trials=1)
    assert not defects(tries), table(tries)
    assert {t.case for t in tries} == {"server", "builder", "learner"}


def test_a_refusal_is_a_non_zero_exit_without_a_traceback():
    def done(code: int, err: str) -> subprocess.CompletedProcess:
        return subprocess.CompletedProcess([], code, "", err)

    assert clear_refusal(done(1, "error: --out u holds files this command did not write\n"))
    assert not clear_refusal(done(0, "error: but it exited 0\n"))
    assert not clear_refusal(done(1, "Traceback (most recent call last):\n  ...\nValueError: x\n"))
    assert not clear_refusal(done(1, ""))


def test_the_table_counts_each_outcome_and_the_defects_are_its_last_columns():
    tries = [Try("a", "f1", "refused"), Try("a", "f2", "silent"), Try("b", "f3", "correct")]
    lines = table(tries).splitlines()
    assert OUTCOMES[-2:] == ("silent", "failed")
    assert lines[2] == "| a | 2 | 1 | 0 | 1 | 0 |" and lines[-1] == "| **all** | 3 | 1 | 1 | 1 | 0 |"
