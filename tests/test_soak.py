"""The hostile-action soak (benchmarks/experiments/soak.py) at a small size through every serialising path it
knows, in both views: every observation in the observation space, every info encodable, every
episode ended with its final info. (100,000 actions a path: ``python -m benchmarks.experiments.soak``.)"""

from __future__ import annotations

import itertools

import pytest

from benchmarks.experiments.soak import KNOWN, PATHS, Outcome, PlainPath, hostile_actions, run, soak

ACTIONS = 500  # KNOWN's huge actions first, then about 5 more huge ones in the seeded mix


@pytest.mark.parametrize("context", ["memory", "full"])
@pytest.mark.parametrize("path", list(PATHS))
def test_hostile_actions_keep_every_observation_in_the_space(path: str, context: str) -> None:
    if path == "openenv":
        pytest.importorskip("openenv")
    report = run(path, context, ACTIONS)
    assert report.failures == []
    assert report.actions >= ACTIONS and report.episodes > ACTIONS // 8  # short episodes, many resets
    assert report.replaced_surrogates > 0 and report.observation_overflows >= 2  # KNOWN's cases happened
    assert report.largest_observation_bytes <= 1 << 20


def test_the_generator_is_seeded_and_starts_with_the_known_failures() -> None:
    first = list(itertools.islice(hostile_actions(3), 200))
    assert first[: len(KNOWN)] == list(KNOWN) and first == list(itertools.islice(hostile_actions(3), 200))
    assert first != list(itertools.islice(hostile_actions(4), 200))


def test_the_soak_reports_a_path_that_breaks_its_promises() -> None:
    class Leaky(PlainPath):
        """Emits an observation outside the space and loses the final info of every episode."""

        def step(self, actions: list[str]) -> list[Outcome]:
            outcomes = super().step(actions)
            for o in outcomes:
                o.observation = [{"role": "user", "content": "x\udc3a"}]
                o.info = {k: v for k, v in o.info.items() if k != "score"}
            return outcomes

    path = Leaky(1, {"max_turns": 2})
    report = soak(path, hostile_actions(0), 4, max_turns=2)
    path.close()
    assert any("outside ChatMessages" in f for f in report.failures)
    assert any("ended without its final info" in f for f in report.failures)


def test_a_path_whose_extra_is_missing_is_left_out_by_default_and_refused_by_name(monkeypatch, capsys) -> None:
    import importlib.util

    from benchmarks.experiments import soak as module

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "fastapi" else real(name, *a))
    ran = []
    monkeypatch.setattr(module, "run", lambda path, context, n, **kw: ran.append(path) or module.Report())
    with pytest.raises(SystemExit) as ok:
        module.main(["--actions", "1", "--contexts", "memory"])
    assert ok.value.code == 0 and ran == ["plain", "async"]
    assert "the openenv path is left out: it needs the openenv extra" in capsys.readouterr().out
    with pytest.raises(SystemExit) as refused:
        module.main(["--paths", "plain", "openenv"])
    assert refused.value.code == 2 and "the openenv path needs the openenv extra" in capsys.readouterr().err
