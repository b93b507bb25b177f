"""Adapters of MemSearchQA-v0 to other stacks, each on top of what it wraps: the OpenEnv server
(``openenv_server``, the ``openenv`` extra), TRL's environment (``trl_env``, the ``trl`` extra) and the
Hugging Face ``datasets`` export of prompts and trajectories (``datasets_export``, the ``datasets`` extra).
The verl recipe (``mempo_verl``) and the verifiers taskset (``memsearchqa``) are packages of their own."""
