"""The dataset registry: load a prompt set from a local file or a hub id, check it, sample it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd

PROMPT_COLUMNS = ["dataset", "prompt_id", "row", "prompt", "answer"]


class DatasetError(ValueError):
    """A prompt set cannot be read, or one of its rows is unusable."""


def _read_file(name: str, source: Mapping[str, Any], root: Path) -> pd.DataFrame:
    path = Path(source["path"])
    if not path.is_absolute():
        path = root / path
    fmt = source.get("format") or path.suffix.lstrip(".").lower()
    if not path.exists():
        raise DatasetError(f"dataset '{name}': file {path} does not exist")
    if fmt == "jsonl":
        rows = []
        with open(path, encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as err:
                    raise DatasetError(f"dataset '{name}': {path} line {lineno} is not JSON ({err.msg})") from err
        return pd.DataFrame(rows)
    if fmt == "csv":
        return pd.read_csv(path, dtype=object, keep_default_na=False)
    if fmt == "parquet":
        return pd.read_parquet(path)
    raise DatasetError(f"dataset '{name}': cannot tell the format of {path}; set source.format to jsonl, csv or parquet")


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


def read_source(name: str, spec: Mapping[str, Any], root: str | Path = ".") -> pd.DataFrame:
    source = spec["source"]
    if source["kind"] == "file":
        return _read_file(name, source, Path(root))
    if source["kind"] == "hub":
        return _read_hub(name, source)
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


def extract(name: str, raw: pd.DataFrame, fields: Mapping[str, str]) -> pd.DataFrame:
    """Map a source's columns to the prompt table and reject unusable rows.

    Row numbers in errors count data rows from 1 (the first line of a jsonl file is row 1)."""
    if raw.empty:
        raise DatasetError(f"dataset '{name}': no rows")
    prompts = get_field(raw, name, fields["prompt"])
    for i, value in enumerate(prompts, start=1):
        if value is None or (isinstance(value, float) and np.isnan(value)):
            raise DatasetError(f"dataset '{name}', row {i}: prompt field '{fields['prompt']}' is missing")
        if not isinstance(value, str):
            raise DatasetError(
                f"dataset '{name}', row {i}: prompt field '{fields['prompt']}' must be a string, got {type(value).__name__}"
            )
        if not value.strip():
            raise DatasetError(f"dataset '{name}', row {i}: prompt field '{fields['prompt']}' is empty")
    if "id" in fields:
        ids = get_field(raw, name, fields["id"]).astype(str)
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


def load_prompts(name: str, spec: Mapping[str, Any], root: str | Path = ".") -> pd.DataFrame:
    raw = read_source(name, spec, root)
    table = extract(name, raw, spec["fields"])
    return sample(table, int(spec.get("n", 16)), int(spec.get("seed", 0)))
