"""The cost benchmark of a real model (benchmarks/experiments/pretrained_cost.py), run on the shipped tiny
policy: each setting in its own process, measured and tabulated; a child that dies is a row that says so."""

import json

import pytest

pytest.importorskip("torch")

from algorithms.sft import SHIPPED
from benchmarks.experiments import pretrained_cost


def test_every_setting_is_measured_in_its_own_process(tmp_path):
    pretrained_cost.main(["--model", str(SHIPPED), "--batch", "2x32", "--generate", "2x16", "--new-tokens", "4",
                          "--repeats", "1", "--precisions", "fp32", "--lora", "2", "--out", str(tmp_path)])
    record = json.loads((tmp_path / "cost.json").read_text())
    kinds = [(r["kind"], r["lora"]) for r in record["results"]]
    assert kinds == [("train", 0), ("train", 2), ("generate", 0)] and record["cpu"]
    assert all(r["tokens"] > 0 and r["tokens_per_s"] > 0 and r["peak_rss_gb"] > 0 for r in record["results"])
    assert [r["tokens"] for r in record["results"][:2]] == [64, 64]
    table = (tmp_path / "table.md").read_text()
    assert "| train step | fp32 | LoRA r2 | 2x32 | 1 |" in table
    assert "| generate 4 new (hf) | fp32 | - | 2x16 |" in table


def test_the_attention_baseline_times_the_same_ragged_batch(tmp_path):
    pretrained_cost.main(["--model", str(SHIPPED), "--measure", "generate", "--engines", "hf,hf-repeated-kv",
                          "--ragged", "--generate", "4x16", "--new-tokens", "4", "--repeats", "1",
                          "--precisions", "fp32", "--out", str(tmp_path)])
    rows = json.loads((tmp_path / "cost.json").read_text())["results"]
    assert [(r["engine"], r["ragged"]) for r in rows] == [("hf", True), ("hf-repeated-kv", True)]
    assert all(r["tokens"] > 0 for r in rows)
    assert "| generate 4 new (hf-repeated-kv, ragged) | fp32 | - | 4x16 |" in (tmp_path / "table.md").read_text()


def test_a_setting_whose_process_dies_is_reported():
    row = {"kind": "train", "bf16": False, "lora": 0, "batch": (1, 8), "threads": 1,
           "error": "exit code -9 (killed for memory?)"}
    assert "| train step | fp32 | full | 1x8 | 1 | exit code -9 (killed for memory?) | - | - |" in \
        pretrained_cost.table([row])


@pytest.mark.vllm
def test_the_vllm_engine_is_timed_with_its_weight_sync(tmp_path):
    pytest.importorskip("vllm")
    pretrained_cost.main(["--model", str(SHIPPED), "--measure", "generate", "--engines", "hf,vllm", "--eager",
                          "--generate", "2x16", "--new-tokens", "4", "--repeats", "1", "--precisions", "fp32",
                          "--out", str(tmp_path)])
    hf, vllm = json.loads((tmp_path / "cost.json").read_text())["results"]
    assert (hf["engine"], vllm["engine"]) == ("hf", "vllm") and "sync_s" not in hf and vllm["sync_s"] > 0
    assert hf["tokens"] > 0 and vllm["tokens"] > 0
    assert "| generate 4 new (vllm), weight sync" in (tmp_path / "table.md").read_text()


@pytest.mark.parametrize("args", [["--measure", "trian"], ["--engines", "sglang"]])
def test_an_unknown_measure_or_engine_is_one_line(args, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        pretrained_cost.main([*args, "--out", str(tmp_path)])
    assert e.value.code == 2 and "unknown --measure or --engines" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())
