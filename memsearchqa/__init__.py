"""MemSearchQA-v0 as a verifiers v1 taskset (verifiers 0.4.0, in an environment of its own:
``bash scripts/install_verifiers.sh``): ``vf-eval memsearchqa`` or ``--env.taskset.id memsearchqa``.

The package exports the taskset (``memsearchqa.taskset``: one task per episode seed, the env's stop,
score and metrics) and its harness (``memsearchqa.harness``: the env's own step loop, verifiers'
default harness for this taskset, run on the host by default), whose searches go to the taskset's
MCP search server (``memsearchqa.search``). docs/trainers.md, section verifiers.
"""

from memsearchqa.harness import MemSearchQAEnvConfig, MemSearchQAHarness, MemSearchQAVerifiersEnv
from memsearchqa.taskset import MemSearchQAConfig, MemSearchQATaskset

__all__ = [
    "MemSearchQAConfig", "MemSearchQAEnvConfig", "MemSearchQAHarness", "MemSearchQATaskset", "MemSearchQAVerifiersEnv",
]
