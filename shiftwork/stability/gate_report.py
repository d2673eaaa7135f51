"""The meaning gate's report: per dataset, how many prompts were kept and why others were dropped."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd


def gate_overview(summary: pd.DataFrame, dropped: pd.DataFrame, n_prompts: Mapping[str, int]) -> pd.DataFrame:
    rows = []
    for dataset, n in sorted(n_prompts.items()):
        s = summary[summary["dataset"] == dataset]
        d = dropped[dropped["dataset"] == dataset]
        row = {
            "dataset": dataset,
            "n_prompts": int(n),
            "n_dropped": int(len(d)),
            "n_kept": int(n - len(d)),
            "b": float(s["b"].iloc[0]) if len(s) else float("nan"),
            "scale": s["scale"].iloc[0] if len(s) else "",
            "threshold": float(s["threshold"].iloc[0]) if len(s) else float("nan"),
        }
        for family, g in s.groupby("family"):
            row[f"mean_f1_{family}"] = float((g["mean_f1"] * g["n"]).sum() / g["n"].sum())
        rows.append(row)
    return pd.DataFrame(rows)


def _md_table(df: pd.DataFrame, floatfmt: str = ".3f") -> str:
    cols = list(df.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for row in df.itertuples(index=False):
        cells = [format(v, floatfmt) if isinstance(v, float) else str(v) for v in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def gate_markdown(overview: pd.DataFrame, summary: pd.DataFrame, dropped: pd.DataFrame) -> str:
    parts = ["# Meaning gate", ""]
    if len(overview):
        o = overview.iloc[0]
        parts.append(
            f"BERTScore F1 of each variant against its original; threshold {o['threshold']:g} on the "
            f"{o['scale']} scale, rescale baseline b = {o['b']:.4f}. A prompt is dropped when any of its "
            "register or structural variants falls under the threshold; surface noise is exempt."
        )
        parts.append("")
    parts += ["## Prompts kept per dataset", "", _md_table(overview), ""]
    by_family = summary.groupby(["family", "kind", "position", "strength"], as_index=False).apply(
        lambda g: pd.Series(
            {
                "n": int(g["n"].sum()),
                "mean_f1": float((g["mean_f1"] * g["n"]).sum() / g["n"].sum()),
                "mean_gate_score": float((g["mean_gate_score"] * g["n"]).sum() / g["n"].sum()),
                "n_under": int(g["n_under"].sum()),
            }
        ),
        include_groups=False,
    )
    by_family = by_family.astype({"n": int, "n_under": int})
    parts += ["## Mean F1 per family x kind x position x strength", "", _md_table(by_family), ""]
    parts += ["## Dropped prompts", ""]
    if len(dropped):
        parts.append(_md_table(dropped[["dataset", "prompt_id", "reason"]]))
    else:
        parts.append("None.")
    return "\n".join(parts) + "\n"
