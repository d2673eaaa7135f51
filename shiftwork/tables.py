"""Parquet tables: atomic writes with provenance metadata, and checked reads.

Every table is written with page checksums. A read checks the file before trusting it: the
footer (a truncated file has none), the provenance key every shiftwork table carries, the
columns the caller needs, and each page against its checksum. A table that fails any of
these raises :class:`TableError` naming the file and how to rebuild it; a cache that fails
them is a cache miss (:func:`read_cache`).

The footer itself has no checksum, so each table also gets the sha256 of its bytes, recorded
when it is written in a hidden sidecar beside it (:func:`sidecar_path`), and every check
compares the two. A table without a sidecar (written by an older shiftwork, or copied without
its hidden files) is read as before, unchecked by sha256."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from shiftwork.logs import LOGGER

PROVENANCE_KEY = b"shiftwork.provenance"


class TableError(ValueError):
    """A table is missing, unreadable or lacks expected columns."""


#: the environment variable through which a run hands its config files (``--configfile``) to
#: its jobs, so that a job's message about a damaged table gives a command that works
CONFIGFILES_ENV = "SHIFTWORK_CONFIGFILES"


def hand_configfiles_to_jobs(configfiles: Iterable[str | os.PathLike]) -> None:
    """Record the run's config files in :data:`CONFIGFILES_ENV`, which its jobs inherit."""
    os.environ[CONFIGFILES_ENV] = json.dumps([str(f) for f in configfiles])


def run_configfiles() -> list[str]:
    """The config files of the run this process belongs to (:func:`hand_configfiles_to_jobs`);
    none outside a run, for a run of the default config, or when the variable is not a list."""
    try:
        files = json.loads(os.environ.get(CONFIGFILES_ENV) or "[]")
    except ValueError:
        return []
    return [str(f) for f in files] if isinstance(files, list) else []


def snakemake_command(
    targets: Iterable[str | os.PathLike], configfiles: Iterable[str | os.PathLike] | None = None
) -> str:
    """The command that builds ``targets`` with the run's config (``configfiles``; default
    :func:`run_configfiles`). The targets come first: ``--configfile`` takes every word after it
    as one more config file."""
    files = run_configfiles() if configfiles is None else [str(f) for f in configfiles]
    names = " ".join(f"'{t}'" for t in targets)
    config = " --configfile " + " ".join(f"'{f}'" for f in files) if files else ""
    return f"snakemake --cores N {names}{config}"


def rebuild_commands(
    delete: Iterable[str | os.PathLike],
    targets: Iterable[str | os.PathLike],
    configfiles: Iterable[str | os.PathLike] | None = None,
) -> str:
    """How to rebuild damaged outputs: delete them, then name them (a model: its record) as
    targets, with the run's config files (:func:`snakemake_command`). A plain run would not do:
    Snakemake does not rebuild a missing intermediate table whose results are up to date."""
    paths = " ".join(f"'{p}'" for p in delete)
    return (
        "Delete them and name them as targets, so that Snakemake builds them again (a plain run "
        "does not rebuild an intermediate table whose results are up to date); then run as before, "
        "which reruns whatever they changed:\n"
        f"  rm -r {paths}\n"
        f"  {snakemake_command(targets, configfiles)}"
    )


def sidecar_path(path: str | os.PathLike) -> Path:
    """Where the sha256 of table ``path`` is recorded: ``.<name>.sha256`` in its folder. Hidden,
    so neither Snakemake nor the damage check takes it for an output, and its name does not end
    in ``.tmp``, so no cleanup of stale temporaries (:func:`atomic_path`) removes it."""
    target = Path(path)
    return target.with_name(f".{target.name}.sha256")


