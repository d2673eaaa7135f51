"""What one job of the trajectory study runs with, beyond its input and output paths."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class EvalOptions:
    """How a checkpoint answers the suite's test sets: each example in the suite's ``pattern``, its
    label read through the suite's ``verbalisers``; ``batch_size`` examples a batch
    (``trajectory.eval_batch_size``), weights in ``dtype`` (``trajectory.eval_dtype``)."""

    pattern: str
    verbalisers: Mapping[str, str]
    batch_size: int
    dtype: str = "auto"
