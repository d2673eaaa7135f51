"""The stability pairs' calibration: a lean-following axis beside label-split OOD sets is flagged,
the balanced design with the lean-free score is not."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit
from test_trajectory_calibration import LEAN, NEW_DESIGN, OLD_DESIGN, STEPS, _items_of, null_model

from shiftwork.crossstudy.calibration import STABILITY_CALIBRATION_COLUMNS, calibrate_stability_pairs
from shiftwork.trajectory.scores import label_scores

SCORED = STEPS[::2]  # the cross-study scores every other checkpoint: 13


def _run(design, seed):
    model = null_model(design, n_items=80, id_items=40)
    items = _items_of(model, np.random.default_rng(seed)).assign(model="m")
    scores = label_scores(items, ["model", "run", "step", "set"]).rename(columns={"set": "testset"})
    scores["role"] = np.where(scores["testset"] == "id", "id", "ood")
    return items, scores


def _analysis(score, replicates):
    return {
        "alpha": 0.05,
        "spline_df": 3,
        "method": "linear",
        "gam_df": 10,
        "score": score,
        "dependence": "effective_n",
        "pinned": None,
        "calibration": {"replicates": replicates, "seed": 0, "planted_sd": [1.0]},
    }


def _axis(values):
    """An axis column at the scored checkpoints, as the pair analysis reads it."""
    return pd.DataFrame({"step": SCORED, "testset": "SGS Prob", "accuracy": values, "role": "ood"})


@pytest.mark.simulation
def test_an_axis_that_follows_the_lean_meets_label_split_sets_on_null_runs():
    lean_axis = _axis(expit(LEAN[::2] / 2))
    items, scores = _run(OLD_DESIGN, 1)
    old = calibrate_stability_pairs({"r": lean_axis}, scores, items, _analysis("accuracy", 40))
    assert list(old.columns) == list(STABILITY_CALIBRATION_COLUMNS)
    row = old.iloc[0]
    assert (row["run"], row["n_steps"], row["axes"], row["replicates"]) == ("r", len(SCORED), 1, 40)
    # every label-split set is the lean's share of one label: the axis meets it in nearly every null run
    assert row["rate"] > 0.8 and not row["calibrated"]
    assert row["ci_low"] <= row["rate"] <= row["ci_high"]

    items, scores = _run(NEW_DESIGN, 2)
    new = calibrate_stability_pairs({"r": lean_axis}, scores, items, _analysis("lean_free_accuracy", 40))
    assert new["rate"].iloc[0] <= 0.15
