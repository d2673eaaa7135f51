"""Typed settings of the stability study's config sections (:mod:`shiftwork.settings`)."""

from __future__ import annotations

from dataclasses import dataclass

from shiftwork.settings import Section


@dataclass(frozen=True)
class AxesSettings(Section, section=("stability", "axes"), exclude=("encoder", "judge", "judge_sample_size", "R")):
    """How the six axes are scored. The encoder and judge are names the rules resolve to a model
    (:class:`shiftwork.stability.jobs.AxesJob` carries what they resolve to); the judge sample and
    the axes' ranges R are read by the judge_sample and aggregate_stability rules."""

    noise_detector: str
    bleu: str
    bert_scale: str
    bert_baseline: float | str
    length_mirroring: str
    empty_baseline: str
    act_layers: str
    judge_cue_guard: bool
