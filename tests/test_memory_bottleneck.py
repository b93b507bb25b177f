"""benchmarks.experiments.memory_bottleneck on hand-made episodes: each F1 loss goes to the first thing that went
wrong."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.experiments import memory_bottleneck as mb


def episode(f1: float, answer: str, turns: list[tuple[int, int]], evidence: int = 2, agent: str = "p",
            golden: int = 2) -> dict:
    return {"f1": f1, "answer": answer, "evidence_items": evidence, "agent": agent, "objectives": golden,
            "context": "memory", "golden_answers": [["x"]] * golden,
            "memory_per_turn": [{"found": f, "kept": k, "context_kept": f} for f, k in turns]}


CASES = {
    "right": episode(1.0, "a; b", [(0, 0), (1, 1), (2, 2)]),
    "no answer": episode(0.0, "", [(0, 0), (1, 1)]),
    "not found": episode(0.5, "a; c", [(0, 0), (1, 1), (1, 1)]),
    "dropped": episode(0.5, "a; c", [(0, 0), (1, 1), (2, 1)]),
    "dropped earlier, kept at the end": episode(0.0, "a", [(1, 0), (2, 2)]),
}


def test_each_episode_gets_the_first_cause() -> None:
    assert [mb.cause(r) for r in CASES.values()] == [None, "no answer", "not found", "dropped", "answer"]
    assert mb.wrong_parts(CASES["dropped earlier, kept at the end"]) and not mb.wrong_parts(CASES["dropped"])


def test_the_points_add_up_to_the_cells_f1_gap(tmp_path: Path, capsys) -> None:
    records = [*CASES.values(), {**CASES["dropped"], "agent": "p~2"}]  # a sample of the same policy pools
    (tmp_path / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (row,) = mb.split(records)
    assert row["episodes"] == 6 and row["f1"] == pytest.approx(100 * 2.5 / 6)
    assert sum(row["points"].values()) == pytest.approx(100 - row["f1"])
    assert row["points"]["dropped"] == pytest.approx(100 * 1.0 / 6) and row["share"]["answer"] == pytest.approx(100 / 6)
    assert row["wrong_parts"] == 1
    assert (row["right_parts"], row["answered"]) == (4, 5)  # of the 5 answers, "a" has 1 part for 2 questions
    mb.main([str(tmp_path)])
    row_line = "| 2 | memory | p | 6 | 41.7 | 17, 16.7 | 17, 8.3 | 33, 16.7 | 17, 16.7 | 1 of 1 | 4 of 5 |"
    assert row_line in capsys.readouterr().out


def test_several_folders_pool_an_arms_training_seeds(tmp_path: Path, capsys) -> None:
    for seed, case in ((0, "right"), (1, "dropped")):
        folder = tmp_path / f"mempo-s{seed}"
        folder.mkdir()
        (folder / "episodes.jsonl").write_text(json.dumps({**CASES[case], "agent": f"mempo-s{seed}~1"}) + "\n")
    folders = [str(tmp_path / "mempo-s0"), str(tmp_path / "mempo-s1")]
    mb.main(folders)
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| 2 ")]
    assert [line.split(" | ")[2] for line in rows] == ["mempo-s0", "mempo-s1"]
    mb.main([*folders, "--pool-seeds"])
    assert "| 2 | memory | mempo | 2 | 75.0 | 0, 0.0 | 0, 0.0 | 50, 25.0 |" in capsys.readouterr().out


def test_a_folder_without_episodes_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="episodes.jsonl does not exist"):
        mb.main([str(tmp_path)])


def test_play_evaluates_the_warm_up_as_the_learners_do_then_splits(tmp_path: Path, capsys) -> None:
    pytest.importorskip("transformers")
    mb.main([str(tmp_path), "--play", "--objectives", "1", "--episodes", "2", "--samples", "1"])
    printed = capsys.readouterr().out
    assert "| 1 | memory | greedy | 2 |" in printed and "| 1 | memory | T1 | 2 |" in printed
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["agents"]["T1~1"].endswith("#temperature=1.0#seed=1000003")


def test_play_takes_the_oracle_evidence_search(tmp_path: Path, capsys) -> None:
    """Issue 51, item 3: the warm-up's F1 split with search returning the next hop's gold evidence."""
    pytest.importorskip("transformers")
    mb.main([str(tmp_path), "--play", "--objectives", "1", "--episodes", "2", "--samples", "1", "--search", "oracle"])
    assert "| 1 | memory | greedy | 2 |" in capsys.readouterr().out
    assert json.loads((tmp_path / "config.json").read_text())["settings"]["search"] == "oracle"
