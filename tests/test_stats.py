"""Tests of shiftwork.stability.stats on a tiny deltas table whose numbers are worked out by hand.

The table (model m1): dataset dA has prompts p1 and p2, dataset dB has prompt p3. Each prompt
has one baseline row (all zero, flipped False) and two variants. On the normalised scale the
two variants of each prompt are

    p1: 0.3, 0.4    RMS = sqrt((0.09 + 0.16) / 2) = sqrt(0.125) = 0.353553...
    p2: 0.6, 0.8    RMS = sqrt((0.36 + 0.64) / 2) = sqrt(0.5)   = 0.707106...
    p3: 0.1, -0.1   RMS = sqrt((0.01 + 0.01) / 2) = 0.1

times a per-axis factor F = Act 1, BLEU 0.5, BERT 0.1, Prob -1, Ent 2, MR 0.2 (so each
axis's RMS is |F| times the base RMS and a mix-up of axes shows). The raw deltas are the
normalised ones times R (DEFAULT_R: Act 2, BLEU 100, BERT 1, Prob 250, Ent 10, MR 1).
Model m2 is m1 with every raw delta doubled, so all its RMS values double.
"""

from __future__ import annotations

import math
import statistics

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from shiftwork.stability import stats
from shiftwork.stability.stats import AXES, DEFAULT_R

S125 = math.sqrt(0.125)  # RMS of p1: 0.35355...
S5 = math.sqrt(0.5)  # RMS of p2: 0.70710...
F = {"Act": 1.0, "BLEU": 0.5, "BERT": 0.1, "Prob": -1.0, "Ent": 2.0, "MR": 0.2}

# Raw deltas written out (normalised value x F x R), one tuple per axis in AXES order.
RAW = {
    # (prompt, variant): (Act, BLEU, BERT, Prob, Ent, MR)
    ("p1", "v1"): (0.6, 15.0, 0.03, -75.0, 6.0, 0.06),  # base 0.3
    ("p1", "v2"): (0.8, 20.0, 0.04, -100.0, 8.0, 0.08),  # base 0.4
    ("p2", "v1"): (1.2, 30.0, 0.06, -150.0, 12.0, 0.12),  # base 0.6
    ("p2", "v2"): (1.6, 40.0, 0.08, -200.0, 16.0, 0.16),  # base 0.8
    ("p3", "v1"): (0.2, 5.0, 0.01, -25.0, 2.0, 0.02),  # base 0.1
    ("p3", "v2"): (-0.2, -5.0, -0.01, 25.0, -2.0, -0.02),  # base -0.1
}
DATASET = {"p1": "dA", "p2": "dA", "p3": "dB"}
# v1 is a register variant (strength 0.5 for p1 and p2, 1.0 for p3), v2 a noise variant
# without a position; v1 flips on p1 and p2, v2 flips on p2 only.
FLIPPED = {
    ("p1", "v1"): True,
    ("p1", "v2"): False,
    ("p2", "v1"): True,
    ("p2", "v2"): True,
    ("p3", "v1"): False,
    ("p3", "v2"): False,
}
STRENGTH = {"p1": 0.5, "p2": 0.5, "p3": 1.0}


def make_deltas(baseline_values: float = 0.0) -> pd.DataFrame:
    rows = []
    for prompt in ("p1", "p2", "p3"):
        rows.append(
            {
                "model": "m1",
                "dataset": DATASET[prompt],
                "prompt_id": prompt,
                "variant_id": "v0",
                "family": "baseline",
                "kind": "none",
                "position": None,
                "strength": 0.0,
                **{a: baseline_values for a in AXES},
                "flipped": False,
            }
        )
        for variant in ("v1", "v2"):
            register = variant == "v1"
            rows.append(
                {
                    "model": "m1",
                    "dataset": DATASET[prompt],
                    "prompt_id": prompt,
                    "variant_id": variant,
                    "family": "register" if register else "noise",
                    "kind": "formal" if register else "typo",
                    "position": "prefix" if register else None,
                    "strength": STRENGTH[prompt] if register else 0.05,
                    **dict(zip(AXES, RAW[(prompt, variant)])),
                    "flipped": FLIPPED[(prompt, variant)],
                }
            )
    m1 = pd.DataFrame(rows)
    m2 = m1.copy()
    m2["model"] = "m2"
    for a in AXES:
        m2[a] = m2[a] * 2.0
    return pd.concat([m1, m2], ignore_index=True)


@pytest.fixture()
def deltas() -> pd.DataFrame:
    return make_deltas()


