"""Tests of shiftwork.stability.report: cell formatting, Markdown/LaTeX writers, files, figures."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from shiftwork.stability import report as rep
from shiftwork.stability import stats
from shiftwork.stability.stats import AXES

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def make_total() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "model": ["model_a", "model_b"],
            **{a: [0.1 * (i + 1), 0.05 * (i + 1)] for i, a in enumerate(AXES)},
            "flip_rate": [0.5, 0.25],
            "n_prompts": [10, 10],
        }
    )


def make_tests(total: pd.DataFrame, by: list[str], ps: dict[tuple, float], eps: float = 0.05) -> pd.DataFrame:
    """Tests rows at ``eps`` (and a decoy at eps 0.1 with p = 0.5) for every group x axis;
    ``ps`` sets p per (group..., axis), default 0.5."""
    rows = []
    for _, r in total.iterrows():
        key = tuple(r[c] for c in by)
        for a in AXES:
            for e in (eps, 0.1):
                p = ps.get((*key, a), 0.5) if e == eps else 0.5
                rows.append(
                    {
                        **dict(zip(by, key)),
                        "axis": a,
                        "eps": e,
                        "mean": r[a],
                        "t": 1.0,
                        "p": p,
                        "n": 10,
                        "marker": stats.significance_marker(p),
                    }
                )
    return pd.DataFrame(rows)


def test_main_table_cells_have_value_and_marker():
    total = make_total()
    tests = make_tests(
        total,
        ["model"],
        {
            ("model_a", "Act"): 0.004,
            ("model_a", "BLEU"): 0.0004,
            ("model_b", "Act"): 0.03,
            ("model_b", "MR"): float("nan"),
        },
    )
    table = rep.main_table(total, tests, eps=0.05)
    assert list(table.columns) == ["model", *AXES, "n_prompts"]
    a = table.set_index("model").loc["model_a"]
    b = table.set_index("model").loc["model_b"]
    assert a["Act"] == "0.100**"  # 0.1, p = 0.004
    assert a["BLEU"] == "0.200***"  # 0.2, p = 0.0004
    assert a["BERT"] == "0.300"  # p = 0.5: no marker
    assert b["Act"] == "0.050*"  # p = 0.03
    assert b["MR"] == "0.300"  # 0.05 x 6, p NaN (test undefined): no marker
    assert a["n_prompts"] == 10
    # the decoy rows at eps 0.1 (all p = 0.5) are used when asked for
    assert rep.main_table(total, tests, eps=0.1).set_index("model").loc["model_a", "Act"] == "0.100"
    with pytest.raises(ValueError, match="eps"):
        rep.main_table(total, tests, eps=0.2)


def test_dataset_table_rows_per_model_and_dataset():
    per = pd.DataFrame(
        {"model": ["m", "m"], "dataset": ["d1", "d2"], **{a: [0.123456, 0.5] for a in AXES}, "n_prompts": [3, 1]}
    )
    tests = make_tests(per, ["model", "dataset"], {("m", "d1", "Ent"): 0.02})
    table = rep.dataset_table(per, tests, eps=0.05)
    assert list(table.columns[:2]) == ["model", "dataset"]
    assert table.loc[0, "Ent"] == "0.123*"
    assert table.loc[1, "Ent"] == "0.500"


def test_to_markdown_exact():
    df = pd.DataFrame({"a": ["x", "y|z"], "b": [1.5, 2.0]})
    assert rep.to_markdown(df) == ("| a | b |\n| --- | --- |\n| x | 1.500 |\n| y\\|z | 2.000 |\n")


def test_to_latex_booktabs_and_escaping():
    df = pd.DataFrame({"model_name": ["smol_lm", "a&b"], "n_prompts": [3, 4], "Act": ["0.100**", "n/a"]})
    tex = rep.to_latex(df, caption="SGS 50% of_all #1", label="tab:sgs")
    lines = tex.splitlines()
    assert lines[0].startswith(r"\begin{table}")
    assert lines[-1] == r"\end{table}"
    assert r"\begin{tabular}{lrr}" in tex
    assert tex.index(r"\toprule") < tex.index(r"\midrule") < tex.index(r"\bottomrule")
    assert r"model\_name & n\_prompts & Act \\" in tex
    assert r"smol\_lm & 3 & 0.100** \\" in tex
    assert r"a\&b & 4 & n/a \\" in tex
    assert r"\caption{SGS 50\% of\_all \#1}" in tex
    assert r"\label{tab:sgs}" in tex
    assert "smol_lm" not in tex  # no unescaped underscore in cells


def test_write_tables_creates_six_files_atomically(tmp_path):
    deltas = pd.DataFrame(
        [
            {
                "model": "m_1",
                "dataset": d,
                "prompt_id": p,
                "variant_id": v,
                "family": f,
                "kind": "k",
                "position": "prefix",
                "strength": 0.5,
                **{a: x for a in AXES},
                "flipped": x > 0,
            }
            for d, p, xs in (
                ("d1", "p1", (0.0, 0.3, 0.4)),
                ("d1", "p2", (0.0, 0.6, 0.8)),
                ("d2", "p3", (0.0, 0.1, 0.2)),
            )
            for (v, f), x in zip((("v0", "baseline"), ("v1", "register"), ("v2", "noise")), xs)
        ]
    )
    pp = stats.prompt_instability(stats.normalise(deltas, {a: 1.0 for a in AXES}))
    total, per = stats.total_sgs(pp), stats.dataset_sgs(pp)
    t_total = stats.ttests(pp, [0.05], by=["model"])
    t_ds = stats.ttests(pp, [0.05], by=["model", "dataset"])
    out = tmp_path / "tables"
    paths = rep.write_tables(total, per, t_total, t_ds, out, eps=0.05)
    names = {f"{s}.{e}" for s in ("main_table", "dataset_table") for e in ("md", "tex", "csv")}
    assert set(paths) == names
    assert {p.name for p in out.iterdir()} == names  # nothing temporary left behind
    for p in paths.values():
        assert p.stat().st_size > 0
    md = (out / "main_table.md").read_text()
    assert md.startswith("| model | Act |")
    assert "| m_1 |" in md and "p < 0.05" in md
    assert r"m\_1" in (out / "main_table.tex").read_text()
    csv = pd.read_csv(out / "main_table.csv")
    assert csv.loc[0, "Act"] == pytest.approx(total.loc[0, "Act"])  # numeric twin, full precision
    assert "Act_p" in csv.columns and "Act_marker" in csv.columns
    assert len(pd.read_csv(out / "dataset_table.csv")) == 2


def _breakdown() -> pd.DataFrame:
    rows = []
    for model, scale in (("m1", 1.0), ("m2", 2.0)):
        for family, kind, strength, r in (
            ("register", "formal", 0.3, 0.1),
            ("register", "formal", 0.6, 0.2),
            ("noise", "typo", 0.05, 0.15),
            ("structural", "reorder", 1.0, 0.05),
        ):
            for a in AXES:
                rows.append(
                    {
                        "model": model,
                        "family": family,
                        "kind": kind,
                        "position": "prefix",
                        "strength": strength,
                        "axis": a,
                        "rms": r * scale,
                        "n": 4,
                    }
                )
    return pd.DataFrame(rows)


def test_family_summary_pools_and_averages():
    s = rep.family_summary(_breakdown())
    reg = s[(s["model"] == "m1") & (s["family"] == "register")]
    # whole register family pools strengths 0.3 and 0.6 (4 rows each): sqrt((0.01 + 0.04) / 2)
    assert reg[reg["strength"].isna()]["rms"].iloc[0] == pytest.approx(math.sqrt(0.025))
    assert reg[reg["strength"] == 0.6]["rms"].iloc[0] == pytest.approx(0.2)
    assert s[(s["model"] == "m2") & (s["family"] == "noise")]["rms"].iloc[0] == pytest.approx(0.3)


def _assert_figure_files(png, svg):
    data = png.read_bytes()
    assert len(data) > 1000 and data.startswith(PNG_MAGIC)
    text = svg.read_text()
    assert "<svg" in text and len(text) > 1000
    leftovers = [p.name for p in png.parent.iterdir() if p.name not in {png.name, svg.name}]
    assert leftovers == []


def test_heatmap_writes_png_and_svg(tmp_path):
    total = make_total()
    total.loc[1, "Prob"] = np.nan  # a missing value is drawn blank, not a crash
    png, svg = tmp_path / "heat.png", tmp_path / "heat.svg"
    rep.sgs_heatmap(total, png, svg)
    _assert_figure_files(png, svg)


def test_family_plot_writes_png_and_svg(tmp_path):
    png, svg = tmp_path / "fig" / "family.png", tmp_path / "fig" / "family.svg"
    rep.family_plot(_breakdown(), png, svg)
    _assert_figure_files(png, svg)


def _capture(monkeypatch, module) -> list:
    """Replace ``module.save_figure`` by a recorder of the figure's axes (nothing is written)."""
    got: list = []

    def record(fig, out_png, out_svg):
        got.append([ax for ax in fig.axes if ax.get_visible()])

    monkeypatch.setattr(module, "save_figure", record)
    return got


