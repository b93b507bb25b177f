"""HFBackend mechanics on the tiny policy: cached generation agrees with a plain forward, batching changes
nothing, stop strings cut exactly, seeds reproduce, weight updates take effect."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
from transformers import AutoModelForCausalLM

from agents.backends import Generation, HFBackend, PolicyBackend
from mempo_env.tasks.generated import NAME_WORDS

FIRST, LAST, PLACE = NAME_WORDS[:3]  # words of the generated task: one token each after a space
NAME = f"{FIRST} {LAST}"
# Two memorised turns: one runs on past </search> (so only a stop string ends it), one ends with eos.
MEMORISED = {
    f"Who founded {NAME}?": f"<mem>{NAME}</mem><search>{NAME}</search> and then some more text to read",
    "Where was Timo Solri born?": f"<answer>{PLACE}</answer><|im_end|>",
}
OTHER = ["Who is the mayor of the city where the founder of the studio was born?", "x", "Kelmo"]


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    """The tiny model's matmuls are too small to gain from a second thread, and with another job
    busy on this 2-core machine two OpenMP threads made this file about 20x slower (140 s vs 7 s)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def encode_prompt(tokenizer, question: str) -> list[int]:
    text = tokenizer.apply_chat_template([{"role": "user", "content": question}], tokenize=False,
                                         add_generation_prompt=True)
    return tokenizer.encode(text)


@pytest.fixture(scope="module")
def trained(policy_dir: Path, tokenizer):
    """The tiny policy after Adam steps on MEMORISED until it has them by heart: deterministic stops."""
    model = AutoModelForCausalLM.from_pretrained(policy_dir)
    prompts = [encode_prompt(tokenizer, q) for q in MEMORISED]
    seqs = [p + tokenizer.encode(a) for p, a in zip(prompts, MEMORISED.values())]
    width = max(map(len, seqs))
    ids = torch.full((len(seqs), width), tokenizer.pad_token_id)
    labels = torch.full((len(seqs), width), -100)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for r, (prompt, seq) in enumerate(zip(prompts, seqs)):
        ids[r, :len(seq)] = torch.tensor(seq)
        mask[r, :len(seq)] = 1
        labels[r, len(prompt):len(seq)] = torch.tensor(seq[len(prompt):])
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(300):
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        if loss.item() < 1e-3:
            break
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert loss.item() < 1e-2, "the fixture did not memorise its two turns"
    return model.eval()


@pytest.fixture(scope="module")
def untrained(policy_dir: Path):
    return AutoModelForCausalLM.from_pretrained(policy_dir).eval()


@pytest.fixture
def backend(trained, tokenizer) -> HFBackend:
    return HFBackend(trained, tokenizer, batch_size=3)  # small chunks: every call spans several


def prompts(tokenizer) -> list[list[int]]:
    """Memorised and unseen prompts of different lengths."""
    return [encode_prompt(tokenizer, q) for q in list(MEMORISED) + OTHER] + [tokenizer.encode("The")]


def flat(generations: list[list[Generation]]) -> list[Generation]:
    return [g for per_prompt in generations for g in per_prompt]


def test_is_a_policy_backend(backend: HFBackend) -> None:
    assert isinstance(backend, PolicyBackend)


@pytest.mark.parametrize("batch_size", [3, 64])
@pytest.mark.parametrize("which", ["trained", "untrained"])
def test_generated_logprobs_equal_score(request, tokenizer, which: str, batch_size: int) -> None:
    # Left padding + KV cache + finished rows (dropped, or kept until a quarter of the batch is
    # done) against one right-padded plain forward. The untrained model's flat distributions rarely
    # emit eos; the stop string "k" ends some of its rows early.
    backend = HFBackend(request.getfixturevalue(which), tokenizer, batch_size=batch_size)
    ps = prompts(tokenizer)
    generations = backend.generate(ps, max_new_tokens=24, n=2, stop=["</search>", "k"], seed=0)
    assert [len(g) for g in generations] == [2] * len(ps)
    lengths = [len(g.token_ids) for g in flat(generations)]
    assert len(set(lengths)) > 2  # rows finish at different steps
    for g in flat(generations):
        stopped = g.token_ids[-1] == tokenizer.eos_token_id or any(s in g.text for s in ("</search>", "k"))
        assert g.finish_reason == ("stop" if stopped else "length") and (stopped or len(g.token_ids) == 24)
    contexts = [p for p, per_prompt in zip(ps, generations) for _ in per_prompt]
    scores = backend.score(contexts, [g.token_ids for g in flat(generations)])
    for g, s in zip(flat(generations), scores):
        assert len(g.logprobs) == len(g.token_ids) == len(s)
        assert torch.allclose(torch.tensor(g.logprobs), torch.tensor(s), atol=1e-4, rtol=0)
        assert g.text == tokenizer.decode(g.token_ids)