@pytest.fixture()
def per_prompt(deltas) -> pd.DataFrame:
    return stats.prompt_instability(stats.normalise(deltas, DEFAULT_R))


def row(df: pd.DataFrame, **keys) -> pd.Series:
    mask = np.ones(len(df), dtype=bool)
    for k, v in keys.items():
        mask &= (df[k] == v).to_numpy()
    assert mask.sum() == 1, f"expected one row for {keys}, found {mask.sum()}"
    return df[mask].iloc[0]


# ----------------------------------------------------------------------------- normalise


def test_normalise_divides_each_axis_by_its_scale(deltas):
    out = stats.normalise(deltas, DEFAULT_R)
    r = row(out, model="m1", prompt_id="p3", variant_id="v1")
    assert r["Prob"] == pytest.approx(-0.1)  # -25 / 250
    assert r["Act"] == pytest.approx(0.1)  # 0.2 / 2
    assert r["BLEU"] == pytest.approx(0.05)  # 5 / 100 (base 0.1 x F 0.5)
    assert r["Ent"] == pytest.approx(0.2)  # 2 / 10 (base 0.1 x F 2)
    # a copy: the input is untouched and all rows (baseline too) are kept
    assert deltas.loc[1, "Prob"] == -75.0
    assert len(out) == len(deltas)


def test_normalise_rejects_bad_R(deltas):
    r = dict(DEFAULT_R)
    del r["Ent"]
    with pytest.raises(ValueError, match="Ent"):
        stats.normalise(deltas, r)
    with pytest.raises(ValueError, match="BLEU"):
        stats.normalise(deltas, {**DEFAULT_R, "BLEU": 0.0})
    with pytest.raises(ValueError, match="MR"):
        stats.normalise(deltas, {**DEFAULT_R, "MR": -1.0})
    with pytest.raises(ValueError, match="Bleu"):
        stats.normalise(deltas, {**DEFAULT_R, "Bleu": 100.0})


def test_normalise_names_missing_axis_column(deltas):
    with pytest.raises(ValueError, match="Prob"):
        stats.normalise(deltas.drop(columns="Prob"), DEFAULT_R)


# ----------------------------------------------------------------------------- per prompt


def test_prompt_instability_is_rms_over_variants(per_prompt):
    assert len(per_prompt) == 6  # 2 models x 3 prompts
    p1 = row(per_prompt, model="m1", prompt_id="p1")
    assert p1["Act"] == pytest.approx(0.35355339059327373)  # sqrt((0.3^2 + 0.4^2) / 2)
    assert p1["Act"] == pytest.approx(S125)
    for axis in AXES:  # every axis is |F| x the base RMS
        assert p1[axis] == pytest.approx(abs(F[axis]) * S125), axis
        assert row(per_prompt, model="m1", prompt_id="p2")[axis] == pytest.approx(abs(F[axis]) * S5)
        # signs cancel nothing: RMS of (0.1, -0.1) is 0.1
        assert row(per_prompt, model="m1", prompt_id="p3")[axis] == pytest.approx(abs(F[axis]) * 0.1)
        # m2's deltas are doubled
        assert row(per_prompt, model="m2", prompt_id="p1")[axis] == pytest.approx(2 * abs(F[axis]) * S125)


def test_prompt_instability_flip_rate_and_counts(per_prompt):
    # p1: one of two variants flipped; p2: both; p3: none (baseline rows not counted)
    assert row(per_prompt, model="m1", prompt_id="p1")["flip_rate"] == pytest.approx(0.5)
    assert row(per_prompt, model="m1", prompt_id="p2")["flip_rate"] == pytest.approx(1.0)
    assert row(per_prompt, model="m1", prompt_id="p3")["flip_rate"] == pytest.approx(0.0)
    assert set(per_prompt["n_variants"]) == {2}
    assert list(per_prompt.columns) == ["model", "dataset", "prompt_id", *AXES, "n_variants", "flip_rate"]


def test_baseline_rows_are_excluded():
    # Were the zero baseline included, p1's Act RMS would be sqrt((0.09 + 0.16 + 0) / 3) = 0.2887
    # and its flip rate 1/3, not 0.5.
    pp = stats.prompt_instability(stats.normalise(make_deltas(), DEFAULT_R))
    assert row(pp, model="m1", prompt_id="p1")["Act"] == pytest.approx(S125)
    assert row(pp, model="m1", prompt_id="p1")["Act"] != pytest.approx(math.sqrt(0.25 / 3))
    # Even nonzero values in baseline rows change nothing.
    polluted = stats.prompt_instability(stats.normalise(make_deltas(baseline_values=99.0), DEFAULT_R))
    pd.testing.assert_frame_equal(polluted, pp)
    bd = stats.breakdown(stats.normalise(make_deltas(baseline_values=99.0), DEFAULT_R))
    assert "baseline" not in set(bd["family"])


