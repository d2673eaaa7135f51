"""When a fine-tuning run leaves checkpoints."""

from __future__ import annotations


def checkpoint_steps(steps: int, every: int) -> list[int]:
    """Steps at which checkpoints exist: 0 (before training), every, 2*every, ..., and the last step."""
    if every < 1 or steps < 1:
        raise ValueError(f"steps and checkpoint_every must be >= 1, got {steps} and {every}")
    out = list(range(0, steps + 1, every))
    if out[-1] != steps:
        out.append(steps)
    return out
