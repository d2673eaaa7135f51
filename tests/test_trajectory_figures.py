"""Tests of the trajectory figures and their tables: the early/late windows, the fingerprint,
raw vs primary r, the ID-residual scatter plots and the fixed report figures.

Expected values are worked out by hand or by an independent computation (pingouin on the
halves, Fisher's z with math.erfc, means and standard deviations by hand)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pingouin as pg
import pytest
from scipy import stats as sps

from shiftwork.tables import read_table, write_table
from shiftwork.trajectory import analysis as ana
from shiftwork.trajectory import figures as fig_mod
from shiftwork.trajectory import report as rep
from shiftwork.trajectory.analysis import AnalysisError
from shiftwork.trajectory.fingerprint import FINGERPRINT_COLUMNS, fingerprint, fingerprint_matrix
from shiftwork.trajectory.primary import primary_columns, raw_vs_primary, residual_table
from shiftwork.trajectory.steps import plot_trajectory
from shiftwork.trajectory.windows import WINDOW_COLUMNS, fisher_z_difference, split_steps, window_table

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
OOD = ["a", "b", "c"]


def make_scores(n_steps: int, model: str = "m1", run: str = "r1", seed: int = 0, every: int = 10) -> pd.DataFrame:
    """A run of ``n_steps`` checkpoints (steps 0, every, ...): ID rising, three OOD sets that
    follow it plus shared and own noise (so the partial correlations are neither 0 nor 1)."""
    rng = np.random.default_rng(seed)
    steps = np.arange(n_steps) * every
    idacc = np.linspace(0.5, 0.85, n_steps) + rng.normal(0, 0.01, n_steps)
    shared = rng.normal(0, 0.01, n_steps)
    rows = [
        {"model": model, "run": run, "step": int(s), "testset": "id", "accuracy": float(v), "role": "id"}
        for s, v in zip(steps, idacc)
    ]
    for k, name in enumerate(OOD):
        acc = 0.4 + 0.4 * idacc + (1 if k < 2 else -1) * shared + rng.normal(0, 0.008, n_steps)
        rows += [
            {"model": model, "run": run, "step": int(s), "testset": name, "accuracy": float(v), "role": "ood"}
            for s, v in zip(steps, acc)
        ]
    return pd.DataFrame(rows)


def wide_of(scores: pd.DataFrame, steps: list[int]) -> pd.DataFrame:
    part = scores[scores["step"].isin(steps)]
    return part.pivot(index="step", columns="testset", values="accuracy")


class Captured:
    """Stands in for save_figure: keeps what a test needs from the figure before it is closed."""

    def __init__(self) -> None:
        self.figs: list[dict] = []

    def __call__(self, fig, out_png, out_svg):
        axes = [ax for ax in fig.axes if ax.get_visible()]
        self.figs.append(
            {
                "titles": [ax.get_title() for ax in axes],
                "texts": [[t.get_text() for t in ax.texts] for ax in axes],
                "fig_texts": [t.get_text() for t in fig.texts],
                "legends": [[t.get_text() for t in leg.get_texts()] for leg in fig.legends],
                "axis_legends": [ax.get_legend() for ax in axes],
                "lines": [[(ln.get_linestyle(), list(ln.get_ydata())) for ln in ax.get_lines()] for ax in axes],
                "offsets": [[np.array(c.get_offsets()) for c in ax.collections] for ax in axes],
                "ylabels": [ax.get_ylabel() for ax in axes],
                "suptitle": fig._suptitle.get_text() if fig._suptitle is not None else "",
                "layout": type(fig.get_layout_engine()).__name__,
            }
        )
        return out_png, out_svg


@pytest.fixture
def captured(monkeypatch):
    cap = Captured()
    monkeypatch.setattr(fig_mod, "save_figure", cap)
    monkeypatch.setattr(rep, "save_figure", cap)
    return cap


# --------------------------------------------------------------------------- windows


def test_split_steps_puts_the_odd_middle_checkpoint_late():
    assert split_steps([60, 0, 10, 20, 30, 40, 50]) == ([0, 10, 20], [30, 40, 50, 60])
    assert split_steps(range(0, 80, 10)) == ([0, 10, 20, 30], [40, 50, 60, 70])
    assert split_steps([5, 5, 1, 3]) == ([1], [3, 5])  # duplicates count once


def test_fisher_z_difference_against_the_hand_formula():
    z, p = fisher_z_difference(0.2, 20, 0.6, 30)
    # k = 1 covariate: standard errors 1/sqrt(20 - 4) and 1/sqrt(30 - 4)
    z_hand = (0.5 * math.log(1.6 / 0.4) - 0.5 * math.log(1.2 / 0.8)) / math.sqrt(1 / 16 + 1 / 26)
    assert z == pytest.approx(z_hand, rel=1e-12)
    assert z == pytest.approx(1.5434, abs=1e-4)
    assert p == pytest.approx(math.erfc(abs(z_hand) / math.sqrt(2)), rel=1e-12)
    z0, p0 = fisher_z_difference(0.5, 20, 0.5, 9, covariates=0)
    assert z0 == 0.0 and p0 == pytest.approx(1.0)
    for args in [(0.3, 4, 0.5, 10), (1.0, 10, 0.5, 10), (math.nan, 10, 0.5, 10)]:
        assert all(math.isnan(v) for v in fisher_z_difference(*args))


def test_window_table_equals_pingouin_on_each_half():
    scores = make_scores(11, seed=3)  # steps 0..100: early 0..40 (5), late 50..100 (6)
    table = window_table(scores, alpha=0.05, df=3)
    assert list(table.columns) == list(WINDOW_COLUMNS)
    assert table[["ood_a", "ood_b"]].values.tolist() == [["a", "b"], ["a", "c"], ["b", "c"]]
    bounds = ["early_first_step", "early_last_step", "late_first_step", "late_last_step"]
    assert table[bounds].drop_duplicates().values.tolist() == [[0, 40, 50, 100]]
    for name, steps, n in (("early", list(range(0, 50, 10)), 5), ("late", list(range(50, 110, 10)), 6)):
        assert set(table[f"n_{name}"]) == {n}
        wide = wide_of(scores, steps)
        res = [pg.partial_corr(data=wide, x=x, y=y, covar="id") for x, y in (("a", "b"), ("a", "c"), ("b", "c"))]
        r = np.array([float(x["r"].iloc[0]) for x in res])
        p = np.array([float(x["p_val"].iloc[0]) for x in res])
        holm = pg.multicomp(p, method="holm")[1]
        np.testing.assert_allclose(table[f"r_{name}"], r, atol=1e-12)
        np.testing.assert_allclose(table[f"p_{name}_holm"], holm, rtol=1e-10)
        signs = np.where(holm < 0.05, np.where(r > 0, "positive", "negative"), "null")
        assert table[f"sign_{name}"].tolist() == signs.tolist()
    for row in table.itertuples():
        z = (math.atanh(row.r_late) - math.atanh(row.r_early)) / math.sqrt(1 / (6 - 4) + 1 / (5 - 4))
        assert row.r_diff == pytest.approx(row.r_late - row.r_early)
        assert row.z_diff == pytest.approx(z, rel=1e-12)
        assert row.p_diff == pytest.approx(math.erfc(abs(z) / math.sqrt(2)), rel=1e-12)


def test_window_table_runs_separately_and_prefers_r_primary(monkeypatch):
    scores = pd.concat([make_scores(8, "m1", "r1", seed=1), make_scores(9, "m2", "r2", seed=2)], ignore_index=True)
    table = window_table(scores)
    assert table.groupby("run")[["n_early", "n_late"]].first().values.tolist() == [[4, 4], [4, 5]]
    assert table["z_diff"][table["run"] == "r1"].isna().all()  # 4 checkpoints: no standard error
    assert table["p_diff"][table["run"] == "r2"].isna().all()

    from shiftwork.trajectory import windows as win

    def with_primary(scores, **options):
        pairs = ana.pair_table(scores, **options)
        return pairs.assign(r_primary=0.5, p_primary_holm=0.01)

    monkeypatch.setattr(win, "pair_table", with_primary)
    table = window_table(scores)
    assert set(table["r_early"]) == {0.5} and set(table["p_late_holm"]) == {0.01}


def test_window_difference_under_the_gam_charges_its_effective_degrees_of_freedom():
    scores = make_scores(24, seed=5)
    table = window_table(scores, method="gam")
    early = ana.pair_table(scores[scores["step"] < 120], method="gam")
    late = ana.pair_table(scores[scores["step"] >= 120], method="gam")
    assert table["n_early"].iloc[0] == 12 and table["early_last_step"].iloc[0] == 110
    for row, e, lt in zip(table.itertuples(), early.itertuples(), late.itertuples()):
        k = max(e.edf_gam - 1.0, lt.edf_gam - 1.0, 1.0)
        # by hand: Fisher z of the two windows' GAM r with n - 3 - k degrees of freedom each
        z = (math.atanh(lt.r_gam) - math.atanh(e.r_gam)) / math.sqrt(2.0 / (12 - 3 - k))
        assert row.z_diff == pytest.approx(z)
        assert row.p_diff == pytest.approx(2 * (1 - sps.norm.cdf(abs(z))))


def test_window_table_names_a_run_too_short_for_two_windows():
    scores = pd.concat([make_scores(8, run="ok"), make_scores(7, run="short-run")], ignore_index=True)
    with pytest.raises(
        AnalysisError,
        match=r"run 'short-run' has 7 checkpoints: 3 in the early window and 4 in the late one; .* at least 4 in each",
    ):
        window_table(scores)


# --------------------------------------------------------------------------- primary, fingerprint


def hand_pairs() -> pd.DataFrame:
    rows = [
        ("m1", "r1", "a", "b", 0.2, "positive"),
        ("m1", "r2", "a", "b", 0.6, "positive"),
        ("m1", "r1", "a", "c", -0.5, "negative"),
        ("m1", "r2", "a", "c", 0.1, "null"),
        ("m2", "r3", "a", "b", 0.3, "null"),
        ("m2", "r3", "a", "c", math.nan, "null"),
    ]
    out = pd.DataFrame(rows, columns=["model", "run", "ood_a", "ood_b", "r_partial", "sign"])
    out["p_partial_holm"] = [0.01, 0.02, 0.03, 0.4, 0.2, math.nan]
    out["r_raw"] = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4]
    out["n"] = 10
    return out


def test_primary_columns_prefer_r_primary():
    pairs = hand_pairs()
    assert primary_columns(pairs) == ("r_partial", "p_partial_holm")
    assert primary_columns(pairs.assign(r_primary=0.0, p_primary_holm=1.0)) == ("r_primary", "p_primary_holm")
    with pytest.raises(AnalysisError, match=r"missing column\(s\) \['p_primary_holm'\]"):
        primary_columns(pairs.assign(r_primary=0.0))
    raw = raw_vs_primary(pairs)
    np.testing.assert_allclose(raw["shift"][:4], [0.2 - 0.9, 0.6 - 0.8, -0.5 - 0.7, 0.1 - 0.6])
    assert raw_vs_primary(pairs.assign(r_primary=1.0, p_primary_holm=0.5))["shift"].tolist()[:2] == pytest.approx(
        [0.1, 0.2]
    )


def test_fingerprint_mean_spread_and_agreement_by_hand():
    table = fingerprint(hand_pairs())
    assert list(table.columns) == list(FINGERPRINT_COLUMNS)
    assert table[["model", "pair", "n_runs", "sign"]].values.tolist() == [
        ["m1", "a\u2013b", 2, "positive"],  # both runs positive and significant
        ["m1", "a\u2013c", 2, "null"],  # one run null
        ["m2", "a\u2013b", 1, "null"],
        ["m2", "a\u2013c", 1, "null"],
    ]
    ab = table.iloc[0]
    assert ab.r_mean == pytest.approx(0.4)
    assert ab.r_sd == pytest.approx(math.sqrt(((0.2 - 0.4) ** 2 + (0.6 - 0.4) ** 2) / 1))
    assert (ab.r_min, ab.r_max, ab.n_positive, ab.n_null) == (pytest.approx(0.2), pytest.approx(0.6), 2, 0)
    ac = table.iloc[1]
    assert ac.r_mean == pytest.approx(-0.2) and ac.r_sd == pytest.approx(math.sqrt(0.18))
    assert (ac.n_negative, ac.n_null) == (1, 1)
    assert table.iloc[2].r_mean == pytest.approx(0.3) and math.isnan(table.iloc[2].r_sd)
    assert math.isnan(table.iloc[3].r_mean)  # the only run's r is undefined
    matrix = fingerprint_matrix(table)
    assert list(matrix.index) == ["m1", "m2"] and list(matrix.columns) == ["a\u2013b", "a\u2013c"]
    # r_primary, when there, is what is averaged
    primary = fingerprint(hand_pairs().assign(r_primary=[1.0, 0.0, 0.5, 0.5, 0.2, 0.1], p_primary_holm=0.01))
    assert primary["r_mean"].tolist() == pytest.approx([0.5, 0.5, 0.2, 0.1])
    one = fingerprint(hand_pairs()[lambda d: d["model"] == "m1"][lambda d: d["run"] == "r1"])
    assert one["sign"].tolist() == ["positive", "negative"] and one["n_runs"].tolist() == [1, 1]


def test_fingerprint_rejects_bad_tables():
    with pytest.raises(AnalysisError, match="no rows"):
        fingerprint(hand_pairs().iloc[:0])
    bad = hand_pairs()
    bad.loc[4, "run"] = "r1"
    with pytest.raises(AnalysisError, match="run 'r1' is listed under several models"):
        fingerprint(bad)
    with pytest.raises(AnalysisError, match=r"run 'r1' lists pair \('a', 'b'\) twice"):
        fingerprint(pd.concat([hand_pairs().iloc[:1], hand_pairs()], ignore_index=True))


def test_residual_table_is_orthogonal_to_the_id_column_and_gives_r_partial():
    scores = make_scores(10, seed=5)
    resid = residual_table(scores, "r1")
    wide = wide_of(scores, list(range(0, 100, 10)))
    design = np.column_stack([np.ones(10), wide["id"].to_numpy()])
    for col in OOD:
        beta, *_ = np.linalg.lstsq(design, wide[col].to_numpy(), rcond=None)
        np.testing.assert_allclose(resid[col], wide[col].to_numpy() - design @ beta, atol=1e-12)
    pairs = ana.pair_table(scores)
    r_ab = float(pairs.loc[(pairs["ood_a"] == "a") & (pairs["ood_b"] == "b"), "r_partial"].iloc[0])
    assert np.corrcoef(resid["a"], resid["b"])[0, 1] == pytest.approx(r_ab, abs=1e-10)
    assert resid.attrs["method"] == "linear" and list(resid.columns) == OOD


# --------------------------------------------------------------------------- figures


def test_scatter_grid_draws_the_residuals_and_titles(captured):
    scores = make_scores(10, seed=5)
    pairs = ana.pair_table(scores)
    fig_mod.scatter_grid(scores, pairs, "r1", "x.png", "x.svg")
    got = captured.figs[0]
    assert got["layout"] == "ConstrainedLayoutEngine"
    resid = residual_table(scores, "r1")
    panels = [t for t in got["titles"] if " vs " in t]
    assert len(panels) == 3
    for title, (_, row), offsets in zip(panels, pairs.iterrows(), got["offsets"]):
        assert (
            title
            == f"{row.ood_a} vs {row.ood_b}\nr = {row.r_partial:.2f}, Holm p = {fig_mod._p_text(row.p_partial_holm)}"
        )
        np.testing.assert_allclose(offsets[0][:, 0], 100 * resid[row.ood_a].to_numpy())
        np.testing.assert_allclose(offsets[0][:, 1], 100 * resid[row.ood_b].to_numpy())
    assert "step" in got["ylabels"]  # the colour bar
    with pytest.raises(AnalysisError, match="run 'r9' has no pairs"):
        fig_mod.scatter_grid(scores, pairs, "r9", "x.png", "x.svg")


def test_fingerprint_plot_marks_agreed_cells(captured):
    fig_mod.fingerprint_plot(fingerprint(hand_pairs()), "f.png", "f.svg", alpha=0.05)
    got = captured.figs[0]
    assert got["texts"][0] == ["0.40*\n\u00b10.28", "-0.20\n\u00b10.42", "0.30", "n/a"]
    assert "Holm p < 0.05" in got["titles"][0]


def test_heatmap_note_in_the_title_and_curves_chance_line_and_outside_legend(captured):
    scores = pd.concat([make_scores(8, "m1", "r1"), make_scores(8, "m2", "r2", seed=1)], ignore_index=True)
    pairs = ana.pair_table(scores)
    rep.correlation_heatmap(pairs, "r1", "h.png", "h.svg")
    heat = captured.figs[0]
    assert heat["fig_texts"] == [] and heat["titles"][0].endswith("* Holm-adjusted p < 0.05")
    assert heat["layout"] == "ConstrainedLayoutEngine"
    rep.curve_plot(scores, "c.png", "c.svg")
    curves = captured.figs[1]
    assert curves["axis_legends"] == [None, None]  # no legend inside a panel
    assert curves["legends"] == [["id (ID)", "a", "b", "c", "chance (0.5)"]]
    for lines in curves["lines"]:
        assert ("--", [0.5, 0.5]) in lines


def test_chance_is_one_over_the_number_of_labels():
    from shiftwork.trajectory.suite import LABELS

    assert LABELS == ("entailment", "not_entailment") and rep.CHANCE == 0.5


def test_figures_and_tables_are_written(tmp_path):
    scores = pd.concat(
        [make_scores(9, "m1", "r1", seed=1), make_scores(9, "m1", "r2", seed=2), make_scores(8, "m2", "r3", seed=3)],
        ignore_index=True,
    )
    pairs = ana.pair_table(scores)
    write_table(scores, tmp_path / "scores.parquet", {"step": "test"})
    write_table(pairs, tmp_path / "pairs.parquet", {"step": "test"})
    figs = tmp_path / "figures"
    plot_trajectory(
        str(tmp_path / "scores.parquet"),
        str(tmp_path / "pairs.parquet"),
        {
            "alpha": 0.05,
            "spline_df": 3,
            "windows": True,
            "method": "linear",
            "gam_df": 10,
            "score": "accuracy",
            "pinned": None,
        },
        str(tmp_path / "raw_vs_partial.parquet"),
        str(tmp_path / "fingerprint.parquet"),
        str(tmp_path / "windows.parquet"),
        str(tmp_path / "figures.md"),
        str(figs),
    )
    stems = ["fingerprint", "raw_vs_partial", "scatter_r1", "scatter_r2", "scatter_r3", "windows"]
    assert sorted(p.name for p in figs.iterdir()) == sorted(f"{s}.{e}" for s in stems for e in ("png", "svg"))
    for stem in stems:
        png = (figs / f"{stem}.png").read_bytes()
        assert png.startswith(PNG_MAGIC) and len(png) > 5000
        assert (figs / f"{stem}.svg").read_text().rstrip().endswith("</svg>")
    windows = read_table(tmp_path / "windows.parquet")
    # the windows count checkpoints as the analysis does: dependence is left to the schema default, effective_n
    pd.testing.assert_frame_equal(windows, window_table(scores, alpha=0.05, df=3, dependence="effective_n"))
    finger = read_table(tmp_path / "fingerprint.parquet")
    assert finger.groupby("model")["n_runs"].max().to_dict() == {"m1": 2, "m2": 1}
    assert len(read_table(tmp_path / "raw_vs_partial.parquet")) == 9
    text = (tmp_path / "figures.md").read_text()
    assert (
        "figures/scatter_r3.png" in text and "## Early vs late window" in text and "## Cross-model fingerprint" in text
    )

    # without the windows: no window table, figure or section
    for p in figs.iterdir():
        p.unlink()
    plot_trajectory(
        str(tmp_path / "scores.parquet"),
        str(tmp_path / "pairs.parquet"),
        {
            "alpha": 0.05,
            "spline_df": 3,
            "windows": False,
            "method": "linear",
            "gam_df": 10,
            "score": "accuracy",
            "pinned": None,
        },
        str(tmp_path / "rv.parquet"),
        str(tmp_path / "fp.parquet"),
        None,
        str(tmp_path / "f2.md"),
        str(figs),
    )
    assert not (figs / "windows.png").exists() and "Early vs late" not in (tmp_path / "f2.md").read_text()


def test_fingerprint_by_setting_aggregates_only_the_seeds_of_one_setting():
    pairs = pd.DataFrame(
        {
            "model": ["m"] * 4,
            "run": ["k8-s0", "k8-s1", "k16-s0", "k16-s1"],
            "shots": [8, 8, 16, 16],
            "ood_a": ["a"] * 4,
            "ood_b": ["b"] * 4,
            "r_primary": [0.5, 0.7, -0.2, 0.4],
            "p_primary_holm": [0.01, 0.02, 0.5, 0.01],
            "sign": ["positive", "positive", "null", "positive"],
        }
    )
    got = fingerprint(pairs, by=("model", "shots"))
    assert got[["model", "shots", "n_runs", "sign"]].values.tolist() == [["m", 8, 2, "positive"], ["m", 16, 2, "null"]]
    assert got["r_mean"].tolist() == pytest.approx([0.6, 0.1])
    # sample SD of (0.5, 0.7) and of (-0.2, 0.4), by hand: |a - b| / sqrt(2)
    assert got["r_sd"].tolist() == pytest.approx([0.2 / 2**0.5, 0.6 / 2**0.5])
