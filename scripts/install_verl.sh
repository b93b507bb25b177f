#!/usr/bin/env bash
# Creates the verl environment for mempo_verl (default ./.venv-verl; another path in $1) and installs
# the project into it with the verl extra. It is separate from the main environment: verl 0.9.1
# needs transformers < 5.11 and its own vLLM pin (0.24.0), the project's engine extras vllm 0.32.0.
# On a machine with an NVIDIA GPU it adds verl's vLLM rollout engine (verl[vllm], CUDA torch 2.11);
# on a CPU machine it keeps the CPU torch build, enough for tests/on_verl (no rollout engine).
# Then: "$VENV"/bin/python -m pytest tests/on_verl   (or python -m mempo_verl.main ... on a GPU node)
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${1:-.venv-verl}"
[ -x "$venv/bin/python" ] || python -m venv "$venv"
pip=("$venv/bin/python" -m pip install -q)
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    "${pip[@]}" -e ".[train,dev,verl]" "verl[vllm]==0.9.1"
else
    "${pip[@]}" torch==2.13.0 -e ".[train,dev,verl]"
fi
"$venv/bin/python" -c "import verl, transfer_queue; print('verl', verl.__version__, 'in', '$venv')"
