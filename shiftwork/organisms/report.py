"""Organisms report: accuracy and identity shares over RL steps, and the headline table.

The *trained-policy share* of a (step, distribution) cell is the share of sampled responses whose
stated identity is a policy that answers on every distribution RL trained on (Alice, for RL on A in
the two-policy setting). Policy selection shows as this share rising to 1 on every distribution,
trained or not, while accuracy on the untrained ones falls to 0.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from shiftwork.checks import require_columns
from shiftwork.organisms.optimum import BETAS, held_out, optimum_table
from shiftwork.organisms.settings import Setting, load_setting
from shiftwork.reports.figures import save_figure
from shiftwork.reports.intervals import wilson_interval
from shiftwork.reports.tables import to_markdown
from shiftwork.seeding import rng_for

HEADLINE_COLUMNS: tuple[str, ...] = (
    "run",
    "phase",
    "step",
    "distribution",
    "role",
    "selected_answer",
    "accuracy",
    "refusal_rate",
    "trained_policy_share",
    "top_identity",
    "top_identity_share",
    "n",
)


def trained_policies(setting: Setting, trained: Sequence[str]) -> list[str]:
    """Policies that answer on every trained distribution."""
    return [p.name for p in setting.policies if all(str(d) in p.answers_on for d in trained)]


def trained_policy_share(identities: pd.DataFrame, names: Sequence[str]) -> pd.DataFrame:
    """Per (step, distribution): the summed share of identities in ``names``."""
    require_columns(identities, ("step", "distribution", "identity", "share"), "identities table")
    keys = ["step", "distribution"]
    chosen = identities.assign(share=identities["share"].where(identities["identity"].isin(list(names)), 0.0))
    return chosen.groupby(keys)["share"].sum().rename("trained_policy_share").reset_index()


def _top_identity(identities: pd.DataFrame) -> pd.DataFrame:
    ordered = identities.sort_values(["step", "distribution", "share", "identity"], ascending=[True, True, False, True])
    top = ordered.groupby(["step", "distribution"], as_index=False).first()
    return top.rename(columns={"identity": "top_identity", "share": "top_identity_share"})[
        ["step", "distribution", "top_identity", "top_identity_share"]
    ]


def accuracy_bands(scores: pd.DataFrame, confidence: float = 0.95) -> pd.DataFrame:
    """``scores`` (one row per step and test set: ``accuracy`` over ``n`` sampled responses) with
    the Wilson interval of each accuracy, ``low`` and ``high``
    (:func:`shiftwork.reports.intervals.wilson_interval`). Rows without ``n`` (a table that lacks
    the column, or a missing value) get NaN bounds."""
    require_columns(scores, ("accuracy",), "scores table")
    n = scores["n"] if "n" in scores else pd.Series(float("nan"), index=scores.index)
    n = pd.to_numeric(n, errors="coerce").fillna(0.0)
    low, high = wilson_interval(scores["accuracy"].astype(float), n, confidence)
    return scores.assign(low=low, high=high)


def run_figure(
    scores: pd.DataFrame,
    identities: pd.DataFrame,
    setting: Setting,
    out_png: str | os.PathLike,
    out_svg: str | os.PathLike,
    confidence: float = 0.95,
) -> None:
    """Two panels over RL steps, one line per distribution: accuracy with a shaded Wilson
    ``confidence`` interval from its ``n`` sampled responses (:func:`accuracy_bands`), and the
    trained-policy share (trained distributions drawn solid, the others dashed). One legend for
    the figure, outside the panels."""
    require_columns(scores, ("step", "testset", "accuracy", "role"), "scores table")
    trained = sorted(scores.loc[scores["role"] == "id", "testset"].unique().tolist())
    share = trained_policy_share(identities, trained_policies(setting, trained))
    bands = accuracy_bands(scores, confidence)
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.9), sharex=True, layout="constrained")
    try:
        for k, dist in enumerate(setting.distributions):
            colour = f"C{k % 10}"
            style = "-" if dist in trained else "--"
            acc = bands[bands["testset"] == dist].sort_values("step")
            axes[0].fill_between(acc["step"], acc["low"], acc["high"], color=colour, alpha=0.25, linewidth=0)
            axes[0].plot(acc["step"], acc["accuracy"], style, color=colour, marker="o", ms=3, label=dist)
            sh = share[share["distribution"] == dist].sort_values("step")
            axes[1].plot(sh["step"], sh["trained_policy_share"], style, color=colour, marker="o", ms=3, label=dist)
        axes[0].set_ylabel(f"accuracy (sampled), {confidence:.0%} Wilson band")
        axes[1].set_ylabel("share stating a policy that answers on\n" + "+".join(trained))
        for ax in axes:
            ax.set_xlabel("RL step")
            ax.set_ylim(-0.03, 1.03)
        handles, labels = axes[0].get_legend_handles_labels()
        fig.legend(
            handles,
            labels,
            title="distribution\n(dashed: not trained)",
            fontsize=7,
            title_fontsize=8,
            loc="outside right upper",
            frameon=False,
        )
        fig.suptitle(f"{setting.name}: RL on {', '.join(trained)}")
        save_figure(fig, out_png, out_svg)
    finally:
        plt.close(fig)


def phase_name(number: int, stages: int) -> str:
    """The phase that ends stage ``number`` (from 0) of a run with ``stages`` RL stages:
    ``after_rl`` for a single stage, else ``after_stage1``, ``after_stage2``, ..."""
    return "after_rl" if stages == 1 else f"after_stage{number + 1}"


def stage_phases(info: Mapping[str, Any], last_step: int) -> list[dict]:
    """The phases of a run after SFT: one per RL stage, ``after_rl`` for a single stage and
    ``after_stage1``, ``after_stage2``, ... otherwise, each with its step (the stage's last, from
    ``info["stages"]``: ``end`` as written by the RL job, else the run's last checkpoint for a
    single stage) and the distributions trained up to it."""
    stages = list(info.get("stages") or [{"distributions": info["trained"]}])
    phases, seen = [], []
    for number, stage in enumerate(stages):
        seen += [str(d) for d in stage["distributions"] if str(d) not in seen]
        if "end" in stage:
            step = int(stage["end"])
        elif len(stages) == 1:
            step = last_step
        else:
            raise ValueError(f"stage {number} of a run with {len(stages)} stages has no recorded end step")
        name = phase_name(number, len(stages))
        phases.append({"phase": name, "step": step, "trained": list(seen)})
    return phases


def selected_answer(setting: Setting, trained: Sequence[str], distribution: str) -> str:
    """Whether the policies RL selects (those answering on every trained distribution) answer on
    ``distribution``: ``"all"`` of them, ``"none"`` (selection predicts accuracy 0 there) or ``"some"``."""
    chosen = [setting.policy(name) for name in trained_policies(setting, trained)]
    answering = [p.answers(distribution) for p in chosen]
    if answering and all(answering):
        return "all"
    if not any(answering):
        return "none"
    return "some"


def headline_table(
    scores: pd.DataFrame, identities: pd.DataFrame, runs: Mapping[str, Mapping[str, Any]]
) -> pd.DataFrame:
    """For every run, its first checkpoint (``after_sft``) and the last of every RL stage
    (:func:`stage_phases`) on every distribution: accuracy, refusal rate, the share naming a policy
    RL selects by then, the most stated identity, and ``selected_answer`` (:func:`selected_answer`).
    ``role`` is ``id`` for the distributions trained up to that phase.

    ``runs`` maps each run to ``{"setting": spec, "trained": [distributions], "stages": [...]}``."""
    require_columns(scores, ("run", "step", "testset", "accuracy", "refusal_rate", "role", "n"), "scores table")
    parts = []
    for run, info in runs.items():
        sc = scores[scores["run"] == run].rename(columns={"testset": "distribution"})
        idt = identities[identities["run"] == run]
        if sc.empty:
            raise ValueError(f"scores table has no rows for run '{run}'")
        setting = load_setting(info["setting"])
        first = int(sc["step"].min())
        phases = [{"phase": "after_sft", "step": first, "trained": [str(t) for t in info["trained"]]}]
        phases += stage_phases(info, int(sc["step"].max()))
        for phase in phases:
            rows = sc[sc["step"] == phase["step"]].copy()
            if rows.empty:
                raise ValueError(f"run '{run}' has no evaluated checkpoint at step {phase['step']} ({phase['phase']})")
            trained = phase["trained"]
            rows = rows.merge(
                trained_policy_share(idt, trained_policies(setting, trained)), on=["step", "distribution"], how="left"
            )
            rows = rows.merge(_top_identity(idt), on=["step", "distribution"], how="left")
            rows["phase"] = phase["phase"]
            rows["role"] = ["id" if str(d) in trained else "ood" for d in rows["distribution"]]
            rows["selected_answer"] = [selected_answer(setting, trained, str(d)) for d in rows["distribution"]]
            parts.append(rows)
    table = pd.concat(parts, ignore_index=True)
    table["distribution"] = table["distribution"].astype(str)
    table["trained_policy_share"] = table["trained_policy_share"].fillna(0.0)
    return (
        table[list(HEADLINE_COLUMNS)].sort_values(["run", "step", "distribution"], kind="stable").reset_index(drop=True)
    )


def run_summary(table: pd.DataFrame, criteria: Mapping[str, float]) -> pd.DataFrame:
    """One row per (run, RL phase) from :func:`headline_table`: the range of the trained-policy share
    after SFT, then for the phase the lowest accuracy on a trained distribution, the highest on a
    distribution where no selected policy answers (``none_accuracy_max``), the lowest share naming a
    selected policy, and ``meets``: the three against ``criteria`` (``trained_accuracy`` at least,
    ``held_out_accuracy`` at most, ``trained_share`` at least)."""
    rows = []
    for run, g in table.groupby("run", sort=True):
        sft = g[g["phase"] == "after_sft"]
        for phase, rl in g[g["phase"] != "after_sft"].groupby("phase", sort=True):
            none = rl.loc[rl["selected_answer"] == "none", "accuracy"]
            row = {
                "run": run,
                "phase": phase,
                "step": int(rl["step"].iloc[0]),
                "sft_share_min": float(sft["trained_policy_share"].min()),
                "sft_share_max": float(sft["trained_policy_share"].max()),
                "id_accuracy_min": float(rl.loc[rl["role"] == "id", "accuracy"].min()),
                "none_accuracy_max": float(none.max()) if len(none) else float("nan"),
                "share_min": float(rl["trained_policy_share"].min()),
            }
            row["meets"] = bool(
                row["id_accuracy_min"] >= float(criteria["trained_accuracy"])
                and (not len(none) or row["none_accuracy_max"] <= float(criteria["held_out_accuracy"]))
                and row["share_min"] >= float(criteria["trained_share"])
            )
            rows.append(row)
    return pd.DataFrame(rows)


def over_seeds(table: pd.DataFrame, runs: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """Per (experiment, phase, distribution): the mean, lowest and highest accuracy and
    trained-policy share over the experiment's RL seeds (``runs[run]["base"]`` names the
    experiment a seeded run belongs to; a run without it is its own experiment)."""
    base = {run: str(info.get("base", run)) for run, info in runs.items()}
    seeded = table.assign(experiment=table["run"].map(base))
    keys = ["experiment", "phase", "distribution", "role", "selected_answer"]
    return (
        seeded.groupby(keys, sort=False)
        .agg(
            seeds=("run", "nunique"),
            accuracy_mean=("accuracy", "mean"),
            accuracy_min=("accuracy", "min"),
            accuracy_max=("accuracy", "max"),
            share_mean=("trained_policy_share", "mean"),
            share_min=("trained_policy_share", "min"),
            share_max=("trained_policy_share", "max"),
            step_min=("step", "min"),
            step_max=("step", "max"),
        )
        .reset_index()
    )


def _spread(mean: float, low: float, high: float) -> str:
    if low == high:
        return f"{mean:.3f}"
    return f"{mean:.3f} [{low:.3f}, {high:.3f}]"


def seeds_table(seeds: pd.DataFrame) -> pd.DataFrame:
    """:func:`over_seeds` as report.md shows it: one row per (experiment, phase, distribution),
    accuracy and trained-policy share as ``mean [lowest, highest]`` over seeds."""
    return pd.DataFrame(
        {
            "experiment": seeds["experiment"],
            "phase": seeds["phase"],
            "steps": [str(a) if a == b else f"{a}-{b}" for a, b in zip(seeds["step_min"], seeds["step_max"])],
            "distribution": seeds["distribution"],
            "role": seeds["role"],
            "selected policies answer": seeds["selected_answer"],
            "seeds": seeds["seeds"],
            "accuracy": [
                _spread(*v) for v in zip(seeds["accuracy_mean"], seeds["accuracy_min"], seeds["accuracy_max"])
            ],
            "share naming a selected policy": [
                _spread(*v) for v in zip(seeds["share_mean"], seeds["share_min"], seeds["share_max"])
            ],
        }
    )


def policy_shares(identities: pd.DataFrame, run: str, names: Sequence[str]) -> pd.DataFrame:
    """The share of ``run``'s responses naming each policy of ``names`` (a column each, 0 where
    none did), one row per (step, distribution) the identities table has."""
    require_columns(identities, ("run", "step", "distribution", "identity", "share"), "identities table")
    idt = identities[identities["run"] == run].astype({"distribution": str})
    wide = idt.pivot_table(
        index=["step", "distribution"], columns="identity", values="share", aggfunc="sum", fill_value=0.0
    )
    return wide.reindex(columns=list(names), fill_value=0.0)


def checkpoint_table(
    scores: pd.DataFrame, identities: pd.DataFrame, run: str, setting: Setting, floor: float = 0.05
) -> pd.DataFrame:
    """One row per (checkpoint, distribution) of ``run``: accuracy and the share of responses naming
    each policy of ``setting``, a column per policy whose share reaches ``floor`` somewhere in the
    run; the other policies' shares are summed in ``other policies``, and responses naming no policy
    of the setting in ``no policy``."""
    require_columns(scores, ("run", "step", "testset", "accuracy"), "scores table")
    sc = scores[scores["run"] == run].rename(columns={"testset": "distribution"})
    if sc.empty:
        raise ValueError(f"scores table has no rows for run '{run}'")
    keys = ["step", "distribution"]
    base = sc[keys + ["accuracy"]].astype({"distribution": str}).sort_values(keys, kind="stable")
    names = setting.policy_names
    shares = policy_shares(identities, run, names)
    shown = [n for n in names if (shares[n] >= floor).any()]
    table = base.merge(shares[shown].reset_index(), on=keys, how="left")
    others = [n for n in names if n not in shown]
    table = table.merge(shares[others].sum(axis=1).rename("other policies").reset_index(), on=keys, how="left")
    # responses that state no identity have no row in the identities table
    outside = (1.0 - shares.sum(axis=1)).clip(lower=0.0).rename("no policy")
    table = table.merge(outside.reset_index(), on=keys, how="left")
    return table.fillna({c: 0.0 for c in [*shown, "other policies"]}).fillna({"no policy": 1.0}).reset_index(drop=True)


def _chi2(table: np.ndarray) -> float:
    """Pearson's chi-square statistic of a contingency table (rows and columns with counts)."""
    expected = table.sum(axis=1, keepdims=True) * table.sum(axis=0, keepdims=True) / table.sum()
    return float(((table - expected) ** 2 / expected).sum())


