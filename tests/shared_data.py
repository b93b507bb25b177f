"""Marker for tests that read ../shared/data/qa: marked ``shared_data``, skipped where it is absent."""

from typing import Any

import pytest

from mempo_env.tasks.loaders import DATA_DIR_ENV, data_dir

SHARED = data_dir()


def needs_shared(test: Any) -> Any:
    skip = pytest.mark.skipif(not SHARED.is_dir(), reason=f"shared QA data not at {SHARED} (set {DATA_DIR_ENV})")
    return pytest.mark.shared_data(skip(test))
