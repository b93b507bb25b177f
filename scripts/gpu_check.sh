#!/usr/bin/env bash
# The GPU check of the single-machine learner (issue 34, item 5): the 3.8M policy's warm-up built on
# the GPU (the recipe of docs/experiments/warm-up.md: 192 wide, 6 layers, lr 1e-3, 2,500 steps), then
# a few MemPO steps from it on CUDA: policy, reference, rollouts, memory reward, update and held-out
# evaluation on the GPU, fp32. Not run by CI, which has no GPU; tests/test_gpu_check.py reads its two
# commands from here and validates them with the programs' own parsers.
#   bash scripts/gpu_check.sh [OUT_DIR]      # on a machine whose torch sees a CUDA GPU
# It passes when the run reaches its last step with the memory reward logged; the logs and the
# run's metrics are in OUT_DIR (default runs/gpu-check).
set -euo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-python}"
out="${1:-runs/gpu-check}"
steps=3
mkdir -p "$out"
"$python" -c "import torch; assert torch.cuda.is_available(), 'torch sees no CUDA GPU'; print(torch.cuda.get_device_name())"
"$python" -m algorithms.sft --hidden 192 --layers 6 --lr 1e-3 --steps 2500 --cache-dir "$out/cache" \
    2> "$out/sft.log" | tee "$out/sft.out"
policy="$(tail -n 1 "$out/sft.out")"
"$python" -m algorithms.mempo --policy "$policy" --device cuda --steps "$steps" --eval-episodes 8 \
    --run-dir "$out/mempo" 2>&1 | tee "$out/mempo.log"
"$python" scripts/gpu_check_passed.py "$out" "$steps"
echo "PASS: $steps MemPO steps of the 3.8M policy on CUDA; logs in $out"
