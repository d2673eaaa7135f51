"""Item bootstrap of a run's partial correlations: resample test items, recompute everything.

A run's checkpoints are all scored on the same test items, so the uncertainty that comes from
*which* items a test set happens to hold is shared by every checkpoint. One bootstrap resample
draws, for every test set, ``n_s`` of its ``n_s`` items with replacement, uses those SAME
items at every checkpoint, recomputes every checkpoint's accuracy on every set and then the
partial correlation of every OOD pair.

Draws
-----
The sets are taken in the order given (the analysis passes the ID set first, then the OOD sets
in sorted order); for each, ``rng.integers(0, n_s, size=(resamples, n_s))`` draws the item
indices of every resample at once (row ``b`` is resample ``b``; items are the rows of the set's
correctness matrix). Accuracies are then ``counts @ correct / n_s`` with ``counts[b, i]`` the
number of times item ``i`` was drawn in resample ``b``.

Stratified draws
----------------
With the balanced accuracy as the score (``labels`` given for a set), a resample keeps each gold
label's item count: for each label of the set, in sorted order, ``rng.integers(0, n_l, size=
(resamples, n_l))`` draws the indices among that label's ``n_l`` items (in their row order), and
the resample's score is the mean over the labels of the accuracy among that label's drawn items.
A set with one label draws exactly as without labels. Sets without labels (None) draw as above.

Statistics
----------
:func:`linear_partials` computes the partial correlation controlling linearly for the ID column
for all resamples at once: the correlation of the OLS residuals of the two OOD columns on
``[1, id]`` (equal to ``(r_ab - r_az r_bz) / sqrt((1 - r_az**2)(1 - r_bz**2))``).
:func:`gam_partials` refits the GAM of every OOD column on each resample's ID column with the
penalty weight of the point estimate held fixed (re-choosing it by GCV in every resample would
cost a grid search per column and resample); the basis is rebuilt on the resampled ID column.
A resample in which a correlation is undefined (the ID column constant, or an OOD column with no
variance left after the control, as in the point estimate) gives NaN and is left out of
:func:`bootstrap_summary`. A resampled ID column whose values bunch on fewer points than the GAM
basis has knots can make the penalised system singular; its fit is still unique and
:func:`~shiftwork.trajectory.gam.penalised_residuals` gives it (see the notes of
:mod:`shiftwork.trajectory.gam`), so no resample raises.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from shiftwork.trajectory.gam import penalised_residuals
from shiftwork.trajectory.scores import lean_free_from_means

__all__ = ["DEGENERATE_SHARE", "gam_partials", "linear_partials", "resample_accuracies", "bootstrap_summary"]

DEGENERATE_SHARE = 1e-12
"""A residual sum of squares below this share of the total means "no variance left"."""


def _mean_of_draws(matrix: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """``(resamples, checkpoints)`` means of the rows of ``matrix`` drawn by ``idx`` (resamples x draws)."""
    resamples, n_items = idx.shape[0], matrix.shape[0]
    flat = (np.arange(resamples)[:, None] * n_items + idx).ravel()
    counts = np.bincount(flat, minlength=resamples * n_items).reshape(resamples, n_items)
    return counts @ matrix / idx.shape[1]


def _strata(labels: Sequence[Hashable]) -> list[np.ndarray]:
    """The row positions of each distinct label, labels in sorted order."""
    values = np.asarray(labels, dtype=object)
    return [np.flatnonzero(values == label) for label in sorted(set(values.tolist()), key=str)]


def resample_accuracies(
    correct: Sequence[np.ndarray],
    rng: np.random.Generator,
    resamples: int,
    groups: Sequence[Hashable | None] | None = None,
    labels: Sequence[Sequence[Hashable] | None] | None = None,
    score: str = "balanced_accuracy",
) -> np.ndarray:
    """``(resamples, checkpoints, sets)`` accuracies of item-bootstrap resamples.

    ``correct[s]`` is the items x checkpoints 0/1 matrix of set ``s`` (rows: items, the same at
    every checkpoint). See the module notes for the order of the draws. Sets with the same
    non-None ``groups[s]`` are built on the same sources row for row: the first of them draws
    the indices and the others reuse them (no draw of their own), so a resample keeps the pairing.
    ``labels[s]`` (None, or ``labels`` None: raw accuracy) gives the gold label of each row of set
    ``s``: its resamples are then drawn within each label and scored by ``score``, the balanced or
    the lean-free accuracy (module notes); sets resampled together must then have the same labels
    row for row.
    """
    if not correct:
        raise ValueError("resample_accuracies: no sets")
    steps = correct[0].shape[1]
    out = np.empty((resamples, steps, len(correct)))
    drawn: dict[Hashable, list[np.ndarray]] = {}
    strata_of: dict[Hashable, list[np.ndarray]] = {}
    for s, matrix in enumerate(correct):
        matrix = np.asarray(matrix, dtype=float)
        n_items = matrix.shape[0]
        key = groups[s] if groups is not None else None
        set_labels = labels[s] if labels is not None else None
        if set_labels is not None and len(set_labels) != n_items:
            raise ValueError(f"resample_accuracies: set {s} has {n_items} items but {len(set_labels)} labels")
        strata = _strata(set_labels) if set_labels is not None else [np.arange(n_items)]
        if key is not None and key in drawn:
            idx = drawn[key]
            if sum(len(i) for i in strata_of[key]) != n_items:
                raise ValueError(
                    "resample_accuracies: sets resampled together need as many items; "
                    f"{n_items} vs {sum(len(i) for i in strata_of[key])}"
                )
            if len(strata) != len(strata_of[key]) or any(
                not np.array_equal(a, b) for a, b in zip(strata, strata_of[key])
            ):
                raise ValueError("resample_accuracies: sets resampled together need the same labels row for row")
        else:
            idx = [rng.integers(0, len(rows), size=(resamples, len(rows))) for rows in strata]
            if key is not None:
                drawn[key], strata_of[key] = idx, strata
        means = np.array([_mean_of_draws(matrix[rows], i) for rows, i in zip(strata, idx)])
        if set_labels is not None and score == "lean_free_accuracy":
            out[:, :, s] = lean_free_from_means(np.moveaxis(means, 0, -2), np.array([[len(r)] for r in strata]))
        else:
            out[:, :, s] = means.mean(axis=0)
    return out


def _correlate(ra: np.ndarray, rb: np.ndarray, ok_a: np.ndarray, ok_b: np.ndarray) -> np.ndarray:
    """Row-wise correlation of centred residual rows (NaN where a row has no variance left)."""
    num = np.einsum("bt,bt->b", ra, rb)
    den = np.sqrt(np.einsum("bt,bt->b", ra, ra) * np.einsum("bt,bt->b", rb, rb))
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.clip(num / den, -1.0, 1.0)
    return np.where(ok_a & ok_b, r, np.nan)


def _left(resid: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Per row: does ``resid`` keep more than :data:`DEGENERATE_SHARE` of the variance of ``values``?"""
    centred = values - values.mean(axis=1, keepdims=True)
    total = np.einsum("bt,bt->b", centred, centred)
    return (total > 0.0) & (np.einsum("bt,bt->b", resid, resid) > DEGENERATE_SHARE * total)


