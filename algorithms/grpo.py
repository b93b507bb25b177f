"""GRPO: ``python -m algorithms.mempo`` with the memory term off (outcome advantage only), the baseline
MemPO is measured against. Every option is ``algorithms.mempo.Config``'s."""

from algorithms.mempo import main

if __name__ == "__main__":
    main(algo="grpo", description=__doc__)
