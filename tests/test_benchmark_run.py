"""The evaluation runner: resumable episode log, lockstep batches, exact rerun, clear errors."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from shared_data import needs_shared

from agents import OracleAgent
from agents.episode_log import read_episodes
from agents.statistics import jsonable
from benchmarks.report import BenchmarkError
from benchmarks.report import main as report
from benchmarks.run import evaluate, main

ARGS = ["--agents", "oracle,weak", "--objectives", "1,2", "--context", "memory", "--episodes", "4", "--no-plots"]
ROOT = Path(__file__).resolve().parents[1]


def read(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def key(r):
    return r["agent"], r["context"], r["objectives"], r["episode"]


def test_killed_run_resumes_without_duplicates(tmp_path, capsys):
    out = tmp_path / "run"
    rows = main(ARGS + ["--out", str(out)])
    full = read(out / "episodes.jsonl")
    assert len(full) == 16 and len(rows) == 4
    assert "| oracle | memory | 2 | 4 | 100.0 [51.0, 100.0] |" in capsys.readouterr().out
    # Kill it: keep 5 episodes and half of the sixth line.
    lines = (out / "episodes.jsonl").read_text().splitlines(keepends=True)
    (out / "episodes.jsonl").write_text("".join(lines[:5]) + lines[5][:40])
    main(ARGS + ["--out", str(out)])
    assert sorted(read(out / "episodes.jsonl"), key=key) == sorted(full, key=key)


@pytest.mark.slow
def test_sigkill_mid_run_then_rerun_loses_nothing(tmp_path):
    args = ["--agents", "oracle,weak", "--objectives", "2,4", "--episodes", "40", "--batch", "8", "--no-plots"]
    log = tmp_path / "killed" / "episodes.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "benchmarks.run", *args, "--out", str(log.parent)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None and (not log.exists() or log.stat().st_size < 200_000):
        time.sleep(0.05)
    assert proc.poll() is None, "the run finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert 0 < len(read_episodes(log)) < 320
    main(args + ["--out", str(log.parent)])
    main(args + ["--out", str(tmp_path / "clean")])
    resumed, clean = read(log), read(tmp_path / "clean" / "episodes.jsonl")
    assert len(resumed) == 320
    assert sorted(resumed, key=key) == sorted(clean, key=key)


def test_lockstep_batches_play_the_same_episodes(tmp_path):
    one = evaluate(["oracle", "random"], out_dir=tmp_path / "a", objectives=[1, 3], episodes=6, batch_size=1,
                   plots=False, verbose=False)
    many = evaluate(["oracle", "random"], out_dir=tmp_path / "b", objectives=[1, 3], episodes=6, batch_size=4,
                    plots=False, verbose=False)
    assert one == many
    a, b = (sorted(read(tmp_path / d / "episodes.jsonl"), key=key) for d in "ab")
    assert a == b and len(a) == 2 * 2 * 2 * 6


def test_episode_record_holds_question_trajectory_and_metrics(tmp_path):
    evaluate({"gold": OracleAgent()}, out_dir=tmp_path, objectives=[2], contexts=["full"], episodes=1, plots=False,
             verbose=False, turns_per_objective=0, max_turns=12)
    (r,) = read(tmp_path / "episodes.jsonl")
    assert (r["agent"], r["context"], r["objectives"], r["episode"], r["seed"], r["max_turns"]) == ("gold", "full", 2,
                                                                                                  0, 0, 12)
    assert len(r["questions"]) == 2 and len(r["golden_answers"]) == 2 and r["em"] == 1.0
    assert r["trajectory"][0]["role"] == "system" and r["trajectory"][-1]["role"] == "assistant"
    assert {"f1", "total_chars", "peak_chars", "n_turns", "n_searches"} <= set(r)


def test_extending_a_run_adds_cells_and_keeps_old_episodes(tmp_path):
    main(ARGS + ["--out", str(tmp_path)])
    before = read(tmp_path / "episodes.jsonl")
    rows = main(ARGS[:-3] + ["--episodes", "6", "--context", "memory,full", "--no-plots", "--out", str(tmp_path)])
    after = read(tmp_path / "episodes.jsonl")
    assert after[: len(before)] == before and len(after) == 2 * 2 * 2 * 6 and len(rows) == 8


def test_replayed_retrieval_reproduces_the_run(tmp_path):
    log = tmp_path / "retrieval.jsonl"
    main(ARGS + ["--out", str(tmp_path / "a"), "--record-retrieval", str(log)])
    main(ARGS + ["--out", str(tmp_path / "b"), "--replay-retrieval", str(log)])
    assert read(tmp_path / "a" / "episodes.jsonl") == read(tmp_path / "b" / "episodes.jsonl")


def test_recording_into_a_folder_that_holds_episodes_is_refused_and_a_finished_run_says_so(tmp_path, capsys):
    """The issue: ``--record-retrieval log.jsonl`` after the main job played nothing and wrote an empty log."""
    main(ARGS + ["--out", str(tmp_path / "a")])
    capsys.readouterr()
    log = tmp_path / "log.jsonl"
    with pytest.raises(SystemExit):
        main(ARGS + ["--out", str(tmp_path / "a"), "--record-retrieval", str(log)])
    assert (f"{tmp_path / 'a'} already holds 16 of the 16 episodes asked for; a run plays only what its folder "
            "lacks, so their searches would be missing from the new log: record into a new out_dir (--out)"
            ) in capsys.readouterr().err
    main(ARGS + ["--out", str(tmp_path / "a")])
    assert "already holds all 16 episodes asked for: none played" in capsys.readouterr().out
    main(ARGS + ["--out", str(tmp_path / "b"), "--record-retrieval", str(log)])  # a new folder records
    assert log.stat().st_size
    main(ARGS[:-3] + ["--episodes", "6", "--no-plots", "--out", str(tmp_path / "b"), "--record-retrieval", str(log)])
    main(ARGS[:-3] + ["--episodes", "6", "--no-plots", "--out", str(tmp_path / "c"), "--replay-retrieval", str(log)])
    b, c = (sorted(read(tmp_path / d / "episodes.jsonl"), key=key) for d in "bc")
    assert len(b) == 24 and b == c  # a resumed recording replays whole


def test_the_python_api_takes_label_equals_spec_as_the_command_line_does(tmp_path):
    rows = evaluate(["oracle", "guess=weak"], dataset=None, objectives=[1], contexts=["memory"], episodes=2,
                    out_dir=tmp_path, plots=False, verbose=False)
    assert {r["agent"] for r in rows} == {"oracle", "guess"}
    assert json.loads((tmp_path / "config.json").read_text())["agents"] == {"oracle": "oracle", "guess": "weak"}


@pytest.mark.parametrize(("extra", "message"), [
    (["--dataset", "hotpotq"], "unknown dataset 'hotpotq'"),
    (["--dataset", "questions.jsonl"], "unknown dataset 'questions.jsonl': neither a file nor a known name"),
    (["--dataset", "generated", "--corpus", "nope.jsonl"], "corpus file nope.jsonl not found"),
    (["--objectives", "1,x"], "--objectives: expected comma-separated positive integers"),
    (["--objectives", "0,2"], "objectives must be distinct positive integers, got [0, 2]"),
    (["--objectives", "2,2"], "objectives must be distinct positive integers"),
    (["--objectives", "1000"], "1000 objectives per episode but generated(seed=0,hops=1,2,3)/test has only 231"),
    (["--context", "memory,short"], "unknown context strategy 'short'"),
    (["--context", "memory,memory"], "contexts must be distinct context strategies, got ['memory', 'memory']"),
    (["--agents", "oracle,wizard"], "unknown agent spec 'wizard'"),
    (["--agents", "a=oracle,a=weak"], "labels must be distinct"),
    (["--episodes", "0"], "episodes must be at least 1"),
    (["--prompt", "chatty"], "unknown prompt 'chatty'"),
    (["--split", "dev"], "split must be 'train' or 'test', not 'dev'"),
    (["--replay-retrieval", "/missing.jsonl"], "replay log /missing.jsonl not found"),
    (["--retriever", "bm25"], "retriever must be None, an http(s) URL, an index folder or a Retriever; 'bm25' is none"),
    (["--agents", "hf:/nonexistent"], "cannot load agent 'hf:/nonexistent': "),
])
def test_bad_arguments_fail_fast_with_a_clear_message(tmp_path, capsys, extra, message):
    with pytest.raises(SystemExit) as exit_info:
        main(ARGS + ["--out", str(tmp_path)] + extra)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "episodes.jsonl").exists()


def test_a_folder_refuses_episodes_run_with_other_settings(tmp_path, capsys):
    main(ARGS + ["--out", str(tmp_path)])
    with pytest.raises(SystemExit):
        main(ARGS + ["--out", str(tmp_path), "--max-turns", "8"])
    assert "holds a run with other settings (max_turns: 16 there, 8 now)" in capsys.readouterr().err


def test_a_folder_refuses_episodes_of_changed_data(tmp_path, capsys):
    corpus, questions = tmp_path / "corpus.jsonl", tmp_path / "questions.jsonl"
    corpus.write_text(json.dumps({"id": "d1", "title": "Mome", "text": "Mome lies in Yukelland."}) + "\n")
    write = lambda answer: questions.write_text(json.dumps(  # noqa: E731
        {"id": "q1", "question": "Where does Mome lie?", "golden_answers": [answer]}) + "\n")
    args = ["--agents", "oracle", "--objectives", "1", "--episodes", "1", "--no-plots", "--dataset", str(questions),
            "--corpus", str(corpus), "--out", str(tmp_path / "run")]
    write("Yukelland")
    main(args)
    write("Yukeland")  # same arguments, edited file
    with pytest.raises(SystemExit):
        main(args)
    assert "holds a run with other settings (data_hash: " in capsys.readouterr().err


def test_a_label_keeps_its_agent_spec(tmp_path, capsys):
    """A label names one agent: the same label with another spec is refused, not served old episodes."""
    args = ARGS[2:] + ["--out", str(tmp_path)]
    main(["--agents", "a=oracle"] + args)
    with pytest.raises(SystemExit) as exit_info:
        main(["--agents", "a=weak"] + args)
    assert exit_info.value.code == 2
    assert "holds a run with other settings (agent 'a': 'oracle' there, 'weak' now)" in capsys.readouterr().err
    rows = main(["--agents", "a=oracle,b=weak"] + args)  # a new label extends the folder
    assert {r["agent"] for r in rows} == {"a", "b"}
    assert json.loads((tmp_path / "config.json").read_text())["agents"] == {"a": "oracle", "b": "weak"}


def test_a_smaller_grid_reports_only_what_it_asked(tmp_path):
    main(ARGS + ["--out", str(tmp_path)])
    rows = main(["--agents", "oracle", "--objectives", "2", "--context", "memory", "--episodes", "2", "--no-plots",
                 "--out", str(tmp_path)])
    assert [(r["agent"], r["objectives"], r["episodes"]) for r in rows] == [("oracle", 2, 2)]
    assert json.loads((tmp_path / "results.json").read_text()) == json.loads(json.dumps(jsonable(rows)))
    table = (tmp_path / "table.md").read_text()
    assert "| oracle | memory | 2 | 2 |" in table and "weak" not in table
    assert len(read(tmp_path / "episodes.jsonl")) == 16  # the rest stays in the folder
    assert report([str(tmp_path), "--no-plots"]) == rows  # a rebuilt report describes the same grid


def test_the_split_played_is_recorded(tmp_path, capsys):
    main(ARGS + ["--out", str(tmp_path / "a")])
    main(ARGS + ["--out", str(tmp_path / "b"), "--split", "train"])
    settings = [json.loads((tmp_path / d / "config.json").read_text())["settings"] for d in "ab"]
    assert [(s["split"], s["dataset_name"]) for s in settings] == [("test", "generated-test"),
                                                                   ("train", "generated-train")]
    corpus, questions = tmp_path / "corpus.jsonl", tmp_path / "questions.jsonl"
    corpus.write_text(json.dumps({"id": "d1", "title": "Mome", "text": "Mome lies in Yukelland."}) + "\n")
    questions.write_text(json.dumps({"id": "q1", "question": "Where does Mome lie?", "golden_answers": ["x"]}) + "\n")
    file_args = ["--agents", "oracle", "--objectives", "1", "--episodes", "1", "--no-plots", "--dataset",
                 str(questions), "--corpus", str(corpus), "--out", str(tmp_path / "c")]
    main(file_args)
    assert json.loads((tmp_path / "c" / "config.json").read_text())["settings"]["split"] is None
    with pytest.raises(SystemExit) as exit_info:
        main(file_args + ["--split", "dev"])
    assert exit_info.value.code == 2 and f"{questions} has no split 'dev'" in capsys.readouterr().err


def test_held_out_plays_only_the_questions_the_learner_holds_out(tmp_path, capsys):
    """--held-out SHARE: the episodes ask only the questions algorithms.mempo evaluates on at that
    --eval-fraction (and algorithms.sft --real never trains on); the share is recorded, a bad one refused."""
    from mempo_env.tasks import held_out, make_generated_task

    main(["--agents", "oracle", "--objectives", "1", "--episodes", "12", "--no-plots", "--held-out", "0.2",
          "--out", str(tmp_path / "a")])
    test = held_out(make_generated_task("test"), 0.2)[1]
    asked = {q for r in read(tmp_path / "a" / "episodes.jsonl") for q in r["question_ids"]}
    assert asked <= {q.id for q in test.questions} and len(asked) > 1
    assert json.loads((tmp_path / "a" / "config.json").read_text())["settings"]["held_out"] == 0.2
    with pytest.raises(SystemExit) as exit_info:
        main(ARGS + ["--out", str(tmp_path / "b"), "--held-out", "1.0"])
    assert exit_info.value.code == 2 and "held_out: eval_fraction 1.0" in capsys.readouterr().err


def test_oracle_search_is_played_and_recorded(tmp_path):
    """--search oracle: every search returns one document, the next hop's gold one (the retriever: its top 3);
    the mode is recorded (and left out at its default, so earlier folders keep resuming)."""
    for mode in ("oracle", "retriever"):
        main(ARGS + ["--out", str(tmp_path / mode), "--search", mode, "--agents", "weak"])
    settings = {m: json.loads((tmp_path / m / "config.json").read_text())["settings"] for m in ("oracle", "retriever")}
    assert settings["oracle"]["search"] == "oracle" and "search" not in settings["retriever"]

    def documents_per_reply(mode: str) -> set[int]:
        return {m["content"].count("Doc ") for r in read(tmp_path / mode / "episodes.jsonl") for m in r["trajectory"]
                if m["role"] == "user" and m["content"].startswith("<tool_response>")}

    assert documents_per_reply("oracle") == {1} and documents_per_reply("retriever") == {3}


@needs_shared
def test_a_split_a_real_dataset_lacks_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(ARGS + ["--dataset", "hotpotqa", "--split", "bogus", "--out", str(tmp_path)])
    assert exit_info.value.code == 2
    assert "dataset 'hotpotqa' has no split 'bogus'; its splits: dev, train100" in capsys.readouterr().err
    assert not (tmp_path / "episodes.jsonl").exists()


def test_token_costs_with_a_tokenizer(tmp_path, policy_dir):
    rows = evaluate(["oracle"], out_dir=tmp_path, objectives=[1], contexts=["memory"], episodes=2,
                    tokenizer=str(policy_dir), plots=False, verbose=False)
    assert rows[0]["total_tokens"][0] > rows[0]["peak_tokens"][0] > 0
    assert "TT tokens" in (tmp_path / "table.md").read_text()


def test_context_limit_ends_long_full_context_episodes(tmp_path, policy_dir):
    """The oracle's 4-objective history outgrows 1,500 tokens; its memory view does not."""
    rows = evaluate(["oracle"], out_dir=tmp_path, objectives=[4], episodes=3, tokenizer=str(policy_dir),
                    max_context_tokens=1500, plots=False, verbose=False)
    by_view = {r["context"]: r for r in rows}
    assert by_view["full"]["context_overflow"][0] == 1.0 and by_view["full"]["f1"][0] == 0.0
    assert by_view["memory"]["context_overflow"][0] == 0.0 and by_view["memory"]["f1"][0] == 1.0
    assert "overflow %" in (tmp_path / "table.md").read_text()
    with pytest.raises(BenchmarkError, match="give a tokenizer"):
        evaluate(["oracle"], out_dir=tmp_path / "b", max_context_tokens=1500, verbose=False)
    with pytest.raises(BenchmarkError, match="at least 1"):  # 0 was let through to the environment
        evaluate(["oracle"], out_dir=tmp_path / "c", tokenizer=str(policy_dir), max_context_tokens=0, verbose=False)


