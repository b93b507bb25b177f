"""benchmarks.experiments.memory_signal: the memory reward joined with memory recall, and the statistics over the join.

The statistics are checked on constructed rows whose answers are exact (a correlation of +1 or -1, or
undefined); the join on real rollouts of the shipped warm-up at a tiny size (seconds).
"""

import json
import re

import pytest

from benchmarks.experiments.memory_signal import (
    Columns,
    Options,
    bootstrap,
    cell,
    collect,
    combine,
    config,
    duplicates,
    measure,
    near_ties,
    scored_rows,
)


def row(group: str, found: int, recall: float | None, r_mem: float, mem: str = "") -> dict:
    return {"group": group, "found": found, "recall": recall, "r_mem": r_mem, "em": 0.0, "mem": mem}


# Two question groups; in each, R_mem rises steeply with the evidence found (progress) and by a little
# with recall, which varies within every progress level but not with progress.
PROGRESS = [row(g, f, rec, 0.4 * f + 0.01 * rec) for g in ("a", "b") for f in (1, 2, 3) for rec in (0.0, 1.0)]


def test_a_reward_that_rises_with_progress_tracks_recall_only_at_the_same_progress():
    columns = Columns(PROGRESS, ["r_mem", "recall", "found"])
    assert columns.correlation("r_mem", "found") > 0.99
    assert abs(columns.correlation("r_mem", "recall")) < 0.05  # progress swamps it over all turns
    assert columns.correlation("r_mem", "recall", "same progress") == pytest.approx(1.0)
    flipped = Columns([{**r, "r_mem": 0.4 * r["found"] - 0.01 * r["recall"]} for r in PROGRESS], ["r_mem", "recall"])
    assert flipped.correlation("r_mem", "recall", "same progress") == pytest.approx(-1.0)


def test_a_constant_recall_leaves_the_correlation_undefined_not_zero():
    rows = [row(g, f, 1.0, 0.1 * f) for g in ("a", "b", "c") for f in (1, 2, 3)]
    stats = bootstrap(Columns(rows, ["r_mem", "recall"]), [("r_mem", "recall", "pooled")], n=50)
    assert stats["r_mem~recall@pooled"] == {"value": None, "low": None, "high": None, "undefined": 1.0}
    assert cell(stats["r_mem~recall@pooled"]) == "undefined"


def test_the_bootstrap_resamples_whole_question_groups():
    """One group: every resample is that group whole, so the interval is the value itself (a resample of
    single turns would spread it)."""
    rows = [row("a", 1, rec, r) for rec, r in [(0.0, 0.1), (0.5, 0.0), (1.0, 0.3), (1.0, 0.2), (0.5, 0.3)]]
    cell_ = bootstrap(Columns(rows, ["r_mem", "recall"]), [("r_mem", "recall", "pooled")], n=40)["r_mem~recall@pooled"]
    assert 0.3 < cell_["value"] < 0.9
    assert cell_["low"] == pytest.approx(cell_["value"]) and cell_["high"] == pytest.approx(cell_["value"])


def test_ties_and_duplicate_memories_are_counted_within_a_question_pool():
    rows = [row("a", 1, 1.0, 0.2, "x"), row("a", 1, 1.0, 0.2, "x"), row("a", 2, 1.0, 0.9, "y"),
            row("b", 1, 1.0, 0.2, "x"), row("b", 2, 1.0, 0.5, "z")]
    assert duplicates(rows) == pytest.approx(2 / 5)  # "x" twice in pool a; once in pool b
    assert near_ties(rows) == pytest.approx(2 / 5)


@pytest.fixture(scope="module")
def tiny():
    """Two question groups x 2 rollouts at 2 objectives from the shipped warm-up, played and scored."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from agents.backends import make_backend
    from algorithms.sft import default_warmup

    options = Options(objectives=(2,), steps=1, questions_per_step=2, group_size=2)
    cfg = config(options, 2)
    tokenizer = AutoTokenizer.from_pretrained(default_warmup())
    model = AutoModelForCausalLM.from_pretrained(default_warmup(), attn_implementation="sdpa").eval()
    backend = make_backend("hf", model, tokenizer)
    played = collect(cfg, options.steps, backend)
    return played, scored_rows(played, model, backend, cfg), tokenizer


def test_the_rows_are_the_rollouts_scored_turns_one_to_one(tiny):
    played, rows, tokenizer = tiny
    (step, rollouts), = played
    expected = [(i, t) for i, r in enumerate(rollouts) for t in range(1, len(r.turns))]  # every turn has a <mem>
    assert [(r["rollout"], r["turn"]) for r in rows] == expected and all(r["step"] == step for r in rows)
    for r in rows:
        rollout = rollouts[r["rollout"]]
        generated = tokenizer.decode(rollout.turns[r["turn"]].response_ids)
        assert r["mem"] == re.search(r"<mem>.*?</mem>", generated, re.DOTALL).group(0)  # the turn's own memory
        assert r["em"] == rollout.info["em"] and r["group"] == f"2/0/{rollout.group}"
        assert 0 <= r["kept"] <= r["found"] and r["recall"] == (r["kept"] / r["found"] if r["found"] else None)
        assert r["r_mem"] == pytest.approx(r["p_mem"] - r["p_full"]) and r["p_check"] < 1e-5


def test_measure_writes_the_record_the_table_and_the_plot(tmp_path):
    record = measure(Options(objectives=(1,), steps=1, questions_per_step=2, group_size=2, bootstrap=20), tmp_path)
    saved = json.loads((tmp_path / "memory_signal.json").read_text())
    assert saved["summaries"].keys() == record["summaries"].keys() == {"1 objectives, T=1"}
    assert (tmp_path / "memory_signal.png").stat().st_size > 0
    tables = (tmp_path / "table.md").read_text()
    assert tables.count("| 1 objectives, T=1 |") == 2 + 6  # the table, the diagnostics, a line per signal
    again = combine([tmp_path], tmp_path / "combined", 20)  # summarised anew from the saved rows alone
    assert again["summaries"] == saved["summaries"] and (tmp_path / "combined" / "memory_signal.png").exists()
