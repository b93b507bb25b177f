"""The embedded tiny policy: its tokenizer survives a save/reload, its model reloads exactly, builds repeat."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
from safetensors.torch import load_file
from tokenizers import Tokenizer
from transformers import AutoModelForCausalLM

from algorithms.tiny_policy import PROTOCOL_TAGS, SPECIAL, build_model, build_tiny_policy

TEXTS = [
    "<mem>nothing yet</mem><think>find the company first</think><search>Pose Yufe</search>",
    "<tool_response>\nDoc 1(Title: Pose Yufe) Pose Yufe is a studio.\n</tool_response><answer>Momil</answer>",
    "Ünïcödé café naïve, 日本語 🙂, e\u0301 (combining accent), ß → ẞ",
    "  leading spaces,\n\n\ttabs and numbers 12345, it's they'll I'M",
    "<|im_start|>user\nWho is the mayor?<|im_end|>\n<|im_start|>assistant\n<mem>",
]
MESSAGES = [
    {"role": "system", "content": "Answer the question."},
    {"role": "user", "content": "Who founded Pose Yufe?"},
    {"role": "assistant", "content": "<mem>Pose Yufe</mem><think>search</think><search>Pose Yufe</search>"},
]


def test_ids_survive_reload(policy_dir: Path, tokenizer) -> None:
    # transformers loads a qwen2 folder with Qwen2Tokenizer, which rebuilds the pre-tokeniser; the
    # ids must equal those of the tokenizer exactly as trained and saved (ENGINES.md pitfall).
    assert type(tokenizer).__name__ == "Qwen2Tokenizer"
    trained = Tokenizer.from_file(str(policy_dir / "tokenizer.json"))
    rendered = [tokenizer.apply_chat_template(MESSAGES, tokenize=False),
                tokenizer.apply_chat_template(MESSAGES[:2], tokenize=False, add_generation_prompt=True)]
    for text in TEXTS + rendered:
        ids = tokenizer.encode(text)
        assert ids == trained.encode(text).ids, text
        assert tokenizer.decode(ids) == unicodedata.normalize("NFC", text)


def test_protocol_tags_and_specials_are_single_tokens(tokenizer) -> None:
    for tag in PROTOCOL_TAGS + SPECIAL:
        tag_id = tokenizer.convert_tokens_to_ids(tag)
        assert tag_id != tokenizer.unk_token_id or tag == tokenizer.unk_token
        assert tokenizer.encode(tag) == [tag_id]
        assert tag_id in tokenizer.encode(f"abc{tag}def"), tag  # also glued to other text
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.pad_token == "<|endoftext|>"
    assert tokenizer.eos_token_id != tokenizer.pad_token_id


def test_chat_template_is_chatml(tokenizer) -> None:
    text = tokenizer.apply_chat_template(MESSAGES[:2], tokenize=False, add_generation_prompt=True)
    assert text == ("<|im_start|>system\nAnswer the question.<|im_end|>\n"
                    "<|im_start|>user\nWho founded Pose Yufe?<|im_end|>\n<|im_start|>assistant\n")
    # continue_final_message: a prefilled assistant turn stays open, so the model continues it.
    partial = MESSAGES[:2] + [{"role": "assistant", "content": "<mem>Pose"}]
    continued = tokenizer.apply_chat_template(partial, tokenize=False, continue_final_message=True)
    assert continued == text + "<mem>Pose"
    ids = tokenizer.apply_chat_template(partial, tokenize=True, continue_final_message=True)
    ids = ids["input_ids"] if not isinstance(ids, list) else ids
    assert ids == tokenizer.encode(continued)
    pose = tokenizer.encode("Pose", add_special_tokens=False)
    assert ids[-len(pose) - 1] == tokenizer.convert_tokens_to_ids("<mem>") and ids[-len(pose):] == pose


def test_model_reloads_with_identical_logits(policy_dir: Path, tokenizer) -> None:
    model = AutoModelForCausalLM.from_pretrained(policy_dir).eval()
    fresh = build_model(len(tokenizer), seed=0, eos_token_id=tokenizer.eos_token_id,
                        pad_token_id=tokenizer.pad_token_id).eval()  # what build_tiny_policy saved
    ids = torch.tensor([tokenizer.encode(TEXTS[0] + TEXTS[2])])
    with torch.no_grad():
        assert torch.equal(model(ids).logits, fresh(ids).logits)
    # tied embeddings survive the safetensors round trip as one tensor
    assert model.get_output_embeddings().weight.data_ptr() == model.get_input_embeddings().weight.data_ptr()


def test_size_and_config(policy_dir: Path, tokenizer) -> None:
    model = AutoModelForCausalLM.from_pretrained(policy_dir)
    n_params = sum(p.numel() for p in model.parameters())
    assert 0.8e6 <= n_params <= 2.5e6, n_params
    assert model.config.vocab_size == len(tokenizer)
    assert model.config.eos_token_id == tokenizer.eos_token_id
    assert model.config.pad_token_id == tokenizer.pad_token_id
    assert model.dtype == torch.float32


def test_rebuild_is_identical(policy_dir: Path, tmp_path: Path) -> None:
    again = build_tiny_policy(tmp_path / "again")
    first, second = (json.loads((d / "tokenizer.json").read_text()) for d in (policy_dir, again))
    assert first["model"]["vocab"] == second["model"]["vocab"]
    assert first["model"]["merges"] == second["model"]["merges"]
    assert first["added_tokens"] == second["added_tokens"]
    w1, w2 = load_file(policy_dir / "model.safetensors"), load_file(again / "model.safetensors")
    assert w1.keys() == w2.keys()
    assert all(torch.equal(w1[k], w2[k]) for k in w1)


def test_no_name_starts_with_a_token_of_its_own_world(tokenizer) -> None:
    # The tokenizer learns from worlds 0-9. A word-initial token that only their names use (a country,
    # "ĠRagoria", or a distractor twin's word) is one a policy trained on 100 worlds sees in one and
    # never learns to copy (docs/learners.md). Every name word of worlds 0-9 must start with a token
    # that the names of worlds it never saw use too.
    from mempo_env.tasks.generated import build_world

    def name_starts(worlds: range) -> set[str]:
        return {tok for w in worlds for e in build_world(w).entities.values()
                for tok in tokenizer.tokenize(" " + e.name) if tok.startswith("Ġ")}

    assert name_starts(range(10)) <= name_starts(range(100, 150))
