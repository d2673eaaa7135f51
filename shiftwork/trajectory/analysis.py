"""Trajectory analysis: do OOD results agree once the shared effect of ID progress is removed?

The ``trajectory`` study follows a model through fine-tuning. Every checkpoint (``step``) of a
run is scored on one in-domain (ID) test set and several out-of-distribution (OOD) test sets.
Raw OOD accuracies tend to rise and fall together simply because the model is getting better
(or worse) in-domain; the question here is whether two OOD sets still move together *after*
that shared ID effect is removed. The answer is a partial correlation over the checkpoints of
one run, for every unordered pair of OOD sets.

Input
-----
A ``scores`` table with one row per (run, step, testset) and the columns

``model``
    the model the run fine-tunes; one model can have several runs (seeds);
``run``
    a run id, unique across models;
``step``
    the checkpoint, an integer;
``testset``
    the test set name;
``accuracy``
    a float in [0, 1]: the score the analysis reads (raw accuracy, or the balanced accuracy
    that :func:`shiftwork.trajectory.scores.analysis_scores` puts in its place; option
    ``score`` says which, so that the item bootstrap resamples the same score);
``role``
    ``"id"`` or ``"ood"``; constant per (run, testset).

An ``items`` table (optional; the item bootstrap and the label bias need it) has one row per
(run, step, test set, test item): ``model``, ``run``, ``step``, ``set`` (the test set, as
``testset`` in ``scores``), ``example_id``, ``label``, ``pred`` (``"entailment"`` or
``"not_entailment"``) and ``correct`` (bool). Every checkpoint of a run is scored on the same
items, and ``scores``' accuracies are the means of ``correct`` (``score="accuracy"``) or the
means over the gold labels of the means of ``correct`` among each label's items
(``score="balanced_accuracy"``).

Pipeline
--------
1. :func:`wide` pivots one run into a steps x testsets table and checks it (at least
   :data:`MIN_CHECKPOINTS` checkpoints, exactly one ID set, at least two OOD sets, no
   missing cell).
2. :func:`residualise` removes the ID effect from a column: linearly (OLS on ``[1, id]``),
   with an unpenalised natural cubic regression spline of ``id`` (``"spline"``) or with a
   penalised regression-spline GAM of ``id`` whose penalty GCV chooses (``"gam"``, see
   :mod:`shiftwork.trajectory.gam`).
3. :func:`label_bias` gives, per checkpoint, the share of test predictions that are
   ``"entailment"`` (pooled over the run's test sets, and per set).
4. :func:`pair_table` gives, per run and pair of OOD sets, the raw Pearson correlation, the
   linear partial correlation (Pearson and Spearman, as :func:`pingouin.partial_corr` gives it), the
   spline control, the GAM control, the linear partial correlation controlling for the ID
   accuracy *and* the label bias, Holm and Benjamini-Hochberg adjusted p-values across the
   pairs of the run, the *primary* method's columns (``method``: ``"linear"`` or ``"gam"``),
   the item bootstrap of the primary correlation, the sign class of the pair and, when the
   primary correlation is undefined, the ``reason``.
5. :func:`summary` gives, per model, the share of positive, negative and null pairs.

Degenerate columns
------------------
A correlation is undefined when one of its two inputs has no variance left: a raw
correlation when an OOD column is constant, a partial correlation when an OOD column is
constant or an exact linear function of the ID column (or when the ID column itself is
constant), the Spearman partial correlation when the same holds for the ranks, the spline
and GAM controls when a residual vanishes (or the ID column is constant), and the label-bias
partial correlation when the same holds for ``[1, id, bias]`` (or the two covariates are
collinear). Such correlations, their p-values and confidence limits are NaN rather than an
error; a NaN p-value is left out of the multiple-comparison family of its run (as
:func:`pingouin.multicomp` does) and a pair whose primary p-value is NaN gets the sign
``"null"``. This holds for every path: the linear, Spearman, spline, GAM and label-bias
controls, the item bootstrap (a resample whose correlation is undefined is left out of the
summary, and a pair whose point estimate is undefined gets none) and every window of
:func:`shiftwork.trajectory.windows.window_table`, which runs :func:`pair_table` on part of
the checkpoints (a set that varies over the run can be constant, 0 or 1, within a window).

Every pair row says in ``reason`` why its primary correlation is undefined: ``""`` when
``r_primary`` and ``p_primary`` were computed, else every cause that holds, joined by ``"; "``
in this order (``<set>`` is the test set's name; see :func:`_primary_reason`):

``"id constant"``
    the ID accuracy does not change over the checkpoints, so no control can be fitted;
``"too few distinct ID values for the spline"``
    (``method="gam"``) the ID accuracy takes fewer than
    :data:`~shiftwork.trajectory.gam.MIN_SPLINE_POINTS` distinct values, so the GAM is the
    straight line, and an OOD residual vanished;
``"<set> constant"``
    the OOD set's accuracy does not change (e.g. 0 or 1 at every checkpoint);
``"<set> has no variance left after the ID control"``
    the OOD set varies but the primary control (the line in ``[1, id]``, or the GAM) fits it
    exactly;
``"no correlation of the residuals"``
    none of the above, yet the correlation of the residuals is undefined;
``"no residual degrees of freedom for the p-value"``
    ``r_primary`` is defined but ``p_primary`` is not (a GAM whose effective degrees of
    freedom leave ``n - 1 - edf <= 0``).

A constant or exactly ID-determined series is therefore a row with NaN correlations, the sign
``"null"`` and a named reason, never an exception. The other pairs of the run keep the values
they have without the degenerate OOD set: each pair's controls use its own two sets and the ID
set only, and the Holm and BH families count only defined p-values. (The item bootstrap draws
the sets' items in turn, so a set sorted before others shifts their draws; the pooled label
bias is over all of the run's test sets.)
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import warnings
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import patsy
import pingouin as pg
from scipy import stats as sps

from shiftwork.checks import require_columns
from shiftwork.seeding import rng_for
from shiftwork.trajectory import bootstrap as boot
from shiftwork.trajectory.dependence import DEPENDENCE, effective_n
from shiftwork.trajectory.gam import GAM_DF, MIN_SPLINE_POINTS, GamFit, gam_fit
from shiftwork.trajectory.scores import SCORES, score_of
from shiftwork.trajectory.sections import AnalysisSettings

__all__ = [
    "AnalysisError",
    "BIAS_COLUMNS",
    "ITEM_COLUMNS",
    "METHODS",
    "MIN_CHECKPOINTS",
    "PAIR_COLUMNS",
    "PairOptions",
    "REQUIRED_COLUMNS",
    "SIGNS",
    "SUMMARY_COLUMNS",
    "label_bias",
    "pair_table",
    "residualise",
    "summary",
    "wide",
]

REQUIRED_COLUMNS: tuple[str, ...] = ("model", "run", "step", "testset", "accuracy", "role")
"""Columns a ``scores`` table must have."""

ID_ROLE = "id"
OOD_ROLE = "ood"

MIN_CHECKPOINTS = 4
"""Fewest checkpoints a run needs: a partial correlation with one covariate has n - 3
degrees of freedom, so four checkpoints leave one."""

SIGNS: tuple[str, ...] = ("positive", "negative", "null")
"""Sign classes of a pair, in report order."""

METHODS: tuple[str, ...] = ("linear", "gam")
"""Primary methods of :func:`pair_table`: the linear partial correlation or the GAM control."""

ITEM_COLUMNS: tuple[str, ...] = ("model", "run", "step", "set", "example_id", "label", "pred", "correct")
"""Columns of an ``items`` table (per-example predictions of every checkpoint)."""

ENTAILMENT = "entailment"
LABELS: tuple[str, ...] = (ENTAILMENT, "not_entailment")
"""The two labels a prediction can take."""

BIAS_COLUMNS: tuple[str, ...] = ("model", "run", "step", "n", "entailment_share")
"""Leading columns of :func:`label_bias`; one ``entailment_share_<set>`` column per test set follows."""

PAIR_COLUMNS: tuple[str, ...] = (
    "model",
    "run",
    "ood_a",
    "ood_b",
    "n",
    "method",
    "r_raw",
    "p_raw",
    "r_partial",
    "p_partial",
    "n_eff_partial",
    "ci95_low",
    "ci95_high",
    "p_partial_holm",
    "p_partial_bh",
    "r_partial_spearman",
    "p_partial_spearman",
    "r_nonlinear",
    "p_nonlinear",
    "r_gam",
    "p_gam",
    "edf_gam",
    "n_eff_gam",
    "p_gam_holm",
    "p_gam_bh",
    "r_partial_bias",
    "p_partial_bias",
    "p_partial_bias_holm",
    "r_primary",
    "p_primary",
    "p_primary_holm",
    "p_primary_bh",
    "boot_sign_share",
    "boot_ci_low",
    "boot_ci_high",
    "n_boot",
    "sign",
    "reason",
)
"""Columns of :func:`pair_table`, in order: the run's ``model`` and ``run``, the pair ``ood_a``,
``ood_b``, then (``alpha``, ``df``, ``gam_df``, ``score``, ``resamples``, ``seed`` and ``together``
are the fields of :class:`PairOptions`)

