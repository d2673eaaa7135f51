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


def job_chunks(steps: Sequence[int], per_job: int) -> list[list[int]]:
    """The sorted ``steps`` cut into ``ceil(len / per_job)`` runs of consecutive steps whose sizes
    differ by at most one (the longer ones first): the checkpoints that one scoring job loads in
    turn, so a job's start (imports, the encoder) is paid once for several checkpoints."""
    if per_job < 1:
        raise ValueError(f"checkpoints_per_job must be at least 1, got {per_job}")
    ordered = sorted(int(s) for s in steps)
    if not ordered:
        return []
    n = -(-len(ordered) // per_job)
    size, extra = divmod(len(ordered), n)
    out, at = [], 0
    for i in range(n):
        width = size + (1 if i < extra else 0)
        out.append(ordered[at : at + width])
        at += width
    return out


def chunk_name(steps: Sequence[int]) -> str:
    """A chunk's name in its tables' file names: its first and last step (``"0-12"``)."""
    if not steps:
        raise ValueError("a chunk has at least one step")
    return f"{steps[0]}-{steps[-1]}"


def chunk_steps(chunks: Sequence[Sequence[int]], name: str) -> list[int]:
    """The steps of the chunk called ``name`` among ``chunks``; an error naming the chunks there
    are when none is."""
    for steps in chunks:
        if chunk_name(steps) == name:
            return list(steps)
    raise ValueError(f"no chunk '{name}' among {[chunk_name(c) for c in chunks]}")