def linear_partials(acc: np.ndarray, pairs: Sequence[tuple[int, int]], id_col: int = 0) -> np.ndarray:
    """``(resamples, pairs)`` partial correlations controlling linearly for column ``id_col``."""
    z = acc[:, :, id_col]
    zc = z - z.mean(axis=1, keepdims=True)
    szz = np.einsum("bt,bt->b", zc, zc)
    z_ok = np.ptp(z, axis=1) > 0.0
    resid = {}
    ok = {}
    for col in sorted({c for pair in pairs for c in pair}):
        y = acc[:, :, col]
        yc = y - y.mean(axis=1, keepdims=True)
        with np.errstate(divide="ignore", invalid="ignore"):
            slope = np.where(z_ok, np.einsum("bt,bt->b", yc, zc) / szz, 0.0)
        resid[col] = yc - slope[:, None] * zc
        ok[col] = z_ok & _left(resid[col], y)
    out = np.empty((acc.shape[0], len(pairs)))
    for k, (a, b) in enumerate(pairs):
        out[:, k] = _correlate(resid[a], resid[b], ok[a], ok[b])
    return out


def gam_partials(
    acc: np.ndarray, pairs: Sequence[tuple[int, int]], alphas: dict[int, float], df: int, id_col: int = 0
) -> np.ndarray:
    """``(resamples, pairs)`` correlations of GAM residuals on column ``id_col``, each OOD column
    ``c`` refitted with its fixed penalty weight ``alphas[c]`` (NaN: no point estimate, so NaN)."""
    cols = sorted({c for pair in pairs for c in pair})
    fit_cols = [c for c in cols if not np.isnan(alphas.get(c, np.nan))]
    resamples, steps, _ = acc.shape
    resid = {c: np.zeros((resamples, steps)) for c in cols}
    ok = {c: np.zeros(resamples, dtype=bool) for c in cols}
    for b in range(resamples):
        z = acc[b, :, id_col]
        if np.ptp(z) == 0.0 or not fit_cols:
            continue
        fitted = penalised_residuals(acc[b][:, fit_cols], z, df, np.array([alphas[c] for c in fit_cols]))
        for j, c in enumerate(fit_cols):
            resid[c][b] = fitted[:, j] - fitted[:, j].mean()
    for c in fit_cols:
        ok[c] = (np.ptp(acc[:, :, id_col], axis=1) > 0.0) & _left(resid[c], acc[:, :, c])
    out = np.empty((resamples, len(pairs)))
    for k, (a, b) in enumerate(pairs):
        out[:, k] = _correlate(resid[a], resid[b], ok[a], ok[b])
    return out


def bootstrap_summary(r_boot: np.ndarray, r_point: float) -> dict[str, float | int]:
    """``boot_sign_share``, ``boot_ci_low``, ``boot_ci_high``, ``n_boot`` of one pair.

    ``n_boot`` counts the resamples with a defined correlation; ``boot_sign_share`` is the share
    of them whose sign equals that of ``r_point`` (NaN when ``r_point`` is NaN or 0 or no
    resample is defined); the interval is the 2.5 and 97.5 percentiles of the defined resamples
    (:func:`numpy.percentile`, linear interpolation; NaN when none is defined).
    """
    values = np.asarray(r_boot, dtype=float)
    values = values[np.isfinite(values)]
    n = int(values.size)
    if n == 0:
        return {"boot_sign_share": np.nan, "boot_ci_low": np.nan, "boot_ci_high": np.nan, "n_boot": 0}
    lo, hi = np.percentile(values, [2.5, 97.5])
    share = float(np.mean(np.sign(values) == np.sign(r_point))) if np.isfinite(r_point) and r_point != 0 else np.nan
    return {"boot_sign_share": share, "boot_ci_low": float(lo), "boot_ci_high": float(hi), "n_boot": n}
