"""The evaluation runner: resumable episode log, table, exact rerun from a retrieval log."""

import json

from benchmarks.run import main
from benchmarks.summary import mean_ci

ARGS = ["--agents", "oracle,weak", "--objectives", "1,2", "--context", "memory", "--episodes", "4"]


def read(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_killed_run_resumes_without_duplicates(tmp_path, capsys):
    out = tmp_path / "run"
    rows = main(ARGS + ["--out", str(out)])
    full = read(out / "episodes.jsonl")
    assert len(full) == 16 and len(rows) == 4
    assert "| oracle | memory | 2 | 4 | 100.0 ± 0.0 |" in capsys.readouterr().out
    # Kill it: keep 5 episodes and half of the sixth line.
    lines = (out / "episodes.jsonl").read_text().splitlines(keepends=True)
    (out / "episodes.jsonl").write_text("".join(lines[:5]) + lines[5][:40])
    main(ARGS + ["--out", str(out)])
    resumed = read(out / "episodes.jsonl")
    key = lambda r: (r["agent"], r["context"], r["objectives"], r["episode"])  # noqa: E731
    assert sorted(resumed, key=key) == sorted(full, key=key)


def test_replayed_retrieval_reproduces_the_run(tmp_path):
    log = tmp_path / "retrieval.jsonl"
    main(ARGS + ["--out", str(tmp_path / "a"), "--record-retrieval", str(log)])
    main(ARGS + ["--out", str(tmp_path / "b"), "--replay-retrieval", str(log)])
    assert read(tmp_path / "a" / "episodes.jsonl") == read(tmp_path / "b" / "episodes.jsonl")


def test_mean_ci():
    assert mean_ci([1.0]) == (1.0, 0.0)
    mean, ci = mean_ci([0.0, 1.0, 0.0, 1.0])
    assert mean == 0.5 and abs(ci - 1.96 * (1 / 3) ** 0.5 / 2) < 1e-12
