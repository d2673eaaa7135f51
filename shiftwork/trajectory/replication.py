"""The paper's claims tested across runs: seeds of one model as its replicates, models against each
other.

A single run's pair analysis says whether two OOD sets co-move over that run's checkpoints. The
paper's claims are about models: (a) raw OOD-OOD correlations are high and mostly vanish once ID
accuracy is controlled; (b) the signs and sizes of the ID-controlled correlations differ between
models ("robustness fingerprints"); (c) early checkpoints align more than late ones. Each needs
runs as its units. :func:`claim_table` tests each over the runs of a pairs table (and of its
early/late window table), with every run's correlation on the Fisher-z scale
``z = atanh(r)``:

``raw_vs_partial`` (a)
    per run, the mean over its pairs of ``|z_raw|`` and of ``|z_primary|``; their difference is
    tested with a paired Student t over the runs (per model and over all runs). ``estimate`` is
    the share of the raw coupling that the ID control removes,
    ``1 - mean(r_primary^2) / mean(r_raw^2)`` over the scope's pairs and runs.
``between_models`` (b)
    per OOD pair, the runs' ``z_primary`` grouped by model: a one-way ANOVA across the models
    (with two models, Student's pooled-variance t squared), so that the seed-to-seed spread
    within a model is the error the difference between models is tested against. Holm over the
    pairs. ``estimate`` is the largest minus the smallest model mean of ``r_primary``. Given a
    null ``reference`` (:func:`null_reference`), each run's ``z_primary`` is first standardised
    by the null fitted to that run, ``(z - null_mean) / null_sd``: what the ANOVA then compares
    is each model's coupling beyond what its runs' shapes (ID trajectory, lean, levels, item
    counts) give a pair with no coupling. Without it, two models whose nulls differ (a pair that
    the lean drives in one model's runs and not in the other's) differ under the null too, and
    the test is not calibrated.
``early_vs_late`` (c)
    per run, the mean over its pairs of ``z_early - z_late`` (the primary correlation in the first
    and the second half of the run's checkpoints); a one-sample Student t over the runs that it
    is 0 (per model and over all runs). ``estimate`` is that mean difference (positive: early
    checkpoints align more).

A test without the runs it needs (a model with one run, one model only, no run with windows) is a
row with NaN statistics and its ``reason``. Pairs whose primary correlation is undefined in a run
(a degenerate series) leave that run out of the pair's test.

Calibration
-----------
:func:`calibrate_claims` draws, for each replicate, one null run for every real run from the
null fitted to it (:mod:`shiftwork.trajectory.null`: its ID trajectory, lean, autocorrelation,
levels and item counts, with no coupling of any two sets), runs the same pair and window analyses
and the same three tests on them, and reports how often each test is significant: for (b) the
family-wise false-positive rate over the pairs after Holm (the models' nulls differ in every way
the real runs do, so a between-model difference that the runs' shapes alone produce counts as a
false positive), for (c) the false-positive rate of the test over all runs; for (a), whose null
is not "no difference" (ID drives the raw correlations of a null run too), the mean share the
null runs give, the reference the real share is read against. With a planted coupling of size
``sd`` (a shared log-odds component, :class:`~shiftwork.trajectory.null.Coupling`) on one pair in
the first model's runs only, replicate ``k`` on pair ``k mod pairs``, it reports the power of (b).
The same null replicates give the reference (b) is standardised by: the null replicates' own tests
use it with their replicate left out, the planted ones and the real runs use all of it.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Hashable, Sequence

import numpy as np
import pandas as pd
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests

from shiftwork.reports.tables import to_markdown
from shiftwork.seeding import rng_for
from shiftwork.trajectory.analysis import MIN_CHECKPOINTS, PairOptions, pair_table, sorted_mixed
from shiftwork.trajectory.calibration import exact_interval, run_id_set
from shiftwork.trajectory.null import Coupling, NullModel, fit_null, scores_frame, simulate_runs
from shiftwork.trajectory.primary import pair_label, primary_columns
from shiftwork.trajectory.windows import split_steps, window_table

__all__ = [
    "CLAIMS",
    "CLAIM_COLUMNS",
    "CLAIM_CALIBRATION_COLUMNS",
    "Calibration",
    "calibrate_claims",
    "claim_table",
    "null_reference",
    "run_statistics",
]

CLAIMS: tuple[str, ...] = ("raw_vs_partial", "between_models", "early_vs_late")
"""The claims :func:`claim_table` tests (module notes)."""

ALL = "all runs"
"""The ``scope`` of a test over every run."""

CLAIM_COLUMNS: tuple[str, ...] = (
    "claim",
    "scope",
    "n_runs",
    "n_models",
    "estimate",
    "detail",
    "test",
    "statistic",
    "dof",
    "p",
    "p_holm",
    "significant",
    "reason",
)
"""Columns of :func:`claim_table`: the ``claim`` (:data:`CLAIMS`) and its ``scope`` (a model, an
OOD pair ``"a–b"`` or :data:`ALL`), the runs and models it rests on, the ``estimate`` (module
notes), the per-model means behind it (``detail``), the ``test``, its ``statistic`` (t or F),
degrees of freedom (``dof``; the denominator's for F), ``p``, ``p_holm`` (over the pairs of
``between_models``; ``p`` elsewhere), whether ``p_holm`` is below alpha (``significant``) and
``reason`` (why the test is undefined; empty when computed)."""

CLAIM_CALIBRATION_COLUMNS: tuple[str, ...] = (
    "claim",
    "kind",
    "planted_sd",
    "replicates",
    "hits",
    "rate",
    "ci_low",
    "ci_high",
    "alpha",
    "calibrated",
)
"""Columns of :func:`calibrate_claims`: per claim, a ``kind`` ``"null"`` row (``rate``: the share
of null replicates in which the test is significant, Holm over the pairs for ``between_models``;
for ``raw_vs_partial`` ``kind`` is ``"null_mean"`` and ``rate`` the null runs' mean share, with
``hits`` and the interval empty) and, for ``between_models``, a ``"planted"`` row per coupling size
(``rate``: the power). ``calibrated``: the null rate is at most ``alpha``."""


def _z(r: pd.Series | np.ndarray) -> np.ndarray:
    return np.arctanh(np.clip(np.asarray(r, dtype=float), -0.999999, 0.999999))


REFERENCE_COLUMNS: tuple[str, ...] = (
    "run",
    "ood_a",
    "ood_b",
    "null_mean",
    "null_sd",
    "null_n",
    "null_sum",
    "null_sum_sq",
)
"""Columns of :func:`null_reference`: per real run and OOD pair, the mean, standard deviation and
count of ``atanh r_primary`` over the null replicates fitted to that run, and the sums behind
them (for the leave-one-out values of :func:`standardised`)."""


def _base_run(runs: pd.Series) -> pd.Series:
    """The real run a null replicate's run ``"<run>/<k>"`` was drawn for."""
    return runs.astype(str).str.rsplit("/", n=1).str[0]


