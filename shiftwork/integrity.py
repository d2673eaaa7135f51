"""Checks a run makes before it plans any job: damaged outputs, locks left by a killed run, and
jobs that run left alive.

Snakemake decides what to rerun from file times and its own records, so a table that was
truncated (a full disk, a copy cut short, a file edited by hand) looks finished to it. The
workflow therefore reads every table (its footer, and its bytes against the sha256 recorded
beside it) and the header of every prepared model's weights under ``results/`` when it starts
(a time in proportion to the tables' size) and stops, naming each damaged file, the rule that writes it and
the command that rebuilds it, before any job runs.
For the same reason it warns of an intermediate table that is gone while a table built from
it is there: Snakemake does not rebuild it while the tables after it are up to date.
"""

from __future__ import annotations

import json
import os
from base64 import urlsafe_b64encode
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from shiftwork.models.prepare import INFO_FILE, weights_problem
from shiftwork.tables import rebuild_commands, snakemake_command, table_problem
from shiftwork.writers import JobRunningError, live_jobs, lock_for_life, orphan_report

CACHE_DIR = "cache"  # results/cache/: a damaged cache entry is a miss, not an error
#: Snakemake's records of the jobs that wrote each output (its default, file-based persistence)
METADATA_DIR = Path(".snakemake") / "metadata"


class DamagedOutputError(RuntimeError):
    """Outputs of earlier jobs are damaged; the message says which and how to rebuild them."""


@dataclass(frozen=True)
class Damage:
    path: Path  # what to delete to rebuild it
    record: Path  # the rule output it belongs to
    problem: str


def _hidden(path: Path, root: Path) -> bool:
    return any(part.startswith(".") for part in path.relative_to(root).parts)


def output_tables(results: str | os.PathLike = "results", tables: str | os.PathLike | None = None) -> list[Path]:
    """Every table of a job under ``tables`` (default: all of ``results``): temporary files of
    running or killed writers (hidden names) and caches left out."""
    root = Path(results)
    table_root = Path(tables) if tables is not None else root
    if not table_root.is_dir():
        return []
    return [
        path
        for path in sorted(table_root.rglob("*.parquet"))
        if not _hidden(path, table_root) and path.relative_to(root).parts[0] != CACHE_DIR
    ]


def damaged_outputs(results: str | os.PathLike = "results", tables: str | os.PathLike | None = None) -> list[Damage]:
    """Every shiftwork table under ``tables`` (default: all of ``results``) whose footer or
    provenance is damaged or whose bytes differ from its recorded sha256, and every prepared
    model under ``results`` whose weight files do not have the recorded sizes or complete
    headers. Hidden files (temporaries of running or killed writers, sha256 sidecars) and caches
    are left out."""
    root = Path(results)
    if not root.is_dir():
        return []
    found = []
    for path in output_tables(results, tables):
        if problem := table_problem(path):
            found.append(Damage(path, path, problem))
    for record in sorted(root.glob(f"models/*/*/{INFO_FILE}")):
        if not _hidden(record, root) and (problem := weights_problem(record.parent)):
            found.append(Damage(record.parent, record, problem))
    return found


def damage_report(
    found: list[Damage], producer: Callable[[str], str | None], configfiles: Iterable[str | os.PathLike] | None = None
) -> str:
    """The message for damaged outputs; ``producer`` names the rule that writes a path, and the
    rebuild command names the run's ``configfiles``."""
    lines = [f"{len(found)} output(s) of earlier jobs are damaged, so nothing was run:"]
    for d in found:
        rule = producer(str(d.record))
        written = f" (written by rule '{rule}')" if rule else ""
        lines.append(f"  - {d.path}{written}: {d.problem}")
    lines.append(rebuild_commands([d.path for d in found], [d.record for d in found], configfiles))
    return "\n".join(lines)


def check_outputs(
    results: str | os.PathLike,
    producer: Callable[[str], str | None],
    tables: str | os.PathLike | None = None,
    configfiles: Iterable[str | os.PathLike] | None = None,
) -> None:
    """Raise :class:`DamagedOutputError` if a prepared model under ``results`` or a table under
    ``tables`` (default: all of ``results``) is damaged; its rebuild command names ``configfiles``."""
    if found := damaged_outputs(results, tables):
        raise DamagedOutputError(damage_report(found, producer, configfiles))


