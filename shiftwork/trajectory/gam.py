"""A penalised regression-spline GAM of one series on another: statsmodels' ``GLMGam``.

The trajectory analysis removes the ID effect from an OOD accuracy series with a smooth of the
ID accuracy whose wiggliness the data choose (:func:`gam_fit`):

basis
    ``x`` is rescaled to [0, 1] (``(x - min) / (max - min)``; the fit does not depend on it
    except through the penalty's scale, which the rescaling makes the same for every series),
    then :class:`statsmodels.gam.api.BSplines` with ``df`` cubic B-spline basis functions,
    interior knots at quantiles of ``x``, the constant removed (``include_intercept=False``),
    next to an intercept column: ``df`` columns in all. The basis spans every linear function.
penalty
    statsmodels' second-derivative penalty of the spline (``alpha * cov_der2``), so an infinite
    penalty leaves the straight line in ``x`` (2 effective degrees of freedom) and no penalty
    the unpenalised spline (``df``).
penalty weight
    the ``alpha`` of :data:`GAM_ALPHAS` (a fixed grid in the rescaled ``x``) whose fit has the
    smallest ``results.gcv``. statsmodels defines it as ``scale / (1 - tr(H) / n)**2`` with
    ``scale = RSS / (n - tr(H))``, i.e. ``n**2 RSS / (n - tr(H))**3``: Wahba's GCV score times
    ``n / (n - tr(H))``, a heavier charge per effective degree of freedom that keeps GCV's
    known tendency to undersmooth in check on the 10-30 checkpoints of a run. A grid (rather
    than :meth:`GLMGam.select_penweight`, whose default optimiser is a randomised basin-hopping)
    makes the choice deterministic; GCV is smooth in ``log(alpha)``, and the grid runs from
    "no penalty" to "a straight line" for ``x`` in [0, 1]. A grid value at which the fit
    reproduces ``y`` exactly (statsmodels raises ``PerfectSeparationError``) is skipped. The
    score of each grid value is computed in closed form with statsmodels' formula, then
    ``GLMGam`` is fitted at the chosen weight (the tests check both against ``GLMGam`` fits).
effective degrees of freedom
    ``results.hat_matrix_trace`` (the trace of the hat matrix, intercept included).

The basis has ``min(df, distinct values of x, n - 1)`` functions: no more than the distinct
points, and one fewer than the points because ``GLMGam`` starts its fit with a scale estimate on
``n - (columns)`` residual degrees of freedom. When that leaves fewer than
:data:`MIN_SPLINE_POINTS` (too few for a cubic basis, e.g. 4 checkpoints), the fit is the
straight line, OLS on ``[1, x]`` (the penalty's null space); so is the fit of a ``y`` that is
an exact linear function of ``x``, where every penalised fit is exact.

:func:`penalised_residuals` refits with a *given* penalty weight in closed form,
``beta = (X'X + 2 alpha S)^-1 X'y``, the penalised least squares statsmodels' PIRLS solves for
a Gaussian family with identity link (its ``penalized_wls`` doubles the penalty matrix); the
item bootstrap uses it to refit thousands of resampled series with the penalty of the point
estimate.

Degenerate series
    A constant ``x`` (or one with fewer than :data:`MIN_SPLINE_POINTS` distinct values) gets the
    straight-line fit, which for a constant ``x`` only centres ``y``; a constant ``y`` is fitted
    exactly (zero residuals). Where ``X'X + 2 alpha S`` is singular (a resampled ``x`` whose values
    bunch on fewer points than the basis has knots leaves basis functions that neither the data
    nor the penalty separate) the penalised least-squares problem still has unique fitted values,
    and the closed forms take them from the minimum-norm solution (:func:`numpy.linalg.lstsq`,
    as ``GLMGam``'s own weighted least squares does with its pseudo-inverse) instead of raising
    :class:`numpy.linalg.LinAlgError`. Whether a correlation of such residuals is defined is
    decided by the caller (:mod:`shiftwork.trajectory.analysis`).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

__all__ = ["GAM_ALPHAS", "GAM_DF", "MIN_SPLINE_POINTS", "GamFit", "gam_design", "gam_fit", "penalised_residuals"]

GAM_DF = 10
"""Default number of basis functions (intercept included), mgcv's default ``k`` for ``s()``."""

