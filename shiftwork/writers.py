"""One writer per job: a job holds a lock for its whole life, and a run refuses to start while
a job of an earlier run is still alive.

Killing only the main Snakemake process (the OOM killer, a scheduler, ``kill -9``) leaves its
jobs running, reparented to PID 1. The next run would find its own locks stale (the run that
took them is gone), plan the same jobs again and start a second copy beside the orphan; the
orphan, still on the old settings, may then write its outputs after the new run has finished.
So every job takes an exclusive ``flock`` on a hidden file beside its log (``.NAME.log.lock``,
holding its PID) before it opens the log, and keeps it until it exits: the kernel drops the
lock when the process dies, however it dies. A run that finds such a lock held, at a moment
when no other run of the workflow is alive in the directory, has found an orphan: it stops,
naming the orphan's PID and log, before it plans any job.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

_HELD: dict[Path, TextIO] = {}  # every lock taken for life stays open (and locked) until the process ends


def lock_for_life(path: Path) -> TextIO | None:
    """Take an exclusive ``flock`` on ``path`` for the rest of this process's life (the kernel
    drops it when the process dies, however it dies) and return its open file; None when
    another process holds it. A lock this process holds already is returned as it is."""
    key = path.resolve()
    if key in _HELD:
        return _HELD[key]
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = open(path, "a+")  # noqa: SIM115 (held open for the process's life)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        return None
    _HELD[key] = handle
    return handle


class JobRunningError(RuntimeError):
    """A job, or the run about to start, would write outputs another live process is writing."""


@dataclass(frozen=True)
class LiveJob:
    pid: int | None
    host: str | None
    log: str


def job_lock_path(log: str | os.PathLike) -> Path:
    """The lock file of the job that writes ``log``: a hidden sibling of the log."""
    log = Path(log)
    return log.with_name(f".{log.name}.lock")


def _holder(handle: TextIO, log: str | os.PathLike) -> LiveJob:
    handle.seek(0)
    try:
        record = json.loads(handle.read() or "{}")
    except ValueError:
        record = {}
    return LiveJob(record.get("pid"), record.get("host"), str(log))


def hold_job(log: str | os.PathLike) -> None:
    """Take the lock of the job that writes ``log`` for the life of this process
    (:func:`lock_for_life`; again without error in a process that holds it, e.g. a step that
    logs twice); raise :class:`JobRunningError`, naming the holder, if another live process has it."""
    path = job_lock_path(log)
    held = path.resolve() in _HELD
    handle = lock_for_life(path)
    if handle is None:
        with open(path) as other:
            holder = _holder(other, log)
        raise JobRunningError(
            f"this job (log {log}) is already running as PID {holder.pid} on {holder.host}; "
            "a second copy would write the same outputs, so this one stops"
        )
    if not held:
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()}))
        handle.flush()


def live_jobs(logs: str | os.PathLike) -> Iterator[LiveJob]:
    """The jobs under the log folder ``logs`` whose process is alive (their lock is held)."""
    root = Path(logs)
    for path in sorted(root.rglob(".*.log.lock")) if root.is_dir() else []:
        with open(path) as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                yield _holder(handle, path.with_name(path.name[1 : -len(".lock")]))
            else:
                fcntl.flock(handle, fcntl.LOCK_UN)


def orphan_report(jobs: list[LiveJob]) -> str:
    """The message for jobs still alive from a run whose Snakemake process is gone."""
    lines = [
        f"{len(jobs)} job(s) of an earlier run are still running, although no Snakemake run of this "
        "workflow is alive here (its main process was killed); a new run would start a second copy "
        "of each, writing the same outputs, so nothing was run:"
    ]
    lines += [f"  - PID {j.pid} on {j.host}, log {j.log}" for j in jobs]
    pids = " ".join(str(j.pid) for j in jobs)
    lines.append(
        f"Wait for them to finish, or stop them with `kill {pids}`; then run the same command "
        "again, which reruns the jobs that run left unfinished."
    )
    return "\n".join(lines)
