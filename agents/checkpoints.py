"""Loading a policy checkpoint, with one clear error for each way a path can be the wrong thing.

A checkpoint is an HF model folder or a GGUF file (a ``.gguf`` path, or a folder and ``gguf_file``):
transformers de-quantises GGUF weights to the dtype asked for. The policy needs a causal LM and a
tokenizer with a chat template (every prompt is rendered through it, ``mempo_env.views.render_prompt``).
Without these checks, each mistake surfaces as a traceback from deep inside transformers, or worse,
as a run that starts and renders prompts some other way.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


class CheckpointError(ValueError):
    """A path that is not a usable policy checkpoint; the message names the path and what to do."""


# What makes two checkpoints the same network: a checkpoint resumed into another one fails late, or
# (same tensor names, other shapes) not at all.
SHAPE_KEYS = ("model_type", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
              "intermediate_size", "vocab_size")


# Files that mark a checkpoint this project trained: a warm-up (``algorithms.sft``), the shipped one, a
# learner's checkpoint. Each was trained on episodes rendered with the environment's ``train`` prompt.
TRAINED_HERE = ("sft_config.json", "warmup.json", "step.json")


def trained_here(path: str) -> bool:
    """Whether ``path`` is a checkpoint this project trained, hence with the ``train`` system prompt: shown
    another one (``benchmarks.run --prompt eval``) it sees a prompt it never saw, which costs a small
    model everything (SmolLM2's warm-up: EM 0 with ``eval``, docs/experiments/pretrained-model.md)."""
    return any((Path(path) / mark).is_file() for mark in TRAINED_HERE)


def resolve(path: str, gguf_file: str | None = None) -> tuple[str, dict[str, Any]]:
    """(folder, ``from_pretrained`` keywords): transformers loads a GGUF file by name from its folder."""
    if gguf_file is None and path.endswith(".gguf"):
        path, gguf_file = str(Path(path).parent), Path(path).name
    if gguf_file is None:
        return path, {}
    if not (Path(path) / gguf_file).is_file():
        raise CheckpointError(f"no GGUF file {gguf_file!r} in {path!r}")
    return path, {"gguf_file": gguf_file}


def _where(folder: str, source: dict[str, Any]) -> str:
    return str(Path(folder) / source["gguf_file"]) if source else folder


def load_config(path: str, gguf_file: str | None = None) -> Any:
    """The checkpoint's model config, checked to be a causal LM's."""
    from transformers import AutoConfig
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    folder, source = resolve(path, gguf_file)
    where = _where(folder, source)
    if not source and Path(folder).exists() and not (Path(folder) / "config.json").is_file():
        if any(Path(folder).glob("*.gguf")):
            raise CheckpointError(f"{folder} holds GGUF files but no config.json: name the file "
                                  f"({folder}/NAME.gguf or #gguf_file=NAME.gguf)")
        raise CheckpointError(f"{folder} is not a model folder (no config.json in it)")
    try:
        config = AutoConfig.from_pretrained(folder, **source)
    except Exception as e:  # a GGUF file or config.json that transformers cannot parse, or no such model
        import transformers

        why = f"{type(e).__name__}: {' '.join(str(e).split())[:200]}"
        if not Path(folder).exists():
            raise CheckpointError(f"no model at {folder}: no such folder, nor a hub name to fetch ({why})") from e
        kind = "a GGUF file" if source else "a model config"
        raise CheckpointError(f"{where} is not {kind} transformers {transformers.__version__} can read ({why})") from e
    if config.model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        raise CheckpointError(f"{where} holds a {config.model_type!r} model, not a causal LM "
                              "(AutoModelForCausalLM has no class for it): the policy must generate text")
    return config


def load_tokenizer(path: str, gguf_file: str | None = None) -> Any:
    """The checkpoint's tokenizer, checked to have a chat template."""
    from transformers import AutoTokenizer

    folder, source = resolve(path, gguf_file)
    tokenizer = AutoTokenizer.from_pretrained(folder, **source)
    if not getattr(tokenizer, "chat_template", None):
        raise CheckpointError(f"the tokenizer of {_where(folder, source)} has no chat template: every prompt is "
                              "rendered through it; set tokenizer.chat_template and save_pretrained it")
    return tokenizer


def load_policy(path: str, gguf_file: str | None = None, **model_kwargs: Any) -> tuple[Any, Any]:
    """(model, tokenizer) of a causal-LM checkpoint, checked first (``load_config``, ``load_tokenizer``).
    A GGUF model comes back as plain tensors, savable with ``save_pretrained`` (transformers keeps a
    quantisation marker on it that makes ``save_pretrained`` refuse the de-quantised weights)."""
    from transformers import AutoModelForCausalLM

    load_config(path, gguf_file)
    tokenizer = load_tokenizer(path, gguf_file)
    folder, source = resolve(path, gguf_file)
    model = AutoModelForCausalLM.from_pretrained(folder, **source, **model_kwargs)
    if source:
        del model.config.quantization_config
        model.hf_quantizer = None
    return model, tokenizer


def check_same_network(checkpoint: Path, start: Path) -> None:
    """Refuse to resume ``checkpoint`` onto a run that starts from ``start`` when they differ in
    architecture or shape (``SHAPE_KEYS``): loading one into the other fails deep in transformers, or
    silently trains another model."""
    import json

    def shape(folder: Path) -> dict[str, Any]:
        try:
            config = json.loads((folder / "config.json").read_text())
        except (OSError, ValueError) as e:
            raise CheckpointError(f"{folder / 'config.json'} is unreadable ({e})") from e
        return {k: config.get(k) for k in SHAPE_KEYS} | {"architectures": config.get("architectures")}

    mine, theirs = shape(checkpoint), shape(start)
    if differ := {k: (mine[k], theirs[k]) for k in mine if mine[k] != theirs[k]}:
        said = ", ".join(f"{k} {a!r} vs {b!r}" for k, (a, b) in differ.items())
        raise CheckpointError(f"checkpoint {checkpoint} is another network than the run's policy {start} ({said}); "
                              "resume it with the policy it was trained from")
