"""Stability report: SGS tables (Markdown, LaTeX, CSV) and figures (PNG, SVG).

Table cells read ``"0.123**"``: the SGS to three decimals, then the marker of the one-sided
t-test of H1: mean per-prompt instability > eps (``*`` p < 0.05, ``**`` p < 0.01,
``***`` p < 0.001; no marker when not significant or when the test is undefined).
The CSV files are the numeric twins of the displayed tables: full-precision SGS, the
p-value and marker per axis, and the prompt counts.

Every file is written atomically: to a temporary sibling in the same directory, then
renamed over the target with :func:`os.replace`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from shiftwork.checks import require_columns
from shiftwork.reports.figures import save_figure
from shiftwork.reports.tables import to_latex, to_markdown
from shiftwork.stability.stats import ALL, AXES, significance_counts
from shiftwork.tables import atomic_file, write_table, write_text

MARKER_LEGEND = "* p < 0.05, ** p < 0.01, *** p < 0.001"
FAMILIES: tuple[str, ...] = ("register", "noise", "structural")


# --------------------------------------------------------------------------- tables


def format_cell(value: float, marker: str = "") -> str:
    """``value`` to three decimals followed by ``marker``; ``"n/a"`` for a missing value."""
    if value is None or not np.isfinite(value):
        return "n/a"
    return f"{value:.3f}{marker}"


def numeric_table(sgs: pd.DataFrame, tests: pd.DataFrame, by: Sequence[str], eps: float = 0.05) -> pd.DataFrame:
    """The SGS rows of ``sgs`` with, per axis, the p-value and marker of its test at ``eps``.

    ``sgs`` is :func:`shiftwork.stability.stats.total_sgs` (``by=["model"]``) or
    :func:`shiftwork.stability.stats.dataset_sgs` (``by=["model", "dataset"]``); ``tests`` is
    :func:`shiftwork.stability.stats.ttests` with the same ``by``. Columns: ``*by``, the axes,
    ``<axis>_p`` and ``<axis>_marker`` per axis, then ``flip_rate`` (when present) and
    ``n_prompts``. ValueError when ``tests`` has no row at ``eps`` or lacks a row for some
    group and axis of ``sgs``.
    """
    by = list(by)
    require_columns(sgs, [*by, *AXES, "n_prompts"], "sgs table")
    require_columns(tests, [*by, "axis", "eps", "p", "marker"], "tests table")
    at_eps = tests[np.isclose(tests["eps"].astype(float), float(eps))]
    if at_eps.empty:
        raise ValueError(
            f"argument 'eps'={eps!r}: the tests table has no rows at this eps; it has {sorted(tests['eps'].unique())}"
        )
    if at_eps.duplicated([*by, "axis"]).any():
        raise ValueError(f"tests table: more than one row per ({', '.join(by)}, axis) at eps={eps!r}")
    out = sgs[[*by, *AXES]].copy().reset_index(drop=True)
    for axis in AXES:
        part = at_eps[at_eps["axis"] == axis][[*by, "p", "marker"]]
        part = part.rename(columns={"p": f"{axis}_p", "marker": f"{axis}_marker"})
        merged = out[by].merge(part, on=by, how="left")
        if merged[f"{axis}_marker"].isna().any():
            lost = merged.loc[merged[f"{axis}_marker"].isna(), by].iloc[0].tolist()
            raise ValueError(f"tests table: no test for {dict(zip(by, lost))} on axis '{axis}' at eps={eps!r}")
        out[f"{axis}_p"] = merged[f"{axis}_p"].to_numpy()
        out[f"{axis}_marker"] = merged[f"{axis}_marker"].to_numpy()
    extras = [c for c in ("flip_rate", "n_prompts") if c in sgs.columns]
    for c in extras:
        out[c] = sgs[c].to_numpy()
    order = [*by, *AXES, *(f"{a}_{s}" for a in AXES for s in ("p", "marker")), *extras]
    return out[order]


def _display(numeric: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    out = numeric[list(by)].copy()
    for axis in AXES:
        out[axis] = [format_cell(v, m) for v, m in zip(numeric[axis], numeric[f"{axis}_marker"])]
    out["n_prompts"] = numeric["n_prompts"].astype(int).to_numpy()
    return out.reset_index(drop=True)


def main_table(total: pd.DataFrame, tests: pd.DataFrame, eps: float = 0.05) -> pd.DataFrame:
    """Display table: one row per model, one string column per axis, plus ``n_prompts``.

    Each axis cell is the model's total SGS to three decimals followed by the marker of the
    per-model t-test at ``eps`` (e.g. ``"0.123**"``). ``total`` is
    :func:`shiftwork.stability.stats.total_sgs` and keeps the numbers; ``tests`` is
    :func:`shiftwork.stability.stats.ttests` with ``by=["model"]``. :func:`numeric_table` gives the
    numeric twin (what the CSV holds).
    """
    return _display(numeric_table(total, tests, ["model"], eps), ["model"])


def dataset_table(dataset_sgs: pd.DataFrame, tests_by_dataset: pd.DataFrame, eps: float = 0.05) -> pd.DataFrame:
    """Display table: one row per (model, dataset), cells formatted as in :func:`main_table`.

    ``dataset_sgs`` is :func:`shiftwork.stability.stats.dataset_sgs`; ``tests_by_dataset`` is
    :func:`shiftwork.stability.stats.ttests` with ``by=["model", "dataset"]``.
    """
    by = ["model", "dataset"]
    return _display(numeric_table(dataset_sgs, tests_by_dataset, by, eps), by)


def write_tables(
    total: pd.DataFrame,
    per_dataset: pd.DataFrame,
    tests_total: pd.DataFrame,
    tests_dataset: pd.DataFrame,
    out_dir: str | os.PathLike,
    eps: float = 0.05,
) -> dict[str, Path]:
    """Write the main and per-dataset SGS tables as ``.md``, ``.tex`` and ``.csv`` into ``out_dir``.

    ``main_table.*`` comes from :func:`main_table`, ``dataset_table.*`` from
    :func:`dataset_table`; the Markdown adds a line explaining the markers, the LaTeX puts
    it in the caption, the CSV holds the numeric twin (:func:`numeric_table`). Each file is
    written atomically. Returns the paths keyed by file name (``"main_table.md"``, ...).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    note = f"SGS (mean per-prompt RMS of normalised deltas); one-sided t-test of mean > eps = {eps:g}: {MARKER_LEGEND}."
    specs = [
        (
            "main_table",
            "Total SGS per model",
            "tab:sgs-total",
            main_table(total, tests_total, eps),
            numeric_table(total, tests_total, ["model"], eps),
        ),
        (
            "dataset_table",
            "SGS per model and dataset",
            "tab:sgs-dataset",
            dataset_table(per_dataset, tests_dataset, eps),
            numeric_table(per_dataset, tests_dataset, ["model", "dataset"], eps),
        ),
    ]
    paths: dict[str, Path] = {}
    for stem, title, label, display, numeric in specs:
        md = f"{to_markdown(display)}\n{note}\n"
        tex = to_latex(display, f"{title}. {note}", label)
        paths[f"{stem}.md"] = write_text(md, out / f"{stem}.md")
        paths[f"{stem}.tex"] = write_text(tex, out / f"{stem}.tex")
        with atomic_file(out / f"{stem}.csv") as tmp:
            numeric.to_csv(tmp, index=False)
        paths[f"{stem}.csv"] = out / f"{stem}.csv"
    return paths


