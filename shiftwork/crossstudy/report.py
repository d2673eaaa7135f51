"""The cross-study's figures and its findings, written from the tables (never typed by hand)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from shiftwork.crossstudy.analysis import axis_roles
from shiftwork.crossstudy.replies import CROSS_AXES, LABEL_AXIS, LABEL_SHARE
from shiftwork.crossstudy.stats import POOLED
from shiftwork.reports.figures import save_figure
from shiftwork.reports.tables import to_markdown

AXIS_COLOURS = dict(zip(CROSS_AXES, ["#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#a6761d", "#444444"]))


def _fmt_p(p: float) -> str:
    return "n/a" if not np.isfinite(p) else (f"{p:.2g}" if p >= 1e-3 else f"{p:.1e}")


def _fmt_change(x: float) -> str:
    """A change of SGS to three decimals, or to two significant digits where three decimals
    would show a non-zero change as 0."""
    return f"{x:+.3f}" if x == 0 or abs(x) >= 0.0005 else f"{x:+.1e}"


def _step(value: float) -> str:
    return "never" if not np.isfinite(value) else str(int(value))


def _axis_panel(ax, rows: pd.DataFrame, changes: pd.DataFrame, run: str, dataset: str) -> None:
    """Each axis's SGS along the run in ``rows``, divided by its largest value there (named in the
    legend) so that axes of very different size share the panel; a filled dot where the paired
    test against step 0 is significant. An axis that is zero or missing throughout (or not
    applicable to the replies) is left out."""
    for axis in CROSS_AXES:
        if axis not in rows.columns:
            continue
        values = rows[axis].astype(float)
        top = float(values.max()) if values.notna().any() else 0.0
        if not np.isfinite(top) or top <= 0:
            continue
        colour = AXIS_COLOURS[axis]
        ax.plot(rows["step"], values / top, "-", color=colour, lw=1.2, label=f"{axis} (/{top:.3g})")
        sig = changes[
            (changes["run"] == run)
            & (changes["dataset"] == dataset)
            & (changes["axis"] == axis)
            & changes["significant"]
        ]
        at = rows[rows["step"].isin(sig["step"])]
        ax.plot(at["step"], at[axis] / top, "o", color=colour, ms=4)
    ax.set_ylim(-0.02, 1.05)


def trajectory_figure(
    sgs: pd.DataFrame, changes: pd.DataFrame, scores: pd.DataFrame, run: str, out_png: str, out_svg: str
) -> None:
    """Left: each axis's SGS (pooled over the run's NLI prompts) against the step, a filled marker
    where it differs from step 0 (paired t-test, Holm over steps); right: ID and OOD accuracy."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.9), sharex=True, layout="constrained")
    rows = sgs[(sgs["run"] == run) & (sgs["dataset"] == POOLED)].sort_values("step")
    _axis_panel(left, rows, changes, run, POOLED)
    left.set_xlabel("fine-tuning step")
    left.set_ylabel("SGS / its largest in the run")
    left.set_title(f"{run}: prompt stability (dots: differs from step 0, Holm p < alpha)", fontsize=9)
    left.legend(fontsize=7, ncols=3)
    acc = scores[(scores["run"] == run) & scores["step"].isin(rows["step"])]
    for testset, part in acc.groupby("testset", sort=True):
        part = part.sort_values("step")
        is_id = part["role"].iloc[0] == "id"
        right.plot(
            part["step"],
            part["accuracy"],
            "-" if is_id else "--",
            lw=2 if is_id else 1,
            label=f"{testset} ({part['role'].iloc[0].upper()})",
        )
    right.axhline(0.5, color="grey", lw=0.8, ls=":", label="chance (2 labels)")
    right.set_xlabel("fine-tuning step")
    right.set_ylabel("accuracy")
    right.set_ylim(0, 1)
    right.set_title("accuracy of the same checkpoints", fontsize=9)
    right.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    save_figure(fig, out_png, out_svg)
    plt.close(fig)


