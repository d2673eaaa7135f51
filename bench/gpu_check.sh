#!/usr/bin/env bash
# The throughput benchmark (bench/throughput.py) on a CUDA machine, in a few minutes.
#
#   bench/gpu_check.sh [extra bench/throughput.py arguments]
#
# Needs the project's environment with a CUDA build of torch (`make setup`, then the CUDA wheel
# of the pinned torch version) and the prepared model (made here if missing). Two passes:
#   1. float32 on 4 prompts (64 variant evaluations): (a) and (b) must agree token for token and
#      within 1e-3 (exit status 1 otherwise);
#   2. the speed run in the dtype a GPU job uses (auto: bfloat16), batch sizes grown to the GPU's
#      memory by shiftwork.inference.batching, 14 prompts (224 variant evaluations) once, and the
#      1x/2x/4x scaling. bfloat16 rounding depends on the batch, so this pass reports differences
#      between (a) and (b) without failing on them.
# Results: results/bench/gpu_equality.json and results/bench/throughput_gpu.json.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false

"$PY" - <<'PYEOF'
import sys
import torch
if not torch.cuda.is_available():
    sys.exit("gpu_check: torch sees no CUDA device (torch %s)" % torch.__version__)
print("gpu_check:", torch.cuda.get_device_name(0), "torch", torch.__version__, "CUDA", torch.version.cuda)
try:
    import flash_attn  # noqa: F401
    print("gpu_check: flash_attn", flash_attn.__version__, "installed")
except ImportError:
    print("gpu_check: flash_attn not installed; attention runs through sdpa")
PYEOF

"$PY" -m snakemake --cores 4 "$("$PY" -m shiftwork.models.prepare smollm2-135m-instruct)"

echo "gpu_check: 1/2 equality in float32"
"$PY" bench/throughput.py --dtype float32 --prompts 4 --runs 1 --scales --threads 4 \
    --work results/bench/work_gpu_equality --out results/bench/gpu_equality.json "$@"

echo "gpu_check: 2/2 speed in the GPU job's dtype"
"$PY" bench/throughput.py --runs 1 --prompts 14 --scales 1 2 4 --threads 4 --no-expect-equal \
    --work results/bench/work_gpu --out results/bench/throughput_gpu.json "$@"