def job_record(output: str | os.PathLike, metadata: str | os.PathLike = METADATA_DIR) -> dict:
    """Snakemake's record of the job that wrote ``output``: one JSON file per output under
    ``metadata``, named by the URL-safe base64 of its path, cut into parts of at most NAME_MAX - 1
    characters, each part but the last starting with '@'. Empty when there is none (another
    persistence backend, a file Snakemake did not write) or it cannot be read."""
    meta = Path(metadata)
    if not meta.is_dir():
        return {}
    limit = (os.pathconf(meta, "PC_NAME_MAX") or 255) - 1
    code = urlsafe_b64encode(str(output).encode()).decode()
    parts = [code[i : i + limit] for i in range(0, len(code), limit)]
    try:
        record = json.loads(meta.joinpath(*["@" + part for part in parts[:-1]], parts[-1]).read_text())
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def missing_intermediates(
    tables: str | os.PathLike, producer: Callable[[str], str | None], metadata: str | os.PathLike = METADATA_DIR
) -> dict[str, list[str]]:
    """The tables under ``tables`` that a table there was built from (as Snakemake recorded its
    job) and that are gone, where a rule of the workflow writes them (``producer``): {missing
    table: the tables built from it}."""
    root = Path(tables)
    found: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*.parquet")) if root.is_dir() else []:
        if _hidden(path, root):
            continue
        for source in job_record(path, metadata).get("input") or []:
            if (
                isinstance(source, str)
                and source.endswith(".parquet")
                and Path(source).is_relative_to(root)
                and not Path(source).exists()
                and producer(source)
            ):
                found.setdefault(source, []).append(str(path))
    return found


def missing_intermediate_warnings(
    tables: str | os.PathLike,
    producer: Callable[[str], str | None],
    configfiles: Iterable[str | os.PathLike] | None = None,
    metadata: str | os.PathLike = METADATA_DIR,
) -> list[str]:
    """One warning per missing intermediate table (:func:`missing_intermediates`), naming it, a
    table built from it, and the command that builds it again with the run's ``configfiles``."""
    warnings = []
    for missing, built in missing_intermediates(tables, producer, metadata).items():
        more = f" (and {len(built) - 1} more)" if len(built) > 1 else ""
        warnings.append(
            f"intermediate table {missing} is missing, but {built[0]}{more}, built from it, is there; "
            "Snakemake does not rebuild a missing intermediate table while the tables built from it are "
            "up to date, so a plain run leaves it missing. To build it again, name it as a target, "
            f"then run as before: {snakemake_command([missing], configfiles)}"
        )
    return warnings


def take_run_guard(workdir: str | os.PathLike = ".") -> bool:
    """Whether this process holds the run guard of ``workdir``, taking it if it can.

    Every main Snakemake process of this workflow holds an exclusive ``flock`` on
    ``.snakemake/shiftwork-run.lock`` from the moment it reads the Snakefile, before it takes
    Snakemake's own locks, until it exits (:func:`shiftwork.writers.lock_for_life`). The kernel
    drops a flock when its process dies, however it dies. So a process that gets the flock
    knows that no other run of this workflow is alive in ``workdir``."""
    return lock_for_life(Path(workdir) / ".snakemake" / "shiftwork-run.lock") is not None


def clear_stale_locks(workdir: str | os.PathLike = ".") -> list[Path]:
    """Remove the locks a killed Snakemake left in ``workdir``, if no other run is alive there
    (:func:`take_run_guard`): any lock files Snakemake finds there are then stale. A process
    that does not get the guard leaves everything alone, and Snakemake's own check applies."""
    if not take_run_guard(workdir):
        return []
    stale = sorted((Path(workdir) / ".snakemake" / "locks").glob("*.lock"))
    for path in stale:
        path.unlink(missing_ok=True)
    return stale


def refuse_orphaned_jobs(logs: str | os.PathLike = "logs", workdir: str | os.PathLike = ".") -> None:
    """Raise :class:`shiftwork.writers.JobRunningError` if a job under the log folder ``logs`` is
    still alive while no run of this workflow is (:func:`take_run_guard`): an orphan of a run
    whose main process was killed. Another live run's jobs are that run's business."""
    if take_run_guard(workdir) and (jobs := list(live_jobs(Path(workdir) / logs))):
        raise JobRunningError(orphan_report(jobs))