def test_temperature_and_top_p_logprobs(backend: HFBackend, trained, tokenizer) -> None:
    prompt = encode_prompt(tokenizer, OTHER[0])
    for temperature, top_p in [(0.5, 1.0), (1.7, 0.8), (0.0, 1.0)]:
        (g,), = backend.generate([prompt], max_new_tokens=6, temperature=temperature, top_p=top_p, seed=3)
        with torch.no_grad():
            logits = trained(torch.tensor([prompt + g.token_ids])).logits[0, len(prompt) - 1:-1]
        expected = torch.log_softmax(logits / (temperature or 1.0), -1)  # top-p not reflected
        picked = expected.gather(-1, torch.tensor(g.token_ids)[:, None]).squeeze(-1)
        assert torch.allclose(torch.tensor(g.logprobs), picked, atol=1e-4, rtol=0)
        if temperature == 0:
            assert g.token_ids == logits.argmax(-1).tolist()
    # a vanishing nucleus leaves only the most likely token: sampling becomes greedy
    greedy = backend.generate([prompt], max_new_tokens=8, temperature=0)[0][0]
    nucleus = backend.generate([prompt], max_new_tokens=8, top_p=1e-6, seed=1)[0][0]
    assert nucleus.token_ids == greedy.token_ids


def test_batched_greedy_equals_one_at_a_time(trained, tokenizer) -> None:
    ps = prompts(tokenizer)
    batched = HFBackend(trained, tokenizer, batch_size=64).generate(ps, max_new_tokens=16, temperature=0,
                                                                    stop=["</search>"])
    single = HFBackend(trained, tokenizer, batch_size=1)
    for prompt, (g,) in zip(ps, batched):
        (alone,), = single.generate([prompt], max_new_tokens=16, temperature=0, stop=["</search>"])
        assert g.token_ids == alone.token_ids and g.finish_reason == alone.finish_reason
        assert torch.allclose(torch.tensor(g.logprobs), torch.tensor(alone.logprobs), atol=1e-4, rtol=0)


def first_cut(tokenizer, ids: list[int], stop: str) -> int:
    """Number of tokens up to and including the one that completes ``stop``'s first occurrence."""
    return next(k for k in range(1, len(ids) + 1) if stop in tokenizer.decode(ids[:k]))


def test_stop_strings_cut_each_sequence(backend: HFBackend, tokenizer) -> None:
    search_prompt = encode_prompt(tokenizer, f"Who founded {NAME}?")
    (full,), = backend.generate([search_prompt], max_new_tokens=30, temperature=0)
    assert full.text.startswith(MEMORISED[f"Who founded {NAME}?"])  # the model learned the turn
    assert full.finish_reason == "length" and len(full.token_ids) == 30
    close_search = tokenizer.convert_tokens_to_ids("</search>")
    cases = {  # stop string -> whether it spans several generated tokens
        "</search>": False,  # one added token
        "more text": True,  # " more" + " text"
        f"{LAST}</mem><search>{FIRST}": True,  # " LAST" "</mem>" "<search>" "FIRST..."
        LAST[:2]: False,  # ends inside " LAST": the token overhangs the stop string
    }
    ps = [search_prompt, prompts(tokenizer)[2]]  # with a second prompt that may never stop
    for stop, spans_tokens in cases.items():
        g, other = flat(backend.generate(ps, max_new_tokens=30, temperature=0, stop=[stop, "never seen"]))
        cut = first_cut(tokenizer, full.token_ids, stop)
        assert g.token_ids == full.token_ids[:cut] and g.finish_reason == "stop", stop
        assert g.logprobs == pytest.approx(full.logprobs[:cut], abs=1e-4)
        assert stop in g.text and stop not in tokenizer.decode(g.token_ids[:-1])
        assert (stop not in tokenizer.decode(g.token_ids[-1:])) == spans_tokens
        if stop == "</search>":
            assert g.token_ids[-1] == close_search
        if stop == LAST[:2]:
            assert g.text.endswith(NAME)
        # the other row is cut by its own first match, or runs to the length
        reference = backend.generate([ps[1]], max_new_tokens=30, temperature=0)[0][0]
        if stop in reference.text:
            assert other.finish_reason == "stop"
            assert other.token_ids == reference.token_ids[:first_cut(tokenizer, reference.token_ids, stop)]
        else:  # "length", or "stop" at an eos token
            assert (other.token_ids, other.finish_reason) == (reference.token_ids, reference.finish_reason)
    # a stop string that would straddle the prompt and the output is not matched
    (g,), = backend.generate([search_prompt], max_new_tokens=3, temperature=0, stop=["assistant\n<mem>"])
    assert g.finish_reason == "length" and g.token_ids == full.token_ids[:3]


def test_eos_stops_and_is_kept(backend: HFBackend, tokenizer) -> None:
    (g,), = backend.generate([encode_prompt(tokenizer, "Where was Timo Solri born?")], max_new_tokens=30,
                             temperature=0)
    assert g.text == MEMORISED["Where was Timo Solri born?"]
    assert g.finish_reason == "stop" and g.token_ids[-1] == tokenizer.eos_token_id


