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


def attention_implementation(device: torch.device, dtype: torch.dtype) -> str | None:
    """The fastest attention kernel transformers offers for a model on ``device`` in ``dtype``:
    ``flash_attention_2`` on a CUDA device with half-precision weights when the ``flash_attn``
    package is installed, else ``sdpa`` on a CUDA device, else ``None`` (transformers' default)."""
    if device.type != "cuda":
        return None
    if dtype in (torch.float16, torch.bfloat16):
        import importlib.util

        if importlib.util.find_spec("flash_attn") is not None:
            return "flash_attention_2"
    return "sdpa"