def test_prompt_instability_names_missing_column(deltas):
    with pytest.raises(ValueError, match="flipped"):
        stats.prompt_instability(stats.normalise(deltas, DEFAULT_R).drop(columns="flipped"))


# ----------------------------------------------------------------------------- pooling


def test_dataset_sgs_means_over_prompts(per_prompt):
    ds = stats.dataset_sgs(per_prompt)
    a = row(ds, model="m1", dataset="dA")
    assert a["Act"] == pytest.approx((S125 + S5) / 2)  # 0.530330
    assert a["n_prompts"] == 2
    assert a["flip_rate"] == pytest.approx((0.5 + 1.0) / 2)
    b = row(ds, model="m1", dataset="dB")
    assert b["Act"] == pytest.approx(0.1)
    assert b["Ent"] == pytest.approx(0.2)
    assert b["n_prompts"] == 1
    assert row(ds, model="m2", dataset="dA")["Act"] == pytest.approx(S125 + S5)


def test_total_sgs_pools_prompts_not_dataset_means(per_prompt):
    total = stats.total_sgs(per_prompt)
    m1 = row(total, model="m1")
    pooled = (S125 + S5 + 0.1) / 3  # 0.386887: every prompt weighs 1/3
    mean_of_means = ((S125 + S5) / 2 + 0.1) / 2  # 0.315165: what it must NOT be
    assert m1["Act"] == pytest.approx(pooled)
    assert m1["Act"] == pytest.approx(0.3868867, abs=1e-6)
    assert abs(m1["Act"] - mean_of_means) > 0.07
    assert m1["n_prompts"] == 3
    assert m1["flip_rate"] == pytest.approx((0.5 + 1.0 + 0.0) / 3)
    assert row(total, model="m2")["Act"] == pytest.approx(2 * pooled)


def test_flip_rates(per_prompt):
    fr = stats.flip_rates(per_prompt)
    assert row(fr, model="m1", dataset="dA")["flip_rate"] == pytest.approx(0.75)
    assert row(fr, model="m1", dataset="dB")["flip_rate"] == pytest.approx(0.0)
    ds = stats.dataset_sgs(per_prompt)
    assert list(fr["flip_rate"]) == pytest.approx(list(ds["flip_rate"]))


# ----------------------------------------------------------------------------- t-tests


@pytest.mark.parametrize(
    "p, expected",
    [
        (0.0009, "***"),
        (0.001, "**"),
        (0.0099, "**"),
        (0.01, "*"),
        (0.0499, "*"),
        (0.05, ""),
        (0.5, ""),
        (float("nan"), ""),
    ],
)
def test_significance_marker_thresholds(p, expected):
    assert stats.significance_marker(p) == expected


def test_ttests_match_scipy_and_hand_formula(per_prompt):
    tests = stats.ttests(per_prompt, [-1.0, 0.05, 0.5], by=["model"])
    assert list(tests.columns) == ["model", "axis", "eps", "mean", "t", "p", "n", "marker"]
    assert len(tests) == 2 * len(AXES) * 3
    sample = [S125, S5, 0.1]  # m1's per-prompt Act values
    mean = statistics.mean(sample)
    sd = statistics.stdev(sample)  # n - 1 denominator: 0.304923
    for eps in (-1.0, 0.05, 0.5):
        r = row(tests, model="m1", axis="Act", eps=eps)
        direct = sps.ttest_1samp(sample, eps, alternative="greater")
        hand_t = (mean - eps) / (sd / math.sqrt(3))
        assert r["n"] == 3
        assert r["mean"] == pytest.approx(mean)
        assert r["t"] == pytest.approx(direct.statistic)
        assert r["t"] == pytest.approx(hand_t)
        assert r["p"] == pytest.approx(direct.pvalue)
        # one-sided p from the t distribution with n - 1 = 2 degrees of freedom
        assert r["p"] == pytest.approx(sps.t.sf(hand_t, df=2))
        assert r["marker"] == stats.significance_marker(r["p"])
    # worked values: eps 0.05 -> t = 0.336887 / 0.176047 = 1.9136, p = 0.098 (no marker);
    # eps -1 -> t = 7.878, p = 0.0079 ("**"); eps 0.5 -> t < 0, p > 0.5 (no marker)
    assert row(tests, model="m1", axis="Act", eps=0.05)["t"] == pytest.approx(1.9136, abs=1e-3)
    assert row(tests, model="m1", axis="Act", eps=0.05)["marker"] == ""
    assert row(tests, model="m1", axis="Act", eps=-1.0)["marker"] == "**"
    assert row(tests, model="m1", axis="Act", eps=0.5)["p"] > 0.5


