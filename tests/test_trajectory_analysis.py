"""Tests of shiftwork.trajectory.analysis and shiftwork.trajectory.report.

The tables are hand-made so that the answers are known: OOD columns are an affine function of
the ID column plus residual components that are orthogonal to ``[1, id]``, so the partial
correlation is the cosine between the residual components.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pingouin as pg
import pytest
from scipy import stats as sps

from shiftwork.seeding import rng_for
from shiftwork.trajectory import analysis as ana
from shiftwork.trajectory import gam as ana_gam
from shiftwork.trajectory import report as rep
from shiftwork.trajectory.analysis import AnalysisError

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

# Orthogonal polynomial contrasts for 8 equally spaced points: both are orthogonal to the
# constant and to the linear trend, and to each other. |QUAD|^2 = 168, |CUBIC|^2 = 264.
QUAD8 = np.array([7, 1, -3, -5, -5, -3, 1, 7], dtype=float)
CUBIC8 = np.array([-7, 5, 7, 3, -3, -7, -5, 7], dtype=float)
ID8 = np.arange(1, 9) / 10.0  # 0.1 ... 0.8, linear in the step


def to_scores(table: pd.DataFrame, id_col: str, model: str = "m1", run: str = "r1") -> pd.DataFrame:
    """Long scores rows from a steps x testsets table (index = step)."""
    rows = []
    for step, values in table.iterrows():
        for testset, acc in values.items():
            rows.append(
                {
                    "model": model,
                    "run": run,
                    "step": int(step),
                    "testset": testset,
                    "accuracy": float(acc),
                    "role": "id" if testset == id_col else "ood",
                }
            )
    return pd.DataFrame(rows)


def known_table() -> pd.DataFrame:
    """8 checkpoints; residuals of a and b on [1, id] are 0.005*QUAD8 and 0.005*(QUAD8 + CUBIC8),
    so their correlation is |QUAD| / sqrt(|QUAD|^2 + |CUBIC|^2) = sqrt(168 / 432) = sqrt(7 / 18)."""
    return pd.DataFrame(
        {
            "id": ID8,
            "a": 0.2 + 0.5 * ID8 + 0.005 * QUAD8,
            "b": 0.3 + 0.4 * ID8 + 0.005 * (QUAD8 + CUBIC8),
        },
        index=pd.Index(np.arange(8) * 100, name="step"),
    )


# --------------------------------------------------------------------------- 1. partial correlation


def test_partial_correlation_agrees_with_pingouin_residuals_and_pair_table():
    table = known_table()
    expected = math.sqrt(7.0 / 18.0)  # 0.6236...

    res = pg.partial_corr(data=table, x="a", y="b", covar="id", method="pearson")
    r_pg = float(res["r"].iloc[0])

    design = np.column_stack([np.ones(8), table["id"].to_numpy()])
    resid = {}
    for col in ("a", "b"):
        y = table[col].to_numpy()
        beta, *_ = np.linalg.lstsq(design, y, rcond=None)
        resid[col] = y - design @ beta
    r_own = float(np.corrcoef(resid["a"], resid["b"])[0, 1])

    pairs = ana.pair_table(to_scores(table, "id"))
    assert len(pairs) == 1
    row = pairs.iloc[0]
    assert (row["ood_a"], row["ood_b"], row["n"]) == ("a", "b", 8)

    assert r_pg == pytest.approx(expected, abs=1e-10)
    assert r_own == pytest.approx(expected, abs=1e-10)
    assert abs(r_pg - r_own) < 1e-10
    assert abs(row["r_partial"] - r_pg) < 1e-10
    assert abs(row["r_partial"] - r_own) < 1e-10
    # p and CI are pingouin's (CI at full precision; pingouin's column is rounded to 2 decimals)
    assert row["p_partial"] == pytest.approx(float(res["p_val"].iloc[0]), rel=1e-12)
    t = expected * math.sqrt(5 / (1 - expected**2))  # n - 3 = 5 degrees of freedom
    assert row["p_partial"] == pytest.approx(2 * sps.t.sf(t, 5), rel=1e-9)
    half = sps.norm.ppf(0.975) / math.sqrt(8 - 1 - 3)
    assert row["ci95_low"] == pytest.approx(math.tanh(math.atanh(expected) - half), abs=1e-9)
    assert row["ci95_high"] == pytest.approx(math.tanh(math.atanh(expected) + half), abs=1e-9)
    assert np.round([row["ci95_low"], row["ci95_high"]], 2).tolist() == list(res["CI95"].iloc[0])
    # raw correlation: scipy's Pearson on the two columns
    raw = sps.pearsonr(table["a"], table["b"])
    assert row["r_raw"] == pytest.approx(raw.statistic, abs=1e-12)
    assert row["r_raw"] > 0.9  # the shared ID trend dominates the raw correlation
    # a is monotone in id, so its ranks equal id's ranks: the Spearman partial is undefined
    assert math.isnan(row["r_partial_spearman"]) and math.isnan(row["p_partial_spearman"])


def test_wide_orders_steps_and_puts_the_id_column_first():
    table = known_table()[["b", "id", "a"]]
    scores = to_scores(table, "id").sample(frac=1.0, random_state=0)
    out = ana.wide(scores, "r1")
    assert list(out.columns) == ["id", "a", "b"]
    assert list(out.index) == list(range(0, 800, 100))
    assert out.index.name == "step"
    assert out.attrs["id"] == "id" and out.attrs["ood"] == ["a", "b"] and out.attrs["model"] == "m1"
    np.testing.assert_allclose(out["a"].to_numpy(), known_table()["a"].to_numpy(), atol=0)


def test_spearman_partial_matches_pingouin():
    table = known_table().copy()
    # break the monotonicity in id of both columns (else their ranks equal the ID ranks)
    table["a"] = table["a"] + 0.04 * np.array([0, 1, -1, 0, 1, -1, 0, 1])
    table["b"] = table["b"] + 0.05 * np.array([1, -1, 0, 1, 0, -1, 1, 0])
    assert not (table[["a", "b"]].rank().eq(table["id"].rank(), axis=0)).all().any()
    res = pg.partial_corr(data=table, x="a", y="b", covar="id", method="spearman")
    row = ana.pair_table(to_scores(table, "id")).iloc[0]
    assert row["r_partial_spearman"] == pytest.approx(float(res["r"].iloc[0]), abs=1e-12)
    assert row["p_partial_spearman"] == pytest.approx(float(res["p_val"].iloc[0]), rel=1e-12)


@pytest.mark.parametrize("method", ["pearson", "spearman"])
def test_closed_form_partial_correlation_equals_pingouin_on_random_tables(method):
    """The closed form the pair table uses against pingouin's own call, on 300 random tables:
    sizes 4 to 30, accuracies on a grid of 1/50 (ties for the ranks), correlated and not."""
    rng = np.random.default_rng(7)
    compared = 0
    for _ in range(300):
        n = int(rng.integers(4, 31))
        z = rng.normal(size=n)
        a = 0.8 * z * rng.uniform(-1, 1) + rng.normal(size=n)
        b = 0.5 * a * rng.uniform(-1, 1) + rng.normal(size=n)
        table = pd.DataFrame({"a": a, "b": b, "z": z}).map(lambda v: round(v * 50) / 50)
        r, p, lo, hi = ana._partial(table["a"].to_numpy(), table["b"].to_numpy(), table["z"].to_numpy(), method)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref = pg.partial_corr(data=table, x="a", y="b", covar="z", method=method)
        values = table.rank() if method == "spearman" else table
        if math.isnan(r) or np.linalg.matrix_rank(np.corrcoef(values.to_numpy(), rowvar=False)) < 3:
            continue  # pingouin's pseudo-inverse of a singular matrix: see the test below
        compared += 1
        r_ref = float(ref["r"].iloc[0])
        assert r == pytest.approx(r_ref, abs=1e-12)
        assert p == pytest.approx(float(ref["p_val"].iloc[0]), rel=1e-9, abs=1e-15)
        ci = pg.compute_esci(stat=r_ref, nx=n - 1, ny=n - 1, eftype="r", decimals=15)
        assert (lo, hi) == pytest.approx(tuple(float(v) for v in ci), abs=1e-12)
    assert compared > 250


def test_identical_columns_have_partial_correlation_one_where_pingouin_may_flip_the_sign():
    """Two columns equal after the control (here equal outright) have partial correlation +1.
    Their correlation matrix is singular; pingouin 0.7's pseudo-inverse gives -1 on this table."""
    table = pd.DataFrame({"a": [2.0, 4.0, 1.0, 3.0], "b": [2.0, 4.0, 1.0, 3.0], "z": [1.0, 4.0, 2.0, 3.0]})
    r, p, _, _ = ana._partial(table["a"].to_numpy(), table["b"].to_numpy(), table["z"].to_numpy(), "spearman")
    assert (r, p) == (1.0, 0.0)


