"""mempo_verl.data: the episode parquets verl trains on (needs no verl: it runs in the main suite)."""

import pyarrow.parquet as pq
import pytest
from shared_data import SHARED, needs_shared

from mempo_env.env import MemSearchQAEnv
from mempo_env.tasks import resolve_task
from mempo_env.types import QARecord
from mempo_verl.data import AGENT_NAME, episode_rows, main, source_splits


def pool(name, n):
    return [QARecord(f"{name}{i}", f"{name} question {i}?", [f"{name} answer {i}"]) for i in range(n)]


def test_each_objective_comes_from_its_source_in_turn():
    rows = episode_rows([pool("h", 5), pool("n", 3)], objectives=3, episodes=20, seed=1)
    assert len(rows) == 20 and all(r["agent_name"] == AGENT_NAME for r in rows)
    for r in rows:
        ids = [q["id"] for q in r["extra_info"]["questions"]]
        assert [i[0] for i in ids] == ["h", "n", "h"] and len(set(ids)) == 3
        assert r["reward_model"]["ground_truth"] == "; ".join(q["answers"][0] for q in r["extra_info"]["questions"])
        assert r["prompt"][1]["content"].startswith("Answer the following 3 questions")
    assert episode_rows([pool("h", 5)], 2, 4, seed=1) == episode_rows([pool("h", 5)], 2, 4, seed=1)
    with pytest.raises(ValueError, match="needs 2"):
        episode_rows([pool("h", 1), pool("n", 3)], objectives=3, episodes=1)


def test_parquet_rows_replay_in_the_environment(tmp_path):
    """Written and read back as verl reads them, a row's questions start the episode the parquet
    prompt shows, over the generated task's corpus; validation questions never appear in training."""
    main(["--out", str(tmp_path), "--train-episodes", "6", "--val-episodes", "3", "--objectives", "2"])
    train, val = (pq.read_table(tmp_path / f"{part}.parquet").to_pylist() for part in ("train", "val"))
    assert len(train) == 6 and len(val) == 3
    ids = {part: {q["id"] for r in rows for q in r["extra_info"]["questions"]}
           for part, rows in (("t", train), ("v", val))}
    assert ids["t"] and ids["v"] and not ids["t"] & ids["v"]
    row = train[0]
    env = MemSearchQAEnv(resolve_task("generated"), objectives=2)
    obs, _ = env.reset(options={"questions": row["extra_info"]["questions"]})
    assert [m["content"] for m in obs] == [m["content"] for m in row["prompt"]]


def test_bad_arguments_exit_with_a_message(tmp_path, capsys):
    for args in (["--objectives", "0"], ["--sources", "no-such-set"]):
        with pytest.raises(SystemExit) as exit_:
            main(["--out", str(tmp_path), *args])
        assert exit_.value.code == 2 and "error:" in capsys.readouterr().err


@needs_shared
def test_the_paper_mix_holds_out_questions_of_both_sources(tmp_path):
    nq = str(SHARED / "nq_open_dev.jsonl")
    (h_train, h_val), (n_train, n_val) = source_splits("hotpotqa:train100", 0.2), source_splits(nq, 0.2)
    assert len(h_val) == 20 and not {q.id for q in h_train} & {q.id for q in h_val}
    assert not {q.id for q in n_train} & {q.id for q in n_val}
    rows = episode_rows([h_train, n_train], objectives=2, episodes=4)
    assert all([q["id"] in {x.id for x in pool_} for q, pool_ in zip(r["extra_info"]["questions"], (h_train, n_train))]
               for r in rows)
