"""Early vs late: does an OOD pair co-vary the same way early and late in fine-tuning?

Each run's checkpoints are split by step into two disjoint windows (:func:`split_steps`): the
early window holds the first ``n // 2`` checkpoints and the late window the rest, so with an
odd count the middle checkpoint goes to the late window (7 checkpoints: 3 early, 4 late).
Both windows must have at least :data:`~shiftwork.trajectory.analysis.MIN_CHECKPOINTS`
checkpoints, so a run needs at least ``2 * MIN_CHECKPOINTS`` (8).

:func:`window_table` runs :func:`~shiftwork.trajectory.analysis.pair_table` on each window on
its own (the ID control, the Holm family over the pairs of the run and the sign classes are
those of the window) and compares the two primary partial correlations of every pair with
:func:`fisher_z_difference`.

The difference test treats the two windows as independent samples. They share no
checkpoint, but checkpoints of one run are serially dependent, so its p-value is a guide,
not an exact test.

Degenerate windows
------------------
A test set that varies over the run can be constant within a window (a model that answers one
label for its first checkpoints scores 0 or 1 on a one-label set, and chance on a balanced ID
set), or the ID accuracy can sit on a few distinct values there. Such a window's primary
correlation is NaN with the sign ``"null"``, as ``pair_table`` gives for any degenerate series
(see the notes of :mod:`shiftwork.trajectory.analysis`), ``r_diff``, ``z_diff`` and ``p_diff``
are NaN, and ``reason`` names the window and the cause, e.g. ``"early: hans constant"``; it is
``""`` when both windows' correlations were computed. The other pairs of the run keep their
values.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sps

from shiftwork.checks import require_columns
from shiftwork.trajectory.analysis import (
    MIN_CHECKPOINTS,
    REQUIRED_COLUMNS,
    AnalysisError,
    pair_table,
    sorted_mixed,
)
from shiftwork.trajectory.primary import primary_columns

__all__ = ["WINDOW_COLUMNS", "fisher_z_difference", "split_steps", "window_table"]

WINDOW_COLUMNS: tuple[str, ...] = (
    "model",
    "run",
    "ood_a",
    "ood_b",
    "n_early",
    "n_late",
    "early_first_step",
    "early_last_step",
    "late_first_step",
    "late_last_step",
    "r_early",
    "p_early_holm",
    "r_late",
    "p_late_holm",
    "sign_early",
    "sign_late",
    "r_diff",
    "z_diff",
    "p_diff",
    "reason",
)
"""Columns of :func:`window_table`, in order."""


def split_steps(steps: Sequence[int]) -> tuple[list[int], list[int]]:
    """The early and late windows of a run's checkpoint ``steps``: sorted, the first
    ``n // 2`` early and the remaining ``n - n // 2`` late (an odd middle checkpoint goes to
    the late window). Duplicated steps count once."""
    ordered = sorted({int(s) for s in steps})
    half = len(ordered) // 2
    return ordered[:half], ordered[half:]


def fisher_z_difference(
    r_early: float, n_early: int, r_late: float, n_late: int, covariates: int = 1
) -> tuple[float, float]:
    """``(z, p)`` of the difference ``r_late - r_early`` of two correlations from independent
    samples (Fisher's z test).

    ``z = (atanh(r_late) - atanh(r_early)) / sqrt(1 / (n_late - 3 - k) + 1 / (n_early - 3 - k))``
    with ``k = covariates`` partialled out (a real number: a GAM spends its effective degrees of
    freedom) (the standard error of a partial correlation's z,
    as pingouin uses for its confidence interval), and the two-sided normal p-value
    ``p = 2 * (1 - Phi(|z|))``. NaN when either r is NaN or +-1, or either window has
    ``n - 3 - k <= 0`` (the standard error is undefined: four checkpoints and one
    covariate).
    """
    r1, r2 = float(r_early), float(r_late)
    dof1, dof2 = int(n_early) - 3 - float(covariates), int(n_late) - 3 - float(covariates)
    if not (math.isfinite(r1) and math.isfinite(r2)) or abs(r1) >= 1.0 or abs(r2) >= 1.0 or dof1 <= 0 or dof2 <= 0:
        return math.nan, math.nan
    z = (math.atanh(r2) - math.atanh(r1)) / math.sqrt(1.0 / dof1 + 1.0 / dof2)
    return z, float(2.0 * sps.norm.sf(abs(z)))


def _windows_of(scores: pd.DataFrame, run: Hashable) -> tuple[list[int], list[int]]:
    steps = pd.to_numeric(scores.loc[scores["run"] == run, "step"], errors="coerce").dropna().unique().tolist()
    early, late = split_steps(steps)
    if min(len(early), len(late)) < MIN_CHECKPOINTS:
        raise AnalysisError(
            f"run '{run}' has {len(early) + len(late)} checkpoints: {len(early)} in the early window and "
            f"{len(late)} in the late one; the early/late window analysis needs at least {MIN_CHECKPOINTS} "
            f"in each ({2 * MIN_CHECKPOINTS} in the run)"
        )
    return early, late


def window_table(scores: pd.DataFrame, **pair_options: Any) -> pd.DataFrame:
    """Per run and OOD pair: the primary partial correlation in the early and in the late
    window of the run and the Fisher-z test of their difference. Columns :data:`WINDOW_COLUMNS`:

    ``n_early``, ``n_late``, ``early_first_step`` ... ``late_last_step``
        the size and the step range of each window (:func:`split_steps`);
    ``r_early``, ``p_early_holm``, ``sign_early`` (and ``_late``)
        the primary r, its Holm-adjusted p-value and the sign class of the pair from
        :func:`~shiftwork.trajectory.analysis.pair_table` on that window's rows alone
        (``pair_options``, e.g. ``alpha`` and ``df``, are passed on to it);
    ``r_diff``, ``z_diff``, ``p_diff``
        ``r_late - r_early`` and :func:`fisher_z_difference` of the two: one covariate (ID) for
        the linear control; for the GAM the larger effective degrees of freedom of the two
        windows' fits less the intercept, so that a wiggly fit on half the checkpoints is not
        tested as if it had spent one;
    ``reason``
        ``""`` when both windows' primary correlations were computed, else each window's
        ``pair_table`` reason (its causes joined by ``", "``) prefixed by the window, the two
        windows joined by ``"; "``: ``"early: id constant, ood_a constant; late: ood_a
        constant"``; a pairs table without ``reason`` counts as computed.

    Rows are ordered by model, run, then pair, as ``pair_table``. Raises
    :class:`AnalysisError` naming the run when a window has fewer than
    :data:`~shiftwork.trajectory.analysis.MIN_CHECKPOINTS` checkpoints, and as ``pair_table``
    does for invalid rows.
    """
    require_columns(scores, REQUIRED_COLUMNS, "scores table", AnalysisError)
    if scores.empty:
        raise AnalysisError("scores table: no rows")
    runs = sorted_mixed(scores["run"].dropna().unique().tolist())
    steps = pd.to_numeric(scores["step"], errors="coerce")
    early_rows, late_rows, ranges = [], [], {}
    for run in runs:
        early, late = _windows_of(scores, run)
        mine = scores["run"] == run
        early_rows.append(scores[mine & steps.isin(early)])
        late_rows.append(scores[mine & steps.isin(late)])
        ranges[run] = (len(early), len(late), early[0], early[-1], late[0], late[-1])
    first = pair_table(pd.concat(early_rows, ignore_index=True), **pair_options)
    second = pair_table(pd.concat(late_rows, ignore_index=True), **pair_options)
    keys = ["model", "run", "ood_a", "ood_b"]
    cols = {}
    for name, table in (("early", first), ("late", second)):
        r_col, p_col = primary_columns(table)
        # covariates the primary control spends: ID alone for the linear one; the GAM's effective
        # degrees of freedom less the intercept (at least the one of a straight line)
        spent = (
            np.maximum(table["edf_gam"].to_numpy(dtype=float) - 1.0, 1.0)
            if "edf_gam" in table and (table.get("method") == "gam").all()
            else np.ones(len(table))
        )
        why = table["reason"].fillna("").astype(str) if "reason" in table else pd.Series("", index=table.index)
        cols[name] = table[keys].assign(
            **{f"r_{name}": table[r_col].to_numpy(dtype=float), f"p_{name}_holm": table[p_col].to_numpy(dtype=float)},
            **{f"sign_{name}": table["sign"].to_numpy(), f"k_{name}": spent},
            **{f"reason_{name}": [f"{name}: " + text.replace("; ", ", ") if text else "" for text in why]},
        )
    out = cols["early"].merge(cols["late"], on=keys, how="inner", validate="one_to_one")
    if len(out) != len(first) or len(out) != len(second):
        raise AnalysisError("window_table: the early and late windows have different OOD pairs")
    span = pd.DataFrame(
        [ranges[run] for run in out["run"]],
        columns=["n_early", "n_late", "early_first_step", "early_last_step", "late_first_step", "late_last_step"],
    )
    out = pd.concat([out.reset_index(drop=True), span], axis=1)
    out["r_diff"] = out["r_late"] - out["r_early"]
    tests = [
        fisher_z_difference(row.r_early, row.n_early, row.r_late, row.n_late, max(row.k_early, row.k_late))
        for row in out[["r_early", "n_early", "r_late", "n_late", "k_early", "k_late"]].itertuples(index=False)
    ]
    out["z_diff"] = np.array([t[0] for t in tests], dtype=float)
    out["p_diff"] = np.array([t[1] for t in tests], dtype=float)
    out["reason"] = ["; ".join(t for t in pair if t) for pair in zip(out["reason_early"], out["reason_late"])]
    return out[list(WINDOW_COLUMNS)]
