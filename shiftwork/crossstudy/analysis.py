"""Does a checkpoint's prompt stability track its OOD accuracy beyond what its ID accuracy explains
(trajectory runs), and does selection by RL change stability on the distribution it abandons
before that distribution's accuracy collapses (organisms runs)?

Trajectory runs: every stability axis, pooled over the run's NLI prompts, becomes one more column
beside the OOD accuracies of the trajectory study's analysis (:func:`shiftwork.trajectory.analysis.pair_table`:
the same partial correlations controlling for ID accuracy, GAM control, label-bias control and
item bootstrap). An axis column is the SGS divided by the largest per-prompt value of that axis in
the run (correlations do not change under scaling, and the analysis wants values in [0, 1]); its
"items" are the prompts, resampled by the bootstrap as the test items are. Of the pairs, only the
(axis, OOD set) ones are kept, and their multiple-comparison adjustments are redone over that
family (per run, the axes x OOD sets)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import pingouin as pg
from scipy import stats as sps

from shiftwork.crossstudy.replies import CROSS_AXES, LABEL_AXIS, not_applicable
from shiftwork.crossstudy.stats import AXES, POOLED
from shiftwork.organisms.report import trained_policy_share
from shiftwork.trajectory.analysis import PAIR_COLUMNS, label_bias, pair_table
from shiftwork.trajectory.scores import MIN_UNPINNED, analysis_scores, pinned_steps
from shiftwork.trajectory.sections import AnalysisSettings

AXIS_PREFIX = "SGS "
BEHAVIOUR = ["baseline_accuracy", "variant_accuracy", "variant_stated_identity"]
"""Columns :func:`organism_steps` takes from the parsed greedy responses."""
FAMILY_STEMS = ("partial", "gam")
PAIR_KEEP = ["model", "run", "axis", "ood"] + [c for c in PAIR_COLUMNS if c not in ("model", "run", "ood_a", "ood_b")]
"""Columns of :func:`stability_pairs`: the trajectory analysis's pair columns, the pair named as
(axis, OOD set)."""


TWIN_R = 0.999
"""Two axes whose SGS series over a run's checkpoints correlate at abs(r) >= TWIN_R are one
measurement, affinely the same (the BLEU and BERT instability of a one-word reply both follow the
share of variants whose answer flips): they are analysed as one axis, named ``A=B``, so that the
multiple-testing correction counts them once."""
ROLE_COLUMNS = ["run", "axis", "role", "column", "reason"]
"""Columns of :func:`axis_roles`: ``role`` is ``measured``, ``merged`` (into ``column``, with the
correlation in ``reason``), ``not applicable`` (the axis does not fit the run's replies,
:mod:`shiftwork.crossstudy.replies`) or ``not measured`` (``column`` empty, ``reason`` says why)."""


def _series(per_prompt: pd.DataFrame, run: str, axes: Sequence[str]) -> pd.DataFrame:
    """The run's SGS of each axis (the mean over prompts of the per-prompt values) per checkpoint."""
    rows = per_prompt[per_prompt["run"] == run]
    columns = [a for a in axes if a in rows.columns] + (["label_share"] if "label_share" in rows.columns else [])
    return rows.groupby("step", sort=True)[columns].mean()


