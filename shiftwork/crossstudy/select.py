"""Which checkpoints of a run the cross-study scores."""

from __future__ import annotations

from collections.abc import Sequence


def every_kth(steps: Sequence[int], k: int) -> list[int]:
    """Every ``k``-th of the sorted ``steps``, starting with the first, and always the last (the
    end of the run, e.g. where RL stopped)."""
    if k < 1:
        raise ValueError(f"every must be at least 1, got {k}")
    ordered = sorted(int(s) for s in steps)
    chosen = ordered[::k]
    if ordered and chosen[-1] != ordered[-1]:
        chosen.append(ordered[-1])
    return chosen


def steps_on_disk(checkpoints_dir: str) -> list[int]:
    """The steps of the ``checkpoint-<step>`` folders a training run wrote."""
    from shiftwork.organisms.steps import checkpoint_dirs

    return [step for step, _ in checkpoint_dirs(checkpoints_dir)]
