"""benchmarks.experiments.retrieval_scale.scale end to end on tiny corpora, and the streamed corpus it writes.

The numbers themselves are not checked (they are the benchmark's findings, and depend on the
machine); what is checked is that every level is measured without a lost request and that the
record holds what RESULTS quotes from it.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from benchmarks.bench_bm25 import corpus, iter_corpus
from benchmarks.experiments.retrieval_scale import scale


def test_the_streamed_corpus_is_the_cached_one_whatever_the_chunk() -> None:
    assert list(iter_corpus(1200, chunk=250)) == list(iter_corpus(1200)) == corpus(1200)
    assert [d.id for d in iter_corpus(7, chunk=3)] == [str(i) for i in range(7)]


def test_a_run_measures_every_level_and_extrapolates(tmp_path: Path, capsys) -> None:
    scale.main(["--sizes", "1000,2000", "--out", str(tmp_path), "--queries", "40", "--seconds", "0.3"])
    record = json.loads((tmp_path / "scale.json").read_text())
    assert [row["passages"] for row in record["rows"]] == [1000, 2000]
    for row in record["rows"]:
        new = row["new"]
        assert set(new["server"]) == set(scale.LEVELS) == {"1", "16", "64", "256", "4x128"}
        assert all(level["n_errors"] == 0 and level["qps"] > 0 for level in new["server"].values())
        assert new["batched_n"] == 40 >= new["single_n"] > 0 and "ranked" not in new
        assert (tmp_path / f"corpus-{row['passages']}.jsonl").read_text().count("\n") == row["passages"]
    extrapolation = record["extrapolation"]
    assert extrapolation["from"] == [1000, 2000] and set(extrapolation["wiki18"]) == set(extrapolation["per_passage"])
    printed = capsys.readouterr().out
    assert printed.count("| new |") == 2 and "wiki-18 (21M passages), extrapolated linearly" in printed


def test_the_old_code_is_measured_from_its_own_worktree(tmp_path: Path) -> None:
    """``--old`` runs the commit's code, not the checkout's: run from the repository root, a
    subprocess would import the checkout first (its cwd heads sys.path), which once made the
    "old" rows a second measurement of the new code. The run checks which package it imported."""
    root = Path(scale.ROOT)
    if subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True).returncode:
        pytest.skip("not a git checkout")
    try:
        scale.main(["--sizes", "1000", "--out", str(tmp_path), "--queries", "20", "--seconds", "0.2", "--old", "HEAD"])
        row = json.loads((tmp_path / "scale.json").read_text())["rows"][0]
        assert row["same_rankings"] and row["old"]["batched_n"] == 20
        assert all(level["n_errors"] == 0 for level in row["old"]["server"].values())
    finally:
        subprocess.run(["git", "-C", str(root), "worktree", "remove", "--force", str(tmp_path / "old-HEAD")],
                       capture_output=True)
