"""The dataset registry: load a prompt set from a local file or a hub id, check it, sample it."""

from __future__ import annotations

import codecs
import io
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

PROMPT_COLUMNS = ["dataset", "prompt_id", "row", "prompt", "answer"]


class DatasetError(ValueError):
    """A prompt set cannot be read, or one of its rows is unusable."""


def _decode(name: str, path: Path) -> str:
    """The text of a UTF-8 file, with or without a byte-order mark; a byte that is not UTF-8
    is reported with its line."""
    data = path.read_bytes()
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8) :]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        column = err.start - (data.rfind(b"\n", 0, err.start) + 1) + 1
        raise DatasetError(
            f"dataset '{name}': {path} line {line}, byte {column}: 0x{data[err.start]:02x} is not UTF-8; "
            "save the file as UTF-8"
        ) from None


def _read_file(name: str, source: Mapping[str, Any], root: Path) -> tuple[pd.DataFrame, list[str]]:
    """The rows of a file source, and where each one is in the file (for error messages)."""
    path = Path(source["path"])
    if not path.is_absolute():
        path = root / path
    fmt = source.get("format") or path.suffix.lstrip(".").lower()
    if not path.exists():
        raise DatasetError(f"dataset '{name}': file {path} does not exist")
    if fmt == "jsonl":
        rows, where = [], []
        for lineno, line in enumerate(_decode(name, path).split("\n"), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise DatasetError(f"dataset '{name}': {path} line {lineno} is not JSON ({err.msg})") from None
            if not isinstance(row, dict):
                raise DatasetError(
                    f"dataset '{name}': {path} line {lineno} is not a JSON object (got {type(row).__name__})"
                )
            rows.append(row)
            where.append(f"{path} line {lineno}")
        return pd.DataFrame(rows), where
    if fmt == "csv":
        try:
            df = pd.read_csv(io.StringIO(_decode(name, path)), dtype=object, keep_default_na=False)
        except (pd.errors.ParserError, pd.errors.EmptyDataError) as err:
            raise DatasetError(f"dataset '{name}': {path} is not a readable CSV file ({err})") from None
        return df, [f"{path} data row {i}" for i in range(1, len(df) + 1)]
    if fmt == "parquet":
        try:
            df = pd.read_parquet(path)
        except (OSError, ValueError) as err:
            raise DatasetError(f"dataset '{name}': {path} is not a readable Parquet file ({err})") from None
        return df, [f"{path} row {i}" for i in range(1, len(df) + 1)]
    raise DatasetError(
        f"dataset '{name}': cannot tell the format of {path}; set source.format to jsonl, csv or parquet"
    )


def _read_hub(name: str, source: Mapping[str, Any]) -> pd.DataFrame:
    try:
        import datasets as hf_datasets
    except ImportError as err:
        raise DatasetError(f"dataset '{name}': hub datasets need the 'datasets' package") from err
    try:
        ds = hf_datasets.load_dataset(source["id"], source.get("config"), split=source.get("split", "train"))
    except Exception as err:  # the hub client raises many types for "unreachable"
        raise DatasetError(
            f"dataset '{name}': hub dataset '{source['id']}' could not be loaded ({type(err).__name__}: {err}). "
            f"Where the hub is unreachable, export it to a jsonl/csv/parquet file and set "
            f"datasets.{name}.source to {{kind: file, path: FILE}}"
        ) from err
    return ds.to_pandas()


def read_source(name: str, spec: Mapping[str, Any], root: str | Path = ".") -> tuple[pd.DataFrame, list[str]]:
    """The source's rows, and where each one is (file and line, or hub id and row)."""
    source = spec["source"]
    if source["kind"] == "file":
        return _read_file(name, source, Path(root))
    if source["kind"] == "hub":
        raw = _read_hub(name, source)
        return raw, [f"hub {source['id']} row {i}" for i in range(1, len(raw) + 1)]
    raise DatasetError(f"dataset '{name}': unknown source kind {source['kind']!r}")


def _field(value: Any, dotted: str) -> Any:
    for part in dotted.split(".")[1:]:
        if isinstance(value, Mapping):
            value = value.get(part)
        else:
            return None
    return value


def get_field(df: pd.DataFrame, name: str, dotted: str) -> pd.Series:
    head = dotted.split(".")[0]
    if head not in df.columns:
        raise DatasetError(f"dataset '{name}': field '{head}' not found; columns are {list(df.columns)}")
    col = df[head]
    if "." in dotted:
        col = col.map(lambda v: _field(v, dotted))
    return col


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and np.isnan(value))


