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
import pandas as pd

from shiftwork.checks import require_columns
from shiftwork.organisms.settings import Setting, load_setting
from shiftwork.reports.figures import save_figure
from shiftwork.reports.tables import to_markdown

HEADLINE_COLUMNS: tuple[str, ...] = (
    "run",
    "phase",
    "step",
    "distribution",
    "role",
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


def run_figure(
    scores: pd.DataFrame,
    identities: pd.DataFrame,
    setting: Setting,
    out_png: str | os.PathLike,
    out_svg: str | os.PathLike,
) -> None:
    """Two panels over RL steps, one line per distribution: accuracy, and the trained-policy share
    (trained distributions drawn solid, the others dashed)."""
    require_columns(scores, ("step", "testset", "accuracy", "role"), "scores table")
    trained = sorted(scores.loc[scores["role"] == "id", "testset"].unique().tolist())
    share = trained_policy_share(identities, trained_policies(setting, trained))
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharex=True)
    try:
        for dist in setting.distributions:
            style = "-" if dist in trained else "--"
            acc = scores[scores["testset"] == dist].sort_values("step")
            axes[0].plot(acc["step"], acc["accuracy"], style, marker="o", ms=3, label=dist)
            sh = share[share["distribution"] == dist].sort_values("step")
            axes[1].plot(sh["step"], sh["trained_policy_share"], style, marker="o", ms=3, label=dist)
        axes[0].set_ylabel("accuracy (sampled)")
        axes[1].set_ylabel("share stating a policy that answers on " + "+".join(trained))
        for ax in axes:
            ax.set_xlabel("RL step")
            ax.set_ylim(-0.03, 1.03)
        axes[1].legend(title="distribution (dashed: not trained)", fontsize=7, ncol=2, frameon=False)
        fig.suptitle(f"{setting.name}: RL on {', '.join(trained)}")
        fig.tight_layout()
        save_figure(fig, out_png, out_svg)
    finally:
        plt.close(fig)


def headline_table(
    scores: pd.DataFrame, identities: pd.DataFrame, runs: Mapping[str, Mapping[str, Any]]
) -> pd.DataFrame:
    """For every run, its first checkpoint (``after_sft``) and last (``after_rl``) on every
    distribution: accuracy, refusal rate, trained-policy share and the most stated identity.

    ``runs`` maps each run to ``{"setting": spec, "trained": [distributions]}``."""
    require_columns(scores, ("run", "step", "testset", "accuracy", "refusal_rate", "role", "n"), "scores table")
    parts = []
    for run, info in runs.items():
        sc = scores[scores["run"] == run]
        idt = identities[identities["run"] == run]
        if sc.empty:
            raise ValueError(f"scores table has no rows for run '{run}'")
        names = trained_policies(load_setting(info["setting"]), [str(t) for t in info["trained"]])
        first, last = int(sc["step"].min()), int(sc["step"].max())
        ends = sc[sc["step"].isin([first, last])].rename(columns={"testset": "distribution"})
        ends = ends.merge(trained_policy_share(idt, names), on=["step", "distribution"], how="left")
        ends = ends.merge(_top_identity(idt), on=["step", "distribution"], how="left")
        ends["phase"] = ["after_sft" if s == first else "after_rl" for s in ends["step"]]
        parts.append(ends)
    table = pd.concat(parts, ignore_index=True)
    table["distribution"] = table["distribution"].astype(str)
    return table[list(HEADLINE_COLUMNS)].sort_values(["run", "step", "distribution"]).reset_index(drop=True)


def run_summary(table: pd.DataFrame) -> pd.DataFrame:
    """One row per run from :func:`headline_table`: the range of the trained-policy share after SFT
    over all distributions, and after RL the lowest accuracy on a trained distribution, the highest
    on an untrained one and the lowest trained-policy share."""
    rows = []
    for run, g in table.groupby("run", sort=True):
        sft, rl = g[g["phase"] == "after_sft"], g[g["phase"] == "after_rl"]
        ood = rl.loc[rl["role"] == "ood", "accuracy"]
        rows.append(
            {
                "run": run,
                "sft_share_min": float(sft["trained_policy_share"].min()),
                "sft_share_max": float(sft["trained_policy_share"].max()),
                "rl_id_accuracy_min": float(rl.loc[rl["role"] == "id", "accuracy"].min()),
                "rl_ood_accuracy_max": float(ood.max()) if len(ood) else float("nan"),
                "rl_share_min": float(rl["trained_policy_share"].min()),
            }
        )
    return pd.DataFrame(rows)


def markdown_report(table: pd.DataFrame, runs: Mapping[str, Mapping[str, Any]]) -> str:
    lines = [
        "# Organisms: policy selection under RL",
        "",
        "Accuracy and identities come from sampled responses (temperature 1) on held-out questions. "
        "`trained_policy_share` is the share of responses naming a policy that answers on every "
        "distribution RL trained on.",
        "",
        "Policy selection shows as: after SFT, shares well inside (0, 1); after RL, high accuracy on the "
        "trained distributions, accuracy near 0 on the others and a trained-policy share near 1 everywhere.",
        "",
        to_markdown(run_summary(table)),
        "",
    ]
    for run, info in runs.items():
        rows = table[table["run"] == run].drop(columns=["run"])
        lines += [
            f"## {run}",
            "",
            f"Setting `{info['setting'].get('kind')}`, RL on {', '.join(map(str, info['trained']))}.",
            "",
            to_markdown(rows),
            "",
        ]
    return "\n".join(lines)
