"""The systems table: rows from pytest-benchmark JSON, each against a baseline of the same run."""

import pytest

from benchmarks import systems

REPORT = {"benchmarks": [
    {"stats": {"median": 3e-7}, "extra_info": {"label": "no-op step"}},
    {"stats": {"median": 3e-5}, "extra_info": {"label": "env.step", "vs": "no-op step"}},
    {"stats": {"median": 0.2}, "extra_info": {"label": "rank-bm25 query", "items": 10}},
    {"stats": {"median": 0.01}, "extra_info": {"label": "bm25s query", "vs": "rank-bm25 query", "items": 100}},
    {"stats": {"median": 80.0}, "extra_info": {"parts": [
        {"label": "step", "seconds": 60.0},
        {"label": "memory reward", "seconds": 6.0, "vs": "step", "share": True}]}},
    {"stats": {"median": 1e-5}, "extra_info": {"label": "copy", "vs": "a step nobody measured"}},
]}


def test_measurements_divide_by_items_and_read_parts():
    found = systems.measurements(REPORT)
    assert found["bm25s query"]["seconds"] == pytest.approx(1e-4)
    assert found["rank-bm25 query"]["seconds"] == pytest.approx(0.02)
    assert found["memory reward"] == {"seconds": 6.0, "vs": "step", "share": True}


def test_ratio_table_rows():
    table = systems.ratio_table(systems.measurements(REPORT)).splitlines()
    assert table[0] == "| measured | time | baseline (same run) | baseline time | measured / baseline |"
    assert "| env.step | 30 µs | no-op step | 300 ns | 100× (slower) |" in table
    assert "| bm25s query | 100 µs | rank-bm25 query | 20 ms | 0.005× (200× faster) |" in table
    assert "| memory reward | 6 s | step | 60 s | 10% of it |" in table
    assert "| copy | 10 µs | a step nobody measured | not measured | |" in table
    assert len(table) == 2 + 4  # baselines get no row of their own


def test_unknown_suite_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        systems.main(["--only", "env,gpu"])
    assert exit_info.value.code == 2 and "unknown suite(s) ['gpu']" in capsys.readouterr().err


def test_a_missing_suite_file_is_reported_not_run(monkeypatch):
    monkeypatch.setitem(systems.SUITES, "engines", "bench_nothing_here.py")
    assert systems.unavailable("engines") == "benchmarks/bench_nothing_here.py does not exist yet"


@pytest.mark.slow
def test_env_suite_end_to_end(tmp_path, capsys):
    table = systems.main(["--only", "env", "--out", str(tmp_path), "--", "--benchmark-max-time=0.02", "-q"])
    assert "MemSearchQA-v0 env.step (memory view, document lookup) |" in table
    assert (tmp_path / "benchmark.json").is_file() and (tmp_path / "table.md").read_text().startswith(table)
