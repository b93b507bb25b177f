"""The default warm-up ships with the project (algorithms/warmup/): it loads, it is what its recorded
recipe says, and ``default_warmup`` uses it only when that recipe is the one asked for."""

import json

import pytest

torch = pytest.importorskip("torch")
from transformers import AutoModelForCausalLM, AutoTokenizer

import algorithms.sft as sft

RECORD = json.loads((sft.SHIPPED / "warmup.json").read_text())


def test_the_shipped_warmup_is_the_default_recipe(tmp_path) -> None:
    assert RECORD["recipe"] == json.loads(json.dumps(sft.recipe(sft.default_recipe(cache_dir=str(tmp_path)))))
    assert RECORD["command"] == "python -m algorithms.sft --ship"
    assert RECORD["build"]["seconds"] > 0 and RECORD["build"]["cpu"] and RECORD["build"]["compute"]
    assert sft.default_warmup(cache_dir=str(tmp_path)) == sft.SHIPPED
    assert not any(tmp_path.iterdir())  # nothing was built


def test_the_shipped_warmup_loads_with_the_embedded_tokenizer(policy_dir, tokenizer) -> None:
    shipped = AutoTokenizer.from_pretrained(sft.SHIPPED)
    assert shipped.get_vocab() == tokenizer.get_vocab()  # the tokenizer this code builds
    assert shipped.chat_template == tokenizer.chat_template
    model = AutoModelForCausalLM.from_pretrained(sft.SHIPPED)
    built = json.loads((policy_dir / "config.json").read_text())
    for key in ("model_type", "hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size"):
        assert getattr(model.config, key) == built[key]
    assert sum(f.stat().st_size for f in sft.SHIPPED.iterdir()) < 10 * 2**20  # a few MB in the repository
    ids = torch.tensor([tokenizer.encode("<mem>")])
    assert torch.isfinite(model(input_ids=ids).logits).all()