# --------------------------------------------------------------------------- 2. nonlinear control

ID12 = np.linspace(0.2, 0.8, 12)  # symmetric about 0.5: a quadratic in id is orthogonal to id
NOISE_A = np.array([0.004, -0.006, 0.003, 0.007, -0.002, -0.005, 0.006, -0.004, 0.002, -0.007, 0.005, -0.003])
NOISE_B = np.array([-0.005, 0.002, 0.006, -0.003, -0.007, 0.004, -0.002, 0.005, -0.006, 0.003, 0.007, -0.004])


def quadratic_table() -> pd.DataFrame:
    curve = 1.5 * (ID12 - 0.5) ** 2  # 0 ... 0.135
    return pd.DataFrame(
        {"id": ID12, "a": 0.30 + curve + NOISE_A, "b": 0.35 + curve + NOISE_B},
        index=pd.Index(np.arange(12) * 50, name="step"),
    )


def test_nonlinear_control_removes_a_quadratic_id_effect():
    # the fixed noises are nearly uncorrelated with each other
    assert abs(np.corrcoef(NOISE_A, NOISE_B)[0, 1]) < 0.25
    table = quadratic_table()
    row = ana.pair_table(to_scores(table, "id")).iloc[0]
    # the linear control leaves the shared curvature in: a strong spurious partial correlation
    assert row["r_partial"] > 0.9
    assert row["p_partial"] < 1e-6
    # the spline control takes it out
    assert abs(row["r_nonlinear"]) < 0.3
    assert row["p_nonlinear"] > 0.3

    # r_nonlinear is the correlation of residualise(kind="spline") residuals ...
    ra = ana.residualise(table["a"], table["id"], kind="spline")
    rb = ana.residualise(table["b"], table["id"], kind="spline")
    assert row["r_nonlinear"] == pytest.approx(np.corrcoef(ra, rb)[0, 1], abs=1e-12)
    # ... and its p-value uses n - (1 + df) - 1 = 12 - 4 - 1 = 7 degrees of freedom
    r = row["r_nonlinear"]
    t = r * math.sqrt(7 / (1 - r * r))
    assert row["p_nonlinear"] == pytest.approx(2 * sps.t.sf(abs(t), 7), rel=1e-9)


def test_residualise_linear_matches_lstsq():
    x = np.array([0.1, 0.25, 0.3, 0.45, 0.5, 0.7])
    y = np.array([0.2, 0.1, 0.4, 0.35, 0.6, 0.55])
    design = np.column_stack([np.ones_like(x), x])
    beta, *_ = np.linalg.lstsq(design, y, rcond=None)
    np.testing.assert_allclose(ana.residualise(y, x), y - design @ beta, atol=1e-14)
    res = ana.residualise(y, x)
    assert abs(res.sum()) < 1e-12 and abs(res @ x) < 1e-12


def test_residualise_spline_spans_linear_functions_and_bends():
    x = ID12
    assert np.max(np.abs(ana.residualise(0.1 + 0.7 * x, x, kind="spline"))) < 1e-12
    curve = (x - 0.5) ** 2
    linear_left = ana.residualise(curve, x, kind="linear")
    spline_left = ana.residualise(curve, x, kind="spline")
    assert np.linalg.norm(spline_left) < 0.1 * np.linalg.norm(linear_left)


def test_residualise_spline_falls_back_to_a_quadratic_with_few_points():
    # 5 distinct points < df + 3 = 6: the quadratic fallback fits x**2 exactly
    x = np.array([0.1, 0.3, 0.4, 0.6, 0.9])
    assert np.max(np.abs(ana.residualise(x**2, x, kind="spline"))) < 1e-12
    assert np.max(np.abs(ana.residualise(x**2, x, kind="linear"))) > 1e-3


def test_residualise_rejects_bad_input():
    with pytest.raises(AnalysisError, match="kind"):
        ana.residualise([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], kind="cubic")
    with pytest.raises(AnalysisError, match="3 values but x has 4"):
        ana.residualise([1.0, 2.0, 3.0], [1.0, 2.0, 3.0, 4.0])
    with pytest.raises(AnalysisError, match="missing or infinite"):
        ana.residualise([1.0, np.nan, 3.0], [1.0, 2.0, 3.0])


# --------------------------------------------------------------------------- 3. multiple comparisons, sign


def _orthonormal_residual_components(x: np.ndarray, k: int) -> np.ndarray:
    """k orthonormal vectors orthogonal to [1, x] (the higher columns of a QR of a Vandermonde)."""
    q, _ = np.linalg.qr(np.vander(x - x.mean(), k + 2, increasing=True))
    return q[:, 2:]


