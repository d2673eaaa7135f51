"""Trajectory report figures: the OOD x OOD partial-correlation heatmap and accuracy curves.

:func:`correlation_heatmap` draws, for one run, the square matrix of ``r_primary`` (OOD pairs, ID effect
removed by the primary method, linear or GAM; see
:func:`shiftwork.trajectory.analysis.pair_table`) on a diverging colour scale fixed to [-1, 1],
the diagonal blank, every cell annotated with its value and ``*`` where ``p_primary_holm``
is below 0.05; its title names the method. :func:`curve_plot` draws accuracy over steps per test
set, one panel per run, the ID line thicker, a dashed line at chance (:data:`CHANCE`, 0.5) and one legend
outside the panels; its axis names the score the analysis read. :func:`last_checkpoint_scores`
gives the raw, per-label and balanced accuracy of each run's last checkpoint for the report.

Every figure is written as PNG (dpi 150) and SVG, each atomically: to a temporary sibling
with the same extension in the same directory, then renamed over the target with
:func:`os.replace`. Figures are closed after saving, also on error.
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

from shiftwork.checks import require_columns
from shiftwork.reports.figures import save_figure
from shiftwork.trajectory.analysis import ID_ROLE, REQUIRED_COLUMNS, AnalysisError, sorted_mixed
from shiftwork.trajectory.suite import LABELS

__all__ = [
    "CHANCE",
    "HOLM_ALPHA",
    "SCORE_TITLES",
    "curve_plot",
    "correlation_heatmap",
    "last_checkpoint_scores",
    "partial_matrix",
]

HOLM_ALPHA = 0.05
"""A heatmap cell is marked ``*`` when its ``p_primary_holm`` is below this."""

METHOD_TITLES = {
    "linear": "linear fit (OLS on ID accuracy)",
    "gam": "GAM (penalised spline of ID accuracy, GCV)",
}
"""How a heatmap's title names the primary method of :func:`~shiftwork.trajectory.analysis.pair_table`."""

SCORE_TITLES = {
    "lean_free_accuracy": "lean-free accuracy",
    "balanced_accuracy": "balanced accuracy",
    "accuracy": "accuracy",
}
"""How the report and the curves name the score the analysis read (config ``trajectory.analysis.score``)."""

CHANCE = 1.0 / len(LABELS)
"""Chance accuracy of the study's tasks, one over the number of labels (entailment /
not_entailment: 0.5): the dashed line of :func:`curve_plot`."""

_PAIR_NEEDS = ("model", "run", "ood_a", "ood_b")


def last_checkpoint_scores(scores: pd.DataFrame) -> pd.DataFrame:
    """Each run's last checkpoint, one row per test set (sorted by model, run, test set):
    ``model``, ``run``, ``step``, ``testset``, ``role``, the raw ``accuracy`` (``raw_accuracy``
    where :func:`~shiftwork.trajectory.scores.analysis_scores` put another score in its place),
    then those of ``accuracy_<label>`` per label, ``balanced_accuracy`` and ``lean_free_accuracy`` the table has."""
    require_columns(scores, REQUIRED_COLUMNS, "scores table", AnalysisError)
    last = scores.groupby("run")["step"].transform("max")
    rows = scores[scores["step"] == last].copy()
    if "raw_accuracy" in rows.columns:
        rows["accuracy"] = rows["raw_accuracy"]
    extra = [
        c
        for c in (*(f"accuracy_{label}" for label in LABELS), "balanced_accuracy", "lean_free_accuracy")
        if c in rows.columns
    ]
    keep = ["model", "run", "step", "testset", "role", "accuracy", *extra]
    return rows[keep].sort_values(["model", "run", "testset"], key=lambda c: c.astype(str)).reset_index(drop=True)


# --------------------------------------------------------------------------- heatmap


