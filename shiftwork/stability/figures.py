"""The stability report's figures beyond the heatmap: radar plots of the SGS, the meaning gate's
prompt preservation, and instability against variant strength.

Each figure has a data function returning the DataFrame it draws (tested on its own) and a
plotting function that saves it as PNG and SVG (:func:`shiftwork.reports.figures.save_figure`,
atomic) and closes it. A missing value (NaN: an axis a model cannot observe, as closed API
models cannot observe Act or Prob) is never drawn as 0: radar polygons skip its spoke, strength
curves leave it out.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from shiftwork.checks import require_columns
from shiftwork.reports.figures import save_figure
from shiftwork.stability.gate import GATED_FAMILIES
from shiftwork.stability.stats import AXES, POOLED

FAMILY_ORDER: tuple[str, ...] = ("register", "noise", "structural")
POSITION_STYLE = {"global": "-", "prefix": "--", "suffix": ":"}
OVERVIEW = "all models"
"""The panel of the radar figure holding one polygon per model (their total SGS)."""
TOTAL = "total"
"""The polygon of a model's radar panel holding its total SGS (pooled over datasets)."""


def _family_key(family: str) -> tuple[int, str]:
    return (FAMILY_ORDER.index(family) if family in FAMILY_ORDER else len(FAMILY_ORDER), str(family))


# --------------------------------------------------------------------------- radar


def radar_data(total: pd.DataFrame, per_dataset: pd.DataFrame) -> pd.DataFrame:
    """What the radar figure draws: per panel and polygon, each axis's SGS and its spoke radius.

    Panels: :data:`OVERVIEW`, with one polygon per model (its total SGS), then one panel per
    model, with one polygon per dataset and one, :data:`TOTAL`, for its total. ``norm`` is the
    SGS divided by the largest SGS of that axis anywhere in the figure, so the outermost point
    of each spoke is 1 and spokes of different axes compare shapes, not scales. A missing SGS
    stays NaN in ``norm`` (the spoke is skipped, not drawn at 0); an axis whose values are all 0
    gets ``norm`` 0. ``total`` is :func:`shiftwork.stability.stats.total_sgs`, ``per_dataset``
    :func:`shiftwork.stability.stats.dataset_sgs`. Columns: panel, polygon, axis, sgs, norm.
    """
    require_columns(total, ["model", *AXES], "radar_data(total)")
    require_columns(per_dataset, ["model", "dataset", *AXES], "radar_data(per_dataset)")
    rows = []
    models = sorted(total["model"].astype(str).unique())
    by_model = total.assign(model=total["model"].astype(str)).set_index("model")
    for model in models:
        for axis in AXES:
            rows.append({"panel": OVERVIEW, "polygon": model, "axis": axis, "sgs": float(by_model.at[model, axis])})
    for model in models:
        part = per_dataset[per_dataset["model"].astype(str) == model].sort_values("dataset")
        for r in part.itertuples(index=False):
            for axis in AXES:
                rows.append({"panel": model, "polygon": str(r.dataset), "axis": axis, "sgs": float(getattr(r, axis))})
        for axis in AXES:
            rows.append({"panel": model, "polygon": TOTAL, "axis": axis, "sgs": float(by_model.at[model, axis])})
    out = pd.DataFrame(rows, columns=["panel", "polygon", "axis", "sgs"])
    scale = out.groupby("axis")["sgs"].max()  # NaN-skipping; NaN when the axis is all missing
    top = out["axis"].map(scale)
    out["norm"] = np.where(top > 0, out["sgs"] / top.where(top > 0), np.where(out["sgs"].notna(), 0.0, np.nan))
    return out


