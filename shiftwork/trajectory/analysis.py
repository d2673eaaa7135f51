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
    a float in [0, 1];
``role``
    ``"id"`` or ``"ood"``; constant per (run, testset).

Pipeline
--------
1. :func:`wide` pivots one run into a steps x testsets table and checks it (at least
   :data:`MIN_CHECKPOINTS` checkpoints, exactly one ID set, at least two OOD sets, no
   missing cell).
2. :func:`residualise` removes the ID effect from a column: linearly (OLS on ``[1, id]``)
   or non-linearly (OLS on a natural cubic regression spline basis of ``id``).
3. :func:`pair_table` gives, per run and pair of OOD sets, the raw Pearson correlation, the
   linear partial correlation (Pearson and Spearman, via :func:`pingouin.partial_corr`), the
   non-linear control (correlation of the spline residuals), Holm and Benjamini-Hochberg
   adjusted p-values of the linear partial correlation across the pairs of the run, and the
   sign class of the pair.
4. :func:`summary` gives, per model, the share of positive, negative and null pairs.

Degenerate columns
------------------
A correlation is undefined when one of its two inputs has no variance left: a raw
correlation when an OOD column is constant, a partial correlation when an OOD column is
constant or an exact linear function of the ID column (or when the ID column itself is
constant), the Spearman partial correlation when the same holds for the ranks, and the
non-linear control when a spline residual vanishes. Such correlations, their p-values and
confidence limits are NaN rather than an error; a NaN ``p_partial`` is left out of the
multiple-comparison family of its run (as :func:`pingouin.multicomp` does) and its pair gets
the sign ``"null"``.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
import pandas as pd
import patsy
import pingouin as pg
from scipy import stats as sps

from shiftwork.checks import require_columns

