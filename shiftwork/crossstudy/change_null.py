"""Calibration of question 1's tests (does a checkpoint's stability differ from step 0's?) on null
runs shaped like the measured one.

:func:`shiftwork.crossstudy.stats.changes` compares each later checkpoint with step 0 by a paired
t-test over the run's prompts and Holm-adjusts across the steps of one axis. Per-prompt
instability is far from normal (many prompts sit at 0 on some axes, a few are large), and the
tests share step 0, so whether the family's false-positive rate is at most alpha is a question
for data, not for the t-test's assumptions. A null run here keeps the measured table (the same
prompts, steps and per-prompt levels) and shuffles each prompt's values across the run's steps,
step 0 included, with its own permutation: no step then differs from another except by chance,
and a prompt's level (the strongest dependence in the table) stays with it. The same tests and
the same Holm family then run on each null run; the *family-wise false-positive rate* of an
axis is the share of null runs with at least one step significant. Only prompts measured at
every step take part (each null run permutes a complete row)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
from scipy import stats as sps

from shiftwork.checks import require_columns
from shiftwork.crossstudy.replies import CROSS_AXES
from shiftwork.crossstudy.stats import POOLED
from shiftwork.seeding import rng_for
from shiftwork.trajectory.calibration import exact_interval

CHANGE_NULL_COLUMNS = [
    "study",
    "run",
    "dataset",
    "axis",
    "n_prompts",
    "n_steps",
    "replicates",
    "false_positives",
    "false_positive_rate",
    "ci_low",
    "ci_high",
    "calibrated",
]


def any_significant(values: np.ndarray, alpha: float) -> np.ndarray:
    """For each run in ``values`` (runs x prompts x steps, step 0 first): whether any later step
    differs from step 0 by the paired t-test over prompts after Holm across the steps. A step
    whose differences are all equal has no p-value and does not count, as in
    :func:`shiftwork.crossstudy.stats.changes`. Holm finds something exactly when the smallest
    p-value times the number of p-values is below ``alpha``."""
    diff = values[:, :, 1:] - values[:, :, :1]
    n = diff.shape[1]
    mean = diff.mean(axis=1)
    sd = diff.std(axis=1, ddof=1)
    flat = np.isclose(diff, diff[:, :1, :], rtol=1e-5, atol=1e-8).all(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = mean / (sd / np.sqrt(n))
    p = np.where(flat, np.nan, 2 * sps.t.sf(np.abs(t), n - 1))
    m = np.isfinite(p).sum(axis=1)
    smallest = np.where(m > 0, np.nanmin(np.where(np.isfinite(p), p, np.inf), axis=1), np.inf)
    return smallest * np.maximum(m, 1) < alpha


def change_calibration(
    per_prompt: pd.DataFrame, alpha: float, replicates: int, seed: int, dataset: str = POOLED
) -> pd.DataFrame:
    """Per (study, run, axis) of ``per_prompt`` (a cross-study per-prompt table) on ``dataset``
    (the run's prompts pooled over its sets by default, as question 1 reports): the family-wise
    false-positive rate of the step-0 comparisons over ``replicates`` null runs (see the module
    docstring), its exact 95% interval, and ``calibrated`` (the rate at most ``alpha``). An axis
    with no prompt measured at every step, or a run without a step 0, is left out."""
    require_columns(per_prompt, ["study", "run", "step", "dataset", "prompt_id"], "per-prompt table")
    table = per_prompt if dataset == POOLED else per_prompt[per_prompt["dataset"] == dataset]
    rows = []
    for (study, run), group in table.groupby(["study", "run"], sort=True):
        for axis in [a for a in CROSS_AXES if a in group.columns]:
            wide = group.pivot_table(index=["dataset", "prompt_id"], columns="step", values=axis, aggfunc="first")
            wide = wide.dropna()
            if 0 not in wide.columns or len(wide) < 2 or wide.shape[1] < 2:
                continue
            wide = wide[[0, *[s for s in wide.columns if s != 0]]]
            # the pooled set's stream is the one it always had; a single set's gets its own
            parts = (run, axis) if dataset == POOLED else (run, axis, dataset)
            rng = rng_for("crossstudy-change-null", seed, *parts)
            stacked = np.broadcast_to(wide.to_numpy(float), (replicates, *wide.shape))
            hits = int(any_significant(rng.permuted(stacked, axis=2), alpha).sum())
            low, high = exact_interval(hits, replicates)
            rows.append(
                (
                    study,
                    run,
                    dataset,
                    axis,
                    len(wide),
                    wide.shape[1] - 1,
                    replicates,
                    hits,
                    hits / replicates,
                    low,
                    high,
                )
            )
    out = pd.DataFrame(rows, columns=CHANGE_NULL_COLUMNS[:-1])
    out["calibrated"] = out["false_positive_rate"] <= alpha
    return out[CHANGE_NULL_COLUMNS]


def rates_by_axis(calibration: pd.DataFrame | None, run: str, dataset: str = POOLED) -> Mapping[str, str]:
    """Each axis's null false-positive rate of ``run`` on ``dataset`` (its prompts pooled by
    default) as the findings show it ("0.030 (6/200)")."""
    if calibration is None or calibration.empty:
        return {}
    part = calibration[(calibration["run"] == run) & (calibration["dataset"] == dataset)]
    return {
        r.axis: f"{r.false_positive_rate:.3f} ({int(r.false_positives)}/{int(r.replicates)})"
        for r in part.itertuples(index=False)
    }
