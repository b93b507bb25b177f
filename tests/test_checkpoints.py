"""A path that is not a usable policy is one clear error (agents/checkpoints.py), wherever it is given:
``hf:`` agents, ``algorithms.sft --base`` and ``algorithms.mempo`` (its policy, and ``--resume``)."""

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from agents import make_agent
from agents.checkpoints import CheckpointError, check_same_network, load_policy
from algorithms.mempo import Config
from algorithms.sft import SHIPPED, SFTConfig, warm_up

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def encoder(tmp_path: Path) -> Path:
    """A DistilBERT folder: a model config transformers reads, of a model that cannot generate."""
    from transformers import DistilBertConfig

    folder = tmp_path / "distilbert"
    DistilBertConfig(dim=32, n_layers=1, n_heads=2, hidden_dim=64).save_pretrained(folder)
    return folder


@pytest.fixture
def no_template(tmp_path: Path) -> Path:
    """The shipped warm-up, less its tokenizer's chat template."""
    folder = tmp_path / "no-template"
    shutil.copytree(SHIPPED, folder)
    (folder / "chat_template.jinja").unlink(missing_ok=True)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    config.pop("chat_template", None)
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    return folder


def test_a_model_that_is_no_causal_lm_is_refused(encoder: Path) -> None:
    for load in (lambda: load_policy(str(encoder)), lambda: make_agent(f"hf:{encoder}"),
                 lambda: warm_up(SFTConfig(base=str(encoder), episodes=1), encoder.parent / "out")):
        with pytest.raises(CheckpointError, match=rf"{encoder} holds a 'distilbert' model, not a causal LM"):
            load()
    assert not (encoder.parent / "out").exists()


def test_a_tokenizer_without_a_chat_template_is_refused(no_template: Path) -> None:
    with pytest.raises(CheckpointError, match=rf"the tokenizer of {no_template} has no chat template"):
        load_policy(str(no_template))
    with pytest.raises(CheckpointError, match="no chat template"):
        make_agent(f"hf:{no_template}")


def test_a_gguf_file_transformers_cannot_read_is_refused(tmp_path: Path) -> None:
    pytest.importorskip("gguf")
    garbage = tmp_path / "model.gguf"
    garbage.write_bytes(b"not a gguf file at all" * 100)
    for spec in (str(garbage), f"{tmp_path}#gguf_file=model.gguf"):
        with pytest.raises(CheckpointError, match=rf"{garbage} is not a GGUF file transformers [\d.]+ can read"):
            make_agent(f"hf:{spec}")


def test_a_truncated_gguf_is_refused(tmp_path: Path) -> None:
    from test_pretrained import smollm2_gguf

    truncated = tmp_path / "cut.gguf"
    with smollm2_gguf().open("rb") as f:
        truncated.write_bytes(f.read(1 << 20))  # the header and part of the tensor table
    with pytest.raises(CheckpointError, match=rf"{truncated} is not a GGUF file"):
        load_policy(str(truncated))


def test_missing_paths_say_what_is_missing(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match=r"is not a model folder \(no config.json in it\)"):
        load_policy(str(tmp_path / "empty"))
    (tmp_path / "empty" / "m.gguf").touch()
    with pytest.raises(CheckpointError, match="holds GGUF files but no config.json: name the file"):
        load_policy(str(tmp_path / "empty"))


def test_check_same_network(tmp_path: Path) -> None:
    config = json.loads((SHIPPED / "config.json").read_text())
    for name, change in (("same", {}), ("wider", {"hidden_size": 2 * config["hidden_size"]}),
                         ("other", {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"]})):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(json.dumps({**config, **change}))
    check_same_network(tmp_path / "same", SHIPPED)
    with pytest.raises(CheckpointError, match=r"another network than the run's policy .*hidden_size 256 vs 128"):
        check_same_network(tmp_path / "wider", SHIPPED)
    with pytest.raises(CheckpointError, match="model_type 'gpt2' vs 'qwen2'"):
        check_same_network(tmp_path / "other", SHIPPED)


def test_resume_onto_a_checkpoint_of_another_network_is_one_line(tmp_path: Path, capsys) -> None:
    """--resume of a run whose checkpoint is another network exits 2 naming both, and changes nothing."""
    from test_training import folder_state

    import algorithms.mempo as mempo

    run = tmp_path / "run"
    (run / "checkpoint").mkdir(parents=True)
    (run / "config.json").write_text(json.dumps(dataclasses.asdict(Config(policy=str(SHIPPED), run_dir=str(run)))))
    config = json.loads((SHIPPED / "config.json").read_text())
    (run / "checkpoint" / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 12}))
    (run / "checkpoint" / "step.json").write_text(json.dumps({"step": 1}))
    before = folder_state(run)
    with pytest.raises(SystemExit) as exit_:
        mempo.main("mempo", ["--resume", str(run)])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and f"checkpoint {run / 'checkpoint'} is another network" in err
    assert "num_hidden_layers 12 vs 4" in err and err.count("error:") == 1 and "Traceback" not in err
    assert folder_state(run) == before


def test_the_learner_refuses_a_gguf_policy_in_one_line(tmp_path: Path, capsys) -> None:
    import algorithms.mempo as mempo

    (tmp_path / "m.gguf").touch()
    with pytest.raises(SystemExit) as exit_:
        mempo.main("mempo", ["--policy", str(tmp_path / "m.gguf"), "--run-dir", str(tmp_path / "run")])
    assert exit_.value.code == 2 and "python -m algorithms.sft --base FILE.gguf" in capsys.readouterr().err
