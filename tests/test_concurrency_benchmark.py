"""benchmarks.experiments.retrieval_scale.concurrency on a tiny index: every episode is counted as played or lost,
through both paths."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.bench_bm25 import iter_corpus
from benchmarks.experiments.retrieval_scale import concurrency
from mempo_env.retrieval.index import build_index


@pytest.fixture(scope="module")
def index(tmp_path_factory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("concurrency")
    docs = list(iter_corpus(2000))
    queries = folder / "queries.json"
    queries.write_text(json.dumps([" ".join(d.text.split()[:4]) for d in docs[:50]]))
    return build_index(enumerate(docs, 1), folder / "index"), queries


def test_every_episode_of_every_session_is_played(index, tmp_path: Path) -> None:
    pytest.importorskip("openenv")  # the server path's extra
    folder, queries = index
    concurrency.main(["--index", str(folder), "--queries", str(queries), "--sessions", "2,3", "--episodes", "1",
                      "--out", str(tmp_path)])
    rows = json.loads((tmp_path / "concurrency.json").read_text())["rows"]
    assert [(r["path"], r["sessions"]) for r in rows] == [("async", 2), ("async", 3), ("openenv", 2), ("openenv", 3)]
    for r in rows:
        assert (r["played"], r["lost"]) == (2 * r["sessions"], 0) and r["pss_mb_per_session"] > 0


def test_an_episode_that_does_not_end_with_its_score_is_lost(index, monkeypatch) -> None:
    folder, queries = index
    script = concurrency.actions

    def never_answers(qs: list[str], episode: int) -> list[str]:
        return script(qs, episode)[:2] * 2  # four searches: the episode's last step does not end it

    monkeypatch.setattr(concurrency, "actions", never_answers)
    row = concurrency.run_async(2, 1, {"retriever": str(folder), "max_turns": 6}, json.loads(queries.read_text()))
    assert (row["played"], row["lost"]) == (0, 4)


def test_a_level_that_would_not_fit_in_memory_is_skipped_with_its_reason(index, tmp_path: Path, monkeypatch) -> None:
    folder, queries = index
    monkeypatch.setattr(concurrency, "available_mb", lambda: 1.0)  # after the first level: nothing fits
    concurrency.main(["--index", str(folder), "--queries", str(queries), "--sessions", "2,3", "--episodes", "1",
                      "--paths", "async", "--out", str(tmp_path)])
    first, second = json.loads((tmp_path / "concurrency.json").read_text())["rows"]
    assert first["played"] == 4 and "skipped" not in first
    assert second["sessions"] == 3 and "GB available" in second["skipped"] and "played" not in second


def test_the_server_path_is_left_out_without_its_extra_and_refused_by_name(index, tmp_path: Path, monkeypatch,
                                                                          capsys) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "fastapi" else real(name, *a))
    played = []
    monkeypatch.setattr(concurrency, "run_async", lambda n, *a: played.append(n) or {
        "sessions": n, "episodes_per_s": 1.0, "lost": 0, "played": n, "pss_mb_per_session": 1.0})
    folder, queries = index
    common = ["--index", str(folder), "--queries", str(queries), "--sessions", "2", "--out", str(tmp_path)]
    concurrency.main(common)
    assert played == [2] and "the openenv path is left out: it needs the openenv extra" in capsys.readouterr().out
    assert [r["path"] for r in json.loads((tmp_path / "concurrency.json").read_text())["rows"]] == ["async"]
    for paths, message in (("async,openenv", "the openenv path needs the openenv extra"),
                           ("async,sever", "unknown paths ['sever']")):
        with pytest.raises(SystemExit) as refused:
            concurrency.main([*common, "--paths", paths])
        assert refused.value.code == 2 and message in capsys.readouterr().err
    assert played == [2]  # refused before any work
