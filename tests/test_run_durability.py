"""The run folder keeps the README's promise, "a killed run loses at most the episodes in flight",
through kills at any write of the start-up, concurrent runs and damaged files."""

import builtins
import io
import json
import os
import shutil
from pathlib import Path

import pytest

from agents import OracleAgent
from agents.episode_log import read_episodes
from benchmarks.report import main as report
from benchmarks.run import evaluate, main

ARGS = ["--agents", "oracle", "--objectives", "1,2", "--context", "memory", "--episodes", "3", "--no-plots"]


def keys(records):
    return sorted((r["agent"], r["context"], r["objectives"], r["episode"]) for r in records)


class Killed(BaseException):
    """A SIGKILL just after a file operation: a BaseException, so no ``except Exception`` catches it."""


def kill_at_write(monkeypatch, folder: Path, n: int) -> list[str]:
    """Raise ``Killed`` just after the ``n``-th operation that rewrites a file in ``folder``: an open
    for writing other than appending (the file is already emptied), ``os.truncate`` or ``os.replace``
    onto it. Returns the operations seen so far."""
    seen: list[str] = []

    def tick(what, path):
        if isinstance(path, (str, os.PathLike)) and Path(path).resolve().parent == folder.resolve():
            seen.append(f"{what} {Path(path).name}")
            if len(seen) == n:
                raise Killed(seen[-1])

    def wrap(real, what, path_arg):
        def op(*args, **kwargs):
            result = real(*args, **kwargs)
            if what != "open" or "w" in (args[1] if len(args) > 1 else kwargs.get("mode", "r")):
                try:
                    tick(what, args[path_arg])
                except Killed:
                    if what == "open":
                        result.close()
                    raise
            return result
        return op

    opener = wrap(io.open, "open", 0)
    monkeypatch.setattr(io, "open", opener)  # pathlib's Path.open calls io.open
    monkeypatch.setattr(builtins, "open", opener)
    monkeypatch.setattr(os, "truncate", wrap(os.truncate, "truncate", 0))
    monkeypatch.setattr(os, "replace", wrap(os.replace, "replace", 1))
    return seen


def test_a_kill_at_any_write_loses_no_finished_episode(tmp_path, monkeypatch):
    """The start-up (config, a torn last line), the report: killed after each of their writes in
    turn, the folder keeps every finished episode and the same command again completes it."""
    base = tmp_path / "base"
    main(ARGS + ["--out", str(base)])
    lines = (base / "episodes.jsonl").read_text().splitlines(keepends=True)
    finished = keys(map(json.loads, lines[:-1]))
    n, killed = 0, True
    while killed:
        n += 1
        run = tmp_path / f"kill{n}"
        shutil.copytree(base, run)
        (run / "episodes.jsonl").write_text("".join(lines[:-1]) + lines[-1][:60])  # the last one killed mid-write
        with monkeypatch.context() as m:
            seen = kill_at_write(m, run, n)
            try:
                main(ARGS + ["--out", str(run)])
                killed = False
            except Killed:
                pass
        assert set(finished) <= set(keys(read_episodes(run / "episodes.jsonl"))), f"killed after {seen}"
        main(ARGS + ["--out", str(run)])
        assert sorted((run / "episodes.jsonl").read_text().splitlines(keepends=True)) == sorted(lines), seen
    assert n > 3, f"the harness saw only {seen}"  # config, the torn line and the report were all hit


def test_a_second_run_into_a_busy_folder_fails_at_once(tmp_path, capsys):
    """A run started while another plays into the same folder is refused, naming the holder's pid,
    and doubles nothing."""
    out = tmp_path / "run"
    refused = []

    class Racing(OracleAgent):  # starts the same command again while the first run plays
        def act_batch(self, observations, infos):
            if not refused:
                with pytest.raises(SystemExit) as exit_info:
                    main(ARGS + ["--out", str(out)])
                refused.append(exit_info.value.code)
            return super().act_batch(observations, infos)

    rows = evaluate({"oracle": Racing()}, out_dir=out, objectives=[1, 2], contexts=["memory"], episodes=3,
                    plots=False, verbose=False)
    assert refused == [2]
    assert f"{out} is in use by another run (pid {os.getpid()})" in capsys.readouterr().err
    records = read_episodes(out / "episodes.jsonl")
    assert len(records) == 6 and len(set(keys(records))) == 6 and [r["episodes"] for r in rows] == [3, 3]


def test_duplicate_episodes_count_once(tmp_path):
    """A folder two older runs wrote at once holds every episode twice: each is reported once."""
    main(ARGS + ["--out", str(tmp_path)])
    log = tmp_path / "episodes.jsonl"
    log.write_text(log.read_text() * 2)
    assert [r["episodes"] for r in report([str(tmp_path), "--no-plots"])] == [3, 3]
    assert [r["episodes"] for r in main(ARGS + ["--out", str(tmp_path)])] == [3, 3]
    assert len(log.read_text().splitlines()) == 12  # nothing was run again, nothing erased


def test_a_torn_line_inside_the_log_hides_nothing_after_it(tmp_path):
    """Interleaved writes of two older runs can tear a line in the middle: the lines after it count."""
    main(ARGS + ["--out", str(tmp_path)])
    log = tmp_path / "episodes.jsonl"
    lines = log.read_text().splitlines(keepends=True)
    log.write_text("".join(lines[:2]) + lines[2][:50] + "\n" + "".join(lines[2:]))
    assert [r["episodes"] for r in report([str(tmp_path), "--no-plots"])] == [3, 3]
    assert len(read_episodes(log)) == 6


def test_a_damaged_config_is_a_clear_error(tmp_path, capsys):
    main(ARGS + ["--out", str(tmp_path)])
    config = tmp_path / "config.json"
    config.write_text(config.read_text()[:200])  # `truncate -s 200`
    capsys.readouterr()
    for command in (lambda: main(ARGS + ["--out", str(tmp_path)]), lambda: report([str(tmp_path)])):
        with pytest.raises(SystemExit) as exit_info:
            command()
        assert exit_info.value.code == 2
        err = capsys.readouterr().err
        assert f"{config} is not valid JSON" in err and "Traceback" not in err
