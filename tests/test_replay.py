"""Replaying a run's episodes in another view: same answers, the other view's cost."""

from benchmarks.replay import replay
from benchmarks.run import evaluate
from mempo_env.tasks import make_generated_task


def test_replay_gives_the_full_context_cost_of_the_same_answers(tmp_path):
    task = make_generated_task("test", seed=0, hops=1)
    evaluate(["oracle", "weak"], out_dir=tmp_path, dataset=task, objectives=[1, 3], contexts=["memory"],
             episodes=4, prompt="train", plots=False, verbose=False)
    same = replay(tmp_path / "episodes.jsonl", task, context="memory")
    assert len(same) == 16 and all((r["total"], r["peak"]) == (r["recorded_total"], r["recorded_peak"]) for r in same)
    full = replay(tmp_path / "episodes.jsonl", task, context="full")
    assert [r["f1"] for r in full] == [r["f1"] for r in same]
    assert all(r["total"] >= r["recorded_total"] for r in full)
    assert any(r["total"] > r["recorded_total"] for r in full if r["objectives"] == 3)


def test_replay_on_another_task_is_refused(tmp_path):
    import pytest

    task = make_generated_task("test", seed=0, hops=1)
    evaluate(["oracle"], out_dir=tmp_path, dataset=task, objectives=[2], contexts=["memory"], episodes=3,
             prompt="train", plots=False, verbose=False)
    with pytest.raises(ValueError, match="another task"):
        replay(tmp_path / "episodes.jsonl", make_generated_task("test", seed=1, hops=1))