def sign_table(flip: float) -> pd.DataFrame:
    """10 checkpoints; residual parts (u orthonormal, orthogonal to [1, id]): A ~ u1 + .3 u2,
    B ~ flip*u1 + .3 u3, C ~ -u1 + .5 u4, D ~ u5 + .25 u1. So r(A,B) = flip/1.09,
    r(A,C) = -1/sqrt(1.09*1.25), r(B,C) = flip*r(A,C), and D is weakly related to all
    (|r| < 0.25): distinct p-values, on which Holm and Bonferroni differ."""
    x = np.linspace(0.3, 0.75, 10)
    u = _orthonormal_residual_components(x, 5)
    s = 0.05
    return pd.DataFrame(
        {
            "id": x,
            "A": 0.20 + 0.5 * x + s * (u[:, 0] + 0.3 * u[:, 1]),
            "B": 0.25 + 0.4 * x + s * (flip * u[:, 0] + 0.3 * u[:, 2]),
            "C": 0.30 + 0.3 * x + s * (-u[:, 0] + 0.5 * u[:, 3]),
            "D": 0.35 + 0.2 * x + s * (u[:, 4] + 0.25 * u[:, 0]),
        },
        index=pd.Index(np.arange(10) * 10, name="step"),
    )


def test_holm_and_bh_follow_pingouin_multicomp_per_run_and_sign_classes():
    t1, t2 = sign_table(flip=1.0), sign_table(flip=-1.0)
    scores = pd.concat([to_scores(t1, "id", "m1", "r1"), to_scores(t2, "id", "m2", "r2")], ignore_index=True)
    pairs = ana.pair_table(scores)
    assert list(pairs.columns) == list(ana.PAIR_COLUMNS)
    assert len(pairs) == 12  # 6 pairs per run

    for run, table in (("r1", t1), ("r2", t2)):
        part = pairs[pairs["run"] == run].reset_index(drop=True)
        assert list(zip(part["ood_a"], part["ood_b"])) == [
            ("A", "B"),
            ("A", "C"),
            ("A", "D"),
            ("B", "C"),
            ("B", "D"),
            ("C", "D"),
        ]
        p = np.array(
            [
                float(pg.partial_corr(data=table, x=a, y=b, covar="id")["p_val"].iloc[0])
                for a, b in zip(part["ood_a"], part["ood_b"])
            ]
        )
        np.testing.assert_allclose(part["p_partial"].to_numpy(), p, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(part["p_partial_holm"].to_numpy(), pg.multicomp(p, method="holm")[1], rtol=1e-12)
        np.testing.assert_allclose(part["p_partial_bh"].to_numpy(), pg.multicomp(p, method="fdr_bh")[1], rtol=1e-12)
        # the family is the run's six pairs: Holm multiplies the smallest p by 6 ...
        assert part["p_partial_holm"].min() == pytest.approx(6 * p.min(), rel=1e-12)
        # ... but is not Bonferroni on these p-values (so the check above can tell them apart)
        assert not np.allclose(part["p_partial_holm"].to_numpy(), pg.multicomp(p, method="bonf")[1])

    signs = {(r.run, r.ood_a, r.ood_b): r.sign for r in pairs.itertuples()}
    assert signs[("r1", "A", "B")] == "positive"
    assert signs[("r2", "A", "B")] == "negative"  # same pair, other model: the sign flips
    assert signs[("r1", "A", "C")] == signs[("r2", "A", "C")] == "negative"
    assert signs[("r1", "B", "C")] == "negative" and signs[("r2", "B", "C")] == "positive"
    for run in ("r1", "r2"):
        for other in ("A", "B", "C"):
            assert signs[(run, other, "D")] == "null"
    r = pairs.set_index(["run", "ood_a", "ood_b"])["r_partial"]
    assert r[("r1", "A", "B")] == pytest.approx(1 / 1.09, abs=1e-10)
    assert r[("r2", "A", "B")] == pytest.approx(-1 / 1.09, abs=1e-10)
    assert r[("r1", "A", "C")] == pytest.approx(-1 / math.sqrt(1.09 * 1.25), abs=1e-10)
    assert r[("r1", "A", "D")] == pytest.approx(0.25 / math.sqrt(1.09 * 1.0625), abs=1e-10)
    # the rule itself, row by row
    for r in pairs.itertuples():
        expected = "null" if not r.p_partial_holm < 0.05 else ("positive" if r.r_partial > 0 else "negative")
        assert r.sign == expected


def test_alpha_moves_the_sign_threshold():
    scores = to_scores(sign_table(flip=1.0), "id")
    strict = ana.pair_table(scores, alpha=1e-12)
    assert (strict["sign"] == "null").all()
    with pytest.raises(AnalysisError, match="alpha"):
        ana.pair_table(scores, alpha=1.5)


def test_degenerate_columns_give_nan_and_null_instead_of_crashing():
    table = sign_table(flip=1.0)
    table["K"] = 0.5  # constant
    table["L"] = 0.1 + 0.8 * table["id"]  # an exact linear function of the ID column
    pairs = ana.pair_table(to_scores(table, "id")).set_index(["ood_a", "ood_b"])
    for pair in [("A", "K"), ("K", "L")]:
        row = pairs.loc[pair]
        for col in (
            "r_raw",
            "p_raw",
            "r_partial",
            "p_partial",
            "ci95_low",
            "r_partial_spearman",
            "r_nonlinear",
            "p_partial_holm",
            "p_partial_bh",
        ):
            assert math.isnan(row[col]), (pair, col)
        assert row["sign"] == "null"
    row = pairs.loc[("A", "L")]
    assert math.isfinite(row["r_raw"])  # the raw correlation exists ...
    assert math.isnan(row["r_partial"]) and math.isnan(row["r_nonlinear"])  # ... nothing is left after ID
    assert row["sign"] == "null"
    # NaN p-values stay out of the family: 6 defined pairs, as without K and L
    defined = pairs["p_partial"].notna()
    assert defined.sum() == 6
    p = pairs.loc[defined, "p_partial"].to_numpy()
    np.testing.assert_allclose(pairs.loc[defined, "p_partial_holm"].to_numpy(), pg.multicomp(p, method="holm")[1])
    assert pairs.loc[("A", "B"), "sign"] == "positive"


# --------------------------------------------------------------------------- 4. errors


def test_fewer_than_four_checkpoints_names_the_run_and_count():
    scores = to_scores(known_table().iloc[:3], "id", run="seed-7")
    with pytest.raises(AnalysisError, match=r"^run 'seed-7' has 3 checkpoints; partial correlations need at least 4$"):
        ana.wide(scores, "seed-7")
    with pytest.raises(AnalysisError, match="run 'seed-7' has 3 checkpoints"):
        ana.pair_table(scores)


def test_a_missing_testset_at_a_step_is_named():
    scores = to_scores(known_table(), "id", run="r9")
    scores = scores[~((scores["testset"] == "b") & scores["step"].isin([200, 500]))]
    with pytest.raises(AnalysisError, match=r"run 'r9'.*testset 'b' at step\(s\) \[200, 500\]"):
        ana.wide(scores, "r9")


def test_no_id_set_and_other_role_errors():
    scores = to_scores(known_table(), "id", run="r3")
    no_id = scores.assign(role="ood")
    with pytest.raises(AnalysisError, match="run 'r3' has no ID testset"):
        ana.wide(no_id, "r3")
    two_ids = scores.assign(role=np.where(scores["testset"] == "b", "id", scores["role"]))
    with pytest.raises(AnalysisError, match=r"run 'r3' has 2 ID testsets \['b', 'id'\]"):
        ana.wide(two_ids, "r3")
    one_ood = scores[scores["testset"] != "b"]
    with pytest.raises(AnalysisError, match="run 'r3' has 1 OOD testset"):
        ana.wide(one_ood, "r3")
    with pytest.raises(AnalysisError, match="run 'nope' is not in the scores table"):
        ana.wide(scores, "nope")


def test_invalid_rows_are_named():
    scores = to_scores(known_table(), "id", run="r4")
    bad = scores.copy()
    bad.loc[(bad["testset"] == "a") & (bad["step"] == 300), "accuracy"] = 1.5
    with pytest.raises(AnalysisError, match="run 'r4': testset 'a' has accuracy 1.5 at step 300"):
        ana.wide(bad, "r4")
    dup = pd.concat([scores, scores.iloc[[0]]], ignore_index=True)
    with pytest.raises(AnalysisError, match="more than one row at step 0"):
        ana.wide(dup, "r4")
    with pytest.raises(AnalysisError, match="missing column"):
        ana.wide(scores.drop(columns="role"), "r4")


# --------------------------------------------------------------------------- 5. summary


def test_summary_shares_per_model():
    pairs = pd.DataFrame(
        {
            "model": ["m1", "m1", "m1", "m1", "m2", "m2", "m0"],
            "run": ["a", "a", "b", "b", "c", "c", "d"],
            "sign": ["positive", "positive", "negative", "null", "null", "null", "negative"],
        }
    )
    out = ana.summary(pairs)
    assert list(out.columns) == list(ana.SUMMARY_COLUMNS)
    assert out["model"].tolist() == ["m0", "m1", "m2"]
    assert out["n_pairs"].tolist() == [1, 4, 2]
    assert out["share_positive"].tolist() == [0.0, 0.5, 0.0]
    assert out["share_negative"].tolist() == [1.0, 0.25, 0.0]
    assert out["share_null"].tolist() == [0.0, 0.25, 1.0]


def test_summary_rejects_unknown_signs_and_handles_empty():
    with pytest.raises(AnalysisError, match="run 'a': sign 'up'"):
        ana.summary(pd.DataFrame({"model": ["m"], "run": ["a"], "sign": ["up"]}))
    empty = ana.summary(pd.DataFrame({"model": [], "sign": []}))
    assert empty.empty and list(empty.columns) == list(ana.SUMMARY_COLUMNS)


# --------------------------------------------------------------------------- 6. figures


def figure_scores() -> pd.DataFrame:
    return pd.concat(
        [to_scores(sign_table(1.0), "id", "m1", "r1"), to_scores(sign_table(-1.0), "id", "m2", "r2")], ignore_index=True
    )


def test_partial_matrix_is_symmetric_with_blank_diagonal():
    pairs = ana.pair_table(figure_scores())
    r, p = rep.partial_matrix(pairs, "r1")
    assert list(r.index) == list(r.columns) == ["A", "B", "C", "D"]
    assert np.isnan(np.diag(r.to_numpy())).all()
    np.testing.assert_array_equal(r.to_numpy(), r.to_numpy().T)
    assert r.loc["B", "A"] == pytest.approx(1 / 1.09, abs=1e-10)
    assert p.loc["A", "B"] < 0.05 and p.loc["A", "D"] > 0.05


def test_heatmap_and_curve_plot_write_png_and_svg_atomically(tmp_path):
    scores = figure_scores()
    pairs = ana.pair_table(scores)
    out = tmp_path / "figs"
    rep.correlation_heatmap(pairs, "r1", out / "heat.png", out / "heat.svg")
    rep.curve_plot(scores, out / "curves.png", out / "curves.svg")
    names = sorted(p.name for p in out.iterdir())
    assert names == ["curves.png", "curves.svg", "heat.png", "heat.svg"]  # no temporary files left
    for stem in ("heat", "curves"):
        png = (out / f"{stem}.png").read_bytes()
        assert png.startswith(PNG_MAGIC) and len(png) > 1000
        svg = (out / f"{stem}.svg").read_text()
        assert "<svg" in svg and svg.rstrip().endswith("</svg>")
    with pytest.raises(AnalysisError, match="run 'r7' has no pairs"):
        rep.correlation_heatmap(pairs, "r7", out / "x.png", out / "x.svg")
    assert sorted(p.name for p in out.iterdir()) == names


def test_heatmap_draws_undefined_cells_and_a_single_run_curve(tmp_path):
    table = sign_table(flip=1.0)
    table["K"] = 0.5  # constant: its cells are n/a
    scores = to_scores(table, "id", "m1", "solo")
    pairs = ana.pair_table(scores)
    r, _ = rep.partial_matrix(pairs, "solo")
    assert np.isnan(r.loc["A", "K"]) and r.shape == (5, 5)
    rep.correlation_heatmap(pairs, "solo", tmp_path / "h.png", tmp_path / "h.svg")
    rep.curve_plot(scores, tmp_path / "c.png", tmp_path / "c.svg")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.png", "c.svg", "h.png", "h.svg"]
    assert (tmp_path / "h.png").read_bytes().startswith(PNG_MAGIC)


# --------------------------------------------------------------------------- 7. GAM control

X30 = np.linspace(0.0, 3.0, 30)
NOISE30 = np.random.default_rng(0).normal(0.0, 0.05, 30)  # small, fixed


def library_gam(y: np.ndarray, x: np.ndarray, df: int = 10):
    """statsmodels directly: BSplines of x rescaled to [0, 1], an intercept, one GLMGam fit per
    grid weight, the fit with the smallest results.gcv (perfect fits skipped)."""
    from statsmodels.gam.api import BSplines, GLMGam
    from statsmodels.tools.sm_exceptions import PerfectSeparationError

    z = (x - x.min()) / (x.max() - x.min())
    smoother = BSplines(z[:, None], df=[df], degree=[3])
    fits = []
    for alpha in ana_gam.GAM_ALPHAS:
        try:
            res = GLMGam(y, exog=np.ones((len(y), 1)), smoother=smoother, alpha=[alpha]).fit()
        except PerfectSeparationError:
            continue
        fits.append((float(res.gcv), float(alpha), res))
    return min(fits, key=lambda f: f[0])


def test_residualise_gam_is_statsmodels_glmgam_with_the_gcv_penalty():
    y = np.sin(2.0 * X30) + NOISE30
    gcv, alpha, res = library_gam(y, X30)
    fit = ana_gam.gam_fit(y, X30)
    assert fit.alpha == alpha and fit.df == 10
    assert fit.gcv == pytest.approx(gcv, rel=1e-9)
    assert fit.edf == pytest.approx(float(res.hat_matrix_trace), rel=1e-9)
    np.testing.assert_allclose(ana.residualise(y, X30, kind="gam"), res.resid_response, atol=1e-9)
    # the chosen penalty is inside the grid, not at either end: GCV really chose it
    assert ana_gam.GAM_ALPHAS[0] < alpha < ana_gam.GAM_ALPHAS[-1]
    # a sine over a period is far from a straight line (edf 2) and far from unpenalised (10)
    assert 4.0 < fit.edf < 9.0
    # the residuals are about the noise: the smooth took the curve out
    assert np.std(fit.resid) < 1.5 * np.std(NOISE30)
    assert np.std(ana.residualise(y, X30, kind="linear")) > 5 * np.std(NOISE30)


def test_gam_on_bunched_id_values_falls_back_to_the_line():
    """A window whose ID accuracy sits on a few distinct values makes the penalised system
    singular at small penalty weights (a float32 run's early window did): those weights are
    skipped, and a penalty strong enough to leave the straight line is chosen, not a LinAlgError."""
    x = np.array([0.5] * 9 + [0.51, 0.52, 0.53, 0.6])
    y = np.random.default_rng(0).normal(size=len(x))
    fit = ana_gam.gam_fit(y, x, 10)
    assert fit.alpha >= 1e5 and fit.edf == pytest.approx(2.0, abs=1e-6)
    design = np.column_stack([np.ones_like(x), x])
    line = y - design @ np.linalg.lstsq(design, y, rcond=None)[0]
    np.testing.assert_allclose(fit.resid, line, atol=1e-5)


def test_gam_penalty_goes_to_a_straight_line_for_a_line():
    zigzag = 0.01 * (-1.0) ** np.arange(30)  # as wiggly as noise can be
    y = 0.2 + 0.5 * X30 + zigzag
    fit = ana_gam.gam_fit(y, X30)
    assert fit.edf < 2.05
    assert fit.alpha >= 1.0
    np.testing.assert_allclose(fit.resid, ana.residualise(y, X30, kind="linear"), atol=1e-4)
    # an exact line: nothing left, and the fit is the straight line itself
    exact = ana_gam.gam_fit(0.2 + 0.5 * X30, X30)
    assert exact.edf == 2.0 and math.isinf(exact.alpha) and np.max(np.abs(exact.resid)) < 1e-12
    # 4 checkpoints: too few for a cubic basis (n - 1 = 3 functions): the straight line
    x4 = np.array([0.1, 0.3, 0.4, 0.7])
    np.testing.assert_allclose(
        ana.residualise(x4**2, x4, kind="gam"), ana.residualise(x4**2, x4, kind="linear"), atol=1e-14
    )
    with pytest.raises(AnalysisError, match="gam_df must be an integer >= 4"):
        ana.residualise(y, X30, kind="gam", df=3)


def test_penalised_residuals_at_a_fixed_weight_are_glmgams():
    """The bootstrap's closed form (X'X + 2 alpha S)^-1 X'y is GLMGam's fit at that weight."""
    from statsmodels.gam.api import GLMGam

    y = np.column_stack([np.sin(2.0 * X30) + NOISE30, np.cos(X30) - NOISE30])
    smoother, _, _ = ana_gam.gam_design(X30, 8)
    for alpha in (1e-4, 0.1, 30.0):
        got = ana_gam.penalised_residuals(y, X30, 8, np.array([alpha, alpha]))
        for j in range(2):
            res = GLMGam(y[:, j], exog=np.ones((30, 1)), smoother=smoother, alpha=[alpha]).fit()
            np.testing.assert_allclose(got[:, j], res.resid_response, atol=1e-7)


def test_gam_columns_of_the_pair_table():
    table = quadratic_table()
    row = ana.pair_table(to_scores(table, "id")).iloc[0]
    z = table["id"].to_numpy()
    fa = ana_gam.gam_fit(table["a"].to_numpy(), z)
    fb = ana_gam.gam_fit(table["b"].to_numpy(), z)
    assert row["edf_gam"] == pytest.approx(max(fa.edf, fb.edf), rel=1e-12)
    assert row["r_gam"] == pytest.approx(np.corrcoef(fa.resid, fb.resid)[0, 1], abs=1e-12)
    assert row["r_gam"] == pytest.approx(
        np.corrcoef(ana.residualise(table["a"], z, kind="gam"), ana.residualise(table["b"], z, kind="gam"))[0, 1],
        abs=1e-12,
    )
    # dof = n - 1 - edf_gam, not an integer
    dof = 12 - 1 - row["edf_gam"]
    r = row["r_gam"]
    assert row["p_gam"] == pytest.approx(2 * sps.t.sf(abs(r) * math.sqrt(dof / (1 - r * r)), dof), rel=1e-9)
    # like the spline, the GAM takes the shared curvature out that the linear control leaves in
    assert row["r_partial"] > 0.9 and abs(row["r_gam"]) < 0.3 and row["p_gam"] > 0.3
    assert row["edf_gam"] > 2.5


def test_gam_holm_bh_and_the_primary_method_decide_the_sign():
    table = sign_table(flip=1.0)
    scores = to_scores(table, "id")
    gam = ana.pair_table(scores, method="gam")
    p = gam["p_gam"].to_numpy()
    np.testing.assert_allclose(gam["p_gam_holm"].to_numpy(), pg.multicomp(p, method="holm")[1], rtol=1e-12)
    np.testing.assert_allclose(gam["p_gam_bh"].to_numpy(), pg.multicomp(p, method="fdr_bh")[1], rtol=1e-12)
    assert (gam["method"] == "gam").all()
    np.testing.assert_array_equal(gam["r_primary"].to_numpy(), gam["r_gam"].to_numpy())
    np.testing.assert_array_equal(gam["p_primary_holm"].to_numpy(), gam["p_gam_holm"].to_numpy())
    np.testing.assert_array_equal(gam["p_primary_bh"].to_numpy(), gam["p_gam_bh"].to_numpy())
    for r in gam.itertuples():
        expected = "null" if not r.p_gam_holm < 0.05 else ("positive" if r.r_gam > 0 else "negative")
        assert r.sign == expected
    linear = ana.pair_table(scores)  # the default stays the linear partial correlation
    assert (linear["method"] == "linear").all()
    np.testing.assert_array_equal(linear["r_primary"].to_numpy(), linear["r_partial"].to_numpy())
    np.testing.assert_array_equal(linear["p_primary"].to_numpy(), linear["p_partial"].to_numpy())
    # a shared quadratic ID effect: the linear control calls it positive, the GAM null
    quad = to_scores(quadratic_table(), "id")
    assert ana.pair_table(quad, method="linear")["sign"].tolist() == ["positive"]
    assert ana.pair_table(quad, method="gam")["sign"].tolist() == ["null"]
    assert ana.summary(ana.pair_table(quad, method="gam"))["share_null"].tolist() == [1.0]
    with pytest.raises(AnalysisError, match=r"method must be one of \['linear', 'gam'\], got 'cubic'"):
        ana.pair_table(scores, method="cubic")


# --------------------------------------------------------------------------- 8. item bootstrap


def items_frame(patterns: dict[str, list[list[int]]], run: str = "r1", model: str = "m1", step: int = 10):
    """Items rows from per-set lists of item patterns (one 0/1 per checkpoint; checkpoints are
    0, step, 2 step, ...). Items are named <set>-<k>; every label is entailment, so pred is
    entailment exactly when correct."""
    rows = []
    for testset, items in patterns.items():
        for k, pattern in enumerate(items):
            for t, c in enumerate(pattern):
                rows.append(
                    {
                        "model": model,
                        "run": run,
                        "step": t * step,
                        "set": testset,
                        "example_id": f"{testset}-{k}",
                        "label": "entailment",
                        "pred": "entailment" if c else "not_entailment",
                        "correct": bool(c),
                    }
                )
    return pd.DataFrame(rows)


def scores_of(items: pd.DataFrame, id_set: str = "id") -> pd.DataFrame:
    scores = (
        items.groupby(["model", "run", "step", "set"])["correct"]
        .mean()
        .reset_index()
        .rename(columns={"set": "testset", "correct": "accuracy"})
    )
    scores["role"] = np.where(scores["testset"] == id_set, "id", "ood")
    return scores


P_ID = [0, 0, 1, 0, 1, 1, 0, 1]
P_A = [0, 1, 1, 0, 0, 1, 1, 1]
Q = [0, 1, 0, 0, 1, 1, 1, 1]


def draws(run: str, seed: int, sizes: list[int], resamples: int) -> list[np.ndarray]:
    """The item indices the bootstrap draws, as documented: one integers() call per set, in
    the order ID set, then the OOD sets sorted."""
    rng = rng_for("trajectory-bootstrap", seed, run)
    return [rng.integers(0, n, size=(resamples, n)) for n in sizes]


@pytest.mark.parametrize("method", ["linear", "gam"])
def test_bootstrap_sign_share_is_the_share_of_resamples_that_keep_the_slope(method):
    # id and a: identical items, so every resample reproduces their accuracies. b: items 0 and
    # 1 follow Q, item 2 its complement: b = (1 + Q) / 3. A resample with k draws of items 0
    # or 1 has b = (3 - k) / 3 + (2k - 3) Q / 3: the point estimate's r for k >= 2, minus it
    # for k <= 1 (never 0), so the sign share is the share of k >= 2 (20/27 in expectation)
    # and the interval is [-r, r].
    flip = [1 - v for v in Q]
    items = items_frame({"id": [P_ID] * 3, "a": [P_A] * 2, "b": [Q, Q, flip]})
    scores = scores_of(items)
    row = ana.pair_table(scores, method=method, items=items, resamples=400, seed=5).iloc[0]
    r = row["r_primary"]
    wide_t = scores.pivot(index="step", columns="testset", values="accuracy")
    ref = float(pg.partial_corr(data=wide_t, x="a", y="b", covar="id")["r"].iloc[0])
    assert r == pytest.approx(ref, abs=1e-6) and abs(r) > 0.2  # binary ID: the GAM is the line
    _, _, b_idx = draws("r1", 5, [3, 2, 3], 400)
    keep = (b_idx < 2).sum(axis=1) >= 2
    assert row["n_boot"] == 400
    assert row["boot_sign_share"] == pytest.approx(keep.mean(), abs=1e-12)
    assert abs(row["boot_sign_share"] - 20 / 27) < 0.07
    assert row["boot_ci_low"] == pytest.approx(-abs(r), abs=1e-9)
    assert row["boot_ci_high"] == pytest.approx(abs(r), abs=1e-9)


def test_bootstrap_leaves_out_resamples_without_a_correlation():
    # b: items 0 and 1 follow Q, item 2 is always right: b = (k Q + 3 - k) / 3 keeps the sign
    # of Q for every k >= 1 and is constant (no correlation) for k = 0.
    items = items_frame({"id": [P_ID] * 3, "a": [P_A] * 2, "b": [Q, Q, [1] * 8]})
    row = ana.pair_table(scores_of(items), items=items, resamples=400, seed=1).iloc[0]
    _, _, b_idx = draws("r1", 1, [3, 2, 3], 400)
    defined = (b_idx < 2).sum(axis=1) >= 1
    assert 0 < (~defined).sum() < 40  # about 1/27 of the resamples
    assert row["n_boot"] == defined.sum()
    assert row["boot_sign_share"] == 1.0
    assert row["boot_ci_low"] == pytest.approx(row["r_primary"], abs=1e-9)
    assert row["boot_ci_high"] == pytest.approx(row["r_primary"], abs=1e-9)


def random_items(seed: int = 3, steps: int = 10) -> pd.DataFrame:
    """Items of three sets whose chance of being right rises with the checkpoint at per-set rates."""
    rng = np.random.default_rng(seed)
    patterns = {}
    for testset, n, slope in (("id", 24, 0.06), ("a", 18, 0.04), ("b", 20, 0.05), ("c", 16, 0.03)):
        chance = np.clip(0.3 + slope * np.arange(steps)[None, :] + rng.normal(0, 0.15, (n, 1)), 0.02, 0.98)
        patterns[testset] = (rng.uniform(size=(n, steps)) < chance).astype(int).tolist()
    return items_frame(patterns)


@pytest.mark.filterwarnings("ignore:The design matrix is rank-deficient")  # tied resampled ID accuracies
@pytest.mark.parametrize("method", ["linear", "gam"])
def test_bootstrap_agrees_with_a_plain_loop(method):
    from statsmodels.gam.api import BSplines, GLMGam

    items = random_items()
    scores = scores_of(items)
    resamples, seed = 60, 11
    pairs = ana.pair_table(scores, method=method, items=items, resamples=resamples, seed=seed)
    sets = ["id", "a", "b", "c"]
    ids = {s: sorted(items.loc[items["set"] == s, "example_id"].unique()) for s in sets}
    idx = draws("r1", seed, [len(ids[s]) for s in sets], resamples)
    table = ana.wide(scores, "r1")
    alphas = {c: ana_gam.gam_fit(table[c].to_numpy(), table["id"].to_numpy()).alpha for c in "abc"}
    by_item = items.set_index(["set", "example_id", "step"])["correct"]
    steps = sorted(items["step"].unique())
    r_boot = {pair: [] for pair in [("a", "b"), ("a", "c"), ("b", "c")]}
    for b in range(resamples):
        acc = pd.DataFrame(
            {
                s: [np.mean([by_item[(s, ids[s][i], step)] for i in idx[k][b]]) for step in steps]
                for k, s in enumerate(sets)
            }
        )
        if method == "gam":
            x = acc["id"].to_numpy()
            z = (x - x.min()) / (x.max() - x.min())
            k = min(10, len(np.unique(x)), len(x) - 1)
            smoother = BSplines(z[:, None], df=[k], degree=[3])
            resid = {
                c: GLMGam(acc[c].to_numpy(), exog=np.ones((len(x), 1)), smoother=smoother, alpha=[alphas[c]])
                .fit()
                .resid_response
                for c in "abc"
            }
        for a, c in r_boot:
            if method == "linear":
                r_boot[(a, c)].append(float(pg.partial_corr(data=acc, x=a, y=c, covar="id")["r"].iloc[0]))
            else:
                r_boot[(a, c)].append(float(np.corrcoef(resid[a], resid[c])[0, 1]))
    for row in pairs.itertuples():
        values = np.array(r_boot[(row.ood_a, row.ood_b)])
        assert np.isfinite(values).all() and row.n_boot == resamples
        assert row.boot_sign_share == pytest.approx(np.mean(np.sign(values) == np.sign(row.r_primary)), abs=1e-12)
        lo, hi = np.percentile(values, [2.5, 97.5])
        assert row.boot_ci_low == pytest.approx(lo, abs=1e-6)
        assert row.boot_ci_high == pytest.approx(hi, abs=1e-6)
        assert row.boot_ci_low < row.r_primary < row.boot_ci_high


def test_bootstrap_checks_its_items_and_analyses_a_window_of_steps():
    items = random_items()
    scores = scores_of(items)
    # a window of checkpoints: only the items at those steps are used
    window = scores[scores["step"] <= 60]
    part = ana.pair_table(window, items=items, resamples=20)
    assert (part["n"] == 7).all() and (part["n_boot"] == 20).all()
    # without items: no bootstrap and no label bias
    bare = ana.pair_table(scores)
    assert (bare["n_boot"] == 0).all() and bare["boot_sign_share"].isna().all() and bare["r_partial_bias"].isna().all()
    # resamples=0: the label bias but no bootstrap
    off = ana.pair_table(scores, items=items, resamples=0)
    assert (off["n_boot"] == 0).all() and off["r_partial_bias"].notna().all()
    holes = items[~((items["set"] == "b") & (items["example_id"] == "b-3") & (items["step"] == 40))]
    with pytest.raises(AnalysisError, match=r"run 'r1': test set 'b' has no prediction for item 'b-3' at step 40"):
        ana.pair_table(scores, items=holes, resamples=5)
    flipped = items.copy()
    hit = (flipped["set"] == "a") & (flipped["step"] == 20) & (flipped["example_id"] == "a-0")
    flipped.loc[hit, "correct"] = ~flipped.loc[hit, "correct"]
    with pytest.raises(AnalysisError, match=r"test set 'a' at step 20: the items give accuracy"):
        ana.pair_table(scores, items=flipped, resamples=5)
    with pytest.raises(AnalysisError, match="resamples must be a non-negative integer"):
        ana.pair_table(scores, items=items, resamples=-1)


# --------------------------------------------------------------------------- 9. label bias


def test_label_bias_by_hand():
    rows = [
        # step 0: id 2 of 2 entailment, ood 1 of 4 -> pooled 3 / 6
        *[("id", 0, p) for p in ("entailment", "entailment")],
        *[("x", 0, p) for p in ("entailment", "not_entailment", "not_entailment", "not_entailment")],
        # step 5: id 0 of 2, ood 4 of 4 -> pooled 4 / 6
        *[("id", 5, p) for p in ("not_entailment", "not_entailment")],
        *[("x", 5, "entailment") for _ in range(4)],
    ]
    items = pd.DataFrame(
        [
            {"model": "m", "run": "r", "step": step, "set": s, "example_id": f"{s}{k % 4}", "pred": pred}
            for k, (s, step, pred) in enumerate(rows)
        ]
    )
    out = ana.label_bias(items)
    assert list(out.columns) == [*ana.BIAS_COLUMNS, "entailment_share_id", "entailment_share_x"]
    assert out["step"].tolist() == [0, 5]
    assert out["n"].tolist() == [6, 6]
    assert out["entailment_share"].tolist() == pytest.approx([3 / 6, 4 / 6])
    assert out["entailment_share_id"].tolist() == [1.0, 0.0]
    assert out["entailment_share_x"].tolist() == [0.25, 1.0]
    bad = items.assign(pred=items["pred"].where(items.index != 3, "neutral"))
    with pytest.raises(AnalysisError, match=r"run 'r' step 0: prediction 'neutral' is not one of"):
        ana.label_bias(bad)


def test_partial_correlation_with_the_label_bias_equals_pingouin():
    table = sign_table(flip=1.0)
    share = 0.5 + 0.1 * np.array([1, -2, 0, 3, -1, 2, -3, 1, 0, -1]) / 3 + 0.2 * table["id"].to_numpy()
    bias = pd.DataFrame({"model": "m1", "run": "r1", "step": table.index, "entailment_share": share})
    pairs = ana.pair_table(to_scores(table, "id"), bias=bias)
    data = table.assign(bias=share)
    p = []
    for row in pairs.itertuples():
        ref = pg.partial_corr(data=data, x=row.ood_a, y=row.ood_b, covar=["id", "bias"])
        assert row.r_partial_bias == pytest.approx(float(ref["r"].iloc[0]), abs=1e-12)
        assert row.p_partial_bias == pytest.approx(float(ref["p_val"].iloc[0]), rel=1e-9)
        assert row.r_partial_bias != pytest.approx(row.r_partial, abs=1e-3)  # the bias does something
        p.append(row.p_partial_bias)
    np.testing.assert_allclose(pairs["p_partial_bias_holm"].to_numpy(), pg.multicomp(np.array(p), method="holm")[1])
    # a bias that is a linear function of ID accuracy adds a collinear covariate: undefined
    collinear = bias.assign(entailment_share=0.3 + 0.5 * table["id"].to_numpy())
    assert ana.pair_table(to_scores(table, "id"), bias=collinear)["r_partial_bias"].isna().all()
    with pytest.raises(AnalysisError, match=r"run 'r1' has no label bias at step\(s\) \[90\]"):
        ana.pair_table(to_scores(table, "id"), bias=bias[bias["step"] != 90])


def test_pair_table_computes_the_label_bias_from_items():
    items = random_items()
    scores = scores_of(items)
    pairs = ana.pair_table(scores, items=items, resamples=0)
    bias = ana.label_bias(items)
    data = ana.wide(scores, "r1").assign(bias=bias.set_index("step")["entailment_share"])
    ref = pg.partial_corr(data=data, x="a", y="b", covar=["id", "bias"])
    assert pairs.iloc[0]["r_partial_bias"] == pytest.approx(float(ref["r"].iloc[0]), abs=1e-12)


# --------------------------------------------------------------------------- 10. heatmap of the primary method


def test_heatmap_draws_the_primary_method_and_names_it(tmp_path):
    scores = figure_scores()
    gam = ana.pair_table(scores, method="gam")
    r, p = rep.partial_matrix(gam, "r1")
    by_pair = gam[gam["run"] == "r1"].set_index(["ood_a", "ood_b"])
    assert r.loc["A", "B"] == r.loc["B", "A"] == by_pair.loc[("A", "B"), "r_gam"]
    assert p.loc["C", "A"] == by_pair.loc[("A", "C"), "p_gam_holm"]
    # the linear columns are still there to draw on request
    r_lin, _ = rep.partial_matrix(gam, "r1", r="r_partial", p="p_partial_holm")
    assert r_lin.loc["A", "B"] == by_pair.loc[("A", "B"), "r_partial"]
    rep.correlation_heatmap(gam, "r1", tmp_path / "g.png", tmp_path / "g.svg")
    rep.correlation_heatmap(ana.pair_table(scores), "r1", tmp_path / "l.png", tmp_path / "l.svg")
    gam_svg = (tmp_path / "g.svg").read_text()
    lin_svg = (tmp_path / "l.svg").read_text()
    assert rep.METHOD_TITLES["gam"] in gam_svg and rep.METHOD_TITLES["linear"] not in gam_svg
    assert rep.METHOD_TITLES["linear"] in lin_svg
    with pytest.raises(AnalysisError, match="missing column"):
        rep.correlation_heatmap(gam.drop(columns="method"), "r1", tmp_path / "x.png", tmp_path / "x.svg")


# --------------------------------------------------------------------------- 11. workflow steps (no Snakemake)


def test_collect_scores_and_analyse_trajectory_write_items_bias_and_report(tmp_path):
    from shiftwork.tables import read_table, write_table
    from shiftwork.trajectory.sections import AnalysisSettings
    from shiftwork.trajectory.steps import analyse_trajectory, collect_scores

    items = random_items()
    paths = []
    for step, part in items.groupby("step"):
        path = tmp_path / "eval" / f"step-{step}.parquet"
        write_table(part.assign(margin=0.5).sample(frac=1.0, random_state=int(step)), path)
        paths.append(str(path))
    runs = {run: {"suite": "s", "shots": 8, "seed": 0} for run in items["run"].unique()}
    collect_scores(paths, "id", str(tmp_path / "scores.parquet"), str(tmp_path / "items.parquet"), runs)
    got_items = read_table(tmp_path / "items.parquet")
    assert list(got_items.columns) == list(ana.ITEM_COLUMNS) and len(got_items) == len(items)
    scores = read_table(tmp_path / "scores.parquet")
    pd.testing.assert_frame_equal(
        scores[["step", "testset", "accuracy", "role"]].reset_index(drop=True),
        scores_of(items)[["step", "testset", "accuracy", "role"]].reset_index(drop=True),
        check_dtype=False,
    )
    settings = {
        "alpha": 0.05,
        "spline_df": 3,
        "method": "gam",
        "gam_df": 10,
        "bootstrap": {"resamples": 25, "seed": 2, "together": []},
    }
    outputs = {k: str(tmp_path / f"{k}.{ext}") for k, ext in (("pairs", "parquet"), ("summary", "parquet"))}
    outputs |= {"label_bias": str(tmp_path / "label_bias.parquet"), "report": str(tmp_path / "report.md")}
    outputs |= {"seeds": str(tmp_path / "seeds.parquet")}
    analyse_trajectory(
        str(tmp_path / "scores.parquet"),
        str(tmp_path / "items.parquet"),
        AnalysisSettings.from_config(settings),
        outputs,
        str(tmp_path / "figs"),
    )
    pairs = read_table(outputs["pairs"])
    # the defaults: the lean-free score, p-values over the effective number of checkpoints
    from shiftwork.trajectory.scores import analysis_scores

    lean_free = analysis_scores(scores, "lean_free_accuracy")
    expected = ana.pair_table(
        lean_free, method="gam", score="lean_free_accuracy", dependence="effective_n", items=items, resamples=25, seed=2
    )
    pd.testing.assert_frame_equal(pairs, expected)
    assert (pairs["n_boot"] == 25).all() and (pairs["method"] == "gam").all()
    pd.testing.assert_frame_equal(read_table(outputs["label_bias"]), ana.label_bias(items))
    report = (tmp_path / "report.md").read_text()
    assert "## Label bias per checkpoint" in report
    assert "| model | run | step | n | entailment_share | entailment_share_a |" in report
    first = ana.label_bias(items).iloc[0]
    assert f"| m1 | r1 | 0 | {first['n']} | {first['entailment_share']:.3f} |" in report
    assert "| r_raw | r_primary | p_primary_holm | boot_sign_share | r_partial_bias | sign |" in report
    assert "primary method gam" in report
    # one seed per setting: the seed summary is each pair's own r_primary and sign
    seeds = read_table(outputs["seeds"])
    assert seeds[["model", "suite", "shots", "n_runs"]].drop_duplicates().values.tolist() == [["m1", "s", "8", 1]]
    assert seeds["r_mean"].tolist() == pytest.approx(pairs["r_primary"].tolist(), nan_ok=True)
    assert seeds["sign"].tolist() == pairs["sign"].tolist()
    assert (tmp_path / "figs" / "partial_r1.svg").exists() and (tmp_path / "figs" / "curves.png").exists()


def test_sets_resampled_together_share_their_draws():
    from shiftwork.trajectory import bootstrap as boot

    # two sets on the same three sources (rows aligned), one on its own; one checkpoint each
    a = np.array([[1.0], [0.0], [0.0]])
    b = np.array([[1.0], [1.0], [0.0]])
    c = np.array([[0.0], [1.0], [1.0], [1.0]])
    got = boot.resample_accuracies([a, b, c], np.random.default_rng(7), 50, groups=["g", "g", None])
    # by hand: the draws are a's indices (reused for b) and then c's, from the same generator
    rng = np.random.default_rng(7)
    idx_ab = rng.integers(0, 3, size=(50, 3))
    idx_c = rng.integers(0, 4, size=(50, 4))
    assert got[:, 0, 0].tolist() == pytest.approx(a[idx_ab, 0].mean(axis=1).tolist())
    assert got[:, 0, 1].tolist() == pytest.approx(b[idx_ab, 0].mean(axis=1).tolist())
    assert got[:, 0, 2].tolist() == pytest.approx(c[idx_c, 0].mean(axis=1).tolist())
    # source 0 is right in both sets and source 2 in neither: b's accuracy is never below a's
    assert (got[:, 0, 1] >= got[:, 0, 0]).all()
    with pytest.raises(ValueError, match="as many items"):
        boot.resample_accuracies([a, c], np.random.default_rng(0), 5, groups=["g", "g"])
