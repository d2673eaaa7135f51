"""Registered data sets (config: datasets and the trajectory study's labelled sets): read a
file (JSONL, CSV, Parquet) or a hub data set, each row located for error messages."""

from __future__ import annotations

import codecs
import io
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd


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
        ds = hf_datasets.load_dataset(
            source["id"], source.get("config"), split=source.get("split", "train"), revision=source.get("revision")
        )
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
