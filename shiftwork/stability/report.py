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
from shiftwork.reports.intervals import t_half_width
from shiftwork.reports.tables import to_latex, to_markdown
from shiftwork.stability.stats import ALL, AXES, POOLED, significance_counts
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
    footnote: str | None = None,
) -> dict[str, Path]:
    """Write the main and per-dataset SGS tables as ``.md``, ``.tex`` and ``.csv`` into ``out_dir``.

    ``main_table.*`` comes from :func:`main_table`, ``dataset_table.*`` from
    :func:`dataset_table`; the Markdown adds a line explaining the markers, the LaTeX puts
    it in the caption, the CSV holds the numeric twin (:func:`numeric_table`). A ``footnote``
    (where the MR of register and form variants comes from, with a judge) follows that line
    and the caption. Each file is written atomically. Returns the paths keyed by file name
    (``"main_table.md"``, ...).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    note = f"SGS (mean per-prompt RMS of normalised deltas); one-sided t-test of mean > eps = {eps:g}: {MARKER_LEGEND}."
    if footnote:
        note = f"{note} {footnote}"
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


DEGENERATE_NAMES = [f"degenerate_replies.{ext}" for ext in ("md", "tex", "csv")]
DEGENERATE_NOTE = (
    "Share of degenerate replies (count of all): empty (no letter or digit), a loop (a group of 1 to 4 words "
    "repeated back to back at least 3 times, over at least 4 words, covering at least half the reply's words), "
    "or at least 12 words of which at most a quarter distinct. baseline: the replies to the prompts; variants: "
    "the replies to their variants; dataset all: every dataset of the model."
)


def _share_text(n_bad: int, n: int) -> str:
    return f"{n_bad / n:.3f} ({n_bad} of {n})" if n else "n/a"


def degenerate_display(table: pd.DataFrame) -> pd.DataFrame:
    """:func:`shiftwork.stability.degenerate.degenerate_shares` as a display table: a row per
    model and dataset (``all`` last), a column per kind of reply (``baseline``, ``variants``,
    ``all``) reading ``"0.250 (1 of 4)"``."""
    require_columns(table, ["model", "dataset", "replies", "n_replies", "n_degenerate"], "degenerate table")
    heads = {"baseline": "baseline", "variant": "variants", "all": "all"}
    rows = []
    for (model, dataset), g in table.groupby(["model", "dataset"], sort=False):
        cells = {r.replies: _share_text(int(r.n_degenerate), int(r.n_replies)) for r in g.itertuples(index=False)}
        rows.append({"model": model, "dataset": dataset, **{h: cells.get(k, "n/a") for k, h in heads.items()}})
    return pd.DataFrame(rows, columns=["model", "dataset", *heads.values()])


def write_degenerate_tables(table: pd.DataFrame, out_dir: str | os.PathLike) -> dict[str, Path]:
    """The shares of degenerate replies (:func:`degenerate_display`) as ``degenerate_replies.md``
    and ``.tex`` with the rule under them, and the numeric table as ``.csv``. Returns the paths
    keyed by file name (:data:`DEGENERATE_NAMES`)."""
    out = Path(out_dir)
    display = degenerate_display(table)
    md = f"{to_markdown(display)}\n{DEGENERATE_NOTE}\n"
    tex = to_latex(display, f"Degenerate replies per model and dataset. {DEGENERATE_NOTE}", "tab:degenerate")
    paths = {
        "degenerate_replies.md": write_text(md, out / "degenerate_replies.md"),
        "degenerate_replies.tex": write_text(tex, out / "degenerate_replies.tex"),
    }
    with atomic_file(out / "degenerate_replies.csv") as tmp:
        table.to_csv(tmp, index=False)
    paths["degenerate_replies.csv"] = out / "degenerate_replies.csv"
    return paths


# --------------------------------------------------------------------------- figures


def heatmap_cells(total: pd.DataFrame, tests: pd.DataFrame | None = None, eps: float | None = None) -> pd.DataFrame:
    """What the SGS heatmap draws: one row per model (in table order) and axis (:data:`AXES` order).

    ``sgs`` is the model's total SGS on the axis; ``scaled`` is ``sgs`` divided by the largest SGS
    of that axis over the models (the cell's colour: every axis on its own scale, its largest cell
    1; an axis whose values are all 0 gets 0; a missing SGS stays NaN). With ``tests``
    (:func:`shiftwork.stability.stats.ttests` by model) the rows at ``eps`` give ``p`` and
    ``marker`` (``"*"`` to ``"***"``; ``""`` when not significant, untested or unobserved);
    ``eps`` may be omitted when ``tests`` holds one eps only. Without ``tests`` both are empty.
    Columns: model, axis, sgs, scaled, p, marker.
    """
    require_columns(total, ["model", *AXES], "heatmap(total)")
    values = total[list(AXES)].to_numpy(dtype=float)
    with np.errstate(all="ignore"):
        top = np.nanmax(np.where(np.isfinite(values), values, -np.inf), axis=0)
        scaled = np.where(top > 0, values / np.where(top > 0, top, 1.0), np.where(np.isfinite(values), 0.0, np.nan))
    models = [str(m) for m in total["model"]]
    cells = pd.DataFrame(
        {
            "model": np.repeat(models, len(AXES)),
            "axis": np.tile(list(AXES), len(models)),
            "sgs": values.ravel(),
            "scaled": scaled.ravel(),
        }
    )
    cells["p"], cells["marker"] = np.nan, ""
    if tests is None:
        return cells
    require_columns(tests, ["model", "axis", "eps", "p", "marker"], "heatmap(tests)")
    levels = sorted(tests["eps"].astype(float).unique())
    if eps is None:
        if len(levels) != 1:
            raise ValueError(f"heatmap: the tests hold eps {levels}; say which one the stars are for")
        eps = levels[0]
    at = tests[np.isclose(tests["eps"].astype(float), float(eps))]
    if at.empty:
        raise ValueError(f"heatmap: the tests have no row at eps {eps:g} (they hold {levels})")
    at = at.assign(model=at["model"].astype(str)).set_index(["model", "axis"])
    keys = list(zip(cells["model"], cells["axis"]))
    missing = [k for k, v in zip(keys, cells["sgs"]) if k not in at.index and np.isfinite(v)]
    if missing:
        raise ValueError(f"heatmap: the tests at eps {eps:g} lack (model, axis) {missing[:5]}")
    cells["p"] = [float(at.at[k, "p"]) if k in at.index else np.nan for k in keys]
    cells["marker"] = [str(at.at[k, "marker"]) if k in at.index else "" for k in keys]
    cells.attrs["eps"] = float(eps)
    return cells


def sgs_heatmap(
    total: pd.DataFrame,
    out_png: str | os.PathLike,
    out_svg: str | os.PathLike,
    tests: pd.DataFrame | None = None,
    eps: float | None = None,
) -> None:
    """Models x axes heatmap of the total SGS, each axis (column) on its own colour scale.

    A cell's colour is its SGS divided by the largest SGS of its axis (:func:`heatmap_cells`), so
    BLEU's large values do not flatten the small axes; each column's label names that largest
    value and every cell is annotated with its SGS. With ``tests`` (the study's one-sided t-tests
    by model, :func:`shiftwork.stability.stats.ttests`) each value carries its significance stars
    at ``eps``, explained under the title. ``total`` is
    :func:`shiftwork.stability.stats.total_sgs`. Missing values are grey and annotated ``n/a``.
    Saved as PNG (dpi 150) and SVG, atomically; the figure is closed.
    """
    if total.empty:
        raise ValueError("heatmap(total): the table has no rows")
    cells = heatmap_cells(total, tests, eps)
    models = [str(m) for m in total["model"]]
    shape = (len(models), len(AXES))
    scaled = cells["scaled"].to_numpy(dtype=float).reshape(shape)
    sgs = cells["sgs"].to_numpy(dtype=float).reshape(shape)
    markers = cells["marker"].to_numpy().reshape(shape)
    tops = [float(np.nanmax(c)) if np.isfinite(c).any() else np.nan for c in sgs.T]
    fig, ax = plt.subplots(figsize=(1.25 * len(AXES) + 3.2, 0.55 * len(models) + 2.4), layout="constrained")
    try:
        cmap = plt.get_cmap("viridis").with_extremes(bad="#dddddd")
        image = ax.imshow(np.ma.masked_invalid(scaled), cmap=cmap, vmin=0.0, vmax=1.0, aspect="auto")
        labels = [f"{a}\n(max {t:.3g})" if np.isfinite(t) else f"{a}\n(n/a)" for a, t in zip(AXES, tops)]
        ax.set_xticks(range(len(AXES)), labels=labels)
        ax.set_yticks(range(len(models)), labels=models)
        ax.set_xlabel("behaviour axis (largest SGS of the axis)")
        ax.set_ylabel("model")
        for i in range(shape[0]):
            for j in range(shape[1]):
                v = sgs[i, j]
                text = "n/a" if not np.isfinite(v) else f"{v:.3f}{markers[i, j]}"
                colour = "black" if not np.isfinite(v) or scaled[i, j] > 0.6 else "white"
                ax.text(j, i, text, ha="center", va="center", color=colour, fontsize=9)
        title = "Total SGS (normalised RMS instability), each axis on its own colour scale"
        if tests is not None:
            title += (
                f"\n{MARKER_LEGEND}: one-sided one-sample t-test over prompts,"
                f"\nH1 mean per-prompt instability > eps = {cells.attrs['eps']:g}, no multiple-comparison correction"
            )
        ax.set_title(title, fontsize=9)
        colorbar = fig.colorbar(image, ax=ax)
        colorbar.set_label("SGS / largest SGS of its axis")
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


def family_intervals(strength: pd.DataFrame, confidence: float = 0.95) -> pd.DataFrame:
    """Per model and family (and, for register, per strength): mean instability over prompts and
    its t-interval, from :func:`shiftwork.stability.stats.strength_curves`.

    The instability of a prompt under one setting (kind, position, strength) is the mean over the
    axes of its per-axis RMS (the curves' ``pooled`` axis, as the SGS takes an RMS per prompt).
    A cell (a family, or register at one strength) averages the means of its settings, each
    setting weighted equally. Its ``half`` width is that of the t-interval over prompts,
    ``t_{(1+confidence)/2, n-1} * sd / sqrt(n)`` (:func:`shiftwork.reports.intervals.t_half_width`),
    with ``sd`` the mean of the settings' SDs and ``n`` their smallest prompt count: exact for a
    cell of one setting, and never narrower than the interval of the prompts' mean over the
    settings, whose SD is at most the mean SD. Settings without a value are left out; a cell with
    no value is left out. Columns: model, family, strength (NaN for the whole-family rows), mean,
    half, low, high, n_prompts, n_settings.
    """
    need = ["model", "family", "kind", "position", "strength", "axis", "mean", "sd", "n_prompts"]
    require_columns(strength, need, "family_intervals(strength)")
    pooled = strength[(strength["axis"] == POOLED) & np.isfinite(strength["mean"].astype(float))]
    pooled = pooled[pooled["n_prompts"].astype(int) > 0]
    rows = []

    def cell(part: pd.DataFrame, model, family, level: float) -> dict:
        sd = part["sd"].astype(float)
        return {
            "model": model,
            "family": family,
            "strength": level,
            "mean": float(part["mean"].astype(float).mean()),
            "sd": float(sd.mean()) if sd.notna().all() else np.nan,
            "n_prompts": int(part["n_prompts"].min()),
            "n_settings": len(part),
        }

    for (model, family), g in pooled.groupby(["model", "family"], sort=True):
        rows.append(cell(g, model, family, np.nan))
        if family == "register":
            for level, s in g.groupby("strength", sort=True):
                rows.append(cell(s, model, family, float(level)))
    columns = ["model", "family", "strength", "mean", "half", "low", "high", "n_prompts", "n_settings"]
    if not rows:
        return pd.DataFrame(columns=columns)
    out = pd.DataFrame(rows)
    out["half"] = t_half_width(out["sd"], out["n_prompts"], confidence)
    out["low"], out["high"] = out["mean"] - out["half"], out["mean"] + out["half"]
    return out[columns]


def _family_order(present: set) -> list:
    return [f for f in FAMILIES if f in present] + sorted(present - set(FAMILIES), key=str)


def _family_values(
    breakdown: pd.DataFrame, strength: pd.DataFrame | None, confidence: float
) -> tuple[pd.DataFrame, str, str, str]:
    """What :func:`family_plot` draws: (its table, with a ``half`` column of error-bar half
    widths, NaN for none; the column of bar heights; the measure's name; the note on the error
    bars, empty without them)."""
    if strength is not None:
        summary = family_intervals(strength, confidence)
        value = "mean"
        measure = "instability, mean over prompts"
        note = (
            f"error bars: {confidence:.0%} t-interval over prompts (a bar pooling several settings: "
            "conservative, from the mean of their SDs)"
        )
    else:
        summary = family_summary(breakdown)
        value = "rms"
        measure = "RMS instability"
        note = ""
    if summary.empty:
        raise ValueError("family_plot: the table has no rows")
    bars = summary if "half" in summary else summary.assign(half=np.nan)
    return bars, value, measure, note


def _family_bars(ax, whole: pd.DataFrame, models: list, value: str, measure: str) -> None:
    """The left panel: one group of bars per family, one bar per model, from 0."""
    colours = plt.get_cmap("tab10")
    families = _family_order(set(whole["family"]))
    width = 0.8 / max(len(models), 1)
    x = np.arange(len(families))
    top = 0.0
    for k, model in enumerate(models):
        m = whole[whole["model"] == model].set_index("family")
        heights = np.array([float(m[value].get(f, np.nan)) for f in families])
        halves = np.array([float(m["half"].get(f, np.nan)) for f in families])
        ax.bar(
            x - 0.4 + width * (k + 0.5),
            heights,
            width,
            yerr=halves if np.isfinite(halves).any() else None,
            capsize=3,
            error_kw={"linewidth": 1.0},
            label=str(model),
            color=colours(k % 10),
        )
        top = np.nanmax([top, *(heights + np.nan_to_num(halves))])
    ax.set_xticks(x, labels=families)
    ax.set_xlabel("variant family")
    ax.set_ylabel(f"{measure}\n(mean over axes)")
    ax.set_title("By family")
    ax.set_ylim(0.0, 1.12 * top if top > 0 else 1.0)


def _register_lines(ax, register: pd.DataFrame, models: list, value: str, measure: str) -> None:
    """The right panel with register rows: one line per model over the strengths, each model's
    points shifted a little sideways so that their error bars stay apart, from 0."""
    colours = plt.get_cmap("tab10")
    top = 0.0
    levels = sorted(register["strength"].unique())
    gap = min(np.diff(levels)) if len(levels) > 1 else 1.0
    for k, model in enumerate(models):
        r = register[register["model"] == model].sort_values("strength")
        if not len(r):
            continue
        halves = r["half"].to_numpy(dtype=float)
        dodge = (k - (len(models) - 1) / 2) * 0.25 * gap / max(len(models), 1)  # keep the bars apart
        ax.errorbar(
            r["strength"].to_numpy(dtype=float) + dodge,
            r[value],
            yerr=halves if np.isfinite(halves).any() else None,
            marker="o",
            capsize=3,
            color=colours(k % 10),
            label=str(model),
        )
        top = np.nanmax([top, *(r[value].to_numpy(dtype=float) + np.nan_to_num(halves))])
    ax.set_xticks(levels)
    ax.set_ylim(0.0, 1.12 * top if top > 0 else 1.0)
    ax.axvline(0.0, color="0.6", linewidth=0.8, linestyle=":")
    ax.set_xlabel("register strength (negative: rude, positive: polite)")
    ax.set_ylabel(f"{measure}\n(mean over axes)")
    if min(levels) < 0:
        ax.text(0.02, 0.03, "\u2190 rude", transform=ax.transAxes, ha="left", fontsize=8, color="0.3")
    if max(levels) > 0:
        ax.text(0.98, 0.03, "polite \u2192", transform=ax.transAxes, ha="right", fontsize=8, color="0.3")


def _register_panel(ax, register: pd.DataFrame, models: list, value: str, measure: str) -> None:
    """The right panel: register variants by strength, or a note that there are none."""
    if register.empty:
        ax.text(0.5, 0.5, "no register variants", ha="center", va="center", transform=ax.transAxes)
        ax.set_xticks([])
        ax.set_yticks([])
    else:
        _register_lines(ax, register, models, value, measure)
    ax.set_title("Register by strength")


def family_plot(
    breakdown: pd.DataFrame,
    out_png: str | os.PathLike,
    out_svg: str | os.PathLike,
    strength: pd.DataFrame | None = None,
    confidence: float = 0.95,
) -> None:
    """Instability by variant family, per model, in two panels.

    Left: grouped bars, one group per family (register, noise, structural, then any other),
    one bar per model. Right: register variants by strength (negative: rude, positive: polite),
    one line per model. With ``strength`` (:func:`shiftwork.stability.stats.strength_curves`)
    the heights are the mean over prompts of each prompt's instability (mean over axes of its
    RMS) with ``confidence`` t-intervals over prompts as error bars (:func:`family_intervals`);
    without it, the RMS pooled over all rows of ``breakdown``
    (:func:`shiftwork.stability.stats.breakdown`), averaged over axes (:func:`family_summary`),
    without error bars. Both panels start at 0. Saved as PNG (dpi 150) and SVG, atomically; the
    figure is closed.
    """
    bars, value, measure, note = _family_values(breakdown, strength, confidence)
    whole = bars[bars["strength"].isna()]
    models = sorted(whole["model"].unique(), key=str)
    register = bars[(bars["family"] == "register") & bars["strength"].notna()]
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.4), layout="constrained")
    try:
        _family_bars(left, whole, models, value, measure)
        _register_panel(right, register, models, value, measure)
        handles, labels = left.get_legend_handles_labels()
        fig.legend(handles, labels, title="model", fontsize=8, loc="outside right upper", frameon=False)
        if note:
            fig.suptitle(note, fontsize=9)
        save_figure(fig, out_png, out_svg)
    finally:
        plt.close(fig)