def axis_roles(series: pd.DataFrame, run: str, axes: Sequence[str] = CROSS_AXES) -> pd.DataFrame:
    """Which axes of ``run`` are analysed, and as which column, from their SGS ``series`` (one
    column per axis, one row per checkpoint, and the replies' ``label_share`` where known). An
    axis that does not fit the kind of the run's replies is not applicable
    (:func:`shiftwork.crossstudy.replies.not_applicable`); one that is missing, zero at every
    checkpoint, the same at every checkpoint or missing at some is not measured (it cannot
    correlate with anything); an axis whose series is affinely the same as an earlier one's
    (:data:`TWIN_R`, in ``axes`` order) is merged into that one's column. Columns
    :data:`ROLE_COLUMNS`."""
    rows: list[tuple[str, str, str, str, str]] = []
    groups: list[list[str]] = []
    unfit = not_applicable(series, axes)
    for axis in axes:
        values = series[axis].astype(float) if axis in series.columns else pd.Series(dtype=float)
        if axis in unfit:
            rows.append((run, axis, "not applicable", "", unfit[axis]))
            continue
        if not values.notna().any():
            rows.append((run, axis, "not measured", "", "not observed at any checkpoint"))
            continue
        if float(values.max()) <= 0:
            rows.append((run, axis, "not measured", "", "zero at every checkpoint"))
            continue
        if values.isna().any():
            rows.append((run, axis, "not measured", "", f"missing at {int(values.isna().sum())} checkpoint(s)"))
            continue
        if float(values.max() - values.min()) == 0:
            rows.append((run, axis, "not measured", "", f"{float(values.iloc[0]):.4g} at every checkpoint"))
            continue
        twin = None
        for group in groups:
            r = float(np.corrcoef(values, series[group[0]].astype(float))[0, 1]) if len(values) > 2 else np.nan
            if np.isfinite(r) and abs(r) >= TWIN_R:
                twin = (group, r)
                break
        if twin is None:
            groups.append([axis])
        else:
            twin[0].append(axis)
            rows.append((run, axis, "merged", twin[0][0], f"r = {twin[1]:.4f} with {twin[0][0]} over the checkpoints"))
    names = {group[0]: "=".join(group) for group in groups}
    out = [(r, a, role, names.get(col, col), why) for r, a, role, col, why in rows]
    out += [(run, group[0], "measured", names[group[0]], "") for group in groups]
    table = pd.DataFrame(out, columns=ROLE_COLUMNS)
    order = {axis: k for k, axis in enumerate(axes)}
    return table.sort_values("axis", key=lambda c: c.map(order), kind="stable").reset_index(drop=True)


