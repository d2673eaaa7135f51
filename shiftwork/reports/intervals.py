"""Confidence intervals drawn by the figures: Wilson intervals of a proportion, t-intervals of a mean.

Both take arrays (or scalars) and return arrays of the same shape; a cell without enough data
(n = 0 for a proportion, n < 2 for a mean) gets NaN, never a zero-width interval.
"""

from __future__ import annotations

import numpy as np
from scipy import stats as _sps


def _z(confidence: float) -> float:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence!r}")
    return float(_sps.norm.ppf(0.5 + confidence / 2.0))


def wilson_interval(proportion, n, confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """``(low, high)`` of the Wilson score interval of a binomial proportion.

    ``proportion`` is the observed share of successes in ``n`` trials (accuracy and its number of
    sampled responses). With ``z`` the two-sided normal quantile of ``confidence``, the interval
    is ``(p + z^2 / 2n +- z sqrt(p (1 - p) / n + z^2 / 4n^2)) / (1 + z^2 / n)``; it stays inside
    [0, 1] and has non-zero width at p = 0 and p = 1. NaN where ``n`` is 0 or a value is missing;
    ValueError for a proportion outside [0, 1] or a negative ``n``.
    """
    p = np.asarray(proportion, dtype=float)
    m = np.asarray(n, dtype=float)
    if np.any((p < 0) | (p > 1)):
        raise ValueError("wilson_interval: proportions must lie in [0, 1]")
    if np.any(m < 0):
        raise ValueError("wilson_interval: n must be non-negative")
    z = _z(confidence)
    with np.errstate(divide="ignore", invalid="ignore"):
        denom = 1.0 + z**2 / m
        centre = (p + z**2 / (2.0 * m)) / denom
        half = z * np.sqrt(p * (1.0 - p) / m + z**2 / (4.0 * m**2)) / denom
    valid = m > 0
    low = np.where(valid, np.clip(centre - half, 0.0, 1.0), np.nan)
    high = np.where(valid, np.clip(centre + half, 0.0, 1.0), np.nan)
    return low, high


def t_half_width(sd, n, confidence: float = 0.95) -> np.ndarray:
    """Half-width of the t-interval of a mean: ``t_{(1 + confidence) / 2, n - 1} * sd / sqrt(n)``.

    ``sd`` is the sample standard deviation (ddof 1) of ``n`` values. NaN where ``n`` < 2 or
    ``sd`` is missing."""
    s = np.asarray(sd, dtype=float)
    m = np.asarray(n, dtype=float)
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence!r}")
    valid = m >= 2
    df = np.where(valid, m - 1.0, 1.0)
    q = _sps.t.ppf(0.5 + confidence / 2.0, df)
    with np.errstate(divide="ignore", invalid="ignore"):
        half = q * s / np.sqrt(np.where(valid, m, 1.0))
    return np.where(valid, half, np.nan)
