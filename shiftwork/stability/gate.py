"""The meaning gate: keep prompts whose register and structural variants stay close in meaning.

Scores are BERTScore F1 of each variant against its original. On an encoder whose unrelated
pairs already score ``b``, a raw threshold means little, so the threshold may be applied on
the rescaled value ``(F - b) / (1 - b)``."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from shiftwork.tables import read_table

GATED_FAMILIES = ("register", "structural")


def rescale(f1: np.ndarray | float, b: float) -> np.ndarray | float:
    if not 0 <= b < 1:
        raise ValueError(f"rescale baseline b must lie in [0, 1), got {b}")
    return (np.asarray(f1, dtype=float) - b) / (1.0 - b)


def mismatched_pairs(n: int, max_pairs: int, seed: int) -> list[tuple[int, int]]:
    """Ordered pairs (i, j), i != j, all of them or ``max_pairs`` drawn by ``seed``."""
    if n < 2:
        raise ValueError(f"need at least 2 texts to estimate a baseline, got {n}")
    pairs = [(i, j) for i in range(n) for j in range(n) if i != j]
    if len(pairs) <= max_pairs:
        return pairs
    rng = np.random.default_rng(seed)
    pick = np.sort(rng.choice(len(pairs), size=max_pairs, replace=False))
    return [pairs[k] for k in pick]


def estimate_baseline(
    f1_fn: Callable[[Sequence[str], Sequence[str]], np.ndarray],
    texts: Sequence[str],
    max_pairs: int = 2000,
    seed: int = 0,
) -> tuple[float, int]:
    """Mean F1 of unrelated pairs of ``texts``: (b, number of pairs)."""
    pairs = mismatched_pairs(len(texts), max_pairs, seed)
    cands = [texts[i] for i, _ in pairs]
    refs = [texts[j] for _, j in pairs]
    scores = f1_fn(cands, refs)
    return float(np.mean(scores)), len(pairs)


def gate_scores(f1: np.ndarray, scale: str, b: float | None) -> np.ndarray:
    if scale == "raw":
        return np.asarray(f1, dtype=float)
    if scale == "rescaled":
        if b is None:
            raise ValueError("scale 'rescaled' needs a baseline b")
        return rescale(f1, b)
    raise ValueError(f"gate scale must be 'raw' or 'rescaled', got {scale!r}")


def apply_gate(variants: pd.DataFrame, threshold: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Split on ``gate_score`` (already on the threshold's scale).

    A prompt is dropped when any of its register or structural variants scores under
    ``threshold``; surface noise never drops a prompt. Returns (kept rows, dropped prompts),
    the latter with the number of failing variants and the worst one."""
    need = {"prompt_id", "family", "kind", "position", "strength", "gate_score"}
    missing = need - set(variants.columns)
    if missing:
        raise ValueError(f"variants table lacks columns {sorted(missing)}")
    failing = variants[variants["family"].isin(GATED_FAMILIES) & (variants["gate_score"] < threshold)]
    rows = []
    for pid, group in failing.groupby("prompt_id", sort=True):
        worst = group.loc[group["gate_score"].idxmin()]
        rows.append(
            {
                "prompt_id": pid,
                "n_failing": len(group),
                "worst_family": worst["family"],
                "worst_kind": worst["kind"],
                "worst_position": worst["position"],
                "worst_strength": float(worst["strength"]),
                "worst_score": float(worst["gate_score"]),
                "reason": f"{len(group)} {'/'.join(sorted(group['family'].unique()))} variant(s) under "
                f"{threshold:g}; worst {worst['family']}:{worst['kind']}:{worst['position']}:"
                f"{worst['strength']:g} = {worst['gate_score']:.3f}",
            }
        )
    dropped = pd.DataFrame(
        rows,
        columns=[
            "prompt_id",
            "n_failing",
            "worst_family",
            "worst_kind",
            "worst_position",
            "worst_strength",
            "worst_score",
            "reason",
        ],
    )
    kept = variants[~variants["prompt_id"].isin(dropped["prompt_id"])].reset_index(drop=True)
    return kept, dropped


def gate_summary(variants: pd.DataFrame, threshold: float) -> pd.DataFrame:
    """Mean raw and gate-scale F1 per family x kind x position x strength, and how many fall under."""
    scored = variants[variants["family"] != "baseline"]
    grouped = scored.groupby(["family", "kind", "position", "strength"], sort=True)
    out = grouped.agg(
        n=("gate_score", "size"),
        mean_f1=("f1", "mean"),
        mean_gate_score=("gate_score", "mean"),
        n_under=("gate_score", lambda s: int((s < threshold).sum())),
    ).reset_index()
    return out


SCORE_COLUMNS = ["prompt_id", "variant_id", "family", "kind", "position", "strength", "f1", "gate_score"]


def variant_scores(scored: pd.DataFrame, dropped: pd.DataFrame) -> pd.DataFrame:
    """Every variant's gate score with whether its prompt was kept: the data behind the
    preservation figure. ``scored`` holds the variants with ``f1`` and ``gate_score`` (baseline
    rows are left out), ``dropped`` is :func:`apply_gate`'s second table. Columns:
    :data:`SCORE_COLUMNS` then ``kept``."""
    missing = set(SCORE_COLUMNS) - set(scored.columns)
    if missing:
        raise ValueError(f"scored variants table lacks columns {sorted(missing)}")
    out = scored.loc[scored["family"] != "baseline", SCORE_COLUMNS].reset_index(drop=True)
    out["kept"] = ~out["prompt_id"].isin(dropped["prompt_id"])
    return out


def score_variants(
    variants: pd.DataFrame, f1: Callable[[list[str], list[str]], np.ndarray], scale: str, b: float
) -> pd.DataFrame:
    """A copy of ``variants`` with each row's BERTScore ``f1`` against its prompt (``original``;
    1 for baselines, which are not scored) and its ``gate_score`` on ``scale``."""
    scored = variants.copy()
    is_base = scored["family"] == "baseline"
    values = pd.Series(1.0, index=scored.index)
    if (~is_base).any():
        values[~is_base] = f1(scored.loc[~is_base, "text"].tolist(), scored.loc[~is_base, "original"].tolist())
    scored["f1"] = values.astype(float)
    scored["gate_score"] = gate_scores(scored["f1"].to_numpy(), scale, b if scale == "rescaled" else None)
    return scored


def read_baseline(path: str, encoder_name: str, user: str, uses: str) -> pd.Series:
    """The row of the gate's baseline table at ``path`` (b, method, n_pairs, encoder), which must be
    for ``encoder_name``: b belongs to one encoder's scale. ``user`` and ``uses`` word the error
    (``"<user>: the gate's b is for encoder X, <uses> Y"``)."""
    row = read_table(path, ["b", "method", "n_pairs", "encoder"]).iloc[0]
    if row["encoder"] != encoder_name:
        raise ValueError(f"{user}: the gate's b is for encoder {row['encoder']!r}, {uses} {encoder_name!r}")
    return row
