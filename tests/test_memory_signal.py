"""benchmarks.experiments.memory_signal: the memory rewards joined with memory recall, and the statistics over the join.

The statistics are checked on constructed rows whose answers are exact (a correlation of +1 or -1, or
undefined; a content share of 1, 0 or a closed form); the join, every ``--memory-reward`` variant's advantage
included, on real rollouts of the shipped warm-up at a tiny size (seconds), by structure only.
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
    on_mem_table,
    scored_rows,
    summarize,
    variant_table,
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


def test_the_content_share_is_the_r2_recall_adds_beyond_question_and_progress():
    # PROGRESS: within each (group, found) cell the value moves with recall only: r = 1 there, and the content
    # share is the within-cell share of the variance, var(0.01 recall) / (var(0.4 found) + var(0.01 recall))
    content, progress = Columns(PROGRESS, ["r_mem", "recall"]).shares("r_mem")
    expected = 0.01**2 * 0.25 / (0.4**2 * 2 / 3 + 0.01**2 * 0.25)
    assert content == pytest.approx(expected) and progress == pytest.approx(1 - expected)
    # the memory's content alone (recall balanced in every cell: the cells explain nothing)
    content, progress = Columns([{**r, "r_mem": r["recall"]} for r in PROGRESS], ["r_mem", "recall"]).shares("r_mem")
    assert content == pytest.approx(1.0) and progress == pytest.approx(0.0, abs=1e-12)
    # moving within cells, but not with recall: content 0, all of it noise to the memory's content
    noise = [row(g, f, rec, 0.4 * f + 0.01 * k) for g in ("a", "b") for f in (1, 2) for rec, k in
             [(0.0, 0), (0.0, 1), (1.0, 0), (1.0, 1)]]
    content, progress = Columns(noise, ["r_mem", "recall"]).shares("r_mem")
    assert content == pytest.approx(0.0, abs=1e-12) and 0 < progress < 1
    # a constant value has no variance to share out; a recall constant within every cell explains none of it
    assert Columns([{**r, "r_mem": 0.5} for r in PROGRESS], ["r_mem", "recall"]).shares("r_mem") == (None, None)
    flat = [row(g, f, float(f == 2), 0.1 * f) for g in ("a", "b") for f in (1, 2) for _ in range(2)]
    assert Columns(flat, ["r_mem", "recall"]).shares("r_mem")[0] is None


# What else summarize reads of a row (scored_rows' keys), constant here.
SCORES = {"p_mem": 0.5, "p_full": 0.0, "r_mem_no_prefix": 0.5, "r_mem_content": 0.5, "answering": False,
          "p_check": 0.0, "separator_share_mem": None, "separator_share_full": None}


def variant_rows() -> list[dict]:
    """Four groups of turns with every variant's advantage: ``mempo`` rising with progress, ``progress`` with
    recall, ``write`` with both, ``infomem`` paid on the successful episodes only (``None`` on the others)."""
    rows = []
    for g, shift in zip("abcd", (0.0, 0.1, -0.1, 0.2)):
        for n, (f, rec) in enumerate((f, rec) for f in (1, 2, 3) for rec in (0.0, 0.5, 1.0)):
            em = float(n % 2)
            rows.append({**row(g, f, rec, 0.0), **SCORES, "rollout": n, "em": em, "a_mem_mempo": f + shift * rec,
                         "a_mem_progress": rec + 0.1 * shift * f, "a_mem_write": f + 4 * rec + shift * n,
                         "a_mem_infomem": f - rec + shift if em else None})
    return rows


def test_every_variant_is_measured_with_ordered_intervals_and_shares_in_0_1():
    stats = summarize(variant_rows(), n=200)
    assert list(stats["variants"]) == ["mempo", "progress", "infomem", "write"]  # algorithms.mempo.MEMORY_REWARDS
    assert stats["variants"]["infomem"] == pytest.approx({"paid": 4 / 9, "nonzero": 4 / 9})  # the odd turns
    assert stats["variants"]["mempo"] == {"paid": 1.0, "nonzero": 1.0}
    c = stats["correlations"]
    for v in stats["variants"]:
        for stat in ("recall@same progress", "found@pooled", "content share", "progress share"):
            ci = c[f"a_mem_{v}~{stat}"]
            assert ci["value"] is not None and ci["low"] <= ci["high"], (v, stat)
        for stat in ("content share", "progress share"):
            ci = c[f"a_mem_{v}~{stat}"]
            assert 0 <= ci["low"] <= ci["high"] <= 1 and 0 <= ci["value"] <= 1
    assert c["a_mem_mempo~found@pooled"]["value"] > 0.9 and c["a_mem_progress~found@pooled"]["value"] < 0.2
    assert c["a_mem_progress~content share"]["value"] > 0.9 > 0.1 > c["a_mem_mempo~content share"]["value"]
    gain = c["a_mem_progress~content share - a_mem_mempo"]  # paired, on the same resamples
    assert gain["value"] == pytest.approx(
        c["a_mem_progress~content share"]["value"] - c["a_mem_mempo~content share"]["value"])
    assert 0 < gain["low"] <= gain["high"] and "a_mem_mempo~content share - a_mem_mempo" not in c
    # infomem over the turns it pays: every one of them in a successful episode, so r with EM is undefined
    assert c["a_mem_infomem~em@pooled"] == {"value": None, "low": None, "high": None, "undefined": 1.0}
    paid = Columns([r for r in variant_rows() if r["em"]], ["a_mem_infomem", "found"])
    assert c["a_mem_infomem~found@pooled"]["value"] == pytest.approx(paid.correlation("a_mem_infomem", "found"))
    lines = variant_table({"run": stats}).splitlines()
    assert [line.split(" | ")[1] for line in lines[2:]] == list(stats["variants"])
    assert "| run | infomem | 44.4 (44.4) |" in lines[4] and "| undefined |" in lines[4]


def test_what_each_arm_puts_on_the_mem_tokens_is_measured_against_grpos_outcome_advantage():
    """A_out tracks recall within every cell; mempo's A_mem tracks progress, progress's A_mem recall: on the
    ``<mem>`` tokens mempo's total dilutes the content signal A_out already carries, progress's keeps it;
    infomem adds 0 where it pays nothing."""
    rows = [{**r, "a_out": r["recall"] + 0.01 * r["rollout"], "a_mem_mempo": 3.0 * r["found"]} for r in variant_rows()]
    stats = summarize(rows, n=200)
    c = stats["correlations"]
    grpo = c["a_out~content share"]["value"]
    assert grpo > 0.9 and c["a_out~recall@same progress"]["value"] > 0.9
    assert c["a_on_mem_mempo~content share"]["value"] < 0.1
    assert c["a_on_mem_progress~content share"]["value"] > 0.9
    lost = c["a_on_mem_mempo~content share - a_out"]  # paired, on the same resamples
    assert lost["value"] == pytest.approx(c["a_on_mem_mempo~content share"]["value"] - grpo)
    assert lost["low"] <= lost["high"] < 0 and "a_out~content share - a_out" not in c
    # infomem pays the successful episodes only: on the others its <mem> tokens get A_out alone
    unpaid = Columns([r for r in rows if not r["em"]], ["a_out", "found"])
    paid_only = summarize([r for r in rows if not r["em"]], n=20)["correlations"]
    assert paid_only["a_on_mem_infomem~found@pooled"]["value"] == pytest.approx(unpaid.correlation("a_out", "found"))
    lines = on_mem_table({"run": stats}).splitlines()
    assert [line.split(" | ")[1] for line in lines[2:]] == ["grpo: A_out", *(f"{v}: A_out + A_mem" for v in
                                                                              stats["variants"])]
    assert on_mem_table({"run": summarize(variant_rows(), n=20)}) == ""  # a record without A_out: no table


def test_the_search_mode_reaches_the_rollouts_environments(monkeypatch):
    import mempo_env.env

    made = []
    monkeypatch.setattr(mempo_env.env, "MemSearchQAEnv", lambda *a, **kw: made.append(kw["search"]))
    cfg = config(Options(objectives=(2,), search="oracle"), 2)
    assert cfg.search == "oracle"
    assert collect(cfg, 0, type("Backend", (), {"tokenizer": None})()) == []
    assert made and set(made) == {"oracle"}


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
    # the outcome advantage: the learner's, each rollout's reward normalised within its question group
    import torch

    from algorithms.advantages import grpo_advantages

    a_out = grpo_advantages(torch.tensor([r.reward("score") for r in rollouts]),
                            torch.tensor([r.group for r in rollouts])).tolist()
    assert [r["a_out"] for r in rows] == pytest.approx([a_out[r["rollout"]] for r in rows])


def test_each_variant_is_the_learners_memory_advantage_on_the_turns_it_pays(tiny):
    import torch

    from algorithms.advantages import memory_advantages
    from algorithms.mempo import MEMORY_REWARDS

    (_, rollouts), = tiny[0]
    rows = tiny[1]
    assert all(f"a_mem_{v}" in r for v in MEMORY_REWARDS for r in rows)
    # mempo: the spec's advantage, R_mem normalised over the question's scored turns, on every scored turn
    spec = memory_advantages(torch.tensor([r["r_mem"] for r in rows]),
                             torch.tensor([rollouts[r["rollout"]].group for r in rows]))
    assert [r["a_mem_mempo"] for r in rows] == pytest.approx(spec.tolist(), abs=1e-4)
    for r in rows:  # infomem: one value per rollout, on successful episodes only
        rollout = rollouts[r["rollout"]]
        assert r["a_mem_infomem"] is None or (all(rollout.info["correct"]) and r["em"] == 1)
        same = {s["a_mem_infomem"] for s in rows if s["rollout"] == r["rollout"]}
        assert len(same) == 1


def test_measure_writes_the_record_the_table_and_the_plot(tmp_path):
    record = measure(Options(objectives=(1,), steps=1, questions_per_step=2, group_size=2, bootstrap=20), tmp_path)
    saved = json.loads((tmp_path / "memory_signal.json").read_text())
    assert saved["summaries"].keys() == record["summaries"].keys() == {"1 objectives, T=1"}
    assert (tmp_path / "memory_signal.png").stat().st_size > 0
    tables = (tmp_path / "table.md").read_text()
    # the table, the diagnostics, a line per variant, a line per arm on the <mem> tokens (GRPO's and each
    # variant's), a line per signal and variant's advantage
    assert tables.count("| 1 objectives, T=1 |") == 2 + 4 + 5 + 5 + 4
    again = combine([tmp_path], tmp_path / "combined", 20)  # summarised anew from the saved rows alone
    assert again["summaries"] == saved["summaries"] and (tmp_path / "combined" / "memory_signal.png").exists()