def file_sha256(path: str | os.PathLike) -> str:
    """The hex sha256 of the bytes of ``path``."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def recorded_sha256(path: str | os.PathLike) -> str | None:
    """The sha256 recorded for table ``path`` when it was written; None when it has no sidecar."""
    try:
        text = sidecar_path(path).read_bytes().decode("ascii", errors="replace")
    except FileNotFoundError:
        return None
    return (text.split() or [""])[0]


def sha256_problem(path: str | os.PathLike) -> str | None:
    """Why the bytes of table ``path`` are not those recorded when it was written, or None when
    they are, or when it has no sidecar (a table from before the sidecars is read unchecked)."""
    try:
        recorded = recorded_sha256(path)
    except OSError as err:
        return f"its recorded sha256 {sidecar_path(path).name} cannot be read ({err})"
    if recorded is None:
        return None
    now = file_sha256(path)
    if now == recorded:
        return None
    # 12 hex digits tell two digests apart, unless the sidecar itself lost a bit further on
    shown = 12 if recorded[:12] != now[:12] else 64
    return (
        f"its bytes differ from the sha256 recorded in {sidecar_path(path).name} when it was written "
        f"({recorded[:shown]} recorded, {now[:shown]} now): changed or damaged since"
    )


def table_problem(path: str | os.PathLike) -> str | None:
    """Why ``path`` is not a complete shiftwork table, or None if its footer and provenance are
    intact and its bytes have the sha256 recorded beside it (:func:`sha256_problem`). Reads the
    footer, and the whole file once for its sha256, so a run can check every table before it
    starts."""
    try:
        meta = pq.read_metadata(path)
    except (OSError, pa.ArrowException) as err:
        return f"not a complete Parquet file ({err})"
    if PROVENANCE_KEY not in (meta.metadata or {}):
        return "no shiftwork provenance in its metadata (not written by this workflow, or damaged)"
    return sha256_problem(path)


def _with_metadata(table: pa.Table, provenance: Mapping[str, Any] | None) -> pa.Table:
    meta = dict(table.schema.metadata or {})
    meta[PROVENANCE_KEY] = json.dumps(dict(provenance or {}), sort_keys=True, default=str).encode()
    return table.replace_schema_metadata(meta)


def atomic_path(path: str | os.PathLike) -> tuple[Path, Path]:
    """A temporary sibling of ``path`` (same directory, so the final rename is atomic)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    # a writer killed earlier (SIGKILL, node failure) may have left its temporary file;
    # each target has one writer at a time, so those leftovers can go
    for stale in target.parent.glob(f".{target.name}.*.tmp"):
        stale.unlink(missing_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    os.chmod(tmp, 0o644)  # mkstemp makes 0600; outputs are ordinary readable files
    return target, Path(tmp)


def _commit_table(tmp: Path, target: Path) -> None:
    """Record the sha256 of the finished table ``tmp`` beside ``target``, then rename it there."""
    # The sidecar is renamed first. A crash between the two renames leaves the new digest beside
    # the old table, which reads as a mismatch (damage), or beside no table (a missing output,
    # which Snakemake builds). The other order could leave the new table with no sidecar (the
    # first write, or an old one without), which would read unchecked.
    write_text(f"{file_sha256(tmp)}  {target.name}\n", sidecar_path(target))
    os.replace(tmp, target)


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary sibling of ``path`` to write; on success it is renamed onto ``path``,
    on failure removed, leaving ``path`` untouched."""
    target, tmp = atomic_path(path)
    try:
        yield tmp
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()


def write_table(df: pd.DataFrame, path: str | os.PathLike, provenance: Mapping[str, Any] | None = None) -> Path:
    """Write ``df`` to ``path`` as Parquet: first to a temporary file, then rename over the target,
    so a reader never sees a half-written table; its sha256 goes to :func:`sidecar_path`."""
    table = pa.Table.from_pandas(df.reset_index(drop=True), preserve_index=False)
    table = _with_metadata(table, provenance)
    target, tmp = atomic_path(path)
    try:
        pq.write_table(table, tmp, write_page_checksum=True)
        _commit_table(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()
    return target


class TableWriter:
    """Stream batches of rows into one Parquet file, committed atomically on :meth:`close`.

    Use as a context manager; if the block raises, the temporary file is removed and the
    target is left untouched.
    """

    def __init__(self, path: str | os.PathLike, provenance: Mapping[str, Any] | None = None):
        self.target, self.tmp = atomic_path(path)
        self.provenance = provenance
        self._writer: pq.ParquetWriter | None = None
        self._schema: pa.Schema | None = None

    def write(self, df: pd.DataFrame) -> None:
        table = pa.Table.from_pandas(df.reset_index(drop=True), preserve_index=False)
        if self._writer is None:
            table = _with_metadata(table, self.provenance)
            self._schema = table.schema
            self._writer = pq.ParquetWriter(self.tmp, self._schema, write_page_checksum=True)
        else:
            table = table.cast(self._schema)
        self._writer.write_table(table)

    def close(self, empty: pd.DataFrame | None = None) -> Path:
        if self._writer is None:
            write_table(empty if empty is not None else pd.DataFrame(), self.target, self.provenance)
            self.tmp.unlink(missing_ok=True)
            return self.target
        self._writer.close()
        try:
            _commit_table(self.tmp, self.target)
        finally:
            self.tmp.unlink(missing_ok=True)
        return self.target

    def abort(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self.tmp.unlink(missing_ok=True)

    def __enter__(self) -> TableWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


def read_table(path: str | os.PathLike, columns: Iterable[str] | None = None) -> pd.DataFrame:
    """Read a shiftwork table, checking footer, provenance, sha256 (where recorded) and page
    checksums; with ``columns``, fail naming the file and the missing columns."""
    path = Path(path)
    if not path.exists():
        raise TableError(f"table {path} does not exist")
    problem = table_problem(path)
    if problem is None:
        try:
            df = pd.read_parquet(path, page_checksum_verification=True)
        except (OSError, pa.ArrowException) as err:
            problem = f"its data is damaged ({err})"
    if problem is not None:
        raise TableError(f"table {path} is unreadable: {problem}. {rebuild_commands([path], [path])}")
    if columns is not None:
        missing = [c for c in columns if c not in df.columns]
        if missing:
            raise TableError(f"table {path} lacks columns {missing}; it has {list(df.columns)}")
    return df


def read_cache(path: str | os.PathLike, columns: Iterable[str] = ()) -> pd.DataFrame | None:
    """A cache table, or None when there is none or it cannot be used (damaged, or lacking
    ``columns``): a bad cache entry costs a recomputation, never a failed job."""
    if not Path(path).exists():
        return None
    try:
        return read_table(path, list(columns) or None)
    except TableError as err:
        LOGGER.warning("ignoring cache %s, which will be rebuilt: %s", path, err)
        return None


def read_provenance(path: str | os.PathLike) -> dict[str, Any]:
    meta = pq.read_schema(path).metadata or {}
    raw = meta.get(PROVENANCE_KEY)
    return json.loads(raw) if raw else {}


def write_text(text: str, path: str | os.PathLike) -> Path:
    """Write a text file atomically (temporary sibling, then rename)."""
    with atomic_file(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)
