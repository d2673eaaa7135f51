"""When an RL stage has converged: the trained-distribution reward has stopped moving.

GRPO logs the mean reward of every step's sampled completions on the stage's (trained)
distributions. A stage has *converged* at the first step ``n >= 2 * window`` at which the mean
reward of the last ``window`` steps differs from the mean of the ``window`` steps before them by
at most ``tolerance``, and that recent mean is at least ``min_reward``. The stage's ``steps`` is
then a budget: training stops at convergence or when the budget is spent, whichever comes first,
and the job records which.

Under policy selection the trained reward rises as long as a losing policy still has weight
(each of its responses earns 0 on the trained distribution), so a flat reward means the weights
have stopped moving, which is the state the study's headline is about, rather than a step count
that happened to be long enough for one seed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Criterion:
    """Converged once two adjacent windows of ``window`` steps differ by at most ``tolerance``
    in mean reward and the recent one reaches ``min_reward``."""

    window: int
    tolerance: float
    min_reward: float = 0.0

    def __post_init__(self) -> None:
        if isinstance(self.window, bool) or not isinstance(self.window, int) or self.window < 1:
            raise ValueError(f"converge.window must be an integer >= 1, got {self.window!r}")
        if not 0 <= float(self.tolerance) <= 1:
            raise ValueError(f"converge.tolerance must be in [0, 1], got {self.tolerance!r}")
        if not 0 <= float(self.min_reward) <= 1:
            raise ValueError(f"converge.min_reward must be in [0, 1], got {self.min_reward!r}")

    def windows(self, rewards: Sequence[float]) -> tuple[float, float] | None:
        """(mean of the earlier window, mean of the recent window) at the end of ``rewards``,
        or None while there are fewer than ``2 * window`` steps."""
        if len(rewards) < 2 * self.window:
            return None
        r = np.asarray(rewards[len(rewards) - 2 * self.window :], dtype=float)
        return float(r[: self.window].mean()), float(r[self.window :].mean())

    def met(self, rewards: Sequence[float]) -> bool:
        """Whether the criterion holds at the last of ``rewards`` (one mean reward per step)."""
        pair = self.windows(rewards)
        if pair is None:
            return False
        before, recent = pair
        return abs(recent - before) <= float(self.tolerance) and recent >= float(self.min_reward)

    def first_step(self, rewards: Sequence[float]) -> int | None:
        """The first step (1-based) at which the criterion holds, or None."""
        for n in range(2 * self.window, len(rewards) + 1):
            if self.met(rewards[:n]):
                return n
        return None


def criterion(settings: Mapping[str, Any]) -> Criterion | None:
    """The criterion of the RL settings' ``converge`` entry (``window``, ``tolerance``,
    ``min_reward``), or None when the entry is absent or null (train for the full budget)."""
    spec = settings.get("converge")
    if spec is None:
        return None
    if not isinstance(spec, Mapping):
        raise ValueError(f"converge must be a mapping with window and tolerance, got {spec!r}")
    missing = [k for k in ("window", "tolerance") if k not in spec]
    if missing:
        raise ValueError(f"converge is missing {missing}")
    return Criterion(int(spec["window"]), float(spec["tolerance"]), float(spec.get("min_reward", 0.0)))
