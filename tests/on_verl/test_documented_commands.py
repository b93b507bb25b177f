"""Every command that README.md, docs/verl.md and scripts/verl_gpu_check.sh print for verl, read from
the documents and the script themselves: ``python -m mempo_verl.main`` composed with Hydra from
``mempo_trainer.yaml`` and completed and checked as the entry point does (verl's ``validate_config``
included), ``python -m mempo_verl.data`` run, and the datasets it makes checked against the training
command's search tool; the install, activation and Ray commands checked against what they name.

Runs in the verl environment (``bash scripts/install_verl.sh``); skipped where verl is absent.
"""

import shlex
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("verl")
pytest.importorskip("transfer_queue")

from doc_blocks import ROOT, Block, code_blocks, python_module_args, script_commands, shell_commands
from hydra import compose, initialize_config_dir
from ray.scripts.scripts import start as ray_start

from mempo_verl import data
from mempo_verl.main import check_datasets, prepare_config

CONFIG_DIR = str(ROOT / "mempo_verl" / "config")
SHARED = (ROOT / ".." / "shared" / "data" / "qa").resolve()
GPU_CHECK = ROOT / "scripts" / "verl_gpu_check.sh"
THIS = "tests/on_verl/test_documented_commands.py::test_documented_verl_commands_validate"


def verl_blocks() -> list[Block]:
    """The shell blocks of docs/verl.md and of the README's "Scale-out on verl" section."""
    return [b for b in code_blocks("README.md", "docs/verl.md", lang="bash")
            if b.file == "docs/verl.md" or b.heading == "Scale-out on verl"]


def training_config(args: list[str]):
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base=None):
        return compose("mempo_trainer", overrides=args)


def check_command(command: str) -> None:
    """A documented command, checked as far as the CPU can: the training command composed and checked as
    ``python -m mempo_verl.main`` does before Ray starts; the data command parsed by its own parser;
    install and activation against the install script; ``ray start`` against Ray's own CLI."""
    words = shlex.split(command)
    module = python_module_args(command)
    if module and module[0] == "mempo_verl.main":
        prepare_config(training_config(module[1]))
    elif module and module[0] == "mempo_verl.data":
        data.make_parser().parse_args(module[1])  # an unknown or malformed option exits with its usage
    elif words[:1] == ["bash"]:
        script = ROOT / words[1]
        assert script.is_file() and subprocess.run(["bash", "-n", str(script)]).returncode == 0, command
    elif words[:1] == ["source"]:  # the environment the install script makes by default
        assert words[1] == ".venv-verl/bin/activate" and 'venv="${1:-.venv-verl}"' in (ROOT / "scripts" /
                                                                                        "install_verl.sh").read_text()
    elif words[:2] == ["ray", "start"]:
        options = {opt for p in ray_start.params for opt in p.opts}
        assert all(w.split("=")[0] in options for w in words[2:] if w.startswith("--")), command
    else:
        raise AssertionError(f"no test accounts for the documented command {command!r}")


def test_documented_verl_commands_validate():
    """Each command of each verl block: before, the README's training command failed verl's
    validate_config (no micro-batch sizes) and docs/verl.md's failed Hydra (mempo.env.retriever and
    mempo.env.corpus were not declared)."""
    blocks = verl_blocks()
    assert len(blocks) == 5
    for block in blocks:
        assert block.tested_by == THIS, f"{block.where}: mark the block <!-- tested by {THIS} -->"
        for command in shell_commands(block):
            check_command(command)


def in_a_checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run in an empty checkout next to the shared data, as the documents' relative paths assume."""
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / "algorithms").symlink_to(ROOT / "algorithms")
    if SHARED.is_dir():
        (tmp_path / "shared" / "data").mkdir(parents=True)
        (tmp_path / "shared" / "data" / "qa").symlink_to(SHARED)
    monkeypatch.chdir(checkout)


@pytest.mark.parametrize("document", ["README.md", "docs/verl.md"])
def test_documented_datasets_hold_their_questions_evidence(document, tmp_path, monkeypatch):
    """A document's data commands run, in order, and its training commands then pass the check of their
    search tool against those datasets (the paper mix needs its retriever: the generated task's corpus
    holds none of its evidence)."""
    commands = [c for b in verl_blocks() if b.file == document for c in shell_commands(b)]
    if any("../shared" in c for c in commands) and not SHARED.is_dir():
        pytest.skip(f"needs {SHARED}")
    in_a_checkout(tmp_path, monkeypatch)
    trained = 0
    for command in commands:
        module = python_module_args(command)
        if module and module[0] == "mempo_verl.data":
            data.main(module[1])
        elif module and module[0] == "mempo_verl.main":
            config = training_config(module[1])
            prepare_config(config)
            check_datasets(config)
            trained += 1
            if any(a.startswith("mempo.env.retriever=") for a in module[1]):  # needed: without, refused
                config = training_config([a for a in module[1] if not a.startswith("mempo.env.retriever=")])
                prepare_config(config)
                with pytest.raises(ValueError, match="bring no corpus"):
                    check_datasets(config)
    assert trained


def test_the_gpu_checks_commands_run_as_far_as_the_cpu_can(tmp_path, monkeypatch):
    """scripts/verl_gpu_check.sh's data command runs and its training command, composed and checked as
    ``python -m mempo_verl.main`` does, trains on those datasets with the search tool they need."""
    commands = script_commands(GPU_CHECK, "mempo_verl.", {"gpus": "1"})
    assert [python_module_args(c)[0] for c in commands] == ["mempo_verl.data", "mempo_verl.main"]
    in_a_checkout(tmp_path, monkeypatch)
    data.main(python_module_args(commands[0])[1])
    overrides = python_module_args(commands[1])[1]
    assert "actor_rollout_ref.rollout.n=4" in overrides and "trainer.total_training_steps=3" in overrides
    config = training_config(overrides)
    prepare_config(config)
    check_datasets(config)
    assert config.actor_rollout_ref.model.path == str(ROOT / "algorithms" / "warmup")
