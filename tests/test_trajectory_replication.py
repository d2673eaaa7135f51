"""The paper's claims tested across runs: values by hand and by scipy's own tests, named rows for
claims without their runs, and the calibration on null replicates."""

from __future__ import annotations

import zlib

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from test_trajectory_calibration import NEW_DESIGN, _items_of, null_model

from shiftwork.trajectory.analysis import PairOptions
from shiftwork.trajectory.replication import (
    ALL,
    CLAIM_CALIBRATION_COLUMNS,
    CLAIM_COLUMNS,
    calibrate_claims,
    claim_table,
    null_reference,
    replication_report,
    standardised,
)

# two models, three seeds each, two OOD pairs: (r_raw, r_primary) per run and pair
RUNS = {
    ("m1", "m1-s0"): {("a", "b"): (0.9, 0.40), ("a", "c"): (0.8, -0.10)},
    ("m1", "m1-s1"): {("a", "b"): (0.85, 0.55), ("a", "c"): (0.7, 0.05)},
    ("m1", "m1-s2"): {("a", "b"): (0.95, 0.35), ("a", "c"): (0.75, 0.00)},
    ("m2", "m2-s0"): {("a", "b"): (0.6, -0.20), ("a", "c"): (0.9, 0.10)},
    ("m2", "m2-s1"): {("a", "b"): (0.7, -0.35), ("a", "c"): (0.85, -0.05)},
    ("m2", "m2-s2"): {("a", "b"): (0.5, -0.10), ("a", "c"): (0.8, 0.15)},
}


def pairs_table(runs=RUNS):
    rows = [
        {"model": m, "run": r, "ood_a": a, "ood_b": b, "r_raw": raw, "r_primary": prim, "p_primary_holm": 0.5}
        for (m, r), pairs in runs.items()
        for (a, b), (raw, prim) in pairs.items()
    ]
    return pd.DataFrame(rows)


def row(table, claim, scope):
    part = table[(table["claim"] == claim) & (table["scope"] == scope)]
    assert len(part) == 1, (claim, scope)
    return part.iloc[0]


def test_between_models_is_students_t_over_the_seeds_with_holm_over_the_pairs():
    table = claim_table(pairs_table(), None)
    assert list(table.columns) == list(CLAIM_COLUMNS)
    ps = {}
    for a, b in (("a", "b"), ("a", "c")):
        z1 = np.arctanh([RUNS[("m1", f"m1-s{k}")][(a, b)][1] for k in range(3)])
        z2 = np.arctanh([RUNS[("m2", f"m2-s{k}")][(a, b)][1] for k in range(3)])
        t = stats.ttest_ind(z1, z2)  # pooled variance: the one-way ANOVA of two groups
        got = row(table, "between_models", f"{a}–{b}")
        assert got["statistic"] == pytest.approx(t.statistic**2)
        assert got["p"] == pytest.approx(t.pvalue)
        assert got["dof"] == 4
        ps[(a, b)] = t.pvalue
        means = [np.mean([RUNS[(m, f"{m}-s{k}")][(a, b)][1] for k in range(3)]) for m in ("m1", "m2")]
        assert got["estimate"] == pytest.approx(max(means) - min(means), abs=2e-3)  # means of tanh(atanh r)
    low, high = sorted(ps.values())
    holm = {low: min(1.0, 2 * low), high: max(min(1.0, 2 * low), high)}
    for (a, b), p in ps.items():
        got = row(table, "between_models", f"{a}–{b}")
        assert got["p_holm"] == pytest.approx(holm[p])
        assert got["significant"] == (holm[p] < 0.05)
    # a-b: m1 clearly positive, m2 clearly negative, small spread between seeds
    assert row(table, "between_models", "a–b")["significant"]
    assert not row(table, "between_models", "a–c")["significant"]


def test_raw_vs_partial_share_and_paired_t_over_runs():
    table = claim_table(pairs_table(), None)
    values = [v for pairs in RUNS.values() for v in pairs.values()]
    share = 1 - np.mean([p**2 for _, p in values]) / np.mean([r**2 for r, _ in values])
    got = row(table, "raw_vs_partial", ALL)
    assert got["estimate"] == pytest.approx(share)
    per_run = [
        np.mean([abs(np.arctanh(r)) for r, _ in pairs.values()])
        - np.mean([abs(np.arctanh(p)) for _, p in pairs.values()])
        for pairs in RUNS.values()
    ]
    t = stats.ttest_1samp(per_run, 0.0)
    assert got["statistic"] == pytest.approx(t.statistic) and got["p"] == pytest.approx(t.pvalue)
    assert got["n_runs"] == 6 and got["dof"] == 5 and got["significant"]
    m2 = row(table, "raw_vs_partial", "m2")
    assert m2["n_runs"] == 3 and m2["n_models"] == 1