def organism_figure(steps: pd.DataFrame, changes: pd.DataFrame, run: str, out_png: str, out_svg: str) -> None:
    """One panel per distribution with each axis's SGS on its prompts against the RL step (filled
    markers: differs from step 0), and a last panel with accuracy and trained-policy share."""
    rows = steps[steps["run"] == run]
    dists = sorted(rows["dataset"].unique())
    fig, axs = plt.subplots(1, len(dists) + 1, figsize=(4 * (len(dists) + 1), 3.8), sharex=True, layout="constrained")
    for ax, dist in zip(axs, dists):
        part = rows[rows["dataset"] == dist].sort_values("step")
        _axis_panel(ax, part, changes, run, dist)
        ax.legend(fontsize=6, ncols=2)
        role = "trained" if part["role"].iloc[0] == "id" else "not trained"
        ax.set_title(f"{run}: SGS on {dist} ({role})", fontsize=9)
        ax.set_xlabel("RL step")
        ax.set_ylabel("SGS / its largest in the run")

    last = axs[-1]
    for dist in dists:
        part = rows[rows["dataset"] == dist].sort_values("step")
        last.plot(part["step"], part["accuracy"], "-", marker="o", ms=3, label=f"accuracy {dist}")
        last.plot(
            part["step"], part["trained_policy_share"], ":", marker="s", ms=3, label=f"trained-policy share {dist}"
        )
    last.set_ylim(-0.02, 1.02)
    last.set_xlabel("RL step")
    last.set_title("accuracy and share naming a trained policy", fontsize=9)
    last.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    save_figure(fig, out_png, out_svg)
    plt.close(fig)


def _q1(
    changes: pd.DataFrame,
    sgs: pd.DataFrame,
    alpha: float,
    null: pd.DataFrame | None = None,
    freeform: Mapping[str, pd.DataFrame | None] | None = None,
) -> list[str]:
    """Question 1 on the runs' own NLI prompts and, where the free-form probe ran (``freeform``:
    its sgs, changes and change_null tables), on the stability study's prompts."""
    lines = ["## 1. Does fine-tuning change prompt stability?", ""]
    traj = changes[(changes["study"] == "trajectory") & (changes["dataset"] == POOLED)]
    if traj.empty:
        return lines + ["No trajectory run was scored.", ""]
    lines += ["### On the run's NLI prompts (replies are label words)", ""]
    lines += _q1_runs(traj, sgs, alpha, null, "NLI prompts", "change_null.parquet")
    if freeform:
        probe = freeform["changes"]
        probe = probe[probe["dataset"] == POOLED]
        lines += [
            "### On the free-form probe (the stability study's prompts and variants)",
            "",
            "Evenly spaced checkpoints (`crossstudy.freeform.checkpoints`) also answer the stability study's prompts "
            "and the variants its gate kept (structural rewrites included), asked as that study asks the model; the "
            "replies are free-form, so BLEU, BERT and MR read text they were defined for.",
            "",
        ]
        null = freeform.get("change_null")
        lines += _q1_runs(probe, freeform["sgs"], alpha, null, "free-form prompts", "freeform/change_null.parquet")
    return lines


def _q1_runs(
    traj: pd.DataFrame,
    sgs: pd.DataFrame,
    alpha: float,
    null: pd.DataFrame | None,
    what: str,
    null_table: str = "change_null.parquet",
) -> list[str]:
    """Per run: each axis's change from step 0 to the last checkpoint, the steps that differ, and
    the tests' false-positive rate on null runs (:mod:`shiftwork.crossstudy.change_null`; the
    table ``null_table``). ``what`` names the prompts."""
    from shiftwork.crossstudy.change_null import rates_by_axis

    lines = []
    for run, part in traj.groupby("run", sort=True):
        table = []
        unfit = _pooled_roles(sgs, run)
        unfit = unfit[unfit["role"] == "not applicable"].set_index("axis")["reason"]
        rates = rates_by_axis(null, run)
        for axis in CROSS_AXES:
            ax = part[part["axis"] == axis].sort_values("step")
            if axis in unfit.index:
                table.append({"axis": axis, "note": unfit[axis]})
                continue
            if ax.empty:
                continue
            last = ax.iloc[-1]
            sig = ax.loc[ax["significant"], "step"]
            table.append(
                {
                    "axis": axis,
                    "SGS step 0": last["sgs_base"],
                    f"SGS step {int(last['step'])}": last["sgs"],
                    "change": last["change"],
                    "p (Holm)": _fmt_p(last["p_holm"]),
                    "steps differing": f"{int(ax['significant'].sum())} of {len(ax)}",
                    "first differing step": _step(float(sig.iloc[0]) if len(sig) else np.nan),
                    "null false-positive rate": rates.get(axis, "n/a"),
                    "note": "",
                }
            )
        table = pd.DataFrame(table)
        n = int(part["n"].max())
        tested = table[table["note"] == ""]
        moved = tested[tested["p (Holm)"].map(lambda s: s != "n/a" and float(s) < alpha)]
        ups = [f"{r.axis} ({r.change:+.3f})" for r in moved.itertuples() if r.change > 0]
        downs = [f"{r.axis} ({r.change:+.3f})" for r in moved.itertuples() if r.change < 0]
        k = part["step"].nunique()
        lines += [
            f"Run `{run}`: {k} checkpoint{'' if k == 1 else 's'} after step 0, {n} {what} each "
            f"(paired t-tests over prompts against step 0, Holm across steps per axis, alpha {alpha}). "
            f"At the last checkpoint, less stable on: {', '.join(ups) or 'no axis'}; "
            f"more stable on: {', '.join(downs) or 'no axis'}.",
            "",
            to_markdown(table.fillna("").reset_index(drop=True)).rstrip("\n"),
            "",
            _null_line(null, run, alpha, null_table),
            "",
        ]
    return lines


