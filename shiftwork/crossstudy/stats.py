"""Stability along a training run: the stability study's per-prompt instability and SGS at every
checkpoint, and how each checkpoint differs from the run's first (step 0: the base model of a
fine-tuning run, the SFT organism of an RL run).

Every checkpoint of a run answers the same prompts and variants, so a change is tested per axis
with a paired t-test over prompts (per-prompt instability at the step minus at step 0), two-sided,
and Holm-adjusted across the run's later steps for each (set, axis)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
import pingouin as pg
from scipy import stats as sps

from shiftwork.checks import require_columns
from shiftwork.crossstudy import replies
from shiftwork.crossstudy.replies import CROSS_AXES
from shiftwork.stability import stats as sstats

AXES = sstats.AXES
POOLED = "all"
"""The ``dataset`` of SGS pooled over all of a run's sets (every prompt weighs the same)."""

CHANGE_COLUMNS = [
    "study",
    "run",
    "dataset",
    "axis",
    "step",
    "n",
    "sgs",
    "sgs_base",
    "change",
    "t",
    "p",
    "p_holm",
    "significant",
]


def per_prompt(deltas: pd.DataFrame, R: Mapping[str, float]) -> pd.DataFrame:
    """Per (run, step, set, prompt): each axis's RMS over the prompt's variants, normalised by
    ``R`` (:func:`shiftwork.stability.stats.prompt_instability`), and the flip rate. ``deltas``
    has a ``step`` column and the run in ``model``."""
    require_columns(deltas, ["model", "step", "dataset", "prompt_id", *AXES], "crossstudy deltas")
    parts = []
    for step, group in deltas.groupby("step", sort=True):
        table = sstats.prompt_instability(sstats.normalise(group.drop(columns="step"), R))
        table.insert(1, "step", int(step))
        parts.append(table)
    out = pd.concat(parts, ignore_index=True).rename(columns={"model": "run"})
    return out.sort_values(["run", "step", "dataset", "prompt_id"], kind="stable").reset_index(drop=True)


