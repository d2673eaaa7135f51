"""One device per GPU job (shiftwork/gpu_claim.py), without GPUs: device ids come from
SHIFTWORK_GPU_IDS, and what is tested is which job holds which lock."""

import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
import types
from pathlib import Path

import pytest

from shiftwork import gpu_claim
from shiftwork.gpu_claim import Claim, GpuClaimError, claim_gpu, device_pool, lock_path, parse_nvidia_smi
from shiftwork.provenance import make_provenance
from shiftwork.tables import read_provenance

ROOT = Path(__file__).resolve().parent.parent


def clean_env(**extra) -> dict:
    """An environment with none of the variables the claim reads, plus ``extra``."""
    drop = ("CUDA_", "SLURM_", "SHIFTWORK_GPU")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env.update(extra)
    return env


def test_parse_nvidia_smi():
    assert parse_nvidia_smi("0\n1\n\n2\n") == ["0", "1", "2"]
    assert parse_nvidia_smi("No devices were found\n") == []


def test_pool_precedence(monkeypatch):
    monkeypatch.setattr(gpu_claim, "nvidia_smi_devices", lambda: ["0", "1"])
    assert device_pool(clean_env()) == (["0", "1"], "nvidia-smi")
    assert device_pool(clean_env(CUDA_VISIBLE_DEVICES="2,3")) == (["2", "3"], "cuda")
    assert device_pool(clean_env(CUDA_VISIBLE_DEVICES="2,3", SHIFTWORK_GPU_IDS="5")) == (["5"], "env")
    assert device_pool(clean_env(SHIFTWORK_GPU_IDS="")) == ([], "env")
    # a SLURM job that was given no GPU must not pick up the node's devices
    assert device_pool(clean_env(SLURM_JOB_ID="7")) == ([], "slurm")


def test_two_claims_get_different_devices_and_release_on_exit(tmp_path):
    env_a, env_b = clean_env(SHIFTWORK_GPU_IDS="3,5"), clean_env(SHIFTWORK_GPU_IDS="3,5")
    with claim_gpu(tmp_path, env=env_a) as a, claim_gpu(tmp_path, env=env_b) as b:
        assert (a.device, b.device) == ("3", "5")
        assert env_a["CUDA_VISIBLE_DEVICES"] == "3" and env_b["CUDA_VISIBLE_DEVICES"] == "5"
        assert env_a["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
        assert a.source == "lock" and Path(a.lock_path) == lock_path(tmp_path, a.host, "3")
        assert Path(a.lock_path).read_text() == f"{os.getpid()}\n"
        with (
            pytest.raises(GpuClaimError, match=r"no free GPU among \['3', '5'\]"),
            claim_gpu(tmp_path, timeout=0.3, poll=0.1, env=clean_env(SHIFTWORK_GPU_IDS="3,5")),
        ):
            pass
    # released, and the environment is as it was
    assert "CUDA_VISIBLE_DEVICES" not in env_a and "SHIFTWORK_GPU_SOURCE" not in env_a
    with claim_gpu(tmp_path, timeout=0, env=clean_env(SHIFTWORK_GPU_IDS="3,5")) as again:
        assert again.device == "3"


def test_waits_for_a_device_to_come_free(tmp_path):
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
            import time
            from shiftwork.gpu_claim import claim_gpu
            with claim_gpu({str(tmp_path)!r}):
                print("held", flush=True)
                time.sleep(1.5)
        """),
        ],
        env=clean_env(SHIFTWORK_GPU_IDS="0", PYTHONPATH=str(ROOT)),
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "held"
    start = time.monotonic()
    with claim_gpu(tmp_path, timeout=30, poll=0.1, env=clean_env(SHIFTWORK_GPU_IDS="0")) as claim:
        waited = time.monotonic() - start
    holder.wait(timeout=30)
    assert claim.device == "0" and 0.5 < waited < 20


def test_sigkilled_holder_frees_its_device(tmp_path):
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
            import time
            from shiftwork.gpu_claim import claim_gpu
            with claim_gpu({str(tmp_path)!r}) as c:
                print(c.device, flush=True)
                time.sleep(600)
        """),
        ],
        env=clean_env(SHIFTWORK_GPU_IDS="0,1", PYTHONPATH=str(ROOT)),
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "0"
    with pytest.raises(GpuClaimError), claim_gpu(tmp_path, timeout=0, env=clean_env(SHIFTWORK_GPU_IDS="0")):
        pass
    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=30)
    with claim_gpu(tmp_path, timeout=5, poll=0.1, env=clean_env(SHIFTWORK_GPU_IDS="0")) as claim:
        assert claim.device == "0"


