"""The paper's trajectory figures: ID-residual scatter plots, raw vs primary r, early vs late,
and the cross-model fingerprint.

* :func:`scatter_grid` -- one run, one panel per OOD pair: the two OOD accuracies with the ID
  effect removed (:func:`~shiftwork.trajectory.primary.residual_table`), one point per
  checkpoint coloured by step, the least-squares line, r and Holm p in the panel title.
* :func:`raw_vs_primary_plot` -- one panel per run: each pair's raw r against its primary
  partial r, with the diagonal (no change) and the zero lines; points coloured by sign class
  and labelled with the pair.
* :func:`window_plot` -- one panel per run: per pair, the early and the late window's r joined
  by a line (a dumbbell plot); a filled marker is Holm-significant in its window.
* :func:`fingerprint_plot` -- models x pairs heatmap of the mean primary r, diverging colour
  scale fixed to [-1, 1], ``*`` where all runs of the model agree in sign and are significant
  (:mod:`shiftwork.trajectory.fingerprint`).

Every figure uses constrained layout, is written as PNG and SVG by
:func:`shiftwork.reports.figures.save_figure` (atomically) and closed afterwards, also on error.
Each function returns the two paths.
"""

from __future__ import annotations

import math
import os
from collections.abc import Hashable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from shiftwork.checks import require_columns
from shiftwork.reports.figures import save_figure
from shiftwork.reports.tables import to_markdown
from shiftwork.trajectory.analysis import AnalysisError, sorted_mixed
from shiftwork.trajectory.fingerprint import fingerprint_matrix
from shiftwork.trajectory.primary import pair_label, primary_columns, residual_table

__all__ = ["SIGN_COLOURS", "fingerprint_plot", "raw_vs_primary_plot", "scatter_grid", "window_plot"]

SIGN_COLOURS = {"positive": "#b2182b", "negative": "#2166ac", "null": "#7f7f7f"}
"""Colour of each sign class (the ends of the RdBu_r scale of the heatmaps, grey for null)."""

_EARLY, _LATE = "#4f8cc9", "#d95f02"


def _run_columns(n: int) -> int:
    """Panels a row for ``n`` runs: all of up to three in one row, else a near-square grid of
    at most three columns (four runs: 2 x 2)."""
    return n if n <= 3 else min(3, math.ceil(math.sqrt(n)))


def _grid(n: int, ncols: int, width: float, height: float) -> tuple[plt.Figure, np.ndarray]:
    ncols = max(1, min(ncols, n))
    nrows = math.ceil(n / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False, layout="constrained")
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, axes


def _p_text(p: float) -> str:
    if not math.isfinite(p):
        return "n/a"
    return f"{p:.2g}" if p >= 0.001 else f"{p:.0e}"


def _runs(pairs: pd.DataFrame) -> list[tuple[Hashable, Hashable]]:
    runs = pairs[["model", "run"]].drop_duplicates()
    return sorted(runs.itertuples(index=False, name=None), key=lambda t: (str(t[0]), str(t[1])))


# --------------------------------------------------------------------------- scatter


