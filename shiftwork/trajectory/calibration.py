"""Calibration of the pair analysis on null runs shaped like each real run.

A Holm-significant pair is a finding only if the analysis would not report one where the test
sets share nothing beyond the ID trajectory and the label lean. :func:`calibrate` fits a
:class:`~shiftwork.trajectory.null.NullModel` to every run (its ID trajectory, lean drift,
autocorrelation, set levels and item counts) and runs the run's own pair analysis (the same
score, control, dependence correction, alpha and Holm family; no item bootstrap, which does not
enter the sign) on

* ``replicates`` null runs: the *family-wise false-positive rate* is the share of them with at
  least one Holm-significant pair; the analysis is *calibrated* for the run when it is at most
  ``alpha``;
* ``replicates`` runs for each planted coupling size (:class:`~shiftwork.trajectory.null.Coupling`
  ``sd``, a shared log-odds component of that standard deviation): the *power* is the share in
  which the planted pair comes out Holm-significant and positive. Replicate ``k`` plants on pair
  ``k mod pairs``, so every pair is planted in turn at no extra cost.

Rates carry exact (Clopper-Pearson) 95% intervals.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Hashable

import numpy as np
import pandas as pd
from scipy import stats as sps

from shiftwork.seeding import rng_for
from shiftwork.trajectory.analysis import PairOptions, pair_table, sorted_mixed
from shiftwork.trajectory.null import Coupling, NullModel, fit_null, scores_frame, simulate_runs
from shiftwork.trajectory.sections import CalibrationSettings

__all__ = ["CALIBRATION_COLUMNS", "calibrate", "exact_interval", "false_positive_rate", "power", "run_id_set"]

CALIBRATION_COLUMNS: tuple[str, ...] = (
    "model",
    "run",
    "kind",
    "planted_sd",
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
    "phi",
    "lean_sd",
)
"""Columns of :func:`calibrate`: per run, a ``kind`` ``"null"`` row (``rate``: the family-wise
false-positive rate, ``planted_sd`` 0) and a ``"planted"`` row per coupling size (``rate``: the
power); ``hits`` of ``replicates`` runs, the 95% interval, the analysis's ``alpha``, whether the
run's null rate is at most ``alpha`` (``calibrated``, the same on every row of the run), the
analysis settings and two features of the fitted null: ``phi`` (the own components' AR(1)
coefficient) and ``lean_sd`` (the standard deviation of the lean over the checkpoints, log odds)."""


def _significant(pairs: pd.DataFrame) -> pd.Series:
    """Per run of ``pairs``: does it hold a Holm-significant pair?"""
    return pairs.groupby("run", sort=False)["sign"].apply(lambda s: bool((s != "null").any()))


def exact_interval(hits: int, n: int) -> tuple[float, float]:
    """The exact (Clopper-Pearson) 95% interval of a rate of ``hits`` in ``n``."""
    ci = sps.binomtest(hits, n).proportion_ci(confidence_level=0.95, method="exact")
    return float(ci.low), float(ci.high)


def _options(options: PairOptions) -> PairOptions:
    return dataclasses.replace(options, resamples=0)


def _analysed(sims: np.ndarray, model: NullModel, keep: np.ndarray | None, name: Hashable) -> pd.DataFrame:
    """The simulated runs as a scores table, at the checkpoints ``keep`` (a mask; None: all)."""
    if keep is None:
        return scores_frame(sims, model.sets, model.steps, name)
    return scores_frame(sims[:, keep], model.sets, np.asarray(model.steps)[keep], name)


def false_positive_rate(
    model: NullModel,
    options: PairOptions,
    rng: np.random.Generator,
    replicates: int,
    name: Hashable = "null",
    keep: np.ndarray | None = None,
) -> int:
    """How many of ``replicates`` null runs of ``model`` hold at least one Holm-significant pair
    under ``options``, analysed at the checkpoints ``keep`` (a mask; None: all)."""
    sims = simulate_runs(model, rng, replicates, options.score)
    pairs = pair_table(_analysed(sims, model, keep, name), _options(options))
    return int(_significant(pairs).sum())


def power(
    model: NullModel,
    options: PairOptions,
    rng: np.random.Generator,
    replicates: int,
    sd: float,
    name: Hashable = "null",
    keep: np.ndarray | None = None,
) -> int:
    """How many of ``replicates`` runs of ``model`` with a coupling of size ``sd`` planted on one
    pair (pair ``k mod pairs`` in replicate ``k``) report that pair Holm-significant and positive,
    analysed at the checkpoints ``keep``."""
    oods = sorted_mixed(list(model.sets[1:]))
    pairs = list(itertools.combinations(oods, 2))
    hits = 0
    for j, (a, b) in enumerate(pairs):
        count = len(range(j, replicates, len(pairs)))
        if count == 0:
            continue
        sims = simulate_runs(model, rng, count, options.score, Coupling(a, b, sd))
        table = pair_table(_analysed(sims, model, keep, name), _options(options))
        planted = table[(table["ood_a"] == a) & (table["ood_b"] == b)]
        hits += int((planted["sign"] == "positive").sum())
    return hits


def run_id_set(scores: pd.DataFrame, run: Hashable) -> str:
    """The one ID set of ``run`` in ``scores``; raises ValueError naming the run otherwise."""
    ids = scores.loc[(scores["run"] == run) & (scores["role"] == "id"), "testset"].unique()
    if len(ids) != 1:
        raise ValueError(f"calibrate: run {run!r} has {len(ids)} ID sets; it needs exactly one")
    return ids[0]


def calibrate(
    scores: pd.DataFrame, items: pd.DataFrame, options: PairOptions, settings: CalibrationSettings
) -> pd.DataFrame:
    """The calibration table (:data:`CALIBRATION_COLUMNS`) of every run of ``scores``, whose
    ``items`` the null is fitted to (at every checkpoint); ``options`` the pair analysis's (module
    notes). The null runs are analysed at the checkpoints ``scores`` holds, which leaves out those
    the analysis leaves out (:func:`~shiftwork.trajectory.scores.analysis_scores`)."""
    if settings.replicates < 1:  # the schema says so too; a direct caller may not
        raise ValueError(f"calibrate: replicates must be at least 1, got {settings.replicates!r}")
    rows = []
    runs = scores[["model", "run"]].drop_duplicates().sort_values(["model", "run"], key=lambda c: c.astype(str))
    for model_name, run in runs.itertuples(index=False):
        model = fit_null(items, run, run_id_set(scores, run))
        base = {
            "model": model_name,
            "run": run,
            "replicates": settings.replicates,
            "alpha": float(options.alpha),
            "score": options.score,
            "method": options.method,
            "dependence": options.dependence,
            "phi": model.phi,
            "lean_sd": float(np.std(model.lean)),
        }
        keep = np.isin(model.steps, scores.loc[scores["run"] == run, "step"].unique())
        rng = rng_for("trajectory-calibration", settings.seed, run)
        found = [("null", 0.0, false_positive_rate(model, options, rng, settings.replicates, model_name, keep))]
        for sd in settings.planted_sd:
            hits = power(model, options, rng, settings.replicates, sd, model_name, keep)
            found.append(("planted", float(sd), hits))
        calibrated = found[0][2] / settings.replicates <= float(options.alpha)
        for kind, sd, hits in found:
            low, high = exact_interval(hits, settings.replicates)
            rate = hits / settings.replicates
            rows.append(
                {**base, "kind": kind, "planted_sd": sd, "hits": hits, "rate": rate, "ci_low": low, "ci_high": high}
                | {"calibrated": calibrated}
            )
    return pd.DataFrame(rows, columns=list(CALIBRATION_COLUMNS))
