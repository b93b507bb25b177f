"""The learner comparison end to end at absurdly small settings: folders, resume, report, RESULTS.md."""

import dataclasses
import gzip
import json
import math
import subprocess
from pathlib import Path

import pytest
import torch
from doc_blocks import malformed_tables

from agents.statistics import mean_ci, summarize
from algorithms.compute import num_threads
from algorithms.mempo import load_checkpoint
from benchmarks.experiments.learner_comparison import comparison as learners
from benchmarks.experiments.learner_comparison.comparison import compare
from benchmarks.experiments.learner_comparison.report import write_results_section
from benchmarks.experiments.learner_comparison.settings import HEADING, RECORD_HEADING
from benchmarks.experiments.learner_comparison.tables import question_tables, seed_averaged
from benchmarks.report import BenchmarkError

TINY = dict(steps=1, questions_per_step=2, group_size=2, max_turns=4, max_new_tokens=8, minibatch_size=8,
            pack_tokens=256, objectives=2, eval_every=1, curve_questions=1, eval_samples=1)


def lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def smoke(out: Path, warmup: Path, archive_dir: Path | None = None, max_new_tokens: int = 16, **learner) -> dict:
    """A one-seed comparison of the tiny policy; 16 new tokens a turn, since an untrained policy writes
    until the budget."""
    return compare(out, seeds=[0], episodes=2, samples=2, objectives=[1, 2], warmup=warmup, long_from=2,
                   learner={**TINY, **learner}, archive_dir=archive_dir, max_new_tokens=max_new_tokens,
                   verbose=False)


@pytest.mark.slow
def test_comparison_trains_evaluates_resumes_and_reports(policy_dir, tmp_path, monkeypatch):
    out = tmp_path / "learners"
    result = smoke(out, policy_dir, archive_dir=tmp_path / "archive")

    runs = sorted((out / "runs").iterdir())
    assert sorted(p.name for p in (tmp_path / "archive/runs").iterdir()) == [r.name for r in runs]  # seed 0 kept
    assert [r.name for r in runs] == ["control-s0", "grpo-full-s0", "grpo-s0", "mempo-s0"]
    for run in runs:
        assert load_checkpoint(run) == run / "checkpoint" and lines(run / "metrics.jsonl") == 1
        assert lines(run / "curve.jsonl") == 2  # the learning curve: at the start and after the step
        saved = json.loads((run / "config.json").read_text())
        assert saved["policy"] == str(policy_dir) and saved["eval_episodes"] == 0
    assert json.loads((out / "runs/grpo-full-s0/config.json").read_text())["context"] == "full"
    assert json.loads((out / "runs/control-s0/config.json").read_text())["control"] == "shuffled"
    for name in ("comparison.json", "results.json", "report.md", "curves.png", "f1_vs_objectives.png",
                 "cost_vs_objectives.png"):
        assert (out / name).is_file(), name
    episodes = {f"{kind}-{view}": [json.loads(x) for run in (out / kind / view).iterdir()
                                   for x in (run / "episodes.jsonl").read_text().splitlines()]
                for kind in ("eval", "sampled") for view in ("memory", "full")}  # a folder per policy
    memory, full = episodes["eval-memory"], episodes["eval-full"]
    assert {r["agent"] for r in memory} == {"warm-up", "mempo-s0", "grpo-s0", "control-s0"} and len(memory) == 16
    assert {r["agent"] for r in full} == {"warm-up", "grpo-full-s0"} and {r["context"] for r in full} == {"full"}
    assert all("total_tokens" in r and "context_overflow" in r for r in memory + full)  # TT in the policy's tokens
    # sampled: 2 episodes per question at the training horizon, each policy in its view
    assert {r["agent"] for r in episodes["sampled-full"]} == {"warm-up~1", "warm-up~2", "grpo-full-s0~1",
                                                               "grpo-full-s0~2"}
    assert len(episodes["sampled-memory"]) == 4 * 2 * 2 and {r["objectives"] for r in episodes["sampled-memory"]} == {2}
    settings = json.loads((out / "comparison.json").read_text())["settings"]
    assert (settings["max_new_tokens"], settings["max_context_tokens"]) == (16, 4096 - 16)  # the policy's window

    report = (out / "report.md").read_text()
    for title in ("### Learning", "### MemPO − GRPO", "### (a)", "### (b)", "### (c)"):
        assert title in report
    assert not malformed_tables(report)
    tables = result["tables"]
    assert [r["objectives"] for r in tables["a"]] == ["2"]
    assert [r["objectives"] for r in tables["b"]] == ["1", "2", "all"]
    assert [r["objectives"] for r in tables["c"]] == ["1", "2", "change 1→2"]
    assert tables["b"][-1]["grpo-full"][0] > 0 and tables["a"][0]["mempo"] is not None

    # Started again: no training, no new episode, the same tables.
    monkeypatch.setattr(learners, "train", lambda cfg: pytest.fail(f"{cfg.run_dir} trained again"))
    assert smoke(out, policy_dir)["tables"] == tables
    assert sum(lines(run / "episodes.jsonl") for run in (out / "eval/memory").iterdir()) == 16
    with pytest.raises(BenchmarkError, match="other settings.*lr"):  # refused before any training
        smoke(out, policy_dir, lr=0.5)

    # RESULTS.md gets the headline, the record every table; a rerun replaces both and keeps what is around them.
    md, record = tmp_path / "RESULTS.md", tmp_path / "docs/experiments/learners.md"
    md.write_text(f"# Results\n\n{HEADING}\n\nThe reading.\n\n## Next\n")
    record.parent.mkdir(parents=True)
    record.write_text(f"# The comparison\n\nWhat was tried.\n\n{RECORD_HEADING}\n")
    write_results_section(out, md, record)
    first, kept = md.read_text(), record.read_text()
    assert first.index(HEADING) < first.index("### Learning") < first.index("The reading.") < first.index("## Next")
    assert "### MemPO − GRPO" in first and "### (a)" not in first and "(docs/experiments/learners.md)" in first
    assert "python -m benchmarks.experiments.learner_comparison" not in first and "library call" in first  # its command
    assert all((tmp_path / f"results/learners_{name}.png").is_file() for name in ("curves", "f1", "cost"))
    assert kept.index("What was tried.") < kept.index("### Learning") < kept.index("### (a)")
    assert "](../../results/learners_curves.png)" in kept and report.rstrip() in kept
    write_results_section(out, md, record)
    assert md.read_text() == first and record.read_text() == kept

    # The record only, under a heading of its own: RESULTS.md and the other block are left as they were.
    record.write_text(kept + "\n## At another horizon\n")
    write_results_section(out, md, record, heading=None, record_heading="## At another horizon")
    assert md.read_text() == first and record.read_text().startswith(kept)
    assert record.read_text().count("### (a)") == 2
    assert f"](../../results/{out.name}/curves.png)" in record.read_text()
    assert all((tmp_path / f"results/{out.name}/{name}.png").is_file() for name in ("curves", "f1", "cost"))


