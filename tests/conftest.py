"""Shared fixtures: a private BM25 cache for every test, and one tiny policy built per session."""

from pathlib import Path

import pytest


@pytest.fixture(autouse=True, scope="session")
def _private_cache_dir(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MEMPO_CACHE_DIR", str(tmp_path_factory.mktemp("mempo_cache")))
        yield


@pytest.fixture(scope="session")
def policy_dir(tmp_path_factory) -> Path:
    """The embedded tiny policy (untrained), built once for every test that needs it."""
    from algorithms.tiny_policy import build_tiny_policy  # needs the train extra

    return build_tiny_policy(tmp_path_factory.mktemp("tiny") / "policy")


@pytest.fixture(scope="session")
def tokenizer(policy_dir: Path):
    """The tiny policy's tokenizer."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(policy_dir)
