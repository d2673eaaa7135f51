"""The organisms study's typed settings: one frozen object per config section (:mod:`shiftwork.settings`).

``organisms.rl`` has none: RL reads it as a mapping (merged with a run's ``train`` overrides), which
its resume record fingerprints as it is (:func:`shiftwork.models.resume.job_settings`).
"""

from __future__ import annotations

from dataclasses import dataclass

from shiftwork.settings import Section


@dataclass(frozen=True)
class EvaluationSettings(Section, section=("organisms", "evaluation")):
    """How every checkpoint answers the held-out prompts: ``samples`` sampled responses a prompt at
    ``temperature``, at most ``max_new_tokens`` each, ``batch_size`` sequences a batch, generator
    seed ``seed``, weights in ``dtype``."""

    samples: int
    max_new_tokens: int
    batch_size: int
    temperature: float
    seed: int
    dtype: str
