"""Typed settings of the stability study's config sections (:mod:`shiftwork.settings`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shiftwork.settings import Section


@dataclass(frozen=True)
class AxesSettings(
    Section,
    section=("stability", "axes"),
    exclude=("encoder", "judge", "judge_sample_size", "judge_controls", "R"),
):
    """How the six axes are scored. The encoder and judge are names the rules resolve to a model
    (:class:`shiftwork.stability.jobs.AxesJob` carries what they resolve to); the judge sample,
    the judge's controls and the axes' ranges R are read by the judge_sample, check_judge and
    aggregate_stability rules."""

    noise_detector: str
    bleu: str
    bert_scale: str
    bert_baseline: float | str
    length_mirroring: str
    empty_baseline: str
    act_layers: str
    judge_cue_guard: bool


@dataclass(frozen=True)
class JudgeControlSettings(Section, section=("stability", "axes", "judge_controls")):
    """The controls the mirroring judge must pass (:mod:`shiftwork.stability.judge_controls`):
    how many pairs to draw, and each control's least agreement rate (:attr:`limits`)."""

    pairs: int
    thresholds: dict[str, Any]

    @property
    def limits(self) -> dict[str, float]:
        """Each control's threshold, the schema's default where ``thresholds`` leaves one out."""
        return JudgeThresholds.from_config(self.thresholds).as_dict()


@dataclass(frozen=True)
class JudgeThresholds(Section, section=("stability", "axes", "judge_controls", "thresholds")):
    """The least agreement rate of each of the judge's controls."""

    identical: float
    swapped: float
    opposite: float
    planted: float