def test_ttests_by_dataset_gives_nan_for_a_single_prompt(per_prompt):
    tests = stats.ttests(per_prompt, [0.05], by=["model", "dataset"])
    assert list(tests.columns[:2]) == ["model", "dataset"]
    single = row(tests, model="m1", dataset="dB", axis="Act", eps=0.05)
    assert single["n"] == 1
    assert single["mean"] == pytest.approx(0.1)
    assert math.isnan(single["t"]) and math.isnan(single["p"])
    assert single["marker"] == ""
    two = row(tests, model="m1", dataset="dA", axis="Act", eps=0.05)
    assert two["p"] == pytest.approx(sps.ttest_1samp([S125, S5], 0.05, alternative="greater").pvalue)


def constant_per_prompt(value: float, n: int = 3) -> pd.DataFrame:
    ids = [f"p{i}" for i in range(n)]
    return pd.DataFrame({"model": ["m"] * n, "dataset": ["d"] * n, "prompt_id": ids, **{a: [value] * n for a in AXES}})


@pytest.mark.filterwarnings("ignore:Precision loss occurred")
def test_ttests_constant_sample_above_eps_is_significant():
    # every prompt unstable by 0.2 > eps 0.05: t = +inf, p = 0 (scipy: t ~ 7.6e15, p ~ 8.6e-33, from
    # the mean 0.20000000000000004 rounded in floating point), so the marker is kept
    tests = stats.ttests(constant_per_prompt(0.2), 0.05, by=["model"])
    assert (tests["t"] == np.inf).all() and (tests["p"] == 0.0).all()
    assert set(tests["marker"]) == {"***"}
    assert (tests["mean"] == 0.2).all() and (tests["n"] == 3).all()
    scipy_p = sps.ttest_1samp([0.2, 0.2, 0.2], 0.05, alternative="greater").pvalue
    assert scipy_p < 1e-30


def test_ttests_constant_sample_at_or_below_eps_is_not():
    # all equal to eps: t = 0 / 0 = NaN, p = 1 (scipy: p = 0.146 from the rounded mean)
    at = stats.ttests(constant_per_prompt(0.05), 0.05, by=["model"])
    assert at["t"].isna().all() and (at["p"] == 1.0).all() and set(at["marker"]) == {""}
    # all below eps (a model stable on every prompt): t = -inf, p = 1, as scipy gives
    below = stats.ttests(constant_per_prompt(0.0), 0.05, by=["model"])
    assert (below["t"] == -np.inf).all() and (below["p"] == 1.0).all() and set(below["marker"]) == {""}
    assert sps.ttest_1samp([0.0, 0.0, 0.0], 0.05, alternative="greater").pvalue == 1.0


def test_ttests_single_value_is_undefined_as_in_the_method():
    # n = 1: no variance estimate; the method (and scipy) give NaN
    mean, t, p, n = stats.one_sided_ttest([0.2], 0.05)
    assert (mean, n) == (0.2, 1) and math.isnan(t) and math.isnan(p)
    mean, t, p, n = stats.one_sided_ttest([np.nan, np.nan], 0.05)
    assert n == 0 and math.isnan(mean) and math.isnan(t) and math.isnan(p)


# ----------------------------------------------------------------------------- unobservable axes


