"""GRPO baseline: ``python -m algorithms.grpo`` is ``algorithms.mempo`` with the memory term off."""

from algorithms.mempo import main

if __name__ == "__main__":
    main(algo="grpo")
