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


def evenly_spaced(steps: Sequence[int], n: int) -> list[int]:
    """``n`` of the sorted ``steps`` at evenly spaced positions, the first and the last always
    (all of them when there are at most ``n``): position ``round(i * (len - 1) / (n - 1))``."""
    if n < 2:
        raise ValueError(f"need at least 2 checkpoints (the first and the last), got {n}")
    ordered = sorted(int(s) for s in steps)
    if len(ordered) <= n:
        return ordered
    return [ordered[round(i * (len(ordered) - 1) / (n - 1))] for i in range(n)]


def steps_on_disk(checkpoints_dir: str) -> list[int]:
    """The steps of the ``checkpoint-<step>`` folders a training run wrote."""
    from shiftwork.organisms.steps import checkpoint_dirs

    return [step for step, _ in checkpoint_dirs(checkpoints_dir)]
