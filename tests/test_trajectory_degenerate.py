"""Degenerate series in the trajectory analyses: a constant test set (0 or 1 at every checkpoint,
or over one window), an OOD set that is an exact function of the ID set, a constant ID set and an
ID set with too few distinct values for the spline. The pair, window and fingerprint analyses
must give rows whose correlations are NaN, whose sign is ``"null"`` and whose ``reason`` names
the cause, never an exception, and the other pairs must keep the values they have without the
degenerate set.

Expected values are worked out by hand (see each test) or come from the same analysis run on
the table without the degenerate set."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pingouin as pg
import pytest

from shiftwork.trajectory import analysis as ana
from shiftwork.trajectory import figures as fig_mod
from shiftwork.trajectory import gam as ana_gam
from shiftwork.trajectory.fingerprint import fingerprint, fingerprint_matrix
from shiftwork.trajectory.primary import RAW_VS_PRIMARY_COLUMNS, raw_vs_primary
from shiftwork.trajectory.steps import plot_trajectory
from shiftwork.trajectory.windows import WINDOW_COLUMNS, window_table

# Orthogonal polynomial contrasts for 8 equally spaced points (orthogonal to [1, step]).
QUAD8 = np.array([7, 1, -3, -5, -5, -3, 1, 7], dtype=float)
CUBIC8 = np.array([-7, 5, 7, 3, -3, -7, -5, 7], dtype=float)
ID8 = np.arange(1, 9) / 10.0
A8 = 0.2 + 0.5 * ID8 + 0.005 * QUAD8
B8 = 0.3 + 0.4 * ID8 + 0.005 * (QUAD8 + CUBIC8)
R_AB = math.sqrt(7 / 18)  # the partial r of A8 and B8: |QUAD| / sqrt(|QUAD|^2 + |CUBIC|^2)
PAIR_KEY = ["ood_a", "ood_b"]


def scores_from(columns: dict[str, np.ndarray], id_col: str = "id", step: int = 10, run: str = "r1") -> pd.DataFrame:
    """Long scores rows from per-set accuracy columns (checkpoints 0, step, 2 step, ...)."""
    rows = [
        {
            "model": "m1",
            "run": run,
            "step": t * step,
            "testset": name,
            "accuracy": float(v),
            "role": "id" if name == id_col else "ood",
        }
        for name, values in columns.items()
        for t, v in enumerate(values)
    ]
    return pd.DataFrame(rows)


def row(pairs: pd.DataFrame, a: str, b: str) -> pd.Series:
    return pairs.set_index(PAIR_KEY).loc[(a, b)]


def assert_undefined(pairs: pd.DataFrame, a: str, b: str, reason: str) -> None:
    """The pair's primary correlation (and every control of it) is NaN, its sign null, its reason named."""
    got = row(pairs, a, b)
    for col in ("r_primary", "p_primary", "p_primary_holm", "p_primary_bh", "boot_sign_share"):
        assert math.isnan(got[col]), col
    assert got["sign"] == "null" and got["n_boot"] == 0
    assert got["reason"] == reason


def assert_same_rows(with_set: pd.DataFrame, without_set: pd.DataFrame, pairs: list[tuple[str, str]]) -> None:
    """The rows of ``pairs`` are identical (every column) in the two tables."""
    left = with_set.set_index(PAIR_KEY).loc[pairs].reset_index()
    right = without_set.set_index(PAIR_KEY).loc[pairs].reset_index()
    pd.testing.assert_frame_equal(left, right, check_exact=False, rtol=1e-12, atol=1e-14)


# --------------------------------------------------------------------------- pair table


