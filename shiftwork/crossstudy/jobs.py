"""What one job of the cross-study runs with, beyond its input and output paths."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ScoredCheckpoint:
    """One checkpoint the cross-study scores: ``step`` of ``run`` (a run of ``study``), saved in
    ``path`` as what it changes on the model in ``base_dir``."""

    study: str
    run: str
    step: int
    base_dir: str
    path: str