__all__ = [
    "AnalysisError",
    "MIN_CHECKPOINTS",
    "PAIR_COLUMNS",
    "REQUIRED_COLUMNS",
    "SIGNS",
    "SUMMARY_COLUMNS",
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

PAIR_COLUMNS: tuple[str, ...] = (
    "model",
    "run",
    "ood_a",
    "ood_b",
    "n",
    "r_raw",
    "p_raw",
    "r_partial",
    "p_partial",
    "ci95_low",
    "ci95_high",
    "r_partial_spearman",
    "p_partial_spearman",
    "r_nonlinear",
    "p_nonlinear",
    "p_partial_holm",
    "p_partial_bh",
    "sign",
)
"""Columns of :func:`pair_table`, in order."""

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


def _design(x: np.ndarray, kind: str, df: int) -> np.ndarray:
    if kind == "linear":
        return np.column_stack([np.ones_like(x), x])
    if kind == "spline":
        return _spline_design(x, df)[0]
    raise AnalysisError(f"residualise: kind must be 'linear' or 'spline', got {kind!r}")


def _fit_residuals(y: np.ndarray, design: np.ndarray) -> np.ndarray:
    beta, *_ = np.linalg.lstsq(design, y, rcond=None)
    return y - design @ beta


def residualise(y: Any, x: Any, kind: str = "linear", df: int = 3) -> np.ndarray:
    """Residuals of ``y`` after an OLS regression on ``x``.

    ``kind="linear"``
        OLS on ``[1, x]``.
    ``kind="spline"``
        OLS on an intercept plus patsy's natural cubic regression spline basis
        ``cr(x, df=df, constraints='center')`` (``df + 1`` quantile knots of ``x``). When
        ``x`` has fewer than ``df + 3`` distinct values (too few points to leave two
        residual degrees of freedom over the ``1 + df`` spline coefficients), or the basis
        is rank-deficient, a quadratic polynomial ``[1, x, x**2]`` is used instead.

    The fit uses :func:`numpy.linalg.lstsq`, so a constant ``x`` simply centres ``y``.
    Raises :class:`AnalysisError` for inputs of different lengths, fewer than 3 points,
    non-finite values, an unknown ``kind`` or ``df < 2``.
    """
    yv = _as_vector(y, "y")
    xv = _as_vector(x, "x")
    if yv.shape != xv.shape:
        raise AnalysisError(f"residualise: y has {yv.size} values but x has {xv.size}")
    if yv.size < 3:
        raise AnalysisError(f"residualise: need at least 3 points, got {yv.size}")
    if isinstance(df, bool) or not isinstance(df, (int, np.integer)) or df < 2:
        raise AnalysisError(f"residualise: df must be an integer >= 2, got {df!r}")
    return _fit_residuals(yv, _design(xv, kind, int(df)))


# --------------------------------------------------------------------------- correlations


def _no_variance_left(y: np.ndarray, design: np.ndarray) -> bool:
    """True when ``y`` is constant or (up to rounding) in the column space of ``design``."""
    centred = y - y.mean()
    total = float(centred @ centred)
    if total == 0.0:
        return True
    resid = _fit_residuals(y, design)
    return float(resid @ resid) <= _DEGENERATE_SHARE * total


def _corr_p(r: float, dof: int) -> float:
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


def _partial(table: pd.DataFrame, a: str, b: str, covar: str, method: str) -> tuple[float, float, float, float]:
    """``(r, p, ci_low, ci_high)`` of :func:`pingouin.partial_corr`; NaNs when degenerate.

    Degenerate: ``a`` or ``b`` (their ranks for Spearman) constant or an exact linear function
    of ``covar`` (of its ranks), or ``covar`` constant.
    """
    cols = table[[a, b, covar]].astype(float)
    values = cols.rank().to_numpy() if method == "spearman" else cols.to_numpy()
    z = values[:, 2]
    if np.ptp(z) == 0.0:
        return math.nan, math.nan, math.nan, math.nan
    design = np.column_stack([np.ones_like(z), z])
    if _no_variance_left(values[:, 0], design) or _no_variance_left(values[:, 1], design):
        return math.nan, math.nan, math.nan, math.nan
    # Rename so that testset names can never clash with pingouin's argument checks.
    data = pd.DataFrame({"a": cols[a].to_numpy(), "b": cols[b].to_numpy(), "z": cols[covar].to_numpy()})
    with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
        # n = 4 gives an infinite CI standard error (pingouin then returns [-1, 1]); residuals of
        # a and b that are exactly collinear make the covariance matrix singular (r = +-1).
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.filterwarnings("ignore", message=".*rank-deficient.*", category=UserWarning)
        res = pg.partial_corr(data=data, x="a", y="b", covar="z", method=method)
        r = float(res["r"].iloc[0])
        p = float(res["p_val"].iloc[0])
        if not np.isfinite(r):
            return math.nan, math.nan, math.nan, math.nan
        # pingouin's CI95 column is rounded to 2 decimals for display (pingouin.options
        # "round.column.CI95"); recompute the same interval (Fisher z, n - k observations with
        # k = 1 covariate, exactly as partial_corr does) at full precision.
        n = int(res["n"].iloc[0])
        lo, hi = (float(v) for v in pg.compute_esci(stat=r, nx=n - 1, ny=n - 1, eftype="r", decimals=15))
    return r, p, lo, hi


def _nonlinear(a: np.ndarray, b: np.ndarray, z: np.ndarray, df: int) -> tuple[float, float]:
    """Correlation of the spline residuals of ``a`` and ``b`` on ``z`` and its p-value.

    The p-value *does* adjust the degrees of freedom for the fit: with a design of rank
    ``q`` (intercept included; ``1 + df`` for the spline, 3 for the quadratic fallback) it
    uses ``dof = n - q - 1``, the same rule as a partial correlation with ``q - 1``
    covariates (``n - 3`` for the linear control, as :func:`pingouin.partial_corr`). A plain
    :func:`scipy.stats.pearsonr` on the residuals would use ``n - 2`` and be anti-conservative.
    """
    design = _design(z, "spline", df)
    if _no_variance_left(a, design) or _no_variance_left(b, design):
        return math.nan, math.nan
    ra = _fit_residuals(a, design)
    rb = _fit_residuals(b, design)
    r = float(np.clip(np.corrcoef(ra, rb)[0, 1], -1.0, 1.0))
    dof = len(a) - int(np.linalg.matrix_rank(design)) - 1
    return r, _corr_p(r, dof)


def _run_pairs(table: pd.DataFrame, df: int) -> list[dict[str, Any]]:
    id_col = table.attrs["id"]
    z = table[id_col].to_numpy(dtype=float)
    out: list[dict[str, Any]] = []
    for a, b in itertools.combinations(table.attrs["ood"], 2):
        av = table[a].to_numpy(dtype=float)
        bv = table[b].to_numpy(dtype=float)
        r_raw, p_raw = _raw(av, bv)
        r_p, p_p, lo, hi = _partial(table, a, b, id_col, "pearson")
        r_s, p_s, _, _ = _partial(table, a, b, id_col, "spearman")
        r_n, p_n = _nonlinear(av, bv, z, df)
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
                "ci95_low": lo,
                "ci95_high": hi,
                "r_partial_spearman": r_s,
                "p_partial_spearman": p_s,
                "r_nonlinear": r_n,
                "p_nonlinear": p_n,
            }
        )
    return out