def radar_polygon(values: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """The closed outline (angles, radii) through the spokes with a value; NaN spokes skipped.

    Spoke ``i`` of ``n`` sits at angle ``2 pi i / n``. The outline joins the spokes that have a
    value in order and returns to the first; with no value at all, both arrays are empty.
    """
    v = np.asarray(values, dtype=float)
    angles = np.linspace(0.0, 2 * np.pi, len(v), endpoint=False)
    keep = np.isfinite(v)
    if not keep.any():
        return np.array([]), np.array([])
    a, r = angles[keep], v[keep]
    return np.append(a, a[0]), np.append(r, r[0])


def radar_plot(
    total: pd.DataFrame, per_dataset: pd.DataFrame, out_png: str | os.PathLike, out_svg: str | os.PathLike
) -> None:
    """Radar plots of the SGS, one spoke per axis (:func:`radar_data`): first all models (one
    polygon per model), then a panel per model (one polygon per dataset, its total in black).
    A spoke a model lacks is skipped by its polygon and labelled ``n/a`` in its panel."""
    data = radar_data(total, per_dataset)
    if data.empty:
        raise ValueError("radar_plot: no models to draw")
    panels = [OVERVIEW, *[p for p in pd.unique(data["panel"]) if p != OVERVIEW]]
    scale = data.groupby("axis")["sgs"].max()
    n_cols = min(len(panels), 4)
    n_rows = -(-len(panels) // n_cols)
    fig, axs = plt.subplots(n_rows, n_cols, figsize=(4.2 * n_cols, 4.4 * n_rows), subplot_kw={"projection": "polar"})
    axs = np.atleast_1d(axs).ravel()
    colours = plt.get_cmap("tab10")
    angles = np.linspace(0.0, 2 * np.pi, len(AXES), endpoint=False)
    try:
        for ax, panel in zip(axs, panels):
            part = data[data["panel"] == panel]
            polygons = list(pd.unique(part["polygon"]))
            for k, polygon in enumerate(polygons):
                values = part[part["polygon"] == polygon].set_index("axis").loc[list(AXES), "norm"]
                a, r = radar_polygon(values.to_numpy())
                if not len(a):
                    continue
                is_total = polygon == TOTAL
                colour = "black" if is_total else colours(k % 10)
                ax.plot(
                    a, r, color=colour, linewidth=2.2 if is_total else 1.3, label=str(polygon), marker="o", markersize=3
                )
                ax.fill(a, r, color=colour, alpha=0.04 if is_total else 0.08)
            missing = part.groupby("axis")["sgs"].apply(lambda s: s.isna().all())
            labels = []
            for axis in AXES:
                top = scale.get(axis, np.nan)
                label = f"{axis}\n(max {top:.3g})" if np.isfinite(top) else f"{axis}\n(n/a)"
                if panel != OVERVIEW and bool(missing.get(axis, True)) and np.isfinite(top):
                    label = f"{axis}\n(n/a)"
                labels.append(label)
            ax.set_xticks(angles, labels=labels, fontsize=8)
            ax.set_theta_offset(np.pi / 2)
            ax.set_theta_direction(-1)
            ax.set_ylim(0, 1.05)
            ax.set_yticks([0.25, 0.5, 0.75, 1.0], labels=[], fontsize=6)
            ax.set_title(
                "All models (total SGS)" if panel == OVERVIEW else f"{panel}: per dataset", fontsize=10, pad=14
            )
            ax.legend(fontsize=6, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2)
        for ax in axs[len(panels) :]:
            ax.set_visible(False)
        fig.suptitle(
            "SGS per axis, each spoke scaled to its largest value in the figure (n/a: not observed)", fontsize=11
        )
        fig.tight_layout()
        save_figure(fig, out_png, out_svg)
    finally:
        plt.close(fig)


# --------------------------------------------------------------------------- preservation


def preservation_data(scores: pd.DataFrame) -> pd.DataFrame:
    """The meaning gate's per-variant scores, as the preservation figure draws them.

    ``scores`` is the gate's ``{dataset}.scores.parquet`` of every dataset (one row per variant:
    family, kind, position, strength, f1, gate_score, kept, threshold, scale). Adds ``status``
    (``"kept"`` when the variant's prompt passed the gate, else ``"dropped"``), ``under``
    (gate_score < threshold) and ``gated`` (its family can drop a prompt; surface noise cannot).
    Baseline rows are left out. Sorted by family (register, noise, structural), kind, strength.
    ValueError when the datasets disagree on the threshold or its scale.
    """
    need = ["family", "kind", "position", "strength", "f1", "gate_score", "kept", "threshold", "scale"]
    require_columns(scores, need, "preservation_data(scores)")
    out = scores[scores["family"] != "baseline"].copy()
    if out["threshold"].nunique() > 1 or out["scale"].nunique() > 1:
        raise ValueError(
            "preservation_data: the gate tables disagree on threshold/scale: "
            f"{sorted(map(tuple, out[['threshold', 'scale']].drop_duplicates().to_numpy().tolist()))}"
        )
    out["status"] = np.where(out["kept"].astype(bool), "kept", "dropped")
    out["under"] = out["gate_score"].astype(float) < out["threshold"].astype(float)
    out["gated"] = out["family"].isin(GATED_FAMILIES)
    out["_f"] = out["family"].map(lambda f: _family_key(f)[0])
    out = out.sort_values(["_f", "family", "kind", "strength", "position"], kind="stable").drop(columns="_f")
    return out.reset_index(drop=True)


def preservation_plot(scores: pd.DataFrame, out_png: str | os.PathLike, out_svg: str | os.PathLike) -> None:
    """Variant-vs-original BERTScore of every variant, one panel per family x kind.

    x: the variant's strength (one slot per strength); y: its gate score (on the threshold's
    scale), one point per variant, blue circles for variants of kept prompts and red crosses
    for those of dropped prompts; a line per position through the mean per strength; the
    gate's threshold dashed. Surface noise is exempt from the gate and says so. ``scores`` as in
    :func:`preservation_data`."""
    data = preservation_data(scores)
    if data.empty:
        raise ValueError("preservation_plot: no variants to draw")
    threshold, scale = float(data["threshold"].iloc[0]), str(data["scale"].iloc[0])
    panels = list(dict.fromkeys(zip(data["family"], data["kind"])))
    n_cols = min(len(panels), 4)
    n_rows = -(-len(panels) // n_cols)
    fig, axs = plt.subplots(n_rows, n_cols, figsize=(3.6 * n_cols, 3.2 * n_rows), squeeze=False, sharey=True)
    axs = axs.ravel()
    rng = np.random.default_rng(0)
    try:
        for ax, (family, kind) in zip(axs, panels):
            part = data[(data["family"] == family) & (data["kind"] == kind)]
            strengths = sorted(part["strength"].unique())
            slot = {s: i for i, s in enumerate(strengths)}
            x = part["strength"].map(slot).to_numpy(dtype=float) + rng.uniform(-0.15, 0.15, len(part))
            for status, marker, colour in (("kept", "o", "tab:blue"), ("dropped", "x", "tab:red")):
                sel = (part["status"] == status).to_numpy()
                if sel.any():
                    ax.scatter(
                        x[sel],
                        part["gate_score"].to_numpy()[sel],
                        s=12,
                        marker=marker,
                        color=colour,
                        alpha=0.6,
                        label=f"{status} prompt",
                    )
            for position, g in part.groupby("position"):
                means = g.groupby("strength")["gate_score"].mean()
                ax.plot(
                    [slot[s] for s in means.index],
                    means.to_numpy(),
                    color="black",
                    linewidth=1,
                    linestyle=POSITION_STYLE.get(position, "-."),
                    label=f"mean, {position}",
                )
            ax.axhline(threshold, color="grey", linestyle="--", linewidth=1, label=f"threshold {threshold:g}")
            ax.set_xticks(range(len(strengths)), labels=[f"{s:g}" for s in strengths], fontsize=8)
            ax.set_xlim(-0.5, len(strengths) - 0.5)
            gated = "" if family in GATED_FAMILIES else " (exempt)"
            ax.set_title(f"{family}: {kind}{gated}", fontsize=9)
            ax.set_xlabel("strength", fontsize=8)
        for ax in axs[::n_cols]:
            ax.set_ylabel(f"BERTScore F1 ({scale})", fontsize=8)
        for ax in axs[len(panels) :]:
            ax.set_visible(False)
        axs[0].legend(fontsize=6)
        n_dropped = data.loc[data["status"] == "dropped", "prompt_id"].nunique() if "prompt_id" in data else 0
        fig.suptitle(f"Prompt preservation: variant vs original ({n_dropped} prompt(s) dropped)", fontsize=10)
        fig.tight_layout()
        save_figure(fig, out_png, out_svg)
    finally:
        plt.close(fig)


# --------------------------------------------------------------------------- strength curves


def strength_plot_data(curves: pd.DataFrame, axes: Sequence[str] | None = None) -> pd.DataFrame:
    """The points of the strength curves figure: the rows of
    :func:`shiftwork.stability.stats.strength_curves` with a mean, for the axes ``axes``
    (default: ``pooled``, then every axis with any value), with ``panel`` = ``"family: kind"``.
    Rows with no mean (an axis the model cannot observe) are dropped, not set to 0. Sorted by
    family (register, noise, structural), kind, axis (in the order given), model, position and
    strength."""
    need = ["model", "family", "kind", "position", "strength", "axis", "mean", "sem", "n_prompts"]
    require_columns(curves, need, "strength_plot_data(curves)")
    present = curves[np.isfinite(pd.to_numeric(curves["mean"], errors="coerce").astype(float))]
    if axes is None:
        axes = [a for a in (POOLED, *AXES) if (present["axis"] == a).any()]
    axes = list(axes)
    out = present[present["axis"].isin(axes)].copy()
    out["panel"] = out["family"].astype(str) + ": " + out["kind"].astype(str)
    out["_f"] = out["family"].map(lambda f: _family_key(f)[0])
    out["_a"] = out["axis"].map({a: i for i, a in enumerate(axes)})
    keys = ["_f", "family", "kind", "_a", "model", "position", "strength"]
    out = out.sort_values(keys, kind="stable").drop(columns=["_f", "_a"])
    return out.reset_index(drop=True)


def strength_plot(curves: pd.DataFrame, out_png: str | os.PathLike, out_svg: str | os.PathLike) -> None:
    """Normalised instability against strength: a row of panels per family x kind, a column per
    axis (``pooled`` first, then each axis with values; :func:`strength_plot_data`). A line per
    model (colour) and position (line style) through the mean per-prompt RMS at each strength,
    error bars one standard error of that mean over prompts."""
    data = strength_plot_data(curves)
    if data.empty:
        raise ValueError("strength_plot: no strength curves to draw")
    rows = list(dict.fromkeys(data["panel"]))
    cols = list(dict.fromkeys(data["axis"]))
    models = sorted(data["model"].astype(str).unique())
    colours = plt.get_cmap("tab10")
    fig, axs = plt.subplots(len(rows), len(cols), figsize=(3.0 * len(cols), 2.5 * len(rows)), squeeze=False)
    try:
        for i, panel in enumerate(rows):
            for j, axis in enumerate(cols):
                ax = axs[i, j]
                part = data[(data["panel"] == panel) & (data["axis"] == axis)]
                for (model, position), g in part.groupby(["model", "position"], sort=True, dropna=False):
                    k = models.index(str(model))
                    label = f"{model}, {position}" if i == 0 and j == 0 else None
                    ax.errorbar(
                        g["strength"],
                        g["mean"],
                        yerr=g["sem"].fillna(0.0),
                        color=colours(k % 10),
                        linestyle=POSITION_STYLE.get(position, "-."),
                        marker="o",
                        markersize=3,
                        capsize=2,
                        linewidth=1.1,
                        label=label,
                    )
                if part.empty:
                    ax.text(0.5, 0.5, "n/a", ha="center", va="center", transform=ax.transAxes, color="grey")
                if i == 0:
                    ax.set_title(axis if axis != POOLED else "pooled (mean over axes)", fontsize=9)
                if j == 0:
                    ax.set_ylabel(f"{panel}\nRMS instability", fontsize=8)
                if i == len(rows) - 1:
                    ax.set_xlabel("strength", fontsize=8)
                ax.tick_params(labelsize=7)
        fig.legend(fontsize=7, loc="upper right", title="model, position", title_fontsize=7)
        fig.suptitle("Normalised instability vs strength (mean over prompts, error bars 1 s.e.)", fontsize=10)
        fig.tight_layout(rect=(0, 0, 0.88, 0.97))
        save_figure(fig, out_png, out_svg)
    finally:
        plt.close(fig)