def _null_line(null: pd.DataFrame | None, run: str, alpha: float, table: str) -> str:
    """How the step-0 tests of ``run`` fare on null runs: the axes above alpha, if any."""
    part = (
        null[(null["run"] == run) & (null["dataset"] == POOLED)]
        if null is not None and not null.empty
        else pd.DataFrame()
    )
    if part.empty:
        return "No null runs for these tests: their significant steps are not called findings."
    reps = int(part["replicates"].iloc[0])
    over = part[~part["calibrated"].astype(bool)]
    head = (
        f"Null runs ({reps}, each prompt's values shuffled across the steps, `{table}`): the share "
        "with any step significant is the column above"
    )
    if over.empty:
        return f"{head}; every axis at most alpha {alpha:g}, so its differing steps are findings."
    return (
        f"{head}; above alpha {alpha:g} on {', '.join(over['axis'])}: the differing steps of "
        f"{'that axis are' if len(over) == 1 else 'those axes are'} not findings."
    )


def _precision_line(replies: pd.DataFrame) -> str:
    """The precision each run's checkpoints answered in (a finding may change with it)."""
    if replies.empty:
        return "Precision: no checkpoint was scored."
    per_run = replies.groupby("run", sort=True)["dtype"].agg(lambda d: ", ".join(sorted(set(d) - {""})) or "unrecorded")
    by_dtype: dict[str, list[str]] = {}
    for run, dtype in per_run.items():
        by_dtype.setdefault(dtype, []).append(f"`{run}`")
    said = "; ".join(f"{dtype}: {', '.join(runs)}" for dtype, runs in sorted(by_dtype.items()))
    return (
        f"Precision the checkpoints answered in ({said}). With `dtype: auto` it follows the CPU's capability, and "
        "a finding can change with it."
    )


def _pooled_roles(sgs: pd.DataFrame, run: str) -> pd.DataFrame:
    """:func:`~shiftwork.crossstudy.analysis.axis_roles` of ``run`` from its pooled SGS series."""
    series = sgs[(sgs["run"] == run) & (sgs["dataset"] == POOLED)].set_index("step").sort_index()
    return axis_roles(series, run, CROSS_AXES)


def _calibration_line(calibration: pd.DataFrame | None, run: str, n_sig: int) -> str:
    """Whether run ``run``'s significant pairs are findings: its null rate at most alpha."""
    rows = calibration[calibration["run"] == run] if calibration is not None else pd.DataFrame()
    if rows.empty:
        return "No calibration on null runs for this run: its significant pairs are not called findings."
    row = rows.iloc[0]
    rate = (
        f"family-wise false-positive rate {row['rate']:.3f} [{row['ci_low']:.3f}, {row['ci_high']:.3f}] on "
        f"{int(row['replicates'])} null runs whose OOD sets share nothing with the axes (`calibration.parquet`)"
    )
    if bool(row["calibrated"]):
        said = "it has no significant pair" if n_sig == 0 else f"its {n_sig} significant pair(s) are findings"
        return f"Calibrated ({rate}, at most alpha {row['alpha']:g}): {said}."
    if n_sig == 0:
        return f"NOT calibrated ({rate}, above alpha {row['alpha']:g}); it has no significant pair."
    return (
        f"NOT calibrated ({rate}, above alpha {row['alpha']:g}): its {n_sig} significant pair(s) are not findings; "
        "the design can produce them without any coupling."
    )


