"""Where a job computes: the job's GPU when there is one, else the CPU."""

from __future__ import annotations

import torch


def pick_device(prefer: str | None = None) -> torch.device:
    """``prefer`` may force "cpu" or "cuda"; by default CUDA is used when present."""
    if prefer == "cpu":
        return torch.device("cpu")
    if torch.cuda.is_available():
        return torch.device("cuda")
    if prefer == "cuda":
        raise RuntimeError("device 'cuda' was requested but torch sees no CUDA device")
    return torch.device("cpu")


def pick_dtype(name: str, device: torch.device) -> torch.dtype:
    """``auto`` is bfloat16 on a GPU that supports it and float32 on the CPU."""
    if name == "auto":
        if device.type == "cuda" and torch.cuda.is_bf16_supported():
            return torch.bfloat16
        return torch.float32
    try:
        return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[name]
    except KeyError:
        raise ValueError(f"dtype must be auto, float32, bfloat16 or float16, got {name!r}") from None


def set_threads(n: int | None) -> None:
    """Use ``n`` CPU threads for torch's kernels (a job's Snakemake ``threads``)."""
    if n and n > 0:
        torch.set_num_threads(int(n))


#: the attention kernel models are loaded with on every device: PyTorch's fused
#: scaled-dot-product attention, which takes the explicit padding masks of the greedy loop
#: (see :func:`shiftwork.inference.generation.fast_path`)
ATTENTION = "sdpa"