def axis_columns(per_prompt: pd.DataFrame, run: str, axes: Sequence[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(scores rows, item rows) of each measured axis of ``run`` (:func:`axis_roles`; twins once,
    under the name ``A=B``), scaled by its largest per-prompt value."""
    rows = per_prompt[per_prompt["run"] == run]
    roles = axis_roles(_series(per_prompt, run, axes), run, axes)
    scores, items = [], []
    for role in roles[roles["role"] == "measured"].itertuples():
        values = rows[role.axis].astype(float)
        name = f"{AXIS_PREFIX}{role.column}"
        scaled = rows.assign(
            correct=values / float(values.max()), set=name, example_id=rows["dataset"] + "/" + rows["prompt_id"]
        )
        items.append(scaled[["run", "step", "set", "example_id", "correct"]])
        sgs = scaled.groupby("step", sort=True)["correct"].mean().reset_index(name="accuracy")
        scores.append(sgs.assign(run=run, testset=name, role="ood"))
    return (pd.concat(scores, ignore_index=True) if scores else pd.DataFrame()), (
        pd.concat(items, ignore_index=True) if items else pd.DataFrame()
    )


def pair_steps(per_prompt: pd.DataFrame, scores: pd.DataFrame, pinned: float | None) -> dict[str, tuple[list, list]]:
    """Per run of ``per_prompt``: (the scored checkpoints the pair analysis reads, those it leaves
    out). As in the trajectory analysis (config ``trajectory.analysis.pinned``), a checkpoint whose
    test predictions are at least ``pinned`` one label is left out, its OOD scores measuring the
    label lean rather than the sets, unless fewer than :data:`~shiftwork.trajectory.scores.MIN_UNPINNED`
    scored checkpoints would remain (then all stay, and none is named left out)."""
    pinned_at = pinned_steps(scores, pinned)
    out = {}
    for run in sorted(per_prompt["run"].unique()):
        scored = sorted(int(s) for s in per_prompt.loc[per_prompt["run"] == run, "step"].unique())
        pinned_here = set(pinned_at.get(run, ()))
        out_steps = [s for s in scored if s in pinned_here]
        if len(scored) - len(out_steps) < MIN_UNPINNED:
            out_steps = []
        out[run] = ([s for s in scored if s not in out_steps], out_steps)
    return out


def analysed_rows(per_prompt: pd.DataFrame, steps: Mapping[str, tuple[list, list]]) -> pd.DataFrame:
    """The rows of ``per_prompt`` at the checkpoints :func:`pair_steps` keeps."""
    kept = {(run, step) for run, (analysed, _) in steps.items() for step in analysed}
    keep = [(run, int(step)) in kept for run, step in zip(per_prompt["run"], per_prompt["step"])]
    return per_prompt[np.asarray(keep, dtype=bool)]


def _readjust(pairs: pd.DataFrame, alpha: float, method: str) -> pd.DataFrame:
    """The Holm and BH columns and the sign, recomputed within each run's kept pairs."""
    out = []
    for _, part in pairs.groupby("run", sort=True):
        part = part.copy()
        for stem in FAMILY_STEMS:
            p = part[f"p_{stem}"].to_numpy(float)
            part[f"p_{stem}_holm"] = pg.multicomp(p, alpha=alpha, method="holm")[1]
            part[f"p_{stem}_bh"] = pg.multicomp(p, alpha=alpha, method="fdr_bh")[1]
        part["p_partial_bias_holm"] = pg.multicomp(part["p_partial_bias"].to_numpy(float), alpha=alpha, method="holm")[
            1
        ]
        stem = "partial" if method == "linear" else "gam"
        part["p_primary_holm"] = part[f"p_{stem}_holm"]
        part["p_primary_bh"] = part[f"p_{stem}_bh"]
        r = part["r_primary"].to_numpy(float)
        significant = part["p_primary_holm"].to_numpy(float) < alpha
        part["sign"] = np.where(significant & (r > 0), "positive", np.where(significant & (r < 0), "negative", "null"))
        out.append(part)
    return pd.concat(out, ignore_index=True)


def stability_pairs(
    per_prompt: pd.DataFrame,
    scores: pd.DataFrame,
    items: pd.DataFrame,
    analysis: Mapping[str, Any],
    axes: Sequence[str] = CROSS_AXES,
) -> pd.DataFrame:
    """Per trajectory run in ``per_prompt``, axis and OOD set: the partial correlation over the
    run's checkpoints of the axis's SGS with the OOD accuracy controlling for the ID accuracy, with
    the trajectory analysis's methods (``analysis`` is config ``trajectory.analysis``: alpha,
    method, gam_df, spline_df, score, bootstrap; a key left out takes the schema's default). The
    OOD and ID columns are the trajectory analysis's ``score``
    (:func:`~shiftwork.trajectory.scores.analysis_scores`); the axis columns are the plain means
    over prompts. ``scores`` and ``items`` are the trajectory study's tables; only the checkpoints
    scored for stability are used, less those the trajectory analysis leaves out as pinned
    (:func:`pair_steps`). Columns :data:`PAIR_KEEP`."""
    frames = []
    boot = analysis["bootstrap"]
    settings = AnalysisSettings.from_config(analysis)
    score = settings.score
    table = analysis_scores(scores, score)
    per_prompt = analysed_rows(per_prompt, pair_steps(per_prompt, scores, settings.pinned))
    scores = table
    for run in sorted(per_prompt["run"].unique()):
        steps = sorted(per_prompt.loc[per_prompt["run"] == run, "step"].unique())
        acc = scores[(scores["run"] == run) & scores["step"].isin(steps)]
        if acc.empty:
            raise ValueError(f"run {run}: the trajectory scores table has none of its checkpoints {steps}")
        model = acc["model"].iloc[0]
        axis_scores, axis_items = axis_columns(per_prompt, run, axes)
        if axis_scores.empty:
            continue
        run_items = items[(items["run"] == run) & items["step"].isin(steps)]
        table = pd.concat(
            [acc[["model", "run", "step", "testset", "accuracy", "role"]], axis_scores.assign(model=model)],
            ignore_index=True,
        )
        pairs = pair_table(
            table,
            alpha=float(analysis["alpha"]),
            df=int(analysis["spline_df"]),
            method=analysis["method"],
            gam_df=int(analysis["gam_df"]),
            score=score,
            dependence=settings.dependence,
            items=pd.concat([run_items, axis_items.assign(model=model)], ignore_index=True),
            bias=label_bias(run_items),
            resamples=int(boot["resamples"]),
            seed=int(boot["seed"]),
            together=boot.get("together") or (),
            continuous=sorted(axis_scores["testset"].unique()),
        )
        is_axis = pairs[["ood_a", "ood_b"]].apply(lambda c: c.astype(str).str.startswith(AXIS_PREFIX))
        keep = pairs[is_axis["ood_a"] != is_axis["ood_b"]].copy()
        swap = is_axis.loc[keep.index, "ood_b"]
        keep["axis"] = np.where(swap, keep["ood_b"], keep["ood_a"])
        keep["ood"] = np.where(swap, keep["ood_a"], keep["ood_b"])
        keep["axis"] = keep["axis"].str.removeprefix(AXIS_PREFIX)
        frames.append(keep)
    if not frames:
        return pd.DataFrame(columns=PAIR_KEEP)
    pairs = _readjust(pd.concat(frames, ignore_index=True), float(analysis["alpha"]), analysis["method"])
    return pairs[PAIR_KEEP].sort_values(["run", "axis", "ood"], kind="stable").reset_index(drop=True)


def organism_steps(
    sgs: pd.DataFrame,
    scores: pd.DataFrame,
    identities: pd.DataFrame,
    trained_names: Mapping[str, Sequence[str]],
    behaviour: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Per organisms run, checkpoint and distribution: the SGS of each axis on that distribution's
    prompts and its flip rate, beside the evaluation's accuracy (``accuracy``, of ``n_eval``
    sampled responses) and the share of responses naming a policy that answers the trained
    distributions (``trained_names[run]``; the organisms report's trained-policy share), and from
    ``behaviour`` (:func:`shiftwork.crossstudy.stats.behaviour`) the greedy responses' accuracy on
    the prompts themselves and on their variants and the share of variant responses that state a
    policy. Only checkpoints scored for stability."""
    rows = sgs[(sgs["study"] == "organisms") & (sgs["dataset"] != POOLED)]
    parts = []
    for run, part in rows.groupby("run", sort=True):
        acc = scores[scores["run"] == run][["step", "testset", "role", "accuracy", "n"]].rename(
            columns={"testset": "dataset", "n": "n_eval"}
        )
        idt = identities[identities["run"] == run]
        share = trained_policy_share(idt, trained_names[run]).rename(columns={"distribution": "dataset"})
        merged = part.merge(acc, on=["step", "dataset"], how="left").merge(share, on=["step", "dataset"], how="left")
        missing = merged["accuracy"].isna()
        if missing.any():
            raise ValueError(
                f"run {run}: no organisms evaluation at step(s) {sorted(merged.loc[missing, 'step'].unique().tolist())}"
            )
        merged["trained_policy_share"] = merged["trained_policy_share"].fillna(0.0)
        if behaviour is not None and len(behaviour):
            b = behaviour[behaviour["run"] == run].pivot_table(
                index=["step", "dataset"], columns="family", values=["accuracy", "stated_identity"]
            )
            b.columns = [f"{fam}_{what}" for what, fam in b.columns]
            merged = merged.merge(b.reset_index(), on=["step", "dataset"], how="left")
        parts.append(merged)
    columns = ["study", "run", "step", "dataset", "role", "accuracy", "n_eval", "trained_policy_share", *CROSS_AXES]
    columns += ["flip_rate", "label_share", "n_prompts", *BEHAVIOUR]
    if not parts:
        return pd.DataFrame(columns=columns)
    out = pd.concat(parts, ignore_index=True).reindex(columns=columns)
    return out.sort_values(["run", "dataset", "step"]).reset_index(drop=True)


def _accuracy_changes(part: pd.DataFrame, alpha: float) -> pd.Series:
    """Per later step of one (run, distribution): whether its evaluation accuracy differs from
    step 0's (Fisher's exact test on the correct / wrong counts of the sampled responses, Holm
    across the steps)."""
    first = part.iloc[0]
    k0, n0 = round(first["accuracy"] * first["n_eval"]), int(first["n_eval"])
    p = []
    for row in part.iloc[1:].itertuples():
        k, n = round(row.accuracy * row.n_eval), int(row.n_eval)
        p.append(sps.fisher_exact([[k0, n0 - k0], [k, n - k]])[1])
    if not p:
        return pd.Series(dtype=bool)
    adjusted = pg.multicomp(np.asarray(p), alpha=alpha, method="holm")[1]
    return pd.Series(adjusted < alpha, index=part["step"].iloc[1:].to_numpy())


def organism_timing(steps: pd.DataFrame, changes: pd.DataFrame, collapse: float, alpha: float = 0.05) -> pd.DataFrame:
    """Per organisms run, distribution and axis: the first checkpoint whose accuracy is at most
    ``collapse`` (``collapse_step``; NaN when it never is), the first whose accuracy differs
    significantly from step 0's (``accuracy_change_step``, :func:`_accuracy_changes`), the first
    whose stability differs significantly from step 0 (``change_step``, from
    :func:`shiftwork.crossstudy.stats.changes`), whether that came before the collapse
    (``before_collapse``: strictly earlier; NA unless both happen), and the change at the last
    checkpoint with its adjusted p."""
    rows = []
    for (run, dataset), part in steps.groupby(["run", "dataset"], sort=True):
        part = part.sort_values("step")
        fallen = part.loc[part["accuracy"] <= collapse, "step"]
        collapse_step = float(fallen.iloc[0]) if len(fallen) else float("nan")
        moved = _accuracy_changes(part, alpha) if "n_eval" in part.columns else pd.Series(dtype=bool)
        accuracy_change_step = float(moved.index[moved.to_numpy()][0]) if moved.any() else float("nan")
        role = part["role"].iloc[0]
        for axis in [*AXES, LABEL_AXIS] if (changes["axis"] == LABEL_AXIS).any() else AXES:
            ch = changes[(changes["run"] == run) & (changes["dataset"] == dataset) & (changes["axis"] == axis)]
            ch = ch.sort_values("step")
            sig = ch.loc[ch["significant"], "step"]
            change_step = float(sig.iloc[0]) if len(sig) else float("nan")
            last = ch.iloc[-1] if len(ch) else None
            both = np.isfinite(collapse_step) and np.isfinite(change_step)
            rows.append(
                {
                    "run": run,
                    "dataset": dataset,
                    "role": role,
                    "axis": axis,
                    "accuracy_first": float(part["accuracy"].iloc[0]),
                    "accuracy_last": float(part["accuracy"].iloc[-1]),
                    "collapse_step": collapse_step,
                    "accuracy_change_step": accuracy_change_step,
                    "change_step": change_step,
                    "before_collapse": bool(change_step < collapse_step) if both else pd.NA,
                    "last_step": int(part["step"].iloc[-1]),
                    "change_last": float(last["change"]) if last is not None else float("nan"),
                    "p_holm_last": float(last["p_holm"]) if last is not None else float("nan"),
                }
            )
    out = pd.DataFrame(rows)
    if len(out):
        out["before_collapse"] = pd.array(out["before_collapse"].tolist(), dtype="boolean")
    return out
