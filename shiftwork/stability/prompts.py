"""Prompt sets of the stability study: the prompt table of a registered data set, each row checked, sampled."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from shiftwork.data import DatasetError, get_field, read_source

PROMPT_COLUMNS = ["dataset", "prompt_id", "row", "prompt", "answer"]


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
    n = int(spec["n"])
    if n > len(table):
        origin = spec["source"].get("path") or spec["source"].get("id")
        raise DatasetError(
            f"dataset '{name}': n = {n} but {origin} has {len(table)} prompts; "
            f"set datasets.{name}.n to at most {len(table)}"
        )
    return sample(table, n, int(spec["seed"]))