@pytest.mark.parametrize("method", ["linear", "gam"])
def test_constant_sets_at_zero_and_one_are_named_and_leave_the_other_pair_alone(method):
    # c is 0 and d is 1 at every checkpoint: every pair with one of them is undefined
    columns = {"id": ID8, "a": A8, "b": B8, "c": np.zeros(8), "d": np.ones(8)}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning either
        pairs = ana.pair_table(scores_from(columns), method=method)
    assert list(pairs.columns) == list(ana.PAIR_COLUMNS) and pairs["reason"].iloc[0] == ""
    for a, b, reason in [
        ("a", "c", "c constant"),
        ("a", "d", "d constant"),
        ("b", "c", "c constant"),
        ("b", "d", "d constant"),
        ("c", "d", "c constant; d constant"),
    ]:
        assert_undefined(pairs, a, b, reason)
        got = row(pairs, a, b)
        for col in ("r_raw", "r_partial", "r_partial_spearman", "r_nonlinear", "r_gam", "ci95_low"):
            assert math.isnan(got[col]), col
    ab = row(pairs, "a", "b")
    assert ab["r_partial"] == pytest.approx(R_AB, abs=1e-12)
    # a family of one defined p-value: Holm and BH leave it as it is
    assert ab["p_partial_holm"] == pytest.approx(ab["p_partial"], rel=1e-12)
    assert ab["p_primary_holm"] == pytest.approx(ab["p_primary"], rel=1e-12)
    alone = ana.pair_table(scores_from({"id": ID8, "a": A8, "b": B8}), method=method)
    assert_same_rows(pairs, alone, [("a", "b")])


@pytest.mark.parametrize("method", ["linear", "gam"])
def test_a_set_that_is_a_line_in_the_id_set_has_no_variance_left(method):
    c = 0.1 + 0.5 * ID8  # exactly linear in ID: nothing is left after either control
    pairs = ana.pair_table(scores_from({"id": ID8, "a": A8, "b": B8, "c": c}), method=method)
    assert_undefined(pairs, "a", "c", "c has no variance left after the ID control")
    assert_undefined(pairs, "b", "c", "c has no variance left after the ID control")
    # the raw correlation is still defined: c is a line in ID, so corr(a, c) = corr(a, id)
    assert row(pairs, "a", "c")["r_raw"] == pytest.approx(np.corrcoef(A8, ID8)[0, 1], abs=1e-12)
    alone = ana.pair_table(scores_from({"id": ID8, "a": A8, "b": B8}), method=method)
    assert_same_rows(pairs, alone, [("a", "b")])


@pytest.mark.parametrize("method", ["linear", "gam"])
def test_a_constant_id_set_makes_every_pair_undefined(method):
    c = np.zeros(8)
    pairs = ana.pair_table(scores_from({"id": np.full(8, 0.5), "a": A8, "b": B8, "c": c}), method=method)
    assert_undefined(pairs, "a", "b", "id constant")
    assert_undefined(pairs, "a", "c", "id constant; c constant")
    ab = row(pairs, "a", "b")
    assert math.isnan(ab["r_nonlinear"]) and math.isnan(ab["r_partial_spearman"]) and math.isnan(ab["r_gam"])
    # nothing to control for, but the raw correlation of a and b is defined
    assert ab["r_raw"] == pytest.approx(np.corrcoef(A8, B8)[0, 1], abs=1e-12)
    assert (pairs["sign"] == "null").all()


def test_two_id_values_are_too_few_for_the_spline():
    # ID alternates between two values; c takes one value per ID value, so it is a (linear)
    # function of ID; a and b are not. The GAM of two distinct ID values is the straight line.
    idv = np.array([0.4, 0.6] * 4)
    a = np.array([0.30, 0.52, 0.35, 0.50, 0.31, 0.58, 0.40, 0.49])
    b = np.array([0.62, 0.41, 0.66, 0.45, 0.60, 0.47, 0.71, 0.40])
    c = np.where(idv == 0.4, 0.2, 0.5)
    scores = scores_from({"id": idv, "a": a, "b": b, "c": c})
    gam = ana.pair_table(scores, method="gam")
    reason = "too few distinct ID values for the spline; c has no variance left after the ID control"
    assert_undefined(gam, "a", "c", reason)
    assert_undefined(gam, "b", "c", reason)
    linear = ana.pair_table(scores, method="linear")
    assert_undefined(linear, "a", "c", "c has no variance left after the ID control")
    # the GAM of a and b is the straight line: r_gam is pingouin's linear partial correlation
    ref = float(pg.partial_corr(data=pd.DataFrame({"a": a, "b": b, "z": idv}), x="a", y="b", covar="z")["r"].iloc[0])
    assert row(gam, "a", "b")["r_gam"] == pytest.approx(ref, abs=1e-10)
    assert row(gam, "a", "b")["reason"] == ""


