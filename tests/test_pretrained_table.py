"""The baseline table of a real model (benchmarks/experiments/pretrained_table.py), on scripted policies:
one resumable benchmarks.run folder a task, the full context only for the policies named, every column."""

import gzip
import json
from pathlib import Path

import pytest

from benchmarks.experiments import pretrained_table


def test_the_table_has_every_cell_and_a_second_run_plays_only_the_new_episodes(tmp_path):
    def build(episodes: int) -> list[dict]:
        return pretrained_table.build(["o=oracle", "w=weak"], out=tmp_path, tasks=["generated"], full=["o"],
                                      eval_prompt=["w"], objectives=[1, 2], episodes=episodes, batch=4)

    rows = build(3)
    assert [(r["policy"], r["prompt"], r["context"], r["objectives"]) for r in rows] == [
        ("o", "train", "memory", 1), ("o", "train", "memory", 2), ("o", "train", "full", 1),
        ("o", "train", "full", 2), ("w", "eval", "memory", 1), ("w", "eval", "memory", 2)]
    oracle = rows[0]
    assert oracle["episodes"] == 3 and oracle["f1"].mean == oracle["evidence_found"].mean == 1.0
    assert all(r["format_ok"].mean == 1.0 for r in rows)  # both scripted policies keep the protocol
    folders = [tmp_path / "generated" / prompt for prompt in ("train", "eval")]
    assert [json.loads((f / "config.json").read_text())["settings"]["prompt"] for f in folders] == ["train", "eval"]
    assert [len((f / "episodes.jsonl").read_text().splitlines()) for f in folders] == [4 * 3, 2 * 3]
    played = [json.loads(line)["objectives"] for line in (folders[0] / "episodes.jsonl").read_text().splitlines()]
    assert played == sorted(played)  # one horizon at a time: a table stopped early holds whole columns
    build(4)
    assert [len((f / "episodes.jsonl").read_text().splitlines()) for f in folders] == [4 * 4, 2 * 4]
    table = (tmp_path / "table.md").read_text()
    assert "| task | policy | prompt | context | objectives | episodes | F1 % | EM % | format ok % |" in table
    assert "| generated | o | train | memory | 1 | 4 | 100.0 [" in table
    assert json.loads((tmp_path / "table.json").read_text())[0]["f1"]["mean"] == 1.0


def test_an_archived_table_is_restored_on_a_fresh_machine_and_plays_nothing_it_holds(tmp_path, monkeypatch):
    kept = tmp_path / "archive"
    options = dict(tasks=["generated"], full=["o"], objectives=[1], episodes=3, batch=4, archive=kept)
    first = pretrained_table.build(["o=oracle", "w=weak"], out=tmp_path / "a", **options)
    lines = [json.loads(line) for line in gzip.decompress(
        (kept / "generated" / "train" / "episodes.jsonl.gz").read_bytes()).decode().splitlines()]
    assert len(lines) == 3 * 3 and not any("trajectory" in r for r in lines)  # o: memory and full; w: memory
    import benchmarks.run

    monkeypatch.setattr(benchmarks.run, "play", lambda *a, **k: pytest.fail("played an archived episode"))
    again = pretrained_table.build(["o=oracle", "w=weak"], out=tmp_path / "b", **options)
    assert json.dumps(again, default=str) == json.dumps(first, default=str)
    (tmp_path / "c" / "generated" / "train").mkdir(parents=True)  # a start killed before its first episode
    (tmp_path / "c" / "generated" / "train" / "run.lock").write_text("1\n")
    assert pretrained_table.build(["o=oracle", "w=weak"], out=tmp_path / "c", tasks=["generated"], play=False) == []


def test_a_kill_while_archiving_or_restoring_leaves_no_torn_file_or_half_folder(tmp_path, monkeypatch):
    from benchmarks.folder_archive import archive_folder, restore

    kept = tmp_path / "archive"
    pretrained_table.build(["o=oracle"], out=tmp_path / "a", tasks=["generated"], objectives=[1], episodes=2,
                           batch=2, archive=kept)
    before = {p.name: p.read_bytes() for p in (kept / "generated" / "train").iterdir()}
    real_write = Path.write_bytes

    def killed_midway(self, data):  # the kill lands halfway through the file
        real_write(self, data[: len(data) // 2])
        raise KeyboardInterrupt

    monkeypatch.setattr(Path, "write_bytes", killed_midway)
    with pytest.raises(KeyboardInterrupt):
        archive_folder(tmp_path / "a" / "generated" / "train", kept / "generated" / "train")
    with pytest.raises(KeyboardInterrupt):
        restore(kept, tmp_path / "b")
    monkeypatch.undo()
    assert {p.name: p.read_bytes() for p in (kept / "generated" / "train").iterdir() if p.suffix != ".tmp"} == before
    assert not (tmp_path / "b" / "generated" / "train").exists()  # the killed restore left only its own temp folder
    assert restore(kept, tmp_path / "b") == ["generated/train"]
    assert sorted(p.name for p in (tmp_path / "b" / "generated").iterdir()) == ["train"]
    assert pretrained_table.build(["o=oracle"], out=tmp_path / "b", tasks=["generated"], objectives=[1], episodes=2,
                                  play=False)[0]["episodes"] == 2


def test_an_old_log_without_evidence_found_leaves_the_cell_empty():
    assert pretrained_table.evidence_share({"evidence_items": 2}) is None
    assert pretrained_table.evidence_share({"evidence_items": 0, "evidence_found": 0}) is None
    assert pretrained_table.evidence_share({"evidence_items": 4, "evidence_found": 1}) == 0.25


@pytest.mark.parametrize("args, message", [(["--tasks", "nq"], "unknown task"), (["--full", "x"], "unknown task")])
def test_an_unknown_task_or_full_label_is_one_line(tmp_path, capsys, args, message):
    with pytest.raises(SystemExit) as e:
        pretrained_table.main(["--agents", "o=oracle", "--out", str(tmp_path), *args])
    assert e.value.code == 2 and message in capsys.readouterr().err and not (tmp_path / "generated").exists()
