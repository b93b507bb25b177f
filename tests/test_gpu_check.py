"""scripts/gpu_check.sh, the learner's GPU check (issue 34, item 5), cannot run without a GPU; its two
commands are read from the script and validated here by the programs' own parsers: the warm-up is the
3.8M recipe, and the learner takes a CUDA device when torch sees one."""

import pytest
import tyro
from doc_blocks import ROOT, python_module_args, script_commands

SCRIPT = ROOT / "scripts" / "gpu_check.sh"


def test_the_gpu_checks_commands_build_the_3_8m_policy_and_train_it_on_cuda(monkeypatch, policy_dir):
    import torch

    import algorithms.mempo as mempo
    from algorithms.sft import SFTConfig
    from algorithms.tiny_policy import build_model

    sft, learner = (python_module_args(c) for c in script_commands(SCRIPT, "algorithms.", {"policy": str(policy_dir)}))
    assert sft[0] == "algorithms.sft" and learner[0] == "algorithms.mempo"
    recipe = tyro.cli(SFTConfig, args=sft[1])
    assert (recipe.hidden, recipe.layers, recipe.lr, recipe.steps, recipe.base) == (192, 6, 1e-3, 2500, "")
    model = build_model(2048, hidden=recipe.hidden, layers=recipe.layers, heads=recipe.heads, eos_token_id=0,
                        pad_token_id=0)
    assert sum(p.numel() for p in model.parameters()) >= 3.8e6  # "the 3.8M policy or larger"

    configs = []
    monkeypatch.setattr(mempo, "train", lambda cfg, data, strategy: configs.append(cfg))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # as on the GPU machine
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    mempo.main("mempo", learner[1])
    (cfg,) = configs
    assert cfg.device == "cuda" and cfg.algo == "mempo" and cfg.steps == 3 and cfg.policy == str(policy_dir)


def test_the_gpu_check_looks_for_the_line_the_learner_prints_on_a_gpu(monkeypatch):
    """A check passes only if the learner's log says it computed on CUDA: its pattern must be
    in the line ``train`` prints there ("compute: " and the ``Setting``); both scripts check with it."""
    import re

    import torch

    from algorithms.compute import Setting

    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H200")
    checker = (ROOT / "scripts" / "gpu_check_passed.py").read_text()
    pattern = re.search(r'ON_CUDA = "([^"]+)"', checker)[1]
    assert pattern in f"compute: {Setting(threads=16, device='cuda')} for generation and the update"
    assert all('scripts/gpu_check_passed.py "$out" "$steps"' in s.read_text() for s in (SCRIPT, SMOL))


def test_the_gpu_check_refuses_to_pass_on_a_cpu(tmp_path):
    """Its first step: where torch sees no GPU the script stops there, before any build."""
    import subprocess
    import sys

    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is here: the script would run the whole check")
    run = subprocess.run(["bash", str(SCRIPT), str(tmp_path / "check")], capture_output=True, text=True,
                         env={"PYTHON": sys.executable, "PATH": "/usr/bin:/bin"}, timeout=120)
    assert run.returncode != 0 and "torch sees no CUDA GPU" in run.stderr
    assert not (tmp_path / "check" / "cache").exists()


SMOL = ROOT / "scripts" / "gpu_check_smollm2.sh"


def test_the_smollm2_gpu_check_builds_the_documented_warm_up_and_trains_on_cuda(monkeypatch):
    """scripts/gpu_check_smollm2.sh (issue 50, item 5): its warm-up is the one docs/learners.md prints, with
    its own cache folder, and its learner runs two MemPO steps on CUDA from that warm-up."""
    import torch
    from doc_blocks import code_blocks, shell_commands

    import algorithms.mempo as mempo
    from algorithms.sft import SFTConfig

    sft, learner = (python_module_args(c) for c in script_commands(SMOL, "algorithms.", {"policy": "algorithms/warmup",
                                                                                        "G": "model.gguf"}))
    documented = [python_module_args(c) for b in code_blocks() if b.file == "docs/learners.md"
                  for c in shell_commands(b) if " -m algorithms.sft " in c]
    (doc,) = [args for module, args in documented if "--base" in args]
    script_recipe = tyro.cli(SFTConfig, args=sft[1])
    doc = [script_recipe.base if a == "$G" else a for a in doc]  # both find the model in the installed package
    assert script_recipe == tyro.cli(SFTConfig, args=[*doc, "--cache-dir", script_recipe.cache_dir]) and \
        script_recipe.base == "model.gguf" and script_recipe.lora_rank == 16
    configs = []
    monkeypatch.setattr(mempo, "train", lambda cfg, data, strategy: configs.append(cfg))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    mempo.main("mempo", learner[1])
    (cfg,) = configs
    assert (cfg.device, cfg.algo, cfg.steps, cfg.policy) == ("cuda", "mempo", 2, "algorithms/warmup")


@pytest.mark.parametrize("log, steps, passed", [("compute: fp32, cuda, NVIDIA H100 for generation", [1, 2], True),
                                                 ("threads: 1 for generation, 1 for the update (fp32)", [1, 2], False),
                                                 ("compute: fp32, cuda, NVIDIA H100 for generation", [1], False)])
def test_the_pass_condition_reads_the_log_and_every_step(tmp_path, log, steps, passed):
    import json
    import subprocess
    import sys

    (tmp_path / "mempo").mkdir()
    (tmp_path / "mempo.log").write_text(log + "\n")
    (tmp_path / "mempo" / "metrics.jsonl").write_text("".join(
        json.dumps({"step": s, "reward": 1.0, "p_mem": 0.5, "step_s": 3.0}) + "\n" for s in steps))
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu_check_passed.py"), str(tmp_path), "2"],
                         capture_output=True, text=True)
    assert (run.returncode == 0) is passed and ("step 2: reward 1.00" in run.stdout) is passed
