"""Cross-model fingerprint: the primary partial r of every OOD pair, one row per model.

A model with several runs (seeds) gets the mean of its runs' primary r (see
:func:`shiftwork.trajectory.primary.primary_columns`), how many runs there are and how far
they spread. A cell counts as *agreed* (its ``sign`` is ``"positive"`` or ``"negative"``;
the heatmap marks it ``*``) when every run of the model that has the pair gives it that
same, Holm-significant sign class in the pairs table; one run that is ``"null"`` or of the
other sign makes the cell ``"null"``. With one run the rule is that run's own sign class.

A run whose primary r is NaN (a degenerate series: a constant or exactly ID-determined set, see
the notes of :mod:`shiftwork.trajectory.analysis`; its ``reason`` in the pairs table says
which) is left out of the mean, spread and range and counted in ``n_skipped``; it still counts
in ``n_runs`` and, being ``"null"``, makes the cell ``"null"``. A cell whose runs are all
skipped has NaN statistics, never an error.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from shiftwork.checks import require_columns
from shiftwork.trajectory.analysis import AnalysisError, sorted_mixed
from shiftwork.trajectory.primary import pair_label, primary_columns

__all__ = ["FINGERPRINT_COLUMNS", "fingerprint", "fingerprint_matrix"]

FINGERPRINT_COLUMNS: tuple[str, ...] = (
    "model",
    "ood_a",
    "ood_b",
    "pair",
    "n_runs",
    "n_skipped",
    "r_mean",
    "r_sd",
    "r_min",
    "r_max",
    "n_positive",
    "n_negative",
    "n_null",
    "sign",
)
"""Columns of :func:`fingerprint`, in order."""


def fingerprint(pairs: pd.DataFrame, by: Sequence[str] = ("model",)) -> pd.DataFrame:
    """Per model and OOD pair, over the model's runs (columns :data:`FINGERPRINT_COLUMNS`):

    ``pair``
        ``"ood_a–ood_b"`` (:func:`~shiftwork.trajectory.primary.pair_label`);
    ``n_runs``
        the runs of the model with a row for the pair;
    ``n_skipped``
        how many of them have a NaN primary r (undefined: a degenerate series) and are left out
        of the four statistics below;
    ``r_mean``, ``r_sd``, ``r_min``, ``r_max``
        the arithmetic mean, sample standard deviation (``ddof=1``; NaN with one finite value),
        minimum and maximum of the runs' primary r; runs whose r is NaN (undefined) are left
        out, and all four are NaN when every run's r is;
    ``n_positive``, ``n_negative``, ``n_null``
        how many of the runs have each sign class;
    ``sign``
        ``"positive"`` (``"negative"``) when all ``n_runs`` runs are ``"positive"``
        (``"negative"``), else ``"null"`` (see the module notes).

    ``by`` groups the runs more finely than by model: ``("model", "suite", "shots")`` (columns
    the pairs table then needs) aggregates only the seeds of one setting, and those key columns
    replace ``model`` at the front. Rows are ordered by the keys, then pair. Raises :class:`AnalysisError` for a table without
    the needed columns or rows, or with a run listed under two models or a pair listed twice
    in one run.
    """
    r_col, _ = primary_columns(pairs)
    keys = list(by)
    require_columns(pairs, [*keys, "model", "run", "ood_a", "ood_b", "sign"], "pairs table", AnalysisError)
    if pairs.empty:
        raise AnalysisError("pairs table: no rows")
    owners = pairs.groupby("run", sort=False)["model"].nunique()
    if (owners > 1).any():
        run = owners.index[owners > 1][0]
        raise AnalysisError(f"pairs table: run '{run}' is listed under several models")
    dup = pairs.duplicated(["run", "ood_a", "ood_b"], keep=False)
    if dup.any():
        row = pairs.loc[dup].iloc[0]
        raise AnalysisError(f"pairs table: run '{row['run']}' lists pair ('{row['ood_a']}', '{row['ood_b']}') twice")
    rows = []
    for (*key, a, b), group in pairs.groupby([*keys, "ood_a", "ood_b"], sort=False):
        r = group[r_col].to_numpy(dtype=float)
        skipped = int((~np.isfinite(r)).sum())
        r = r[np.isfinite(r)]
        counts = group["sign"].value_counts()
        n = int(len(group))
        agreed = next((s for s in ("positive", "negative") if counts.get(s, 0) == n), "null")
        rows.append(
            {
                **dict(zip(keys, key)),
                "ood_a": a,
                "ood_b": b,
                "pair": pair_label(a, b),
                "n_runs": n,
                "n_skipped": skipped,
                "r_mean": float(r.mean()) if r.size else np.nan,
                "r_sd": float(r.std(ddof=1)) if r.size > 1 else np.nan,
                "r_min": float(r.min()) if r.size else np.nan,
                "r_max": float(r.max()) if r.size else np.nan,
                "n_positive": int(counts.get("positive", 0)),
                "n_negative": int(counts.get("negative", 0)),
                "n_null": int(counts.get("null", 0)),
                "sign": agreed,
            }
        )
    out = pd.DataFrame(rows, columns=[*keys, *FINGERPRINT_COLUMNS[1:]])
    pair_order = sorted_mixed(list({(a, b) for a, b in zip(out["ood_a"], out["ood_b"])}))
    order = []
    for k in keys:
        values = sorted_mixed(out[k].unique().tolist())
        out[f"_{k}"] = out[k].map({m: i for i, m in enumerate(values)})
        order.append(f"_{k}")
    out["_p"] = [pair_order.index((a, b)) for a, b in zip(out["ood_a"], out["ood_b"])]
    return out.sort_values([*order, "_p"]).drop(columns=[*order, "_p"]).reset_index(drop=True)


def fingerprint_matrix(table: pd.DataFrame, column: str = "r_mean") -> pd.DataFrame:
    """The models x pairs matrix of ``column`` of a :func:`fingerprint` table: rows the models
    in the table's order, columns the pair labels in sorted (ood_a, ood_b) order; a pair a
    model lacks is NaN."""
    require_columns(table, ["model", "ood_a", "ood_b", "pair", column], "fingerprint table", AnalysisError)
    models = list(dict.fromkeys(table["model"]))
    labels = dict(zip(zip(table["ood_a"], table["ood_b"]), table["pair"]))
    columns = [labels[key] for key in sorted_mixed(list(labels))]
    return table.pivot(index="model", columns="pair", values=column).reindex(index=models, columns=columns)