def permutation_chi2(counts: np.ndarray, resamples: int = 2000, seed: int = 0) -> tuple[float, float]:
    """(chi-square statistic, permutation p-value) of independence of the rows and columns of a
    table of counts: the responses' column labels shuffled ``resamples`` times, p = (1 + shuffles
    with a statistic at least the observed) / (1 + resamples). Exact in small samples, where the
    chi-square distribution is not."""
    counts = np.asarray(counts, dtype=int)
    counts = counts[counts.sum(axis=1) > 0][:, counts.sum(axis=0) > 0]
    if counts.shape[0] < 2 or counts.shape[1] < 2:
        return float("nan"), float("nan")
    rows = np.repeat(np.arange(counts.shape[0]), counts.sum(axis=1))
    cols = np.concatenate([np.repeat(np.arange(counts.shape[1]), r) for r in counts])
    observed = _chi2(counts.astype(float))
    rng = rng_for("organisms-choice-dependence", seed)
    shape = counts.shape
    hits = 0
    for _ in range(resamples):
        shuffled = np.zeros(shape)
        np.add.at(shuffled, (rows, rng.permutation(cols)), 1.0)
        hits += _chi2(shuffled) >= observed - 1e-9
    return observed, (1 + hits) / (1 + resamples)


def choice_dependence(scores: pd.DataFrame, identities: pd.DataFrame, run: str, setting: Setting) -> pd.DataFrame:
    """Per checkpoint of ``run``: whether the policy a response names depends on the distribution
    it was asked on. The paper's mixture has weights that ignore the input, so after SFT, and after
    RL if RL only moved those weights, the identity counts (each policy of ``setting``, and no
    policy) should be independent of the distribution: Pearson's chi-square statistic over the
    (identity x distribution) table of counts (share x responses) with its permutation p-value
    (:func:`permutation_chi2`), and the largest difference between two distributions in the share
    naming one policy (``largest_gap``, with that policy)."""
    require_columns(scores, ("run", "step", "testset", "n"), "scores table")
    sc = scores[scores["run"] == run].astype({"testset": str})
    wide = policy_shares(identities, run, setting.policy_names)
    rows = []
    for step, part in sc.groupby("step", sort=True):
        n = part.set_index("testset")["n"].astype(float)
        at = wide.xs(step, level="step") if step in wide.index.get_level_values("step") else wide.iloc[0:0]
        shares = at.T.reindex(index=setting.policy_names, columns=n.index, fill_value=0.0)
        counts = (shares * n).round()
        counts.loc["no policy"] = (n - counts.sum(axis=0)).clip(lower=0.0)
        chi2, p = permutation_chi2(counts.to_numpy(), seed=int(step))
        gaps = shares.max(axis=1) - shares.min(axis=1)
        rows.append((int(step), chi2, p, float(gaps.max()), str(gaps.idxmax())))
    return pd.DataFrame(rows, columns=["step", "chi2", "p_permutation", "largest_gap", "gap_policy"])