def _classify(r: np.ndarray, p_adj: np.ndarray, alpha: float) -> np.ndarray:
    """``"positive"``/``"negative"`` by the sign of ``r`` where ``p_adj < alpha``, else ``"null"``
    (NaN ``r`` or ``p_adj`` included)."""
    significant = np.nan_to_num(p_adj, nan=1.0) < alpha
    return np.where(significant & (r > 0), "positive", np.where(significant & (r < 0), "negative", "null"))


def pair_table(scores: pd.DataFrame, alpha: float = 0.05, df: int = 3) -> pd.DataFrame:
    """Per run and unordered pair of OOD sets ``(ood_a, ood_b)`` (``ood_a < ood_b``): how the
    two OOD accuracies co-vary over the run's checkpoints. Columns :data:`PAIR_COLUMNS`:

    ``n``
        number of checkpoints;
    ``r_raw``, ``p_raw``
        Pearson correlation of the two OOD columns (:func:`scipy.stats.pearsonr`);
    ``r_partial``, ``p_partial``, ``ci95_low``, ``ci95_high``
        ``pingouin.partial_corr(data=wide, x=ood_a, y=ood_b, covar=id, method="pearson")``:
        the correlation of the residuals of both OOD columns after OLS on ``[1, id]``, its
        p-value (``n - 3`` degrees of freedom) and parametric 95% CI (pingouin's Fisher-z
        interval, taken from :func:`pingouin.compute_esci` at full precision because
        ``partial_corr`` rounds its ``CI95`` column to 2 decimals for display);
    ``r_partial_spearman``, ``p_partial_spearman``
        the same with ``method="spearman"`` (on ranks);
    ``r_nonlinear``, ``p_nonlinear``
        correlation of the residuals of both OOD columns after the non-linear control
        (:func:`residualise` with ``kind="spline"``, ``df``); the p-value adjusts the degrees of
        freedom for the fit (``n - q - 1`` for a design of rank ``q``, see :func:`_nonlinear`);
    ``p_partial_holm``, ``p_partial_bh``
        ``p_partial`` adjusted across the pairs of the run with
        ``pingouin.multicomp(method="holm")`` and ``method="fdr_bh"`` (NaN p-values stay NaN
        and are not counted in the family);
    ``sign``
        ``"positive"`` or ``"negative"`` (the sign of ``r_partial``) when
        ``p_partial_holm < alpha``, else ``"null"``.

    Degenerate (constant, or exactly ID-determined) columns give NaN correlations and the
    sign ``"null"``, see the module notes. Rows are ordered by model, run, then pair. Raises
    :class:`AnalysisError` as :func:`wide` does for any run, and for ``alpha`` outside (0, 1).
    """
    require_columns(scores, REQUIRED_COLUMNS, "scores table", AnalysisError)
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0.0 < float(alpha) < 1.0:
        raise AnalysisError(f"pair_table: alpha must be a number in (0, 1), got {alpha!r}")
    alpha = float(alpha)
    if scores.empty:
        raise AnalysisError("scores table: no rows")
    if scores["run"].isna().any():
        raise AnalysisError("scores table: some rows have no run")

    frames: list[pd.DataFrame] = []
    runs = scores[["model", "run"]].drop_duplicates()
    order = sorted(runs.itertuples(index=False), key=lambda t: (str(t.model), str(t.run)))
    seen: set[Hashable] = set()
    for _model, run in order:
        if run in seen:
            continue  # wide() already rejects a run that belongs to two models
        seen.add(run)
        table = wide(scores, run)
        part = pd.DataFrame(_run_pairs(table, df))
        p = part["p_partial"].to_numpy(dtype=float)
        part["p_partial_holm"] = pg.multicomp(p, alpha=alpha, method="holm")[1]
        part["p_partial_bh"] = pg.multicomp(p, alpha=alpha, method="fdr_bh")[1]
        part["sign"] = _classify(
            part["r_partial"].to_numpy(dtype=float), part["p_partial_holm"].to_numpy(dtype=float), alpha
        )
        frames.append(part)
    out = pd.concat(frames, ignore_index=True)
    return out[list(PAIR_COLUMNS)]


# --------------------------------------------------------------------------- summary


def summary(pairs: pd.DataFrame) -> pd.DataFrame:
    """Per model (sorted): ``n_pairs`` (pairs over all its runs) and the shares of pairs whose
    ``sign`` is ``"positive"``, ``"negative"`` and ``"null"`` (the three sum to 1).

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