@needs_shared
def test_real_data_end_to_end(tmp_path):
    rows = evaluate(["oracle", "weak"], out_dir=tmp_path, dataset="musique", objectives=[1, 2], episodes=5,
                    plots=False, verbose=False)
    assert {(r["agent"], r["context"], r["objectives"]) for r in rows} == {
        (a, c, k) for a in ("oracle", "weak") for c in ("memory", "full") for k in (1, 2)}
    assert all(r["em"][0] == 1.0 for r in rows if r["agent"] == "oracle")
    settings = json.loads((tmp_path / "config.json").read_text())["settings"]
    assert (settings["dataset_name"], settings["split"]) == ("musique", "dev")


def test_a_checkpoint_trained_here_played_with_another_prompt_is_warned_about(tmp_path, capsys):
    """Every warm-up and learner checkpoint was trained with the train prompt; evaluated with eval (the
    benchmark's default, for zero-shot models) it sees a system prompt it never saw: the run says so."""
    from benchmarks.run import warn_prompt

    trained, foreign = tmp_path / "warm", tmp_path / "hub-model"
    for folder, mark in ((trained, "sft_config.json"), (foreign, "config.json")):
        folder.mkdir()
        (folder / mark).write_text("{}")
    warn_prompt({"warm": f"hf:{trained}#max_new_tokens=8", "other": f"vllm:{foreign}", "o": "oracle"}, "eval")
    err = capsys.readouterr().err
    assert "warning: warm trained with the 'train' prompt; --prompt eval" in err and "other" not in err
    for prompt in ("train", "train-v1"):
        warn_prompt({"warm": f"hf:{trained}"}, prompt)
        assert not capsys.readouterr().err
    main(["--agents", "hf:algorithms/warmup", "--objectives", "1", "--context", "memory", "--episodes", "1",
          "--prompt", "eval", "--no-plots", "--out", str(tmp_path / "run")])
    assert "warning: hf:algorithms/warmup trained with the 'train' prompt" in capsys.readouterr().err


def test_engine_moves_only_hf_checkpoints_to_vllm():
    from benchmarks.run import on_engine

    assert on_engine("hf:runs/ckpt#max_new_tokens=100", "vllm") == "vllm:runs/ckpt#max_new_tokens=100"
    assert on_engine("hf:runs/ckpt", "hf") == "hf:runs/ckpt"
    assert on_engine("oracle", "vllm") == "oracle" and on_engine("openai:http://x/v1#m", "vllm") == "openai:http://x/v1#m"
    with pytest.raises(BenchmarkError, match="engine must be one of"):
        on_engine("oracle", "sglang")