@pytest.mark.parametrize("method", ["linear", "gam"])
def test_a_near_constant_set_is_computed(method):
    # c is 0 except 0.25 at the last checkpoint: its residual on [1, id] is 0.25 (e8 - h8) with
    # leverage h_88 = 1/8 + 3.5**2/42 = 5/12, so |resid|**2 = 0.25**2 * 7/12; a's residual is
    # 0.005 QUAD8 (orthogonal to [1, id]) and <QUAD8, e8> = 7: r = 7 / sqrt(168 * 7/12) = 1/sqrt(2)
    c = np.zeros(8)
    c[-1] = 0.25
    pairs = ana.pair_table(scores_from({"id": ID8, "a": A8, "b": B8, "c": c}), method=method)
    ac = row(pairs, "a", "c")
    assert ac["r_partial"] == pytest.approx(1 / math.sqrt(2), abs=1e-12)
    assert math.isfinite(ac["r_primary"]) and math.isfinite(ac["p_primary"]) and ac["reason"] == ""
    assert (pairs["reason"] == "").all()


def test_as_many_distinct_id_values_as_basis_functions_is_computed():
    # gam_df 4 and four distinct ID values over 12 checkpoints: the spline has as many functions
    # as points and could reproduce any function of ID; c is one (not a line) and keeps a residual
    idv = np.repeat([0.5, 0.6, 0.7, 0.8], 3)
    rng = np.random.default_rng(4)
    a = 0.3 + 0.5 * idv + rng.normal(0, 0.02, 12)
    b = 0.2 + 0.6 * idv + rng.normal(0, 0.02, 12)
    c = np.repeat([0.1, 0.4, 0.2, 0.3], 3)
    pairs = ana.pair_table(scores_from({"id": idv, "a": a, "b": b, "c": c}), method="gam", gam_df=4)
    finite = np.isfinite(pairs["r_primary"]) & np.isfinite(pairs["p_primary"])
    assert ((pairs["reason"] == "") == finite).all()
    assert pairs.loc[~finite, "sign"].eq("null").all()
    assert row(pairs, "a", "b")["reason"] == ""


# --------------------------------------------------------------------------- bootstrap, windows

N_STEPS, N_ITEMS = 26, 8


def item_rows(patterns: dict[str, np.ndarray], step: int = 10) -> pd.DataFrame:
    rows = [
        {
            "model": "m1",
            "run": "r1",
            "step": t * step,
            "set": name,
            "example_id": f"{name}-{k}",
            "label": "entailment",
            "pred": "entailment" if c else "not_entailment",
            "correct": bool(c),
        }
        for name, matrix in patterns.items()
        for k, pattern in enumerate(matrix)
        for t, c in enumerate(pattern)
    ]
    return pd.DataFrame(rows, columns=list(ana.ITEM_COLUMNS))


def scores_of(items: pd.DataFrame) -> pd.DataFrame:
    out = (
        items.groupby(["model", "run", "step", "set"])["correct"]
        .mean()
        .reset_index()
        .rename(columns={"set": "testset", "correct": "accuracy"})
    )
    out["role"] = np.where(out["testset"] == "id", "id", "ood")
    return out