def test_heatmap_cells_scale_each_axis_and_take_stars_from_the_tests():
    total = make_total()  # model_a: 0.1 (i + 1) per axis, model_b half of it
    total.loc[1, "Prob"] = np.nan
    tests = make_tests(total, ["model"], {("model_a", "BLEU"): 0.0004, ("model_b", "Act"): 0.03})
    cells = rep.heatmap_cells(total, tests, eps=0.05).set_index(["model", "axis"])
    # each axis on its own scale: model_a holds every axis's largest value
    assert cells.loc[("model_a", "MR"), "scaled"] == pytest.approx(1.0)
    assert cells.loc[("model_b", "MR"), "scaled"] == pytest.approx(0.5)
    assert cells.loc[("model_b", "Act"), "scaled"] == pytest.approx(0.5)
    assert np.isnan(cells.loc[("model_b", "Prob"), "scaled"]) and cells.loc[("model_a", "Prob"), "scaled"] == 1.0
    assert cells.loc[("model_a", "BLEU"), "marker"] == "***"
    assert cells.loc[("model_b", "Act"), "marker"] == "*"
    assert cells.loc[("model_a", "Act"), "marker"] == ""  # p = 0.5
    assert cells.loc[("model_a", "BLEU"), "p"] == pytest.approx(0.0004)  # eps 0.05, not the decoy at 0.1
    assert (rep.heatmap_cells(total)["marker"] == "").all()
    with pytest.raises(ValueError, match="say which one"):
        rep.heatmap_cells(total, tests)
    with pytest.raises(ValueError, match="no row at eps 0.2"):
        rep.heatmap_cells(total, tests, eps=0.2)