def scatter_grid(
    scores: pd.DataFrame,
    pairs: pd.DataFrame,
    run: Hashable,
    out_png: str | os.PathLike,
    out_svg: str | os.PathLike,
    method: str = "linear",
) -> tuple[Path, Path]:
    """Per OOD pair of ``run`` (up to five panels a row): x the residual of ``ood_a`` on the ID
    accuracy, y that of ``ood_b`` (``residualise(kind=method)``, in percentage points of
    accuracy), one point per checkpoint
    coloured by step (one colour bar for the figure), the least-squares line of y on x, and
    the title ``ood_a vs ood_b`` with the pair's primary r and Holm-adjusted p from ``pairs``
    (``n/a`` when undefined, followed by the pair's ``reason`` in parentheses).
    Raises :class:`AnalysisError` when ``run`` has no pairs or its scores are invalid."""
    r_col, p_col = primary_columns(pairs)
    rows = pairs[pairs["run"] == run]
    if rows.empty:
        raise AnalysisError(
            f"pairs table: run '{run}' has no pairs; runs are {sorted_mixed(pairs['run'].unique().tolist())}"
        )
    resid = residual_table(scores, run, method)
    steps = resid.index.to_numpy(dtype=float)
    fig, axes = _grid(len(rows), 5, 3.1, 2.9)
    try:
        points = None
        for ax, row in zip(axes.flat, rows.itertuples(index=False)):
            x = 100.0 * resid[row.ood_a].to_numpy(dtype=float)  # percentage points
            y = 100.0 * resid[row.ood_b].to_numpy(dtype=float)
            points = ax.scatter(
                x, y, c=steps, cmap="viridis", vmin=steps.min(), vmax=steps.max(), s=22, edgecolors="none", zorder=3
            )
            if np.ptp(x) > 0:
                slope, intercept = np.polyfit(x, y, 1)
                grid = np.linspace(x.min(), x.max(), 2)
                ax.plot(grid, intercept + slope * grid, color="black", linewidth=1.1, zorder=2)
            ax.axhline(0.0, color="0.8", linewidth=0.7, zorder=1)
            ax.axvline(0.0, color="0.8", linewidth=0.7, zorder=1)
            r, p = float(getattr(row, r_col)), float(getattr(row, p_col))
            r_text = f"{r:.2f}" if math.isfinite(r) else "n/a"
            why = getattr(row, "reason", "")
            why = f"\n({why})" if isinstance(why, str) and why else ""
            ax.set_title(f"{row.ood_a} vs {row.ood_b}\nr = {r_text}, Holm p = {_p_text(p)}{why}", fontsize=9)
            ax.set_xlabel(f"{row.ood_a} residual (pp)", fontsize=8)
            ax.set_ylabel(f"{row.ood_b} residual (pp)", fontsize=8)
            ax.tick_params(labelsize=7)
        bar = fig.colorbar(points, ax=axes.ravel().tolist(), shrink=0.8, pad=0.01)
        bar.set_label("step")
        model = resid.attrs["model"]
        fig.suptitle(
            f"{model} / run {run}: OOD accuracies with the ID ({resid.attrs['id']}) effect removed "
            f"({method} control), one point per checkpoint",
            fontsize=10,
        )
        return save_figure(fig, out_png, out_svg)
    finally:
        plt.close(fig)


# --------------------------------------------------------------------------- raw vs primary


def _spread(values: list[float], low: float, high: float, gap: float) -> list[float]:
    """Label positions for ``values``: each as close to its value as possible, in the same
    order, at least ``gap`` apart (less when they do not fit in [low, high]) and within
    [low, high]."""
    if not values:
        return []
    order = np.argsort(values, kind="stable")
    gap = min(gap, (high - low) / max(1, len(values) - 1))
    spots = np.clip(np.asarray(values, dtype=float)[order], low, high)
    for k in range(1, len(spots)):
        spots[k] = max(spots[k], spots[k - 1] + gap)
    spots[-1] = min(spots[-1], high)
    for k in range(len(spots) - 2, -1, -1):
        spots[k] = min(spots[k], spots[k + 1] - gap)
    out = np.empty_like(spots)
    out[order] = spots
    return out.tolist()


