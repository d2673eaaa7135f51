"""The rows of a stability generation table: whose baseline each row has, which shard a
prompt falls in, and the throughput record of a generation pass (shared by the local and the API
generate steps)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from shiftwork.logs import LOGGER


def throughput(step: str, n_rows: int, n_unique: int, n_tokens: int, seconds: float) -> dict[str, Any]:
    stats = {
        "rows": n_rows,
        "unique_inputs": n_unique,
        "tokens": n_tokens,
        "seconds": round(seconds, 3),
        "variant_evals_per_s": round(n_rows / seconds, 3) if seconds else None,
        "tokens_per_s": round(n_tokens / seconds, 3) if seconds else None,
    }
    LOGGER.info("%s throughput: %s", step, stats)
    return stats


def shard_rows(frame: pd.DataFrame, shard: int, n_shards: int) -> pd.DataFrame:
    """The rows of the ``shard``-th (0-based) of ``n_shards`` groups of prompts.

    Prompts are taken in order of first appearance and split into contiguous groups whose
    sizes differ by at most one; every row of a prompt (its baseline and all its variants)
    lands in the same shard, as probing a variant needs its prompt's baseline."""
    if not 0 <= shard < n_shards:
        raise ValueError(f"shard must be in 0..{n_shards - 1}, got {shard}")
    if n_shards == 1:
        return frame
    prompts = pd.unique(frame["prompt_id"])
    mine = np.array_split(prompts, n_shards)[shard]
    return frame[frame["prompt_id"].isin(mine)]


def baseline_rows(variants: pd.DataFrame, source: str) -> pd.Series:
    """The index of each prompt's baseline row, by prompt id; fails naming the prompts that have
    no baseline row or more than one."""
    base = variants[variants["family"] == "baseline"]
    dup = base["prompt_id"].duplicated()
    if dup.any():
        raise ValueError(f"{source}: more than one baseline row for prompts {sorted(set(base.loc[dup, 'prompt_id']))}")
    missing = sorted(set(variants["prompt_id"]) - set(base["prompt_id"]))
    if missing:
        raise ValueError(f"{source}: no baseline row for prompts {missing}")
    return pd.Series(base.index, index=base["prompt_id"])