def test_heatmap_draws_per_axis_colours_values_and_stars(monkeypatch):
    total = make_total()
    tests = make_tests(total, ["model"], {("model_a", "BLEU"): 0.0004, ("model_b", "Ent"): 0.004})
    got = _capture(monkeypatch, rep)
    rep.sgs_heatmap(total, "h.png", "h.svg", tests, 0.05)
    ax = got[0][0]
    drawn = np.asarray(ax.images[0].get_array())
    want = rep.heatmap_cells(total, tests, 0.05)["scaled"].to_numpy().reshape(2, len(AXES))
    np.testing.assert_allclose(drawn, want)
    texts = [t.get_text() for t in ax.texts]
    assert "0.200***" in texts and "0.250**" in texts and "0.100" in texts
    assert "one-sided one-sample t-test" in ax.get_title() and "eps = 0.05" in ax.get_title()
    assert "no multiple-comparison correction" in ax.get_title()
    assert [t.get_text() for t in ax.get_xticklabels()][1] == "BLEU\n(max 0.2)"


def test_family_intervals_by_hand_and_against_scipy():
    from scipy import stats as sps

    curves = stats.strength_curves(_strength_deltas())
    got = rep.family_intervals(curves).set_index("strength", drop=False)
    # per-prompt pooled values (test_strength_curves_by_hand): -10: 0.175, 0.325; 10: 0.15, 0.0
    at = got[got["strength"] == -10.0].iloc[0]
    low, high = sps.t.interval(0.95, 1, loc=0.25, scale=sps.sem([0.175, 0.325]))
    assert at["mean"] == pytest.approx(0.25)
    assert (at["low"], at["high"]) == pytest.approx((low, high))
    assert at["half"] == pytest.approx(12.7062047 * math.sqrt(0.01125) / math.sqrt(2), rel=1e-6)
    whole = got[got["strength"].isna()].iloc[0]
    # the family: mean of the settings' means; SD the mean of their SDs (both sqrt(0.01125)), n 2
    assert whole["mean"] == pytest.approx((0.25 + 0.075) / 2)
    assert whole["half"] == pytest.approx(at["half"])
    assert (whole["n_prompts"], whole["n_settings"]) == (2, 2)