def _roles_line(sgs: pd.DataFrame, run: str) -> str:
    """The axes of ``run`` analysed as one (affine twins), those not applicable to its replies and
    those not measured, with why."""
    roles = _pooled_roles(sgs, run)
    merged = roles[roles["role"] == "merged"]
    parts = [
        f"{r.axis} analysed with {r.column.split('=')[0]} as `{r.column}` ({r.reason})" for r in merged.itertuples()
    ]
    unfit = roles[roles["role"] == "not applicable"]
    if len(unfit):
        parts.append(f"{', '.join(unfit['axis'])} {unfit['reason'].iloc[0]}")
    missing = roles[roles["role"] == "not measured"]
    parts += [f"{r.axis} not measured ({r.reason})" for r in missing.itertuples()]
    return "Axes: " + ("; ".join(parts) + "." if parts else "every axis measured, no two the same measurement.")


def _pinned_line(run: str, left_out: Mapping[str, Sequence[int]] | None) -> list[str]:
    """Which of ``run``'s scored checkpoints the pairs and their calibration leave out as pinned."""
    steps = list((left_out or {}).get(run, ()))
    if not steps:
        return []
    return [
        f"Checkpoints left out of the pairs and their calibration, as the trajectory analysis leaves them out "
        f"(test predictions at least `trajectory.analysis.pinned` one label): steps {', '.join(map(str, steps))}.",
        "",
    ]


def _q2(
    pairs: pd.DataFrame,
    alpha: float,
    calibration: pd.DataFrame | None = None,
    sgs: pd.DataFrame | None = None,
    left_out: Mapping[str, Sequence[int]] | None = None,
) -> list[str]:
    lines = ["## 2. Does stability track OOD accuracy beyond ID accuracy?", ""]
    if pairs.empty:
        return lines + ["No trajectory run was scored.", ""]
    for run, part in pairs.groupby("run", sort=True):
        method = part["method"].iloc[0]
        sig = part[part["sign"] != "null"]
        kept = sig[sig["p_partial_bias_holm"] < alpha]
        lines += [
            f"Run `{run}`: {len(part)} (axis, OOD set) pairs over {int(part['n'].max())} checkpoints; primary control "
            f"`{method}` (the trajectory study's), Holm across these pairs, alpha {alpha}: "
            f"{len(sig)} significant ({int((sig['sign'] == 'positive').sum())} positive, "
            f"{int((sig['sign'] == 'negative').sum())} negative). A positive r: the checkpoints less stable on that axis "
            "score higher on that OOD set than their ID accuracy predicts. Controlling for the checkpoint's label "
            f"bias as well (its share of `entailment` predictions; linear, Holm): {len(kept)} of these "
            f"{len(sig)} stay significant"
            + (f" ({', '.join(f'{r.axis} x {r.ood}' for r in kept.itertuples())})." if len(kept) else "."),
            "",
            _calibration_line(calibration, run, len(sig)),
            "",
            *_pinned_line(run, left_out),
        ]
        if sgs is not None:
            lines += [_roles_line(sgs, run), ""]
        shown = part.assign(
            p_holm=part["p_primary_holm"].map(_fmt_p),
            p_bias_holm=part["p_partial_bias_holm"].map(_fmt_p),
            boot_ci=[
                f"[{lo:+.2f}, {hi:+.2f}]" if np.isfinite(lo) else "n/a"
                for lo, hi in zip(part["boot_ci_low"], part["boot_ci_high"])
            ],
        ).sort_values("p_primary_holm", na_position="last")
        columns = ["axis", "ood", "r_raw", "r_primary", "p_holm", "boot_sign_share", "boot_ci", "sign"]
        columns += ["r_partial_bias", "p_bias_holm"]
        lines += [to_markdown(shown[columns].reset_index(drop=True)), ""]
    return lines


def _behaviour_text(d: pd.DataFrame) -> str:
    """How the greedy responses to the distribution's prompts and to their variants fared, first
    and last checkpoint."""
    if "variant_accuracy" not in d.columns or d["variant_accuracy"].isna().all():
        return ""
    first, last = d.iloc[0], d.iloc[-1]
    return (
        f" Greedy answers correct on the prompts {first['baseline_accuracy']:.2f} -> {last['baseline_accuracy']:.2f}, "
        f"on their variants {first['variant_accuracy']:.2f} -> {last['variant_accuracy']:.2f} (variant responses "
        f"stating a policy {first['variant_stated_identity']:.2f} -> {last['variant_stated_identity']:.2f})."
    )


