"""SAGO statistics: per-prompt instability on the behaviour axes, pooled into SGS.

The input is the *deltas* table: one row per (model, dataset, prompt_id, variant_id) holding
the six signed axis deltas of a variant's response against the baseline response, the
variant's family / kind / position / strength, and ``flipped`` (the response text differs
from the baseline response).

The pipeline is

1. :func:`normalise` divides each axis by its scale ``R[axis]`` so the axes are comparable;
2. :func:`prompt_instability` takes, per prompt and axis, the root mean square (RMS) of the
   normalised deltas over that prompt's variants, and the prompt's flip rate;
3. :func:`dataset_sgs` and :func:`total_sgs` average the per-prompt values into the
   stability-gap score (SGS) per (model, dataset) and per model;
4. :func:`ttests` asks, per group, axis and tolerance ``eps``, whether the mean per-prompt
   instability exceeds ``eps`` (one-sided one-sample t-test);
5. :func:`breakdown` gives the RMS per variant family / kind / position / strength.

Baseline rows (``family == "baseline"``) are the reference itself, not variants: they are
excluded from every statistic. An axis that a source cannot observe (an API model has no
activations) is missing (NaN) on every row of its (model, dataset): it stays NaN through the
per-prompt RMS, the SGS and the t-tests (``n`` = 0, no marker), and the other axes are computed
as usual; :func:`unobservable_axes` lists such cells. An axis missing on some rows of a
(model, dataset) only is an error naming them (:func:`prompt_instability`).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import stats as _sps

from shiftwork.checks import require_columns

AXES: tuple[str, ...] = ("Act", "BLEU", "BERT", "Prob", "Ent", "MR")
"""The behaviour axes, in table order."""

DEFAULT_R: dict[str, float] = {
    "Act": 2.0,
    "BLEU": 100.0,
    "BERT": 1.0,
    "Ent": 10.0,
    "Prob": 250.0,
    "MR": 1.0,
}
"""Default per-axis scales: a delta of ``R[axis]`` on an axis normalises to 1."""

BASELINE = "baseline"
PROMPT_KEYS: tuple[str, ...] = ("model", "dataset", "prompt_id")
BREAKDOWN_KEYS: tuple[str, ...] = ("model", "family", "kind", "position", "strength")


def _require_no_na(df: pd.DataFrame, columns: Iterable[str], what: str) -> None:
    """Raise a ValueError naming the first of ``columns`` that holds a missing value."""
    for c in columns:
        if df[c].isna().any():
            raise ValueError(f"{what}: column '{c}' has missing values")


def _numeric_axes(df: pd.DataFrame, what: str) -> pd.DataFrame:
    """A copy of ``df`` with the axis columns as floats; ValueError naming a non-numeric one."""
    out = df.copy()
    for axis in AXES:
        try:
            out[axis] = pd.to_numeric(out[axis], errors="raise").astype(float)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{what}: axis column '{axis}' is not numeric ({exc})") from None
    return out


def _variants(df: pd.DataFrame, what: str) -> pd.DataFrame:
    """The non-baseline rows of ``df`` (the variants); ``family`` must be present and complete."""
    require_columns(df, ["family"], what)
    _require_no_na(df, ["family"], what)
    return df[df["family"].astype(str) != BASELINE]


def _flags(series: pd.Series, what: str) -> pd.Series:
    """``series`` as booleans; ValueError naming ``flipped`` for missing or non-boolean values."""
    if series.isna().any():
        raise ValueError(f"{what}: column 'flipped' has missing values")
    if series.dtype == bool:
        return series
    allowed = {True, False}
    bad = [v for v in pd.unique(series) if v not in allowed]
    if bad:
        raise ValueError(f"{what}: column 'flipped' must be boolean, found {bad[:5]}")
    return series.astype(bool)


def normalise(deltas: pd.DataFrame, R: Mapping[str, float] = DEFAULT_R) -> pd.DataFrame:
    """A copy of ``deltas`` with each axis column divided by ``R[axis]``.

    Every row is kept, baseline rows included (later steps drop them). ``R`` must give a
    finite positive scale for each of :data:`AXES` and name no other axis; a missing,
    unknown, non-numeric or non-positive entry raises a ValueError naming it, as does a
    missing or non-numeric axis column in ``deltas``.
    """
    require_columns(deltas, AXES, "normalise(deltas)")
    missing = [a for a in AXES if a not in R]
    if missing:
        raise ValueError(f"normalise: R lacks scale(s) for axis/axes {missing}")
    unknown = [k for k in R if k not in AXES]
    if unknown:
        raise ValueError(f"normalise: R names unknown axis/axes {unknown}; expected {list(AXES)}")
    scales: dict[str, float] = {}
    for axis in AXES:
        value = R[axis]
        try:
            scale = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"normalise: R['{axis}'] must be a number, got {value!r}") from None
        if not math.isfinite(scale) or scale <= 0:
            raise ValueError(f"normalise: R['{axis}'] must be finite and positive, got {value!r}")
        scales[axis] = scale
    out = _numeric_axes(deltas, "normalise(deltas)")
    for axis in AXES:
        out[axis] = out[axis] / scales[axis]
    return out


def unobservable_by_table(deltas: pd.DataFrame) -> pd.DataFrame:
    """Per (model, dataset), the axes missing (NaN) on every one of its rows.

    Columns: model, dataset, axis (one row per unobservable axis, in :data:`AXES` order; none
    when every axis is observed). Raises ValueError naming the rows when an axis is missing on
    some rows of a (model, dataset) only.
    """
    what = "unobservable_axes(deltas)"
    keys = ["model", "dataset"]
    require_columns(deltas, [*keys, *AXES], what)
    _require_no_na(deltas, keys, what)
    values = _numeric_axes(deltas, what)
    rows = []
    for key, group in values.groupby(keys, sort=True):
        for axis in AXES:
            miss = group[axis].isna()
            if miss.all():
                rows.append({"model": key[0], "dataset": key[1], "axis": axis})
            elif miss.any():
                bad = group.loc[miss]
                name = "variant_id" if "variant_id" in bad.columns else "prompt_id"
                shown = sorted(map(str, bad[name]))[:10] if name in bad.columns else list(bad.index[:10])
                raise ValueError(
                    f"{what}: axis '{axis}' is missing on {int(miss.sum())} of {len(group)} rows of model "
                    f"{key[0]!r}, dataset {key[1]!r} ({name}s {shown}); an axis must be observed on every "
                    "row of a model x dataset or on none"
                )
    return pd.DataFrame(rows, columns=["model", "dataset", "axis"])


def prompt_instability(normalised: pd.DataFrame) -> pd.DataFrame:
    """Per (model, dataset, prompt_id): the RMS of each axis over the prompt's variants.

    For prompt ``p`` and axis ``a`` the value is ``sqrt(mean(x**2))`` over the normalised
    deltas ``x`` of ``p``'s non-baseline rows (NaN values skipped). Also returned:
    ``n_variants``, the number of non-baseline rows, and ``flip_rate``, the share of them
    with ``flipped`` true. A prompt with only a baseline row has nothing to measure and gets
    no row. Columns: model, dataset, prompt_id, the axes, n_variants, flip_rate; sorted by key.
    """
    what = "prompt_instability(normalised)"
    require_columns(normalised, [*PROMPT_KEYS, "family", "flipped", *AXES], what)
    _require_no_na(normalised, PROMPT_KEYS, what)
    unobservable_by_table(normalised)
    variants = _numeric_axes(_variants(normalised, what), what)
    keys = list(PROMPT_KEYS)
    columns = [*keys, *AXES, "n_variants", "flip_rate"]
    if variants.empty:
        return pd.DataFrame({c: pd.Series(dtype=object if c in keys else float) for c in columns})
    squares = variants[keys].copy()
    for axis in AXES:
        squares[axis] = variants[axis] ** 2
    squares["n_variants"] = 1
    squares["flip_rate"] = _flags(variants["flipped"], what).astype(float)
    grouped = squares.groupby(keys, sort=True)
    out = grouped[list(AXES)].mean().apply(np.sqrt)
    out["n_variants"] = grouped["n_variants"].sum().astype(int)
    out["flip_rate"] = grouped["flip_rate"].mean()
    return out.reset_index()[columns]


def _check_per_prompt(per_prompt: pd.DataFrame, keys: Sequence[str], what: str) -> None:
    require_columns(per_prompt, [*keys, *AXES], what)
    _require_no_na(per_prompt, keys, what)


def _pool(per_prompt: pd.DataFrame, keys: list[str], what: str) -> pd.DataFrame:
    """Mean over prompts of each axis (and of ``flip_rate`` when present) per ``keys``."""
    _check_per_prompt(per_prompt, keys, what)
    values = list(AXES) + (["flip_rate"] if "flip_rate" in per_prompt.columns else [])
    grouped = per_prompt.groupby(keys, sort=True)
    out = grouped[values].mean()
    out["n_prompts"] = grouped.size().astype(int)
    return out.reset_index()[[*keys, *values, "n_prompts"]]


def dataset_sgs(per_prompt: pd.DataFrame) -> pd.DataFrame:
    """SGS per (model, dataset): the mean over its prompts of each axis's per-prompt RMS.

    Columns: model, dataset, the axes, ``flip_rate`` (the mean per-prompt flip rate, present
    when ``per_prompt`` has that column; :func:`flip_rates` gives it alone) and ``n_prompts``.
    """
    return _pool(per_prompt, ["model", "dataset"], "dataset_sgs(per_prompt)")


def total_sgs(per_prompt: pd.DataFrame) -> pd.DataFrame:
    """SGS per model: the mean over all its prompts, pooled across datasets.

    Every prompt weighs the same, so a dataset with more kept prompts weighs more: this is
    *not* the mean of the per-dataset SGS when datasets keep different numbers of prompts.
    Columns: model, the axes, ``flip_rate`` (when present in ``per_prompt``), ``n_prompts``.
    """
    return _pool(per_prompt, ["model"], "total_sgs(per_prompt)")


def flip_rates(per_prompt: pd.DataFrame) -> pd.DataFrame:
    """Per (model, dataset): the mean over prompts of the per-prompt flip rate.

    The same numbers appear as the ``flip_rate`` column of :func:`dataset_sgs`; this function
    returns them alone. Columns: model, dataset, flip_rate, n_prompts.
    """
    what = "flip_rates(per_prompt)"
    keys = ["model", "dataset"]
    require_columns(per_prompt, [*keys, "flip_rate"], what)
    _require_no_na(per_prompt, keys, what)
    grouped = per_prompt.groupby(keys, sort=True)
    out = grouped[["flip_rate"]].mean()
    out["n_prompts"] = grouped.size().astype(int)
    return out.reset_index()


def significance_marker(p: float) -> str:
    """``"***"`` for p < 0.001, ``"**"`` for p < 0.01, ``"*"`` for p < 0.05, else ``""`` (NaN too)."""
    if p is None or not np.isfinite(p):
        return ""
    if p < 0.001:
        return "***"
    if p < 0.01:
        return "**"
    if p < 0.05:
        return "*"
    return ""


def _eps_list(eps_values: float | Iterable[float]) -> list[float]:
    values = [eps_values] if np.isscalar(eps_values) else list(eps_values)
    if not values:
        raise ValueError("ttests: eps_values is empty")
    out = []
    for e in values:
        try:
            f = float(e)
        except (TypeError, ValueError):
            raise ValueError(f"ttests: eps_values holds a non-number {e!r}") from None
        if not math.isfinite(f):
            raise ValueError(f"ttests: eps_values holds a non-finite value {e!r}")
        out.append(f)
    return out


def one_sided_ttest(sample: Sequence[float] | np.ndarray, eps: float) -> tuple[float, float, float, int]:
    """``(mean, t, p, n)`` of the test of H1: mean > ``eps`` on ``sample`` (NaN values dropped).

    Uses ``scipy.stats.ttest_1samp(x, eps, alternative="greater")``, as the method does. With
    fewer than two values the test is undefined: ``t`` and ``p`` are NaN (``mean`` is NaN for an
    empty sample), as in the method. A constant sample (all values equal, zero variance) is
    decided by its value ``c``: ``c > eps`` gives t = +inf, p = 0; ``c < eps`` gives t = -inf,
    p = 1; ``c == eps`` gives t = NaN (0 / 0), p = 1. These are the limits scipy reaches
    (scipy gives p = 0 or 1 for such samples too, but from a mean rounded in floating point:
    ``[0.05] * 3`` against 0.05 gives it p = 0.146), so every prompt unstable by the same amount
    keeps its significance marker.
    """
    x = np.asarray(sample, dtype=float)
    x = x[~np.isnan(x)]
    n = int(x.size)
    if n and np.all(x == x[0]):
        c = float(x[0])
        if n < 2:
            return c, float("nan"), float("nan"), n
        if c > eps:
            return c, float("inf"), 0.0, n
        return c, (float("-inf") if c < eps else float("nan")), 1.0, n
    mean = float(x.mean()) if n else float("nan")
    if n < 2:
        return mean, float("nan"), float("nan"), n
    res = _sps.ttest_1samp(x, eps, alternative="greater")
    return mean, float(res.statistic), float(res.pvalue), n


def ttests(
    per_prompt: pd.DataFrame,
    eps_values: float | Iterable[float],
    by: Sequence[str] = ("model",),
) -> pd.DataFrame:
    """One-sided one-sample t-tests of the per-prompt instability against each ``eps``.

    For each group of ``per_prompt`` by the columns ``by`` (``["model"]`` or
    ``["model", "dataset"]``), each axis and each ``eps``: H0 mean = eps against
    H1 mean > eps, on the group's per-prompt values of that axis (NaN values dropped), with
    ``scipy.stats.ttest_1samp(x, eps, alternative="greater")``.

    Returns a long table with columns ``*by, axis, eps, mean, t, p, n, marker``; ``marker``
    is :func:`significance_marker` of ``p``. When a group has fewer than two values on an
    axis (an unobservable axis has none), the test is undefined: ``t`` and ``p`` are NaN and
    ``marker`` is ``""`` (no error is raised). All values equal: see :func:`one_sided_ttest`.
    """
    what = "ttests(per_prompt)"
    if isinstance(by, str):
        by = [by]
    by = list(by)
    if not by:
        raise ValueError("ttests: argument 'by' names no column")
    _check_per_prompt(per_prompt, by, what)
    eps_list = _eps_list(eps_values)
    rows = []
    for key, group in per_prompt.groupby(by, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        for axis in AXES:
            sample = pd.to_numeric(group[axis], errors="coerce").to_numpy(dtype=float)
            for eps in eps_list:
                mean, t, p, n = one_sided_ttest(sample, eps)
                rows.append(
                    {
                        **dict(zip(by, key)),
                        "axis": axis,
                        "eps": eps,
                        "mean": mean,
                        "t": t,
                        "p": p,
                        "n": n,
                        "marker": significance_marker(p),
                    }
                )
    columns = [*by, "axis", "eps", "mean", "t", "p", "n", "marker"]
    return pd.DataFrame(rows, columns=columns)


def breakdown(normalised: pd.DataFrame) -> pd.DataFrame:
    """RMS of the normalised deltas per (model, family, kind, position, strength) and axis.

    Pools every (prompt, variant) row of the group, across datasets; baseline rows are
    excluded. Missing ``kind`` / ``position`` / ``strength`` values form their own group
    (they are not dropped). Long format with columns model, family, kind, position,
    strength, axis, rms, n, where ``n`` counts the non-missing values the RMS was taken over
    (the group's row count when nothing is missing). Sorted by the keys, axes in
    :data:`AXES` order.
    """
    what = "breakdown(normalised)"
    keys = list(BREAKDOWN_KEYS)
    require_columns(normalised, [*keys, *AXES], what)
    _require_no_na(normalised, ["model"], what)
    variants = _numeric_axes(_variants(normalised, what), what)
    columns = [*keys, "axis", "rms", "n"]
    if variants.empty:
        return pd.DataFrame(columns=columns)
    squares = variants[keys].copy()
    for axis in AXES:
        squares[axis] = variants[axis] ** 2
    grouped = squares.groupby(keys, sort=True, dropna=False)
    rms = grouped[list(AXES)].mean().apply(np.sqrt)
    counts = grouped[list(AXES)].count()
    long_rms = rms.reset_index().melt(id_vars=keys, var_name="axis", value_name="rms")
    long_n = counts.reset_index().melt(id_vars=keys, var_name="axis", value_name="n")
    out = long_rms.assign(n=long_n["n"].astype(int).to_numpy())
    out["_axis_order"] = out["axis"].map({a: i for i, a in enumerate(AXES)})
    out = out.sort_values([*keys, "_axis_order"], na_position="last", kind="stable")
    return out.drop(columns="_axis_order").reset_index(drop=True)[columns]


SIGNIFICANCE_LEVELS: tuple[float, ...] = (0.05, 0.01, 0.001)
"""The p-value levels the significance counts report, as the table markers do."""
ALL = "all"
"""The group value of a row that pools every group (the overall row of a count table)."""


def significance_counts(tests: pd.DataFrame, group: str) -> pd.DataFrame:
    """How many test cells are significant, per value of ``group`` and per eps, and over all.

    ``tests`` is :func:`ttests` output (any ``by``): each row is one cell of a table (a model x
    axis, or a model x dataset x axis). ``group`` is the column to count by (``"model"`` or
    ``"axis"``). A cell counts when its axis was observed (``n > 0``): an axis that is entirely
    missing for a model (closed API models have no Act or Prob) is no cell at all, rather than a
    cell that failed. A cell whose test is undefined (fewer than two values, zero variance)
    counts as a cell that is not significant.

    Columns: ``group``, eps, n_cells, n_p05, n_p01, n_p001 (cells with p under 0.05, 0.01,
    0.001). One row per group value and eps, sorted, then a row per eps with ``group`` =
    :data:`ALL` summing them.
    """
    what = "significance_counts(tests)"
    require_columns(tests, [group, "eps", "p", "n"], what)
    _require_no_na(tests, [group, "eps"], what)
    cells = tests[pd.to_numeric(tests["n"], errors="coerce").fillna(0) > 0]
    p = pd.to_numeric(cells["p"], errors="coerce").to_numpy(dtype=float)
    flags = pd.DataFrame({group: cells[group].to_numpy(), "eps": cells["eps"].astype(float).to_numpy()})
    flags["n_cells"] = 1
    names = [f"n_p{str(level)[2:]}" for level in SIGNIFICANCE_LEVELS]
    for name, level in zip(names, SIGNIFICANCE_LEVELS):
        flags[name] = np.nan_to_num(p, nan=1.0) < level
    columns = [group, "eps", "n_cells", *names]
    eps_values = sorted(tests["eps"].astype(float).unique())
    rows = []
    for key in sorted(tests[group].astype(str).unique()):
        for eps in eps_values:
            part = flags[(flags[group].astype(str) == key) & np.isclose(flags["eps"], eps)]
            rows.append({group: key, "eps": eps, **{c: int(part[c].sum()) for c in ["n_cells", *names]}})
    for eps in eps_values:
        part = flags[np.isclose(flags["eps"], eps)]
        rows.append({group: ALL, "eps": eps, **{c: int(part[c].sum()) for c in ["n_cells", *names]}})
    return pd.DataFrame(rows, columns=columns)


STRENGTH_KEYS: tuple[str, ...] = ("model", "family", "kind", "position", "strength")
POOLED = "pooled"
"""The axis value of a strength-curve row that pools the axes (their mean, per prompt)."""


def strength_curves(normalised: pd.DataFrame) -> pd.DataFrame:
    """Instability against variant strength: per (model, family, kind, position, strength) and axis,
    the mean over prompts of each prompt's RMS over its variants of that setting.

    A prompt is (dataset, prompt_id); its value for a setting is the RMS of its normalised deltas
    over the setting's variants (usually one). Per axis, the prompts with a value are pooled
    across datasets into ``mean``, ``sd`` (ddof 1), ``sem`` = sd / sqrt(n) and ``n_prompts``;
    ``sd`` and ``sem`` are NaN with fewer than two prompts. The axis :data:`POOLED` takes, per
    prompt, the mean of its axis values that are present, then pools prompts the same way. An
    axis with no value in a setting (an axis the model cannot observe) has ``n_prompts`` 0 and a
    NaN mean, never 0. Columns: model, family, kind, position, strength, axis, mean, sd, sem,
    n_prompts; baseline rows are excluded; axes in :data:`AXES` order, then ``pooled``.
    """
    what = "strength_curves(normalised)"
    keys = list(STRENGTH_KEYS)
    prompt = ["dataset", "prompt_id"]
    require_columns(normalised, [*keys, *prompt, *AXES], what)
    _require_no_na(normalised, ["model", *prompt], what)
    variants = _numeric_axes(_variants(normalised, what), what)
    columns = [*keys, "axis", "mean", "sd", "sem", "n_prompts"]
    if variants.empty:
        return pd.DataFrame(columns=columns)
    squares = variants[keys + prompt].copy()
    for axis in AXES:
        squares[axis] = variants[axis] ** 2
    per_prompt = squares.groupby(keys + prompt, sort=True, dropna=False)[list(AXES)].mean().apply(np.sqrt)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", category=RuntimeWarning)  # a prompt with no axis value
        per_prompt[POOLED] = np.nanmean(per_prompt[list(AXES)].to_numpy(dtype=float), axis=1)
    rows = []
    for key, group in per_prompt.groupby(level=list(range(len(keys))), sort=True, dropna=False):
        for axis in [*AXES, POOLED]:
            x = group[axis].to_numpy(dtype=float)
            x = x[np.isfinite(x)]
            n = int(x.size)
            sd = float(np.std(x, ddof=1)) if n > 1 else float("nan")
            rows.append(
                {
                    **dict(zip(keys, key)),
                    "axis": axis,
                    "mean": float(x.mean()) if n else float("nan"),
                    "sd": sd,
                    "sem": sd / math.sqrt(n) if n > 1 else float("nan"),
                    "n_prompts": n,
                }
            )
    return pd.DataFrame(rows, columns=columns)
