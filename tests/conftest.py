"""Keep every test's BM25 index cache in a temporary folder, off the user's home."""

import pytest


@pytest.fixture(autouse=True, scope="session")
def _private_cache_dir(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MEMPO_CACHE_DIR", str(tmp_path_factory.mktemp("mempo_cache")))
        yield
