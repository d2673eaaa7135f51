"""Tests of shiftwork.reports.intervals against hand-worked values and independent computations
(statsmodels' Wilson interval, scipy's t-interval of a sample)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps
from statsmodels.stats.proportion import proportion_confint

from shiftwork.reports.intervals import t_half_width, wilson_interval


def test_wilson_by_hand():
    # p = 0.5, n = 100: centre 0.5, half = z sqrt(0.0025 + z^2 / 40000) / (1 + z^2 / 100) = 0.09617
    low, high = wilson_interval(0.5, 100)
    assert float(low) == pytest.approx(0.40383, abs=1e-5)
    assert float(high) == pytest.approx(0.59617, abs=1e-5)
    # p = 0, n = 400: low 0, high z^2 / (n + z^2) = 3.841459 / 403.841459
    low, high = wilson_interval(0.0, 400)
    assert float(low) == pytest.approx(0.0, abs=1e-12)
    assert float(high) == pytest.approx(3.841459 / 403.841459, rel=1e-6)


@pytest.mark.parametrize("k, n", [(0, 400), (1, 400), (219, 400), (390, 400), (400, 400), (3, 7)])
def test_wilson_matches_statsmodels(k, n):
    low, high = wilson_interval(k / n, n)
    want = proportion_confint(k, n, alpha=0.05, method="wilson")
    assert (float(low), float(high)) == pytest.approx(want, abs=1e-12)


def test_wilson_arrays_other_level_and_empty_cells():
    low, high = wilson_interval([0.2, 0.9, 0.5], [50, 10, 0], confidence=0.9)
    for i, (k, n) in enumerate([(10, 50), (9, 10)]):
        assert (low[i], high[i]) == pytest.approx(proportion_confint(k, n, alpha=0.1, method="wilson"), abs=1e-12)
    assert np.isnan(low[2]) and np.isnan(high[2])  # no trials: no interval, not a zero-width one
    with pytest.raises(ValueError, match="proportions"):
        wilson_interval(1.2, 10)
    with pytest.raises(ValueError, match="confidence"):
        wilson_interval(0.5, 10, confidence=1.0)


def test_t_half_width_by_hand_and_against_scipy():
    # sd 0.1, n 5: t_{0.975, 4} = 2.776445, times 0.1 / sqrt(5)
    assert float(t_half_width(0.1, 5)) == pytest.approx(2.776445 * 0.1 / np.sqrt(5), rel=1e-6)
    x = np.array([0.12, 0.4, 0.33, 0.05, 0.27, 0.19, 0.6])
    low, high = sps.t.interval(0.95, len(x) - 1, loc=x.mean(), scale=sps.sem(x))
    assert float(t_half_width(x.std(ddof=1), len(x))) == pytest.approx((high - low) / 2, rel=1e-12)
    half = t_half_width([0.1, 0.2, np.nan], [1, 2, 5])
    assert np.isnan(half[0]) and np.isnan(half[2])  # one value: no interval; missing sd
    assert half[1] == pytest.approx(12.7062047 * 0.2 / np.sqrt(2), rel=1e-6)
