"""One GPU per job: claim a free device before CUDA starts and hold it until the process ends.

Snakemake's ``--resources gpu=N`` caps how many ``gpu=1`` jobs run at once but hands out no
device ids, so every job would otherwise land on device 0. A job calls :func:`claim_gpu`
before anything touches CUDA; it takes an exclusive ``flock`` on one lock file per device and
sets ``CUDA_VISIBLE_DEVICES`` to that device. The kernel drops the lock when the process
exits, however it exits (SIGKILL and out-of-memory kills included), so no stale claim is left.

Where the devices come from, first match wins:

- ``SHIFTWORK_GPU_IDS``: comma-separated ids ("" = no GPU); tests, or restricting a run by hand;
- ``CUDA_VISIBLE_DEVICES`` when it is already set: a SLURM job given one device uses it as is
  (the scheduler made it exclusive); a list of several is shared out by lock, as on a workstation;
- ``nvidia-smi --query-gpu=index`` (no torch import, so CUDA stays uninitialised);
- none of these: the job runs on the CPU and claims nothing.

A SLURM job that was given no GPU runs on the CPU rather than take a device it was not allocated.
The claim is recorded in environment variables that :mod:`shiftwork.provenance` copies into
every table the job writes.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path

from shiftwork.logs import LOGGER

ENV_IDS = "SHIFTWORK_GPU_IDS"
ENV_LOCK_DIR = "SHIFTWORK_GPU_LOCK_DIR"
ENV_WAIT = "SHIFTWORK_GPU_WAIT_S"
ENV_DEVICE = "SHIFTWORK_GPU"
ENV_SOURCE = "SHIFTWORK_GPU_SOURCE"
DEFAULT_LOCK_DIR = ".snakemake/gpu-locks"


class GpuClaimError(RuntimeError):
    """No device came free in time, or CUDA was started before the claim could pin one."""


@dataclass(frozen=True)
class Claim:
    """Where a job computes. ``device`` is the physical id (as nvidia-smi or the scheduler
    names it) or None for the CPU; inside the job the device is always ``cuda:0``."""

    device: str | None
    source: str  # "lock", "slurm", "inherited" or "none"
    host: str
    pool: tuple[str, ...] = ()
    lock_path: str | None = None
    slurm_job_id: str | None = None

    def describe(self) -> str:
        where = f"device {self.device}" if self.device is not None else "the CPU (no GPU claimed)"
        text = f"gpu claim: {where} on {self.host} via {self.source}"
        if self.pool:
            text += f" (pool {','.join(self.pool)})"
        if self.lock_path:
            text += f", lock {self.lock_path}"
        if self.slurm_job_id:
            text += f", SLURM job {self.slurm_job_id}"
        return text


def _ids(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def parse_nvidia_smi(text: str) -> list[str]:
    """Device indices from ``nvidia-smi --query-gpu=index --format=csv,noheader`` output."""
    return [line.strip() for line in text.splitlines() if line.strip().isdigit()]


def nvidia_smi_devices() -> list[str]:
    """The indices nvidia-smi lists; [] when it is missing or fails (no driver, no GPU)."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return parse_nvidia_smi(out)


def device_pool(env: Mapping[str, str] = os.environ) -> tuple[list[str], str]:
    """(device ids to choose from, where they came from: "env", "cuda", "nvidia-smi" or "slurm")."""
    if ENV_IDS in env:
        return _ids(env[ENV_IDS]), "env"
    if "CUDA_VISIBLE_DEVICES" in env:
        return _ids(env["CUDA_VISIBLE_DEVICES"]), "cuda"
    if env.get("SLURM_JOB_ID"):
        # the scheduler sets CUDA_VISIBLE_DEVICES for every GPU it allocates; none means none
        return [], "slurm"
    return nvidia_smi_devices(), "nvidia-smi"


def lock_path(lock_dir: str | os.PathLike, host: str, device: str) -> Path:
    """One lock file per (host, device): a lock directory on a shared file system serves all nodes."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in device)
    return Path(lock_dir) / f"{host}-gpu{safe}.lock"


def try_lock(path: Path) -> int | None:
    """An open descriptor holding an exclusive flock on ``path``, or None if another process holds it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    except PermissionError:  # another user's lock file: a read-only descriptor locks as well
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    with contextlib.suppress(OSError):  # for people looking at the lock directory: who holds it
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def lock_one(
    pool: list[str],
    lock_dir: str | os.PathLike,
    host: str,
    timeout: float | None = None,
    poll: float = 0.5,
) -> tuple[str, Path, int]:
    """Lock the first free device of ``pool``; wait while all are busy (at most ``timeout`` s)."""
    start = time.monotonic()
    said = None
    while True:
        for device in pool:
            path = lock_path(lock_dir, host, device)
            fd = try_lock(path)
            if fd is not None:
                return device, path, fd
        waited = time.monotonic() - start
        if timeout is not None and waited >= timeout:
            raise GpuClaimError(
                f"no free GPU among {pool} on {host} after {waited:.0f} s (locks in {lock_dir}); "
                f"more gpu jobs run than there are devices, or another run holds them"
            )
        if said is None or time.monotonic() - said >= 60:
            LOGGER.info("gpu claim: all of %s busy on %s, waiting", pool, host)
            said = time.monotonic()
        time.sleep(poll)


