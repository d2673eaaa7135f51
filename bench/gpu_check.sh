#!/usr/bin/env bash
# The GPU paths on a CUDA machine, in under 10 minutes:
#
#   bench/gpu_check.sh
#
# Needs the project's environment with the CUDA builds: `make setup` installs them where
# nvidia-smi lists a GPU (requirements-cuda.lock; `make setup GPU=cuda` to force it)
# (README: Run on a GPU workstation). Two steps:
#   1. the generate job (vLLM on CUDA, then the probe pass) against the one-variant-at-a-time
#      loop, float32, 4 prompts (64 variant evaluations): the share of identical responses and
#      the probe differences (bench/throughput.py; exit status 1 when they differ);
#   2. bench/gpu_check.py: vLLM generation and the probe pass in bfloat16 at the shapes of
#      Qwen2.5-1.5B and Qwen2.5-7B: tokens/s, decode roofline share, probe pairs/s.
# Results: results/bench/gpu_equality.json and results/bench/gpu_check.json.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false

"$PY" -c 'import sys, torch, vllm; torch.cuda.is_available() or sys.exit("gpu_check: torch sees no CUDA device"); print("gpu_check:", torch.cuda.get_device_name(0), "torch", torch.__version__, "vllm", vllm.__version__)'
"$PY" -m snakemake --cores 4 "$("$PY" -m shiftwork.models.prepare smollm2-135m-instruct)"

echo "gpu_check: 1/2 the generate job against the plain loop, float32"
"$PY" bench/throughput.py --dtype float32 --prompts 4 --runs 1 --threads 4 \
    --work results/bench/work_gpu_equality --out results/bench/gpu_equality.json

echo "gpu_check: 2/2 vLLM and the probe pass at paper-model sizes, bfloat16"
"$PY" bench/gpu_check.py "$@"
