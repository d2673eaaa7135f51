"""Tests of shiftwork.trajectory.analysis and shiftwork.trajectory.report.

The tables are hand-made so that the answers are known: OOD columns are an affine function of
the ID column plus residual components that are orthogonal to ``[1, id]``, so the partial
correlation is the cosine between the residual components.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pingouin as pg
import pytest
from scipy import stats as sps

from shiftwork.trajectory import analysis as ana
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
    rep.heatmap(pairs, "r1", out / "heat.png", out / "heat.svg")
    rep.curve_plot(scores, out / "curves.png", out / "curves.svg")
    names = sorted(p.name for p in out.iterdir())
    assert names == ["curves.png", "curves.svg", "heat.png", "heat.svg"]  # no temporary files left
    for stem in ("heat", "curves"):
        png = (out / f"{stem}.png").read_bytes()
        assert png.startswith(PNG_MAGIC) and len(png) > 1000
        svg = (out / f"{stem}.svg").read_text()
        assert "<svg" in svg and svg.rstrip().endswith("</svg>")
    with pytest.raises(AnalysisError, match="run 'r7' has no pairs"):
        rep.heatmap(pairs, "r7", out / "x.png", out / "x.svg")
    assert sorted(p.name for p in out.iterdir()) == names


def test_heatmap_draws_undefined_cells_and_a_single_run_curve(tmp_path):
    table = sign_table(flip=1.0)
    table["K"] = 0.5  # constant: its cells are n/a
    scores = to_scores(table, "id", "m1", "solo")
    pairs = ana.pair_table(scores)
    r, _ = rep.partial_matrix(pairs, "solo")
    assert np.isnan(r.loc["A", "K"]) and r.shape == (5, 5)
    rep.heatmap(pairs, "solo", tmp_path / "h.png", tmp_path / "h.svg")
    rep.curve_plot(scores, tmp_path / "c.png", tmp_path / "c.svg")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.png", "c.svg", "h.png", "h.svg"]
    assert (tmp_path / "h.png").read_bytes().startswith(PNG_MAGIC)