def raw_vs_primary_plot(
    table: pd.DataFrame, out_png: str | os.PathLike, out_svg: str | os.PathLike, method: str = "linear"
) -> tuple[Path, Path]:
    """One square panel per run (laid out by :func:`_run_columns`) of a
    :func:`~shiftwork.trajectory.primary.raw_vs_primary` table: x ``r_raw``, y ``r_primary``,
    both on [-1, 1], the dashed diagonal and the zero lines, points coloured by ``sign`` and
    labelled ``ood_a–ood_b``. Raises :class:`AnalysisError` for a table without rows."""
    require_columns(table, ["model", "run", "ood_a", "ood_b", "r_raw", "r_primary", "sign"], "table", AnalysisError)
    if table.empty:
        raise AnalysisError("raw vs primary table: no rows")
    runs = _runs(table)
    fig, axes = _grid(len(runs), _run_columns(len(runs)), 5.4, 4.4)
    try:
        for ax, (model, run) in zip(axes.flat, runs):
            rows = table[(table["model"] == model) & (table["run"] == run)]
            ax.plot([-1, 1], [-1, 1], linestyle="--", color="0.5", linewidth=0.9, zorder=1)
            ax.axhline(0.0, color="0.75", linewidth=0.8, zorder=1)
            ax.axvline(0.0, color="0.75", linewidth=0.8, zorder=1)
            drawn = [
                (float(row.r_raw), float(row.r_primary), row)
                for row in rows.itertuples(index=False)
                if math.isfinite(float(row.r_raw)) and math.isfinite(float(row.r_primary))
            ]
            for x, y, row in drawn:
                ax.scatter(x, y, s=28, color=SIGN_COLOURS.get(row.sign, "black"), zorder=3)
            # labels in a column right of the panel, spread apart, each joined to its point
            spots = _spread([y for _, y, _ in drawn], low=-1.0, high=1.0, gap=0.09)
            for (x, y, row), spot in zip(drawn, spots):
                ax.annotate(
                    pair_label(row.ood_a, row.ood_b),
                    (x, y),
                    xytext=(1.04, spot),
                    textcoords=ax.get_yaxis_transform(),
                    va="center",
                    fontsize=7,
                    color="0.15",
                    arrowprops={"arrowstyle": "-", "color": "0.65", "linewidth": 0.5, "shrinkA": 1, "shrinkB": 3},
                    annotation_clip=False,
                )
            ax.set_xlim(-1.05, 1.05)
            ax.set_ylim(-1.05, 1.05)
            ax.set_aspect("equal")
            ax.set_xlabel("raw r")
            ax.set_ylabel(f"partial r ({method} ID control)")
            ax.set_title(f"{model} / run {run}", fontsize=10)
            ax.grid(alpha=0.25)
        handles = [
            Line2D([], [], marker="o", linestyle="", color=c, label=f"{s} (Holm)" if s != "null" else s)
            for s, c in SIGN_COLOURS.items()
        ]
        handles.append(Line2D([], [], linestyle="--", color="0.5", label="partial = raw"))
        fig.legend(handles=handles, loc="outside lower center", ncols=len(handles), fontsize=8, frameon=False)
        fig.suptitle("Raw vs ID-partialled correlation of OOD pairs", fontsize=11)
        return save_figure(fig, out_png, out_svg)
    finally:
        plt.close(fig)


# --------------------------------------------------------------------------- early vs late