def eps_tag(eps: float) -> str:
    """How ``eps`` appears in a table's file name: ``0.05`` -> ``"0.05"``, ``0.1`` -> ``"0.1"``."""
    return f"{float(eps):g}"


def eps_table_names(eps_values: Sequence[float]) -> list[str]:
    """The file names :func:`write_eps_tables` writes for ``eps_values``, in its order."""
    return [
        f"{stem}_eps{eps_tag(e)}.{ext}"
        for e in eps_values
        for stem in ("main_table", "dataset_table")
        for ext in ("parquet", "md", "tex")
    ]


def write_eps_tables(
    total: pd.DataFrame,
    per_dataset: pd.DataFrame,
    tests_total: pd.DataFrame,
    tests_dataset: pd.DataFrame,
    out_dir: str | os.PathLike,
    eps_values: Sequence[float],
    provenance: dict | None = None,
) -> dict[str, Path]:
    """The main and per-dataset SGS tables once per eps: ``main_table_eps<e>`` and
    ``dataset_table_eps<e>`` (``<e>`` from :func:`eps_tag`) as Markdown, LaTeX and Parquet.

    The cells are those of :func:`main_table` and :func:`dataset_table` with the markers of the
    tests at that eps; an axis a model cannot observe reads ``n/a``. The Parquet is the numeric
    twin (:func:`numeric_table`) with an ``eps`` column, written atomically with ``provenance``.
    Returns the paths keyed by file name.
    """
    out = Path(out_dir)
    paths: dict[str, Path] = {}
    for eps in eps_values:
        tag = eps_tag(eps)
        note = f"SGS; one-sided t-test of mean > eps = {tag}: {MARKER_LEGEND}; n/a: axis not observed."
        specs = [
            ("main_table", "Total SGS per model", "tab:sgs-total", total, tests_total, ["model"]),
            (
                "dataset_table",
                "SGS per model and dataset",
                "tab:sgs-dataset",
                per_dataset,
                tests_dataset,
                ["model", "dataset"],
            ),
        ]
        for stem, title, label, sgs, tests, by in specs:
            numeric = numeric_table(sgs, tests, by, eps)
            display = _display(numeric, by)
            name = f"{stem}_eps{tag}"
            paths[f"{name}.md"] = write_text(f"{to_markdown(display)}\n{note}\n", out / f"{name}.md")
            paths[f"{name}.tex"] = write_text(
                to_latex(display, f"{title}, eps = {tag}. {note}", f"{label}-eps{tag}"), out / f"{name}.tex"
            )
            paths[f"{name}.parquet"] = write_table(numeric.assign(eps=float(eps)), out / f"{name}.parquet", provenance)
    return paths