def early_constant_items(seed: int = 1) -> pd.DataFrame:
    """26 checkpoints of 8 items per set whose chance rises with the step; the OOD set c answers
    every item wrong at the first 13 checkpoints (accuracy 0 over the early window)."""
    rng = np.random.default_rng(seed)
    rising = np.linspace(0.1, 0.9, N_STEPS)
    patterns = {
        name: (rng.uniform(size=(N_ITEMS, N_STEPS)) < np.clip(rising + rng.normal(0, 0.2, (N_ITEMS, 1)), 0, 1))
        for name in ("id", "a", "b", "c")
    }
    patterns["c"][:, : N_STEPS // 2] = False
    return item_rows({k: v.astype(int) for k, v in patterns.items()})


@pytest.mark.parametrize("method", ["linear", "gam"])
def test_bootstrap_of_a_window_with_a_constant_set(method):
    # the early window (13 checkpoints), GAM of gam_df 10 with the item bootstrap: resampled ID
    # columns bunch on few values and make the penalised system singular (a LinAlgError before)
    items = early_constant_items()
    early = scores_of(items)[lambda d: d["step"] < 10 * N_STEPS // 2]
    bias = ana.label_bias(items)
    pairs = ana.pair_table(early, method=method, gam_df=10, items=items, bias=bias, resamples=50, seed=3)
    assert_undefined(pairs, "a", "c", "c constant")
    assert_undefined(pairs, "b", "c", "c constant")
    ab = row(pairs, "a", "b")
    assert ab["reason"] == "" and ab["n_boot"] > 0
    # c sorts after a and b, so the bootstrap draws of id, a and b are the same without it
    keep = items[items["set"] != "c"]
    alone = ana.pair_table(
        early[early["testset"] != "c"], method=method, gam_df=10, items=keep, bias=bias, resamples=50, seed=3
    )
    assert_same_rows(pairs, alone, [("a", "b")])


def crash_scores() -> pd.DataFrame:
    """26 checkpoints: for steps 0-8 the model answers one label, so the balanced ID set sits at
    0.5 and the one-label OOD set c at 0 (c stays 0 for the whole early window, steps 0-12)."""
    rng = np.random.default_rng(0)
    steps = np.arange(N_STEPS)
    idv = np.round(np.clip(0.5 + 0.015 * steps + rng.normal(0, 0.01, N_STEPS), 0, 1), 3)
    idv[:9] = 0.5
    columns = {
        "id": idv,
        "a": np.round(np.clip(0.4 + 0.01 * steps + rng.normal(0, 0.03, N_STEPS), 0, 1), 3),
        "b": np.round(np.clip(0.3 + 0.012 * steps + rng.normal(0, 0.03, N_STEPS), 0, 1), 3),
        "c": np.r_[np.zeros(13), np.round(rng.uniform(0.1, 0.6, N_STEPS - 13), 3)],
    }
    return scores_from(columns)


def test_window_table_gam_with_a_set_constant_in_the_early_window():
    # the failed run's case: plot_trajectory's early/late analysis, GAM with gam_df 10
    scores = crash_scores()
    table = window_table(scores, alpha=0.05, df=3, method="gam", gam_df=10)
    assert list(table.columns) == list(WINDOW_COLUMNS)
    windows = table.set_index(PAIR_KEY)
    for pair in [("a", "c"), ("b", "c")]:
        got = windows.loc[pair]
        assert math.isnan(got["r_early"]) and got["sign_early"] == "null"
        assert math.isnan(got["r_diff"]) and math.isnan(got["z_diff"]) and math.isnan(got["p_diff"])
        assert got["reason"] == "early: c constant"
        assert math.isfinite(got["r_late"])
    assert windows.loc[("a", "b"), "reason"] == ""
    # independent: pair_table on each half, the early one without c
    early, late = scores[scores["step"] < 130], scores[scores["step"] >= 130]
    alone = ana.pair_table(early[early["testset"] != "c"], method="gam", gam_df=10).set_index(PAIR_KEY)
    assert windows.loc[("a", "b"), "r_early"] == pytest.approx(alone.loc[("a", "b"), "r_primary"], abs=1e-12)
    assert windows.loc[("a", "b"), "p_early_holm"] == pytest.approx(alone.loc[("a", "b"), "p_primary_holm"], abs=1e-12)
    second = ana.pair_table(late, method="gam", gam_df=10).set_index(PAIR_KEY)
    for pair in [("a", "b"), ("a", "c"), ("b", "c")]:
        assert windows.loc[pair, "r_late"] == pytest.approx(second.loc[pair, "r_primary"], abs=1e-12)


def test_window_reason_names_both_windows():
    # c is constant at 1 over the whole run and d over the late window only
    rng = np.random.default_rng(2)
    idv = np.linspace(0.5, 0.9, 16) + rng.normal(0, 0.01, 16)
    a = 0.2 + 0.5 * idv + rng.normal(0, 0.02, 16)
    d = np.r_[0.3 + 0.4 * idv[:8] + rng.normal(0, 0.02, 8), np.zeros(8)]
    scores = scores_from({"id": idv, "a": a, "c": np.ones(16), "d": d})
    windows = window_table(scores).set_index(PAIR_KEY)
    assert windows.loc[("a", "c"), "reason"] == "early: c constant; late: c constant"
    assert windows.loc[("c", "d"), "reason"] == "early: c constant; late: c constant, d constant"
    assert windows.loc[("a", "d"), "reason"] == "late: d constant"
    assert math.isfinite(windows.loc[("a", "d"), "r_early"]) and math.isnan(windows.loc[("a", "d"), "r_late"])


def test_penalised_residuals_of_a_singular_system_are_statsmodels_fit():
    # five distinct values, five basis functions: X'X + 2 alpha S is singular at alpha 1e-8
    from statsmodels.gam.api import BSplines, GLMGam

    x = np.array([0.57, 0.89, 0.89, 0.89, 0.89, 0.16, 0.7, 0.1, 0.89])
    y = np.array([0.3, 0.5, 0.6, 0.4, 0.5, 0.2, 0.45, 0.1, 0.55])
    _, design, penalty = ana_gam.gam_design(x, 5)
    with pytest.raises(np.linalg.LinAlgError):
        np.linalg.solve(design.T @ design + 2e-8 * penalty, design.T @ y)
    got = ana_gam.penalised_residuals(y[:, None], x, 10, np.array([1e-8]))[:, 0]
    smoother = BSplines(((x - x.min()) / (x.max() - x.min()))[:, None], df=[5], degree=[3])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = GLMGam(y, exog=np.ones((9, 1)), smoother=smoother, alpha=[1e-8]).fit().resid_response
    np.testing.assert_allclose(got, ref, atol=1e-10)


# --------------------------------------------------------------------------- fingerprint, figures


def nan_pairs() -> pd.DataFrame:
    rows = [
        ("m1", "r1", "a", "b", 0.2, 0.01, "positive", ""),
        ("m1", "r2", "a", "b", math.nan, math.nan, "null", "a constant"),
        ("m1", "r3", "a", "b", 0.6, 0.02, "positive", ""),
        ("m1", "r1", "a", "c", math.nan, math.nan, "null", "c constant"),
        ("m1", "r2", "a", "c", math.nan, math.nan, "null", "a constant; c constant"),
        ("m1", "r3", "a", "c", math.nan, math.nan, "null", "id constant"),
    ]
    out = pd.DataFrame(
        rows, columns=["model", "run", "ood_a", "ood_b", "r_primary", "p_primary_holm", "sign", "reason"]
    )
    return out.assign(r_raw=[0.5, 0.1, 0.7, math.nan, math.nan, 0.3], n=10)


def test_fingerprint_skips_undefined_runs_and_counts_them():
    table = fingerprint(nan_pairs()).set_index("pair")
    ab, ac = table.loc["a\u2013b"], table.loc["a\u2013c"]
    # a-b: runs 0.2 and 0.6 (r2 skipped): mean 0.4, sd sqrt(0.08), null because r2 is null
    assert (ab["n_runs"], ab["n_skipped"], ab["n_null"], ab["sign"]) == (3, 1, 1, "null")
    assert ab["r_mean"] == pytest.approx(0.4) and ab["r_sd"] == pytest.approx(math.sqrt(0.08))
    assert (ab["r_min"], ab["r_max"]) == (pytest.approx(0.2), pytest.approx(0.6))
    # a-c: every run undefined
    assert (ac["n_runs"], ac["n_skipped"], ac["sign"]) == (3, 3, "null")
    assert all(math.isnan(ac[c]) for c in ("r_mean", "r_sd", "r_min", "r_max"))


def test_all_undefined_pairs_give_nan_tables_and_figures(monkeypatch, tmp_path):
    drawn = []
    monkeypatch.setattr(fig_mod, "save_figure", lambda fig, png, svg: drawn.append(fig.axes[0].texts) or (png, svg))
    pairs = nan_pairs().assign(r_primary=math.nan, p_primary_holm=math.nan, sign="null")
    table = fingerprint(pairs)
    assert table["n_skipped"].tolist() == [3, 3] and table["r_mean"].isna().all()
    assert fingerprint_matrix(table).isna().all().all()
    fig_mod.fingerprint_plot(table, tmp_path / "f.png", tmp_path / "f.svg")
    assert [t.get_text() for t in drawn[0]] == ["n/a", "n/a"]


def test_raw_vs_primary_carries_the_reason_and_its_plot_skips_undefined_rows(monkeypatch, tmp_path):
    drawn = []
    monkeypatch.setattr(fig_mod, "save_figure", lambda fig, png, svg: drawn.append(fig) or (png, svg))
    raw = raw_vs_primary(nan_pairs())
    assert list(raw.columns) == list(RAW_VS_PRIMARY_COLUMNS)
    assert raw["reason"].tolist() == nan_pairs()["reason"].tolist()
    assert raw["shift"].tolist()[0] == pytest.approx(0.2 - 0.5) and raw["shift"].isna().sum() == 4
    assert (raw_vs_primary(nan_pairs().drop(columns="reason"))["reason"] == "").all()
    fig_mod.raw_vs_primary_plot(raw, tmp_path / "r.png", tmp_path / "r.svg")
    # two defined points of run r1 and r3 (a-b): one label each, none for the undefined rows
    labels = [t.get_text() for ax in drawn[0].axes for t in ax.texts]
    assert labels == ["a\u2013b", "a\u2013b"]


def test_plot_trajectory_writes_every_output_for_a_degenerate_window(monkeypatch, tmp_path):
    from shiftwork.tables import read_table, write_table

    titles = []
    monkeypatch.setattr(
        fig_mod, "save_figure", lambda fig, png, svg: titles.append([ax.get_title() for ax in fig.axes]) or (png, svg)
    )
    scores = crash_scores()
    pairs = ana.pair_table(scores, method="gam", gam_df=10)
    write_table(scores, tmp_path / "scores.parquet", {"step": "test"})
    write_table(pairs, tmp_path / "pairs.parquet", {"step": "test"})
    plot_trajectory(
        str(tmp_path / "scores.parquet"),
        str(tmp_path / "pairs.parquet"),
        {"alpha": 0.05, "spline_df": 3, "method": "gam", "gam_df": 10, "score": "accuracy", "pinned": None},
        str(tmp_path / "raw.parquet"),
        str(tmp_path / "fingerprint.parquet"),
        str(tmp_path / "windows.parquet"),
        str(tmp_path / "figures.md"),
        str(tmp_path / "figures"),
    )
    windows = read_table(tmp_path / "windows.parquet").set_index(PAIR_KEY)
    assert windows.loc[("a", "c"), "reason"] == "early: c constant"
    assert read_table(tmp_path / "fingerprint.parquet")["n_skipped"].tolist() == [0, 0, 0]
    assert "early: c constant" in (tmp_path / "figures.md").read_text()
    assert len(titles) == 4  # scatter, raw vs primary, windows, fingerprint


def test_scatter_title_names_the_reason(monkeypatch, tmp_path):
    titles = []
    monkeypatch.setattr(
        fig_mod, "save_figure", lambda fig, png, svg: titles.append([ax.get_title() for ax in fig.axes]) or (png, svg)
    )
    scores = scores_from({"id": ID8, "a": A8, "b": B8, "c": np.ones(8)})
    pairs = ana.pair_table(scores)
    fig_mod.scatter_grid(scores, pairs, "r1", tmp_path / "s.png", tmp_path / "s.svg")
    assert "a vs c\nr = n/a, Holm p = n/a\n(c constant)" in titles[0]
    assert f"a vs b\nr = {R_AB:.2f}, Holm p = {fig_mod._p_text(row(pairs, 'a', 'b')['p_partial_holm'])}" in titles[0]