GAM_ALPHAS: np.ndarray = 10.0 ** np.arange(-8.0, 6.0 + 1e-9, 0.25)
"""Penalty weights searched, for ``x`` rescaled to [0, 1]: 1e-8 (about the unpenalised spline)
to 1e6 (a straight line within 1e-5 effective degrees of freedom), four per decade."""

MIN_SPLINE_POINTS = 4
"""Fewest basis functions of a cubic spline; a smaller basis means the straight-line fit."""


@dataclass(frozen=True)
class GamFit:
    """One GAM fit of ``y`` on ``x``.

    ``resid``: ``y`` minus the fit; ``edf``: effective degrees of freedom, intercept included
    (2 for a straight line); ``alpha``: the penalty weight (``math.inf`` for the straight-line
    fit); ``df``: the number of basis functions used (2 for the straight line); ``gcv``:
    statsmodels' ``results.gcv`` of the chosen fit (NaN for the straight line).
    """

    resid: np.ndarray
    edf: float
    alpha: float
    df: int
    gcv: float


def _unit(x: np.ndarray) -> np.ndarray:
    lo, hi = float(x.min()), float(x.max())
    return (x - lo) / (hi - lo)


def _basis_size(x: np.ndarray, df: int) -> int:
    """Basis functions for ``x``: ``min(df, distinct values, n - 1)``, or 0 for the straight line."""
    k = min(int(df), int(np.unique(x).size), len(x) - 1)
    return k if k >= MIN_SPLINE_POINTS else 0


def gam_design(x: np.ndarray, df: int):
    """``(smoother, X, S)``: statsmodels' ``BSplines`` of the rescaled ``x`` with ``df`` basis
    functions, the design ``[1, basis]`` and the penalty matrix (zero for the intercept,
    ``cov_der2`` for the spline), all for ``penalty weight = 1``."""
    from statsmodels.gam.api import BSplines

    smoother = BSplines(_unit(np.asarray(x, dtype=float))[:, None], df=[int(df)], degree=[3])
    design = np.column_stack([np.ones(len(x)), smoother.basis])
    penalty = np.zeros((design.shape[1], design.shape[1]))
    penalty[1:, 1:] = smoother.penalty_matrices[0]
    return smoother, design, penalty


def _line(y: np.ndarray, x: np.ndarray) -> GamFit:
    design = np.column_stack([np.ones_like(x), x])
    beta, *_ = np.linalg.lstsq(design, y, rcond=None)
    rank = int(np.linalg.matrix_rank(design))
    return GamFit(resid=y - design @ beta, edf=float(rank), alpha=math.inf, df=rank, gcv=math.nan)


def _is_linear(y: np.ndarray, x: np.ndarray) -> bool:
    centred = y - y.mean()
    total = float(centred @ centred)
    if total == 0.0:
        return True
    resid = _line(y, x).resid
    return float(resid @ resid) <= 1e-12 * total