def _count_text(row: pd.Series) -> str:
    return f"{row['n_p05']} / {row['n_p01']} / {row['n_p001']} of {row['n_cells']}"


def significance_table(tests_total: pd.DataFrame, tests_dataset: pd.DataFrame) -> pd.DataFrame:
    """Significant cells per model and eps, and over all models: the long table.

    ``cells`` is ``"total"`` for the main table's model x axis cells (``tests_total``, the
    per-model tests) and ``"dataset"`` for the per-dataset table's model x dataset x axis cells
    (``tests_dataset``); counts as :func:`shiftwork.stability.stats.significance_counts` (model
    ``"all"`` sums the models; an unobserved axis is no cell). Columns: model, cells, eps,
    n_cells, n_p05, n_p01, n_p001.
    """
    parts = [
        significance_counts(tests, "model").assign(cells=cells)
        for cells, tests in (("total", tests_total), ("dataset", tests_dataset))
    ]
    out = pd.concat(parts, ignore_index=True)
    order = {m: i for i, m in enumerate([*sorted(set(out["model"]) - {ALL}), ALL])}
    out = out.assign(_m=out["model"].map(order), _c=out["cells"].map({"total": 0, "dataset": 1}))
    out = out.sort_values(["_m", "_c", "eps"]).drop(columns=["_m", "_c"]).reset_index(drop=True)
    return out[["model", "cells", "eps", "n_cells", "n_p05", "n_p01", "n_p001"]]


def significance_display(counts: pd.DataFrame) -> pd.DataFrame:
    """:func:`significance_table` as a display table: a row per model (``all`` last), a column
    per eps and kind of cell reading ``"a / b / c of n"`` (cells with p < 0.05 / 0.01 / 0.001 of
    the n cells tested)."""
    rows = []
    for model, g in counts.groupby("model", sort=False):
        row = {"model": model}
        for r in g.itertuples(index=False):
            name = f"eps {eps_tag(r.eps)}, {'total' if r.cells == 'total' else 'per dataset'}"
            row[name] = _count_text(pd.Series(r._asdict()))
        rows.append(row)
    return pd.DataFrame(rows)


def axis_significance_table(tests_total: pd.DataFrame) -> pd.DataFrame:
    """Per axis and eps, how many models' total SGS is significantly above eps (the paper's
    epsilon-robustness table). Columns: axis, eps, n_cells (models that observe the axis),
    n_p05, n_p01, n_p001; axes in table order, then ``all``."""
    out = significance_counts(tests_total, "axis")
    order = {a: i for i, a in enumerate([*AXES, ALL])}
    out = out.assign(_a=out["axis"].map(order)).sort_values(["_a", "eps"]).drop(columns="_a")
    return out.reset_index(drop=True)


