"""Calibration of the stability-vs-OOD pairs: the same analysis on null runs in which the OOD sets
share nothing with the stability axes.

:func:`~shiftwork.crossstudy.analysis.stability_pairs` correlates each stability axis with each OOD
set over a trajectory run's scored checkpoints, controlling for ID accuracy. An axis that follows
the checkpoint's label lean (a checkpoint that answers one label everywhere is also stable under
rewording) could meet an OOD score that the lean reaches too, and the pair would look like a
finding. :func:`calibrate_stability_pairs` keeps every axis series as the run measured it and
replaces the OOD sets by draws from the trajectory study's null fitted to the run
(:mod:`shiftwork.trajectory.null`: ID trajectory, lean, autocorrelation, set levels and item
counts, no coupling), at the checkpoints the cross-study scored, then runs the same pair analysis
(same score, control, dependence correction; no item bootstrap) and the same Holm family (the
run's axes x OOD sets). The *family-wise false-positive rate* is the share of null runs with at
least one Holm-significant (axis, OOD) pair; the analysis is calibrated for the run when it is at
most alpha. There is no planted coupling: the null model has no stability axis to couple.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from statsmodels.stats.multitest import multipletests

from shiftwork.seeding import rng_for
from shiftwork.trajectory.analysis import PairOptions, pair_table
from shiftwork.trajectory.calibration import exact_interval, run_id_set
from shiftwork.trajectory.null import fit_null, scores_frame, simulate_runs
from shiftwork.trajectory.scores import analysis_scores
from shiftwork.trajectory.sections import AnalysisSettings, CalibrationSettings

__all__ = ["STABILITY_CALIBRATION_COLUMNS", "calibrate_stability_pairs"]

STABILITY_CALIBRATION_COLUMNS: tuple[str, ...] = (
    "model",
    "run",
    "n_steps",
    "axes",
    "replicates",
    "hits",
    "rate",
    "ci_low",
    "ci_high",
    "alpha",
    "calibrated",
    "score",
    "method",
    "dependence",
)
"""Columns of :func:`calibrate_stability_pairs`: per trajectory run, the checkpoints and axes of
its pairs, ``hits`` of ``replicates`` null runs with a Holm-significant pair, the rate and its
exact 95% interval, the analysis's ``alpha``, whether the rate is at most alpha, and the analysis
settings."""


def _holm_hits(pairs: pd.DataFrame, axes: Sequence[str], alpha: float) -> int:
    """How many null runs of ``pairs`` hold a Holm-significant (axis, OOD) pair, Holm over each
    run's (axis, OOD) pairs."""
    a_axis, b_axis = pairs["ood_a"].isin(axes), pairs["ood_b"].isin(axes)
    kept = pairs[a_axis != b_axis]
    hits = 0
    for _, part in kept.groupby("run", sort=False):
        p = part["p_gam" if (part["method"] == "gam").all() else "p_partial"].to_numpy(dtype=float)
        finite = np.isfinite(p)
        if finite.any() and multipletests(p[finite], alpha=alpha, method="holm")[0].any():
            hits += 1
    return hits


def calibrate_stability_pairs(
    axis_scores: Mapping[str, pd.DataFrame],
    scores: pd.DataFrame,
    items: pd.DataFrame,
    analysis: Mapping[str, Any],
) -> pd.DataFrame:
    """The calibration table (:data:`STABILITY_CALIBRATION_COLUMNS`) of the stability pairs of every
    run in ``axis_scores`` (run -> its axis columns as the pair analysis reads them: ``step``,
    ``testset``, ``accuracy``, ``role``), with the trajectory study's ``scores`` and ``items`` and
    config ``trajectory.analysis`` (its ``calibration`` gives replicates and seed)."""
    settings = AnalysisSettings.from_config(analysis)
    calibration = CalibrationSettings.from_config(analysis["calibration"])
    options = dataclasses.replace(PairOptions.of(settings), resamples=0)
    table = analysis_scores(scores, settings.score)
    rows = []
    for run, axes in sorted(axis_scores.items()):
        steps = sorted(axes["step"].unique())
        model_name = table.loc[table["run"] == run, "model"].iloc[0]
        null = fit_null(items, run, run_id_set(table, run))
        keep = np.isin(null.steps, steps)
        rng = rng_for("crossstudy-calibration", calibration.seed, run)
        sims = simulate_runs(null, rng, calibration.replicates, settings.score)
        frame = scores_frame(sims[:, keep], null.sets, np.asarray(null.steps)[keep], model_name)
        names = frame["run"].unique()
        columns = ["step", "testset", "accuracy", "role"]
        axes_rows = pd.concat([axes[columns].assign(model=model_name, run=name) for name in names], ignore_index=True)
        pairs = pair_table(pd.concat([frame, axes_rows], ignore_index=True), options)
        hits = _holm_hits(pairs, list(axes["testset"].unique()), settings.alpha)
        low, high = exact_interval(hits, calibration.replicates)
        rate = hits / calibration.replicates
        rows.append(
            {
                "model": model_name,
                "run": run,
                "n_steps": int(keep.sum()),
                "axes": int(axes["testset"].nunique()),
                "replicates": calibration.replicates,
                "hits": hits,
                "rate": rate,
                "ci_low": low,
                "ci_high": high,
                "alpha": settings.alpha,
                "calibrated": rate <= settings.alpha,
                "score": settings.score,
                "method": settings.method,
                "dependence": settings.dependence,
            }
        )
    return pd.DataFrame(rows, columns=list(STABILITY_CALIBRATION_COLUMNS))