def test_early_vs_late_is_a_one_sample_t_over_the_runs_mean_z_differences():
    pairs = pairs_table()
    rng = np.random.default_rng(0)
    windows = pairs[["model", "run", "ood_a", "ood_b"]].assign(
        r_early=rng.uniform(-0.2, 0.8, len(pairs)), r_late=rng.uniform(-0.5, 0.5, len(pairs))
    )
    windows.loc[0, "r_late"] = np.nan  # an undefined window leaves that pair out of its run's mean
    table = claim_table(pairs, windows)
    diffs = np.arctanh(windows["r_early"]) - np.arctanh(windows["r_late"])
    per_run = diffs.groupby(windows["run"]).mean()
    t = stats.ttest_1samp(per_run.to_numpy(), 0.0)
    got = row(table, "early_vs_late", ALL)
    assert got["estimate"] == pytest.approx(per_run.mean())
    assert got["statistic"] == pytest.approx(t.statistic) and got["p"] == pytest.approx(t.pvalue)
    assert per_run["m1-s0"] == pytest.approx(diffs.iloc[1])


def test_claims_without_the_runs_they_need_are_named_rows():
    one = {key: value for key, value in RUNS.items() if key[1] == "m1-s0"}
    table = claim_table(pairs_table(one), None)
    assert not table["significant"].any()
    assert np.isnan(table["p"]).all()
    assert row(table, "between_models", "a–b")["reason"] == "1 model(s); the test needs at least 2"
    assert row(table, "raw_vs_partial", ALL)["reason"].startswith("1 run(s)")
    assert row(table, "early_vs_late", ALL)["reason"] == "0 run(s) with windows; the test needs at least 2"
    # two models, but one with a single seed: no between-model test
    uneven = {key: value for key, value in RUNS.items() if key[1] != "m2-s1" and key[1] != "m2-s2"}
    assert "fewer than 2 runs" in row(claim_table(pairs_table(uneven), None), "between_models", "a–b")["reason"]


def test_a_degenerate_pair_leaves_its_run_out_of_that_pairs_test():
    pairs = pairs_table()
    pairs.loc[(pairs["run"] == "m2-s2") & (pairs["ood_b"] == "b"), "r_primary"] = np.nan
    got = row(claim_table(pairs, None), "between_models", "a–b")
    z1 = np.arctanh([0.40, 0.55, 0.35])
    z2 = np.arctanh([-0.20, -0.35])
    assert got["n_runs"] == 5 and got["p"] == pytest.approx(stats.ttest_ind(z1, z2).pvalue)


def _null_pairs(centres: dict, replicates: int, rng) -> pd.DataFrame:
    """Null pair tables: per real run and pair (``centres``: run -> (model, {pair: null z mean})),
    ``replicates`` null runs ``"<run>/<k>"`` with z drawn around that mean (sd 0.1)."""
    rows = [
        {"model": m, "run": f"{run}/{k}", "ood_a": a, "ood_b": b, "r_raw": 0.5, "p_primary_holm": 0.5}
        | {"r_primary": float(np.tanh(mu + 0.1 * rng.standard_normal()))}
        for run, (m, pairs) in centres.items()
        for (a, b), mu in pairs.items()
        for k in range(replicates)
    ]
    return pd.DataFrame(rows)


def test_the_null_reference_and_its_leave_one_out_standardisation_by_hand():
    rng = np.random.default_rng(1)
    nulls = _null_pairs({"m1-s0": ("m1", {("a", "b"): 0.3, ("a", "c"): -0.2})}, 6, rng)
    reference = null_reference(nulls)
    z = np.arctanh(nulls["r_primary"].to_numpy())
    ab = (nulls["ood_b"] == "b").to_numpy()
    got = reference.set_index(["ood_a", "ood_b"]).loc[("a", "b")]
    assert got["run"] == "m1-s0" and got["null_n"] == 6
    assert got["null_mean"] == pytest.approx(z[ab].mean()) and got["null_sd"] == pytest.approx(z[ab].std(ddof=1))
    # a real run reads its run's reference; a null replicate's own value is left out of it
    real = pd.DataFrame({"run": ["m1-s0"], "ood_a": ["a"], "ood_b": ["b"], "r_primary": [0.6], "p_primary_holm": [0.5]})
    assert standardised(real, reference)[0] == pytest.approx((np.arctanh(0.6) - z[ab].mean()) / z[ab].std(ddof=1))
    loo = standardised(nulls, reference, leave_out=True)
    for i in np.flatnonzero(ab):
        others = z[ab & (np.arange(len(z)) != i)]
        assert loo[i] == pytest.approx((z[i] - others.mean()) / others.std(ddof=1))
    # a run without a reference, or a pair no null defines: NaN, left out of the test
    assert np.isnan(standardised(real.assign(run="m9-s0"), reference)[0])


