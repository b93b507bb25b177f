"""Reports rebuilt from runs: one run in place, several side by side, plots on disk."""

import json

import pytest

from benchmarks.report import main as report
from benchmarks.run import evaluate

GRID = {"agents": ["oracle", "weak"], "objectives": [1, 2], "contexts": ["memory"], "episodes": 3, "verbose": False}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two runs on different splits of the generated task, and a third repeating the first's dataset."""
    root = tmp_path_factory.mktemp("runs")
    evaluate(**GRID, out_dir=root / "test", split="test", plots=False)
    evaluate(**GRID, out_dir=root / "train", split="train", plots=False)
    evaluate(**GRID, out_dir=root / "again", split="test", seed=5, plots=False)
    return root


def png(path):
    data = path.read_bytes()
    return data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000


def test_run_writes_plots(tmp_path):
    evaluate(**GRID, out_dir=tmp_path)
    assert png(tmp_path / "f1_vs_objectives.png") and png(tmp_path / "cost_vs_objectives.png")


def test_report_rebuilds_a_run_in_place(runs, capsys):
    table = (runs / "test" / "table.md").read_text()
    (runs / "test" / "table.md").unlink()
    report([str(runs / "test")])
    assert (runs / "test" / "table.md").read_text() == table
    assert png(runs / "test" / "f1_vs_objectives.png")
    assert "| oracle | memory | 1 | 3 | 100.0 ± 0.0 |" in capsys.readouterr().out


def test_report_puts_runs_side_by_side(runs, tmp_path):
    rows = report([str(runs / "test"), str(runs / "train"), "--out", str(tmp_path)])
    assert len(rows) == 2 * 2 * 2
    assert {r["run"] for r in rows} == {"generated-test", "generated-train"}
    table = (tmp_path / "table.md").read_text().splitlines()
    assert table[0].startswith("| run | agent | context | objectives | episodes | EM % |")
    assert "| generated-train | oracle | memory | 2 | 3 | 100.0 ± 0.0 |" in "\n".join(table)
    assert len(json.loads((tmp_path / "results.json").read_text())) == 8
    assert png(tmp_path / "f1_vs_objectives.png") and png(tmp_path / "cost_vs_objectives.png")


def test_runs_of_one_dataset_are_told_apart_by_folder(runs, tmp_path):
    rows = report([str(runs / "test"), str(runs / "again"), "--out", str(tmp_path), "--no-plots"])
    assert {r["run"] for r in rows} == {"generated-test (test)", "generated-test (again)"}
    assert not (tmp_path / "f1_vs_objectives.png").exists()


def test_report_of_a_folder_that_is_not_a_run(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        report([str(tmp_path)])
    assert exit_info.value.code == 2
    assert f"{tmp_path} is not a benchmark run: no episodes.jsonl in it" in capsys.readouterr().err
