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
    rep.heatmap(total, png, svg)
    _assert_figure_files(png, svg)


def test_family_plot_writes_png_and_svg(tmp_path):
    png, svg = tmp_path / "fig" / "family.png", tmp_path / "fig" / "family.svg"
    rep.family_plot(_breakdown(), png, svg)
    _assert_figure_files(png, svg)


def test_figures_close_after_saving(tmp_path):
    import matplotlib.pyplot as plt

    before = len(plt.get_fignums())
    rep.heatmap(make_total(), tmp_path / "a.png", tmp_path / "a.svg")
    rep.family_plot(_breakdown(), tmp_path / "b.png", tmp_path / "b.svg")
    assert len(plt.get_fignums()) == before
