"""Argument checks shared by the package, with messages that name what is wrong."""

from __future__ import annotations

import numbers
from collections.abc import Iterable
from typing import Any

import pandas as pd


def require_columns(df: Any, columns: Iterable[str], what: str, error: type[ValueError] = ValueError) -> None:
    """Raise ``error`` unless ``df`` is a DataFrame holding every one of ``columns``."""
    if not isinstance(df, pd.DataFrame):
        raise error(f"{what}: expected a pandas DataFrame, got {type(df).__name__}")
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise error(f"{what}: missing column(s) {missing}; the table has {list(df.columns)}")


def non_negative_int(name: str, value: object) -> int:
    """``value`` as an int; a ValueError naming ``name`` if it is not a non-negative integer."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    return int(value)
