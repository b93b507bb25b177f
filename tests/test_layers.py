"""The layers hold: ``lint-imports`` checks pyproject.toml's import-linter contracts (docs/layout.md), so an
import that points up (the environment reaching for an agent, a learner for the benchmarks), lazy ones
inside functions included, or torch or transformers in the environment package, fails the suite."""

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_import_points_down_and_the_environment_imports_no_torch() -> None:
    beside = Path(sys.executable).with_name("lint-imports")  # the dev extra's console script
    program = str(beside) if beside.is_file() else shutil.which("lint-imports")
    assert program, "lint-imports not found: pip install -e '.[dev]' (import-linter)"
    done = subprocess.run([program, "--no-cache", "--no-logo"], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout, done.stdout[-4000:]
