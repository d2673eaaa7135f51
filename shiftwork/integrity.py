"""Checks a run makes before it plans any job: damaged outputs, and locks left by a killed run.

Snakemake decides what to rerun from file times and its own records, so a table that was
truncated (a full disk, a copy cut short, a file edited by hand) looks finished to it. The
workflow therefore reads the footer of every table and the header of every prepared model's
weights under ``results/`` when it starts (a few milliseconds a file) and stops, naming each
damaged file, the rule that writes it and the command that rebuilds it, before any job runs.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from shiftwork.models.prepare import INFO_FILE, weights_problem
from shiftwork.tables import rebuild_commands, table_problem

CACHE_DIR = "cache"  # results/cache/: a damaged cache entry is a miss, not an error


class DamagedOutputError(RuntimeError):
    """Outputs of earlier jobs are damaged; the message says which and how to rebuild them."""


@dataclass(frozen=True)
class Damage:
    path: Path  # what to delete to rebuild it
    record: Path  # the rule output it belongs to
    problem: str


def _hidden(path: Path, root: Path) -> bool:
    return any(part.startswith(".") for part in path.relative_to(root).parts)


def damaged_outputs(results: str | os.PathLike = "results", tables: str | os.PathLike | None = None) -> list[Damage]:
    """Every shiftwork table under ``tables`` (default: all of ``results``) whose footer or
    provenance is damaged, and every prepared model under ``results`` whose weight files do not
    have the recorded sizes or complete headers. Temporary files of running or killed writers
    (hidden names) and caches are left out."""
    root = Path(results)
    if not root.is_dir():
        return []
    found = []
    table_root = Path(tables) if tables is not None else root
    for path in sorted(table_root.rglob("*.parquet")):
        if _hidden(path, table_root) or path.relative_to(root).parts[0] == CACHE_DIR:
            continue
        if problem := table_problem(path):
            found.append(Damage(path, path, problem))
    for record in sorted(root.glob(f"models/*/*/{INFO_FILE}")):
        if not _hidden(record, root) and (problem := weights_problem(record.parent)):
            found.append(Damage(record.parent, record, problem))
    return found


def damage_report(found: list[Damage], producer: Callable[[str], str | None]) -> str:
    """The message for damaged outputs; ``producer`` names the rule that writes a path."""
    lines = [f"{len(found)} output(s) of earlier jobs are damaged, so nothing was run:"]
    for d in found:
        rule = producer(str(d.record))
        written = f" (written by rule '{rule}')" if rule else ""
        lines.append(f"  - {d.path}{written}: {d.problem}")
    lines.append(rebuild_commands([d.path for d in found], [d.record for d in found]))
    return "\n".join(lines)


def check_outputs(
    results: str | os.PathLike, producer: Callable[[str], str | None], tables: str | os.PathLike | None = None
) -> None:
    """Raise :class:`DamagedOutputError` if a prepared model under ``results`` or a table under
    ``tables`` (default: all of ``results``) is damaged."""
    if found := damaged_outputs(results, tables):
        raise DamagedOutputError(damage_report(found, producer))


_HELD: list[TextIO] = []  # the run guard stays open (and locked) for the life of the process


def clear_stale_locks(workdir: str | os.PathLike = ".") -> list[Path]:
    """Remove the locks a killed Snakemake left in ``workdir``, if no other run is alive there.

    Every main Snakemake process of this workflow holds an exclusive ``flock`` on
    ``.snakemake/shiftwork-run.lock`` from the moment it reads the Snakefile, before it takes
    Snakemake's own locks, until it exits. The kernel drops a flock when its process dies,
    however it dies. So a process that gets the flock knows that no other run of this workflow
    is alive in ``workdir``, and any lock files Snakemake finds there are stale. A process
    that does not get it leaves everything alone, and Snakemake's own check applies."""
    meta = Path(workdir) / ".snakemake"
    meta.mkdir(parents=True, exist_ok=True)
    guard = open(meta / "shiftwork-run.lock", "a")  # noqa: SIM115 (held open for the process's life)
    try:
        fcntl.flock(guard, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        guard.close()
        return []
    _HELD.append(guard)
    stale = sorted((meta / "locks").glob("*.lock"))
    for path in stale:
        path.unlink(missing_ok=True)
    return stale