@pytest.mark.parametrize("kwargs, message", [
    (dict(learner={"algo": "grpo"}), "set per arm"),
    (dict(learner={"stepz": 3}), "stepz"),
    (dict(learner={"steps": 0}), "steps"),
    (dict(objectives=[1, 1]), "distinct"),
    (dict(objectives=[500]), "questions"),
    (dict(seeds=[]), "seeds"),
    (dict(split="dev"), "validation"),
    (dict(learner={"dataset": "hotpotqa"}), "trains on the generated task"),  # it evaluates on generated questions
    (dict(jobs=0), "jobs and max_new_tokens must be at least 1"),
    (dict(samples=0), "samples"),
    (dict(max_new_tokens=0), "max_new_tokens must be at least 1"),
    (dict(arms=["mempo", "ppo"]), "unknown arms"),
    (dict(arms=[]), "no arm"),
])
def test_bad_settings_fail_before_any_work(tmp_path, kwargs, message):
    with pytest.raises(BenchmarkError, match=message):
        compare(tmp_path / "x", **kwargs)
    assert not (tmp_path / "x").exists()


def test_each_seed_is_trained_then_evaluated_before_the_next_with_the_chosen_arms(tmp_path, monkeypatch):
    """An interrupted comparison holds whole seeds: the tasks go seed by seed, each seed's runs and then
    (and, after the first seed's runs, the warm-up's in the chosen arms' views only) its evaluations,
    each evaluation after its own run."""
    scheduled = []
    monkeypatch.setattr(learners, "run_tasks", lambda jobs, tasks, done=None: scheduled.extend(tasks))
    monkeypatch.setattr(learners, "report", lambda out: {"markdown": ""})
    compare(tmp_path, seeds=[3, 1], arms=["control", "mempo", "grpo"], jobs=2, verbose=False)

    def folders(s):
        return [f"{kind}/memory/{arm}-s{s}" for arm in ("mempo", "grpo", "control") for kind in ("eval", "sampled")]

    assert [t.name for t in scheduled] == ["mempo-s3", "grpo-s3", "control-s3", "eval/memory/warm-up",
                                           "sampled/memory/warm-up", *folders(3),  # no full view
                                           "mempo-s1", "grpo-s1", "control-s1", *folders(1)]
    assert all(t.needs == (t.name.split("/")[-1],) for t in scheduled if t.name.count("-s") and "/" in t.name)
    f, cfg = scheduled[0].call()
    assert f is learners.trained_checkpoint and Path(cfg.run_dir).name == "mempo-s3" and cfg.algo == "mempo"
    settings = json.loads((tmp_path / "comparison.json").read_text())["settings"]
    assert settings["arms"] == ["mempo", "grpo", "control"]  # in ARMS' order, for the report


def _log(events: list, name: str, value: float):
    return lambda: events.append(("start", name)) or (math.sqrt, value)


@pytest.mark.parametrize("jobs", [1, 2])
def test_tasks_run_once_each_after_what_they_need_first_ready_first(jobs):
    events = []
    tasks = [learners.Task("a", _log(events, "a", 1.0)), learners.Task("a-eval", _log(events, "a-eval", 4.0), ("a",)),
             learners.Task("b", _log(events, "b", 9.0)), learners.Task("b-eval", _log(events, "b-eval", 16.0), ("b",))]
    learners.run_tasks(jobs, tasks, done=lambda name: events.append(("end", name)))
    starts = [name for what, name in events if what == "start"]
    assert sorted(starts) == ["a", "a-eval", "b", "b-eval"] and len(events) == 8
    for task in tasks:
        assert all(events.index(("end", need)) < events.index(("start", task.name)) for need in task.needs)
    if jobs == 1:  # one process: the first ready task in list order
        assert starts == ["a", "a-eval", "b", "b-eval"]
    else:  # two: b starts beside a instead of waiting behind a's evaluation
        assert starts[:2] == ["a", "b"]


