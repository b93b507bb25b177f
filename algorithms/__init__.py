"""Learners: supervised warm-up, GRPO and MemPO (GRPO + memory-level advantage) with PPO-clip."""