def window_plot(windows: pd.DataFrame, out_png: str | os.PathLike, out_svg: str | os.PathLike) -> tuple[Path, Path]:
    """One panel per run (laid out by :func:`_run_columns`) of a
    :func:`~shiftwork.trajectory.windows.window_table`: a row per pair, the early window's r
    (circle) and the late window's r (square) joined by a grey line, on [-1, 1] with a zero
    line; a filled marker is Holm-significant in its window, a hollow one is not; the pair's
    label carries ``†`` when the Fisher-z difference has p < 0.05. Raises
    :class:`AnalysisError` for a table without rows."""
    need = ["model", "run", "ood_a", "ood_b", "r_early", "r_late", "sign_early", "sign_late", "p_diff"]
    require_columns(windows, need, "window table", AnalysisError)
    if windows.empty:
        raise AnalysisError("window table: no rows")
    runs = _runs(windows)
    height = 0.32 * windows.groupby("run").size().max() + 1.4
    fig, axes = _grid(len(runs), _run_columns(len(runs)), 4.3, height)
    try:
        for ax, (model, run) in zip(axes.flat, runs):
            rows = windows[(windows["model"] == model) & (windows["run"] == run)].reset_index(drop=True)
            ys = np.arange(len(rows))[::-1]
            for y, row in zip(ys, rows.itertuples(index=False)):
                ax.plot([row.r_early, row.r_late], [y, y], color="0.7", linewidth=1.6, zorder=1)
                for r, sign, colour, marker in (
                    (row.r_early, row.sign_early, _EARLY, "o"),
                    (row.r_late, row.sign_late, _LATE, "s"),
                ):
                    if math.isfinite(r):
                        face = colour if sign != "null" else "white"
                        ax.scatter(
                            r, y, s=36, marker=marker, facecolors=face, edgecolors=colour, linewidths=1.4, zorder=3
                        )
            labels = [
                pair_label(a, b) + (" \u2020" if math.isfinite(p) and p < 0.05 else "")
                for a, b, p in zip(rows["ood_a"], rows["ood_b"], rows["p_diff"])
            ]
            ax.set_yticks(ys, labels, fontsize=8)
            ax.set_ylim(-0.7, len(rows) - 0.3)
            ax.axvline(0.0, color="0.5", linewidth=0.8, zorder=0)
            ax.set_xlim(-1.05, 1.05)
            ax.set_xlabel("partial r")
            ax.grid(axis="x", alpha=0.3)
            title = f"{model} / run {run}"
            if {"early_first_step", "late_last_step"} <= set(rows.columns):
                first = rows.iloc[0]
                title += (
                    f"\nearly: steps {first.early_first_step}\u2013{first.early_last_step}, "
                    f"late: {first.late_first_step}\u2013{first.late_last_step}"
                )
            ax.set_title(title, fontsize=9)
        handles = [
            Line2D([], [], marker="o", linestyle="", markerfacecolor=_EARLY, markeredgecolor=_EARLY, label="early"),
            Line2D([], [], marker="s", linestyle="", markerfacecolor=_LATE, markeredgecolor=_LATE, label="late"),
            Line2D(
                [],
                [],
                marker="o",
                linestyle="",
                markerfacecolor="white",
                markeredgecolor="0.3",
                label="not significant (Holm)",
            ),
            Line2D([], [], linestyle="", label="\u2020 Fisher-z difference p < 0.05"),
        ]
        fig.legend(handles=handles, loc="outside lower center", ncols=4, fontsize=8, frameon=False)
        fig.suptitle("Partial r of OOD pairs in the early and the late half of each run", fontsize=11)
        return save_figure(fig, out_png, out_svg)
    finally:
        plt.close(fig)


# --------------------------------------------------------------------------- fingerprint


def fingerprint_plot(
    table: pd.DataFrame,
    out_png: str | os.PathLike,
    out_svg: str | os.PathLike,
    method: str = "linear",
    alpha: float | None = None,
) -> tuple[Path, Path]:
    """Heatmap of a :func:`~shiftwork.trajectory.fingerprint.fingerprint` table: rows the
    models (labelled with their run count), columns the pairs, colour the mean primary r on
    ``RdBu_r`` fixed to [-1, 1]; each cell shows the mean to two decimals, ``*`` when the
    cell's ``sign`` is not ``"null"`` and, for a model with several runs, ``±`` the standard
    deviation below it; a pair a model lacks is blank. ``alpha`` (the level the pairs table's
    sign classes used) is only quoted in the title. Raises :class:`AnalysisError` for a table
    without rows."""
    require_columns(table, ["model", "pair", "n_runs", "r_mean", "r_sd", "sign"], "fingerprint table", AnalysisError)
    if table.empty:
        raise AnalysisError("fingerprint table: no rows")
    mean = fingerprint_matrix(table, "r_mean")
    sd = fingerprint_matrix(table, "r_sd")
    runs = fingerprint_matrix(table, "n_runs")
    sign = fingerprint_matrix(table, "sign")
    n_models, n_pairs = mean.shape
    fig, ax = plt.subplots(figsize=(max(4.5, 0.85 * n_pairs + 2.6), 0.6 * n_models + 1.9), layout="constrained")
    try:
        cmap = matplotlib.colormaps["RdBu_r"].with_extremes(bad="0.92")
        image = ax.imshow(
            np.ma.masked_invalid(mean.to_numpy(dtype=float)), cmap=cmap, vmin=-1.0, vmax=1.0, aspect="auto"
        )
        for i in range(n_models):
            for j in range(n_pairs):
                value = mean.iat[i, j]
                if not math.isfinite(value):
                    if math.isfinite(runs.iat[i, j]):
                        ax.text(j, i, "n/a", ha="center", va="center", fontsize=8, color="0.4")
                    continue
                text = f"{value:.2f}{'*' if sign.iat[i, j] in ('positive', 'negative') else ''}"
                if math.isfinite(sd.iat[i, j]):
                    text += f"\n\u00b1{sd.iat[i, j]:.2f}"
                colour = "white" if abs(value) > 0.6 else "black"
                ax.text(j, i, text, ha="center", va="center", fontsize=8, color=colour, linespacing=1.1)
        row_runs = table.groupby("model", sort=False)["n_runs"].max()
        ax.set_yticks(
            range(n_models), [f"{m} ({int(row_runs[m])} run{'s' if row_runs[m] != 1 else ''})" for m in mean.index]
        )
        ax.set_xticks(range(n_pairs), list(mean.columns), rotation=40, ha="right", fontsize=8)
        bar = fig.colorbar(image, ax=ax, shrink=0.9, pad=0.02)
        bar.set_label("mean partial r")
        ax.set_title(
            "Cross-model fingerprint: partial r of OOD pairs (ID removed), mean \u00b1 sd over runs\n"
            f"* every run of the model significant (Holm p < {'alpha' if alpha is None else format(alpha, 'g')}) "
            "with the same sign",
            fontsize=9,
        )
        return save_figure(fig, out_png, out_svg)
    finally:
        plt.close(fig)