``n``
    number of checkpoints;
``method``
    the primary method, ``"linear"`` or ``"gam"`` (option ``method``);
``r_raw``, ``p_raw``
    Pearson correlation of the two OOD columns (:func:`scipy.stats.pearsonr`);
``r_partial``, ``p_partial``, ``ci95_low``, ``ci95_high``
    ``pingouin.partial_corr(data=wide, x=ood_a, y=ood_b, covar=id, method="pearson")``:
    the correlation of the residuals of both OOD columns after OLS on ``[1, id]``, its
    p-value (``n - 3`` degrees of freedom; ``n_eff_partial - 3`` under option ``dependence:
    effective_n``, below) and parametric 95% CI (pingouin's Fisher-z interval over ``n``
    independent checkpoints, taken from :func:`pingouin.compute_esci` at full precision because
    ``partial_corr`` rounds its ``CI95`` column to 2 decimals for display);
``n_eff_partial``, ``n_eff_gam``
    the effective number of checkpoints behind the linear and the GAM control's correlation
    (:func:`shiftwork.trajectory.dependence.effective_n` of the two residual series; ``n`` under
    ``dependence: independent``), which their p-values count in place of ``n``;
``p_partial_holm``, ``p_partial_bh``
    ``p_partial`` adjusted across the pairs of the run with
    ``pingouin.multicomp(method="holm")`` and ``method="fdr_bh"`` (NaN p-values stay NaN
    and are not counted in the family; the same for every adjusted column below);
``r_partial_spearman``, ``p_partial_spearman``
    the same with ``method="spearman"`` (on ranks);
``r_nonlinear``, ``p_nonlinear``
    correlation of the residuals of both OOD columns after an unpenalised spline control
    (:func:`residualise` with ``kind="spline"``, ``df``); the p-value adjusts the degrees of
    freedom for the fit (``n - q - 1`` for a design of rank ``q``, see :func:`_nonlinear`).
    A fixed-size, untuned sensitivity check next to the GAM;
``r_gam``, ``p_gam``, ``edf_gam``, ``p_gam_holm``, ``p_gam_bh``
    correlation of the residuals of both OOD columns after the penalised GAM of the ID
    column (:func:`residualise` with ``kind="gam"``, ``gam_df`` basis functions, penalty
    by GCV), its p-value on ``n - 1 - edf_gam`` degrees of freedom (``n_eff_gam - 1 - edf_gam``
    under ``dependence: effective_n``), ``edf_gam`` the larger
    of the two fits' effective degrees of freedom (see :func:`_gam`), and Holm and BH;
``r_partial_bias``, ``p_partial_bias``, ``p_partial_bias_holm``
    ``pingouin.partial_corr(..., covar=[id, bias])``: the linear partial correlation
    controlling for the ID accuracy and the label bias (the checkpoint's share of
    ``"entailment"`` predictions, :func:`label_bias`), ``n - 4`` degrees of freedom, and
    Holm; NaN without ``items`` or ``bias`` (see :func:`_partial_bias`);
``r_primary``, ``p_primary``, ``p_primary_holm``, ``p_primary_bh``
    the columns of the primary method: ``r_partial``, ``p_partial``, ``p_partial_holm``,
    ``p_partial_bh`` for ``"linear"``; ``r_gam``, ``p_gam``, ``p_gam_holm``, ``p_gam_bh``
    for ``"gam"``;
``boot_sign_share``, ``boot_ci_low``, ``boot_ci_high``, ``n_boot``
    the item bootstrap of ``r_primary`` (:mod:`shiftwork.trajectory.bootstrap`):
    ``resamples`` resamples of the test items of every set, the same items at every
    checkpoint (the sets of a ``together`` group with one draw of their shared sources; under
    ``score="balanced_accuracy"`` each gold label's items drawn among that label's, and each
    resample scored by its balanced accuracy), generator ``rng_for("trajectory-bootstrap",
    seed, run)``; the share of the
    defined resamples whose correlation has the sign of ``r_primary``, their 2.5 and 97.5
    percentiles and their number. Under ``"gam"`` every resample refits the GAMs with the
    penalty weights of the point estimate. NaN (``n_boot`` 0) without ``items``, with
    ``resamples=0`` or when ``r_primary`` is NaN;
``sign``
    ``"positive"`` or ``"negative"`` (the sign of ``r_primary``) when ``p_primary_holm <
    alpha``, else ``"null"``;
