"""The meaning gate's report: per dataset, how many prompts were kept and why others were dropped."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

UNCHANGED_FAMILIES = ("register", "noise")


def unchanged_columns() -> list[str]:
    """The overview's counts of variants that came out equal to their prompt, per family."""
    return [f"{family}_unchanged_{what}" for family in UNCHANGED_FAMILIES for what in ("redrawn", "dropped")]


def gate_overview(
    summary: pd.DataFrame,
    dropped: pd.DataFrame,
    n_prompts: Mapping[str, int],
    unchanged: Mapping[str, Mapping[str, Mapping[str, int]]] | None = None,
) -> pd.DataFrame:
    """One row per dataset: prompts kept and dropped by the gate, the gate's settings, the mean F1
    per family and, from ``unchanged`` (dataset -> family -> {"redrawn", "dropped"}, the variants
    table's provenance), how many register/noise variants equalled their prompt and were drawn
    again (``<family>_unchanged_redrawn``) or left out (``<family>_unchanged_dropped``)."""
    unchanged = unchanged or {}
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
        counts = unchanged.get(dataset, {})
        for family in UNCHANGED_FAMILIES:
            for what in ("redrawn", "dropped"):
                row[f"{family}_unchanged_{what}"] = int(counts.get(family, {}).get(what, 0))
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
    cols = [c for c in unchanged_columns() if c in overview.columns]
    parts += ["## Prompts kept per dataset", "", _md_table(overview.drop(columns=cols)), ""]
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
    if cols:
        parts += [
            "## Variants equal to their prompt",
            "",
            "A noise variant that came out equal to its prompt (casing on a prompt without lower-case "
            "letters, say) is drawn again from the same seeded generator a few times, then left out; "
            "a register variant equal to its prompt is left out. Counts per dataset:",
            "",
            _md_table(overview[["dataset", *cols]]),
            "",
        ]
    parts += ["## Dropped prompts", ""]
    if len(dropped):
        parts.append(_md_table(dropped[["dataset", "prompt_id", "reason"]]))
    else:
        parts.append("None.")
    return "\n".join(parts) + "\n"