def test_family_plot_draws_the_intervals_and_labels_the_sign(monkeypatch):
    curves = stats.strength_curves(_strength_deltas())
    got = _capture(monkeypatch, rep)
    rep.family_plot(_breakdown(), "f.png", "f.svg", strength=curves)
    left, right = got[0]
    want = rep.family_intervals(curves)
    reg = want[want["strength"].notna()].sort_values("strength")
    (container,) = right.containers
    segments = container.lines[2][0].get_segments()
    np.testing.assert_allclose([s[0][1] for s in segments], reg["low"])
    np.testing.assert_allclose([s[1][1] for s in segments], reg["high"])
    assert "negative: rude, positive: polite" in right.get_xlabel()
    assert right.get_ylim()[0] == 0.0 and right.get_ylim()[1] > reg["high"].max()
    from matplotlib.container import BarContainer

    (bars,) = [c for c in left.containers if isinstance(c, BarContainer)]  # the one model's bars
    assert [p.get_height() for p in bars.patches] == pytest.approx([want[want["strength"].isna()]["mean"].iloc[0]])
    assert "t-interval over prompts" in right.figure._suptitle.get_text()


def test_figures_close_after_saving(tmp_path):
    import matplotlib.pyplot as plt

    before = len(plt.get_fignums())
    rep.sgs_heatmap(make_total(), tmp_path / "a.png", tmp_path / "a.svg")
    rep.family_plot(_breakdown(), tmp_path / "b.png", tmp_path / "b.svg")
    assert len(plt.get_fignums()) == before


# --------------------------------------------------------------------------- all eps, significance counts


def _tests_rows(rows: list[tuple], by: list[str]) -> pd.DataFrame:
    """Tests rows from (*by, axis, eps, p, n) tuples."""
    out = pd.DataFrame(rows, columns=[*by, "axis", "eps", "p", "n"])
    out["marker"] = [stats.significance_marker(p) for p in out["p"]]
    return out


def _closed_total() -> pd.DataFrame:
    """Two models; "api" (a closed model) observes neither Act nor Prob."""
    total = make_total()
    total.loc[1, "model"] = "api"
    total.loc[1, ["Act", "Prob"]] = np.nan
    return total


