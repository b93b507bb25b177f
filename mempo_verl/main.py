"""MemPO (or GRPO) on verl: ``python -m mempo_verl.main [hydra overrides]``.

verl's own entry point (``verl.trainer.main_ppo``) with two differences: the config starts from
``mempo_verl/config/mempo_trainer.yaml``, and the trainer runs in a ``TaskRunnerV1`` that imports
``mempo_verl.trainer`` first. verl's registries are per process and ``TaskRunnerV1`` is a Ray actor,
so ``trainer.v1.trainer_mode=mempo`` must be registered there, not only in the driver. The agent
loop needs no such step: verl's workers import it by its ``_target_`` path.
"""

from __future__ import annotations

from pathlib import Path

import hydra
import ray
from omegaconf import DictConfig, open_dict
from verl.trainer.main_ppo import TaskRunnerV1, run_ppo
from verl.trainer.ppo.utils import need_critic, need_reference_policy
from verl.utils.config import validate_config
from verl.utils.device import auto_set_device

AGENT_LOOPS = Path(__file__).parent / "config" / "agent_loops.yaml"


@ray.remote
class MemPOTaskRunner(TaskRunnerV1.__ray_actor_class__):
    def run(self, config: DictConfig) -> None:
        import mempo_verl.trainer  # noqa: F401  (registers trainer_mode=mempo in this actor's process)

        return super().run(config)


@hydra.main(config_path="config", config_name="mempo_trainer", version_base=None)
def main(config: DictConfig) -> None:
    with open_dict(config):
        agent = config.actor_rollout_ref.rollout.agent
        agent.agent_loop_config_path = agent.agent_loop_config_path or str(AGENT_LOOPS)
    auto_set_device(config)
    validate_config(config=config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))
    run_ppo(config, task_runner_class=MemPOTaskRunner)


if __name__ == "__main__":
    main()
