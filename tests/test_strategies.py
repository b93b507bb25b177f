"""The context-strategy comparison end to end at absurdly small settings: builds, the reuse of identical
prompts, evaluation, resume, report, RESULTS.md; and its failure table from hand-made episodes."""

import json
from pathlib import Path

import pytest
from doc_blocks import code_blocks, python_module_args, shell_commands

from benchmarks.experiments import context_strategies as strategies
from benchmarks.experiments.context_strategies import (
    HEADING,
    RECORD_HEADING,
    TESTED_BY,
    compare,
    failures,
    outcome,
    write_results_section,
)
from benchmarks.report import BenchmarkError

TINY = dict(episodes=4, worlds=2, objectives=(2,), steps=1, batch_size=2, microbatch_size=1, warmup_steps=1,
            threads=1, precision="fp32")
COMPARED = ["memory", "window:1", "summary+keep1:600"]


def smoke(out: Path, warmup: Path, jobs: int = 1, **fine_tune) -> dict:
    return compare(out, strategies=COMPARED, episodes=2, objectives=[2], warmup=warmup,
                   fine_tune={**TINY, **fine_tune}, jobs=jobs, verbose=False)


def episodes(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.slow
def test_comparison_builds_evaluates_resumes_and_reports(policy_dir, tmp_path, monkeypatch):
    out = tmp_path / "strategies"
    monkeypatch.setattr(strategies, "MAX_NEW_TOKENS", 4)  # an untrained policy writes until the budget
    monkeypatch.setattr(strategies, "MAX_TURNS", 1)  # and plays until the turn budget: 4 per objective
    result = smoke(out, policy_dir, jobs=2)

    builds = json.loads((out / "builds.json").read_text())
    assert sorted(p.name for p in (out / "builds").iterdir()) == ["memory", "summary+keep1-600"]
    assert builds["window:1"]["same_as"] == "memory"  # the memory view's prompts, token for token
    assert builds["window:1"]["checkpoint"] == builds["memory"]["checkpoint"] == str(out / "builds/memory")
    assert builds["window:1"]["turns_sha"] == builds["memory"]["turns_sha"] != builds["summary+keep1:600"]["turns_sha"]
    saved = json.loads((out / "builds/summary+keep1-600/sft_config.json").read_text())
    assert (saved["base"], saved["context"], saved["steps"]) == (str(policy_dir), "summary+keep1:600", 1)
    assert builds["memory"]["build"]["trained_tokens"] > 0

    for name in COMPARED:
        played = episodes(out / f"eval-{strategies.slug(name)}/episodes.jsonl")
        assert {r["agent"] for r in played} == {"fine-tuned", "zero-shot", "oracle"} and len(played) == 3 * 2
        assert {r["context"] for r in played} == {name}
        assert all("total_tokens" in r and "context_overflow" in r for r in played)
        assert [r["f1"] for r in played if r["agent"] == "oracle"] == [1.0] * 2
    summarised = [r for r in episodes(out / "eval-summary+keep1-600/episodes.jsonl") if r["agent"] == "oracle"]
    assert any(e["outcome"] == "summarised" for r in summarised for e in r["context_events"])
    for name in ("comparison.json", "results.json", "report.md", "f1_vs_objectives.png", "cost_vs_objectives.png"):
        assert (out / name).is_file(), name
    report = (out / "report.md").read_text()
    for title in "abcdefgh":
        assert f"### ({title})" in report
    assert "| window:1 | memory's: the same prompts, token for token |" in report
    oracle_summary = next(r for r in result["failures"]
                          if (r["agent"], r["context"], r["objectives"]) == ("oracle", "summary+keep1:600", 2))
    assert oracle_summary["all right"] == 2 and oracle_summary["event outcomes"]["summarised"] >= 2

    # Started again: nothing built or played, the same report.
    monkeypatch.setattr(strategies, "warm_up", lambda *a: pytest.fail("built again"))
    monkeypatch.setattr(strategies, "oracle_turns", lambda *a: pytest.fail("rendered again"))
    assert smoke(out, policy_dir)["markdown"] == result["markdown"]
    assert len(episodes(out / "eval-memory/episodes.jsonl")) == 6
    with pytest.raises(BenchmarkError, match="other settings.*lr"):  # refused before any work
        smoke(out, policy_dir, lr=0.5)

    md, record = tmp_path / "RESULTS.md", tmp_path / "docs/experiments/strategies.md"
    md.write_text(f"# Results\n\n{HEADING}\n\nThe reading.\n\n## Next\n")
    record.parent.mkdir(parents=True)
    record.write_text(f"# The strategies\n\nWhat was tried.\n\n{RECORD_HEADING}\n")
    write_results_section(out, md, record)
    first, kept = md.read_text(), record.read_text()
    assert first.index(HEADING) < first.index("### (a)") < first.index("### (d)") < first.index("The reading.")
    assert first.index("The reading.") < first.index("## Next") and "### (h)" not in first
    assert (tmp_path / "results/strategies_f1.png").is_file() and "(docs/experiments/strategies.md)" in first
    assert kept.index("What was tried.") < kept.index("### (a)") < kept.index("### (h)")
    assert "](../../results/strategies_f1.png)" in kept
    write_results_section(out, md, record)
    assert md.read_text() == first and record.read_text() == kept


@pytest.mark.parametrize("kwargs, message", [
    (dict(strategies=["memory", "window:0"]), "window:K"),
    (dict(strategies=["memory", "memory"]), "distinct"),
    (dict(fine_tune={"context": "full"}), "set per strategy"),
    (dict(fine_tune={"stepz": 3}), "stepz"),
    (dict(fine_tune={"steps": 0}), "steps"),
    (dict(fine_tune={"microbatch_size": -1}), "microbatch_size"),
    (dict(objectives=[1, 1]), "distinct"),
    (dict(objectives=[500]), "questions"),
    (dict(episodes=0), "episodes"),
    (dict(jobs=0), "jobs"),
    (dict(warmup="no/such/folder"), "not a checkpoint"),
])
def test_bad_settings_fail_before_any_work(tmp_path, kwargs, message):
    with pytest.raises(BenchmarkError, match=message):
        compare(tmp_path / "x", **kwargs)
    assert not (tmp_path / "x").exists()


def test_a_bad_option_is_a_one_line_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit:
        strategies.main(["--strategies", "memory,window:x", "--out", str(tmp_path / "x")])
    assert exit.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith(
        "python -m benchmarks.experiments.context_strategies: error: ")
    assert not (tmp_path / "x").exists()


def test_the_comparison_says_where_it_wrote(tmp_path, monkeypatch, capsys):
    seen = {}
    monkeypatch.setattr(strategies, "compare", lambda out, **kwargs: seen.update(kwargs) or {"out": out})
    strategies.main(["--quick", "--steps", "3", "--out", str(tmp_path / "cmp")])
    assert capsys.readouterr().out.rstrip().endswith(f"written to {tmp_path / 'cmp'}")
    assert seen["fine_tune"] == {"episodes": 200, "steps": 3} and seen["objectives"] == (1, 2, 6, 10)


def record(answer, k=3, em=0.0, format_ok=True, overflow=False, events=()):
    return {"agent": "fine-tuned", "context": "summary", "objectives": k, "episode": 0, "answer": answer, "em": em,
            "format_ok": format_ok, "context_overflow": overflow, "context_events": [{"outcome": o} for o in events]}


def test_each_episode_ends_one_way():
    assert outcome(record("a;b;c", em=1.0)) == "all right"
    assert outcome(record("a;b;x", em=2 / 3)) == "right count, some wrong"
    assert outcome(record("a;b;c;d")) == "too many answers"
    assert outcome(record("a;b")) == "too few answers"
    assert outcome(record("a; b", k=1)) == "right count, some wrong"  # one question's answer is not split
    assert outcome(record("a;b;c", format_ok=False)) == "format failed"
    assert outcome(record(None)) == "no answer (turn budget)"
    assert outcome(record(None, overflow=True)) == "context overflow"


def test_failures_count_endings_and_summaries_per_cell():
    rows = failures([record("a;b;c", em=1.0, events=["summarised", "summarised"]),
                     record("a;b", events=["summarised", "too long"]), record(None)])
    assert rows == [{"agent": "fine-tuned", "context": "summary", "objectives": 3, "episodes": 3, "all right": 1,
                     "too few answers": 1, "no answer (turn budget)": 1, "events per episode": 4 / 3,
                     "event outcomes": {"summarised": 3, "too long": 1}}]


def test_the_documented_strategy_commands_parse(monkeypatch):
    """Every benchmarks.experiments.context_strategies command that the documents print, parsed by the program
    itself."""
    parsed = []
    monkeypatch.setattr(strategies, "compare", lambda out, **settings: parsed.append(settings) or {})
    monkeypatch.setattr(strategies, "write_results_section", lambda out, path, record: path)  # nothing written
    blocks = [b for b in code_blocks() if b.tested_by == TESTED_BY[len("<!-- tested by "):-len(" -->")]]
    assert {b.file for b in blocks} >= {"docs/environment.md", "benchmarks/RESULTS.md"}
    for block in blocks:
        for command in shell_commands(block):
            module, args = python_module_args(command)
            assert module == "benchmarks.experiments.context_strategies", f"{block.where}: {command!r}"
            strategies.main(args)
    assert parsed and all(settings["strategies"] for settings in parsed)