def per_prompt_by_kind(
    deltas: pd.DataFrame, generations: pd.DataFrame, runs: Mapping[str, Mapping[str, Any]], R: Mapping[str, float]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per-prompt instability with the axes that fit each checkpoint's replies and each run's
    ``study``, the replies' kinds): :func:`per_prompt` through
    :func:`shiftwork.crossstudy.replies.by_kind`, the kinds from ``generations`` and each run's
    ``answers`` in ``runs`` (none for free-form runs)."""
    answers = {run: list(spec.get("answers") or ()) for run, spec in runs.items()}
    kinds = replies.reply_kinds(generations, answers)
    table = replies.by_kind(per_prompt(deltas, R), kinds)
    table.insert(0, "study", table["run"].map(lambda r: runs[r]["study"]))
    return table, kinds


def _axes(per_prompt: pd.DataFrame) -> list[str]:
    """The cross-study axes ``per_prompt`` has (label consistency once the replies' kind is known)."""
    return [a for a in CROSS_AXES if a in per_prompt.columns]


def sgs(per_prompt: pd.DataFrame) -> pd.DataFrame:
    """SGS (the mean over prompts of each axis's per-prompt instability) and the mean flip rate per
    (study, run, step, set), and per (study, run, step) over all the run's prompts as set
    :data:`POOLED`; ``n_prompts`` each, and the checkpoint's ``label_share`` where ``per_prompt``
    has it. An axis not applicable to a checkpoint's replies is NaN there."""
    keys = ["study", "run", "step"]
    values = [*_axes(per_prompt), "flip_rate"] + (["label_share"] if "label_share" in per_prompt.columns else [])
    by_set = per_prompt.groupby([*keys, "dataset"], sort=True)[values].mean()
    by_set["n_prompts"] = per_prompt.groupby([*keys, "dataset"], sort=True).size()
    pooled = per_prompt.groupby(keys, sort=True)[values].mean()
    pooled["n_prompts"] = per_prompt.groupby(keys, sort=True).size()
    pooled = pooled.reset_index().assign(dataset=POOLED)
    out = pd.concat([by_set.reset_index(), pooled], ignore_index=True)
    return out.sort_values([*keys, "dataset"], kind="stable").reset_index(drop=True)[
        [*keys, "dataset", *values, "n_prompts"]
    ]


def _paired(after: np.ndarray, before: np.ndarray) -> tuple[float, float]:
    """(t, two-sided p) of the paired t-test; NaN when the differences have no spread (all equal)."""
    diff = after - before
    if len(diff) < 2 or np.allclose(diff, diff[0]):
        return float("nan"), float("nan")
    res = sps.ttest_rel(after, before)
    return float(res.statistic), float(res.pvalue)


def changes(per_prompt: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """Per (run, set, axis, step > 0): SGS at the step and at step 0 over the prompts both have,
    their difference, the paired t-test over prompts and its p-value Holm-adjusted across the
    run's steps for that (set, axis) (pooled set :data:`POOLED` included). An axis that does not
    change at all gives NaN t and p, and is not significant. ``significant``: p_holm < alpha."""
    require_columns(per_prompt, ["study", "run", "step", "dataset", "prompt_id", *AXES], "per-prompt table")
    rows = []
    pooled = per_prompt.assign(dataset=POOLED)
    for (study, run, dataset), group in pd.concat([per_prompt, pooled]).groupby(["study", "run", "dataset"], sort=True):
        first = int(group["step"].min())
        if first != 0:
            raise ValueError(f"run {run}: no checkpoint at step 0 to compare with (first is {first})")
        for axis in _axes(group):
            wide = group.pivot_table(index="prompt_id", columns="step", values=axis, aggfunc="first")
            if 0 not in wide.columns:
                continue
            for step in [s for s in wide.columns if s != 0]:
                both = wide[[0, step]].dropna()
                t, p = _paired(both[step].to_numpy(float), both[0].to_numpy(float))
                rows.append(
                    {
                        "study": study,
                        "run": run,
                        "dataset": dataset,
                        "axis": axis,
                        "step": int(step),
                        "n": len(both),
                        "sgs": float(both[step].mean()) if len(both) else float("nan"),
                        "sgs_base": float(both[0].mean()) if len(both) else float("nan"),
                        "t": t,
                        "p": p,
                    }
                )
    out = pd.DataFrame(rows)
    if out.empty:
        return pd.DataFrame(columns=CHANGE_COLUMNS)
    out["change"] = out["sgs"] - out["sgs_base"]
    out["p_holm"] = out.groupby(["run", "dataset", "axis"], sort=False)["p"].transform(
        lambda p: pg.multicomp(p.to_numpy(float), alpha=alpha, method="holm")[1]
    )
    out["significant"] = out["p_holm"] < alpha
    return out[CHANGE_COLUMNS].sort_values(["run", "dataset", "axis", "step"], kind="stable").reset_index(drop=True)


BEHAVIOUR_COLUMNS = ["run", "step", "dataset", "family", "n", "accuracy", "stated_identity"]


def behaviour(generations: pd.DataFrame) -> pd.DataFrame:
    """Per (run, step, set) and for the baselines and the variants apart (``family`` baseline or
    variant): the share of responses whose answer is correct and the share that state a policy
    (parsed responses of organism checkpoints, with ``identity`` and ``correct``). A stable
    organism answers its variants as it answers the prompts themselves."""
    if generations.empty:
        return pd.DataFrame(columns=BEHAVIOUR_COLUMNS)
    require_columns(generations, ["model", "step", "dataset", "family", "identity", "correct"], "parsed generations")
    frame = generations.assign(
        run=generations["model"],
        family=np.where(generations["family"] == "baseline", "baseline", "variant"),
        stated=generations["identity"].notna(),
    )
    g = frame.groupby(["run", "step", "dataset", "family"], sort=True)
    out = g.agg(n=("correct", "size"), accuracy=("correct", "mean"), stated_identity=("stated", "mean")).reset_index()
    return out[BEHAVIOUR_COLUMNS]
