#!/usr/bin/env bash
# The GPU check of mempo_verl: a few MemPO steps of a small model through verl on one node (vLLM
# rollouts, FSDP actor, TransferQueue, trainer_mode=mempo). Not run by CI, which has no GPU; its two
# commands are read from here and checked by tests/on_verl/test_documented_commands.py.
#   bash scripts/install_verl.sh                    # once: the verl environment, with verl[vllm] on a GPU machine
#   bash scripts/verl_gpu_check.sh [MODEL_DIR] [N_GPUS]
# MODEL_DIR: a local HF causal LM (default: the project's shipped tiny warm-up, nothing to download);
# N_GPUS: default every GPU of the machine. It passes when training reaches its last step and the
# memory reward was logged (mempo/p_mem); the log is in $OUT/train.log (default runs/verl-check).
set -euo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-.venv-verl/bin/python}"
model="${1:-algorithms/warmup}"
gpus="${2:-$(nvidia-smi -L | wc -l)}"
out="${OUT:-runs/verl-check}"
steps=3
mkdir -p "$out"
"$python" -m mempo_verl.data --out "$out/data" --objectives 2 --train-episodes 64 --val-episodes 16
"$python" -m mempo_verl.main \
    actor_rollout_ref.model.path="$model" \
    data.train_files="$out/data/train.parquet" data.val_files="$out/data/val.parquet" \
    data.train_batch_size=8 data.max_prompt_length=2048 data.max_response_length=256 \
    actor_rollout_ref.rollout.n=4 \
    actor_rollout_ref.rollout.tensor_model_parallel_size=1 \
    actor_rollout_ref.rollout.gpu_memory_utilization=0.3 \
    actor_rollout_ref.actor.ppo_mini_batch_size=8 \
    mempo.env.max_turns=6 \
    trainer.n_gpus_per_node="$gpus" trainer.nnodes=1 \
    trainer.total_training_steps="$steps" trainer.val_before_train=false trainer.test_freq=-1 \
    trainer.save_freq=-1 trainer.default_local_dir="$out/checkpoints" \
    "${@:3}" 2>&1 | tee "$out/train.log"
grep -q "mempo/p_mem" "$out/train.log" || { echo "FAIL: no memory reward in $out/train.log"; exit 1; }
echo "PASS: $steps MemPO steps through verl; log in $out/train.log"
