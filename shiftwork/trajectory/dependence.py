"""Serially dependent checkpoints: the effective number of checkpoints behind a correlation.

A run's checkpoints are a few training steps apart and are scored on the same items, so what is
left of two test sets' scores after the ID control drifts slowly: each residual series is
autocorrelated. Two unrelated autocorrelated series correlate by chance more than two series of
independent points do, and a p-value that counts every checkpoint as an independent observation is
too small (the classic spurious correlation of time series).

:func:`effective_n` is the modified Student t-test of Pyper and Peterman (1998, Can. J. Fish. Aquat.
Sci. 55: 2127-2140), after Bartlett's variance of a correlation between autocorrelated series:
``1 / n_eff = 1 / n + (2 / n) * sum_{k=1..K} ((n - k) / n) * rho_a(k) * rho_b(k)`` with
``rho_x(k)`` the lag-``k`` sample autocorrelation of residual series ``x`` and ``K = n // 5``.
``n_eff`` is kept in ``[MIN_EFFECTIVE_N, n]``: series whose autocorrelations have opposite signs
(which would make ``n_eff`` exceed ``n``) are counted as ``n`` independent points, never more. The
p-value of a correlation ``r`` over ``q`` fitted parameters (the control's, intercept included) is
then that of Student's t with ``n_eff - q - 1`` degrees of freedom in place of ``n - q - 1``.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["DEPENDENCE", "MIN_EFFECTIVE_N", "autocorrelations", "effective_n"]

DEPENDENCE: tuple[str, ...] = ("effective_n", "independent")
"""How the pair analysis counts checkpoints: by their effective number, or as independent points."""

MIN_EFFECTIVE_N = 4.0
"""Fewest effective checkpoints :func:`effective_n` returns."""


def autocorrelations(series: np.ndarray, max_lag: int) -> np.ndarray:
    """Sample autocorrelations of ``series`` at lags ``1..max_lag`` (the usual estimator: lagged
    cross-products of the centred series over its sum of squares); zeros for a constant series."""
    x = np.asarray(series, dtype=float)
    x = x - x.mean()
    total = float(x @ x)
    if total == 0.0:
        return np.zeros(max_lag)
    return np.array([float(x[k:] @ x[:-k]) / total for k in range(1, max_lag + 1)])


def effective_n(resid_a: np.ndarray, resid_b: np.ndarray, max_lag: int | None = None) -> float:
    """The effective number of independent checkpoints behind the correlation of two residual
    series (module notes); ``max_lag`` defaults to ``n // 5``."""
    n = len(resid_a)
    if len(resid_b) != n:
        raise ValueError(f"effective_n: series of {n} and {len(resid_b)} points")
    lags = n // 5 if max_lag is None else int(max_lag)
    if lags < 1:
        return float(n)
    k = np.arange(1, lags + 1)
    weights = (n - k) / n
    inverse = 1.0 / n + (2.0 / n) * float(
        np.sum(weights * autocorrelations(resid_a, lags) * autocorrelations(resid_b, lags))
    )
    if not math.isfinite(inverse) or inverse <= 1.0 / n:
        return float(n)
    return float(min(max(1.0 / inverse, MIN_EFFECTIVE_N), n))