def test_slurm_device_is_used_as_given(tmp_path):
    env = clean_env(SLURM_JOB_ID="42", CUDA_VISIBLE_DEVICES="1")
    with claim_gpu(tmp_path, env=env) as claim:
        assert claim == Claim("1", "slurm", claim.host, ("1",), None, "42")
        assert env["CUDA_VISIBLE_DEVICES"] == "1" and env["SHIFTWORK_GPU"] == "1"
        assert "CUDA_DEVICE_ORDER" not in env
    assert not list(tmp_path.iterdir())  # no lock: the scheduler made the device exclusive


def test_slurm_allocation_of_several_devices_is_shared_out(tmp_path):
    # e.g. `salloc --gpus=2` and then a local Snakemake run inside the allocation
    env_a = clean_env(SLURM_JOB_ID="42", CUDA_VISIBLE_DEVICES="4,6")
    env_b = dict(env_a)
    with claim_gpu(tmp_path, env=env_a) as a, claim_gpu(tmp_path, env=env_b) as b:
        assert {a.device, b.device} == {"4", "6"} and a.source == b.source == "lock"
        assert "CUDA_DEVICE_ORDER" not in env_a  # ids of CUDA_VISIBLE_DEVICES keep its own order
    assert env_a["CUDA_VISIBLE_DEVICES"] == "4,6"


def test_slurm_job_without_gpu_runs_on_cpu(tmp_path):
    env = clean_env(SLURM_JOB_ID="42")
    with claim_gpu(tmp_path, env=env) as claim:
        assert claim.device is None and claim.source == "none"
        assert env["CUDA_VISIBLE_DEVICES"] == ""
    assert "CUDA_VISIBLE_DEVICES" not in env


def test_no_gpu_means_cpu_and_no_claim(tmp_path, monkeypatch):
    monkeypatch.setattr(gpu_claim, "nvidia_smi_devices", lambda: [])
    env = clean_env()
    with claim_gpu(tmp_path, env=env) as claim:
        assert claim.device is None and claim.source == "none"
        assert "CUDA_VISIBLE_DEVICES" not in env  # nothing found, nothing hidden
    assert not list(tmp_path.iterdir())


def test_a_parent_claim_is_inherited(tmp_path):
    env = clean_env(SHIFTWORK_GPU_IDS="0,1")
    with claim_gpu(tmp_path, env=env) as parent:
        child_env = dict(env)
        with claim_gpu(tmp_path, timeout=0, env=child_env) as child:
            assert child.device == parent.device and child.source == "inherited"


def test_claim_goes_to_log_and_provenance(tmp_path, monkeypatch, caplog):
    for key in [k for k in os.environ if k.startswith(("SLURM_", "CUDA_"))]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("SHIFTWORK_GPU_IDS", "7")
    monkeypatch.setenv("SHIFTWORK_GPU_LOCK_DIR", str(tmp_path / "locks"))
    with caplog.at_level(logging.INFO, logger="shiftwork"), claim_gpu() as claim:
        prov = make_provenance("unit", {"a": 1})
    assert claim.lock_path.startswith(str(tmp_path / "locks"))
    assert prov["gpu"] == {
        "device": "7",
        "source": "lock",
        "host": claim.host,
        "cuda_visible_devices": "7",
        "slurm_job_id": None,
    }
    assert "gpu claim: device 7" in caplog.text and "CUDA_VISIBLE_DEVICES='7'" in caplog.text
    assert "gpu" not in make_provenance("unit", {"a": 1})


def test_refuses_to_pin_after_cuda_started(tmp_path, monkeypatch):
    fake = types.SimpleNamespace(cuda=types.SimpleNamespace(is_initialized=lambda: True))
    monkeypatch.setitem(sys.modules, "torch", fake)
    assert gpu_claim.cuda_started()
    with (
        pytest.raises(GpuClaimError, match="CUDA was started before the GPU claim"),
        claim_gpu(tmp_path, env=clean_env(SHIFTWORK_GPU_IDS="0")),
    ):
        pass
    # the refused claim left its device free
    with claim_gpu(tmp_path, timeout=0, env=clean_env(SHIFTWORK_GPU_IDS="0", CUDA_VISIBLE_DEVICES="0")) as claim:
        assert claim.device == "0"  # CUDA_VISIBLE_DEVICES already says so: nothing to change, no refusal
    # a device SLURM set before the process started is in force anyway
    with claim_gpu(tmp_path, env=clean_env(SLURM_JOB_ID="42", CUDA_VISIBLE_DEVICES="1")) as claim:
        assert claim.device == "1"