def test_a_failed_task_stops_what_needs_it_and_bad_needs_are_refused():
    ran = []
    tasks = [learners.Task("a", lambda: (math.sqrt, "not a number")),
             learners.Task("a-eval", lambda: ran.append("a-eval") or (math.sqrt, 1.0), ("a",))]
    with pytest.raises(TypeError):
        learners.run_tasks(1, tasks)
    assert ran == []
    with pytest.raises(BenchmarkError, match="not tasks"):
        learners.run_tasks(1, [learners.Task("a", lambda: (math.sqrt, 1.0), ("missing",))])
    with pytest.raises(BenchmarkError, match="need each other"):
        learners.run_tasks(1, [learners.Task("a", lambda: (math.sqrt, 1.0), ("b",)),
                               learners.Task("b", lambda: (math.sqrt, 1.0), ("a",))])


# A transcript with one memory of 15 characters, two equal lines.
TURNS = [{"role": "user", "content": "Who?"},
         {"role": "assistant", "content": "<mem>Ann Lee\nAnn Lee</mem><think>t</think><search>x</search>"}]


def test_an_archive_keeps_the_finished_seeds_and_a_fresh_folder_goes_on_from_it(tmp_path, monkeypatch):
    """A comparison outlives its machine: ``archive`` keeps each seed whose arms are all trained and
    evaluated (logs, and episodes without transcripts); a fresh folder restored from it trains and plays
    only what is missing."""
    scheduled = []
    monkeypatch.setattr(learners, "run_tasks", lambda jobs, tasks, done=None: scheduled.append(tasks))
    monkeypatch.setattr(learners, "report", lambda out: {"markdown": ""})
    out, kept, fresh = tmp_path / "out", tmp_path / "kept", tmp_path / "fresh"
    settings = dict(seeds=[0, 1], episodes=2, samples=1, objectives=[2, 3], arms=["mempo", "control"],
                    learner={"objectives": 2}, verbose=False)
    compare(out, **settings)
    configs = {t.name: t.call()[1] for t in scheduled[0] if not t.needs and "/" not in t.name}
    assert list(configs) == ["mempo-s0", "control-s0", "mempo-s1", "control-s1"]
    assert learners.archive(out, tmp_path / "new/archive") == []  # after a task, before any seed is finished

    def played(folder: Path, agents: list[str], horizons: list[int]) -> None:
        folder.mkdir(parents=True)
        (folder / "config.json").write_text("{}")
        (folder / "episodes.jsonl").write_text("".join(
            json.dumps({"agent": a, "objectives": k, "episode": e, "f1": 1.0, "questions": ["Who?"],
                        "trajectory": TURNS}) + "\n"
            for a in agents for k in horizons for e in range(2)))

    for label in ("warm-up", "mempo-s0", "control-s0", "mempo-s1"):  # control-s1 never finished
        played(out / "eval/memory" / label, [label], [2, 3])
        played(out / "sampled/memory" / label, [f"{label}~1"], [2])
        if label in configs:
            run = out / "runs" / label
            run.mkdir(parents=True)
            (run / "config.json").write_text(json.dumps(dataclasses.asdict(configs[label])))
            (run / "metrics.jsonl").write_text('{"step": 1}\n')
            (run / "curve.jsonl").write_text("")
            (run / "checkpoint").mkdir()  # not archived
    being_written = out / "eval/memory/control-s1/episodes.jsonl"  # another process is writing it
    being_written.parent.mkdir(parents=True)
    being_written.write_text('{"agent": "control-s1", "objectives": 2, "episode": 0}\n{"agent": "cont')
    assert learners.archive(out, kept) == [0]
    assert being_written.read_text().endswith('{"agent": "cont')  # read, never cut under its writer
    assert sorted(p.name for p in (kept / "runs").iterdir()) == ["control-s0", "mempo-s0"]
    assert not (kept / "runs/mempo-s0/checkpoint").exists() and not (kept / "eval/memory/mempo-s1").exists()
    episodes = gzip.decompress((kept / "eval/memory/mempo-s0/episodes.jsonl.gz").read_bytes()).decode()
    assert len(episodes.splitlines()) == 4 and "trajectory" not in episodes and '"f1": 1.0' in episodes
    assert '"memory_chars": 15.0' in episodes and '"memory_repeated": 0.5' in episodes  # what the memories held

    scheduled.clear()
    compare(fresh, archive_dir=kept, **settings)  # the warm-up and seed 0 were played before
    assert [t.name for t in scheduled[0]] == ["mempo-s1", "control-s1", "eval/memory/mempo-s1",
                                              "sampled/memory/mempo-s1", "eval/memory/control-s1",
                                              "sampled/memory/control-s1"]
    assert (fresh / "sampled/memory/warm-up/episodes.jsonl").read_text().count("warm-up~1") == 2
    assert (fresh / "runs/control-s0/metrics.jsonl").read_text() == '{"step": 1}\n'