def cuda_started() -> bool:
    """Whether this process has touched CUDA already, after which a new CUDA_VISIBLE_DEVICES
    is ignored: torch initialised it, or something loaded the driver library (a call to
    ``torch.cuda.is_available()`` at import time is enough)."""
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            if torch.cuda.is_initialized():
                return True
        except Exception:  # a torch build without CUDA support
            pass
    try:
        return "libcuda.so" in Path("/proc/self/maps").read_text()
    except OSError:
        return False


def short_hostname() -> str:
    return socket.gethostname().split(".")[0]


def current_claim(env: Mapping[str, str] = os.environ) -> dict[str, str | None] | None:
    """The claim this process runs under, for provenance; None outside a GPU job."""
    if ENV_SOURCE not in env:
        return None
    return {
        "device": env.get(ENV_DEVICE) or None,
        "source": env[ENV_SOURCE],
        "host": short_hostname(),
        "cuda_visible_devices": env.get("CUDA_VISIBLE_DEVICES"),
        "slurm_job_id": env.get("SLURM_JOB_ID"),
    }


def _decide(
    env: Mapping[str, str], lock_dir: str | os.PathLike, host: str, timeout: float | None, poll: float
) -> tuple[Claim, int | None]:
    slurm_job = env.get("SLURM_JOB_ID") or None
    if env.get(ENV_SOURCE):  # a parent process of this job claimed already
        return Claim(env.get(ENV_DEVICE) or None, "inherited", host, slurm_job_id=slurm_job), None
    pool, origin = device_pool(env)
    if not pool:
        return Claim(None, "none", host, slurm_job_id=slurm_job), None
    if origin == "cuda" and slurm_job and len(pool) == 1:
        return Claim(pool[0], "slurm", host, tuple(pool), slurm_job_id=slurm_job), None
    device, path, fd = lock_one(pool, lock_dir, host, timeout=timeout, poll=poll)
    return Claim(device, "lock", host, tuple(pool), str(path), slurm_job), fd


#: the environment variables a claim sets, restored when it ends
CLAIM_KEYS = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", ENV_DEVICE, ENV_SOURCE)


@contextlib.contextmanager
def claim_gpu(
    lock_dir: str | os.PathLike | None = None,
    timeout: float | None = None,
    poll: float = 0.5,
    env: MutableMapping[str, str] | None = None,
) -> Iterator[Claim]:
    """Claim one device for the enclosed block (a GPU job's whole script).

    Sets ``CUDA_VISIBLE_DEVICES`` (to "" when the job runs on the CPU because no device was
    found or allocated), logs the claim, and marks it for provenance; on exit releases the
    lock and restores the environment. ``lock_dir`` defaults to ``$SHIFTWORK_GPU_LOCK_DIR`` or
    ``.snakemake/gpu-locks`` in the working directory; ``timeout`` (default
    ``$SHIFTWORK_GPU_WAIT_S``, else no limit) bounds the wait for a free device."""
    env = os.environ if env is None else env
    lock_dir = lock_dir or env.get(ENV_LOCK_DIR) or DEFAULT_LOCK_DIR
    if timeout is None and env.get(ENV_WAIT):
        timeout = float(env[ENV_WAIT])
    claim, fd = _decide(env, lock_dir, short_hostname(), timeout, poll)
    saved = {k: env.get(k) for k in CLAIM_KEYS}
    visible = _visible_devices(claim, env, saved["CUDA_VISIBLE_DEVICES"])
    if visible != saved["CUDA_VISIBLE_DEVICES"] and cuda_started():
        if fd is not None:
            os.close(fd)
        raise GpuClaimError(
            "CUDA was started before the GPU claim, so CUDA_VISIBLE_DEVICES would be ignored; "
            "claim before anything imports or calls CUDA"
        )
    try:
        if claim.source != "inherited":
            _mark(env, claim, visible, saved["CUDA_VISIBLE_DEVICES"])
        LOGGER.info("%s; CUDA_VISIBLE_DEVICES=%r", claim.describe(), env.get("CUDA_VISIBLE_DEVICES"))
        yield claim
    finally:
        if fd is not None:
            os.close(fd)  # releases the flock
        _restore(env, saved)


def _visible_devices(claim: Claim, env: Mapping[str, str], current: str | None) -> str | None:
    """What ``CUDA_VISIBLE_DEVICES`` becomes under ``claim`` (``current``: its value now): the
    claimed device; "" for a job given no GPU (hide any there are); else unchanged."""
    if claim.source == "inherited":
        return current
    if claim.device is not None:
        return claim.device
    if ENV_IDS in env or claim.slurm_job_id:
        return ""
    return current


def _mark(env: MutableMapping[str, str], claim: Claim, visible: str | None, before: str | None) -> None:
    """Set the claim's devices in ``env`` and record the claim for provenance (``before``: the
    ``CUDA_VISIBLE_DEVICES`` the job started with)."""
    if visible is not None:
        env["CUDA_VISIBLE_DEVICES"] = visible
    if claim.source == "lock" and before is None:
        # nvidia-smi numbers devices in PCI bus order; make CUDA use the same order
        env.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    env[ENV_DEVICE] = claim.device or ""
    env[ENV_SOURCE] = claim.source


def _restore(env: MutableMapping[str, str], saved: Mapping[str, str | None]) -> None:
    """Put back the variables ``saved`` before the claim (removing those that were not set)."""
    for key, value in saved.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