# --------------------------------------------------------------------------- captions


def figures_markdown(
    runs: list[Hashable],
    fingerprint_table: pd.DataFrame,
    windows: pd.DataFrame | None,
    method: str = "linear",
    alpha: float = 0.05,
) -> str:
    """``figures.md``: every figure of the rule ``plot_trajectory`` (under ``figures/``) with a
    one-line caption, then the fingerprint table (with ``n_skipped``, the runs whose r is
    undefined) and, when given, the window table (with ``reason``, why a window's r is
    undefined)."""
    lines = [
        "# Trajectory study: figures",
        "",
        f"Primary partial correlation: {method} ID control; sign classes at Holm-adjusted p < {alpha:g}.",
        "",
    ]
    files = ", ".join(f"`figures/scatter_{run}.png`" for run in runs)
    lines.append(
        f"- {files}: one per run, a panel per OOD pair: the two OOD accuracies with the ID effect removed, "
        "one point per checkpoint coloured by step, least-squares line, r and Holm p."
    )
    lines.append(
        "- `figures/raw_vs_partial.png`: raw r against partial r of every OOD pair, one panel per run; "
        "points below the diagonal lose correlation once ID progress is removed."
    )
    if windows is not None:
        lines.append(
            "- `figures/windows.png`: partial r of every OOD pair in the early and the late half of each run; "
            "filled markers Holm-significant, † a Fisher-z difference with p < 0.05."
        )
    lines.append(
        "- `figures/fingerprint.png`: models x OOD pairs, mean partial r over a model's runs (± sd); "
        "* every run of the model significant with the same sign."
    )
    lines += ["", "## Cross-model fingerprint (`fingerprint.parquet`)", ""]
    finger_cols = ["model", "pair", "n_runs", "n_skipped", "r_mean", "r_sd", "r_min", "r_max", "sign"]
    lines.append(to_markdown(fingerprint_table[[c for c in finger_cols if c in fingerprint_table.columns]]))
    if windows is not None:
        lines += ["## Early vs late window (`windows.parquet`)", ""]
        shown = windows.assign(pair=[pair_label(a, b) for a, b in zip(windows["ood_a"], windows["ood_b"])])
        cols = ["model", "run", "pair", "n_early", "n_late", "r_early", "p_early_holm", "r_late", "p_late_holm"]
        cols += [c for c in ("r_diff", "p_diff", "reason") if c in shown.columns]
        lines.append(to_markdown(shown[cols]))
    return "\n".join(lines)
