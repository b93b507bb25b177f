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
    assert "| oracle | memory | 1 | 3 | 100.0 [43.9, 100.0] |" in capsys.readouterr().out


def test_report_puts_runs_side_by_side(runs, tmp_path):
    rows = report([str(runs / "test"), str(runs / "train"), "--out", str(tmp_path)])
    assert len(rows) == 2 * 2 * 2
    assert {r["run"] for r in rows} == {"generated-test", "generated-train"}
    table = (tmp_path / "table.md").read_text().splitlines()
    assert table[0].startswith("| run | agent | context | objectives | episodes | EM % |")
    assert "| generated-train | oracle | memory | 2 | 3 | 100.0 [43.9, 100.0] |" in "\n".join(table)
    assert table[-1].startswith("Cells: mean [95% interval]")
    saved = json.loads((tmp_path / "results.json").read_text())
    assert len(saved) == 8 and saved[0]["em"]["interval"] == "wilson" and 0 <= saved[0]["em"]["low"] <= 1
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


def test_plots_explain_their_bands_and_keep_them_in_range():
    from agents.statistics import summarize
    from benchmarks.plots import figures

    def episodes(agent, context, k, f1):
        return [{"agent": agent, "context": context, "objectives": k, "em": v, "f1": v, "total_chars": 100.0 * (i + 1),
                 "peak_chars": 50.0} for i, v in enumerate(f1)]

    weak = [1.0] * 2 + [0.0] * 18  # 10%: a normal band would dip below 0
    rows = summarize([e for k in (1, 2) for e in episodes("oracle", "memory", k, [1.0] * 20)
                      + episodes("oracle", "full", k, [1.0] * 20) + episodes("weak", "memory", k, weak)])
    figs = figures({"generated-test": rows})
    f1, cost = figs["f1_vs_objectives"], figs["cost_vs_objectives"]
    assert "95%" in f1._suptitle.get_text() and "Wilson" in f1._suptitle.get_text()
    assert f1.axes[0].get_title() == "generated-test: 20 episodes per point"
    assert [ax.get_ylabel() for ax in cost.axes] == ["total chars per episode", "peak chars per episode"]
    bands = f1.axes[0].collections
    assert len(bands) == 3 and all(0 <= y <= 100 for b in bands for y in b.get_paths()[0].vertices[:, 1])
    memory, full = (line for line in f1.axes[0].lines if line.get_label().startswith("oracle"))
    assert list(memory.get_ydata()) == list(full.get_ydata())  # the same scores...
    assert memory.get_linestyle() != full.get_linestyle() and memory.get_marker() != full.get_marker()
    assert all(a != b for a, b in zip(memory.get_xdata(), full.get_xdata()))  # ...still both visible


def test_a_results_section_needs_its_heading_and_changes_nothing_without_it(tmp_path):
    from benchmarks.report import BenchmarkError, write_section

    md = tmp_path / "RESULTS.md"
    md.write_text("# Results\n\n## Another section\n")
    with pytest.raises(BenchmarkError, match="has no '## Comparison' heading to write under"):
        write_section(md, "## Comparison", "<!-- cmp:", ["<!-- cmp: begin -->", "table", "<!-- cmp: end -->"])
    assert md.read_text() == "# Results\n\n## Another section\n"


def test_a_section_goes_under_its_heading_line_not_under_a_command_that_names_it(tmp_path):
    """A record that documents its own command carries the heading's words in ``--record-heading '## H'``: the
    block goes under the heading's own line, and a file with the words only inside a command has no heading."""
    from benchmarks.report import BenchmarkError, write_section

    command = "```bash\npython -m cmp --record-heading '## The tables'\n```\n"
    md = tmp_path / "record.md"
    md.write_text(f"# Cmp\n\n{command}\n## The tables\n\nWritten here.\n")
    write_section(md, "## The tables", "<!-- cmp:", ["<!-- cmp: begin -->", "table", "<!-- cmp: end -->"])
    assert md.read_text() == (f"# Cmp\n\n{command}\n## The tables\n\n<!-- cmp: begin -->\ntable\n<!-- cmp: end -->"
                              "\n\nWritten here.\n")
    md.write_text(f"# Cmp\n\n{command}")
    with pytest.raises(BenchmarkError, match="has no '## The tables' heading"):
        write_section(md, "## The tables", "<!-- cmp:", ["<!-- cmp: begin -->", "<!-- cmp: end -->"])
    assert md.read_text() == f"# Cmp\n\n{command}"


