"""What one job of the cross-study runs with, beyond its input and output paths."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ScoredCheckpoint:
    """One checkpoint the cross-study scores: ``step`` of ``run`` (a run of ``study``), saved in
    ``path`` as what it changes on the model in ``base_dir``."""

    study: str
    run: str
    step: int
    base_dir: str
    path: str

    @classmethod
    def of_job(cls, study: str, run: str, step: str | int, base: str, checkpoints: str) -> ScoredCheckpoint:
        """The checkpoint of a scoring job: its ``base`` input (the prepared model's record file,
        or a model folder) and its run's ``checkpoints`` folder."""
        base_path = Path(base)
        return cls(
            study=study,
            run=run,
            step=int(step),
            base_dir=str(base_path.parent if base_path.is_file() else base_path),
            path=f"{checkpoints}/checkpoint-{int(step)}",
        )