def test_cuda_untouched_in_a_fresh_process():
    code = "from shiftwork import gpu_claim; import torch; print(gpu_claim.cuda_started())"
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=clean_env(PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    assert out.strip() == "False"


# --- four GPU jobs at once under Snakemake -------------------------------------------------

JOB_SCRIPT = """
import json, os, sys, time
from pathlib import Path

sys.path.insert(0, snakemake.params.root)
import pandas as pd
from shiftwork.gpu_claim import claim_gpu
from shiftwork.logs import log_to
from shiftwork.provenance import make_provenance
from shiftwork.tables import write_table

claims = Path("claims")
with log_to(snakemake.log[0]), claim_gpu() as claim:
    claims.mkdir(exist_ok=True)
    mine = {"job": snakemake.wildcards.name, "device": claim.device, "pid": os.getpid(),
            "cuda": os.environ.get("CUDA_VISIBLE_DEVICES")}
    (claims / f"{snakemake.wildcards.name}.json").write_text(json.dumps(mine))
    # all four hold their device at the same time, until the test lets them go
    deadline = time.time() + 120
    while time.time() < deadline and not Path("release").exists():
        time.sleep(0.1)
    write_table(pd.DataFrame({"job": [mine["job"]]}), snakemake.output[0], make_provenance("unit"))
"""

SNAKEFILE = """
rule all:
    input: expand("out/{name}.parquet", name=["a", "b", "c", "d"])

rule gpu_job:
    output: "out/{name}.parquet"
    log: "logs/{name}.log"
    resources: gpu=1
    params: root=ROOT
    script: "job.py"
"""


def start_workflow(work: Path, ids: str) -> subprocess.Popen:
    (work / "Snakefile").write_text(f"ROOT = {str(ROOT)!r}\n" + SNAKEFILE)
    (work / "job.py").write_text(JOB_SCRIPT)
    env = clean_env(SHIFTWORK_GPU_IDS=ids, PYTHONPATH=str(ROOT))
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "--cores",
        "4",
        "--resources",
        "gpu=4",
        "--directory",
        str(work),
        "--snakefile",
        str(work / "Snakefile"),
    ]
    return subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )


def wait_for_claims(work: Path, n: int, proc: subprocess.Popen) -> dict[str, dict]:
    deadline = time.time() + 120
    while time.time() < deadline:
        files = list((work / "claims").glob("*.json")) if (work / "claims").exists() else []
        if len(files) == n:
            time.sleep(0.2)  # let the last writer finish
            return {f.stem: json.loads(f.read_text()) for f in files}
        assert proc.poll() is None, proc.stdout.read()[-3000:]
        time.sleep(0.1)
    raise AssertionError(f"only {len(files)} of {n} jobs claimed a device")


@pytest.mark.workflow
def test_four_concurrent_snakemake_jobs_get_four_devices(tmp_path):
    proc = start_workflow(tmp_path, "0,1,2,3")
    try:
        claims = wait_for_claims(tmp_path, 4, proc)
        assert sorted(c["device"] for c in claims.values()) == ["0", "1", "2", "3"]
        assert all(c["cuda"] == c["device"] for c in claims.values())
    finally:
        (tmp_path / "release").touch()
        out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out[-3000:]
    for name, c in claims.items():
        assert read_provenance(tmp_path / "out" / f"{name}.parquet")["gpu"]["device"] == c["device"]
        assert f"gpu claim: device {c['device']} " in (tmp_path / "logs" / f"{name}.log").read_text()


@pytest.mark.workflow
def test_sigkilled_snakemake_job_frees_its_device(tmp_path):
    proc = start_workflow(tmp_path, "0,1,2,3")
    try:
        claims = wait_for_claims(tmp_path, 4, proc)
        victim = claims["c"]
        os.kill(victim["pid"], signal.SIGKILL)
        # the other three still hold theirs: the only free device is the victim's
        env = clean_env(SHIFTWORK_GPU_IDS="0,1,2,3")
        with claim_gpu(tmp_path / ".snakemake" / "gpu-locks", timeout=10, poll=0.1, env=env) as claim:
            assert claim.device == victim["device"]
    finally:
        (tmp_path / "release").touch()
        out, _ = proc.communicate(timeout=120)
    assert proc.returncode != 0 and "Error in rule gpu_job" in out
    assert sorted(p.stem for p in (tmp_path / "out").glob("*.parquet")) == ["a", "b", "d"]
    # and once the run is over, all four are free again
    envs = [clean_env(SHIFTWORK_GPU_IDS="0,1,2,3") for _ in range(4)]
    locks = tmp_path / ".snakemake" / "gpu-locks"
    with (
        claim_gpu(locks, timeout=0, env=envs[0]) as a,
        claim_gpu(locks, timeout=0, env=envs[1]) as b,
        claim_gpu(locks, timeout=0, env=envs[2]) as c,
        claim_gpu(locks, timeout=0, env=envs[3]) as d,
    ):
        assert sorted(x.device for x in (a, b, c, d)) == ["0", "1", "2", "3"]
