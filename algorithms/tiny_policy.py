"""The embedded default policy: a BPE tokenizer and a small Qwen2 decoder, built here from nothing.

No model hub is reachable, so the project trains its own tokenizer on the generated task (corpus,
questions and scripted trajectories) and initialises a small Qwen2 model (1.2M parameters by
default; ``SFTConfig``'s hidden, layers and heads size it) from a config. Both are saved in the standard Hugging Face layout (``save_pretrained``,
safetensors), so anything that reads HF checkpoints, vLLM included, loads them; any HF causal LM
can stand in.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import gymnasium as gym
import torch
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

import mempo_env  # noqa: F401
from agents import OracleAgent
from agents.runner import run_episode
from mempo_env.prompts import PROMPTS
from mempo_env.tasks import make_generated_task
from mempo_env.tasks.generated import NAME_WORDS

# The protocol tags become single tokens, so a <mem> span maps to whole tokens.
PROTOCOL_TAGS = ["<mem>", "</mem>", "<think>", "</think>", "<search>", "</search>", "<answer>", "</answer>",
                 "<access>", "</access>", "<tool_response>", "</tool_response>"]
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHATML = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
# Qwen2's pre-tokenisation. transformers loads a qwen2 folder with Qwen2Tokenizer, which imposes this
# pipeline; training with anything else silently changes the ids after a reload (ENGINES.md).
QWEN2_SPLIT = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""


def _shared_pieces(text: str, splits: dict[str, str]) -> str:
    """The text with every country name split after its pool word (``splits``: "Vornoland" -> "Vorno
    land"), so that BPE learns no token for a name that only one world uses."""
    for name, split in splits.items():
        text = text.replace(name, split)
    return text


def training_texts(task_seed: int = 0, episodes: int = 400, worlds: int = 10) -> list[str]:
    """Corpora and train questions of ``worlds`` generated worlds, prompts, and oracle turns of the
    first (train splits only), written so that every name is made of pieces all worlds share: the
    worlds have no distractor twins (one-letter variants of pool words) and their country names are
    split after the pool word. A token that only one world's names use is one that a policy trained on
    many worlds barely sees, and never learns to copy (docs/experiments/earlier-recipes.md, country names)."""
    by_length = sorted(NAME_WORDS, key=len, reverse=True)
    texts = []
    for w in range(worlds):
        task = make_generated_task("train", seed=task_seed + w, distractors=0.0)
        splits = {}
        for name in (d.title for d in task.corpus if d.id.startswith("country-")):
            word = next(pool for pool in by_length if name.startswith(pool))
            splits[name] = f"{word} {name[len(word):]}"
        texts += [_shared_pieces(f"{d.title} {d.text}", splits) for d in task.corpus]
        texts += [_shared_pieces(q.question, splits) for q in task.questions]
        if w == 0:
            texts += [p.system for p in PROMPTS.values()] + [PROMPTS["train-v1"].user(["a", "b"])]
            env = gym.make("MemSearchQA-v0", dataset=task, objectives=2, cache_dir=None)
            for seed in range(episodes):
                trajectory = run_episode(env, OracleAgent(), seed)["trajectory"]
                texts += [_shared_pieces(m["content"], splits) for m in trajectory if m["role"] == "assistant"]
    return texts


def build_tokenizer(texts: list[str], vocab_size: int = 2048) -> PreTrainedTokenizerFast:
    """Byte-level BPE with at most ``vocab_size`` tokens (fewer when the texts run out of merges)."""
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   unk_token="<|endoftext|>")
    fast.add_tokens(PROTOCOL_TAGS)
    fast.chat_template = CHATML
    return fast


def build_model(vocab_size: int, *, hidden: int = 128, layers: int = 4, heads: int = 4, seed: int = 0,
                eos_token_id: int, pad_token_id: int) -> Qwen2ForCausalLM:
    config = Qwen2Config(
        vocab_size=vocab_size, hidden_size=hidden, intermediate_size=4 * hidden, num_hidden_layers=layers,
        num_attention_heads=heads, num_key_value_heads=heads, max_position_embeddings=4096,
        tie_word_embeddings=True, rope_theta=10000.0, eos_token_id=eos_token_id, pad_token_id=pad_token_id,
        bos_token_id=None,
    )
    with torch.random.fork_rng():  # seeded initialisation that leaves the caller's RNG alone
        torch.manual_seed(seed)
        return Qwen2ForCausalLM(config)


def build_tiny_policy(out_dir: str | Path, *, task_seed: int = 0, seed: int = 0, vocab_size: int = 2048,
                      hidden: int = 128, layers: int = 4, heads: int = 4) -> Path:
    """Train the tokenizer, initialise the model, save both to ``out_dir`` (written atomically)."""
    out_dir = Path(out_dir)
    tokenizer = build_tokenizer(training_texts(task_seed), vocab_size)
    model = build_model(len(tokenizer), hidden=hidden, layers=layers, heads=heads, seed=seed,
                        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{out_dir.name}-", dir=out_dir.parent))
    try:
        tokenizer.save_pretrained(tmp)
        model.save_pretrained(tmp)
        shutil.rmtree(out_dir, ignore_errors=True)
        tmp.rename(out_dir)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out_dir