def _penalised_solve(system: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """``system^-1 rhs`` for the penalised normal equations ``system = X'X + 2 alpha S``; when
    ``system`` is singular, the minimum-norm least-squares solution, whose fitted values ``X beta``
    are the unique penalised fit (a null direction of ``system`` is one of ``X`` and of ``S``)."""
    try:
        return np.linalg.solve(system, rhs)
    except np.linalg.LinAlgError:
        return np.linalg.lstsq(system, rhs, rcond=None)[0]


def _gcv_path(y: np.ndarray, design: np.ndarray, penalty: np.ndarray, alphas: np.ndarray) -> np.ndarray:
    """statsmodels' ``results.gcv`` of the penalised fit at every ``alpha``, in closed form:
    ``scale / (1 - tr(H) / n)**2`` with ``scale = RSS / (n - tr(H))`` and ``H = X (X'X + 2 alpha
    S)^-1 X'``. NaN where ``GLMGam`` would not give one: where the fit reproduces ``y`` (every
    residual within statsmodels' ``np.allclose`` tolerance, 1e-8: it raises
    ``PerfectSeparationError``), where ``tr(H) >= n``, or where the penalised system is singular
    (ID values bunched on few distinct points, as in a window of a run, leave small weights
    singular; where every weight is, :func:`gam_fit` falls back to the straight line)."""
    n = len(y)
    gram = design.T @ design
    out = np.full(len(alphas), np.nan)
    for k, alpha in enumerate(alphas):
        try:
            hat = design @ np.linalg.solve(gram + 2.0 * float(alpha) * penalty, design.T)
        except np.linalg.LinAlgError:  # basis columns that the penalty does not separate: no fit
            continue
        resid = y - hat @ y
        trace = float(np.trace(hat))
        if trace >= n or np.all(np.abs(resid) <= 1e-8):
            continue
        scale = float(resid @ resid) / (n - trace)
        out[k] = scale / (1.0 - trace / n) ** 2
    return out


def gam_fit(y: np.ndarray, x: np.ndarray, df: int = GAM_DF, alphas: np.ndarray = GAM_ALPHAS) -> GamFit:
    """Fit the penalised GAM of ``y`` on ``x`` (see the module notes), penalty by GCV over
    ``alphas``. ``y`` and ``x`` are finite 1-d float arrays of one length (the caller checks).

    The GCV score of every grid value is computed in closed form (:func:`_gcv_path`, the
    formula of statsmodels' ``results.gcv``; a full ``GLMGam`` fit per grid value costs some
    milliseconds each), then ``GLMGam`` is fitted at the chosen weight and gives the residuals
    and effective degrees of freedom.
    """
    from statsmodels.gam.api import GLMGam
    from statsmodels.tools.sm_exceptions import PerfectSeparationError

    y = np.asarray(y, dtype=float)
    x = np.asarray(x, dtype=float)
    k = _basis_size(x, df)
    if k == 0 or _is_linear(y, x):
        return _line(y, x)
    smoother, design, penalty = gam_design(x, k)
    gcv = _gcv_path(y, design, penalty, np.asarray(alphas, dtype=float))
    if not np.any(np.isfinite(gcv)):
        return _line(y, x)
    best = int(np.nanargmin(gcv))
    alpha = float(alphas[best])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            res = GLMGam(y, exog=np.ones((len(y), 1)), smoother=smoother, alpha=[alpha]).fit()
        except (PerfectSeparationError, np.linalg.LinAlgError):  # residuals at the 1e-8 tolerance
            # (or a fit statsmodels cannot finish): the closed form's
            resid = penalised_residuals(y[:, None], x, k, np.array([alpha]))[:, 0]
            hat = design @ _penalised_solve(design.T @ design + 2.0 * alpha * penalty, design.T)
            return GamFit(resid=resid, edf=float(np.trace(hat)), alpha=alpha, df=k, gcv=float(gcv[best]))
    return GamFit(
        resid=np.asarray(res.resid_response, dtype=float),
        edf=float(res.hat_matrix_trace),
        alpha=alpha,
        df=k,
        gcv=float(res.gcv),
    )


def penalised_residuals(ys: np.ndarray, x: np.ndarray, df: int, alphas: np.ndarray) -> np.ndarray:
    """Residuals of each column of ``ys`` (n x m) after the GAM on ``x`` with the *given*
    penalty weight of that column (``alphas``, length m; ``math.inf`` for a straight line), in
    closed form (see the module notes); the basis is sized as in :func:`gam_fit`. A singular
    penalised system gives the minimum-norm solution's fit (module notes), never an error."""
    ys = np.asarray(ys, dtype=float)
    x = np.asarray(x, dtype=float)
    out = np.empty_like(ys)
    k = _basis_size(x, df)
    line = np.column_stack([np.ones_like(x), x])
    line_hat = line @ np.linalg.pinv(line)
    design = penalty = gram = None
    if k:
        _, design, penalty = gam_design(x, k)
        gram = design.T @ design
    for j, alpha in enumerate(np.asarray(alphas, dtype=float)):
        if k == 0 or not np.isfinite(alpha):
            out[:, j] = ys[:, j] - line_hat @ ys[:, j]
        else:
            beta = _penalised_solve(gram + 2.0 * alpha * penalty, design.T @ ys[:, j])
            out[:, j] = ys[:, j] - design @ beta
    return out