def axis_significance_display(counts: pd.DataFrame) -> pd.DataFrame:
    """:func:`axis_significance_table` as a display table: a row per axis, a column per eps
    reading ``"a / b / c of n"``."""
    rows = []
    for axis, g in counts.groupby("axis", sort=False):
        rows.append({"axis": axis, **{f"eps {eps_tag(r['eps'])}": _count_text(r) for _, r in g.iterrows()}})
    return pd.DataFrame(rows)


SIGNIFICANCE_NAMES = [
    f"{stem}.{ext}" for stem in ("significance_counts", "significance_by_axis") for ext in ("parquet", "md", "tex")
]


def write_significance_tables(
    tests_total: pd.DataFrame, tests_dataset: pd.DataFrame, out_dir: str | os.PathLike, provenance: dict | None = None
) -> dict[str, Path]:
    """``significance_counts.*`` (:func:`significance_table`) and ``significance_by_axis.*``
    (:func:`axis_significance_table`) as Parquet (the long table, with ``provenance``),
    Markdown and LaTeX. Returns the paths keyed by file name (:data:`SIGNIFICANCE_NAMES`)."""
    out = Path(out_dir)
    note = (
        "Cells: a / b / c of n = tests with p < 0.05 / 0.01 / 0.001 of the n cells tested (one-sided t-test of "
        "mean per-prompt instability > eps); an axis a model does not observe is no cell."
    )
    by_model = significance_table(tests_total, tests_dataset)
    by_axis = axis_significance_table(tests_total)
    specs = [
        (
            "significance_counts",
            by_model,
            significance_display(by_model),
            "Significant cells per model and eps",
            "tab:sgs-significance",
        ),
        (
            "significance_by_axis",
            by_axis,
            axis_significance_display(by_axis),
            "Models significantly above eps, per axis",
            "tab:sgs-eps-robustness",
        ),
    ]
    paths: dict[str, Path] = {}
    for stem, long, display, title, label in specs:
        paths[f"{stem}.parquet"] = write_table(long, out / f"{stem}.parquet", provenance)
        paths[f"{stem}.md"] = write_text(f"{to_markdown(display)}\n{note}\n", out / f"{stem}.md")
        paths[f"{stem}.tex"] = write_text(to_latex(display, f"{title}. {note}", label), out / f"{stem}.tex")
    return paths


# --------------------------------------------------------------------------- figures


def heatmap(total: pd.DataFrame, out_png: str | os.PathLike, out_svg: str | os.PathLike) -> None:
    """Models x axes heatmap of the total SGS, each cell annotated with its value.

    ``total`` is :func:`shiftwork.stability.stats.total_sgs`. Missing values are left blank and
    annotated ``n/a``. Saved as PNG (dpi 150) and SVG, atomically; the figure is closed.
    """
    require_columns(total, ["model", *AXES], "heatmap(total)")
    if total.empty:
        raise ValueError("heatmap(total): the table has no rows")
    models = [str(m) for m in total["model"]]
    values = total[list(AXES)].to_numpy(dtype=float)
    masked = np.ma.masked_invalid(values)
    vmax = float(masked.max()) if masked.count() else 1.0
    vmax = vmax if vmax > 0 else 1.0
    fig, ax = plt.subplots(figsize=(1.2 * len(AXES) + 2.5, 0.55 * len(models) + 1.8))
    try:
        cmap = plt.get_cmap("viridis").with_extremes(bad="#dddddd")
        image = ax.imshow(masked, cmap=cmap, vmin=0.0, vmax=vmax, aspect="auto")
        ax.set_xticks(range(len(AXES)), labels=list(AXES))
        ax.set_yticks(range(len(models)), labels=models)
        ax.set_xlabel("behaviour axis")
        ax.set_ylabel("model")
        ax.set_title("Total SGS (normalised RMS instability)")
        for i in range(values.shape[0]):
            for j in range(values.shape[1]):
                v = values[i, j]
                text = "n/a" if not np.isfinite(v) else f"{v:.3f}"
                colour = "black" if not np.isfinite(v) or v > 0.6 * vmax else "white"
                ax.text(j, i, text, ha="center", va="center", color=colour, fontsize=9)
        colorbar = fig.colorbar(image, ax=ax)
        colorbar.set_label("SGS")
        save_figure(fig, out_png, out_svg)
    finally:
        plt.close(fig)


