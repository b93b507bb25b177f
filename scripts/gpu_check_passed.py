"""The pass condition of the GPU checks (scripts/gpu_check.sh, scripts/gpu_check_smollm2.sh): the learner's
log says it computed on CUDA, and its metrics record every step with the memory reward.
    python scripts/gpu_check_passed.py OUT_DIR STEPS      # OUT_DIR holds mempo.log and mempo/metrics.jsonl
"""

import json
import sys
from pathlib import Path

ON_CUDA = "compute: fp32, cuda"  # the start of the line algorithms.mempo prints on a GPU

out, steps = Path(sys.argv[1]), int(sys.argv[2])
if ON_CUDA not in (out / "mempo.log").read_text():
    sys.exit("FAIL: the learner did not compute on the GPU")
lines = [json.loads(x) for x in (out / "mempo" / "metrics.jsonl").read_text().splitlines()]
assert [m["step"] for m in lines] == list(range(1, steps + 1)), [m["step"] for m in lines]
assert all("p_mem" in m for m in lines), "no memory reward logged"
for m in lines:
    print(f"step {m['step']}: reward {m['reward']:.2f}, p_mem {m['p_mem']:.3f}, step {m['step_s']:.1f} s")