VARIANT_SETS = {
    "changed": (
        "Variants that change the trained template",
        "register framing around the question, inserted spaces or punctuation",
    ),
    "kept": (
        "Variants that keep the trained template",
        "letter case only: every character in its place, `template/` tables",
    ),
}
"""The two variant sets of an organisms run (:mod:`shiftwork.crossstudy.template`): heading and
what the variants do."""


def _q3(
    sets: Mapping[str, tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame | None]], alpha: float, collapse: float
) -> list[str]:
    """Question 3 per organisms run, for each variant set (``sets[name]``: its organisms_steps,
    organisms_timing and change_null tables; ``changed`` first)."""
    lines = ["## 3. Does RL's policy selection change stability, and before the held-out accuracy collapses?", ""]
    steps, timing, _ = sets["changed"]
    if steps.empty:
        return lines + ["No organisms run was scored.", ""]
    for run in sorted(timing["run"].unique()):
        st = steps[steps["run"] == run].sort_values("step")
        first, last = int(st["step"].min()), int(st["step"].max())
        share = st[st["step"] == last]["trained_policy_share"].min()
        lines += [
            f"Run `{run}`: checkpoints {first}-{last}; at step {last} the share of responses naming a trained policy is "
            f"at least {share:.2f} on every distribution.",
            "",
        ]
        for name, (set_steps, set_timing, null) in sets.items():
            lines += _q3_set(name, _of_run(set_steps, run), _of_run(set_timing, run), null, alpha, collapse)
    return lines


def _of_run(table: pd.DataFrame, run: str) -> pd.DataFrame:
    """The rows of ``run`` (none when ``table`` is empty and has no columns)."""
    return table[table["run"] == run] if "run" in table.columns else table.iloc[0:0]


def _q3_set(
    name: str, st: pd.DataFrame, timing: pd.DataFrame, null: pd.DataFrame | None, alpha: float, collapse: float
) -> list[str]:
    """One variant set of one organisms run: what it measures (whether most of its responses
    state a policy), then per distribution the axes that changed by the last checkpoint with
    their null false-positive rates, and, held out, which changed before the collapse."""
    from shiftwork.crossstudy.change_null import rates_by_axis

    heading, what = VARIANT_SETS[name]
    if st.empty:
        return [f"**{heading}** ({what}): none was built or kept by the gate.", ""]
    run = st["run"].iloc[0]
    stated = st["variant_stated_identity"].mean() if "variant_stated_identity" in st.columns else np.nan
    if not np.isfinite(stated):
        reading = "their responses were not parsed."
    elif stated >= 0.5:
        reading = (
            f"{stated:.2f} of their greedy responses state a policy (mean over checkpoints and distributions): the "
            "organism reads them as its questions, so this set measures policy stability."
        )
    else:
        reading = (
            f"only {stated:.2f} of their greedy responses state a policy (mean over checkpoints and distributions): "
            "the organism does not read most of them as questions, so this set mostly measures how its output breaks "
            "down outside the trained template, not which policy it selects."
        )
    lines = [f"**{heading}** ({what}): {reading}", ""]
    last = int(st["step"].max())
    for dist, d in timing.groupby("dataset", sort=True):
        rates = rates_by_axis(null, run, dist)
        lines.append(_q3_line(dist, d, rates, st[st["dataset"] == dist], last, alpha, collapse))
    lines += ["", _q3_null_line(null, run, alpha), ""]
    return lines


def _q3_line(
    dist: str, d: pd.DataFrame, rates: Mapping[str, str], st: pd.DataFrame, last: int, alpha: float, collapse: float
) -> str:
    """One distribution's line of question 3: accuracy, the axes changed by the last step (with
    their null rates) and, held out, the axes that changed before the collapse."""
    role = "trained" if d["role"].iloc[0] == "id" else "held out"
    moved = d[d["p_holm_last"] < alpha]
    desc = ", ".join(
        f"{r.axis} {_fmt_change(r.change_last)} (p_holm {_fmt_p(r.p_holm_last)}, null {rates.get(r.axis, 'n/a')})"
        for r in moved.itertuples()
    )
    text = (
        f"- `{dist}` ({role}): accuracy {d['accuracy_first'].iloc[0]:.3f} -> {d['accuracy_last'].iloc[0]:.3f}, "
        f"first different from step 0 at step {_step(d['accuracy_change_step'].iloc[0])} (Fisher, Holm); "
        f"SGS changed by step {last} on {desc or 'no axis'}."
    )
    text += _behaviour_text(st)
    if role == "held out":
        col = d["collapse_step"].iloc[0]
        early = d[d["before_collapse"].fillna(False).astype(bool)]
        text += (
            f" Accuracy first at most {collapse} at step {_step(col)}; axes whose change was significant "
            "strictly before that: "
            + (", ".join(f"{r.axis} (step {_step(r.change_step)})" for r in early.itertuples()) or "none")
            + "."
        )
    return text