def _pooled_rms(group: pd.DataFrame) -> float:
    """RMS over the union of the rows behind several breakdown cells: sqrt(sum(n*rms^2)/sum(n))."""
    n = group["n"].to_numpy(dtype=float)
    r = group["rms"].to_numpy(dtype=float)
    keep = (n > 0) & np.isfinite(r)
    if not keep.any():
        return float("nan")
    return float(np.sqrt(np.sum(n[keep] * r[keep] ** 2) / np.sum(n[keep])))


def family_summary(breakdown: pd.DataFrame) -> pd.DataFrame:
    """Per model and family (and, for register, per strength): RMS instability averaged over axes.

    Within a cell the breakdown rows (kinds, positions, strengths) are pooled per axis into
    one RMS over all their (prompt, variant) rows, then averaged over the axes with a value.
    Columns: model, family, strength (NaN for the whole-family rows), rms. Rows with
    ``strength`` set are register rows split by strength.
    """
    require_columns(breakdown, ["model", "family", "strength", "axis", "rms", "n"], "family_plot(breakdown)")
    rows = []
    for (model, family), g in breakdown.groupby(["model", "family"], sort=True):
        per_axis = [_pooled_rms(a) for _, a in g.groupby("axis")]
        rows.append(
            {
                "model": model,
                "family": family,
                "strength": np.nan,
                "rms": float(np.nanmean(per_axis)) if np.isfinite(per_axis).any() else np.nan,
            }
        )
        if family == "register":
            for strength, s in g.groupby("strength", sort=True):
                per_axis = [_pooled_rms(a) for _, a in s.groupby("axis")]
                rms = float(np.nanmean(per_axis)) if np.isfinite(per_axis).any() else np.nan
                rows.append({"model": model, "family": family, "strength": float(strength), "rms": rms})
    return pd.DataFrame(rows, columns=["model", "family", "strength", "rms"])


def family_plot(breakdown: pd.DataFrame, out_png: str | os.PathLike, out_svg: str | os.PathLike) -> None:
    """Instability by variant family, per model, in two panels.

    Left: grouped bars, one group per family (register, noise, structural, then any other),
    one bar per model, height the RMS averaged over the axes (:func:`family_summary`).
    Right: register variants by strength, one line per model. ``breakdown`` is
    :func:`shiftwork.stability.stats.breakdown`. Saved as PNG (dpi 150) and SVG, atomically; the
    figure is closed.
    """
    summary = family_summary(breakdown)
    if summary.empty:
        raise ValueError("family_plot(breakdown): the table has no rows")
    whole = summary[summary["strength"].isna()]
    present = set(whole["family"])
    families = [f for f in FAMILIES if f in present] + sorted(present - set(FAMILIES))
    models = sorted(whole["model"].unique(), key=str)
    colours = plt.get_cmap("tab10")
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    try:
        width = 0.8 / max(len(models), 1)
        x = np.arange(len(families))
        for k, model in enumerate(models):
            m = whole[whole["model"] == model].set_index("family")["rms"]
            heights = [float(m.get(f, np.nan)) for f in families]
            left.bar(x - 0.4 + width * (k + 0.5), heights, width, label=str(model), color=colours(k % 10))
        left.set_xticks(x, labels=families)
        left.set_xlabel("variant family")
        left.set_ylabel("RMS instability (mean over axes)")
        left.set_title("By family")
        left.legend(title="model", fontsize=8)

        register = summary[(summary["family"] == "register") & summary["strength"].notna()]
        if register.empty:
            right.text(0.5, 0.5, "no register variants", ha="center", va="center", transform=right.transAxes)
            right.set_xticks([])
            right.set_yticks([])
        else:
            for k, model in enumerate(models):
                r = register[register["model"] == model].sort_values("strength")
                if len(r):
                    right.plot(r["strength"], r["rms"], marker="o", label=str(model), color=colours(k % 10))
            right.set_xticks(sorted(register["strength"].unique()))
            right.set_xlabel("register strength")
            right.set_ylabel("RMS instability (mean over axes)")
            right.legend(title="model", fontsize=8)
        right.set_title("Register by strength")
        fig.tight_layout()
        save_figure(fig, out_png, out_svg)
    finally:
        plt.close(fig)