def test_unobservable_axis_stays_missing_through_the_chain():
    # m2 is an API model: no activations, no log-probabilities on any row (baselines included)
    deltas = make_deltas()
    deltas.loc[deltas["model"] == "m2", ["Act", "Prob"]] = np.nan
    missing = stats.unobservable_by_table(deltas)
    assert missing.to_dict("records") == [
        {"model": "m2", "dataset": d, "axis": a} for d in ("dA", "dB") for a in ("Act", "Prob")
    ]
    per_prompt = stats.prompt_instability(stats.normalise(deltas, DEFAULT_R))
    for prompt, base in (("p1", S125), ("p2", S5), ("p3", 0.1)):
        m2 = row(per_prompt, model="m2", prompt_id=prompt)
        assert math.isnan(m2["Act"]) and math.isnan(m2["Prob"])
        for axis in ("BLEU", "BERT", "Ent", "MR"):  # the other axes as before: 2 x |F| x base
            assert m2[axis] == pytest.approx(2 * abs(F[axis]) * base), (prompt, axis)
        # m1 keeps every axis
        assert row(per_prompt, model="m1", prompt_id=prompt)["Act"] == pytest.approx(base)
    total = stats.total_sgs(per_prompt)
    m2 = row(total, model="m2")
    assert math.isnan(m2["Act"]) and math.isnan(m2["Prob"])
    assert m2["Ent"] == pytest.approx(2 * 2.0 * (S125 + S5 + 0.1) / 3)
    assert not math.isnan(row(total, model="m1")["Act"])
    assert math.isnan(row(stats.dataset_sgs(per_prompt), model="m2", dataset="dA")["Act"])
    tests = stats.ttests(per_prompt, 0.05, by=["model"])
    act = row(tests, model="m2", axis="Act")
    assert act["n"] == 0 and math.isnan(act["p"]) and act["marker"] == ""
    assert row(tests, model="m2", axis="Ent")["n"] == 3


def test_axis_unobservable_on_one_dataset_only_pools_the_others():
    deltas = make_deltas()
    deltas.loc[(deltas["model"] == "m1") & (deltas["dataset"] == "dB"), "Ent"] = np.nan
    per_prompt = stats.prompt_instability(stats.normalise(deltas, DEFAULT_R))
    assert math.isnan(row(per_prompt, model="m1", prompt_id="p3")["Ent"])
    # m1's Ent SGS is the mean over the prompts that have it: p1, p2 (2 x base RMS each)
    assert row(stats.total_sgs(per_prompt), model="m1")["Ent"] == pytest.approx(2.0 * (S125 + S5) / 2)


def test_partly_missing_axis_is_an_error_naming_rows():
    deltas = make_deltas()
    deltas.loc[(deltas["model"] == "m2") & (deltas["prompt_id"] == "p1") & (deltas["variant_id"] == "v2"), "Act"] = (
        np.nan
    )
    with pytest.raises(ValueError, match=r"axis 'Act'.*1 of 6 rows.*'m2'.*'dA'.*v2"):
        stats.prompt_instability(stats.normalise(deltas, DEFAULT_R))
    with pytest.raises(ValueError, match="axis 'Act'"):
        stats.unobservable_by_table(deltas)


def test_ttests_names_bad_arguments(per_prompt):
    with pytest.raises(ValueError, match="family"):
        stats.ttests(per_prompt, [0.05], by=["family"])
    with pytest.raises(ValueError, match="eps_values"):
        stats.ttests(per_prompt, [], by=["model"])


# ----------------------------------------------------------------------------- breakdown


def test_breakdown_rms_per_family_kind_position_strength(deltas):
    bd = stats.breakdown(stats.normalise(deltas, DEFAULT_R))
    assert list(bd.columns) == ["model", "family", "kind", "position", "strength", "axis", "rms", "n"]
    reg = bd[(bd["model"] == "m1") & (bd["family"] == "register")]
    # register strength 0.5 pools p1 v1 and p2 v1: Act 0.3, 0.6 -> sqrt((0.09 + 0.36) / 2) = 0.474342
    r05 = row(reg, strength=0.5, axis="Act")
    assert r05["rms"] == pytest.approx(math.sqrt(0.225))
    assert r05["n"] == 2
    # register strength 1.0 is p3 v1 alone: Act 0.1
    assert row(reg, strength=1.0, axis="Act")["rms"] == pytest.approx(0.1)
    assert row(reg, strength=1.0, axis="Act")["n"] == 1
    # noise (position missing, kept as its own group) pools the v2 rows: 0.4, 0.8, -0.1
    # -> sqrt((0.16 + 0.64 + 0.01) / 3) = sqrt(0.27) = 0.519615; Ent is 2x that
    noise = bd[(bd["model"] == "m1") & (bd["family"] == "noise")]
    assert noise["position"].isna().all()
    assert row(noise, axis="Act")["rms"] == pytest.approx(math.sqrt(0.27))
    assert row(noise, axis="Ent")["rms"] == pytest.approx(2 * math.sqrt(0.27))
    assert row(noise, axis="Act")["n"] == 3
    # 2 models x (2 register strengths + 1 noise group) x 6 axes
    assert len(bd) == 2 * 3 * len(AXES)
    assert list(bd[bd["model"] == "m1"]["axis"][:6]) == list(AXES)
