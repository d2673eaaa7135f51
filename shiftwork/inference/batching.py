"""Which rows run together in the transformers passes (probes, the transformers engine).

Rows are sorted by length, longest first, and cut into batches. A model's ``batch_size`` in
the config is what a laptop CPU runs well; on a CUDA device it grows while an estimate of a
batch's working memory stays within a share of the free memory, up to ``MAX_GROWTH`` times the
configured size. Results do not depend on the batch size beyond floating-point rounding.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

MAX_GROWTH = 16
MEMORY_SHARE = 0.5


def model_dims(config: Any) -> dict[str, int]:
    """Layer count, head counts, sizes and vocabulary of a (text) model config, with the usual defaults."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    heads = int(getattr(text, "num_attention_heads", 1) or 1)
    hidden = int(getattr(text, "hidden_size", 0) or 0)
    return {
        "layers": int(getattr(text, "num_hidden_layers", 1) or 1),
        "heads": heads,
        "kv_heads": int(getattr(text, "num_key_value_heads", None) or heads),
        "head_dim": int(getattr(text, "head_dim", None) or (hidden // heads if heads else 0)),
        "hidden": hidden,
        "intermediate": int(getattr(text, "intermediate_size", None) or 4 * hidden),
        "vocab": int(getattr(text, "vocab_size", 0) or 0),
    }


def kv_token_bytes(config: Any, dtype: torch.dtype) -> int:
    """Bytes of keys and values one token position holds across all layers."""
    d = model_dims(config)
    return d["layers"] * 2 * d["kv_heads"] * d["head_dim"] * torch.empty((), dtype=dtype).element_size()


def probe_row_bytes(config: Any, dtype: torch.dtype, length: int) -> int:
    """Working memory of one probed row of ``length`` tokens: every layer's hidden states (kept
    for the activation axis), the attention and MLP activations of one layer."""
    d = model_dims(config)
    size = torch.empty((), dtype=dtype).element_size()
    states = (d["layers"] + 1) * length * d["hidden"] * size
    activations = length * (4 * d["hidden"] + 2 * d["intermediate"]) * size + d["heads"] * length * length * 4
    return states + activations


def plan_batch_size(device: torch.device, requested: int, row_bytes: int) -> int:
    """``requested`` on the CPU; on a CUDA device, grown while ``row_bytes`` per row fits in
    ``MEMORY_SHARE`` of the free memory (never below ``requested``)."""
    if requested < 1:
        raise ValueError(f"batch_size must be >= 1, got {requested}")
    if device.type != "cuda":
        return requested
    free, _ = torch.cuda.mem_get_info(device)
    fits = int(free * MEMORY_SHARE) // max(int(row_bytes), 1)
    return max(requested, min(requested * MAX_GROWTH, fits))


def longest_first(lengths: Sequence[int]) -> np.ndarray:
    """Indices by length, longest first; equal lengths keep their order."""
    return np.argsort(-np.asarray(lengths), kind="stable")


def length_sorted_batches(lengths: Sequence[int], batch_size: int) -> list[np.ndarray]:
    """Indices grouped into batches of similar length, longest first (so memory peaks early)."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    order = longest_first(lengths)
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