def extract(
    name: str, raw: pd.DataFrame, fields: Mapping[str, str], where: Sequence[str] | None = None
) -> pd.DataFrame:
    """Map a source's columns to the prompt table and reject unusable rows.

    Row numbers in errors count data rows from 1; ``where`` (one entry per row) adds the file
    and line each row came from."""
    if raw.empty:
        raise DatasetError(f"dataset '{name}': no rows")

    def bad(i: int, field: str, what: str) -> DatasetError:
        at = f" ({where[i - 1]})" if where is not None else ""
        return DatasetError(f"dataset '{name}', row {i}{at}: {field} field '{fields[field]}' {what}")

    prompts = get_field(raw, name, fields["prompt"])
    for i, value in enumerate(prompts, start=1):
        if _missing(value):
            raise bad(i, "prompt", "is missing")
        if not isinstance(value, str):
            raise bad(i, "prompt", f"must be a string, got {type(value).__name__}")
        if not value.strip():
            raise bad(i, "prompt", "is empty")
    if "id" in fields:
        raw_ids = get_field(raw, name, fields["id"])
        for i, value in enumerate(raw_ids, start=1):
            if _missing(value) or (isinstance(value, str) and not value.strip()):
                raise bad(i, "id", "is missing")
            if not isinstance(value, (str, int, np.integer)) or isinstance(value, bool):
                raise bad(i, "id", f"must be a string or an integer, got {type(value).__name__}")
        ids = raw_ids.astype(str)
    else:
        ids = pd.Series([f"{name}-{i:05d}" for i in range(1, len(raw) + 1)])
    dup = ids[ids.duplicated()]
    if len(dup):
        raise DatasetError(f"dataset '{name}': duplicate ids {sorted(set(dup))[:5]} in field '{fields.get('id')}'")
    answers = get_field(raw, name, fields["answer"]) if "answer" in fields else pd.Series([None] * len(raw))
    return pd.DataFrame(
        {
            "dataset": name,
            "prompt_id": ids.to_numpy(),
            "row": np.arange(1, len(raw) + 1),
            "prompt": prompts.str.strip().to_numpy(),
            "answer": [None if a is None else json.dumps(a) if not isinstance(a, str) else a for a in answers],
        }
    )


def sample(df: pd.DataFrame, n: int, seed: int) -> pd.DataFrame:
    """``n`` rows drawn without replacement by ``seed``, kept in source order; all rows if fewer."""
    if n >= len(df):
        return df.reset_index(drop=True)
    rng = np.random.default_rng(seed)
    keep = np.sort(rng.choice(len(df), size=n, replace=False))
    return df.iloc[keep].reset_index(drop=True)


def read_prompts(name: str, spec: Mapping[str, Any], root: str | Path = ".") -> pd.DataFrame:
    """Every row of a prompt set as the prompt table, each row checked."""
    raw, where = read_source(name, spec, root)
    return extract(name, raw, spec["fields"], where)


def load_prompts(name: str, spec: Mapping[str, Any], root: str | Path = ".") -> pd.DataFrame:
    """Read, check and sample a prompt set. A sample size ``n`` larger than the set is an error
    (a silently smaller sample would change every statistic downstream)."""
    table = read_prompts(name, spec, root)
    n = int(spec.get("n", 16))
    if n > len(table):
        origin = spec["source"].get("path") or spec["source"].get("id")
        raise DatasetError(
            f"dataset '{name}': n = {n} but {origin} has {len(table)} prompts; "
            f"set datasets.{name}.n to at most {len(table)}"
        )
    return sample(table, n, int(spec.get("seed", 0)))
