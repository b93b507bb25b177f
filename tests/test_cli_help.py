"""Every command-line program answers ``--help`` without importing torch or transformers.

Importing torch alone costs seconds (``python -X importtime``: 2.5 s of a 5 s ``--help``); the
programs import it inside the functions that train or evaluate. A program is found by its
``if __name__ == "__main__":`` line, so a new one is covered without being listed here.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("agents", "algorithms", "benchmarks", "integrations", "mempo_env", "mempo_verl", "memsearchqa")
HEAVY = ("torch", "transformers", "vllm", "sglang")
# Not programs with options: pytest-benchmark files (bench_bm25 and bench_engines run under pytest, or
# as plain scripts with no options), and mempo_verl.main, a Hydra program of the verl environment.
NOT_ARGPARSE = {"benchmarks.bench_bm25", "benchmarks.bench_engines", "mempo_verl.main"}
# Programs whose own light dependencies come with an extra (skipped where it is not installed).
NEEDS = {"integrations.openenv_server": "openenv", "memsearchqa.search": "verifiers"}  # memsearchqa: .venv-verifiers

PROBE = """
import contextlib, io, runpy, sys
sys.argv = [sys.argv[1], "--help"]
try:
    with contextlib.redirect_stdout(io.StringIO()) as out:
        runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
except SystemExit as e:
    code = e.code
else:
    code = "no exit"
print(repr(code), len(out.getvalue()), " ".join(m for m in {heavy} if m in sys.modules))
"""


def programs() -> list[str]:
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if 'if __name__ == "__main__":' in path.read_text(encoding="utf-8"):
                found.append(".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__main__"))
    return [m for m in found if m not in NOT_ARGPARSE]


def test_the_programs_are_found():
    assert {"algorithms.mempo", "algorithms.sft", "benchmarks.experiments.learner_comparison",
            "benchmarks.run"} <= set(programs())


@pytest.mark.parametrize("module", programs())
def test_help_imports_no_torch(module):
    if module in NEEDS and importlib.util.find_spec(NEEDS[module]) is None:
        pytest.skip(f"{module} needs the {NEEDS[module]!r} package")
    code = PROBE.format(heavy=HEAVY)
    done = subprocess.run([sys.executable, "-c", code, module], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    exit_code, printed, heavy = (done.stdout.strip().split(" ", 2) + [""])[:3]
    assert exit_code == "0" and int(printed) > 0, f"{module} --help: exit {exit_code}, {printed} chars printed"
    assert heavy == "", f"{module} --help imported {heavy}: import them inside the functions that use them"
