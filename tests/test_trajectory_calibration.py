"""Null runs, the effective number of checkpoints, the lean-free score and the calibration step."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit
from statsmodels.tsa.stattools import acf

from shiftwork.trajectory import null
from shiftwork.trajectory.analysis import PairOptions, pair_table
from shiftwork.trajectory.calibration import CALIBRATION_COLUMNS, calibrate, false_positive_rate, power
from shiftwork.trajectory.dependence import MIN_EFFECTIVE_N, effective_n
from shiftwork.trajectory.scores import balanced_accuracy, empirical_logit, lean_free_from_means
from shiftwork.trajectory.sections import CalibrationSettings
from shiftwork.trajectory.steps import _calibration_section

E, N = "entailment", "not_entailment"
DATA = Path(__file__).parent / "data"
STEPS = np.arange(0, 52, 2)  # 26 checkpoints two steps apart, as the default run
T = len(STEPS)
# the checkpoints' lean towards entailment, in log odds: the lean null.fit_null found in the
# label-split default run (smollm2-lora-s0 at 779d14d; standard deviation 2.4), while the ID skill rises
LEAN = np.array(
    [-5.79, -0.46, 4.61, 4.95, 2.71, 0.27, -1.96, -1.35, -0.13, -1.5, -1.05, 1.97, 2.56]
    + [1.42, -1.81, -3.7, -4.18, -3.18, 0.55, 2.39, 2.39, 1.48, -0.77, -1.06, 0.05, 1.59]
)
SKILL = np.linspace(0.3, 1.8, T) + 0.2 * np.sin(np.arange(T))
# levels of the log odds of a right answer: entailment learned better than not_entailment, so that
# the balanced accuracy moves with the size of the lean
LEVEL = {E: 1.2, N: -0.5}
OLD_DESIGN = {
    "overlap_entailed": (E,),
    "overlap_non_entailed": (N,),
    "subsequence_entailed": (E,),
    "subsequence_non_entailed": (N,),
}
NEW_DESIGN = {name: (E, N) for name in ("overlap", "subsequence", "negation", "typos")}


def null_model(design, n_items=200, sigma=0.1, phi=0.45, id_items=100):
    """A null run by hand: an ID set of ``id_items`` items a label whose hits follow SKILL and LEAN,
    its measured skill (the mean of its labels' empirical logits) driving the OOD sets of ``design`` (set -> labels), each label ``n_items / labels`` items."""
    rng = np.random.default_rng(7)
    id_p = np.array([expit(1.5 * SKILL + LEAN), expit(1.5 * SKILL - LEAN)])
    id_hits = rng.binomial(id_items, id_p).astype(float)
    cell_set, sign, n, level = [0, 0], [1.0, -1.0], [id_items, id_items], [0.0, 0.0]
    for s, labels in enumerate(design.values(), start=1):
        for label in labels:
            cell_set.append(s), sign.append(1.0 if label == E else -1.0), n.append(n_items // len(labels))
            level.append(LEVEL[label])
    # the OOD sets follow the ID set as measured (the null of a partial correlation given the ID
    # column), as fit_null has it
    id_skill = empirical_logit(id_hits, id_items).mean(axis=0)
    return null.NullModel(
        id_skill=id_skill,
        id_hits=id_hits,
        lean=LEAN,
        sets=("id", *design),
        cell_set=np.array(cell_set),
        cell_sign=np.array(sign),
        cell_n=np.array(n),
        level=np.array(level),
        slope=np.where(np.array(cell_set) > 0, 0.8, 0.0),
        phi=phi,
        sigma=np.array([0.0] + [sigma] * len(design)),
        steps=STEPS,
    )


# --------------------------------------------------------------------------- the effective number


def test_effective_n_is_pyper_and_petermans_formula():
    rng = np.random.default_rng(0)
    a = np.cumsum(rng.standard_normal(30)) * 0.3 + rng.standard_normal(30)
    b = np.cumsum(rng.standard_normal(30)) * 0.3 + rng.standard_normal(30)
    lags = 30 // 5
    ra, rb = acf(a, nlags=lags, fft=False)[1:], acf(b, nlags=lags, fft=False)[1:]
    k = np.arange(1, lags + 1)
    by_hand = 1.0 / (1 / 30 + (2 / 30) * np.sum((30 - k) / 30 * ra * rb))
    assert by_hand < 30
    assert effective_n(a, b) == pytest.approx(by_hand)


def test_effective_n_never_exceeds_n_nor_falls_below_its_floor():
    alternating = np.array([1.0, -1.0] * 10)
    smooth = np.linspace(-1.0, 1.0, 20) ** 3
    # lag-1 autocorrelations of opposite signs would give more than n: counted as n
    assert effective_n(alternating, smooth) == 20.0
    # two identical strongly autocorrelated series: far fewer than n
    assert MIN_EFFECTIVE_N < effective_n(smooth, smooth) < 10
    # a floor for series whose lags would leave fewer: a step from 0 to 1 over 19 lags leaves
    # 1 / (1/20 + 2/20 * sum((20 - k) / 20 * rho(k)**2)) = 3.94 by the formula
    step = np.r_[np.zeros(10), np.ones(10)]
    assert effective_n(step, step, max_lag=19) == MIN_EFFECTIVE_N
    trend = np.ones(20)
    assert effective_n(trend, trend) == 20.0  # constant series: no autocorrelation to count
    assert effective_n(alternating[:4], alternating[:4]) == 4.0  # n // 5 = 0 lags: n


def test_effective_n_p_values_are_larger_on_autocorrelated_runs():
    scores = _scores_table(np.random.default_rng(3), T, smooth=True)
    independent = pair_table(scores, method="linear", resamples=0)
    dependent = pair_table(scores, method="linear", resamples=0, dependence="effective_n")
    assert (dependent["n_eff_partial"] < T).all() and (independent["n_eff_partial"] == T).all()
    assert (dependent["p_partial"] > independent["p_partial"]).all()
    pd.testing.assert_series_equal(dependent["r_partial"], independent["r_partial"])
    # the p-value is Student t's on n_eff - 3 degrees of freedom
    r, n_eff = dependent["r_partial"].iloc[0], dependent["n_eff_partial"].iloc[0]
    from scipy import stats

    t = r * math.sqrt((n_eff - 3) / (1 - r * r))
    assert dependent["p_partial"].iloc[0] == pytest.approx(2 * stats.t.sf(abs(t), n_eff - 3))


def _scores_table(rng, t, smooth):
    sets = ["id", "a", "b", "c"]
    values = {"id": np.linspace(0.5, 0.9, t)}
    for name in sets[1:]:
        noise = np.cumsum(rng.standard_normal(t)) if smooth else rng.standard_normal(t)
        values[name] = np.clip(0.6 + 0.2 * values["id"] + 0.02 * noise, 0, 1)
    rows = [
        {"model": "m", "run": "r", "step": s, "testset": name, "accuracy": values[name][s], "role": role}
        for s in range(t)
        for name, role in zip(sets, ["id", "ood", "ood", "ood"], strict=True)
    ]
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- the lean-free score


def test_a_logistic_lean_cancels_in_the_lean_free_accuracy_and_not_in_the_balanced():
    a, b, big = 1.2, -0.5, 1e9
    sizes = np.array([[big], [big]])
    for lean in (-3.0, 0.0, 2.0):
        means = np.array([[expit(a + lean)], [expit(b - lean)]])
        assert lean_free_from_means(means, sizes)[0] == pytest.approx(expit((a + b) / 2), abs=1e-8)
    balanced = [np.mean([expit(a + lean), expit(b - lean)]) for lean in (-3.0, 0.0, 2.0)]
    assert balanced[1] - balanced[0] > 0.03 and balanced[1] - balanced[2] > 0.05
    # matrix form: balanced_accuracy of the same per-label means
    correct = np.array([[1, 0], [1, 1], [0, 1], [0, 0]])
    assert balanced_accuracy(correct, [E, E, N, N]).tolist() == [0.5, 0.5]


# --------------------------------------------------------------------------- null runs


def test_fit_null_recovers_the_lean_and_the_levels_of_a_run():
    truth = null_model(NEW_DESIGN, n_items=4000, sigma=0.05, id_items=2000)
    hits = null.simulate_runs(truth, np.random.default_rng(1), 1, "accuracy")  # shape only
    assert hits.shape == (1, T, 5)
    items = _items_of(truth, np.random.default_rng(2))
    fitted = null.fit_null(items, "r", "id")
    assert fitted.sets == ("id", *sorted(NEW_DESIGN))
    assert np.corrcoef(fitted.lean, truth.lean)[0, 1] > 0.95
    ood = fitted.cell_set > 0
    ent = ood & (fitted.cell_sign > 0)
    # levels are relative to the fitted lean's mean, which need not be 0: the mean of the two labels' levels is
    assert np.mean(fitted.level[ent] + fitted.level[ood & ~ent]) / 2 == pytest.approx(
        np.mean(list(LEVEL.values())), abs=0.15
    )


def _items_of(model, rng):
    """One run's items: every cell's hits at every checkpoint drawn from ``model``, as item rows."""
    zid = (model.id_skill - model.id_skill.mean()) / model.id_skill.std()
    rows = []
    for c in range(len(model.cell_set)):
        name, label = model.sets[model.cell_set[c]], E if model.cell_sign[c] > 0 else N
        for t, step in enumerate(model.steps):
            if model.cell_set[c] == 0:
                k = int(model.id_hits[np.flatnonzero(model.cell_set == 0).tolist().index(c), t])
            else:
                p = expit(model.level[c] + model.slope[c] * zid[t] + model.cell_sign[c] * model.lean[t])
                k = int(rng.binomial(model.cell_n[c], p))
            rows += [
                {"run": "r", "step": step, "set": name, "example_id": f"{label}-{i}", "label": label, "correct": i < k}
                for i in range(model.cell_n[c])
            ]
    return pd.DataFrame(rows)


def fitted(name):
    """A null fitted to a real default run (``python -m shiftwork.trajectory.null ITEMS RUN id OUT``):
    ``label_split`` to the run of the label-split suite (779d14d), ``balanced`` to the run of the
    balanced suite (fae6fee), both smollm2-lora-s0, 26 checkpoints."""
    return null.model_from_record(json.loads((DATA / f"null_{name}_run.json").read_text()))


@pytest.mark.simulation
def test_the_label_split_design_finds_pairs_on_null_runs():
    """The design the default had: label-split sets, raw accuracy, checkpoints counted as
    independent, on null runs shaped like its own run: a Holm-significant pair in nearly every one."""
    model = fitted("label_split")
    assert model.sets[1:] == ("negation", *sorted(OLD_DESIGN))
    options = PairOptions(method="gam", score="accuracy", dependence="independent")
    old = false_positive_rate(model, options, np.random.default_rng(11), 200) / 200
    assert old > 0.9
    # no score cures a label-split set: the lean-free score of a one-label set keeps the lean
    new_analysis = PairOptions(method="gam", score="lean_free_accuracy", dependence="effective_n")
    assert false_positive_rate(model, new_analysis, np.random.default_rng(11), 20) / 20 > 0.9


def expected_pinned(model, share):
    """The steps the analysis's ``pinned`` rule would leave out of a run drawn from ``model``: those
    at which the expected share of the predictions that are one label, pooled over the run's
    sets as ``entailment_share`` is (the ID set's from its real hits), is at least ``share``."""
    zid = (model.id_skill - model.id_skill.mean()) / model.id_skill.std()
    eta = model.level[:, None] + model.slope[:, None] * zid + model.cell_sign[:, None] * model.lean
    right = expit(eta) * model.cell_n[:, None]
    id_cells = np.flatnonzero(model.cell_set == 0)
    right[id_cells] = model.id_hits
    # an item is answered entailment when it is right on an entailment item or wrong on the other label
    entailment = np.where(model.cell_sign[:, None] > 0, right, model.cell_n[:, None] - right)
    ent_share = entailment.sum(axis=0) / model.cell_n.sum()
    return model.steps[np.maximum(ent_share, 1.0 - ent_share) >= share]


@pytest.mark.simulation
def test_the_balanced_design_lowers_the_false_positive_rate():
    """The new default on null runs shaped like its own run: far fewer false positives than the
    label-split design (above) or the balanced accuracy give. At every checkpoint the rate is
    still well above alpha: where the lean pins one label, it reaches the lean-free score through
    the empirical logit's continuity correction. With the lean taken away the same analysis is
    calibrated: what is left above alpha is the lean's."""
    model = fitted("balanced")
    options = PairOptions(method="gam", score="lean_free_accuracy", dependence="effective_n")
    every = false_positive_rate(model, options, np.random.default_rng(12), 100) / 100
    assert 0.08 < every < 0.25
    balanced = dataclasses.replace(options, score="balanced_accuracy")
    keep = ~np.isin(model.steps, expected_pinned(model, 0.8))
    assert false_positive_rate(model, balanced, np.random.default_rng(12), 40, keep=keep) / 40 > 0.25
    still = dataclasses.replace(model, lean=np.zeros_like(model.lean))
    assert false_positive_rate(still, options, np.random.default_rng(12), 80) / 80 <= 0.05


@pytest.mark.simulation
def test_the_pinned_share_is_what_calibrates_the_default():
    """The default's ``pinned: 0.8`` on null runs fitted to the default run :
    leaving out the checkpoints whose predictions are at least 0.9 one label (steps 0, 4, 6 and 8,
    as the run's own label_bias.parquet has them) leaves the family-wise false-positive rate above
    alpha; at 0.8 it is at most alpha. 400 replicates each: the rate at 0.9 is near alpha (0.05 of the first 200)."""
    model = fitted("balanced")
    options = PairOptions(method="gam", score="lean_free_accuracy", dependence="effective_n")
    real = json.loads((DATA / "null_balanced_run.json").read_text())["pinned_steps"]
    assert expected_pinned(model, 0.9).tolist() == real
    at = {}
    for share in (0.9, 0.8):
        keep = ~np.isin(model.steps, expected_pinned(model, share))
        at[share] = false_positive_rate(model, options, np.random.default_rng(21), 400, keep=keep) / 400
    assert at[0.9] > 0.05
    assert at[0.8] <= 0.05
    assert expected_pinned(model, 0.8).tolist() == [0, 4, 6, 8, 24, 32]


@pytest.mark.simulation
def test_a_planted_coupling_is_found_more_often_the_larger_it_is():
    model = null_model(NEW_DESIGN)
    options = PairOptions(method="gam", score="lean_free_accuracy", dependence="effective_n")
    small = power(model, options, np.random.default_rng(13), 36, 0.1)
    large = power(model, options, np.random.default_rng(13), 36, 1.0)
    assert large / 36 > 0.5 and small < large


# --------------------------------------------------------------------------- the calibration step


def test_calibrate_gives_a_null_row_and_a_row_per_planted_size():
    model = null_model(OLD_DESIGN, n_items=40, id_items=20)
    items = _items_of(model, np.random.default_rng(5))
    # the analysed checkpoints: every one but the first two (left out, as pinned ones are)
    scores = pd.DataFrame(
        [
            {"model": "m", "run": "r", "step": int(step), "testset": name, "role": role}
            for step in STEPS[2:]
            for name, role in (("id", "id"), ("overlap_entailed", "ood"))
        ]
    )
    options = PairOptions(method="linear", score="accuracy", dependence="independent")
    table = calibrate(scores, items, options, CalibrationSettings(replicates=12, seed=0, planted_sd=[0.5, 2.0]))
    assert list(table.columns) == list(CALIBRATION_COLUMNS)
    assert table["kind"].tolist() == ["null", "planted", "planted"]
    assert table["planted_sd"].tolist() == [0.0, 0.5, 2.0]
    assert (table["rate"] == table["hits"] / 12).all() and (table["ci_low"] <= table["rate"]).all()
    null_rate = table["rate"].iloc[0]
    assert table["calibrated"].tolist() == [null_rate <= 0.05] * 3
    assert null_rate > 0.5  # label-split sets under a swinging lean
    text = "\n".join(_calibration_section(table, pd.DataFrame({"run": ["r"], "sign": ["positive"]})))
    assert "NOT calibrated" in text and "are not findings" in text
