"""Where a job computes: the job's GPU when there is one, else the CPU."""

from __future__ import annotations

import torch

from shiftwork.vector_math import warm_up


def pick_device(prefer: str | None = None) -> torch.device:
    """``prefer`` may force "cpu" or "cuda"; by default CUDA is used when present. The first
    call also makes the first call of each vector math function
    (:func:`shiftwork.vector_math.warm_up`), before the job loads a model."""
    warm_up()
    if prefer == "cpu":
        return torch.device("cpu")
    if torch.cuda.is_available():
        return torch.device("cuda")
    if prefer == "cuda":
        raise RuntimeError("device 'cuda' was requested but torch sees no CUDA device")
    return torch.device("cpu")


def pick_dtype(name: str, device: torch.device) -> torch.dtype:
    """``auto`` is bfloat16 where ``device`` computes it natively, else float32; the choice is
    logged and recorded in the job's provenance (:mod:`shiftwork.precision`)."""
    from shiftwork.precision import choose

    return choose(name, device)


def set_threads(n: int | None) -> None:
    """Use ``n`` CPU threads for torch's kernels (a job's Snakemake ``threads``)."""
    if n and n > 0:
        torch.set_num_threads(int(n))


#: the attention kernel models are loaded with on every device: PyTorch's fused
#: scaled-dot-product attention, which takes the explicit padding masks of the greedy loop
#: (see :func:`shiftwork.inference.generation.fast_path`)
ATTENTION = "sdpa"