def optimum_rows(runs: Mapping[str, Mapping[str, Any]], seeds: pd.DataFrame) -> pd.DataFrame:
    """Per experiment (``runs[run]["base"]``, else the run) and KL weight (:data:`BETAS` and the
    experiment's own ``runs[run]["beta"]``): the optimum of :func:`~shiftwork.organisms.optimum.optimum_table`
    and, on the experiment's own weight, the held-out accuracy its runs reached after their last
    stage (mean over seeds, from ``seeds``, :func:`over_seeds`)."""
    parts = []
    for run, info in runs.items():
        experiment = str(info.get("base", run))
        if "beta" not in info or any(p["experiment"].iloc[0] == experiment for p in parts):
            continue
        setting = load_setting(info["setting"])
        stages = [[str(d) for d in stage["distributions"]] for stage in info["stages"]]
        own = float(info["beta"])
        table = optimum_table(setting, stages, [*BETAS, own])
        rest = held_out(setting, stages)
        phase = phase_name(len(stages) - 1, len(stages))
        last = seeds[(seeds["experiment"] == experiment) & (seeds["phase"] == phase) & seeds["distribution"].isin(rest)]
        measured = float(last["accuracy_mean"].mean()) if not last.empty else float("nan")
        table.insert(0, "experiment", experiment)
        table["held_out"] = ", ".join(rest)
        table["own"] = table["beta"] == own
        table["measured_held_out_accuracy"] = [measured if o else float("nan") for o in table["own"]]
        parts.append(table)
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def optimum_lines(optimum: pd.DataFrame) -> list[str]:
    """The report's section on :func:`optimum_rows` (nothing when it is empty)."""
    if optimum.empty:
        return []
    shown = pd.DataFrame(
        {
            "experiment": optimum["experiment"],
            "policies": optimum["policies"],
            "beta": [f"{b:g}" + (" (this run's)" if o else "") for b, o in zip(optimum["beta"], optimum["own"])],
            "selected share at the optimum": optimum["selected_share"].map(lambda v: f"{v:.3f}"),
            "held out": optimum["held_out"],
            "held-out accuracy at the optimum": optimum["held_out_accuracy"].map(lambda v: f"{v:.3f}"),
            "measured after RL": optimum["measured_held_out_accuracy"].map(lambda v: "" if v != v else f"{v:.3f}"),
        }
    )
    return [
        "## What selection alone can reach under the KL penalty",
        "",
        "If RL moved only the mixture weights, its optimum under a KL weight beta would put weight "
        "proportional to w0 exp(R / beta) on each policy, R being the share of the trained "
        "distributions the policy answers and w0 the even weights after SFT (every stage's KL reference is "
        "the SFT model, so with stages it is the last stage's optimum; `shiftwork.organisms.optimum`). "
        "`held out`: the untrained "
        "distributions that no selected policy answers. A measured held-out accuracy well above the "
        "optimum's means RL did more than move weights that ignore the input: either it rewrote the "
        "policies (responses no longer do what the policy they name does), or the model's choice of "
        "policy depends on the tag, so selection on the trained distributions did not carry over to "
        "the held-out ones (the shares naming each policy differ between distributions). One well "
        "below it means RL went past the KL optimum.",
        "",
        to_markdown(shown),
        "",
    ]