def partial_matrix(
    pairs: pd.DataFrame, run: Hashable, r: str = "r_primary", p: str = "p_primary_holm"
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The symmetric OOD x OOD matrices of columns ``r`` and ``p`` of ``pairs`` for one run
    (by default the primary method's ``r_primary`` and ``p_primary_holm``).

    Rows and columns are the run's OOD sets in sorted order; the diagonal, and any pair
    missing from ``pairs``, is NaN. Raises :class:`AnalysisError` when ``pairs`` lacks a
    needed column, has no row for ``run`` or lists a pair twice.
    """
    r_col, p_col = r, p
    require_columns(pairs, [*_PAIR_NEEDS, r_col, p_col], "pairs table", AnalysisError)
    rows = pairs[pairs["run"] == run]
    if rows.empty:
        raise AnalysisError(
            f"pairs table: run '{run}' has no pairs; runs are {sorted_mixed(pairs['run'].unique().tolist())}"
        )
    names = sorted_mixed(list(set(rows["ood_a"]) | set(rows["ood_b"])))
    r = pd.DataFrame(np.nan, index=names, columns=names)
    p = pd.DataFrame(np.nan, index=names, columns=names)
    seen: set[frozenset] = set()
    for row in rows.itertuples(index=False):
        key = frozenset((row.ood_a, row.ood_b))
        if key in seen or row.ood_a == row.ood_b:
            raise AnalysisError(
                f"pairs table: run '{run}' lists pair ('{row.ood_a}', '{row.ood_b}') twice or with itself"
            )
        seen.add(key)
        for x, y in ((row.ood_a, row.ood_b), (row.ood_b, row.ood_a)):
            r.loc[x, y] = float(getattr(row, r_col))
            p.loc[x, y] = float(getattr(row, p_col))
    return r, p


def correlation_heatmap(
    pairs: pd.DataFrame, run: Hashable, out_png: str | os.PathLike, out_svg: str | os.PathLike
) -> tuple[Path, Path]:
    """Draw the OOD x OOD ``r_primary`` heatmap of ``run`` to ``out_png`` and ``out_svg``.

    Colour scale ``RdBu_r`` fixed to [-1, 1]; the diagonal is left blank; each off-diagonal
    cell shows ``r_primary`` to two decimals followed by ``*`` when ``p_primary_holm`` <
    :data:`HOLM_ALPHA` (``n/a`` for an undefined correlation); the title names the run's
    ``method`` (:data:`METHOD_TITLES`). Returns the two paths.
    """
    require_columns(pairs, ["method"], "pairs table", AnalysisError)
    r, p = partial_matrix(pairs, run)
    names = list(r.index)
    rows = pairs.loc[pairs["run"] == run]
    model = rows["model"].iloc[0]
    methods = rows["method"].unique().tolist()
    if len(methods) != 1 or methods[0] not in METHOD_TITLES:
        raise AnalysisError(f"pairs table: run '{run}' has method(s) {methods}; expected one of {list(METHOD_TITLES)}")
    k = len(names)
    side = max(3.5, 0.8 * k + 2.0)
    fig, ax = plt.subplots(figsize=(side + 1.2, side), layout="constrained")
    try:
        cmap = matplotlib.colormaps["RdBu_r"].with_extremes(bad="white")
        values = np.ma.masked_invalid(r.to_numpy(dtype=float))
        image = ax.imshow(values, cmap=cmap, vmin=-1.0, vmax=1.0)
        for i in range(k):
            for j in range(k):
                if i == j:
                    continue
                value = r.iat[i, j]
                if not math.isfinite(value):
                    text, colour = "n/a", "0.4"
                else:
                    marked = math.isfinite(p.iat[i, j]) and p.iat[i, j] < HOLM_ALPHA
                    text = f"{value:.2f}{'*' if marked else ''}"
                    colour = "white" if abs(value) > 0.6 else "black"
                ax.text(j, i, text, ha="center", va="center", color=colour, fontsize=9)
        ax.set_xticks(range(k), [str(n) for n in names], rotation=45, ha="right")
        ax.set_yticks(range(k), [str(n) for n in names])
        ax.set_title(
            f"Partial r of OOD pairs, ID removed by\n{METHOD_TITLES[methods[0]]}\n{model} / run {run}"
            f"\n* Holm-adjusted p < {HOLM_ALPHA:g}",
            fontsize=10,
        )
        bar = fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
        bar.set_label(f"partial r ({methods[0]})")
        return save_figure(fig, out_png, out_svg)
    finally:
        plt.close(fig)


# --------------------------------------------------------------------------- curves


def curve_plot(
    scores: pd.DataFrame, out_png: str | os.PathLike, out_svg: str | os.PathLike, chance: float | None = CHANCE
) -> tuple[Path, Path]:
    """Draw the ``accuracy`` column (the score named by ``scores.attrs["score"]``, raw accuracy
    when unnamed) over steps per test set, one panel per run (sorted by model, run; up to
    three panels a row), to ``out_png`` and ``out_svg``. The ID test set's line is black,
    thicker and labelled ``(ID)``; each OOD test set keeps one colour in every panel; a
    dashed grey line marks ``chance`` (none when ``None``). One legend for the figure sits
    outside the panels, on the right, so it hides no point. Returns the two paths;
    :class:`AnalysisError` for a table without the scores columns or without rows.
    """
    require_columns(scores, REQUIRED_COLUMNS, "scores table", AnalysisError)
    if scores.empty:
        raise AnalysisError("scores table: no rows")
    runs = scores[["model", "run"]].drop_duplicates()
    runs = sorted(runs.itertuples(index=False), key=lambda t: (str(t.model), str(t.run)))
    testsets = sorted_mixed(scores.loc[scores["role"] != ID_ROLE, "testset"].unique().tolist())
    palette = matplotlib.colormaps["tab10"].colors
    colour_of = {t: palette[i % len(palette)] for i, t in enumerate(testsets)}
    ncols = min(3, len(runs))
    nrows = math.ceil(len(runs) / ncols)
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(4.6 * ncols + 1.6, 3.4 * nrows), squeeze=False, layout="constrained"
    )
    try:
        legend: dict[str, object] = {}
        for ax in axes.flat[len(runs) :]:
            ax.set_visible(False)
        for ax, (model, run) in zip(axes.flat, runs):
            rows = scores[(scores["model"] == model) & (scores["run"] == run)]
            for testset in sorted_mixed(rows["testset"].unique().tolist()):
                part = rows[rows["testset"] == testset].sort_values("step")
                is_id = (part["role"] == ID_ROLE).any()
                label = f"{testset} (ID)" if is_id else str(testset)
                (line,) = ax.plot(
                    part["step"].to_numpy(),
                    part["accuracy"].to_numpy(dtype=float),
                    marker="o",
                    markersize=3,
                    linewidth=2.8 if is_id else 1.2,
                    color="black" if is_id else colour_of[testset],
                    label=label,
                    zorder=3 if is_id else 2,
                )
                legend.setdefault(label, line)
            if chance is not None:
                line = ax.axhline(chance, color="0.45", linestyle="--", linewidth=1.0, zorder=1, label="chance")
                legend.setdefault(f"chance ({chance:g})", line)
            ax.set_title(f"{model} / run {run}", fontsize=10)
            ax.set_xlabel("step")
            ax.set_ylabel(SCORE_TITLES.get(scores.attrs.get("score", "accuracy"), "accuracy"))
            ax.set_ylim(-0.02, 1.02)
            ax.grid(alpha=0.3)
        ids = [k for k in legend if k.endswith(" (ID)")]
        chance_key = f"chance ({chance:g})" if chance is not None else None
        order = ids + [k for k in legend if k not in ids and k != chance_key]
        order += [chance_key] if chance_key in legend else []
        fig.legend(
            [legend[k] for k in order], order, loc="outside right upper", fontsize=8, frameon=False, title="test set"
        )
        return save_figure(fig, out_png, out_svg)
    finally:
        plt.close(fig)
