"""The primary partial correlation of a pairs table, ID residuals per checkpoint, raw vs primary.

The study's primary result is the partial correlation chosen by config
``trajectory.analysis.method`` (``linear``: pingouin's partial correlation; ``gam``: the
correlation of the residuals of a penalised GAM control). A pairs table
(:func:`shiftwork.trajectory.analysis.pair_table`) that carries ``r_primary`` and
``p_primary_holm`` gives them directly; one that predates the method choice has only the
linear ``r_partial`` and ``p_partial_holm``, which are then the primary columns (the linear
method). :func:`primary_columns` is the one place that choice is made.
"""

from __future__ import annotations

from collections.abc import Hashable

import pandas as pd

from shiftwork.checks import require_columns
from shiftwork.trajectory.analysis import AnalysisError, residualise, wide

__all__ = ["RAW_VS_PRIMARY_COLUMNS", "pair_label", "primary_columns", "raw_vs_primary", "residual_table"]

RAW_VS_PRIMARY_COLUMNS: tuple[str, ...] = (
    "model",
    "run",
    "ood_a",
    "ood_b",
    "n",
    "r_raw",
    "r_primary",
    "shift",
    "p_primary_holm",
    "sign",
    "reason",
)
"""Columns of :func:`raw_vs_primary`, in order."""


def primary_columns(pairs: pd.DataFrame) -> tuple[str, str]:
    """The names of the primary r and its Holm-adjusted p-value in ``pairs``:
    ``("r_primary", "p_primary_holm")`` when ``pairs`` has ``r_primary``, else
    ``("r_partial", "p_partial_holm")``. Raises :class:`AnalysisError` when the chosen pair of
    columns is not both there."""
    names = ("r_primary", "p_primary_holm") if "r_primary" in pairs.columns else ("r_partial", "p_partial_holm")
    require_columns(pairs, names, "pairs table", AnalysisError)
    return names


def residual_table(scores: pd.DataFrame, run: Hashable, method: str = "linear") -> pd.DataFrame:
    """The steps x OOD-sets table of one run's OOD accuracies with the ID effect removed:
    each OOD column is replaced by :func:`~shiftwork.trajectory.analysis.residualise` of it on
    the ID column with ``kind=method``. Index ``step`` (increasing), columns the OOD sets in
    sorted order; ``attrs`` as :func:`~shiftwork.trajectory.analysis.wide` (``model``, ``run``,
    ``id``, ``ood``) plus ``method``. Raises :class:`AnalysisError` as ``wide`` does."""
    table = wide(scores, run)
    x = table[table.attrs["id"]].to_numpy(dtype=float)
    out = pd.DataFrame(
        {c: residualise(table[c].to_numpy(dtype=float), x, kind=method) for c in table.attrs["ood"]},
        index=table.index,
    )
    out.columns.name = "testset"
    out.attrs = {**table.attrs, "method": method}
    return out


def raw_vs_primary(pairs: pd.DataFrame) -> pd.DataFrame:
    """Per run and OOD pair: the raw correlation ``r_raw`` next to the primary partial
    correlation ``r_primary`` (see :func:`primary_columns`), ``shift = r_primary - r_raw`` (how
    much removing the ID effect moves the pair), ``p_primary_holm``, ``sign`` and ``reason`` (why
    ``r_primary`` is undefined, ``""`` when it was computed; ``""`` for a pairs table without the
    column). A pair whose ``r_primary`` (or ``r_raw``) is NaN keeps its row with a NaN ``shift``.
    Columns :data:`RAW_VS_PRIMARY_COLUMNS`, rows in the order of ``pairs``."""
    r_col, p_col = primary_columns(pairs)
    require_columns(pairs, ["model", "run", "ood_a", "ood_b", "n", "r_raw", "sign"], "pairs table", AnalysisError)
    out = pairs[["model", "run", "ood_a", "ood_b", "n", "r_raw"]].copy()
    out["r_primary"] = pairs[r_col].to_numpy(dtype=float)
    out["shift"] = out["r_primary"] - out["r_raw"].to_numpy(dtype=float)
    out["p_primary_holm"] = pairs[p_col].to_numpy(dtype=float)
    out["sign"] = pairs["sign"].to_numpy()
    out["reason"] = pairs["reason"].fillna("").astype(str).to_numpy() if "reason" in pairs else ""
    return out.reset_index(drop=True)[list(RAW_VS_PRIMARY_COLUMNS)]


def pair_label(a: Hashable, b: Hashable) -> str:
    """``"a–b"``: how a pair of OOD sets is written in figures and the fingerprint."""
    return f"{a}\u2013{b}"
