"""MemPO (or GRPO) on verl: ``python -m mempo_verl.main [hydra overrides]``.

verl's own entry point (``verl.trainer.main_ppo``) with three differences: the config starts from
``mempo_verl/config/mempo_trainer.yaml``; ``prepare_config`` and ``check_datasets`` complete and check it
on the head node, before Ray starts; and the trainer runs in a ``TaskRunnerV1`` that imports ``mempo_verl.trainer``
first. verl's registries are per process and ``TaskRunnerV1`` is a Ray actor, so
``trainer.v1.trainer_mode=mempo`` must be registered there, not only in the driver. The agent loop
needs no such step: verl's workers import it by its ``_target_`` path.
"""

from __future__ import annotations

from pathlib import Path

import hydra
import pyarrow.parquet as pq
import ray
from omegaconf import DictConfig, OmegaConf, open_dict
from verl.trainer.main_ppo import TaskRunnerV1, run_ppo
from verl.trainer.ppo.utils import need_critic, need_reference_policy
from verl.utils.config import validate_config
from verl.utils.device import auto_set_device
from verl.utils.fs import copy_to_local

from mempo_verl.data import check_corpus, corpus_key, dataset_needs, search_task
from mempo_verl.options import MemPOOptions, check_config

AGENT_LOOPS = Path(__file__).parent / "config" / "agent_loops.yaml"
# paths that verl's actors (on any node, in their own working directories) open: made absolute here
PATH_KEYS = ("data.train_files", "data.val_files", "actor_rollout_ref.model.path", "mempo.env.dataset",
             "mempo.env.corpus", "trainer.default_local_dir")


@ray.remote
class MemPOTaskRunner(TaskRunnerV1.__ray_actor_class__):
    def run(self, config: DictConfig) -> None:
        import mempo_verl.trainer  # noqa: F401  (registers trainer_mode=mempo in this actor's process)

        return super().run(config)


def absolute(value: str, *, always: bool = False) -> str:
    """``value`` as an absolute path when it names a local file or folder relative to this directory
    (or ``always``); anything else (an absolute path, a hub model id, a set's name, a URL) unchanged."""
    path = Path(value).expanduser()
    return str(path.resolve()) if not path.is_absolute() and (always or path.exists()) else value


def prepare_config(config: DictConfig) -> None:
    """Complete and check ``config`` as ``main`` does before Ray starts: the agent loop registry, local
    paths made absolute (verl's actors open them in their own working directories, on other nodes
    too), MemPO's requirements (``options.check_config``) and verl's own ``validate_config``."""
    with open_dict(config):
        agent = config.actor_rollout_ref.rollout.agent
        agent.agent_loop_config_path = agent.agent_loop_config_path or str(AGENT_LOOPS)
        for key in PATH_KEYS:
            value = OmegaConf.select(config, key)
            if isinstance(value, str):
                OmegaConf.update(config, key, absolute(value, always=key == "trainer.default_local_dir"))
            elif value is not None:  # a list of files
                OmegaConf.update(config, key, [absolute(v) for v in value])
    check_config(config)
    auto_set_device(config)
    validate_config(config=config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))


def check_datasets(config: DictConfig) -> None:
    """Refuse a search tool (``mempo.env``) that does not hold the evidence of the training and validation
    questions (``data.check_corpus``), before any episode is scored 0 for want of documents."""
    options = MemPOOptions.from_config(config)
    searched = None if options.search["retriever"] else corpus_key(search_task(options.search).corpus)
    for key in ("data.train_files", "data.val_files"):
        files = OmegaConf.select(config, key)
        for file in [files] if isinstance(files, str) else files:
            rows = pq.read_table(copy_to_local(file), columns=["extra_info"]).to_pylist()
            check_corpus(dataset_needs(rows, file), options.search, searched)


@hydra.main(config_path="config", config_name="mempo_trainer", version_base=None)
def main(config: DictConfig) -> None:
    prepare_config(config)
    check_datasets(config)
    run_ppo(config, task_runner_class=MemPOTaskRunner)


if __name__ == "__main__":
    main()