def test_git_commits_what_an_archive_keeps_and_ignores_the_work_folder():
    """An archive is committed as each seed ends. Its runs' logs once fell under the ``runs/`` rule meant
    for the top-level work folder, and a seed's training logs were lost with its machine."""
    root = Path(__file__).resolve().parents[1]
    if not (root / ".git").exists():
        pytest.skip("not a git checkout")
    kept = [f"benchmarks/results/learners-10obj/{name}" for name in
            ("comparison.json", "runs/mempo-s0/metrics.jsonl", "eval/memory/mempo-s0/episodes.jsonl.gz")]
    ignored = subprocess.run(["git", "check-ignore", "--no-index", *kept, "runs/default/metrics.jsonl"],
                             cwd=root, capture_output=True, text=True).stdout.split()
    assert ignored == ["runs/default/metrics.jsonl"]


def test_the_report_leaves_out_the_arms_a_comparison_did_not_train():
    from benchmarks.experiments.learner_comparison.tables import learning_tables, markdown

    settings = {"seeds": [0], "objectives": [6], "sampled_objectives": [6], "long_from": 6, "episodes": 2,
                "samples": 1, "arms": ["mempo", "grpo", "control"], "task": "t", "warmup": "w", "prompt": "train",
                "learner": {"steps": 2, "questions_per_step": 1, "group_size": 2, "lr": 1e-4, "objectives": 6,
                            "hops": 1, "task_seed": 0, "max_turns": 8, "max_new_tokens": 8, "kl_coef": 0.1,
                            "temperature": 1.0}}
    records = [{"agent": arm, "train_seed": None if arm == "warm-up" else 0, "kind": kind, "objectives": 6,
                "episode": e, "f1": 0.5, "total_tokens": 100}
               for arm in ("warm-up", "mempo", "grpo", "control") for kind in ("greedy", "sampled") for e in range(2)]
    runs = {f"{arm}-s0": {"metrics": [{"step": t, "reward": 1.0} for t in (1, 2)], "curve": []}
            for arm in ("mempo", "grpo", "control")} | {"grpo-full-s0": {"metrics": [], "curve": []}}
    tables = learning_tables(records, runs, settings)
    assert [r["arm"] for r in tables["learning"]] == ["mempo", "grpo", "control", "warm-up"]
    greedy = [r for r in records if r["kind"] == "greedy"]
    text_ = markdown({**tables, **question_tables(greedy, [6], long_from=6)}, settings)
    assert "grpo-full" not in text_ and "warm-up (full)" not in text_ and "full context" not in text_.split("\n")[0]
    assert "| objectives | mempo (memory) | grpo (memory) |" in text_  # table (b) without its full-context columns
    # one seed: an interval over seeds is undefined and says so, not "± nan"
    assert "nan" not in text_ and "| mempo | 1.00 ± – | +0.00 ± – |" in text_
    assert "training reward − control +0.00 ± – (no interval from one value)" in text_


def test_parallel_jobs_share_the_threads():
    # Two processes of two threads each on 2 cores played 2.6x slower than of one each.
    share = torch.get_num_threads() + 1  # not what a fresh process would take by itself
    with num_threads(2 * share):
        assert learners.in_parallel(2, [(torch.get_num_threads,)] * 3) == [share] * 3