def null_reference(null_pairs: pd.DataFrame) -> pd.DataFrame:
    """The null distribution of each real run's ``z_primary`` per OOD pair, from the pair tables
    of its null replicates (runs named ``"<run>/<k>"``): columns :data:`REFERENCE_COLUMNS`."""
    r_col, _ = primary_columns(null_pairs)
    z = pd.Series(_z(null_pairs[r_col]), index=null_pairs.index)
    data = pd.DataFrame(
        {"run": _base_run(null_pairs["run"]), "ood_a": null_pairs["ood_a"], "ood_b": null_pairs["ood_b"], "z": z}
    )
    data = data[np.isfinite(data["z"])].assign(z_sq=lambda d: d["z"] ** 2)
    out = data.groupby(["run", "ood_a", "ood_b"], sort=False).agg(
        null_mean=("z", "mean"),
        null_sd=("z", "std"),
        null_n=("z", "size"),
        null_sum=("z", "sum"),
        null_sum_sq=("z_sq", "sum"),
    )
    return out.reset_index()[list(REFERENCE_COLUMNS)]


def standardised(pairs: pd.DataFrame, reference: pd.DataFrame, leave_out: bool = False) -> np.ndarray:
    """Each row's ``z_primary`` of ``pairs`` standardised by its run's null (``reference``, a
    :func:`null_reference`): ``(z - null_mean) / null_sd``. A null replicate's run ``"<run>/<k>"``
    reads the reference of ``<run>``; with ``leave_out`` its own value is taken out of the mean
    and the sd first (it is one of the replicates the reference was made from). NaN where the
    reference has fewer than 3 values (2 after leaving one out) or no spread."""
    r_col, _ = primary_columns(pairs)
    z = _z(pairs[r_col])
    keys = pd.DataFrame(
        {
            "run": _base_run(pairs["run"]).to_numpy(),
            "ood_a": pairs["ood_a"].to_numpy(),
            "ood_b": pairs["ood_b"].to_numpy(),
        }
    )
    ref = keys.merge(reference, on=["run", "ood_a", "ood_b"], how="left")
    n = ref["null_n"].to_numpy(dtype=float)
    total, total_sq = ref["null_sum"].to_numpy(dtype=float), ref["null_sum_sq"].to_numpy(dtype=float)
    if leave_out:
        inside = np.isfinite(z)
        n = n - inside
        total = total - np.where(inside, z, 0.0)
        total_sq = total_sq - np.where(inside, z * z, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = total / n
        var = (total_sq - n * mean * mean) / (n - 1)
        sd = np.sqrt(np.clip(var, 0.0, None))
        out = (z - mean) / sd
    return np.where((n >= 3 - int(leave_out)) & (sd > 0), out, np.nan)


def run_statistics(pairs: pd.DataFrame, windows: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per run: ``model``, ``run``, the mean over its defined pairs of ``|z_raw|``,
    ``|z_primary|``, ``r_raw**2`` and ``r_primary**2``, and (with ``windows``) of ``z_early -
    z_late`` (``early_minus_late``; NaN without windows)."""
    r_col, _ = primary_columns(pairs)
    data = pairs[["model", "run"]].copy()
    data["abs_z_raw"] = np.abs(_z(pairs["r_raw"]))
    data["abs_z_primary"] = np.abs(_z(pairs[r_col]))
    data["r2_raw"] = pairs["r_raw"].to_numpy(dtype=float) ** 2
    data["r2_primary"] = pairs[r_col].to_numpy(dtype=float) ** 2
    defined = np.isfinite(data[["abs_z_raw", "abs_z_primary"]]).all(axis=1)
    out = data[defined].groupby(["model", "run"], sort=False).mean().reset_index()
    out["early_minus_late"] = np.nan
    if windows is not None and not windows.empty:
        diff = pd.Series(_z(windows["r_early"]) - _z(windows["r_late"]), index=windows.index)
        per_run = diff[np.isfinite(diff)].groupby(windows["run"]).mean()
        out["early_minus_late"] = out["run"].map(per_run)
    return out


def _row(claim: str, scope: str, runs: int, models: int, **values: object) -> dict:
    row = dict.fromkeys(CLAIM_COLUMNS, np.nan) | {"claim": claim, "scope": scope, "n_runs": runs}
    return row | {"n_models": models, "detail": "", "test": "", "reason": "", "significant": False} | values


def _one_sample(values: np.ndarray) -> tuple[float, float, float]:
    """``(t, dof, p)`` of the two-sided one-sample t-test that ``values`` have mean 0."""
    values = values[np.isfinite(values)]
    if len(values) < 2 or np.std(values) == 0.0:
        return np.nan, np.nan, np.nan
    result = sps.ttest_1samp(values, 0.0)
    return float(result.statistic), float(len(values) - 1), float(result.pvalue)


def _scopes(stats: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    models = sorted_mixed(stats["model"].unique().tolist())
    return [(str(m), stats[stats["model"] == m]) for m in models] + [(ALL, stats)]


def _raw_vs_partial(stats: pd.DataFrame, alpha: float) -> list[dict]:
    rows = []
    for scope, part in _scopes(stats):
        share = 1.0 - part["r2_primary"].mean() / part["r2_raw"].mean() if len(part) else np.nan
        t, dof, p = _one_sample((part["abs_z_raw"] - part["abs_z_primary"]).to_numpy(dtype=float))
        reason = "" if np.isfinite(p) else f"{len(part)} run(s); the paired test needs at least 2"
        detail = f"mean |r_raw| {np.tanh(part['abs_z_raw']).mean():.3f}, |r_primary| {np.tanh(part['abs_z_primary']).mean():.3f}"
        rows.append(
            _row("raw_vs_partial", scope, len(part), part["model"].nunique(), estimate=share, detail=detail)
            | {"test": "paired t: mean |z_raw| - mean |z_primary| over runs", "statistic": t, "dof": dof, "p": p}
            | {"p_holm": p, "significant": bool(np.isfinite(p) and p < alpha), "reason": reason}
        )
    return rows


def _between_models(
    pairs: pd.DataFrame, alpha: float, reference: pd.DataFrame | None = None, leave_out: bool = False
) -> list[dict]:
    r_col, _ = primary_columns(pairs)
    pairs = pairs.assign(_value=_z(pairs[r_col]) if reference is None else standardised(pairs, reference, leave_out))
    test = "one-way ANOVA of the runs' z_primary across models" + (
        "" if reference is None else ", each standardised by its run's null"
    )
    rows = []
    for (a, b), part in pairs.groupby(["ood_a", "ood_b"], sort=False):
        part = part[np.isfinite(part["_value"].to_numpy(dtype=float))]
        by_model = dict(list(part.groupby("model", sort=True)))
        groups = {m: g["_value"].to_numpy(dtype=float) for m, g in by_model.items()}
        r_means = {m: float(np.tanh(_z(g[r_col])).mean()) for m, g in by_model.items()}
        detail = "; ".join(
            f"{m}: r {r_means[m]:+.3f}, {'z' if reference is None else 'standardised z'} {np.mean(z):+.2f} "
            f"(sd {np.std(z, ddof=1) if len(z) > 1 else np.nan:.2f}, {len(z)} runs)"
            for m, z in groups.items()
        )
        means = list(r_means.values())
        usable = [z for z in groups.values() if len(z) >= 2]
        f, dof, p, reason = np.nan, np.nan, np.nan, ""
        if len(groups) < 2:
            reason = f"{len(groups)} model(s); the test needs at least 2"
        elif len(usable) < len(groups):
            reason = "a model has fewer than 2 runs with the pair defined; the test needs at least 2 each"
        elif all(np.std(z) == 0.0 for z in usable):
            reason = "no spread between the runs of any model"
        else:
            result = sps.f_oneway(*usable)
            f, p = float(result.statistic), float(result.pvalue)
            dof = float(sum(len(z) for z in usable) - len(usable))
        rows.append(
            _row("between_models", pair_label(a, b), len(part), len(groups), detail=detail)
            | {"estimate": max(means) - min(means) if means else np.nan, "statistic": f, "dof": dof, "p": p}
            | {"test": test, "reason": reason}
        )
    p = np.array([row["p"] for row in rows], dtype=float)
    finite = np.isfinite(p)
    if finite.any():
        adjusted = multipletests(p[finite], alpha=alpha, method="holm")[1]
        for row, value in zip([r for r, ok in zip(rows, finite) if ok], adjusted):
            row["p_holm"] = float(value)
            row["significant"] = bool(value < alpha)
    return rows


def _early_vs_late(stats: pd.DataFrame, alpha: float) -> list[dict]:
    rows = []
    for scope, part in _scopes(stats):
        values = part["early_minus_late"].to_numpy(dtype=float)
        t, dof, p = _one_sample(values)
        n = int(np.isfinite(values).sum())
        reason = "" if np.isfinite(p) else f"{n} run(s) with windows; the test needs at least 2"
        rows.append(
            _row(
                "early_vs_late", scope, n, part["model"].nunique(), estimate=float(np.nanmean(values)) if n else np.nan
            )
            | {"test": "one-sample t over runs: mean z_early - z_late = 0", "statistic": t, "dof": dof, "p": p}
            | {"p_holm": p, "significant": bool(np.isfinite(p) and p < alpha), "reason": reason}
        )
    return rows


def claim_table(
    pairs: pd.DataFrame,
    windows: pd.DataFrame | None,
    alpha: float = 0.05,
    reference: pd.DataFrame | None = None,
    leave_out: bool = False,
) -> pd.DataFrame:
    """The three claims (module notes) tested over the runs of ``pairs`` (a
    :func:`~shiftwork.trajectory.analysis.pair_table`) and ``windows`` (its
    :func:`~shiftwork.trajectory.windows.window_table`, or None): columns :data:`CLAIM_COLUMNS`.
    With a null ``reference`` (:func:`null_reference`) the between-model test reads each run's
    ``z_primary`` standardised by it (``leave_out``: :func:`standardised`)."""
    stats = run_statistics(pairs, windows)
    between = _between_models(pairs, alpha, reference, leave_out)
    rows = _raw_vs_partial(stats, alpha) + between + _early_vs_late(stats, alpha)
    out = pd.DataFrame(rows, columns=list(CLAIM_COLUMNS))
    out["n_runs"] = out["n_runs"].astype(np.int64)
    out["n_models"] = out["n_models"].astype(np.int64)
    out["significant"] = out["significant"].astype(bool)
    return out


def windows_possible(scores: pd.DataFrame) -> bool:
    """Whether every run of ``scores`` has the checkpoints the window analysis needs."""
    for _, part in scores.groupby("run"):
        early, late = split_steps(part["step"].unique().tolist())
        if min(len(early), len(late)) < MIN_CHECKPOINTS:
            return False
    return True


def _fitted_nulls(scores: pd.DataFrame, items: pd.DataFrame) -> list[tuple[Hashable, Hashable, NullModel, np.ndarray]]:
    """Per run of ``scores``: its model, the run, the null fitted to its ``items`` and the mask of
    the null's checkpoints that ``scores`` holds (those analysed)."""
    fitted = []
    for model_name, run in scores[["model", "run"]].drop_duplicates().itertuples(index=False):
        null = fit_null(items, run, run_id_set(scores, run))
        keep = np.isin(null.steps, scores.loc[scores["run"] == run, "step"].unique())
        fitted.append((model_name, run, null, keep))
    return fitted


def _null_scores(
    nulls: Sequence[tuple[Hashable, Hashable, NullModel, np.ndarray]],
    options: PairOptions,
    rng: np.random.Generator,
    replicates: int,
    planted: tuple[Hashable, Coupling] | None = None,
) -> pd.DataFrame:
    """One scores table holding ``replicates`` null runs of every fitted run of ``nulls``
    (:func:`_fitted_nulls`; run ``"<run>/<k>"``) at its analysed checkpoints; with ``planted`` =
    (model, coupling), the coupling is planted in that model's runs."""
    frames = []
    for model_name, run, null, keep in nulls:
        coupling = planted[1] if planted is not None and planted[0] == model_name else None
        sims = simulate_runs(null, rng, replicates, options.score, coupling)
        frame = scores_frame(sims[:, keep], null.sets, np.asarray(null.steps)[keep], model_name)
        frames.append(frame.assign(run=[f"{run}/{int(k[5:])}" for k in frame["run"]]))
    return pd.concat(frames, ignore_index=True)


def _analysed(frame: pd.DataFrame, options: PairOptions, windows: bool) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    quiet = dataclasses.replace(options, resamples=0)
    pairs = pair_table(frame, quiet)
    table = window_table(frame, **dataclasses.asdict(quiet)) if windows else None
    return pairs, table


def _by_replicate(table: pd.DataFrame | None) -> dict[int, pd.DataFrame]:
    """``table``'s rows per replicate ``k`` (its runs named ``"<run>/<k>"``); none for no table."""
    if table is None:
        return {}
    replicate = table["run"].str.rsplit("/", n=1).str[1].astype(int)
    return {int(k): part for k, part in table.groupby(replicate.to_numpy())}


@dataclasses.dataclass(frozen=True)
class Calibration:
    """What :func:`calibrate_claims` returns: the calibration ``table`` (columns
    :data:`CLAIM_CALIBRATION_COLUMNS`) and the null ``reference`` the between-model test is
    standardised by (:func:`null_reference`)."""

    table: pd.DataFrame
    reference: pd.DataFrame


def calibrate_claims(
    scores: pd.DataFrame,
    items: pd.DataFrame,
    options: PairOptions,
    replicates: int,
    seed: int,
    planted_sd: Sequence[float] = (),
) -> Calibration:
    """The calibration of :func:`claim_table` on null replicates of the runs of ``scores`` (module
    notes), and the null reference of the between-model test. ``scores`` is the table the
    analysis read (its checkpoints are those analysed); ``items`` the run's items the nulls are
    fitted to."""
    alpha = float(options.alpha)
    rng = rng_for("trajectory-replication", seed)
    windows = windows_possible(scores)
    nulls = _fitted_nulls(scores, items)
    pairs, table = _analysed(_null_scores(nulls, options, rng, replicates), options, windows)
    reference = null_reference(pairs)
    pair_reps = _by_replicate(pairs)
    window_reps = _by_replicate(table)
    between, early, shares = 0, 0, []
    for k in range(replicates):
        claims = claim_table(pair_reps[k], window_reps.get(k), alpha, reference, leave_out=True)
        claims = claims.set_index(["claim", "scope"])
        between += int(claims.loc["between_models", "significant"].any())
        early += int(bool(claims.loc[("early_vs_late", ALL), "significant"]))
        shares.append(float(claims.loc[("raw_vs_partial", ALL), "estimate"]))
    rows = [
        _cal_row("raw_vs_partial", "null_mean", 0.0, replicates, None, float(np.nanmean(shares)), alpha),
        _cal_row("between_models", "null", 0.0, replicates, between, between / replicates, alpha),
    ]
    if windows:
        rows.append(_cal_row("early_vs_late", "null", 0.0, replicates, early, early / replicates, alpha))
    models = sorted_mixed(scores["model"].unique().tolist())
    oods = sorted_mixed(scores.loc[scores["role"] == "ood", "testset"].unique().tolist())
    for sd in planted_sd:
        combos = list(itertools.combinations(oods, 2))
        hits = _planted_hits(nulls, options, rng, replicates, models[0], combos, sd, reference)
        rows.append(_cal_row("between_models", "planted", float(sd), replicates, hits, hits / replicates, alpha))
    calibrated = {row["claim"]: row["rate"] <= alpha for row in rows if row["kind"] == "null"}
    for row in rows:
        row["calibrated"] = calibrated.get(row["claim"])
    return Calibration(pd.DataFrame(rows, columns=list(CLAIM_CALIBRATION_COLUMNS)), reference)


def _planted_hits(
    nulls: Sequence[tuple[Hashable, Hashable, NullModel, np.ndarray]],
    options: PairOptions,
    rng: np.random.Generator,
    replicates: int,
    model: Hashable,
    pairs: Sequence[tuple[str, str]],
    sd: float,
    reference: pd.DataFrame,
) -> int:
    """How many of ``replicates`` replicates with a coupling of size ``sd`` planted in ``model``'s
    runs (on pair ``k mod pairs`` in replicate ``k``) find that pair's between-model test
    Holm-significant, standardised by the null ``reference``."""
    hits = 0
    for j, (a, b) in enumerate(pairs):
        count = len(range(j, replicates, len(pairs)))
        if count == 0:
            continue
        frame = _null_scores(nulls, options, rng, count, (model, Coupling(a, b, sd)))
        table, _ = _analysed(frame, options, windows=False)
        for part in _by_replicate(table).values():
            claims = claim_table(part, None, float(options.alpha), reference)
            planted = claims[(claims["claim"] == "between_models") & (claims["scope"] == pair_label(a, b))]
            hits += int(planted["significant"].any())
    return hits


def _cal_row(claim: str, kind: str, sd: float, replicates: int, hits: int | None, rate: float, alpha: float) -> dict:
    low, high = exact_interval(hits, replicates) if hits is not None else (np.nan, np.nan)
    return {
        "claim": claim,
        "kind": kind,
        "planted_sd": sd,
        "replicates": replicates,
        "hits": hits if hits is not None else pd.NA,
        "rate": rate,
        "ci_low": low,
        "ci_high": high,
        "alpha": alpha,
    }


# --------------------------------------------------------------------------- the report


def _null_rate(calibration: pd.DataFrame, claim: str, kind: str = "null") -> pd.Series | None:
    rows = calibration[(calibration["claim"] == claim) & (calibration["kind"] == kind)]
    return None if rows.empty else rows.iloc[0]


def _verdict(claims: pd.DataFrame, calibration: pd.DataFrame, claim: str, what: str) -> str:
    """Whether ``claim``'s significant tests are findings: significant, and the test's null rate at
    most alpha."""
    part = claims[claims["claim"] == claim]
    computed = part[part["reason"] == ""]
    if computed.empty:
        return f"- {what}: not tested ({part['reason'].iloc[0] if len(part) else 'no rows'})."
    hits = int(computed["significant"].sum())
    null = _null_rate(calibration, claim)
    if null is None:
        return f"- {what}: {hits} of {len(computed)} test(s) significant; no calibration."
    rate = f"false-positive rate {null['rate']:.3f} on {int(null['replicates'])} null replicates"
    if null["rate"] > null["alpha"]:
        return f"- {what}: {hits} of {len(computed)} test(s) significant, but the test is NOT calibrated ({rate} > alpha {null['alpha']:g}): none is a finding."
    found = "finding(s)" if hits else "findings: none"
    return f"- {what}: {hits} of {len(computed)} test(s) significant; the test is calibrated ({rate}), so these are {found}."


def replication_report(claims: pd.DataFrame, calibration: pd.DataFrame, scores: pd.DataFrame) -> str:
    """The Markdown page of the replication: the runs, each claim's tests, its calibration and what
    the runs show for it."""
    runs = (
        scores.drop_duplicates("run").groupby("model", sort=True)["run"].apply(lambda r: ", ".join(sorted(map(str, r))))
    )
    steps = scores.groupby("run")["step"].nunique()
    shown = ["scope", "n_runs", "estimate", "detail", "statistic", "dof", "p", "p_holm", "significant", "reason"]
    text = [
        "# Replication across runs",
        "",
        "The paper's claims tested with runs as the units (shiftwork.trajectory.replication): the seeds of a model are its "
        "replicates, and a difference between models is tested against the spread between seeds.",
        "",
        *[f"- {model}: {names}" for model, names in runs.items()],
        f"- checkpoints analysed per run: {', '.join(f'{run} {n}' for run, n in steps.items())}",
        "",
    ]
    sections = (
        (
            "raw_vs_partial",
            "(a) Raw against ID-controlled OOD-OOD correlations",
            "estimate: the share of the raw coupling the ID control removes, 1 - mean(r_primary^2) / mean(r_raw^2). "
            "The test: paired t over runs of each run's mean |z_raw| against its mean |z_primary| (z = atanh r).",
        ),
        (
            "between_models",
            "(b) Does a pair's ID-controlled correlation differ between models?",
            "Per OOD pair, each run's z_primary standardised by the null fitted to that run ((z - null mean) / null sd; "
            "replication_reference.parquet), grouped by model, one-way ANOVA across models (seed-to-seed spread as the "
            "error), Holm over the pairs. A difference is coupling beyond what each model's runs give a pair with none. "
            "estimate: the largest minus the smallest model mean of r_primary.",
        ),
        (
            "early_vs_late",
            "(c) Do early checkpoints align more than late ones?",
            "Per run, the mean over its pairs of z_early - z_late (the primary correlation in the first and the second "
            "half of its checkpoints); one-sample t over runs. estimate > 0: early checkpoints align more.",
        ),
    )
    for claim, title, note in sections:
        text += [
            f"## {title}",
            "",
            note,
            "",
            to_markdown(claims.loc[claims["claim"] == claim, shown].reset_index(drop=True)),
        ]
        rows = calibration[calibration["claim"] == claim]
        if not rows.empty:
            text += ["Calibration on null runs fitted to these runs (no coupling of any two sets):", ""]
            text += [to_markdown(rows.drop(columns=["claim"]).reset_index(drop=True))]
    text += ["## What these runs show", ""]
    reference = _null_rate(calibration, "raw_vs_partial", "null_mean")
    overall = claims[(claims["claim"] == "raw_vs_partial") & (claims["scope"] == ALL)]
    if len(overall) and np.isfinite(overall["estimate"].iloc[0]):
        share = overall["estimate"].iloc[0]
        against = (
            f" (null runs with no coupling beyond ID and the lean: {reference['rate']:.2f})"
            if reference is not None
            else ""
        )
        p, reason = overall["p"].iloc[0], overall["reason"].iloc[0]
        test = f"paired t p = {p:.3g}" if np.isfinite(p) else f"not tested ({reason})"
        text.append(f"- (a): the ID control removes a share {share:.2f} of the raw coupling{against}; {test}.")
    text.append(_verdict(claims, calibration, "between_models", "(b) pairs that differ between models"))
    text.append(
        _verdict(claims[claims["scope"] == ALL], calibration, "early_vs_late", "(c) early against late, over all runs")
    )
    return "\n".join(text) + "\n"
