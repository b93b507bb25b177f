"""Helpers of the engine tests: a tiny policy that has memorised one assistant turn (greedy decoding
repeats it, so stop strings hit deterministically, while other prompts still sample varied text),
and comparisons of per-token log-probs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mempo_env.tasks.generated import NAME_WORDS

NAME = " ".join(NAME_WORDS[:2])  # words of the generated task: one token each after a space
TURN = f"<mem>{NAME}</mem><search>{NAME}</search> and then some more text to read"
QUESTION = f"Who founded {NAME}?"


def chat_ids(tokenizer: Any, messages: list[dict[str, str]]) -> list[int]:
    return tokenizer.encode(tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True))


def memorised_policy(policy_dir: Path, tokenizer: Any) -> Any:
    """The policy at ``policy_dir`` trained on (QUESTION -> TURN) until greedy decoding repeats TURN."""
    import torch  # the train extra: only the tests that need it import it
    from transformers import AutoModelForCausalLM

    from agents.backends import HFBackend

    model = AutoModelForCausalLM.from_pretrained(policy_dir, dtype=torch.float32)
    prompt, target = chat_ids(tokenizer, [{"role": "user", "content": QUESTION}]), tokenizer.encode(TURN)
    ids = torch.tensor([prompt + target])
    labels = ids.clone()
    labels[0, :len(prompt)] = -100
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matmuls: a second thread only adds contention on a busy 2-core machine
    try:
        for step in range(300):
            loss = model(input_ids=ids, labels=labels).loss
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if step % 10 == 9:
                (greedy,), = HFBackend(model, tokenizer).generate([prompt], max_new_tokens=len(target), temperature=0)
                if greedy.token_ids == target:
                    return model.eval()
    finally:
        torch.set_num_threads(threads)
    pytest.fail("the fixture did not memorise its turn")


def flat(generations: list[list[Any]]) -> list[Any]:
    return [g for per_prompt in generations for g in per_prompt]


def max_diff(a: list[list[float]], b: list[list[float]]) -> float:
    """Largest difference between two ragged lists of per-token values of the same shape."""
    assert [len(x) for x in a] == [len(y) for y in b]
    return max((abs(x - y) for xs, ys in zip(a, b) for x, y in zip(xs, ys)), default=0.0)