def test_the_training_horizon_reaches_every_arm_through_the_learner_settings(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(learners, "compare", lambda out, **kwargs: calls.append(kwargs) or {})
    learners.main(["--out", str(tmp_path), "--train-objectives", "10", "--steps", "3"])
    learners.main(["--out", str(tmp_path)])
    assert [c["learner"] for c in calls] == [{"steps": 3, "objectives": 10}, {}]
    assert [c["max_new_tokens"] for c in calls] == [learners.EVAL_MAX_NEW_TOKENS] * 2


def test_any_learner_option_reaches_every_arm_as_the_learner_parses_it(tmp_path, monkeypatch):
    """``--learner "OPTIONS"``: the options of ``python -m algorithms.mempo``, parsed by its own command line
    (a pretrained model's run sets its rollouts, turns and learning rate); a per-arm one is refused, a
    misspelt one stops the command."""
    calls = []
    monkeypatch.setattr(learners, "compare", lambda out, **kwargs: calls.append(kwargs) or {})
    learners.main(["--out", str(tmp_path), "--learner", "--lr 1e-5 --group-size 4 --max-turns 6 --objectives 3",
                   "--train-objectives", "1", "--max-new-tokens", "100"])
    assert calls[0]["learner"] == {"lr": 1e-5, "group_size": 4, "max_turns": 6, "objectives": 1}
    assert calls[0]["max_new_tokens"] == 100
    with pytest.raises(SystemExit):
        learners.main(["--out", str(tmp_path), "--learner", "--lr-rate 1e-5"])
    monkeypatch.undo()
    with pytest.raises(SystemExit):  # the comparison sets the seed of each arm itself
        learners.main(["--out", str(tmp_path / "x"), "--learner", "--seed 3"])
    assert not (tmp_path / "x").exists()


def test_the_comparison_says_where_it_wrote(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(learners, "compare", lambda out, **kwargs: {"out": out})
    learners.main(["--out", str(tmp_path / "cmp")])
    assert capsys.readouterr().out.rstrip().endswith(f"written to {tmp_path / 'cmp'}")


def test_tables_answer_the_three_questions_from_episodes():
    def episode(arm, k, e, f1, tokens):
        return {"agent": arm, "train_seed": None if arm == "warm-up" else 0, "objectives": k, "episode": e,
                "f1": f1, "total_tokens": tokens}

    records = [episode(arm, k, e, f1 + 0.1 * e, tokens * k)
               for arm, f1, tokens in [("warm-up", 0.0, 100), ("mempo", 0.5, 100), ("grpo", 0.3, 110),
                                       ("grpo-full", 0.2, 400)]
               for k in (1, 6, 8) for e in range(2)]
    tables = question_tables(records, [8, 1, 6], long_from=6)
    a = {r["objectives"]: r for r in tables["a"]}
    assert list(a) == ["6", "8", "6-8"]
    # paired: the same shift on every episode; one training seed leaves the spread between runs unmeasured
    assert a["6-8"]["mempo - grpo"] == pytest.approx((0.2, math.nan), nan_ok=True)
    assert a["6"]["grpo - warm-up"] == pytest.approx((0.3, math.nan), nan_ok=True)
    assert a["8"]["mempo - warm-up"][0] == pytest.approx(0.5)
    assert a["6"]["mempo"][0] == pytest.approx(0.55) and a["6-8"]["grpo-full"][0] == pytest.approx(0.25)
    b = {r["objectives"]: r for r in tables["b"]}
    assert list(b) == ["1", "6", "8", "all"]
    assert b["all"]["mempo fewer"][0] == pytest.approx(0.75) and b["8"]["grpo fewer"][0] == pytest.approx(1 - 110 / 400)
    assert b["1"]["mempo fewer"][1] == 0  # no spread in either cell
    c = tables["c"]
    assert [r["objectives"] for r in c] == ["1", "6", "8", "change 1→8"]
    assert c[-1]["mempo"] == pytest.approx((0.0, mean_ci([0.5, 0.6])[1] * 2 ** 0.5))


def test_seeds_are_averaged_per_question_not_pooled_as_independent_episodes():
    # Two training seeds disagree on every question (F1 0 and 1): the arm scores 0.5 on each of the two
    # questions, so its interval is over 2 questions, not over 4 "independent" episodes.
    records = [{"agent": "mempo", "context": "memory", "train_seed": seed, "objectives": 6, "episode": e,
                "f1": float(seed), "total_tokens": 100} for seed in (0, 1) for e in range(2)]
    records += [{"agent": "warm-up", "context": "memory", "train_seed": None, "objectives": 6, "episode": e,
                 "f1": 0.25, "total_tokens": 100} for e in range(2)]
    a = question_tables(records, [6], long_from=6)["a"][0]
    assert a["mempo"] == pytest.approx((0.5, 0.0))
    by_seed = a["mempo - warm-up by seed"]  # each training run against the same start
    assert by_seed == pytest.approx({0: -0.25, 1: 0.75})
    # the difference's interval is over the two runs, not over the questions (where it has no spread)
    assert a["mempo - warm-up"] == pytest.approx(mean_ci([-0.25, 0.75]))
    # the plots' rows likewise: two questions at 0.5 each, no spread (pooled: 0, 0, 1, 1)
    mempo = next(r for r in summarize(seed_averaged(records)) if r["agent"] == "mempo")
    assert mempo["episodes"] == 2 and tuple(mempo["f1"][:3]) == pytest.approx((0.5, 0.5, 0.5))


def test_policy_cells_stay_in_their_range_and_differences_keep_their_sign():
    from benchmarks.experiments.learner_comparison.tables import text

    assert text((0.005, 0.01), 100, 1, bounded=True) == "0.5 [0.0, 1.5]"  # F1 near 0: no negative bound
    assert text((0.99, 0.03), 100, 1, bounded=True) == "99.0 [96.0, 100.0]"
    assert text((812.0, 40.0), 1, 0, bounded=True) == "812 [772, 852]"
    assert text((-0.02, 0.05), 100, 1, bounded=False) == "-2.0 ± 5.0"  # MemPO − GRPO may be negative


def test_the_report_writes_changes_as_signed_differences():
    from benchmarks.experiments.learner_comparison.tables import markdown

    records = [{"agent": arm, "train_seed": None if arm == "warm-up" else 0, "objectives": k, "episode": e,
                "f1": 1.0 if k == 1 else 0.25 * e, "total_tokens": 100} for arm in ("warm-up", "mempo", "grpo")
               for k in (1, 6) for e in range(2)]
    settings = {"seeds": [0], "episodes": 2, "samples": 2, "sampled_objectives": [6], "long_from": 6, "task": "t",
                "warmup": "w", "prompt": "train",
                "learner": {"steps": 1, "questions_per_step": 1, "group_size": 2, "lr": 1e-4, "objectives": 6,
                            "hops": 1, "task_seed": 0, "max_turns": 8, "max_new_tokens": 8, "kl_coef": 0.1,
                            "temperature": 1.0}}
    text_ = markdown(question_tables(records, [1, 6], long_from=6), settings)
    change_row = next(line for line in text_.splitlines() if line.startswith("| change 1→6"))
    assert "-87.5 ± " in change_row and "[" not in change_row  # a fall, not an interval cut at 0
    # one training seed: the difference has no interval over seeds, and the report says so
    assert "mempo − grpo is +0.0 ± – F1 points: no interval from one value; by training seed +0.0 (seed 0)" in text_


def test_learning_is_measured_by_training_seed_against_the_control_and_the_start():
    """Training reward: each run's second half, minus its seed's control; held-out F1: each seed's policy
    minus the start's (or its seed's control's) on the same questions; the interval is over the seeds."""
    from benchmarks.experiments.learner_comparison.tables import learning_markdown, learning_tables

    settings = {"seeds": [0, 1], "objectives": [2, 6], "sampled_objectives": [6], "long_from": 6, "episodes": 2,
                "learner": {"steps": 4}}
    rewards = {"mempo": (3.0, 4.0), "grpo": (2.5, 2.5), "control": (2.0, 2.0), "grpo-full": (1.0, 1.0)}
    runs = {f"{arm}-s{s}": {"metrics": [{"step": t, "reward": 9.0 if t <= 2 else r[s]} for t in range(1, 5)],
                            "curve": []} for arm, r in rewards.items() for s in (0, 1)}

    def record(arm, seed, kind, k, e, f1):
        return {"agent": arm, "train_seed": seed, "kind": kind, "objectives": k, "episode": e, "f1": f1}

    records = [record(arm, s, kind, 6, e, f1 + 0.1 * e + 0.05 * (s or 0))
               for kind in ("greedy", "sampled")
               for arm, seeds, f1 in [("warm-up", [None], 0.5), ("warm-up (full)", [None], 0.1), ("mempo", [0, 1], 0.7),
                                      ("grpo", [0, 1], 0.6), ("control", [0, 1], 0.5), ("grpo-full", [0, 1], 0.1)]
               for s in seeds for e in range(2)]
    tables = learning_tables(records, runs, settings)
    rows = {r["arm"]: r for r in tables["learning"]}
    assert rows["mempo"]["reward"][0] == pytest.approx(3.5)  # steps 3-4 only
    assert rows["mempo"]["reward - control by seed"] == pytest.approx({0: 1.0, 1: 2.0})
    assert rows["mempo"]["reward - control"][0] == pytest.approx(1.5) and rows["control"]["reward - control"] is None
    assert rows["mempo"]["sampled - start"] == pytest.approx(mean_ci([0.2, 0.25]))  # seed 1 +0.05 on each question
    assert rows["grpo-full"]["sampled - start"] == pytest.approx(mean_ci([0.0, 0.05]))  # the warm-up in full view
    assert rows["grpo"]["greedy - control"] == pytest.approx((0.1, 0.0))
    by = {r["measure"].split(" (")[0].split(" %")[0]: r for r in tables["mempo_grpo"]}
    assert by["training reward"]["by seed"] == pytest.approx({0: 0.5, 1: 1.5})
    assert by["training reward"]["seeds to resolve"] == 5  # mean 1.0, sd 0.71: t(4) 2.776 x 0.71 / 2.24 < 1
    text_ = "\n".join(learning_markdown(tables, settings))
    assert "| training reward (2nd half of the steps) | +1.00 ± 6.35 | +0.50 (seed 0), +1.50 (seed 1) | 5 |" in text_
    assert "- mempo: training reward − control +1.50 ± " in text_ and "held-out sampled F1 at 6 objectives" in text_


def test_memory_recall_is_compared_per_question_leaving_out_episodes_that_found_nothing():
    """Recall against the start and the control, and MemPO − GRPO, paired per question like F1; a question
    where no seed found evidence (recall None) has no recall to compare, and a seed without it is left out
    of its question's mean."""
    from benchmarks.experiments.learner_comparison.settings import RECALL
    from benchmarks.experiments.learner_comparison.tables import learning_markdown, learning_tables

    settings = {"seeds": [0, 1], "objectives": [6], "sampled_objectives": [6], "long_from": 6, "episodes": 3,
                "learner": {"steps": 2}}
    recall = {"warm-up": 0.5, "warm-up (full)": 0.6, "mempo": 0.8, "grpo": 0.6, "control": 0.4, "grpo-full": 0.7}
    records = [{"agent": arm, "train_seed": s, "kind": kind, "objectives": 6, "episode": e, "f1": 0.5,
                RECALL: None if e == 2 or (e == 1 and s == 1) else recall[arm] + 0.1 * e}
               for kind in ("greedy", "sampled") for arm in recall
               for s in ([None] if arm.startswith("warm-up") else [0, 1]) for e in range(3)]
    # the training rollouts' recall: step 2 is the second half; seed 1 of grpo-full logged none
    runs = {f"{arm}-s{s}": {"metrics": [{"step": t, "reward": 1.0, "memory_recall": recall[arm] + t / 20 + s / 100}
                                        for t in (1, 2)], "curve": []}
            for arm in ("mempo", "grpo", "control", "grpo-full") for s in (0, 1)}
    for line in runs["grpo-full-s1"]["metrics"]:
        del line["memory_recall"]
    tables = learning_tables(records, runs, settings)
    rows = {r["arm"]: r for r in tables["learning"]}
    assert rows["mempo"]["sampled recall"] == pytest.approx(mean_ci([0.8, 0.9]))  # question 2: no evidence found
    assert rows["mempo"]["sampled recall - start"] == pytest.approx((0.3, 0.0))
    assert rows["grpo"]["greedy recall - control"] == pytest.approx((0.2, 0.0))
    assert rows["grpo-full"]["greedy recall - start"] == pytest.approx((0.1, 0.0))  # its start: the full view
    assert rows["control"]["sampled recall - control"] is None and rows["warm-up"]["sampled recall"] is not None
    by = {r["measure"]: r for r in tables["mempo_grpo"]}
    assert by["held-out sampled memory recall % at 6 objectives"]["mempo - grpo"] == pytest.approx((0.2, 0.0))
    assert by["held-out greedy memory recall % at 6-6 objectives"]["by seed"] == pytest.approx({0: 0.2, 1: 0.2})
    assert rows["mempo"]["training recall"][0] == pytest.approx(0.905)
    assert rows["grpo"]["training recall - control"] == pytest.approx((0.2, 0.0))
    assert rows["grpo-full"]["training recall"] == pytest.approx((0.8, float("nan")), nan_ok=True)  # one seed
    assert by["training memory recall % (2nd half of the steps)"]["by seed"] == pytest.approx({0: 0.2, 1: 0.2})
    text_ = "\n".join(learning_markdown(tables, settings))
    assert "| mempo | 90.5 ± 6.4 | +40.0 ± 0.0 | 85.0 [" in text_ and "| +30.0 ± 0.0 | +40.0 ± 0.0 |" in text_


def test_a_memory_reward_variant_is_an_arm_and_the_search_mode_reaches_training_and_evaluation(tmp_path, monkeypatch):
    """Issue 51: ``mempo-progress`` is MemPO with ``--memory-reward progress``, measured against the control like
    MemPO; ``--search oracle`` is a learner setting of every arm and of every evaluation folder."""
    scheduled = []
    monkeypatch.setattr(learners, "run_tasks", lambda jobs, tasks, done=None: scheduled.extend(tasks))
    monkeypatch.setattr(learners, "report", lambda out: {"markdown": ""})
    compare(tmp_path, seeds=[0], arms=["control", "mempo-progress", "grpo", "mempo"], learner={"search": "oracle"},
            verbose=False)
    configs = {t.name: t.call()[1] for t in scheduled if "/" not in t.name}
    assert list(configs) == ["mempo-s0", "grpo-s0", "control-s0", "mempo-progress-s0"]
    assert [(c.algo, c.memory_reward, c.search) for c in configs.values()] == [
        ("mempo", "mempo", "oracle"), ("grpo", "mempo", "oracle"), ("grpo", "mempo", "oracle"),
        ("mempo", "progress", "oracle")]
    evaluation, _ = next(t for t in scheduled if t.name == "eval/memory/warm-up").call()
    assert evaluation.keywords["search_mode"] == "oracle"
    with pytest.raises(BenchmarkError, match="set per arm"):
        compare(tmp_path / "y", learner={"memory_reward": "progress"})

    calls = []
    monkeypatch.setattr(learners, "compare", lambda out, **kwargs: calls.append(kwargs) or {})
    learners.main(["--out", str(tmp_path), "--arms", "mempo-progress,control", "--search", "oracle"])
    learners.main(["--out", str(tmp_path)])
    assert calls[0]["arms"] == ["mempo-progress", "control"] and calls[0]["learner"] == {"search": "oracle"}
    assert calls[1]["arms"] == ["mempo", "grpo", "control", "grpo-full"] and calls[1]["learner"] == {}


def test_issue_34s_archive_still_resumes_and_reports_without_the_new_arms(tmp_path):
    """Its runs pass ``check_run`` (their configs predate ``memory_reward`` and ``search``, whose defaults the arms
    set) and its report has its three arms, no variant section, and "–" for the memory it did not measure."""
    from algorithms.mempo import Config
    from benchmarks.experiments.learner_comparison.settings import arm_configs, check_run
    from benchmarks.experiments.learner_comparison.tables import (
        learning_markdown,
        learning_tables,
        load_records,
        load_runs,
    )
    from benchmarks.folder_archive import restore

    kept = Path(__file__).resolve().parents[1] / "benchmarks/results/learners-10obj"
    restore(kept, tmp_path)
    settings = json.loads((kept / "comparison.json").read_text())["settings"]
    base = Config(**{k: v for k, v in settings["learner"].items() if k != "log"})
    for cfg in arm_configs(tmp_path, settings["seeds"], Path(settings["warmup"]), base, settings["arms"]).values():
        check_run(cfg)
    tables = learning_tables(load_records(tmp_path, settings), load_runs(tmp_path, settings), settings)
    assert [r["arm"] for r in tables["learning"]] == ["mempo", "grpo", "control", "warm-up"]
    assert tables["variants"] == [] and tables["mempo_grpo"][1]["mempo - grpo"][0] < 0  # issue 34: −4.0 ± 3.8
    assert all(v is None for row in tables["memory"] for k, v in row.items() if k != "arm")
    text_ = "\n".join(learning_markdown(tables, settings))
    assert "### Memory length and duplication" in text_ and "| mempo | – | – | – | – | – | – |" in text_
    assert "variant" not in text_


def test_memory_length_and_duplication_are_measured_from_hand_made_episodes():
    """Issue 51, item 5: per episode the mean ``<mem>`` length in characters, the share of memories that copy a
    question or the tool response the turn read, and the share of lines repeated within a memory."""
    from benchmarks.experiments.learner_comparison.memory import memory_measures, with_memory

    question = "What is the city where Zenti Industries has its headquarters?"
    reply = ("<tool_response>\nDoc 1(Title: Zenti Industries) The founder of Zenti Industries is Pola Dartas. The city "
             "where Zenti Industries has its headquarters is Milme.\n</tool_response>")

    def turn(mem: str) -> dict[str, str]:
        return {"role": "assistant", "content": f"<mem>{mem}</mem>\n<think>t</think>\n<search> x</search>"}

    note = "Q1.1: The city where Zenti Industries has its headquarters is Milme."
    trajectory = [{"role": "system", "content": "rules"}, {"role": "user", "content": question},
                  turn(question),  # copies the question
                  {"role": "user", "content": reply},
                  turn(f"{note}\n{note.upper()}\n\nQ2.1: Pola Dartas"),  # keeps a sentence: no copy; a repeated line
                  {"role": "user", "content": reply},
                  turn(reply.removeprefix("<tool_response>").removesuffix("</tool_response>")),  # copies the reply
                  {"role": "assistant", "content": "no memory block"}]
    got = memory_measures(trajectory, [question])
    assert got["memory_copied"] == pytest.approx(2 / 3)
    assert got["memory_repeated"] == pytest.approx(1 / 5)  # of 5 non-empty lines, one repeats (case is normalised)
    inner = reply[len("<tool_response>\n"):-len("\n</tool_response>")]
    mems = [question, f"{note}\n{note.upper()}\n\nQ2.1: Pola Dartas", inner]
    assert got["memory_chars"] == pytest.approx(sum(map(len, mems)) / 3)
    assert memory_measures([{"role": "user", "content": question}], [question]) == dict.fromkeys(got)
    record = {"f1": 1.0, "questions": [question], "trajectory": trajectory}
    assert with_memory(record) == {**record, **got}
    archived = {"f1": 1.0, "memory_chars": 3.0}  # no transcript: what it has is kept
    assert with_memory(archived) is archived


def test_the_report_gives_each_variant_against_mempo_and_grpo_and_every_arms_memory():
    from benchmarks.experiments.learner_comparison.tables import learning_markdown, learning_tables

    settings = {"seeds": [0, 1], "objectives": [6], "sampled_objectives": [6], "long_from": 6, "episodes": 2,
                "arms": ["mempo", "grpo", "control", "mempo-progress"], "learner": {"steps": 2}}
    reward = {"mempo": 2.0, "grpo": 1.5, "control": 1.0, "mempo-progress": 3.0}
    runs = {f"{arm}-s{s}": {"metrics": [{"step": t, "reward": r + s} for t in (1, 2)], "curve": []}
            for arm, r in reward.items() for s in (0, 1)}
    chars = {"warm-up": 100.0, "mempo": 120.0, "grpo": 110.0, "control": 100.0, "mempo-progress": 200.0}
    records = [{"agent": arm, "train_seed": s, "kind": kind, "objectives": 6, "episode": e, "f1": 0.5 + 0.1 * e,
                "memory_chars": c + 10 * e, "memory_copied": 0.5 * (arm == "mempo-progress"), "memory_repeated": 0.0}
               for kind in ("greedy", "sampled") for arm, c in chars.items()
               for s in ([None] if arm == "warm-up" else [0, 1]) for e in range(2)]
    tables = learning_tables(records, runs, settings)
    rows = {r["arm"]: r for r in tables["learning"]}
    assert rows["mempo-progress"]["reward - control by seed"] == pytest.approx({0: 2.0, 1: 2.0})
    by = {(r["pair"], r["measure"]): r for r in tables["variants"]}
    assert {pair for pair, _ in by} == {"mempo-progress − mempo", "mempo-progress − grpo"}
    assert by["mempo-progress − grpo", "training reward (2nd half of the steps)"]["by seed"] == pytest.approx(
        {0: 1.5, 1: 1.5})
    memory = {r["arm"]: r for r in tables["memory"]}
    assert list(memory) == ["mempo", "grpo", "control", "mempo-progress", "warm-up"]
    assert memory["mempo-progress"]["sampled memory_chars"] == pytest.approx(mean_ci([200.0, 210.0]))
    assert memory["mempo-progress"]["greedy memory_copied"][0] == pytest.approx(0.5)
    text_ = "\n".join(learning_markdown(tables, settings))
    assert "### Each memory-reward variant − MemPO and − GRPO" in text_
    assert "| mempo-progress − mempo | training reward (2nd half of the steps) | +1.00 ± 0.00 |" in text_
    assert "| mempo-progress | 205 [" in text_ and "| 50.0 [" in text_


def test_a_learner_without_its_control_has_no_control_curve():
    """A comparison of ``--arms mempo-progress,mempo`` loads only those runs: the curves' control line is absent,
    not a KeyError after hours of training."""
    from benchmarks.experiments.learner_comparison.report import curve_series

    runs = {"mempo-s0": {"metrics": [{"step": 1, "reward_avg": 2.0}], "curve": []}}
    assert curve_series(runs, "control", [0], "metrics", "reward_avg") == ([], [])
    assert curve_series(runs, "mempo", [0], "metrics", "reward_avg")[0] == [1]