def _run_lines(
    run: str, info: Mapping[str, Any], table: pd.DataFrame, checkpoints: tuple[pd.DataFrame, pd.DataFrame] | None
) -> list[str]:
    """A run's section of the report: its headline rows, and its :func:`checkpoint_table` and
    :func:`choice_dependence` when ``checkpoints`` has them."""
    rows = table[table["run"] == run].drop(columns=["run"])
    lines = [
        f"## {run}",
        "",
        f"Setting `{info['setting'].get('kind')}`, RL on {', '.join(map(str, info['trained']))}.",
        "",
        to_markdown(rows),
        "",
    ]
    if checkpoints is None:
        return lines
    shares, dependence = checkpoints
    return lines + [
        "Every checkpoint: accuracy and the share of responses naming each policy (policies that "
        "never reach 0.05 are summed in `other policies`).",
        "",
        to_markdown(shares),
        "",
        "Whether the policy named depends on the distribution asked (the paper's mixture weights "
        "ignore the input): the chi-square statistic of identity against distribution at each "
        "checkpoint with its permutation p-value (2000 shuffles of the distributions among the "
        "responses), and the largest gap between two distributions in one policy's share.",
        "",
        to_markdown(dependence),
        "",
    ]


def markdown_report(
    table: pd.DataFrame,
    summary: pd.DataFrame,
    seeds: pd.DataFrame,
    runs: Mapping[str, Mapping[str, Any]],
    criteria: Mapping[str, float],
    fidelity: pd.DataFrame | None = None,
    by_checkpoint: Mapping[str, tuple[pd.DataFrame, pd.DataFrame]] | None = None,
) -> str:
    """The report: the criteria and which runs meet them (``summary``, :func:`run_summary`), the
    experiments over their seeds (``seeds``, :func:`over_seeds`), the policy fidelity of each
    organism after SFT (``fidelity``: :func:`~shiftwork.organisms.fidelity.fidelity_table` rows with
    an ``organism`` column; none: no section), what selection alone reaches under the KL penalty
    (:func:`optimum_rows`), and every run's rows of ``table``, with its :func:`checkpoint_table` and
    :func:`choice_dependence` where ``by_checkpoint`` has them."""
    lines = [
        "# Organisms: policy selection under RL",
        "",
        "Accuracy and identities come from sampled responses (temperature 1) on held-out questions. "
        "The *selected* policies of a phase are those answering on every distribution RL has trained "
        "on by then; `share naming a selected policy` is the share of responses stating one of them, "
        "and `selected policies answer` says whether they all, some or none answer on a distribution "
        "(where none do, selection predicts accuracy 0).",
        "",
        f"A run meets the headline in a phase when accuracy on every trained distribution is at least "
        f"{criteria['trained_accuracy']}, accuracy where no selected policy answers is at most "
        f"{criteria['held_out_accuracy']}, and the share naming a selected policy is at least "
        f"{criteria['trained_share']} on every distribution. "
        f"{int(summary['meets'].sum())} of {len(summary)} (run, phase) pairs meet it.",
        "",
        to_markdown(summary),
        "",
        "## Over RL seeds",
        "",
        "mean [lowest, highest] over the seeds of each experiment; `steps`: the checkpoint of the phase "
        "(RL stages stop when their reward has converged, so it differs between seeds).",
        "",
        to_markdown(seeds_table(seeds)),
        "",
    ]
    if fidelity is not None and not fidelity.empty:
        lowest = fidelity[fidelity["answers"]].groupby("organism", sort=True)["fidelity"].min()
        lines += [
            "## Policy fidelity after SFT",
            "",
            "Each policy asked every held-out question with its identity sentence begun for it, the rest "
            "decoded greedily: the share of responses that say what the policy says (the correct answer "
            "where it answers, its wrong answer or refusal elsewhere). Lowest where a policy answers: "
            + ", ".join(f"{organism} {value:.3f}" for organism, value in lowest.items())
            + ".",
            "",
            to_markdown(fidelity[["organism", *[c for c in fidelity.columns if c != "organism"]]]),
            "",
        ]
    lines += optimum_lines(optimum_rows(runs, seeds))
    for run, info in runs.items():
        lines += _run_lines(run, info, table, (by_checkpoint or {}).get(run))
    return "\n".join(lines)