def test_standardised_models_differ_only_by_coupling_beyond_their_nulls():
    """Two models whose nulls put a pair at different places (the lean drives it in m1's runs and
    not in m2's): the raw z differ between the models with no coupling at all, the standardised
    do not; a coupling beyond m1's null is found either way."""
    rng = np.random.default_rng(2)
    centres = {
        f"{m}-s{s}": (m, {("a", "b"): mu, ("a", "c"): 0.0}) for m, mu in (("m1", 0.6), ("m2", -0.4)) for s in range(3)
    }
    reference = null_reference(_null_pairs(centres, 200, rng))
    at_null = pd.concat([_null_pairs({run: c}, 1, rng).assign(run=run) for run, c in centres.items()])
    raw = row(claim_table(at_null, None), "between_models", "a–b")
    assert raw["significant"] and "standardised" not in raw["test"]
    std = row(claim_table(at_null, None, reference=reference), "between_models", "a–b")
    assert not std["significant"] and std["test"].endswith("each standardised by its run's null")
    coupled = at_null.copy()
    m1 = (coupled["model"] == "m1") & (coupled["ood_b"] == "c")
    coupled.loc[m1, "r_primary"] = np.tanh(np.arctanh(coupled.loc[m1, "r_primary"]) + 0.6)
    assert row(claim_table(coupled, None, reference=reference), "between_models", "a–c")["significant"]


def _null_runs(models=("m1", "m2"), seeds=3):
    """Items and scores of ``seeds`` runs of each model, every run drawn from one hand-built null
    (three balanced OOD sets, no coupling)."""
    design = dict(list(NEW_DESIGN.items())[:3])
    model = null_model(design, n_items=60, id_items=30)
    frames, scores = [], []
    for m in models:
        for s in range(seeds):
            run = f"{m}-s{s}"
            items = _items_of(model, np.random.default_rng(zlib.crc32(run.encode()))).assign(run=run, model=m)
            frames.append(items)
            acc = items.groupby(["step", "set"])["correct"].mean().reset_index()
            scores.append(
                acc.rename(columns={"set": "testset", "correct": "accuracy"}).assign(
                    model=m, run=run, role=np.where(acc["set"] == "id", "id", "ood")
                )
            )
    return pd.concat(frames, ignore_index=True), pd.concat(scores, ignore_index=True)


@pytest.mark.simulation
def test_calibrate_claims_finds_a_coupling_planted_in_one_model_only():
    items, scores = _null_runs()
    options = PairOptions(method="linear", score="accuracy", dependence="independent")
    calibration = calibrate_claims(scores, items, options, replicates=6, seed=0, planted_sd=[3.0])
    table = calibration.table
    assert list(table.columns) == list(CLAIM_CALIBRATION_COLUMNS)
    # the reference: every run and OOD pair, from its 6 null replicates
    assert len(calibration.reference) == 6 * 3 and (calibration.reference["null_n"] == 6).all()
    assert table[["claim", "kind"]].values.tolist() == [
        ["raw_vs_partial", "null_mean"],
        ["between_models", "null"],
        ["early_vs_late", "null"],
        ["between_models", "planted"],
    ]
    null = table[(table["claim"] == "between_models") & (table["kind"] == "null")].iloc[0]
    planted = table[table["kind"] == "planted"].iloc[0]
    # a log-odds component of sd 3 shared by two sets in one model's runs and absent from the other's
    assert planted["rate"] >= 4 / 6 and planted["rate"] > null["rate"]
    assert null["calibrated"] == (null["rate"] <= 0.05)
    # the null runs' ID explains their raw coupling: the ID control removes most of it
    assert table.loc[0, "rate"] > 0.3
    text = replication_report(claim_table(_pairs_of(scores), None, reference=calibration.reference), table, scores)
    assert "## (b) Does a pair's ID-controlled correlation differ between models?" in text


def _pairs_of(scores):
    from shiftwork.trajectory.analysis import pair_table

    return pair_table(scores, method="linear", resamples=0)