def comparison(tmp_path, headline=("A ", "C ")):
    from benchmarks.report import Comparison

    image = tmp_path / "plot.png"
    image.write_bytes(b"png")
    report = "The settings.\n\n### A table\n\n| a |\n\n### B table\n\n| b |\n\n### C table\n\n| c |\n\n- c's verdict.\n"
    return Comparison("<!-- cmp: generated", "<!-- cmp: generated from runs/x -->", "<!-- cmp: end -->",
                      "<!-- tested by tests/test_x.py::test_y -->", "python -m cmp", "Machine: here.", report,
                      headline, [(image, "cmp.png", "a plot")])


def test_a_comparison_shows_its_headline_in_the_results_and_all_of_it_in_its_record(tmp_path):
    from benchmarks.report import write_comparison

    md, record = tmp_path / "benchmarks/RESULTS.md", tmp_path / "docs/experiments/cmp.md"
    for path, text in ((md, "# Results\n\n## 4. Cmp\n\nThe reading.\n\n## 5. Next\n"),
                       (record, "# Cmp\n\nWhat was tried.\n\n## The tables\n")):
        path.parent.mkdir(parents=True)
        path.write_text(text)
    write_comparison(comparison(tmp_path), md, "## 4. Cmp", record, "## The tables")
    results, kept = md.read_text(), record.read_text()
    assert results.index("## 4. Cmp") < results.index("python -m cmp") < results.index("### A table")
    assert results.index("### A table") < results.index("### C table") < results.index("- c's verdict.")
    assert results.index("- c's verdict.") < results.index("The reading.") < results.index("## 5. Next")
    assert "### B table" not in results and "The settings." not in results
    assert "![a plot](results/cmp.png)" in results and (md.parent / "results/cmp.png").read_bytes() == b"png"
    assert "[the experiment's record](../docs/experiments/cmp.md)" in results
    assert kept.index("What was tried.") < kept.index("The settings.") < kept.index("### B table")
    assert "![a plot](../../benchmarks/results/cmp.png)" in kept and not (record.parent / "results").exists()
    write_comparison(comparison(tmp_path), md, "## 4. Cmp", record, "## The tables")
    assert md.read_text() == results and record.read_text() == kept


def test_a_record_holds_one_comparison_per_heading_and_a_record_only_write_leaves_the_results_alone(tmp_path):
    """Two comparisons of one generator (the same markers) under two headings of one record: each rerun
    replaces its own block; without a results heading the results file is not touched and the plots go
    where the comparison names them (a folder of its own under ``results/``)."""
    from dataclasses import replace

    from benchmarks.report import write_comparison

    md, record = tmp_path / "benchmarks/RESULTS.md", tmp_path / "docs/experiments/cmp.md"
    md.parent.mkdir(parents=True)
    md.write_text("# Results\n\n## 4. Cmp\n")
    record.parent.mkdir(parents=True)
    record.write_text("# Cmp\n\n## The tables\n\nFirst reading.\n\n## At 10\n\nSecond reading.\n")
    first = comparison(tmp_path)
    ten = replace(first, command="python -m cmp --at 10", plots=[(first.plots[0][0], "cmp-10/plot.png", "at 10")])
    for _ in range(2):
        assert write_comparison(first, md, None, record, "## The tables") == record
        assert write_comparison(ten, md, None, record, "## At 10") == record
    text = record.read_text()
    assert text.count("python -m cmp") == 2 and text.count(first.begin) == 2
    assert (text.index("## The tables") < text.index("python -m cmp\n") < text.index("First reading.")
            < text.index("## At 10") < text.index("python -m cmp --at 10") < text.index("Second reading."))
    assert "![at 10](../../benchmarks/results/cmp-10/plot.png)" in text
    assert (md.parent / "results/cmp-10/plot.png").read_bytes() == b"png"
    assert md.read_text() == "# Results\n\n## 4. Cmp\n"


def test_a_comparison_changes_neither_file_without_both_headings(tmp_path):
    from benchmarks.report import BenchmarkError, write_comparison

    md, record = tmp_path / "RESULTS.md", tmp_path / "cmp.md"
    md.write_text("# Results\n\n## 4. Cmp\n")
    record.write_text("# Cmp\n")
    with pytest.raises(BenchmarkError, match="cmp.md has no '## The tables' heading"):
        write_comparison(comparison(tmp_path), md, "## 4. Cmp", record, "## The tables")
    assert md.read_text() == "# Results\n\n## 4. Cmp\n" and not (tmp_path / "results").exists()


@pytest.mark.parametrize("headline, message", [(("D ",), "0 sections titled 'D '"),
                                               (("",), "3 sections titled ''")])
def test_a_headline_names_one_section_each(tmp_path, headline, message):
    from benchmarks.report import BenchmarkError, report_sections

    with pytest.raises(BenchmarkError, match=message):
        report_sections(comparison(tmp_path).report, headline)