def _q3_null_line(null: pd.DataFrame | None, run: str, alpha: float) -> str:
    """How question 3's step-0 tests of ``run`` fare on null runs, per distribution."""
    part = (
        null[(null["run"] == run) & (null["dataset"] != POOLED)] if null is not None and len(null) else pd.DataFrame()
    )
    if part.empty:
        return "No null runs for these tests: their significant steps are not called findings."
    head = (
        f"Null runs ({int(part['replicates'].iloc[0])} per distribution and axis, each prompt's values shuffled "
        "across the steps): the share with any step significant is the `null` rate above"
    )
    over = part[~part["calibrated"].astype(bool)]
    if over.empty:
        return f"{head}; every one at most alpha {alpha:g}, so the changes above are findings."
    named = ", ".join(f"{r.axis} on `{r.dataset}` ({r.false_positive_rate:.3f})" for r in over.itertuples())
    return f"{head}; above alpha {alpha:g} for {named}: changes there are not findings."


def _q3_sets(tables: Mapping[str, pd.DataFrame | None]) -> dict[str, tuple]:
    """Question 3's variant sets from the findings' tables: the run's own (``changed``) and, where
    there are any, the template-kept ones (``template_organisms_steps`` and its kin)."""
    sets = {"changed": (tables["organisms_steps"], tables["organisms_timing"], tables.get("change_null"))}
    if tables.get("template_organisms_steps") is not None:
        sets["kept"] = (
            tables["template_organisms_steps"],
            tables["template_organisms_timing"],
            tables.get("template_change_null"),
        )
    return sets


def findings(
    tables: Mapping[str, pd.DataFrame | None],
    settings: Mapping[str, float],
    left_out: Mapping[str, Sequence[int]] | None = None,
) -> str:
    """The findings section: the three questions answered with this run's numbers, after the
    precision each run's checkpoints answered in. ``tables``: sgs, changes, pairs,
    organisms_steps, organisms_timing, and where there are any calibration (the stability pairs'),
    replies (:func:`shiftwork.crossstudy.replies.reply_kinds`), change_null (the step-0 tests' null
    runs), the template-kept variants' template_organisms_steps, template_organisms_timing and
    template_change_null, and freeform (the free-form probe's sgs, changes and change_null tables). ``left_out``: per trajectory
    run, the scored checkpoints the pairs leave out as pinned
    (:func:`shiftwork.crossstudy.analysis.pair_steps`)."""
    sgs, changes, pairs = tables["sgs"], tables["changes"], tables["pairs"]
    calibration, replies = tables.get("calibration"), tables.get("replies")
    alpha, collapse = float(settings["alpha"]), float(settings["collapse"])
    lines = [
        "# Cross-study findings",
        "",
        "Written by `shiftwork.crossstudy.report.findings` from `sgs.parquet`, `changes.parquet`, `pairs.parquet`, "
        "`organisms_steps.parquet` and `organisms_timing.parquet` beside this file. SGS is the stability study's "
        "normalised per-prompt RMS instability, averaged over prompts; higher is less stable.",
        "",
    ]
    if replies is not None:
        lines += [_precision_line(replies), ""]
    freeform = tables.get("freeform")
    lines += (
        _q1(changes, sgs, alpha, tables.get("change_null"), freeform)
        + _q2(pairs, alpha, calibration, sgs, left_out)
        + _q3(_q3_sets(tables), alpha, collapse)
    )
    lines += [
        "## Caveats",
        "",
        "- Each test is within one run and one seed; checkpoints of a run are not independent samples of a population of models.",
        "- The paired tests compare the same prompts and variants across checkpoints; their multiple-comparison "
        "family is the steps of one (run, set, axis), not all tests of this page.",
        f"- Where a checkpoint's replies are labels (at least {LABEL_SHARE} of them answer words), its stability is "
        f"label consistency ({LABEL_AXIS}: per prompt, the share of variants whose answer differs from the prompt's); "
        "BLEU, BERT and MR, which read a reply's text, are not applicable there. See docs/crossstudy.md.",
        "",
    ]
    return "\n".join(lines)