def test_max_new_tokens_bounds_the_output(backend: HFBackend, tokenizer) -> None:
    for g in flat(backend.generate(prompts(tokenizer), max_new_tokens=5, n=2, seed=0)):
        if g.finish_reason == "length":
            assert len(g.token_ids) == 5
        else:
            assert g.token_ids[-1] == tokenizer.eos_token_id and len(g.token_ids) <= 5
    assert flat(backend.generate([[5, 6]], max_new_tokens=0)) == [Generation([], [], "", "length")]


def test_n_samples_and_seeds(untrained, tokenizer) -> None:
    # The untrained policy: its next-token distributions are flat (each 12-token sample has a
    # log-probability near -90), so n equal samples would mean broken seeding on any CPU. The
    # memorising fixture is too peaked for that: 4 samples were all equal on an AVX2-only CPU.
    backend = HFBackend(untrained, tokenizer, batch_size=3)
    ps = [encode_prompt(tokenizer, OTHER[0]), tokenizer.encode("The")]
    first = backend.generate(ps, max_new_tokens=12, n=4, seed=7)
    assert [len(per_prompt) for per_prompt in first] == [4, 4]
    assert len({tuple(g.token_ids) for g in first[0]}) > 1  # the n samples differ
    again = backend.generate(ps, max_new_tokens=12, n=4, seed=7)
    other = backend.generate(ps, max_new_tokens=12, n=4, seed=8)
    assert [g.token_ids for g in flat(again)] == [g.token_ids for g in flat(first)]
    assert [g.token_ids for g in flat(other)] != [g.token_ids for g in flat(first)]
    # seeding uses its own generator: the global RNG is neither read nor advanced
    torch.manual_seed(0)
    expected = torch.rand(1)
    torch.manual_seed(0)
    backend.generate(ps, max_new_tokens=4, seed=1)
    assert torch.equal(torch.rand(1), expected)


def test_update_weights(trained, tokenizer) -> None:
    model = copy.deepcopy(trained)
    backend = HFBackend(model, tokenizer)
    ps = prompts(tokenizer)
    before = [g.token_ids for g in flat(backend.generate(ps, max_new_tokens=10, temperature=0))]
    backend.update_weights(model)  # the held module itself: nothing to do
    assert backend.model is model
    modified = copy.deepcopy(model)
    with torch.no_grad():
        for p in modified.parameters():
            p.add_(torch.randn(p.shape, generator=torch.Generator().manual_seed(0)) * 0.5)
    backend.update_weights(modified)
    after = [g.token_ids for g in flat(backend.generate(ps, max_new_tokens=10, temperature=0))]
    assert after != before
    assert after == [g.token_ids for g in flat(HFBackend(modified, tokenizer).generate(ps, max_new_tokens=10,
                                                                                         temperature=0))]
    assert backend.model is model  # weights were copied in, the held object stays


def test_score_edges_and_training_mode(trained, tokenizer) -> None:
    model = copy.deepcopy(trained).train()
    backend = HFBackend(model, tokenizer, batch_size=2)
    contexts = [[5, 6, 7], [8], [9, 10]]
    scores = backend.score(contexts, [[11, 12], [], [13]])
    assert [len(s) for s in scores] == [2, 0, 1]
    with torch.no_grad():
        ref = torch.log_softmax(model.eval()(torch.tensor([[9, 10, 13]])).logits[0], -1)[1, 13].item()
    model.train()
    assert scores[2][0] == pytest.approx(ref, abs=1e-5)
    backend.generate([[5]], max_new_tokens=2)
    assert model.training  # the caller's mode is restored after generate and score
    with pytest.raises(ValueError):
        backend.score([[5]], [])
    with pytest.raises(ValueError):
        backend.score([[]], [[5]])
    with pytest.raises(ValueError):
        backend.generate([[]], max_new_tokens=2)


def test_grouped_query_heads_decode_unrepeated_with_the_same_numbers(policy_dir: Path, tokenizer,
                                                                     monkeypatch) -> None:
    # SmolLM2 has 3 query heads a KV head. transformers' sdpa repeats the keys and values whenever there
    # is a mask (left padding always brings one); generation passes them to torch as they are, and must
    # give the log-probs of scoring, which keeps transformers' own path.
    import transformers.integrations.sdpa_attention as sdpa
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(policy_dir)
    config.num_key_value_heads = config.num_attention_heads // 2
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="sdpa").eval()
    repeats = []
    repeat_kv = sdpa.repeat_kv
    monkeypatch.setattr(sdpa, "repeat_kv", lambda x, n: repeats.append(n) or repeat_kv(x, n))
    backend, ps = HFBackend(model, tokenizer, batch_size=64), prompts(tokenizer)
    generations = flat(backend.generate(ps, max_new_tokens=16, seed=0))
    assert repeats == [] and model.config._attn_implementation == "sdpa"  # and sdpa is back for training
    scores = backend.score(ps, [g.token_ids for g in generations])
    assert repeats and set(repeats) == {2}  # the reference did repeat them
    for g, s in zip(generations, scores):
        assert torch.allclose(torch.tensor(g.logprobs), torch.tensor(s), atol=1e-4, rtol=0)