``reason``
    ``""`` when ``r_primary`` and ``p_primary`` were computed, else why not (a string such as
    ``"id constant"``, ``"hans constant"`` or ``"hans has no variance left after the ID
    control"``; see the module notes, "Degenerate columns").
"""

SUMMARY_COLUMNS: tuple[str, ...] = ("model", "n_pairs", "share_positive", "share_negative", "share_null")
"""Columns of :func:`summary`, in order."""

# Residual sum of squares below this share of the total sum of squares counts as "no
# variance left" (the column is an exact function of the covariate up to rounding).
_DEGENERATE_SHARE = 1e-12


class AnalysisError(ValueError):
    """A ``scores`` or ``pairs`` table cannot be analysed; the message names the run/testset."""


# --------------------------------------------------------------------------- validation


def _label(value: Any) -> str:
    """``'value'`` for messages: quoted, without NumPy's ``np.int64(...)`` reprs."""
    return f"'{value}'"


def sorted_mixed(values: Sequence[Hashable]) -> list[Hashable]:
    """``values`` sorted naturally when comparable, else by their string form."""
    try:
        return sorted(values)
    except TypeError:
        return sorted(values, key=str)


def _run_rows(scores: pd.DataFrame, run: Hashable) -> pd.DataFrame:
    """The validated rows of ``run``: integer steps, float accuracies in [0, 1], one model,
    one role per testset, no duplicated (step, testset)."""
    require_columns(scores, REQUIRED_COLUMNS, "scores table", AnalysisError)
    rows = scores.loc[scores["run"] == run, list(REQUIRED_COLUMNS)].copy()
    if rows.empty:
        known = sorted_mixed(scores["run"].dropna().unique().tolist())
        raise AnalysisError(f"run {_label(run)} is not in the scores table; its runs are {known}")
    where = f"run {_label(run)}"

    models = rows["model"].dropna().unique().tolist()
    if len(models) != 1 or rows["model"].isna().any():
        raise AnalysisError(
            f"{where}: expected exactly one model, found {sorted_mixed(models)}"
            + (" and missing model values" if rows["model"].isna().any() else "")
        )
    if rows["testset"].isna().any():
        raise AnalysisError(f"{where}: some rows have no testset")

    steps = pd.to_numeric(rows["step"], errors="coerce")
    if steps.isna().any() or not np.all(np.isfinite(steps)) or not np.all(steps == np.round(steps)):
        bad = rows.loc[steps.isna() | (steps != np.round(steps)), "step"].tolist()
        raise AnalysisError(f"{where}: steps must be integers; got {bad[:5]}")
    rows["step"] = steps.astype(np.int64)

    acc = pd.to_numeric(rows["accuracy"], errors="coerce").astype(float)
    bad = acc.isna() | ~np.isfinite(acc) | (acc < 0.0) | (acc > 1.0)
    if bad.any():
        first = rows.loc[bad].iloc[0]
        raise AnalysisError(
            f"{where}: testset {_label(first['testset'])} has accuracy {first['accuracy']} at step "
            f"{int(rows.loc[bad, 'step'].iloc[0])}; accuracies must be numbers in [0, 1]"
        )
    rows["accuracy"] = acc

    roles = rows.groupby("testset", sort=True)["role"].unique()
    for testset, found in roles.items():
        found = list(found)
        if len(found) != 1:
            raise AnalysisError(f"{where}: testset {_label(testset)} has several roles {found}")
        if found[0] not in (ID_ROLE, OOD_ROLE):
            raise AnalysisError(
                f"{where}: testset {_label(testset)} has role {found[0]!r}; roles are '{ID_ROLE}' or '{OOD_ROLE}'"
            )

    dup = rows.duplicated(["step", "testset"], keep=False)
    if dup.any():
        first = rows.loc[dup].iloc[0]
        raise AnalysisError(
            f"{where}: testset {_label(first['testset'])} has more than one row at step {int(first['step'])}"
        )
    return rows


# --------------------------------------------------------------------------- wide table


def wide(scores: pd.DataFrame, run: Hashable) -> pd.DataFrame:
    """The steps x testsets accuracy table of one run.

    Rows are the run's checkpoints in increasing ``step`` (index named ``"step"``); columns
    are its testsets, the ID set first, then the OOD sets in sorted order. ``attrs`` holds
    ``model``, ``run``, ``id`` (the ID column) and ``ood`` (the OOD columns).

    Raises :class:`AnalysisError`, naming the run, when the run is unknown or its rows are
    invalid (not one model, non-integer steps, accuracies outside [0, 1], a testset with
    several or unknown roles, a duplicated (step, testset)), when it has fewer than
    :data:`MIN_CHECKPOINTS` checkpoints, when it does not have exactly one ID testset or has
    fewer than two OOD testsets, and when a testset is missing at some step (naming the
    testsets and steps).
    """
    rows = _run_rows(scores, run)
    where = f"run {_label(run)}"

    steps = sorted(rows["step"].unique().tolist())
    if len(steps) < MIN_CHECKPOINTS:
        raise AnalysisError(
            f"{where} has {len(steps)} checkpoint{'s' if len(steps) != 1 else ''}; "
            f"partial correlations need at least {MIN_CHECKPOINTS}"
        )

    role_of = rows.drop_duplicates("testset").set_index("testset")["role"]
    ids = sorted_mixed([t for t, r in role_of.items() if r == ID_ROLE])
    oods = sorted_mixed([t for t, r in role_of.items() if r == OOD_ROLE])
    if len(ids) != 1:
        found = "no ID testset" if not ids else f"{len(ids)} ID testsets {ids}"
        raise AnalysisError(f"{where} has {found}; exactly one testset must have role '{ID_ROLE}'")
    if len(oods) < 2:
        raise AnalysisError(
            f"{where} has {len(oods)} OOD testset{'s' if len(oods) != 1 else ''} {oods}; "
            "pairs need at least 2 with role 'ood'"
        )

    table = rows.pivot(index="step", columns="testset", values="accuracy")
    table = table.reindex(index=steps, columns=[ids[0], *oods])
    holes = table.isna()
    if holes.any().any():
        parts = [
            f"testset {_label(t)} at step(s) {[int(s) for s in table.index[holes[t]]]}"
            for t in table.columns
            if holes[t].any()
        ]
        raise AnalysisError(f"{where}: missing accuracies: " + "; ".join(parts))

    table = table.astype(float)
    table.index.name = "step"
    table.columns.name = "testset"
    table.attrs = {"model": rows["model"].iloc[0], "run": run, "id": ids[0], "ood": list(oods)}
    return table


# --------------------------------------------------------------------------- residuals


def _as_vector(values: Any, name: str) -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 1:
        raise AnalysisError(f"residualise: '{name}' must be one-dimensional, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise AnalysisError(f"residualise: '{name}' has missing or infinite values")
    return arr


def _quadratic_design(x: np.ndarray) -> np.ndarray:
    """``[1, z, z**2]`` with ``z`` the standardised ``x`` (same column space as ``[1, x, x**2]``,
    better conditioned); just ``[1]`` when ``x`` is constant."""
    spread = float(np.std(x))
    if spread == 0.0:
        return np.ones((len(x), 1))
    z = (x - x.mean()) / spread
    return np.column_stack([np.ones_like(z), z, z * z])


def _spline_design(x: np.ndarray, df: int) -> tuple[np.ndarray, str]:
    """Design matrix of the non-linear control and what it is (``"spline"`` or ``"quadratic"``).

    The spline is patsy's natural cubic regression spline ``cr(x, df=df,
    constraints='center')`` plus an intercept: ``1 + df`` columns spanning every natural
    cubic spline on ``df + 1`` quantile knots of ``x`` (linear functions included, so the
    spline residuals are also free of any linear ID effect). The sum-to-zero ("center")
    constraint keeps the basis full rank next to the intercept (the unconstrained ``cr``
    basis already spans the constant).

    With fewer than ``df + 3`` distinct values of ``x`` (fewer than two residual degrees of
    freedom left over the distinct points) or a basis that is not of full column rank, the
    control falls back to a quadratic polynomial ``[1, x, x**2]``.
    """
    distinct = np.unique(x).size
    if distinct >= df + 3:
        try:
            design = np.asarray(
                patsy.dmatrix(f"cr(x, df={int(df)}, constraints='center')", {"x": x}, return_type="matrix"),
                dtype=float,
            )
        except Exception:
            design = None
        if design is not None and np.linalg.matrix_rank(design) == design.shape[1]:
            return design, "spline"
    return _quadratic_design(x), "quadratic"


KINDS: tuple[str, ...] = ("linear", "spline", "gam")
"""Kinds of :func:`residualise`."""


def _design(x: np.ndarray, kind: str, df: int) -> np.ndarray:
    if kind == "linear":
        return np.column_stack([np.ones_like(x), x])
    if kind == "spline":
        return _spline_design(x, df)[0]
    raise AnalysisError(f"residualise: kind must be one of {list(KINDS)}, got {kind!r}")


def _fit_residuals(y: np.ndarray, design: np.ndarray) -> np.ndarray:
    beta, *_ = np.linalg.lstsq(design, y, rcond=None)
    return y - design @ beta


def _check_df(df: Any, kind: str) -> int:
    low = MIN_SPLINE_POINTS if kind == "gam" else 2
    if isinstance(df, bool) or not isinstance(df, (int, np.integer)) or df < low:
        what = "gam_df" if kind == "gam" else "df"
        raise AnalysisError(f"residualise: {what} must be an integer >= {low} for kind={kind!r}, got {df!r}")
    return int(df)


def residualise(y: Any, x: Any, kind: str = "linear", df: int | None = None) -> np.ndarray:
    """Residuals of ``y`` after removing the effect of ``x``.

    ``kind="linear"``
        OLS on ``[1, x]``.
    ``kind="spline"``
        OLS on an intercept plus patsy's natural cubic regression spline basis
        ``cr(x, df=df, constraints='center')`` (``df + 1`` quantile knots of ``x``; ``df``
        defaults to 3). When ``x`` has fewer than ``df + 3`` distinct values (too few points
        to leave two residual degrees of freedom over the ``1 + df`` spline coefficients), or
        the basis is rank-deficient, a quadratic polynomial ``[1, x, x**2]`` is used instead.
    ``kind="gam"``
        a penalised cubic regression-spline GAM of ``x`` (statsmodels ``GLMGam`` with
        ``BSplines``, ``df`` basis functions, default :data:`~shiftwork.trajectory.gam.GAM_DF`),
        its second-derivative penalty weight chosen by GCV over a fixed grid
        (:func:`shiftwork.trajectory.gam.gam_fit`, which also gives the effective degrees of
        freedom and the penalty).

    The linear and spline fits use :func:`numpy.linalg.lstsq`, so a constant ``x`` simply
    centres ``y`` (as does the GAM, whose fit is then a straight line). Raises
    :class:`AnalysisError` for inputs of different lengths, fewer than 3 points, non-finite
    values, an unknown ``kind``, ``df < 2`` (spline) or ``df < 4`` (GAM).
    """
    yv = _as_vector(y, "y")
    xv = _as_vector(x, "x")
    if yv.shape != xv.shape:
        raise AnalysisError(f"residualise: y has {yv.size} values but x has {xv.size}")
    if yv.size < 3:
        raise AnalysisError(f"residualise: need at least 3 points, got {yv.size}")
    if kind not in KINDS:
        raise AnalysisError(f"residualise: kind must be one of {list(KINDS)}, got {kind!r}")
    if kind == "gam":
        return gam_fit(yv, xv, _check_df(GAM_DF if df is None else df, kind)).resid
    return _fit_residuals(yv, _design(xv, kind, _check_df(3 if df is None else df, kind)))


# --------------------------------------------------------------------------- correlations


def _no_variance_left(y: np.ndarray, design: np.ndarray) -> bool:
    """True when ``y`` is constant or (up to rounding) in the column space of ``design``."""
    centred = y - y.mean()
    total = float(centred @ centred)
    if total == 0.0:
        return True
    resid = _fit_residuals(y, design)
    return float(resid @ resid) <= _DEGENERATE_SHARE * total


def _corr_p(r: float, dof: float) -> float:
    """Two-sided p-value of a correlation ``r`` with ``dof`` residual degrees of freedom
    (t = r * sqrt(dof / (1 - r**2)), Student t with ``dof`` degrees of freedom)."""
    if not np.isfinite(r) or dof <= 0:
        return math.nan
    if abs(r) >= 1.0:
        return 0.0
    t = r * math.sqrt(dof / (1.0 - r * r))
    return float(2.0 * sps.t.sf(abs(t), dof))


def _raw(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """Pearson r and p (:func:`scipy.stats.pearsonr`); NaN when a column is constant."""
    if np.ptp(a) == 0.0 or np.ptp(b) == 0.0:
        return math.nan, math.nan
    res = sps.pearsonr(a, b)
    return float(res.statistic), float(res.pvalue)


_Z95 = float(abs(sps.norm.ppf(0.025)))
"""The normal quantile of pingouin's two-sided 95% Fisher-z interval."""


def _partial(a: np.ndarray, b: np.ndarray, covar: np.ndarray, method: str) -> tuple[float, float, float, float]:
    """``(r, p, ci_low, ci_high)`` of ``pingouin.partial_corr(x=a, y=b, covar=covar, method=method)``
    with one covariate; NaNs when degenerate.

    Degenerate: ``a`` or ``b`` (their ranks for Spearman) constant or an exact linear function
    of ``covar`` (of its ranks), or ``covar`` constant.

    Computed in closed form, as pingouin defines it: ``r`` the partial correlation of the
    (Spearman: average-rank) columns, ``(r_ab - r_az r_bz) / sqrt((1 - r_az**2)(1 - r_bz**2))``,
    which equals pingouin's ``-P_ab / sqrt(P_aa P_bb)`` of the inverse correlation matrix; ``p``
    from Student's t with ``n - 3`` degrees of freedom and 0 when ``r**2`` is close to 1
    (:func:`numpy.isclose`), as pingouin's ``_correl_pvalue``; the interval pingouin's
    :func:`~pingouin.compute_esci` gives over ``n - 1`` observations (Fisher z, standard error
    ``1 / sqrt(n - 4)``; ``[-1, 1]`` at ``n = 4``) at full precision, where ``partial_corr``
    rounds it for display. The calibration runs this on every pair of every null replicate,
    where pingouin's data-frame checks took most of the time; the tests hold it to pingouin.
    """
    values = np.column_stack([a, b, covar]).astype(float)
    if method == "spearman":
        values = np.column_stack([sps.rankdata(values[:, j]) for j in range(3)])
    z = values[:, 2]
    if np.ptp(z) == 0.0:
        return math.nan, math.nan, math.nan, math.nan
    design = np.column_stack([np.ones_like(z), z])
    if _no_variance_left(values[:, 0], design) or _no_variance_left(values[:, 1], design):
        return math.nan, math.nan, math.nan, math.nan
    c = np.corrcoef(values, rowvar=False)
    denominator = (1.0 - c[0, 2] ** 2) * (1.0 - c[1, 2] ** 2)
    if not denominator > 0.0:
        return math.nan, math.nan, math.nan, math.nan
    r = float(np.clip((c[0, 1] - c[0, 2] * c[1, 2]) / math.sqrt(denominator), -1.0, 1.0))
    if not math.isfinite(r):
        return math.nan, math.nan, math.nan, math.nan
    n = len(values)
    p = 0.0 if np.isclose(r * r, 1.0) else _corr_p(r, n - 3.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        centre, half = np.arctanh(r), _Z95 / np.sqrt(n - 4.0)
        lo, hi = float(np.tanh(centre - half)), float(np.tanh(centre + half))
    return r, p, lo, hi


def _nonlinear(a: np.ndarray, b: np.ndarray, z: np.ndarray, design: np.ndarray) -> tuple[float, float]:
    """Correlation of the spline residuals of ``a`` and ``b`` on ``z`` (``design``, the spline
    design of ``z``, made once for all pairs of a run) and its p-value.

    The p-value *does* adjust the degrees of freedom for the fit: with a design of rank
    ``q`` (intercept included; ``1 + df`` for the spline, 3 for the quadratic fallback) it
    uses ``dof = n - q - 1``, the same rule as a partial correlation with ``q - 1``
    covariates (``n - 3`` for the linear control, as :func:`pingouin.partial_corr`). A plain
    :func:`scipy.stats.pearsonr` on the residuals would use ``n - 2`` and be anti-conservative.
    NaN when ``z`` is constant (there is no ID effect to fit; the design would only centre the
    columns) or a residual vanishes.
    """
    if np.ptp(z) == 0.0:
        return math.nan, math.nan
    if _no_variance_left(a, design) or _no_variance_left(b, design):
        return math.nan, math.nan
    ra = _fit_residuals(a, design)
    rb = _fit_residuals(b, design)
    r = float(np.clip(np.corrcoef(ra, rb)[0, 1], -1.0, 1.0))
    dof = len(a) - int(np.linalg.matrix_rank(design)) - 1
    return r, _corr_p(r, dof)


def _left_over(resid: np.ndarray, y: np.ndarray) -> bool:
    """Does ``resid`` keep more than :data:`_DEGENERATE_SHARE` of the variance of ``y``?"""
    centred = y - y.mean()
    total = float(centred @ centred)
    return total > 0.0 and float(resid @ resid) > _DEGENERATE_SHARE * total


def _gam(fit_a: GamFit, fit_b: GamFit, a: np.ndarray, b: np.ndarray, z: np.ndarray) -> tuple[float, float, float]:
    """``(r, p, edf)`` of the GAM control: the correlation of the GAM residuals of ``a`` and ``b``
    on ``z``, its p-value and the larger of the two fits' effective degrees of freedom.

    The p-value uses ``dof = n - 1 - edf`` with ``edf = max(edf_a, edf_b)`` (intercept
    included), a real number passed to Student's t as it is. This is the rule of the other
    controls with the effective degrees of freedom in place of the design's rank: a partial
    correlation controlling for a design of rank ``q`` has ``n - q - 1`` degrees of freedom
    (``n - 3`` for the linear control, whose ``q = 2`` is the edf of a straight line, and the
    spline control's ``n - (1 + df) - 1``, the edf of an unpenalised spline). Taking the larger
    edf of the two fits charges the pair for the more flexible of its two smooths, which errs
    on the conservative side; the edf does not count the choice of the penalty weight itself.
    NaN r and p when ``z`` is constant or a residual vanishes; NaN p when ``dof <= 0``.
    """
    edf = max(fit_a.edf, fit_b.edf)
    if np.ptp(z) == 0.0 or not _left_over(fit_a.resid, a) or not _left_over(fit_b.resid, b):
        return math.nan, math.nan, edf
    r = float(np.clip(np.corrcoef(fit_a.resid, fit_b.resid)[0, 1], -1.0, 1.0))
    return r, _corr_p(r, len(a) - 1.0 - edf), edf


def _partial_bias(a: np.ndarray, b: np.ndarray, z: np.ndarray, bias: np.ndarray | None) -> tuple[float, float]:
    """``(r, p)`` of ``pingouin.partial_corr(x=a, y=b, covar=[id, bias])`` (``n - 4`` degrees of
    freedom); NaNs without a bias, with fewer than 5 checkpoints, when ``[1, id, bias]`` is not of
    full rank (a constant covariate, or a bias that is an exact linear function of the ID
    accuracy) or when ``a`` or ``b`` has no variance left after OLS on it."""
    if bias is None or len(a) < 5:
        return math.nan, math.nan
    design = np.column_stack([np.ones_like(z), z, bias])
    if np.linalg.matrix_rank(design) < 3 or _no_variance_left(a, design) or _no_variance_left(b, design):
        return math.nan, math.nan
    data = pd.DataFrame({"a": a, "b": b, "z": z, "w": bias})
    with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
        # residuals of a and b that are exactly collinear make pingouin's covariance matrix
        # singular (r = +-1), as in _partial
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.filterwarnings("ignore", message=".*rank-deficient.*", category=UserWarning)
        res = pg.partial_corr(data=data, x="a", y="b", covar=["z", "w"], method="pearson")
    r = float(res["r"].iloc[0])
    if not np.isfinite(r):
        return math.nan, math.nan
    return r, float(res["p_val"].iloc[0])


def _dependent(
    r: float, p: float, resid_a: np.ndarray, resid_b: np.ndarray, params: float, dependence: str
) -> tuple[float, float]:
    """``(p, n_eff)``: the p-value of ``r`` over the effective number of checkpoints of the two
    residual series (:mod:`shiftwork.trajectory.dependence`; ``params`` the control's fitted
    parameters, intercept included), or ``p`` as it is and ``n`` under ``"independent"``."""
    n = float(len(resid_a))
    if dependence == "independent" or not math.isfinite(r):
        return p, n
    n_eff = effective_n(resid_a, resid_b)
    return _corr_p(r, n_eff - params - 1.0), n_eff


def _run_pairs(
    table: pd.DataFrame, df: int, gam_df: int, bias: np.ndarray | None, dependence: str = "independent"
) -> tuple[list[dict[str, Any]], dict[str, GamFit]]:
    id_col = table.attrs["id"]
    z = table[id_col].to_numpy(dtype=float)
    fits = {c: gam_fit(table[c].to_numpy(dtype=float), z, gam_df) for c in table.attrs["ood"]}
    line = np.column_stack([np.ones_like(z), z])
    spline = _design(z, "spline", df)
    out: list[dict[str, Any]] = []
    for a, b in itertools.combinations(table.attrs["ood"], 2):
        av = table[a].to_numpy(dtype=float)
        bv = table[b].to_numpy(dtype=float)
        r_raw, p_raw = _raw(av, bv)
        r_p, p_p, lo, hi = _partial(av, bv, z, "pearson")
        p_p, n_eff = _dependent(r_p, p_p, _fit_residuals(av, line), _fit_residuals(bv, line), 2.0, dependence)
        r_s, p_s, _, _ = _partial(av, bv, z, "spearman")
        r_n, p_n = _nonlinear(av, bv, z, spline)
        r_g, p_g, edf = _gam(fits[a], fits[b], av, bv, z)
        p_g, n_eff_gam = _dependent(r_g, p_g, fits[a].resid, fits[b].resid, edf, dependence)
        r_b, p_b = _partial_bias(av, bv, z, bias)
        out.append(
            {
                "model": table.attrs["model"],
                "run": table.attrs["run"],
                "ood_a": a,
                "ood_b": b,
                "n": int(len(table)),
                "r_raw": r_raw,
                "p_raw": p_raw,
                "r_partial": r_p,
                "p_partial": p_p,
                "n_eff_partial": n_eff,
                "ci95_low": lo,
                "ci95_high": hi,
                "r_partial_spearman": r_s,
                "p_partial_spearman": p_s,
                "r_nonlinear": r_n,
                "p_nonlinear": p_n,
                "r_gam": r_g,
                "p_gam": p_g,
                "edf_gam": edf,
                "n_eff_gam": n_eff_gam,
                "r_partial_bias": r_b,
                "p_partial_bias": p_b,
            }
        )
    return out, fits


def _primary_reason(
    table: pd.DataFrame, a: str, b: str, method: str, fits: Mapping[str, GamFit], r: float, p: float
) -> str:
    """Why the primary correlation of the pair ``(a, b)`` of ``table`` (from :func:`wide`) is
    undefined: ``""`` when ``r`` and ``p`` are both finite, else every cause that holds, joined by
    ``"; "``, in the order of the module notes ("Degenerate columns"): the ID column constant,
    (GAM) too few distinct ID values for the spline, each OOD column constant, each OOD column
    with no variance left after the primary control (``method``: the line in ``[1, id]``; the GAM
    fits ``fits``); a generic cause when none of these holds."""
    if math.isfinite(r) and math.isfinite(p):
        return ""
    z = table[table.attrs["id"]].to_numpy(dtype=float)
    id_constant = bool(np.ptp(z) == 0.0)
    line = np.column_stack([np.ones_like(z), z])
    per_set, vanished = [], False
    for name in (a, b):
        y = table[name].to_numpy(dtype=float)
        if np.ptp(y) == 0.0:
            per_set.append(f"{name} constant")
        elif not id_constant and (
            not _left_over(fits[name].resid, y) if method == "gam" else _no_variance_left(y, line)
        ):
            per_set.append(f"{name} has no variance left after the ID control")
            vanished = True
    reasons = ["id constant"] if id_constant else []
    if vanished and method == "gam" and np.unique(z).size < MIN_SPLINE_POINTS:
        reasons.append("too few distinct ID values for the spline")
    reasons += per_set
    if not reasons:
        finite = math.isfinite(r)
        reasons.append(
            "no residual degrees of freedom for the p-value" if finite else "no correlation of the residuals"
        )
    return "; ".join(reasons)


def _classify(r: np.ndarray, p_adj: np.ndarray, alpha: float) -> np.ndarray:
    """``"positive"``/``"negative"`` by the sign of ``r`` where ``p_adj < alpha``, else ``"null"``
    (NaN ``r`` or ``p_adj`` included)."""
    significant = np.nan_to_num(p_adj, nan=1.0) < alpha
    return np.where(significant & (r > 0), "positive", np.where(significant & (r < 0), "negative", "null"))


# --------------------------------------------------------------------------- items, label bias


def _check_items(items: pd.DataFrame, needs: Sequence[str]) -> None:
    require_columns(items, needs, "items table", AnalysisError)
    if items["run"].isna().any():
        raise AnalysisError("items table: some rows have no run")


def label_bias(items: pd.DataFrame) -> pd.DataFrame:
    """Per (model, run, step): the share of the checkpoint's test predictions that are
    ``"entailment"``, pooled over all its test sets (``entailment_share``, over ``n``
    predictions), then one column ``entailment_share_<set>`` per test set (NaN where a run does
    not have the set), sets in sorted order. Rows sorted by model, run, step.

    Raises :class:`AnalysisError` when ``items`` lacks ``model``, ``run``, ``step``, ``set`` or
    ``pred``, or a prediction is not one of :data:`LABELS` (naming the run and step).
    """
    _check_items(items, ("model", "run", "step", "set", "pred"))
    bad = ~items["pred"].isin(LABELS)
    if bad.any():
        first = items.loc[bad].iloc[0]
        raise AnalysisError(
            f"items table: run {_label(first['run'])} step {first['step']}: prediction {first['pred']!r} "
            f"is not one of {list(LABELS)}"
        )
    data = items[["model", "run", "step", "set"]].copy()
    data["entailment"] = (items["pred"] == ENTAILMENT).astype(float)
    keys = ["model", "run", "step"]
    pooled = data.groupby(keys, sort=True)["entailment"].agg(n="size", entailment_share="mean").reset_index()
    per_set = data.pivot_table(index=keys, columns="set", values="entailment", aggfunc="mean")
    sets = sorted_mixed(list(per_set.columns))
    per_set = per_set[sets]
    per_set.columns = [f"entailment_share_{s}" for s in sets]
    out = pooled.merge(per_set.reset_index(), on=keys, how="left")
    out["n"] = out["n"].astype(np.int64)
    return out[[*BIAS_COLUMNS, *per_set.columns]].reset_index(drop=True)


def _run_bias(bias: pd.DataFrame, table: pd.DataFrame) -> np.ndarray:
    """The run's ``entailment_share`` at the steps of ``table``."""
    require_columns(bias, ("run", "step", "entailment_share"), "label bias table", AnalysisError)
    run = table.attrs["run"]
    rows = bias[bias["run"] == run]
    if rows["step"].duplicated().any():
        raise AnalysisError(f"label bias table: run {_label(run)} has more than one row for a step")
    series = rows.set_index("step")["entailment_share"].astype(float)
    missing = [int(s) for s in table.index if s not in series.index]
    if missing:
        raise AnalysisError(f"label bias table: run {_label(run)} has no label bias at step(s) {missing}")
    values = series.reindex(table.index).to_numpy(dtype=float)
    if not np.all(np.isfinite(values)):
        raise AnalysisError(f"label bias table: run {_label(run)} has missing label bias values")
    return values


def _item_matrices(
    items: pd.DataFrame, table: pd.DataFrame, continuous: Sequence[str] = (), score: str = "accuracy"
) -> tuple[list[np.ndarray], list[np.ndarray | None]]:
    """Items x checkpoints 0/1 correctness matrices of the run's test sets, in the column order
    of ``table`` (ID first), items sorted by ``example_id``, checkpoints those of ``table``; the
    sets in ``continuous`` may hold any score in [0, 1]. And each set's gold labels, row for row:
    None under ``score="accuracy"`` and for the ``continuous`` sets (their score is the plain
    mean), else the items' ``label``.

    Raises :class:`AnalysisError` (naming run, set, step or item) when a set has no items, an
    item is listed twice at a step or is missing at a step, ``correct`` is not 0/1, an item has
    no label or several (balanced accuracy), or a score recomputed from the items (``score``:
    raw or balanced accuracy) differs from the scores table.
    """
    run = table.attrs["run"]
    where = f"items table: run {_label(run)}"
    steps = list(table.index)
    rows = items[(items["run"] == run) & items["step"].isin(steps)]
    out: list[np.ndarray] = []
    strata: list[np.ndarray | None] = []
    for testset in table.columns:
        part = rows[rows["set"] == testset]
        if part.empty:
            raise AnalysisError(f"{where} has no items of test set {_label(testset)}")
        dup = part.duplicated(["step", "example_id"])
        if dup.any():
            first = part.loc[dup].iloc[0]
            raise AnalysisError(
                f"{where}: test set {_label(testset)} lists item {_label(first['example_id'])} twice at step "
                f"{int(first['step'])}"
            )
        correct = pd.to_numeric(part["correct"].astype(object), errors="coerce").astype(float)
        if testset in continuous:
            if not (np.isfinite(correct) & (correct >= 0.0) & (correct <= 1.0)).all():
                raise AnalysisError(f"{where}: test set {_label(testset)} has item scores outside [0, 1]")
        elif not correct.isin([0.0, 1.0]).all():
            raise AnalysisError(f"{where}: test set {_label(testset)} has 'correct' values other than true/false")
        matrix = (
            part.assign(correct=correct)
            .pivot(index="example_id", columns="step", values="correct")
            .reindex(columns=steps)
        )
        matrix = matrix.loc[sorted_mixed(list(matrix.index))]
        holes = matrix.isna()
        if holes.any().any():
            step = next(s for s in steps if holes[s].any())
            item = matrix.index[holes[step]][0]
            raise AnalysisError(
                f"{where}: test set {_label(testset)} has no prediction for item {_label(item)} at step {int(step)}; "
                "every checkpoint must be scored on the same items"
            )
        values = matrix.to_numpy(dtype=float)
        labels = None if score == "accuracy" or testset in continuous else _item_labels(part, matrix.index, where)
        acc = score_of(values, labels, score)
        off = np.abs(acc - table[testset].to_numpy(dtype=float))
        if np.any(off > 1e-9):
            k = int(np.argmax(off))
            what = "accuracy" if labels is None else score.replace("_", " ")
            raise AnalysisError(
                f"{where}: test set {_label(testset)} at step {int(steps[k])}: the items give {what} {acc[k]:.6g}, "
                f"the scores table {table[testset].iloc[k]:.6g}"
            )
        out.append(values)
        strata.append(labels)
    return out, strata


def _item_labels(part: pd.DataFrame, order: pd.Index, where: str) -> np.ndarray:
    """The one gold label of each item of ``part`` (one test set's rows), in the order ``order``."""
    testset = part["set"].iloc[0]
    if "label" not in part.columns or part["label"].isna().any():
        raise AnalysisError(f"{where}: test set {_label(testset)} has items without a gold label (a per-label score)")
    per_item = part.groupby("example_id", sort=False)["label"].nunique()
    if (per_item > 1).any():
        raise AnalysisError(
            f"{where}: test set {_label(testset)} gives item {_label(per_item.index[per_item > 1][0])} several labels"
        )
    return part.drop_duplicates("example_id").set_index("example_id")["label"].reindex(order).to_numpy(dtype=object)


def _bootstrap(
    table: pd.DataFrame,
    items: pd.DataFrame,
    fits: dict[str, GamFit],
    options: PairOptions,
    continuous: Sequence[str] = (),
) -> np.ndarray:
    """``(resamples, pairs)`` bootstrap correlations of the primary method (pairs in
    :func:`itertools.combinations` order of the OOD sets). A group of ``together`` whose sets the
    run all has resamples their items (rows sorted by example id) with one draw."""
    matrices, labels = _item_matrices(items, table, continuous, options.score)
    rng = rng_for("trajectory-bootstrap", int(options.seed), table.attrs["run"])
    group_of = {
        name: k for k, group in enumerate(options.together) if set(group) <= set(table.columns) for name in group
    }
    groups = [group_of.get(c) for c in table.columns]
    acc = boot.resample_accuracies(
        matrices, rng, int(options.resamples), groups, None if options.score == "accuracy" else labels, options.score
    )
    position = {c: k for k, c in enumerate(table.columns)}
    oods = table.attrs["ood"]
    pairs = [(position[a], position[b]) for a, b in itertools.combinations(oods, 2)]
    if options.method == "linear":
        return boot.linear_partials(acc, pairs)
    alphas = {position[c]: fits[c].alpha for c in oods}
    return boot.gam_partials(acc, pairs, alphas, int(options.gam_df))


# --------------------------------------------------------------------------- pair table


@dataclass(frozen=True)
class PairOptions:
    """How :func:`pair_table` removes the ID effect and tests the pairs: significance level
    ``alpha`` (Holm within the run), the spline control's ``df``, the primary ``method``
    (:data:`METHODS`) and the GAM's ``gam_df``; the ``score`` the scores table's ``accuracy``
    column holds (:data:`~shiftwork.trajectory.scores.SCORES`), which the items must reproduce and
    the item bootstrap resamples; how the p-values count the run's serially dependent checkpoints,
    ``dependence`` (:data:`~shiftwork.trajectory.dependence.DEPENDENCE`); the item bootstrap's ``resamples`` (0: none), its ``seed`` and
    the groups of test sets it resamples ``together``."""

    alpha: float = 0.05
    df: int = 3
    method: str = "linear"
    gam_df: int = GAM_DF
    score: str = "accuracy"
    dependence: str = "independent"
    resamples: int = 1000
    seed: int = 0
    together: Sequence[Sequence[str]] = ()

    @classmethod
    def of(cls, analysis: AnalysisSettings) -> PairOptions:
        """The options config ``trajectory.analysis`` sets."""
        boot = analysis.boot
        return cls(
            alpha=analysis.alpha,
            df=analysis.spline_df,
            method=analysis.method,
            gam_df=analysis.gam_df,
            score=analysis.score,
            dependence=analysis.dependence,
            resamples=boot.resamples,
            seed=boot.seed,
            together=boot.together,
        )

    def check(self) -> None:
        """Raises :class:`AnalysisError` naming an option out of its range."""
        alpha, gam_df = self.alpha, self.gam_df
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0.0 < float(alpha) < 1.0:
            raise AnalysisError(f"pair_table: alpha must be a number in (0, 1), got {alpha!r}")
        if self.method not in METHODS:
            raise AnalysisError(f"pair_table: method must be one of {list(METHODS)}, got {self.method!r}")
        if isinstance(gam_df, bool) or not isinstance(gam_df, (int, np.integer)) or gam_df < MIN_SPLINE_POINTS:
            raise AnalysisError(f"pair_table: gam_df must be an integer >= {MIN_SPLINE_POINTS}, got {gam_df!r}")
        if self.dependence not in DEPENDENCE:
            raise AnalysisError(f"pair_table: dependence must be one of {list(DEPENDENCE)}, got {self.dependence!r}")
        if self.score not in SCORES:
            raise AnalysisError(f"pair_table: score must be one of {list(SCORES)}, got {self.score!r}")
        for name, value in (("resamples", self.resamples), ("seed", self.seed)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
                raise AnalysisError(f"pair_table: {name} must be a non-negative integer, got {value!r}")


def _pair_options(options: PairOptions | None, keywords: Mapping[str, Any]) -> PairOptions:
    """``options`` (default :class:`PairOptions`) with the fields given as ``keywords`` replaced."""
    known = {f.name for f in dataclasses.fields(PairOptions)}
    for name in keywords:
        if name not in known:
            raise TypeError(f"pair_table() got an unexpected keyword argument '{name}'")
    return dataclasses.replace(options if options is not None else PairOptions(), **keywords)


def pair_table(
    scores: pd.DataFrame,
    options: PairOptions | None = None,
    *,
    items: pd.DataFrame | None = None,
    bias: pd.DataFrame | None = None,
    continuous: Sequence[str] = (),
    **keywords: Any,
) -> pd.DataFrame:
    """Per run and unordered pair of OOD sets ``(ood_a, ood_b)`` (``ood_a < ood_b``): how the
    two OOD accuracies co-vary over the run's checkpoints, in the columns :data:`PAIR_COLUMNS`
    (each described there).

    ``options`` (:class:`PairOptions`) say how, and its fields may also be given, or replaced, as
    keywords: ``pair_table(scores, method="gam", resamples=200)``.

    ``continuous`` names test sets whose items carry a score in [0, 1] rather than 0/1 in
    ``correct`` (e.g. a prompt's scaled instability, whose mean over prompts is the column); their
    items are resampled like the others.

    ``scores``' ``accuracy`` column is the score analysed; with ``score="balanced_accuracy"`` pass
    the table :func:`~shiftwork.trajectory.scores.analysis_scores` gives, whose ``accuracy`` is
    the balanced accuracy, and the items must reproduce it (and carry ``label``).

    ``items`` is the per-example table (:data:`ITEM_COLUMNS`; only its rows at the steps of
    ``scores`` are used, so a window of steps can be analysed on its own). ``bias`` is a
    :func:`label_bias` table; when it is None and ``items`` is given it is computed from
    ``items``.

    Degenerate (constant, or exactly ID-determined) columns give NaN correlations, the sign
    ``"null"`` and a ``reason`` naming the cause, never an exception (in the bootstrap too); see
    the module notes. Rows are ordered by model, run, then pair. Raises
    :class:`AnalysisError` as :func:`wide` does for any run, for ``alpha`` outside (0, 1), an
    unknown ``method`` or ``score``, ``gam_df < 4``, a negative ``resamples`` or ``seed``, and for ``items``
    or ``bias`` that do not cover the run's test sets and steps or disagree with ``scores``.
    """
    options = _pair_options(options, keywords)
    bias = _checked_inputs(scores, options, items, bias)
    frames = [_run_pair_rows(wide(scores, run), options, items, bias, continuous) for run in _runs_in_order(scores)]
    out = pd.concat(frames, ignore_index=True)
    out["n_boot"] = out["n_boot"].astype(np.int64)
    return out[list(PAIR_COLUMNS)]


def _checked_inputs(
    scores: pd.DataFrame, options: PairOptions, items: pd.DataFrame | None, bias: pd.DataFrame | None
) -> pd.DataFrame | None:
    """Checks the scores, the options and the items' columns; returns the label bias to use
    (``bias``, or the items' own when it is None)."""
    require_columns(scores, REQUIRED_COLUMNS, "scores table", AnalysisError)
    options.check()
    if scores.empty:
        raise AnalysisError("scores table: no rows")
    if scores["run"].isna().any():
        raise AnalysisError("scores table: some rows have no run")
    if items is not None:
        _check_items(items, ("run", "step", "set", "example_id", "correct"))
        if bias is None:
            bias = label_bias(items)
    return bias


def _runs_in_order(scores: pd.DataFrame) -> list[Hashable]:
    """The runs of ``scores`` by model, then run (a run of two models is left to :func:`wide` to reject)."""
    runs = scores[["model", "run"]].drop_duplicates()
    order = sorted(runs.itertuples(index=False), key=lambda t: (str(t.model), str(t.run)))
    seen: set[Hashable] = set()
    out = []
    for _model, run in order:
        if run not in seen:
            seen.add(run)
            out.append(run)
    return out


def _run_pair_rows(
    table: pd.DataFrame,
    options: PairOptions,
    items: pd.DataFrame | None,
    bias: pd.DataFrame | None,
    continuous: Sequence[str],
) -> pd.DataFrame:
    """The pair rows of one run (``table``, from :func:`wide`): every method's correlations, their
    adjusted p-values, the primary method's columns, the bootstrap and the sign."""
    alpha = float(options.alpha)
    run_bias = None if bias is None else _run_bias(bias, table)
    rows, fits = _run_pairs(table, options.df, int(options.gam_df), run_bias, options.dependence)
    part = _with_primary(_adjusted(pd.DataFrame(rows), alpha), options.method)
    summaries = [boot.bootstrap_summary(np.array([]), math.nan)] * len(part)
    if items is not None and options.resamples > 0:
        r_boot = _bootstrap(table, items, fits, options, continuous)
        summaries = _boot_summaries(r_boot, part["r_primary"].to_numpy(dtype=float))
    for key in ("boot_sign_share", "boot_ci_low", "boot_ci_high", "n_boot"):
        part[key] = [s[key] for s in summaries]
    part["sign"] = _classify(
        part["r_primary"].to_numpy(dtype=float), part["p_primary_holm"].to_numpy(dtype=float), alpha
    )
    part["reason"] = [
        _primary_reason(table, row.ood_a, row.ood_b, options.method, fits, float(row.r_primary), float(row.p_primary))
        for row in part[["ood_a", "ood_b", "r_primary", "p_primary"]].itertuples(index=False)
    ]
    return part


def _adjusted(part: pd.DataFrame, alpha: float) -> pd.DataFrame:
    """``part`` with the Holm and Benjamini-Hochberg adjusted p-values of the linear and the GAM
    control, and the Holm ones of the label-bias control, each across the run's pairs."""
    for stem in ("partial", "gam"):
        p = part[f"p_{stem}"].to_numpy(dtype=float)
        part[f"p_{stem}_holm"] = pg.multicomp(p, alpha=alpha, method="holm")[1]
        part[f"p_{stem}_bh"] = pg.multicomp(p, alpha=alpha, method="fdr_bh")[1]
    p = part["p_partial_bias"].to_numpy(dtype=float)
    part["p_partial_bias_holm"] = pg.multicomp(p, alpha=alpha, method="holm")[1]
    return part


def _with_primary(part: pd.DataFrame, method: str) -> pd.DataFrame:
    """``part`` with ``method`` and its columns under the names ``*_primary``."""
    stem = "partial" if method == "linear" else "gam"
    part["method"] = method
    part["r_primary"] = part[f"r_{stem}"]
    part["p_primary"] = part[f"p_{stem}"]
    part["p_primary_holm"] = part[f"p_{stem}_holm"]
    part["p_primary_bh"] = part[f"p_{stem}_bh"]
    return part


def _boot_summaries(r_boot: np.ndarray, point: np.ndarray) -> list[dict[str, Any]]:
    """Each pair's bootstrap summary (:func:`~shiftwork.trajectory.bootstrap.bootstrap_summary`) around its
    point estimate; a pair whose point estimate is NaN gets none of the resamples."""
    return [
        boot.bootstrap_summary(r_boot[:, k] if np.isfinite(point[k]) else np.array([]), point[k])
        for k in range(len(point))
    ]


# --------------------------------------------------------------------------- summary


def summary(pairs: pd.DataFrame) -> pd.DataFrame:
    """Per model (sorted): ``n_pairs`` (pairs over all its runs) and the shares of pairs whose
    ``sign`` (the primary method's, see :func:`pair_table`) is ``"positive"``, ``"negative"``
    and ``"null"`` (the three sum to 1).

    Raises :class:`AnalysisError` when ``pairs`` lacks ``model`` or ``sign`` or holds a sign
    other than :data:`SIGNS`. An empty ``pairs`` gives an empty table with
    :data:`SUMMARY_COLUMNS`.
    """
    require_columns(pairs, ["model", "sign"], "pairs table", AnalysisError)
    bad = ~pairs["sign"].isin(SIGNS)
    if bad.any():
        first = pairs.loc[bad].iloc[0]
        where = f"run {_label(first['run'])}: " if "run" in pairs.columns else ""
        raise AnalysisError(f"pairs table: {where}sign {first['sign']!r} is not one of {list(SIGNS)}")
    if pairs.empty:
        return pd.DataFrame({c: pd.Series(dtype=object if c == "model" else float) for c in SUMMARY_COLUMNS})
    rows = []
    for model, group in pairs.groupby("model", sort=True):
        n = int(len(group))
        counts = group["sign"].value_counts()
        rows.append({"model": model, "n_pairs": n, **{f"share_{s}": float(counts.get(s, 0)) / n for s in SIGNS}})
    return pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))