def _closed_tests(total: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for _, r in total.iterrows():
        for a in AXES:
            for e in (0.01, 0.05):
                observed = np.isfinite(r[a])
                p = 0.5 if not observed else (0.0005 if e == 0.01 else 0.02)
                rows.append((r["model"], a, e, p if observed else np.nan, 10 if observed else 0))
    return _tests_rows(rows, ["model"])


def test_significance_counts_by_hand():
    # model m1: Act p=0.0005 (***), BLEU p=0.004 (**), BERT p=0.03 (*), Prob p=0.2, Ent undefined
    # (p NaN, n=1: a cell, not significant), MR not observed (n=0: no cell). Model m2: Act p=0.001
    # (**: 0.001 is not < 0.001), the rest not observed.
    rows = [
        ("m1", "Act", 0.05, 0.0005, 10),
        ("m1", "BLEU", 0.05, 0.004, 10),
        ("m1", "BERT", 0.05, 0.03, 10),
        ("m1", "Prob", 0.05, 0.2, 10),
        ("m1", "Ent", 0.05, np.nan, 1),
        ("m1", "MR", 0.05, np.nan, 0),
        ("m2", "Act", 0.05, 0.001, 10),
        ("m2", "BLEU", 0.05, np.nan, 0),
    ]
    counts = stats.significance_counts(_tests_rows(rows, ["model"]), "model").set_index("model")
    assert counts.loc["m1", ["n_cells", "n_p05", "n_p01", "n_p001"]].tolist() == [5, 3, 2, 1]
    assert counts.loc["m2", ["n_cells", "n_p05", "n_p01", "n_p001"]].tolist() == [1, 1, 1, 0]
    assert counts.loc["all", ["n_cells", "n_p05", "n_p01", "n_p001"]].tolist() == [6, 4, 3, 1]
    by_axis = stats.significance_counts(_tests_rows(rows, ["model"]), "axis").set_index("axis")
    assert by_axis.loc["Act", ["n_cells", "n_p05", "n_p01", "n_p001"]].tolist() == [2, 2, 2, 1]
    assert by_axis.loc["MR", "n_cells"] == 0  # observed by no model


def test_significance_table_per_model_eps_and_overall():
    total = _closed_total()
    tests_total = _closed_tests(total)
    per = pd.DataFrame({"model": ["model_a", "model_a", "api"], "dataset": ["d1", "d2", "d1"]})
    tests_ds = _tests_rows(
        [
            (
                m,
                d,
                a,
                e,
                0.02 if not (m == "api" and a in ("Act", "Prob")) else np.nan,
                0 if m == "api" and a in ("Act", "Prob") else 5,
            )
            for m, d in zip(per["model"], per["dataset"])
            for a in AXES
            for e in (0.01, 0.05)
        ],
        ["model", "dataset"],
    )
    table = rep.significance_table(tests_total, tests_ds)
    row = lambda m, c, e: table[(table["model"] == m) & (table["cells"] == c) & np.isclose(table["eps"], e)].iloc[0]  # noqa: E731
    # model_a: 6 axes observed, at eps 0.01 all p = 0.0005; at 0.05 all p = 0.02
    assert row("model_a", "total", 0.01)[["n_cells", "n_p05", "n_p01", "n_p001"]].tolist() == [6, 6, 6, 6]
    assert row("model_a", "total", 0.05)[["n_cells", "n_p05", "n_p01", "n_p001"]].tolist() == [6, 6, 0, 0]
    # api observes 4 axes; its missing Act and Prob are no cells
    assert row("api", "total", 0.05)["n_cells"] == 4
    assert row("all", "total", 0.05)[["n_cells", "n_p05"]].tolist() == [10, 10]
    # per-dataset cells: model_a 2 datasets x 6 axes, api 1 x 4
    assert row("model_a", "dataset", 0.05)[["n_cells", "n_p05"]].tolist() == [12, 12]
    assert row("all", "dataset", 0.01)[["n_cells", "n_p05", "n_p01"]].tolist() == [16, 16, 0]
    assert list(table["model"].drop_duplicates()) == ["api", "model_a", "all"]
    display = rep.significance_display(table).set_index("model")
    assert display.loc["api", "eps 0.05, total"] == "4 / 0 / 0 of 4"
    assert display.loc["all", "eps 0.01, per dataset"] == "16 / 0 / 0 of 16"


def test_eps_tables_every_eps_with_na_for_unobserved_axis(tmp_path):
    from shiftwork.tables import read_provenance, read_table

    total = _closed_total()
    tests_total = _closed_tests(total)
    per = total.assign(dataset="d1")[["model", "dataset", *AXES, "n_prompts"]]
    tests_ds = tests_total.assign(dataset="d1")
    paths = rep.write_eps_tables(total, per, tests_total, tests_ds, tmp_path, [0.01, 0.05], {"step": "test"})
    assert set(paths) == set(rep.eps_table_names([0.01, 0.05]))
    md_01 = (tmp_path / "main_table_eps0.01.md").read_text()
    md_05 = (tmp_path / "main_table_eps0.05.md").read_text()
    # model_a Act = 0.1: p = 0.0005 at eps 0.01 (***), 0.02 at eps 0.05 (*)
    assert "| model_a | 0.100*** |" in md_01
    assert "| model_a | 0.100* |" in md_05
    assert "| api | n/a | 0.100* | 0.150* | n/a |" in md_05  # BLEU 0.05 x 2, BERT 0.05 x 3
    assert "n/a" in (tmp_path / "dataset_table_eps0.01.tex").read_text()
    numeric = read_table(tmp_path / "main_table_eps0.05.parquet")
    assert numeric["eps"].tolist() == [0.05, 0.05]
    assert np.isnan(numeric.set_index("model").loc["api", "Act"])  # missing stays missing, not 0
    assert read_provenance(tmp_path / "main_table_eps0.05.parquet") == {"step": "test"}
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_write_significance_tables(tmp_path):
    from shiftwork.tables import read_table

    total = _closed_total()
    tests_total = _closed_tests(total)
    paths = rep.write_significance_tables(tests_total, tests_total.assign(dataset="d1"), tmp_path, {"step": "t"})
    assert set(paths) == set(rep.SIGNIFICANCE_NAMES)
    by_axis = read_table(tmp_path / "significance_by_axis.parquet")
    act = by_axis[(by_axis["axis"] == "Act") & np.isclose(by_axis["eps"], 0.05)].iloc[0]
    assert act[["n_cells", "n_p05"]].tolist() == [1, 1]  # only model_a observes Act
    md = (tmp_path / "significance_by_axis.md").read_text()
    assert "| Act | 1 / 1 / 1 of 1 | 1 / 0 / 0 of 1 |" in md
    assert "| BLEU | 2 / 2 / 2 of 2 | 2 / 0 / 0 of 2 |" in md
    assert "| all | 10 / 10 / 10 of 10 | 10 / 0 / 0 of 10 |" in md


# --------------------------------------------------------------------------- radar


def test_radar_data_normalises_per_axis_and_keeps_missing():
    from shiftwork.stability import figures as fig

    total = _closed_total()  # model_a: Act 0.1, BLEU 0.2, ...; api: half of those, no Act/Prob
    per = pd.DataFrame(
        {
            "model": ["model_a", "model_a"],
            "dataset": ["d1", "d2"],
            **{a: [0.05, 0.4] for a in AXES},
            "n_prompts": [5, 5],
        }
    )
    data = fig.radar_data(total, per)
    over = data[data["panel"] == fig.OVERVIEW].set_index(["polygon", "axis"])["norm"]
    # Act: largest value in the figure is d2's 0.4, so model_a's 0.1 -> 0.25
    assert over[("model_a", "Act")] == pytest.approx(0.25)
    # MR: model_a 0.6 is the largest (d2 0.4), api 0.3 -> 0.5
    assert over[("model_a", "MR")] == pytest.approx(1.0)
    assert over[("api", "MR")] == pytest.approx(0.5)
    assert np.isnan(over[("api", "Act")]) and np.isnan(over[("api", "Prob")])  # skipped, not 0
    panel_a = data[data["panel"] == "model_a"]
    assert list(pd.unique(panel_a["polygon"])) == ["d1", "d2", fig.TOTAL]
    assert panel_a.set_index(["polygon", "axis"]).loc[("d2", "Act"), "norm"] == pytest.approx(1.0)
    assert set(data["panel"]) == {fig.OVERVIEW, "model_a", "api"}


def test_radar_polygon_skips_missing_spokes():
    from shiftwork.stability import figures as fig

    a, r = fig.radar_polygon([np.nan, 0.5, 1.0, np.nan, 0.25, 0.0])
    step = 2 * np.pi / 6
    assert a.tolist() == pytest.approx([1 * step, 2 * step, 4 * step, 5 * step, 1 * step])  # closed
    assert r.tolist() == [0.5, 1.0, 0.25, 0.0, 0.5]
    assert 0.0 not in a.tolist()[:-1]  # the Act spoke (angle 0) is not drawn
    empty = fig.radar_polygon([np.nan] * 6)
    assert len(empty[0]) == 0 and len(empty[1]) == 0


def test_radar_plot_writes_png_and_svg(tmp_path):
    from shiftwork.stability import figures as fig

    total = _closed_total()
    per = total.assign(dataset="d1")[["model", "dataset", *AXES, "n_prompts"]]
    png, svg = tmp_path / "radar.png", tmp_path / "radar.svg"
    fig.radar_plot(total, per, png, svg)
    _assert_figure_files(png, svg)
    assert "n/a" in svg.read_text()  # the spokes api lacks are labelled n/a


# --------------------------------------------------------------------------- preservation


def _scores() -> pd.DataFrame:
    rows = [
        # prompt, family, kind, position, strength, f1, gate_score, kept
        ("p1", "register", "register", "global", -10.0, 0.95, 0.50, True),
        ("p1", "register", "register", "global", 10.0, 0.93, 0.40, True),
        ("p2", "register", "register", "global", -10.0, 0.80, 0.05, False),
        ("p2", "register", "register", "global", 10.0, 0.90, 0.30, False),
        ("p1", "noise", "spacing", "global", 4.0, 0.70, -0.20, True),
        ("p1", "baseline", "baseline", "none", 0.0, 1.0, 1.0, True),
        ("p2", "structural", "length", "global", 2.0, 0.90, 0.20, False),
    ]
    out = pd.DataFrame(
        rows, columns=["prompt_id", "family", "kind", "position", "strength", "f1", "gate_score", "kept"]
    )
    return out.assign(
        dataset="d1", variant_id=[f"v{i}" for i in range(len(out))], threshold=0.11, scale="rescaled", b=0.2
    )


def test_variant_scores_marks_kept_prompts():
    from shiftwork.stability import gate

    scored = _scores().drop(columns=["kept"])
    kept, dropped = gate.apply_gate(scored, 0.11)
    assert dropped["prompt_id"].tolist() == ["p2"]  # register at 0.05 < 0.11; p1's noise -0.2 is exempt
    scores = gate.variant_scores(scored, dropped)
    assert "baseline" not in set(scores["family"])
    assert scores.groupby("prompt_id")["kept"].all().to_dict() == {"p1": True, "p2": False}


def test_preservation_data_status_and_threshold():
    from shiftwork.stability import figures as fig

    data = fig.preservation_data(_scores())
    assert len(data) == 6  # the baseline row is left out
    assert list(data["family"]) == ["register"] * 4 + ["noise", "structural"]
    assert data["status"].tolist().count("dropped") == 3
    assert data.loc[data["gate_score"] == 0.05, "under"].item()
    assert data.loc[data["gate_score"] == -0.20, ["under", "gated"]].values.tolist() == [[True, False]]
    assert not data.loc[data["gate_score"] == 0.30, "under"].item()
    with pytest.raises(ValueError, match="threshold"):
        fig.preservation_data(pd.concat([_scores(), _scores().assign(threshold=0.85, scale="raw")]))


def test_preservation_plot_writes_png_and_svg(tmp_path):
    from shiftwork.stability import figures as fig

    png, svg = tmp_path / "pres.png", tmp_path / "pres.svg"
    fig.preservation_plot(_scores(), png, svg)
    _assert_figure_files(png, svg)


# --------------------------------------------------------------------------- strength curves


def _strength_deltas() -> pd.DataFrame:
    """Model m, register at strengths -10 and 10 for prompts p1, p2 (two datasets); Act and Prob
    missing (NaN) throughout, as for a closed model. Values are already normalised (R = 1)."""
    rows = []
    values = {  # (prompt, strength) -> BLEU, BERT, Ent, MR
        ("p1", -10.0): (0.3, 0.4, 0.0, 0.0),
        ("p2", -10.0): (0.1, 0.2, 0.0, 1.0),
        ("p1", 10.0): (0.6, 0.0, 0.0, 0.0),
        ("p2", 10.0): (0.0, 0.0, 0.0, 0.0),
    }
    for (pid, s), (bleu, bert, ent, mr) in values.items():
        rows.append(
            {
                "model": "m",
                "dataset": "d1" if pid == "p1" else "d2",
                "prompt_id": pid,
                "variant_id": f"{pid}{s}",
                "family": "register",
                "kind": "register",
                "position": "global",
                "strength": s,
                "Act": np.nan,
                "BLEU": bleu,
                "BERT": bert,
                "Prob": np.nan,
                "Ent": ent,
                "MR": mr,
                "flipped": True,
            }
        )
    base = [dict(rows[0], variant_id="b1", family="baseline", strength=0.0, BLEU=9.0)]
    return pd.DataFrame(rows + base)


def test_strength_curves_by_hand():
    curves = stats.strength_curves(_strength_deltas())
    at = curves.set_index(["strength", "axis"])
    # BLEU at -10: prompts 0.3 and 0.1 -> mean 0.2, sd sqrt(0.02) = 0.1414, sem 0.1
    assert at.loc[(-10.0, "BLEU"), "mean"] == pytest.approx(0.2)
    assert at.loc[(-10.0, "BLEU"), "sd"] == pytest.approx(math.sqrt(0.02))
    assert at.loc[(-10.0, "BLEU"), "sem"] == pytest.approx(0.1)
    assert at.loc[(-10.0, "BLEU"), "n_prompts"] == 2
    # Act is never observed: NaN with no prompts, never 0
    assert np.isnan(at.loc[(10.0, "Act"), "mean"]) and at.loc[(10.0, "Act"), "n_prompts"] == 0
    # pooled = per prompt the mean of its 4 observed axes: p1 (0.3+0.4)/4 = 0.175, p2 (0.1+0.2+1)/4 = 0.325
    assert at.loc[(-10.0, "pooled"), "mean"] == pytest.approx(0.25)
    assert at.loc[(10.0, "pooled"), "mean"] == pytest.approx(0.075)  # p1 0.15, p2 0
    assert list(curves["axis"].drop_duplicates()) == [*AXES, "pooled"]
    assert 0.0 not in set(curves["strength"])  # the baseline row is no variant


def test_strength_plot_data_drops_missing_axes():
    from shiftwork.stability import figures as fig

    curves = stats.strength_curves(_strength_deltas())
    data = fig.strength_plot_data(curves)
    assert list(data["axis"].drop_duplicates()) == ["pooled", "BLEU", "BERT", "Ent", "MR"]  # no Act, Prob
    assert set(data["panel"]) == {"register: register"}
    pooled = data[data["axis"] == "pooled"]
    assert pooled["strength"].tolist() == [-10.0, 10.0]
    assert pooled["mean"].tolist() == pytest.approx([0.25, 0.075])


def test_strength_plot_writes_png_and_svg(tmp_path):
    from shiftwork.stability import figures as fig

    png, svg = tmp_path / "strength.png", tmp_path / "strength.svg"
    fig.strength_plot(stats.strength_curves(_strength_deltas()), png, svg)
    _assert_figure_files(png, svg)
