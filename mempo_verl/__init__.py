"""MemPO and GRPO on verl, for multi-GPU and multi-node training (docs/verl.md).

Needs its own environment (``bash scripts/install_verl.sh``): verl 0.9.1 pins transformers < 5.11 and
its vLLM extra pins vllm 0.24.0, while the project's engine extras pin vllm 0.32.0.
- ``mempo_verl.agent_loop``: MemSearchQA-v0 as a verl agent loop, one row per turn (memory view).
- ``mempo_verl.trainer``: ``trainer.v1.trainer_mode=mempo``, verl's sync trainer + the memory advantage.
- ``mempo_verl.data``: the episode parquets (``python -m mempo_verl.data``).
- ``mempo_verl.main``: the entry point (``python -m mempo_verl.main``).
"""
