"""Fixtures of the verl tests: one Ray session with TransferQueue for every test that needs them."""

import os
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="session")
def transfer_queue():
    import ray
    import transfer_queue as tq

    # Ray's workers import the stand-ins (verl_standins) and this checkout's packages, as the tests do.
    # TransferQueue's controller and storage units each take a CPU (with fewer, tq.init() hangs), and the
    # whole-step test adds the stand-in server, an agent-loop worker, a reward worker and a router.
    path = os.pathsep.join(filter(None, [str(HERE), str(HERE.parents[1]), os.environ.get("PYTHONPATH")]))
    ray.init(num_cpus=8, include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": {"PYTHONPATH": path}})
    tq.init()
    yield tq
    tq.close()
    ray.shutdown()
