#!/usr/bin/env bash
# The GPU paths on a CUDA machine, in under 10 minutes:
#
#   bench/gpu_check.sh [options of bench/gpu_check.py]
#
# Needs the project's environment with the CUDA builds (requirements-cuda.lock): `make setup`
# on a machine with an NVIDIA GPU (or `make setup GPU=cuda`). No network is needed: the models
# are built here with random weights. It runs:
#   - the generate job (vLLM on CUDA, then the probe pass) against the one-variant-at-a-time
#     loop, float32, 4 prompts (64 variant evaluations): the share of identical responses and
#     the probe differences (bench/throughput.py; a failure when they differ);
#   - bench/gpu_check.py, the five GPU paths on models of real shapes with random weights, each
#     printing a `gpu_check: k/5` line with its figures:
#       1. vLLM generation in bfloat16 at the shapes of Qwen2.5-1.5B and Qwen2.5-7B: tokens/s and
#          the share of the decode roofline (achieved bytes/s over the device's memory bandwidth);
#       2. the probe pass on the same prompts and responses: pairs/s;
#       3. a LoRA fine-tuning run of the trajectory study (q_proj and v_proj, bf16) at the
#          Qwen2.5-1.5B shape: steps/s and tokens/s;
#       4. GRPO of the organisms study (TRL) at the Qwen2.5-0.5B shape: steps/s, tokens/s;
#       5. the GPU claim of two jobs: different devices on a machine with two or more; on one,
#          the second job is refused while the first holds it, and gets it once it is free.
# Meant to take under 10 minutes on one H200, most of it model builds and vLLM start-ups
# (bench/gpu_check.py --device cpu --tiny runs the same parts on a CPU in under a minute).
# Results: results/bench/gpu_equality.json and results/bench/gpu_check.json; the exit status
# is 1 when any step or part failed (the others still run).
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false

"$PY" -c 'import sys, torch, vllm; torch.cuda.is_available() or sys.exit("gpu_check: torch sees no CUDA device"); print("gpu_check:", torch.cuda.get_device_name(0), "torch", torch.__version__, "vllm", vllm.__version__)' || exit 1
"$PY" -m snakemake --cores 4 "$("$PY" -m shiftwork.models.prepare smollm2-135m-instruct)" || exit 1

failed=0
echo "gpu_check: the generate job against the plain loop, float32"
"$PY" bench/throughput.py --dtype float32 --prompts 4 --runs 1 --threads 4 \
    --work results/bench/work_gpu_equality --out results/bench/gpu_equality.json ||
    { echo "gpu_check: FAILED the generate job against the plain loop"; failed=1; }

echo "gpu_check: the five GPU paths at paper-model shapes"
"$PY" bench/gpu_check.py "$@" || failed=1
exit "$failed"
