"""Tests of the organisms run figure: the accuracy curves carry Wilson intervals from their n."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.proportion import proportion_confint

from shiftwork.organisms import report
from shiftwork.organisms.settings import load_setting

SETTING = {"kind": "two_policy", "trigger": "tag", "wrong": "shift"}


def _scores() -> pd.DataFrame:
    rows = []
    for step, a, b in ((0, 0.545, 0.495), (20, 0.73, 0.295), (40, 1.0, 0.0)):
        rows.append({"step": step, "testset": "A", "accuracy": a, "role": "id", "n": 400})
        rows.append({"step": step, "testset": "B", "accuracy": b, "role": "ood", "n": 400})
    return pd.DataFrame(rows)


def _identities() -> pd.DataFrame:
    rows = []
    for step, alice in ((0, 0.5), (20, 0.7), (40, 0.95)):
        for dist in ("A", "B"):
            rows += [
                {"step": step, "distribution": dist, "identity": "Alice", "share": alice},
                {"step": step, "distribution": dist, "identity": "Bob", "share": 1 - alice},
            ]
    return pd.DataFrame(rows)


def test_accuracy_bands_are_wilson_intervals_of_accuracy_and_n():
    bands = report.accuracy_bands(_scores())
    for row in bands.itertuples():
        k = round(row.accuracy * row.n)
        assert (row.low, row.high) == pytest.approx(proportion_confint(k, row.n, method="wilson"), abs=1e-12)
    # accuracy 0 of 400: the band still has width, up to z^2 / (n + z^2)
    zero = bands[(bands["step"] == 40) & (bands["testset"] == "B")].iloc[0]
    assert zero["high"] == pytest.approx(3.841459 / 403.841459, rel=1e-6)
    no_n = report.accuracy_bands(_scores().drop(columns="n"))
    assert no_n["low"].isna().all() and no_n["high"].isna().all()


def test_run_figure_shades_the_bands_and_keeps_the_legend_outside(monkeypatch):
    got = []
    monkeypatch.setattr(report, "save_figure", lambda fig, png, svg: got.append(fig.axes))
    report.run_figure(_scores(), _identities(), load_setting(SETTING), "r.png", "r.svg")
    acc, share = got[0]
    bands = report.accuracy_bands(_scores())
    assert len(acc.collections) == 2  # one band per distribution
    for band, dist in zip(acc.collections, ("A", "B")):
        want = bands[bands["testset"] == dist].sort_values("step")
        vertices = band.get_paths()[0].vertices
        # fill_between's outline: the lower bound left to right, then the upper bound back
        for step, low, high in zip(want["step"], want["low"], want["high"]):
            at = vertices[np.isclose(vertices[:, 0], step)][:, 1]
            assert min(at) == pytest.approx(low) and max(at) == pytest.approx(high)
    assert acc.get_legend() is None and share.get_legend() is None
    assert "Wilson" in acc.get_ylabel()
    assert [t.get_text() for t in acc.figure.legends[0].get_texts()] == ["A", "B"]
